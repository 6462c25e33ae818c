//! Remembers the last error `result`, to tell an error result's exit from a crash.

use serde_json::Value;

use crate::error::{Error, ResultError};

/// The fields of an error `result` that [`Error::Result`] carries.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ErrorResult {
    pub subtype: String,
    pub errors: Vec<String>,
    pub result: Option<String>,
    pub terminal_reason: Option<String>,
    pub api_error_status: Option<u16>,
    pub session_id: String,
}

impl ErrorResult {
    /// Read from the raw JSON, so that even a result the typed parser rejects still counts.
    fn from_value(v: &Value) -> ErrorResult {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        ErrorResult {
            subtype: s("subtype").unwrap_or_else(|| "error".to_owned()),
            errors: v
                .get("errors")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|e| match e {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            result: s("result"),
            terminal_reason: s("terminal_reason"),
            api_error_status: v
                .get("api_error_status")
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok()),
            session_id: s("session_id").unwrap_or_default(),
        }
    }

    pub(crate) fn into_error(self, exit_code: i32, stderr: String) -> Error {
        Error::Result(Box::new(ResultError {
            subtype: self.subtype,
            errors: self.errors,
            result: self.result,
            terminal_reason: self.terminal_reason,
            api_error_status: self.api_error_status,
            session_id: self.session_id,
            exit_code,
            stderr,
        }))
    }
}

/// The "last error result" state. It is set by a `result` with `is_error: true`, kept across
/// the state frames that follow a result (`system/session_state_changed`) and control frames,
/// and forgotten as soon as anything else arrives (a success result, an assistant message, a new
/// turn's `init`) or the host starts a new turn.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    last_error: Option<ErrorResult>,
}

impl Tracker {
    /// Feeds one frame the CLI wrote.
    pub(crate) fn observe(&mut self, v: &Value) {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "result" => {
                let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                self.last_error = is_error.then(|| ErrorResult::from_value(v));
            }
            "system"
                if v.get("subtype").and_then(Value::as_str) == Some("session_state_changed") => {}
            "control_request" | "control_response" | "control_cancel_request" => {}
            _ => self.last_error = None,
        }
    }

    /// The host sent a new user message.
    pub(crate) fn new_turn(&mut self) {
        self.last_error = None;
    }

    pub(crate) fn last_error(&self) -> Option<ErrorResult> {
        self.last_error.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err_result() -> Value {
        json!({"type":"result","subtype":"error_max_turns","is_error":true,"errors":["A","B"],"session_id":"s","api_error_status":null})
    }

    #[test]
    fn error_result_survives_state_frames_only() {
        let mut t = Tracker::default();
        t.observe(&err_result());
        t.observe(&json!({"type":"system","subtype":"session_state_changed","state":"idle"}));
        t.observe(&json!({"type":"control_response","response":{}}));
        let e = t.last_error().unwrap();
        assert_eq!(e.errors, ["A", "B"]);
        assert_eq!(e.api_error_status, None);
        t.observe(&json!({"type":"assistant"}));
        assert!(t.last_error().is_none());
        t.observe(&err_result());
        t.observe(&json!({"type":"result","is_error":false}));
        assert!(t.last_error().is_none());
        t.observe(&err_result());
        t.new_turn();
        assert!(t.last_error().is_none());
    }
}
