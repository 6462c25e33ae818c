//! The scenario: what the mock answers, step by step, and the Rust builders for it.
//!
//! The JSON format is parsed in [`parse`] and written back in [`write`]; both go through the
//! same types, so a scenario built in Rust is checked by exactly the rules a file is.

mod parse;
mod write;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// How many consecutive matching requests this step answers (at least 1).
    pub times: usize,
    /// Overrides of the reported token usage.
    pub usage: Option<UsageOverride>,
    /// Overrides the reported `stop_reason` (e.g. `max_tokens`).
    pub stop_reason: Option<String>,
    /// Wait this long before answering at all.
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
    /// An assistant message with an optional text block and one tool_use block per call.
    ToolUse {
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
        /// Extra response headers such as `retry-after`.
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
}

/// Where a `stall` step goes silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallPhase {
    /// Before any response header.
    BeforeHeaders,
    /// After message_start and ping have been streamed.
    AfterMessageStart,
}

/// One tool call of a `tool_use` step.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// Tool name.
    pub name: String,
    /// Tool input, a JSON object.
    pub input: Value,
    /// Explicit tool_use id; `None` gives a unique `toolu_mock_<n>`.
    pub id: Option<String>,
}

/// Overrides of the usage numbers a reply reports; `None` keeps the computed value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageOverride {
    /// `usage.input_tokens`.
    pub input_tokens: Option<u64>,
    /// `usage.output_tokens`.
    pub output_tokens: Option<u64>,
    /// `usage.cache_read_input_tokens`.
    pub cache_read_input_tokens: Option<u64>,
    /// `usage.cache_creation_input_tokens`.
    pub cache_creation_input_tokens: Option<u64>,
}

/// Conditions a request must meet for a step to answer it; every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    /// The system prompt (a string, or its text blocks joined) contains this.
    pub system_contains: Option<String>,
    /// The text of the last user message (text blocks and tool_result contents) contains this.
    pub last_user_contains: Option<String>,
    /// The text of the first user message contains this (it stays the same for a whole agent run).
    pub first_user_contains: Option<String>,
    /// The request's `tools` include one with this name.
    pub has_tool: Option<String>,
}

/// Why a scenario could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{}: cannot read the scenario file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{}the scenario is not valid JSON: {message}", path_prefix(path))]
    Syntax {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// The parser's message.
        message: String,
    },
    /// The JSON does not describe a valid scenario.
    #[error("{}{}{}", path_prefix(path), step_prefix(*step, kind), field_problem(field, problem))]
    Invalid {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// Index of the offending step; `None` for a top-level field.
        step: Option<usize>,
        /// Kind of the offending step when it is known.
        kind: Option<String>,
        /// The field, dotted for nested ones (`then.text`, `calls.0.input`); empty when the
        /// problem is the step (or the scenario) as a whole.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

fn path_prefix(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!("{}: ", p.display()),
        None => String::new(),
    }
}

fn field_problem(field: &str, problem: &str) -> String {
    if field.is_empty() {
        problem.to_string()
    } else {
        format!("field `{field}` {problem}")
    }
}

fn step_prefix(step: Option<usize>, kind: &Option<String>) -> String {
    match (step, kind) {
        (Some(i), Some(k)) => format!("step {i} ({k}): "),
        (Some(i), None) => format!("step {i}: "),
        (None, _) => String::new(),
    }
}

impl ScenarioError {
    fn with_path(self, file: &std::path::Path) -> Self {
        let p = Some(file.to_path_buf());
        match self {
            ScenarioError::Syntax { message, .. } => ScenarioError::Syntax { path: p, message },
            ScenarioError::Invalid {
                step,
                kind,
                field,
                problem,
                ..
            } => ScenarioError::Invalid {
                path: p,
                step,
                kind,
                field,
                problem,
            },
            other => other,
        }
    }
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
        parse::scenario(&value)
    }

    /// Parse a scenario from an already decoded JSON value.
    pub fn from_value(value: &Value) -> Result<Scenario, ScenarioError> {
        parse::scenario(value)
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
        parse::scenario(&self.to_value()).map(|_| ())
    }
}

impl Step {
    fn of(kind: StepKind) -> Step {
        Step {
            kind,
            times: 1,
            usage: None,
            stop_reason: None,
            delay_ms: 0,
            when: None,
        }
    }

    /// A text reply.
    pub fn text(text: impl Into<String>) -> Step {
        Step::of(StepKind::Text {
            text: text.into(),
            thinking: None,
        })
    }

    /// A text reply preceded by a thinking block.
    pub fn text_with_thinking(thinking: impl Into<String>, text: impl Into<String>) -> Step {
        Step::of(StepKind::Text {
            text: text.into(),
            thinking: Some(thinking.into()),
        })
    }

    /// A reply that calls tools.
    pub fn tool_use(calls: Vec<Call>) -> Step {
        Step::of(StepKind::ToolUse { text: None, calls })
    }

    /// A reply with a text block, then tool calls.
    pub fn tool_use_with_text(text: impl Into<String>, calls: Vec<Call>) -> Step {
        Step::of(StepKind::ToolUse {
            text: Some(text.into()),
            calls,
        })
    }

    /// An HTTP error with the error type that belongs to `status` and a default message.
    pub fn error(status: u16) -> Step {
        let error_type = default_error_type(status).to_string();
        let message = default_error_message(&error_type);
        Step::of(StepKind::Error {
            status,
            error_type,
            message,
            headers: BTreeMap::new(),
        })
    }

    /// An HTTP error with an explicit error type and message.
    pub fn error_with(
        status: u16,
        error_type: impl Into<String>,
        message: impl Into<String>,
    ) -> Step {
        Step::of(StepKind::Error {
            status,
            error_type: error_type.into(),
            message: message.into(),
            headers: BTreeMap::new(),
        })
    }

    /// Add a response header to an `error` step (ignored by other kinds).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Step {
        if let StepKind::Error { headers, .. } = &mut self.kind {
            headers.insert(name.into().to_ascii_lowercase(), value.into());
        }
        self
    }

    /// An error event inside an HTTP 200 stream, after message_start.
    pub fn sse_error(error_type: impl Into<String>, message: impl Into<String>) -> Step {
        Step::of(StepKind::SseError {
            error_type: error_type.into(),
            message: message.into(),
            after_events: DEFAULT_SSE_ERROR_AFTER_EVENTS,
            reply: None,
        })
    }

    /// Stream the default partial reply and cut the connection after `after_events` events.
    pub fn drop_after(after_events: usize) -> Step {
        Step::of(StepKind::Drop {
            after_events,
            reply: None,
        })
    }

    /// Stream `reply` and cut the connection after `after_events` events.
    pub fn drop_reply(after_events: usize, reply: Step) -> Step {
        Step::of(StepKind::Drop {
            after_events,
            reply: Some(Box::new(reply)),
        })
    }

    /// Stay silent for `ms` before any header, then answer `then` or close the connection.
    pub fn stall_before_headers(ms: u64, then: Option<Step>) -> Step {
        Step::of(StepKind::Stall {
            phase: StallPhase::BeforeHeaders,
            ms,
            then: then.map(Box::new),
            after_events: DEFAULT_STALL_AFTER_EVENTS,
        })
    }

    /// Stream message_start and ping, stay silent for `ms`, then stream the rest of `then`.
    pub fn stall_after_message_start(ms: u64, then: Option<Step>) -> Step {
        Step::of(StepKind::Stall {
            phase: StallPhase::AfterMessageStart,
            ms,
            then: then.map(Box::new),
            after_events: DEFAULT_STALL_AFTER_EVENTS,
        })
    }

    /// Answer this many consecutive matching requests with this step.
    pub fn times(mut self, n: usize) -> Step {
        self.times = n;
        self
    }

    /// Override the reported usage.
    pub fn usage(mut self, usage: UsageOverride) -> Step {
        self.usage = Some(usage);
        self
    }

    /// Override the reported stop_reason.
    pub fn stop_reason(mut self, reason: impl Into<String>) -> Step {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Wait this long before answering.
    pub fn delay_ms(mut self, ms: u64) -> Step {
        self.delay_ms = ms;
        self
    }

    /// Answer only requests meeting `m`.
    pub fn when(mut self, m: Match) -> Step {
        self.when = Some(m);
        self
    }

    /// Only for `sse_error` and `drop`: how many events go out first (ignored by other kinds).
    pub fn after_events(mut self, n: usize) -> Step {
        match &mut self.kind {
            StepKind::SseError { after_events, .. } | StepKind::Drop { after_events, .. } => {
                *after_events = n
            }
            _ => {}
        }
        self
    }

    /// The name of this step's kind as written in scenario files.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            StepKind::Text { .. } => "text",
            StepKind::ToolUse { .. } => "tool_use",
            StepKind::Error { .. } => "error",
            StepKind::SseError { .. } => "sse_error",
            StepKind::Drop { .. } => "drop",
            StepKind::Stall { .. } => "stall",
        }
    }
}

impl Call {
    /// A call of tool `name` with `input`; the id is generated.
    pub fn new(name: impl Into<String>, input: Value) -> Call {
        Call {
            name: name.into(),
            input,
            id: None,
        }
    }

    /// Use this tool_use id instead of a generated one.
    pub fn id(mut self, id: impl Into<String>) -> Call {
        self.id = Some(id.into());
        self
    }
}

impl Match {
    /// No condition yet (matches every request).
    pub fn new() -> Match {
        Match::default()
    }

    /// Require the system prompt to contain `s`.
    pub fn system_contains(mut self, s: impl Into<String>) -> Match {
        self.system_contains = Some(s.into());
        self
    }

    /// Require the last user message to contain `s`.
    pub fn last_user_contains(mut self, s: impl Into<String>) -> Match {
        self.last_user_contains = Some(s.into());
        self
    }

    /// Require the first user message to contain `s`.
    pub fn first_user_contains(mut self, s: impl Into<String>) -> Match {
        self.first_user_contains = Some(s.into());
        self
    }

    /// Require a tool of this name in the request.
    pub fn has_tool(mut self, name: impl Into<String>) -> Match {
        self.has_tool = Some(name.into());
        self
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
