//! One line of `--input-format stream-json` input, read into what it asks for. Pure: no I/O,
//! so the reader can be fuzzed on its own.

use std::fmt;

use serde_json::Value;

use crate::frames::{ControlRequestFrame, ControlResponseFrame};
use crate::{ContentBlock, UserFrame};

/// The input types keel reads.
pub const INPUT_TYPES: &str =
    "user, control_request, control_response, control_cancel_request, keep_alive";

/// What one input line asks for.
#[derive(Debug)]
pub enum InputLine {
    /// A prompt: its uuid (if the host gave one) and its blocks (never empty).
    User {
        /// The host's uuid for the message.
        uuid: Option<String>,
        /// The prompt.
        blocks: Vec<ContentBlock>,
        /// The host's `origin` of the message (an object), echoed on the turn's result.
        origin: Option<Value>,
    },
    /// A control request from the host.
    ControlRequest(ControlRequestFrame),
    /// The host's answer to one of keel's control requests.
    ControlResponse(ControlResponseFrame),
    /// Nothing to do (`keep_alive`, `control_cancel_request`, a blank line).
    Nothing,
}

/// Why a line cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub struct InputError {
    /// What is wrong, for the host's stderr.
    pub message: String,
    /// For a malformed control request: its id, so the host still gets an answer.
    pub request_id: Option<String>,
}

impl InputError {
    fn new(message: String) -> Self {
        Self {
            message,
            request_id: None,
        }
    }
}

/// Read one line (already cut at its newline).
pub fn parse_input_line(text: &str) -> Result<InputLine, InputError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(InputLine::Nothing);
    }
    let v: Value = serde_json::from_str(text)
        .map_err(|e| InputError::new(format!("is not JSON ({e}): {}", preview(text))))?;
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match kind.as_str() {
        "user" => {
            let origin = match v.get("origin") {
                None | Some(Value::Null) => None,
                Some(o @ Value::Object(_)) => Some(o.clone()),
                Some(_) => {
                    return Err(InputError::new(
                        "has an \"origin\" that is not an object".into(),
                    ))
                }
            };
            let (uuid, blocks) = user_turn(v).map_err(|e| InputError::new(e.to_string()))?;
            Ok(InputLine::User {
                uuid,
                blocks,
                origin,
            })
        }
        "control_request" => {
            let id = v
                .get("request_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            serde_json::from_value::<ControlRequestFrame>(v)
                .map(InputLine::ControlRequest)
                .map_err(|e| InputError {
                    message: format!("a control_request keel cannot read ({e})"),
                    request_id: id,
                })
        }
        "control_response" => serde_json::from_value::<ControlResponseFrame>(v)
            .map(InputLine::ControlResponse)
            .map_err(|e| InputError::new(format!("a control_response keel cannot read ({e})"))),
        // keel answers host requests at once, so there is nothing in flight to withdraw.
        "control_cancel_request" | "keep_alive" => Ok(InputLine::Nothing),
        "" => Err(InputError::new(format!(
            "has no \"type\" (keel reads {INPUT_TYPES}): {}",
            preview(text)
        ))),
        other => Err(InputError::new(format!(
            "has type {other:?}, which keel does not read (it reads {INPUT_TYPES})"
        ))),
    }
}

/// Why a `user` line cannot become a turn (its text follows the line's place in the
/// host's error: "line N: …").
#[derive(Debug)]
enum UserTurnError {
    /// Not the shape of a user message.
    Shape(serde_json::Error),
    /// No block but whitespace text.
    Empty,
    /// Block `index` (from 1) is of a type a host may not send.
    Block {
        /// Its place in the message, from 1.
        index: usize,
        /// Why it may not be sent.
        why: BlockRefused,
    },
}

impl fmt::Display for UserTurnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserTurnError::Shape(e) => write!(f, "a user message keel cannot read ({e})"),
            UserTurnError::Empty => f.write_str("the user message is empty"),
            UserTurnError::Block { index, why } => {
                write!(f, "block {index} of the user message {why}")
            }
        }
    }
}

/// Why a host may not put a block into a user turn.
#[derive(Debug)]
enum BlockRefused {
    /// A tool call or result: keel pairs them itself.
    Paired(String),
    /// Thinking: only the model's own turns hold it.
    ModelOnly(String),
    /// A type the Messages API does not take from a user.
    NotUser(String),
    /// No `type` at all.
    Untyped,
}

impl fmt::Display for BlockRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockRefused::Paired(kind) => write!(
                f,
                "is a {kind} block, which a host may not send (keel pairs tool calls and results itself)"
            ),
            BlockRefused::ModelOnly(kind) => {
                write!(f, "is a {kind} block, which only the model's own turns hold")
            }
            BlockRefused::NotUser(k) => write!(
                f,
                "is a {k:?} block, which a user turn may not hold (it may hold {})",
                USER_BLOCK_TYPES.join(", ")
            ),
            BlockRefused::Untyped => f.write_str("has no \"type\""),
        }
    }
}

/// The uuid and prompt blocks of a `user` message.
fn user_turn(v: Value) -> Result<(Option<String>, Vec<ContentBlock>), UserTurnError> {
    let frame: UserFrame = serde_json::from_value(v).map_err(UserTurnError::Shape)?;
    let blocks: Vec<ContentBlock> = frame
        .message
        .content
        .into_blocks()
        .into_iter()
        .filter(|b| !matches!(b, ContentBlock::Text(t) if t.text.trim().is_empty()))
        .collect();
    if blocks.is_empty() {
        return Err(UserTurnError::Empty);
    }
    for (i, b) in blocks.iter().enumerate() {
        user_block_allowed(b).map_err(|why| UserTurnError::Block { index: i + 1, why })?;
    }
    Ok((frame.uuid, blocks))
}

/// Block types a user turn may carry besides text and images: what the Messages API accepts
/// from a user (documents and search results). Everything else is the model's or keel's own.
pub const USER_BLOCK_TYPES: &[&str] = &["text", "image", "document", "search_result"];

/// Whether a host may put `b` into a user turn. Tool calls and results are paired by keel;
/// thinking, server tool blocks and unknown types belong to the model's turns, and forwarded
/// they would be refused by the API (or replayed into every later request and every resume).
fn user_block_allowed(b: &ContentBlock) -> Result<(), BlockRefused> {
    match b {
        ContentBlock::Text(_) | ContentBlock::Image(_) => Ok(()),
        ContentBlock::ToolUse(_) | ContentBlock::ToolResult(_) => {
            Err(BlockRefused::Paired(b.kind().to_owned()))
        }
        ContentBlock::Thinking(_) | ContentBlock::RedactedThinking(_) => {
            Err(BlockRefused::ModelOnly(b.kind().to_owned()))
        }
        ContentBlock::Other(v) => {
            let kind = v.get("type").and_then(Value::as_str);
            match kind {
                Some(k) if USER_BLOCK_TYPES.contains(&k) => Ok(()),
                Some(k) => Err(BlockRefused::NotUser(k.to_owned())),
                None => Err(BlockRefused::Untyped),
            }
        }
    }
}

/// The start of a long line, for messages.
pub fn preview(s: &str) -> String {
    if s.chars().count() <= 80 {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(80).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(line: &str) -> Result<(Option<String>, usize), String> {
        match parse_input_line(line) {
            Ok(InputLine::User { uuid, blocks, .. }) => Ok((uuid, blocks.len())),
            Ok(other) => Err(format!("not a user line: {other:?}")),
            Err(e) => Err(e.message),
        }
    }

    #[test]
    fn user_messages_take_strings_and_blocks() {
        assert_eq!(
            user(
                r#"{"type":"user","session_id":"","message":{"role":"user","content":"hi"},"parent_tool_use_id":null,"uuid":"u1"}"#
            ),
            Ok((Some("u1".into()), 1))
        );
        assert_eq!(
            user(
                r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#
            ),
            Ok((None, 2))
        );
        assert!(
            user(r#"{"type":"user","message":{"role":"user","content":""}}"#)
                .unwrap_err()
                .contains("empty")
        );
        assert!(user(r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"y"}]}}"#).unwrap_err().contains("tool_result"));
        assert!(user(r#"{"type":"user"}"#).is_err());
    }

    #[test]
    fn a_user_turn_holds_only_what_a_user_may_send() {
        let line = |block: &str| {
            format!(
                r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"text","text":"a"}},{block}]}}}}"#
            )
        };
        for (block, says) in [
            (
                r#"{"type":"thinking","thinking":"x","signature":"s"}"#,
                "thinking",
            ),
            (
                r#"{"type":"redacted_thinking","data":"x"}"#,
                "redacted_thinking",
            ),
            (
                r#"{"type":"server_tool_use","id":"s","name":"web_search","input":{}}"#,
                "server_tool_use",
            ),
            (r#"{"type":"no_such_block"}"#, "no_such_block"),
            (
                r#"{"type":"tool_use","id":"t","name":"Bash","input":{}}"#,
                "tool_use",
            ),
        ] {
            let e = user(&line(block)).unwrap_err();
            assert!(e.contains("block 2") && e.contains(says), "{block}: {e}");
        }
        for ok in [
            r#"{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}"#,
            r#"{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}}"#,
        ] {
            assert_eq!(user(&line(ok)), Ok((None, 2)), "{ok}");
        }
    }

    #[test]
    fn other_lines() {
        assert!(matches!(parse_input_line("  "), Ok(InputLine::Nothing)));
        assert!(matches!(
            parse_input_line(r#"{"type":"keep_alive"}"#),
            Ok(InputLine::Nothing)
        ));
        let e = parse_input_line("nope").unwrap_err();
        assert!(e.message.contains("not JSON"), "{e:?}");
        let e = parse_input_line(r#"{"type":"control_request","request_id":"r1","request":7}"#)
            .unwrap_err();
        assert_eq!(e.request_id.as_deref(), Some("r1"));
        let e = parse_input_line(r#"{"type":"bogus"}"#).unwrap_err();
        assert!(e.message.contains("\"bogus\""), "{e:?}");
    }
}
