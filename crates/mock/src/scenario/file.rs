//! The scenario file format as serde types: what a file may say, field by field.
//!
//! A step is written as one object, `kind` first, then the kind's own fields, then the fields
//! every step may carry. Writing derives that shape directly ([`StepFile`]). Reading cannot use
//! serde's internally tagged enums: they buffer the object before choosing the variant, which
//! loses the path of an error inside it. So `read` looks at `kind` itself, splits the
//! [`STEP_COMMON`] fields off, and reads each part into the derived types below. For the same
//! reason nested replies (`reply`, `then`) and the list of steps stay raw JSON here and are read
//! in their own pass.
//!
//! Values serde cannot range-check (statuses, counts, durations) are loose here and checked
//! when `read` builds the [`super::Scenario`].

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Number, Value};

use super::{Call, Match, OnExhausted, RawEnd, StallPhase, UsageOverride};

/// The top level of a file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct ScenarioFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub on_exhausted: Option<OnExhausted>,
    pub steps: Vec<Value>,
}

/// The names `kind` may take. Read as a plain string, so that the message for a wrong one can
/// list only the kinds allowed where it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Text,
    ToolUse,
    Error,
    SseError,
    Drop,
    Stall,
    Raw,
}

impl Kind {
    /// Every kind, in the order the README lists them.
    pub const ALL: &'static [&'static str] = &[
        "text",
        "tool_use",
        "error",
        "sse_error",
        "drop",
        "stall",
        "raw",
    ];

    /// The kind of this name.
    pub fn named(name: &str) -> Option<Kind> {
        Some(match name {
            "text" => Kind::Text,
            "tool_use" => Kind::ToolUse,
            "error" => Kind::Error,
            "sse_error" => Kind::SseError,
            "drop" => Kind::Drop,
            "stall" => Kind::Stall,
            "raw" => Kind::Raw,
            _ => return None,
        })
    }

    /// The name as written in files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::ToolUse => "tool_use",
            Kind::Error => "error",
            Kind::SseError => "sse_error",
            Kind::Drop => "drop",
            Kind::Stall => "stall",
            Kind::Raw => "raw",
        }
    }
}

/// The fields a top-level step may carry whatever its kind (see [`StepCommon`]).
pub(super) const STEP_COMMON: &[&str] = &["times", "usage", "stop_reason", "delay_ms", "match"];
/// The fields a nested reply may carry besides its kind's own.
pub(super) const REPLY_COMMON: &[&str] = &["usage", "stop_reason"];

/// The fields of [`STEP_COMMON`]; a nested reply only ever fills those of [`REPLY_COMMON`].
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct StepCommon {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageOverride>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub when: Option<Match>,
}

/// A whole step as written: `kind` and the kind's fields, then the common ones.
#[derive(Serialize)]
pub(super) struct StepFile {
    #[serde(flatten)]
    pub body: Body,
    #[serde(flatten)]
    pub common: StepCommon,
}

/// A step's kind with its own fields.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum Body {
    Text(TextFields),
    ToolUse(ToolUseFields),
    Error(ErrorFields),
    SseError(SseErrorFields),
    Drop(DropFields),
    Stall(StallFields),
    Raw(RawFields),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct TextFields {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct ToolUseFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub calls: Vec<Call>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct ErrorFields {
    pub status: Number,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Values are strings (or numbers, written as they appear): checked by `read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Map<String, Value>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct SseErrorFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_events: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct DropFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_events: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct StallFields {
    /// Optional here only so that its absence gets a message listing the phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<StallPhase>,
    pub ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_events: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct RawFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Map<String, Value>>,
    pub events: Vec<RawEventFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<RawEnd>,
}

/// One raw event: `data` (any JSON, even `null`) or `data_text` (verbatim), not both.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub(super) struct RawEventFile {
    pub event: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_text: Option<String>,
}

/// `"data": null` is data (the JSON `null`), not an absent field.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_field_lists_match_the_type() {
        let full = StepCommon {
            times: Some(1),
            usage: Some(UsageOverride::default()),
            stop_reason: Some("s".into()),
            delay_ms: Some(1),
            when: Some(Match::default()),
        };
        let v = serde_json::to_value(full).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, STEP_COMMON);
        assert!(REPLY_COMMON.iter().all(|k| STEP_COMMON.contains(k)));
        assert!(Kind::ALL
            .iter()
            .all(|n| Kind::named(n).is_some_and(|k| k.name() == *n)));
    }
}
