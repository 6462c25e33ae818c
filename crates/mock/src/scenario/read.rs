//! Reading a scenario: JSON into the serde types of `file`, then the checks serde cannot
//! express, into a [`Scenario`]. Every error names the step, its kind and the field.

use std::collections::{BTreeMap, HashSet};

use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};
use serde_path_to_error::Segment;

use super::de::{one_of, type_name, De, Problem};
use super::file::{
    DropFields, ErrorFields, Kind, RawEventFile, RawFields, ScenarioFile, SseErrorFields,
    StallFields, StepCommon, TextFields, ToolUseFields, REPLY_COMMON, STEP_COMMON,
};
use super::{
    default_error_message, default_error_type, Call, OnExhausted, RawData, RawEnd, RawEvent,
    Scenario, ScenarioError, StallPhase, Step, StepKind, DEFAULT_DROP_AFTER_EVENTS,
    DEFAULT_SSE_ERROR_AFTER_EVENTS, DEFAULT_STALL_AFTER_EVENTS, MAX_AFTER_EVENTS, MAX_MS,
    MAX_TIMES,
};

type Result<T> = std::result::Result<T, ScenarioError>;

/// Where a value sits: its step, the step's kind once known, and for a nested reply the
/// field that holds it (`then.`).
#[derive(Clone)]
struct Place {
    step: Option<usize>,
    kind: Option<&'static str>,
    prefix: String,
}

impl Place {
    fn err(&self, field: &str, problem: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            path: None,
            step: self.step,
            kind: self.kind.map(str::to_string),
            field: format!("{}{field}", self.prefix),
            problem: problem.into(),
        }
    }

    /// An error about the value the prefix names (`then`) rather than a field inside it.
    fn err_here(&self, problem: impl Into<String>) -> ScenarioError {
        let mut e = self.err("", problem);
        if let ScenarioError::Invalid { field, .. } = &mut e {
            field.truncate(field.trim_end_matches('.').len());
        }
        e
    }

    fn nested(&self, field: &str) -> Place {
        Place {
            prefix: format!("{}{field}.", self.prefix),
            ..self.clone()
        }
    }

    /// Deserialize `value` into `T`; `extra` are keys the object may also carry that were
    /// split off before (they are listed when an unknown key is reported).
    fn read<T: DeserializeOwned>(&self, value: &Value, extra: &[&str]) -> Result<T> {
        serde_path_to_error::deserialize(De(value)).map_err(|e| {
            let mut field: Vec<String> = e
                .path()
                .iter()
                .map(|s| match s {
                    Segment::Seq { index } => index.to_string(),
                    Segment::Map { key } => key.clone(),
                    Segment::Enum { variant } => variant.clone(),
                    Segment::Unknown => "?".to_string(),
                })
                .collect();
            let problem = match e.into_inner() {
                Problem::Unknown {
                    field: key,
                    allowed,
                } => {
                    // serde_path_to_error records the key it was reading, which is the
                    // unknown one; add it only if a future version stops doing so.
                    if field.last() != Some(&key) {
                        field.push(key);
                    }
                    let at_top = field.len() == 1;
                    let mut names: Vec<&str> = if at_top { extra.to_vec() } else { vec![] };
                    names.extend(allowed);
                    format!("is not known here (allowed: {})", names.join(", "))
                }
                Problem::Missing(key) => {
                    field.push(key.to_string());
                    "is required".to_string()
                }
                Problem::Wrong(text) => text,
            };
            self.err(&field.join("."), problem)
        })
    }
}

pub(super) fn scenario(value: &Value) -> Result<Scenario> {
    let top = Place {
        step: None,
        kind: None,
        prefix: String::new(),
    };
    if !value.is_object() {
        return Err(top.err(
            "",
            format!(
                "the scenario must be a JSON object, found {}",
                type_name(value)
            ),
        ));
    }
    let file: ScenarioFile = top.read(value, &[])?;
    let model = nonempty(&top, "model", file.model)?;
    if file.steps.is_empty() {
        return Err(top.err("steps", "must contain at least one step"));
    }
    let steps = file
        .steps
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let at = Place {
                step: Some(i),
                ..top.clone()
            };
            step(v, &at, Kind::ALL, STEP_COMMON)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Scenario {
        model,
        on_exhausted: file.on_exhausted.unwrap_or(OnExhausted::Error),
        steps,
    })
}

/// Read one step whose kind must be among `kinds`; `common` are the shared fields it may carry.
fn step(value: &Value, at: &Place, kinds: &[&str], common: &[&str]) -> Result<Step> {
    let Some(obj) = value.as_object() else {
        let found = type_name(value);
        return Err(if at.prefix.is_empty() {
            at.err("", format!("a step must be a JSON object, found {found}"))
        } else {
            at.err_here(format!("must be a JSON object, found {found}"))
        });
    };
    let kind_at = Place {
        prefix: format!("{}kind", at.prefix),
        ..at.clone()
    };
    let name: String = match obj.get("kind") {
        None => {
            let names = kinds.join(", ");
            return Err(at.err("kind", format!("is required (one of {names})")));
        }
        Some(v) => kind_at.read(v, &[])?,
    };
    let Some(kind) = Kind::named(&name).filter(|k| kinds.contains(&k.name())) else {
        let here = if at.prefix.is_empty() { "" } else { " here" };
        return Err(kind_at.err("", format!("{}{here} (found \"{name}\")", one_of(kinds))));
    };
    let at = Place {
        kind: if at.prefix.is_empty() {
            Some(kind.name())
        } else {
            at.kind
        },
        ..at.clone()
    };

    let (mut shared, mut own) = (Map::new(), Map::new());
    for (key, v) in obj {
        if key == "kind" {
            continue;
        }
        let part = if common.contains(&key.as_str()) {
            &mut shared
        } else {
            &mut own
        };
        part.insert(key.clone(), v.clone());
    }
    let mut allowed = vec!["kind"];
    allowed.extend(common);
    let common: StepCommon = at.read(&Value::Object(shared), &[])?;
    let own = Value::Object(own);
    let kind = body(kind, &own, &at, &allowed)?;

    let times = match common.times {
        None => 1,
        Some(n) => in_range(&at, "times", n, 1, MAX_TIMES)? as usize,
    };
    let delay_ms = match common.delay_ms {
        None => 0,
        Some(ms) => in_range(&at, "delay_ms", ms, 0, MAX_MS)?,
    };
    Ok(Step {
        kind,
        times,
        usage: common.usage,
        stop_reason: nonempty(&at, "stop_reason", common.stop_reason)?,
        delay_ms,
        when: common.when,
    })
}

/// Read a kind's own fields and check what serde could not.
fn body(kind: Kind, own: &Value, at: &Place, allowed: &[&str]) -> Result<StepKind> {
    Ok(match kind {
        Kind::Text => {
            let f: TextFields = at.read(own, allowed)?;
            StepKind::Text {
                text: required_text(at, "text", f.text)?,
                thinking: nonempty(at, "thinking", f.thinking)?,
            }
        }
        Kind::ToolUse => {
            let f: ToolUseFields = at.read(own, allowed)?;
            StepKind::ToolUse {
                thinking: nonempty(at, "thinking", f.thinking)?,
                text: nonempty(at, "text", f.text)?,
                calls: calls(at, f.calls)?,
            }
        }
        Kind::Error => {
            let f: ErrorFields = at.read(own, allowed)?;
            let status = status(at, "status", &f.status, 400, 599)?;
            let error_type = nonempty(at, "error_type", f.error_type)?
                .unwrap_or_else(|| default_error_type(status).to_string());
            let message = f
                .message
                .unwrap_or_else(|| default_error_message(&error_type));
            StepKind::Error {
                status,
                error_type,
                message,
                headers: headers(at, f.headers)?,
            }
        }
        Kind::SseError => {
            let f: SseErrorFields = at.read(own, allowed)?;
            let error_type = nonempty(at, "error_type", f.error_type)?
                .unwrap_or_else(|| "overloaded_error".to_string());
            let message = f
                .message
                .unwrap_or_else(|| default_error_message(&error_type));
            StepKind::SseError {
                error_type,
                message,
                after_events: after_events(at, f.after_events, 0, DEFAULT_SSE_ERROR_AFTER_EVENTS)?,
                reply: nested(at, "reply", f.reply.as_ref(), &["text", "tool_use"])?,
            }
        }
        Kind::Drop => {
            let f: DropFields = at.read(own, allowed)?;
            StepKind::Drop {
                after_events: after_events(at, f.after_events, 0, DEFAULT_DROP_AFTER_EVENTS)?,
                reply: nested(at, "reply", f.reply.as_ref(), &["text", "tool_use"])?,
            }
        }
        Kind::Stall => stall(at, at.read(own, allowed)?)?,
        Kind::Raw => raw(at, at.read(own, allowed)?)?,
    })
}

fn stall(at: &Place, f: StallFields) -> Result<StepKind> {
    let Some(phase) = f.phase else {
        return Err(at.err(
            "phase",
            "is required (\"before_headers\" or \"after_message_start\")",
        ));
    };
    let ms = in_range(at, "ms", f.ms, 0, MAX_MS)?;
    let kinds: &[&str] = match phase {
        StallPhase::BeforeHeaders => &["text", "tool_use", "error"],
        StallPhase::AfterMessageStart => &["text", "tool_use"],
    };
    if phase == StallPhase::BeforeHeaders && f.after_events.is_some() {
        return Err(at.err(
            "after_events",
            "only applies to phase \"after_message_start\"",
        ));
    }
    // message_start must go out before the silence, or it is a before_headers stall.
    let after_events = after_events(at, f.after_events, 1, DEFAULT_STALL_AFTER_EVENTS)?;
    Ok(StepKind::Stall {
        phase,
        ms,
        then: nested(at, "then", f.then.as_ref(), kinds)?,
        after_events,
    })
}

fn raw(at: &Place, f: RawFields) -> Result<StepKind> {
    let status = match &f.status {
        None => 200,
        Some(n) => status(at, "status", n, 200, 599)?,
    };
    let events = f
        .events
        .into_iter()
        .enumerate()
        .map(|(i, e)| raw_event(&at.nested(&format!("events.{i}")), e))
        .collect::<Result<Vec<_>>>()?;
    Ok(StepKind::Raw {
        status,
        headers: headers(at, f.headers)?,
        events,
        end: f.end.unwrap_or(RawEnd::Close),
    })
}

fn raw_event(at: &Place, e: RawEventFile) -> Result<RawEvent> {
    // A line break would end the `event:` line early; odd framing belongs in `data_text`.
    if e.event.is_empty() || e.event.contains(['\n', '\r']) {
        return Err(at.err(
            "event",
            "must be a non-empty name on one line (no line breaks)",
        ));
    }
    let data = match (e.data, e.data_text) {
        (Some(v), None) => RawData::Json(v),
        (None, Some(t)) => RawData::Text(t),
        (Some(_), Some(_)) => {
            return Err(at.err(
                "data_text",
                "cannot be given together with `data` (one event has one data line)",
            ))
        }
        (None, None) => {
            return Err(at.err(
                "data",
                "is required (or `data_text` for text sent verbatim)",
            ))
        }
    };
    Ok(RawEvent {
        event: e.event,
        data,
    })
}

/// Read a nested reply (`reply` or `then`) whose kind must be one of `kinds`.
fn nested(
    at: &Place,
    field: &str,
    value: Option<&Value>,
    kinds: &[&str],
) -> Result<Option<Box<Step>>> {
    match value {
        None => Ok(None),
        Some(v) => step(v, &at.nested(field), kinds, REPLY_COMMON).map(|s| Some(Box::new(s))),
    }
}

fn calls(at: &Place, mut calls: Vec<Call>) -> Result<Vec<Call>> {
    if calls.is_empty() {
        return Err(at.err("calls", "must contain at least one call"));
    }
    // As everywhere in the file, `null` means absent: no input.
    for c in &mut calls {
        if c.input.is_null() {
            c.input = Value::Object(Map::new());
        }
    }
    let mut ids = HashSet::new();
    for (i, c) in calls.iter().enumerate() {
        let at = at.nested(&format!("calls.{i}"));
        if c.name.trim().is_empty() {
            return Err(at.err("name", "must not be empty"));
        }
        if !c.input.is_object() {
            let problem = format!("must be a JSON object, found {}", type_name(&c.input));
            return Err(at.err("input", problem));
        }
        if let Some(id) = &c.id {
            if id.trim().is_empty() {
                return Err(at.err("id", "must not be empty"));
            }
            if !ids.insert(id.as_str()) {
                return Err(at.err("id", format!("repeats the id \"{id}\" of an earlier call")));
            }
        }
    }
    Ok(calls)
}

/// Header names must be valid HTTP; values are sent byte for byte, so any text a header can
/// carry is allowed (no line breaks or other control characters). A number is written as it
/// appears in the file.
fn headers(at: &Place, map: Option<Map<String, Value>>) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (name, v) in map.unwrap_or_default() {
        let field = format!("headers.{name}");
        let text = match v {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            other => {
                let problem = format!("must be a string, found {}", type_name(&other));
                return Err(at.err(&field, problem));
            }
        };
        if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(at.err(&field, "is not a valid HTTP header name"));
        }
        if hyper::header::HeaderValue::from_bytes(text.as_bytes()).is_err() {
            return Err(at.err(
                &field,
                "is not a valid HTTP header value (line breaks and other control characters cannot be sent)",
            ));
        }
        out.insert(name.to_ascii_lowercase(), text);
    }
    Ok(out)
}

fn status(at: &Place, field: &str, n: &Number, low: u16, high: u16) -> Result<u16> {
    n.as_u64()
        .filter(|s| (u64::from(low)..=u64::from(high)).contains(s))
        .map(|s| s as u16)
        .ok_or_else(|| {
            at.err(
                field,
                format!("must be an HTTP status code between {low} and {high}, found {n}"),
            )
        })
}

fn after_events(at: &Place, n: Option<u64>, low: u64, default: usize) -> Result<usize> {
    match n {
        None => Ok(default),
        Some(n) => Ok(in_range(at, "after_events", n, low, MAX_AFTER_EVENTS)? as usize),
    }
}

fn in_range(at: &Place, field: &str, n: u64, low: u64, high: u64) -> Result<u64> {
    if (low..=high).contains(&n) {
        return Ok(n);
    }
    let problem = if n < low {
        format!("must be at least {low}, found {n}")
    } else {
        format!("must be at most {high} (keel-mock's limit), found {n}")
    };
    Err(at.err(field, problem))
}

fn required_text(at: &Place, field: &str, s: String) -> Result<String> {
    Ok(nonempty(at, field, Some(s))?.unwrap_or_default())
}

fn nonempty(at: &Place, field: &str, s: Option<String>) -> Result<Option<String>> {
    match s {
        Some(s) if s.trim().is_empty() => {
            Err(at.err(field, "must not be empty (the real API rejects blank text)"))
        }
        other => Ok(other),
    }
}
