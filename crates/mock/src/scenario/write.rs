//! Writing a scenario back into its file format, through the serde types of `file`.

use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::file::{
    Body, DropFields, ErrorFields, RawEventFile, RawFields, ScenarioFile, SseErrorFields,
    StallFields, StepCommon, StepFile, TextFields, ToolUseFields,
};
use super::{RawData, RawEnd, Scenario, StallPhase, Step, StepKind, DEFAULT_STALL_AFTER_EVENTS};

pub(super) fn scenario(s: &Scenario) -> Value {
    to_value(&ScenarioFile {
        model: s.model.clone(),
        on_exhausted: Some(s.on_exhausted),
        steps: s.steps.iter().map(step).collect(),
    })
}

fn step(s: &Step) -> Value {
    let nested = |r: &Option<Box<Step>>| r.as_deref().map(step);
    let body = match &s.kind {
        StepKind::Text { text, thinking } => Body::Text(TextFields {
            text: text.clone(),
            thinking: thinking.clone(),
        }),
        StepKind::ToolUse {
            thinking,
            text,
            calls,
        } => Body::ToolUse(ToolUseFields {
            thinking: thinking.clone(),
            text: text.clone(),
            calls: calls.clone(),
        }),
        StepKind::Error {
            status,
            error_type,
            message,
            headers,
        } => Body::Error(ErrorFields {
            status: Number::from(*status),
            error_type: Some(error_type.clone()),
            message: Some(message.clone()),
            headers: header_map(headers),
        }),
        StepKind::SseError {
            error_type,
            message,
            after_events,
            reply,
        } => Body::SseError(SseErrorFields {
            error_type: Some(error_type.clone()),
            message: Some(message.clone()),
            after_events: Some(*after_events as u64),
            reply: nested(reply),
        }),
        StepKind::Drop {
            after_events,
            reply,
        } => Body::Drop(DropFields {
            after_events: Some(*after_events as u64),
            reply: nested(reply),
        }),
        StepKind::Stall {
            phase,
            ms,
            then,
            after_events,
        } => Body::Stall(StallFields {
            phase: Some(*phase),
            ms: *ms,
            then: nested(then),
            // A before_headers stall takes no after_events: write it only when it says something,
            // so that a value set on one is still reported by `validate`.
            after_events: (*phase == StallPhase::AfterMessageStart
                || *after_events != DEFAULT_STALL_AFTER_EVENTS)
                .then_some(*after_events as u64),
        }),
        StepKind::Raw {
            status,
            headers,
            events,
            end,
        } => Body::Raw(RawFields {
            status: Some(Number::from(*status)),
            headers: header_map(headers),
            events: events
                .iter()
                .map(|e| {
                    let (data, data_text) = match &e.data {
                        RawData::Json(v) => (Some(v.clone()), None),
                        RawData::Text(t) => (None, Some(t.clone())),
                    };
                    RawEventFile {
                        event: e.event.clone(),
                        data,
                        data_text,
                    }
                })
                .collect(),
            end: (*end != RawEnd::Close).then_some(*end),
        }),
    };
    // A nested reply has no times/delay/match of its own; they are still written when set,
    // so that `validate` reports them instead of silently dropping them.
    let common = StepCommon {
        times: (s.times != 1).then_some(s.times as u64),
        usage: s.usage.clone(),
        stop_reason: s.stop_reason.clone(),
        delay_ms: (s.delay_ms != 0).then_some(s.delay_ms),
        when: s.when.clone(),
    };
    to_value(&StepFile { body, common })
}

fn header_map(headers: &std::collections::BTreeMap<String, String>) -> Option<Map<String, Value>> {
    (!headers.is_empty()).then(|| {
        headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect()
    })
}

/// These types hold only strings, integers, maps and JSON values, which always serialize.
fn to_value(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn every_kind() -> Scenario {
        Scenario::new(vec![
            Step::text_with_thinking("hmm", "hi")
                .times(2)
                .stop_reason("max_tokens"),
            Step::tool_use_with_text(
                "running",
                vec![Call::new("Bash", json!({"command": "ls", "n": u64::MAX})).id("toolu_x")],
            )
            .when(Match::new().has_tool("Bash").system_contains("sub"))
            .usage(UsageOverride {
                input_tokens: Some(5),
                ..Default::default()
            }),
            Step::error(529).header("Retry-After", "1e30").delay_ms(3),
            Step::sse_error("api_error", "boom").after_events(3),
            Step::drop_reply(2, Step::text("partial").stop_reason("max_tokens")),
            Step::stall_before_headers(10, Some(Step::error(500))),
            Step::stall_after_message_start(10, None),
            Step::raw(vec![
                RawEvent::json("content_block_start", json!({"index": u64::MAX, "x": null})),
                RawEvent::text("oops", r#"{"index":1e10"#),
            ])
            .raw_status(201)
            .raw_end(RawEnd::Hang)
            .header("x-odd", "spaced  out")
            .times(3),
        ])
        .model("m")
        .on_exhausted(OnExhausted::Loop)
    }

    #[test]
    fn round_trips_every_kind() {
        let s = every_kind();
        let text = serde_json::to_string(&s.to_value()).unwrap();
        assert_eq!(Scenario::from_json(&text).unwrap(), s);
        s.validate().unwrap();
    }

    #[test]
    fn writes_the_documented_shape() {
        let v = Scenario::new(vec![Step::raw(vec![RawEvent::json("ping", json!(1))])]).to_value();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"on_exhausted":"error","steps":[{"kind":"raw","status":200,"events":[{"event":"ping","data":1}]}]}"#
        );
    }

    #[test]
    fn validate_catches_builder_mistakes() {
        let s = Scenario::new(vec![Step::text("ok"), Step::error(200)]);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.starts_with("step 1 (error): field `status`"), "{e}");
        let nested = Scenario::new(vec![Step::drop_reply(1, Step::text("x").times(2))]);
        let e = nested.validate().unwrap_err().to_string();
        assert!(e.contains("field `reply.times` is not known here"), "{e}");
        let huge = Scenario::new(vec![Step::text("x").times(usize::MAX)]);
        let e = huge.validate().unwrap_err().to_string();
        assert!(e.contains("field `times` must be at most 1000000"), "{e}");
    }
}
