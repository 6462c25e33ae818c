//! The scenario: what the mock answers, step by step, and the Rust builders for it.
//!
//! The JSON format is described by the serde types of [`file`]; [`read`] turns a file into a
//! [`Scenario`] (with the range checks serde cannot express) and [`write`] turns a scenario
//! back into a file. A scenario built in Rust is checked by writing and reading it, so it
//! meets exactly the rules a file does.

mod build;
mod de;
mod error;
mod file;
mod read;
mod server_tools;
#[cfg(test)]
mod tests;
mod write;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use error::ScenarioError;
pub use server_tools::SearchHit;

/// Default `after_events` of a `drop` step: message_start, ping, content_block_start and one delta.
pub const DEFAULT_DROP_AFTER_EVENTS: usize = 4;
/// Default `after_events` of an `sse_error` step: only message_start goes out before the error.
pub const DEFAULT_SSE_ERROR_AFTER_EVENTS: usize = 1;
/// Text of the reply a `drop` step streams when it has no `reply` of its own.
pub const DEFAULT_DROP_TEXT: &str = "keel-mock partial reply that will be cut off";
/// Events streamed before an `after_message_start` stall: message_start and ping.
pub const DEFAULT_STALL_AFTER_EVENTS: usize = 2;
/// Text of the reply a `stall` step sends when it has no `then`.
pub const DEFAULT_STALL_TEXT: &str = "keel-mock reply after a stall";

/// Largest `times` a step may have.
pub const MAX_TIMES: u64 = 1_000_000;
/// Largest `ms` or `delay_ms`: one day, far beyond any test's patience.
pub const MAX_MS: u64 = 86_400_000;
/// Largest `after_events`; a reply has far fewer events, so more only means "all of them".
pub const MAX_AFTER_EVENTS: u64 = 100_000;

/// A parsed scenario: the replies to give, in order, and what to do when they run out.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Model name to report in replies; `None` echoes the request's `model`.
    pub model: Option<String>,
    /// What happens once every step has been used.
    pub on_exhausted: OnExhausted,
    /// The steps, answered in order (subject to each step's `match`).
    pub steps: Vec<Step>,
}

/// What the server does when no step is left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "snake_case",
    expecting = "one of \"error\", \"repeat_last\", \"loop\""
)]
pub enum OnExhausted {
    /// Answer HTTP 400 `invalid_request_error` (a permanent error, so clients fail fast).
    #[default]
    Error,
    /// Answer every further request with the last step.
    RepeatLast,
    /// Start again from the first step.
    Loop,
}

/// One scripted answer and the conditions around it.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// What to answer.
    pub kind: StepKind,
    /// How many consecutive matching requests this step answers (1..=[`MAX_TIMES`]).
    pub times: usize,
    /// Overrides of the reported token usage.
    pub usage: Option<UsageOverride>,
    /// Overrides the reported `stop_reason` (e.g. `max_tokens`).
    pub stop_reason: Option<String>,
    /// Wait this long before answering at all (at most [`MAX_MS`]).
    pub delay_ms: u64,
    /// Only requests meeting these conditions are answered by this step (JSON field `match`).
    pub when: Option<Match>,
}

/// The kinds of answer a step can give.
#[derive(Clone, Debug, PartialEq)]
pub enum StepKind {
    /// An assistant message with an optional thinking block and one text block.
    Text {
        /// The reply text.
        text: String,
        /// Optional thinking emitted before the text.
        thinking: Option<String>,
    },
    /// An assistant message with an optional thinking block, an optional text block and one
    /// tool_use block per call.
    ToolUse {
        /// Optional thinking before everything (a reasoning item on the Responses API).
        thinking: Option<String>,
        /// Optional text before the calls.
        text: Option<String>,
        /// The tool calls, at least one.
        calls: Vec<Call>,
    },
    /// An HTTP error response.
    Error {
        /// HTTP status, 400..=599.
        status: u16,
        /// The `error.type` of the body.
        error_type: String,
        /// The `error.message` of the body.
        message: String,
        /// Extra response headers such as `retry-after`, sent verbatim (lower-case names).
        headers: BTreeMap<String, String>,
    },
    /// HTTP 200 stream that sends some events of a normal reply, then an `error` event.
    SseError {
        /// The `error.type` of the error event.
        error_type: String,
        /// The `error.message` of the error event.
        message: String,
        /// How many events of the reply go out before the error.
        after_events: usize,
        /// The reply whose first events are sent (default: a short text reply).
        reply: Option<Box<Step>>,
    },
    /// Streams a reply but cuts the connection after some events.
    Drop {
        /// How many SSE events go out before the cut (message_start and ping count).
        after_events: usize,
        /// The reply being streamed (default: [`DEFAULT_DROP_TEXT`]).
        reply: Option<Box<Step>>,
    },
    /// Goes silent for a while.
    Stall {
        /// Where the silence happens.
        phase: StallPhase,
        /// How long it lasts.
        ms: u64,
        /// What follows the silence (see the README for the defaults of each phase).
        then: Option<Box<Step>>,
        /// For `after_message_start`: how many events of `then` are streamed before the
        /// silence (default 2: message_start and ping).
        after_events: usize,
    },
    /// Exactly these SSE events, for replies no well-behaved server would send.
    Raw {
        /// HTTP status (200..=599, default 200).
        status: u16,
        /// Response headers, sent verbatim; each replaces a default header of the same name.
        headers: BTreeMap<String, String>,
        /// The events, sent in order, each flushed on its own.
        events: Vec<RawEvent>,
        /// How the body ends after the last event.
        end: RawEnd,
    },
}

/// Where a `stall` step goes silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "snake_case",
    expecting = "\"before_headers\" or \"after_message_start\""
)]
pub enum StallPhase {
    /// Before any response header.
    BeforeHeaders,
    /// After message_start and ping have been streamed.
    AfterMessageStart,
}

/// One event of a `raw` step: `event: NAME` and one `data:` line.
#[derive(Clone, Debug, PartialEq)]
pub struct RawEvent {
    /// The event name.
    pub event: String,
    /// What follows `data: `.
    pub data: RawData,
}

/// The data line of a raw event.
#[derive(Clone, Debug, PartialEq)]
pub enum RawData {
    /// A JSON value, serialized as it is (big integers stay integers).
    Json(Value),
    /// Text sent byte for byte, whether or not it is valid JSON.
    Text(String),
}

/// How a `raw` step's body ends after its events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", expecting = "\"close\" or \"hang\"")]
pub enum RawEnd {
    /// Finish the body cleanly.
    #[default]
    Close,
    /// Send nothing more and keep the connection open until the client leaves.
    Hang,
}

/// One tool call of a `tool_use` step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub struct Call {
    /// Tool name.
    pub name: String,
    /// Tool input, a JSON object.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// Explicit tool_use id; `None` gives a unique `toolu_mock_<n>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Overrides of the usage numbers a reply reports; `None` keeps the computed value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub struct UsageOverride {
    /// `usage.input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// `usage.output_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// `usage.cache_read_input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// `usage.cache_creation_input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
}

/// Conditions a request must meet for a step to answer it; every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
pub struct Match {
    /// The system prompt (a string, or its text blocks joined) contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
    /// The text of the last user message (text blocks and tool_result contents) contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_contains: Option<String>,
    /// The text of the first user message contains this (it stays the same for a whole agent run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_user_contains: Option<String>,
    /// The request's `tools` include one with this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_tool: Option<String>,
}

impl Scenario {
    /// A scenario with these steps, echoing the request's model and failing when exhausted.
    pub fn new(steps: Vec<Step>) -> Scenario {
        Scenario {
            model: None,
            on_exhausted: OnExhausted::Error,
            steps,
        }
    }

    /// Report this model name instead of echoing the request's.
    pub fn model(mut self, model: impl Into<String>) -> Scenario {
        self.model = Some(model.into());
        self
    }

    /// Choose what happens once every step has been used.
    pub fn on_exhausted(mut self, mode: OnExhausted) -> Scenario {
        self.on_exhausted = mode;
        self
    }

    /// Parse a scenario from its JSON text; errors name the step and field.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ScenarioError::Syntax {
            path: None,
            message: e.to_string(),
        })?;
        read::scenario(&value)
    }

    /// Parse a scenario from an already decoded JSON value.
    pub fn from_value(value: &Value) -> Result<Scenario, ScenarioError> {
        read::scenario(value)
    }

    /// Read and parse a scenario file; errors name the file, the step and the field.
    pub fn from_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Scenario::from_json(&text).map_err(|e| e.with_path(path))
    }

    /// The scenario in its JSON file format (what [`Scenario::from_json`] reads).
    pub fn to_value(&self) -> Value {
        write::scenario(self)
    }

    /// Check a scenario built in Rust by the same rules as a file (e.g. an error status in 400..=599).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        read::scenario(&self.to_value()).map(|_| ())
    }
}

/// The `error.type` the real API uses for an HTTP status.
pub fn default_error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The HTTP status that goes with an `error.type` (used when an `sse_error` meets a non-streaming request).
pub fn status_for_error_type(error_type: &str) -> u16 {
    match error_type {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    }
}

/// The message an error carries when the scenario gives none.
pub fn default_error_message(error_type: &str) -> String {
    match error_type {
        "overloaded_error" => "Overloaded".to_string(),
        other => format!("keel-mock scripted {other}"),
    }
}
