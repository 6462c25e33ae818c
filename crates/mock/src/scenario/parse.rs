//! Reading the scenario JSON by hand, so every error can name the step and the field.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use super::{
    default_error_message, default_error_type, Call, Match, OnExhausted, Scenario, ScenarioError,
    StallPhase, Step, StepKind, UsageOverride, DEFAULT_DROP_AFTER_EVENTS,
    DEFAULT_SSE_ERROR_AFTER_EVENTS,
};

type Result<T> = std::result::Result<T, ScenarioError>;

const KINDS: &str = "text, tool_use, error, sse_error, drop, stall";
const TOP_FIELDS: &[&str] = &["model", "on_exhausted", "steps"];
const STEP_FIELDS: &[&str] = &["kind", "times", "usage", "stop_reason", "delay_ms", "match"];
const NESTED_FIELDS: &[&str] = &["kind", "usage", "stop_reason"];
const USAGE_FIELDS: &[&str] = &[
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
];
const MATCH_FIELDS: &[&str] = &[
    "system_contains",
    "last_user_contains",
    "first_user_contains",
    "has_tool",
];
const CALL_FIELDS: &[&str] = &["name", "input", "id"];

/// Where a step sits: its index in `steps`, and for a nested reply the field that holds it.
#[derive(Clone)]
struct Place {
    step: Option<usize>,
    kind: Option<String>,
    prefix: String,
}

impl Place {
    fn top() -> Place {
        Place {
            step: None,
            kind: None,
            prefix: String::new(),
        }
    }

    fn err(&self, field: &str, problem: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            path: None,
            step: self.step,
            kind: self.kind.clone(),
            field: format!("{}{}", self.prefix, field),
            problem: problem.into(),
        }
    }

    fn nested(&self, field: &str) -> Place {
        Place {
            step: self.step,
            kind: self.kind.clone(),
            prefix: format!("{}{}.", self.prefix, field),
        }
    }
}

/// A JSON object being read, with the place to blame in errors.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    at: Place,
}

impl<'a> Fields<'a> {
    fn new(value: &'a Value, at: Place, whole: &str) -> Result<Fields<'a>> {
        match value.as_object() {
            Some(map) => Ok(Fields { map, at }),
            None => Err(at.err(
                whole,
                format!("must be a JSON object, found {}", type_name(value)),
            )),
        }
    }

    fn only(&self, allowed: &[&str]) -> Result<()> {
        for key in self.map.keys() {
            if !allowed.contains(&key.as_str()) {
                return Err(self.at.err(
                    key,
                    format!("is not known here (allowed: {})", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        self.map.get(field).filter(|v| !v.is_null())
    }

    fn opt_str(&self, field: &str) -> Result<Option<String>> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.at.err(
                field,
                format!("must be a string, found {}", type_name(other)),
            )),
        }
    }

    fn opt_nonempty(&self, field: &str) -> Result<Option<String>> {
        match self.opt_str(field)? {
            Some(s) if s.trim().is_empty() => Err(self
                .at
                .err(field, "must not be empty (the real API rejects blank text)")),
            other => Ok(other),
        }
    }

    fn req_nonempty(&self, field: &str) -> Result<String> {
        self.opt_nonempty(field)?
            .ok_or_else(|| self.at.err(field, "is required"))
    }

    fn opt_u64(&self, field: &str) -> Result<Option<u64>> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                self.at
                    .err(field, format!("must be a non-negative integer, found {v}"))
            }),
        }
    }

    fn opt_usize(&self, field: &str) -> Result<Option<usize>> {
        match self.opt_u64(field)? {
            None => Ok(None),
            Some(n) => usize::try_from(n)
                .map(Some)
                .map_err(|_| self.at.err(field, "is too large")),
        }
    }
}

pub(super) fn scenario(value: &Value) -> Result<Scenario> {
    let top = Place::top();
    if !value.is_object() {
        return Err(top.err(
            "",
            format!(
                "the scenario must be a JSON object, found {}",
                type_name(value)
            ),
        ));
    }
    let f = Fields::new(value, top.clone(), "")?;
    f.only(TOP_FIELDS)?;
    let model = f.opt_nonempty("model")?;
    let on_exhausted = match f.opt_str("on_exhausted")?.as_deref() {
        None | Some("error") => OnExhausted::Error,
        Some("repeat_last") => OnExhausted::RepeatLast,
        Some("loop") => OnExhausted::Loop,
        Some(other) => {
            return Err(top.err(
                "on_exhausted",
                format!("must be one of \"error\", \"repeat_last\", \"loop\" (found \"{other}\")"),
            ))
        }
    };
    let steps_value = f
        .get("steps")
        .ok_or_else(|| top.err("steps", "is required"))?;
    let list = steps_value.as_array().ok_or_else(|| {
        top.err(
            "steps",
            format!("must be an array, found {}", type_name(steps_value)),
        )
    })?;
    if list.is_empty() {
        return Err(top.err("steps", "must contain at least one step"));
    }
    let steps = list
        .iter()
        .enumerate()
        .map(|(i, v)| top_step(v, i))
        .collect::<Result<Vec<_>>>()?;
    Ok(Scenario {
        model,
        on_exhausted,
        steps,
    })
}

fn top_step(value: &Value, index: usize) -> Result<Step> {
    let at = Place {
        step: Some(index),
        kind: None,
        prefix: String::new(),
    };
    let obj = value.as_object().ok_or_else(|| ScenarioError::Invalid {
        path: None,
        step: Some(index),
        kind: None,
        field: String::new(),
        problem: format!("a step must be a JSON object, found {}", type_name(value)),
    })?;
    let kind = kind_of(obj, &at)?;
    let at = Place {
        kind: Some(kind.to_string()),
        ..at
    };
    let f = Fields { map: obj, at };
    step_body(&f, kind, STEP_FIELDS)
}

fn kind_of(obj: &Map<String, Value>, at: &Place) -> Result<&'static str> {
    let kind = match obj.get("kind") {
        None | Some(Value::Null) => {
            return Err(at.err("kind", format!("is required (one of {KINDS})")))
        }
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(at.err(
                "kind",
                format!("must be a string, found {}", type_name(other)),
            ))
        }
    };
    match kind {
        "text" => Ok("text"),
        "tool_use" => Ok("tool_use"),
        "error" => Ok("error"),
        "sse_error" => Ok("sse_error"),
        "drop" => Ok("drop"),
        "stall" => Ok("stall"),
        other => Err(at.err(
            "kind",
            format!("must be one of {KINDS} (found \"{other}\")"),
        )),
    }
}

/// Read a nested reply (`reply` or `then`) whose kind must be one of `kinds`.
fn nested_step(parent: &Fields<'_>, field: &str, kinds: &[&str]) -> Result<Option<Box<Step>>> {
    let Some(value) = parent.get(field) else {
        return Ok(None);
    };
    let at = parent.at.nested(field);
    let f = Fields::new(value, parent.at.clone(), field)?;
    let kind = kind_of(f.map, &at)?;
    if !kinds.contains(&kind) {
        return Err(at.err(
            "kind",
            format!(
                "must be one of {} here (found \"{kind}\")",
                kinds.join(", ")
            ),
        ));
    }
    let f = Fields { map: f.map, at };
    Ok(Some(Box::new(step_body(&f, kind, NESTED_FIELDS)?)))
}

fn step_body(f: &Fields<'_>, kind: &str, common: &[&str]) -> Result<Step> {
    let own: &[&str] = match kind {
        "text" => &["text", "thinking"],
        "tool_use" => &["text", "calls"],
        "error" => &["status", "error_type", "message", "headers"],
        "sse_error" => &["error_type", "message", "after_events", "reply"],
        "drop" => &["after_events", "reply"],
        _ => &["phase", "ms", "then", "after_events"],
    };
    let allowed: Vec<&str> = common.iter().chain(own).copied().collect();
    f.only(&allowed)?;

    let step_kind = match kind {
        "text" => StepKind::Text {
            text: f.req_nonempty("text")?,
            thinking: f.opt_nonempty("thinking")?,
        },
        "tool_use" => StepKind::ToolUse {
            text: f.opt_nonempty("text")?,
            calls: calls(f)?,
        },
        "error" => error_kind(f)?,
        "sse_error" => {
            let error_type = f
                .opt_nonempty("error_type")?
                .unwrap_or_else(|| "overloaded_error".to_string());
            let message = f
                .opt_str("message")?
                .unwrap_or_else(|| default_error_message(&error_type));
            StepKind::SseError {
                message,
                error_type,
                after_events: f
                    .opt_usize("after_events")?
                    .unwrap_or(DEFAULT_SSE_ERROR_AFTER_EVENTS),
                reply: nested_step(f, "reply", &["text", "tool_use"])?,
            }
        }
        "drop" => StepKind::Drop {
            after_events: f
                .opt_usize("after_events")?
                .unwrap_or(DEFAULT_DROP_AFTER_EVENTS),
            reply: nested_step(f, "reply", &["text", "tool_use"])?,
        },
        _ => stall_kind(f)?,
    };

    let times = match f.opt_usize("times")? {
        None => 1,
        Some(0) => return Err(f.at.err("times", "must be at least 1")),
        Some(n) => n,
    };
    let stop_reason = f.opt_nonempty("stop_reason")?;
    Ok(Step {
        kind: step_kind,
        times,
        usage: usage(f)?,
        stop_reason,
        delay_ms: f.opt_u64("delay_ms")?.unwrap_or(0),
        when: when(f)?,
    })
}

fn calls(f: &Fields<'_>) -> Result<Vec<Call>> {
    let value = f
        .get("calls")
        .ok_or_else(|| f.at.err("calls", "is required"))?;
    let list = value.as_array().ok_or_else(|| {
        f.at.err(
            "calls",
            format!("must be an array of calls, found {}", type_name(value)),
        )
    })?;
    if list.is_empty() {
        return Err(f.at.err("calls", "must contain at least one call"));
    }
    let mut ids = HashSet::new();
    let mut out = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let name = format!("calls.{i}");
        let c = Fields::new(v, f.at.clone(), &name)?;
        let c = Fields {
            map: c.map,
            at: f.at.nested(&name),
        };
        c.only(CALL_FIELDS)?;
        let tool = c.req_nonempty("name")?;
        let input = match c.get("input") {
            None => Value::Object(Map::new()),
            Some(obj @ Value::Object(_)) => obj.clone(),
            Some(other) => {
                return Err(c.at.err(
                    "input",
                    format!("must be a JSON object, found {}", type_name(other)),
                ))
            }
        };
        let id = c.opt_nonempty("id")?;
        if let Some(id) = &id {
            if !ids.insert(id.clone()) {
                return Err(c
                    .at
                    .err("id", format!("repeats the id \"{id}\" of an earlier call")));
            }
        }
        out.push(Call {
            name: tool,
            input,
            id,
        });
    }
    Ok(out)
}

fn error_kind(f: &Fields<'_>) -> Result<StepKind> {
    let status_value = f
        .get("status")
        .ok_or_else(|| f.at.err("status", "is required"))?;
    let status = status_value
        .as_u64()
        .filter(|s| (400..=599).contains(s))
        .ok_or_else(|| {
            f.at.err(
                "status",
                format!("must be an HTTP status code between 400 and 599, found {status_value}"),
            )
        })? as u16;
    let error_type = f
        .opt_nonempty("error_type")?
        .unwrap_or_else(|| default_error_type(status).to_string());
    let message = f
        .opt_str("message")?
        .unwrap_or_else(|| default_error_message(&error_type));
    let mut headers = BTreeMap::new();
    if let Some(value) = f.get("headers") {
        let map = value.as_object().ok_or_else(|| {
            f.at.err(
                "headers",
                format!(
                    "must be an object of header names to strings, found {}",
                    type_name(value)
                ),
            )
        })?;
        for (name, v) in map {
            let field = format!("headers.{name}");
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => {
                    return Err(f.at.err(
                        &field,
                        format!("must be a string, found {}", type_name(other)),
                    ))
                }
            };
            if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(f.at.err(&field, "is not a valid HTTP header name"));
            }
            if hyper::header::HeaderValue::from_str(&text).is_err() {
                return Err(f.at.err(&field, "is not a valid HTTP header value"));
            }
            headers.insert(name.to_ascii_lowercase(), text);
        }
    }
    Ok(StepKind::Error {
        status,
        error_type,
        message,
        headers,
    })
}

fn stall_kind(f: &Fields<'_>) -> Result<StepKind> {
    let phase = match f.opt_str("phase")?.as_deref() {
        Some("before_headers") => StallPhase::BeforeHeaders,
        Some("after_message_start") => StallPhase::AfterMessageStart,
        None => {
            return Err(f.at.err(
                "phase",
                "is required (\"before_headers\" or \"after_message_start\")",
            ))
        }
        Some(other) => {
            return Err(f.at.err(
                "phase",
                format!(
                    "must be \"before_headers\" or \"after_message_start\" (found \"{other}\")"
                ),
            ))
        }
    };
    let ms = f
        .opt_u64("ms")?
        .ok_or_else(|| f.at.err("ms", "is required"))?;
    let kinds: &[&str] = match phase {
        StallPhase::BeforeHeaders => &["text", "tool_use", "error"],
        StallPhase::AfterMessageStart => &["text", "tool_use"],
    };
    let after_events = match f.opt_u64("after_events")? {
        None => crate::scenario::DEFAULT_STALL_AFTER_EVENTS,
        Some(_) if phase == StallPhase::BeforeHeaders => {
            return Err(f.at.err(
                "after_events",
                "only applies to phase \"after_message_start\"",
            ))
        }
        Some(0) => {
            return Err(f.at.err(
                "after_events",
                "must be at least 1 (message_start comes first)",
            ))
        }
        Some(n) => n as usize,
    };
    Ok(StepKind::Stall {
        phase,
        ms,
        then: nested_step(f, "then", kinds)?,
        after_events,
    })
}

fn usage(f: &Fields<'_>) -> Result<Option<UsageOverride>> {
    let Some(value) = f.get("usage") else {
        return Ok(None);
    };
    let u = Fields::new(value, f.at.clone(), "usage")?;
    let u = Fields {
        map: u.map,
        at: f.at.nested("usage"),
    };
    u.only(USAGE_FIELDS)?;
    Ok(Some(UsageOverride {
        input_tokens: u.opt_u64("input_tokens")?,
        output_tokens: u.opt_u64("output_tokens")?,
        cache_read_input_tokens: u.opt_u64("cache_read_input_tokens")?,
        cache_creation_input_tokens: u.opt_u64("cache_creation_input_tokens")?,
    }))
}

fn when(f: &Fields<'_>) -> Result<Option<Match>> {
    let Some(value) = f.get("match") else {
        return Ok(None);
    };
    let m = Fields::new(value, f.at.clone(), "match")?;
    let m = Fields {
        map: m.map,
        at: f.at.nested("match"),
    };
    m.only(MATCH_FIELDS)?;
    Ok(Some(Match {
        system_contains: m.opt_str("system_contains")?,
        last_user_contains: m.opt_str("last_user_contains")?,
        first_user_contains: m.opt_str("first_user_contains")?,
        has_tool: m.opt_str("has_tool")?,
    }))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::super::Scenario;
    use pretty_assertions::assert_eq;

    fn err(text: &str) -> String {
        Scenario::from_json(text).unwrap_err().to_string()
    }

    #[test]
    fn names_step_and_field() {
        let cases = [
            (
                r#"{"steps":[{"kind":"text","text":"a"},{"kind":"text","text":"b"},{"kind":"text","text":"c"},{"kind":"error","status":200}]}"#,
                "step 3 (error): field `status` must be an HTTP status code between 400 and 599, found 200",
            ),
            (
                r#"{"steps":[{"kind":"text","txt":"a"}]}"#,
                "step 0 (text): field `txt` is not known here (allowed: kind, times, usage, stop_reason, delay_ms, match, text, thinking)",
            ),
            (
                r#"{"steps":[{"kind":"tool_use"}]}"#,
                "step 0 (tool_use): field `calls` is required",
            ),
            (
                r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":[1]}]}]}"#,
                "step 0 (tool_use): field `calls.0.input` must be a JSON object, found an array",
            ),
            (
                r#"{"steps":[{"kind":"stall","phase":"later","ms":1}]}"#,
                "step 0 (stall): field `phase` must be \"before_headers\" or \"after_message_start\" (found \"later\")",
            ),
            (
                r#"{"steps":[{"kind":"stall","phase":"after_message_start","ms":1,"then":{"kind":"error","status":500}}]}"#,
                "step 0 (stall): field `then.kind` must be one of text, tool_use here (found \"error\")",
            ),
            (
                r#"{"steps":[{"kind":"drop","reply":{"kind":"text"}}]}"#,
                "step 0 (drop): field `reply.text` is required",
            ),
            (
                r#"{"steps":[{"kind":"text","text":"a","times":0}]}"#,
                "step 0 (text): field `times` must be at least 1",
            ),
            (
                r#"{"steps":[{"kind":"txt"}]}"#,
                "step 0: field `kind` must be one of text, tool_use, error, sse_error, drop, stall (found \"txt\")",
            ),
            (
                r#"{"steps":[{"kind":"text","text":"a","match":{"has_tools":"Bash"}}]}"#,
                "step 0 (text): field `match.has_tools` is not known here (allowed: system_contains, last_user_contains, first_user_contains, has_tool)",
            ),
            (
                r#"{"steps":[], "on_exhausted":"error"}"#,
                "field `steps` must contain at least one step",
            ),
            (
                r#"{"steps":[{"kind":"text","text":"a"}], "on_exhaust":"loop"}"#,
                "field `on_exhaust` is not known here (allowed: model, on_exhausted, steps)",
            ),
            (
                r#"{"steps":[{"kind":"text","text":"a"}, 7]}"#,
                "step 1: a step must be a JSON object, found a number",
            ),
            (r#"[1]"#, "the scenario must be a JSON object, found an array"),
            (
                r#"{"steps":[{"kind":"text","text":"  "}]}"#,
                "step 0 (text): field `text` must not be empty (the real API rejects blank text)",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "for {text}");
        }
    }

    #[test]
    fn syntax_error_is_reported() {
        assert!(err("{").starts_with("the scenario is not valid JSON:"));
    }
}
