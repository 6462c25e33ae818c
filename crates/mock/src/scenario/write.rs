//! Writing a scenario back into its JSON file format.

use serde_json::{json, Map, Value};

use super::{Call, Match, OnExhausted, Scenario, StallPhase, Step, StepKind, UsageOverride};

pub(super) fn scenario(s: &Scenario) -> Value {
    let mut out = Map::new();
    if let Some(model) = &s.model {
        out.insert("model".into(), json!(model));
    }
    let mode = match s.on_exhausted {
        OnExhausted::Error => "error",
        OnExhausted::RepeatLast => "repeat_last",
        OnExhausted::Loop => "loop",
    };
    out.insert("on_exhausted".into(), json!(mode));
    out.insert(
        "steps".into(),
        Value::Array(s.steps.iter().map(step).collect()),
    );
    Value::Object(out)
}

fn step(s: &Step) -> Value {
    let mut o = Map::new();
    o.insert("kind".into(), json!(s.kind_name()));
    match &s.kind {
        StepKind::Text { text, thinking } => {
            o.insert("text".into(), json!(text));
            if let Some(t) = thinking {
                o.insert("thinking".into(), json!(t));
            }
        }
        StepKind::ToolUse { text, calls } => {
            if let Some(t) = text {
                o.insert("text".into(), json!(t));
            }
            o.insert(
                "calls".into(),
                Value::Array(calls.iter().map(call).collect()),
            );
        }
        StepKind::Error {
            status,
            error_type,
            message,
            headers,
        } => {
            o.insert("status".into(), json!(status));
            o.insert("error_type".into(), json!(error_type));
            o.insert("message".into(), json!(message));
            if !headers.is_empty() {
                o.insert("headers".into(), json!(headers));
            }
        }
        StepKind::SseError {
            error_type,
            message,
            after_events,
            reply,
        } => {
            o.insert("error_type".into(), json!(error_type));
            o.insert("message".into(), json!(message));
            o.insert("after_events".into(), json!(after_events));
            if let Some(r) = reply {
                o.insert("reply".into(), step(r));
            }
        }
        StepKind::Drop {
            after_events,
            reply,
        } => {
            o.insert("after_events".into(), json!(after_events));
            if let Some(r) = reply {
                o.insert("reply".into(), step(r));
            }
        }
        StepKind::Stall {
            phase,
            ms,
            then,
            after_events,
        } => {
            if *after_events != crate::scenario::DEFAULT_STALL_AFTER_EVENTS {
                o.insert("after_events".into(), json!(after_events));
            }
            let phase = match phase {
                StallPhase::BeforeHeaders => "before_headers",
                StallPhase::AfterMessageStart => "after_message_start",
            };
            o.insert("phase".into(), json!(phase));
            o.insert("ms".into(), json!(ms));
            if let Some(t) = then {
                o.insert("then".into(), step(t));
            }
        }
    }
    if let Some(u) = &s.usage {
        o.insert("usage".into(), usage(u));
    }
    if let Some(r) = &s.stop_reason {
        o.insert("stop_reason".into(), json!(r));
    }
    // A nested reply has no times/delay/match of its own; they are still written when set,
    // so that `validate` reports them instead of silently dropping them.
    if s.times != 1 {
        o.insert("times".into(), json!(s.times));
    }
    if s.delay_ms != 0 {
        o.insert("delay_ms".into(), json!(s.delay_ms));
    }
    if let Some(m) = &s.when {
        o.insert("match".into(), when(m));
    }
    Value::Object(o)
}

fn call(c: &Call) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), json!(c.name));
    o.insert("input".into(), c.input.clone());
    if let Some(id) = &c.id {
        o.insert("id".into(), json!(id));
    }
    Value::Object(o)
}

fn usage(u: &UsageOverride) -> Value {
    let mut o = Map::new();
    let fields = [
        ("input_tokens", u.input_tokens),
        ("output_tokens", u.output_tokens),
        ("cache_read_input_tokens", u.cache_read_input_tokens),
        ("cache_creation_input_tokens", u.cache_creation_input_tokens),
    ];
    for (name, v) in fields {
        if let Some(v) = v {
            o.insert(name.into(), json!(v));
        }
    }
    Value::Object(o)
}

fn when(m: &Match) -> Value {
    let mut o = Map::new();
    let fields = [
        ("system_contains", &m.system_contains),
        ("last_user_contains", &m.last_user_contains),
        ("first_user_contains", &m.first_user_contains),
        ("has_tool", &m.has_tool),
    ];
    for (name, v) in fields {
        if let Some(v) = v {
            o.insert(name.into(), json!(v));
        }
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn round_trips_every_kind() {
        let s = Scenario::new(vec![
            Step::text_with_thinking("hmm", "hi")
                .times(2)
                .stop_reason("max_tokens"),
            Step::tool_use_with_text(
                "running",
                vec![Call::new("Bash", json!({"command": "ls"})).id("toolu_x")],
            )
            .when(Match::new().has_tool("Bash").system_contains("sub"))
            .usage(UsageOverride {
                input_tokens: Some(5),
                ..Default::default()
            }),
            Step::error(529).header("Retry-After", "2").delay_ms(3),
            Step::sse_error("api_error", "boom").after_events(3),
            Step::drop_reply(2, Step::text("partial")),
            Step::stall_before_headers(10, Some(Step::error(500))),
            Step::stall_after_message_start(10, None),
        ])
        .model("m")
        .on_exhausted(OnExhausted::Loop);
        let text = serde_json::to_string(&s.to_value()).unwrap();
        assert_eq!(Scenario::from_json(&text).unwrap(), s);
        s.validate().unwrap();
    }

    #[test]
    fn validate_catches_builder_mistakes() {
        let s = Scenario::new(vec![Step::text("ok"), Step::error(200)]);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.starts_with("step 1 (error): field `status`"), "{e}");
        let nested = Scenario::new(vec![Step::drop_reply(1, Step::text("x").times(2))]);
        let e = nested.validate().unwrap_err().to_string();
        assert!(e.contains("field `reply.times` is not known here"), "{e}");
    }
}
