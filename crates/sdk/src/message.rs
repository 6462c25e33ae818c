//! [`Message`]: one message from the CLI, a typed [`Frame`] that keeps what it does not model.

use keel_protocol::{ContentBlock, Frame, ResultFrame, SystemFrame};
use serde_json::Value;

/// One message the CLI wrote on stdout (everything except control frames, which the SDK handles).
///
/// The frame is typed where keel knows the type ([`Frame::Assistant`], [`Frame::Result`], ...);
/// unknown types are [`Frame::Other`] and unknown fields sit in each struct's `extra`, so a newer
/// CLI never breaks the stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Message(pub Frame);

impl Message {
    /// The frame.
    pub fn frame(&self) -> &Frame {
        &self.0
    }

    /// The frame, by value.
    pub fn into_frame(self) -> Frame {
        self.0
    }

    /// The `type` tag (`system`, `assistant`, `user`, `result`, `stream_event`, or an unknown one).
    pub fn kind(&self) -> &str {
        self.0.kind()
    }

    /// The `subtype` of a `system` message.
    pub fn system_subtype(&self) -> Option<&str> {
        let Frame::System(s) = &self.0 else {
            return None;
        };
        Some(match s {
            SystemFrame::Init(_) => "init",
            SystemFrame::ApiRetry(_) => "api_retry",
            SystemFrame::ModelFallback(_) => "model_fallback",
            SystemFrame::PermissionDenied(_) => "permission_denied",
            SystemFrame::Status(_) => "status",
            SystemFrame::SessionStateChanged(_) => "session_state_changed",
            SystemFrame::TaskStarted(_) => "task_started",
            SystemFrame::TaskNotification(_) => "task_notification",
            SystemFrame::Warning(_) => "warning",
            SystemFrame::CompactBoundary(_) => "compact_boundary",
            SystemFrame::Heartbeat(_) => "heartbeat",
            SystemFrame::Other(v) => v.get("subtype").and_then(Value::as_str).unwrap_or(""),
        })
    }

    /// The `result` frame, when this is one.
    pub fn as_result(&self) -> Option<&ResultFrame> {
        match &self.0 {
            Frame::Result(r) => Some(r),
            _ => None,
        }
    }

    /// Whether this is a `result` (the end of a run or of one turn).
    pub fn is_result(&self) -> bool {
        matches!(self.0, Frame::Result(_))
    }

    /// Whether the CLI sent a type this SDK does not model (kept verbatim in [`Frame::Other`]).
    pub fn is_unknown(&self) -> bool {
        matches!(self.0, Frame::Other(_))
    }

    /// The text blocks of an `assistant` message, joined; `None` for other messages and for
    /// assistant messages without text (a tool call, thinking).
    pub fn assistant_text(&self) -> Option<String> {
        let Frame::Assistant(a) = &self.0 else {
            return None;
        };
        let text: Vec<&str> = a
            .message
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        (!text.is_empty()).then(|| text.concat())
    }

    /// The session id the message carries, when it has one.
    pub fn session_id(&self) -> Option<&str> {
        let id = match &self.0 {
            Frame::System(s) => match s {
                SystemFrame::Init(f) => f.session_id.as_str(),
                SystemFrame::ApiRetry(f) => &f.session_id,
                SystemFrame::ModelFallback(f) => &f.session_id,
                SystemFrame::PermissionDenied(f) => &f.session_id,
                SystemFrame::Status(f) => &f.session_id,
                SystemFrame::SessionStateChanged(f) => &f.session_id,
                SystemFrame::TaskStarted(f) | SystemFrame::TaskNotification(f) => &f.session_id,
                SystemFrame::Warning(f) => &f.session_id,
                SystemFrame::CompactBoundary(f) => &f.session_id,
                SystemFrame::Heartbeat(f) => &f.session_id,
                SystemFrame::Other(v) => v.get("session_id").and_then(Value::as_str)?,
            },
            Frame::Assistant(a) => &a.session_id,
            Frame::User(u) => &u.session_id,
            Frame::Result(r) => &r.session_id,
            Frame::StreamEvent(e) => &e.session_id,
            Frame::Other(v) => v.get("session_id").and_then(Value::as_str)?,
            Frame::ControlRequest(_)
            | Frame::ControlResponse(_)
            | Frame::ControlCancelRequest(_) => return None,
        };
        (!id.is_empty()).then_some(id)
    }

    /// The message as JSON (unknown fields included).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&self.0).unwrap_or(Value::Null)
    }
}

impl From<Message> for Frame {
    fn from(m: Message) -> Frame {
        m.0
    }
}

impl From<Frame> for Message {
    fn from(f: Frame) -> Message {
        Message(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Message {
        Message(serde_json::from_str(s).unwrap())
    }

    #[test]
    fn helpers_read_known_and_unknown_frames() {
        let a = parse(
            r#"{"type":"assistant","message":{"id":"m","role":"assistant","model":"x","content":[{"type":"text","text":"hi"},{"type":"text","text":"!"}]},"session_id":"s","uuid":"u","new_field":1}"#,
        );
        assert_eq!(a.assistant_text().as_deref(), Some("hi!"));
        assert_eq!(a.session_id(), Some("s"));
        assert!(a.to_json().get("new_field").is_some());
        let o = parse(r#"{"type":"rate_limit_event","session_id":"s2"}"#);
        assert!(o.is_unknown());
        assert_eq!(o.kind(), "rate_limit_event");
        assert_eq!(o.session_id(), Some("s2"));
        let s = parse(r#"{"type":"system","subtype":"brand_new","uuid":"u"}"#);
        assert_eq!(s.system_subtype(), Some("brand_new"));
    }
}
