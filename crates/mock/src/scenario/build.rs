//! The Rust builders of steps, calls, conditions and raw events.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    default_error_message, default_error_type, Call, Match, RawData, RawEnd, RawEvent, StallPhase,
    Step, StepKind, UsageOverride, DEFAULT_SSE_ERROR_AFTER_EVENTS, DEFAULT_STALL_AFTER_EVENTS,
};

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
        Step::of(StepKind::ToolUse {
            thinking: None,
            text: None,
            calls,
        })
    }

    /// A reply with a text block, then tool calls.
    pub fn tool_use_with_text(text: impl Into<String>, calls: Vec<Call>) -> Step {
        Step::of(StepKind::ToolUse {
            thinking: None,
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

    /// Add a response header, sent verbatim, to an `error` or `raw` step (ignored by other kinds).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Step {
        if let StepKind::Error { headers, .. } | StepKind::Raw { headers, .. } = &mut self.kind {
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

    /// Exactly these SSE events with HTTP 200, then a clean end of the body.
    pub fn raw(events: Vec<RawEvent>) -> Step {
        Step::of(StepKind::Raw {
            status: 200,
            headers: BTreeMap::new(),
            events,
            end: RawEnd::Close,
        })
    }

    /// Only for `raw`: send this HTTP status (ignored by other kinds).
    pub fn raw_status(mut self, code: u16) -> Step {
        if let StepKind::Raw { status, .. } = &mut self.kind {
            *status = code;
        }
        self
    }

    /// Only for `raw`: how the body ends after the events (ignored by other kinds).
    pub fn raw_end(mut self, how: RawEnd) -> Step {
        if let StepKind::Raw { end, .. } = &mut self.kind {
            *end = how;
        }
        self
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
            StepKind::Raw { .. } => "raw",
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

impl RawEvent {
    /// An event whose data is this JSON value, serialized as it is.
    pub fn json(event: impl Into<String>, data: Value) -> RawEvent {
        RawEvent {
            event: event.into(),
            data: RawData::Json(data),
        }
    }

    /// An event whose data is this text, sent byte for byte (it need not be JSON).
    pub fn text(event: impl Into<String>, data: impl Into<String>) -> RawEvent {
        RawEvent {
            event: event.into(),
            data: RawData::Text(data.into()),
        }
    }
}
