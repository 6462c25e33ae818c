//! From records to the conversation the model sees, always well-formed.
//!
//! Frames are merged back into messages: consecutive `assistant` frames of one reply (one per
//! content block, sharing `message.id`) become one assistant message, consecutive `user` frames
//! (one per tool result, then maybe a prompt) one user message. Subagent frames
//! (`parent_tool_use_id` set) and non-message frames are not part of the main conversation.
//!
//! A `tool_use` whose result is missing gets a synthetic result that says why, inserted where
//! the result belonged; [`Rebuilt::frames`] holds the repaired frame sequence, so that a fork's
//! copy (or the tail repairs appended to a resumed file) reads back without further repair.

use keel_protocol::frames::UserMessage;
use keel_protocol::{
    ApiMessage, ContentBlock, Extra, Frame, MessageContent, Role, SystemFrame, UserFrame,
};
use serde_json::json;

use super::Record;
use crate::emit::{new_uuid, now_rfc3339};
use crate::history::History;

/// Why a tool call got a synthetic result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairCause {
    /// The transcript ends while the call was open: the session ended before it finished.
    SessionEnded,
    /// The conversation went on without a result for the call (a damaged line was skipped, or
    /// an earlier run ended without recording one).
    ResultMissing,
}

impl RepairCause {
    /// The `repair` value in the synthetic frame's `tool_result_meta`.
    pub fn as_str(self) -> &'static str {
        match self {
            RepairCause::SessionEnded => "session_ended",
            RepairCause::ResultMissing => "result_missing",
        }
    }

    /// What the model is told.
    pub fn text(self, tool: &str) -> String {
        match self {
            RepairCause::SessionEnded => format!(
                "This {tool} call never reported a result: the session ended (keel was stopped, killed or crashed) before the call finished. It may have run, fully or in part, and may have had side effects; check the current state before running it again."
            ),
            RepairCause::ResultMissing => format!(
                "No result of this {tool} call could be found in the session transcript (the line holding it was damaged, or an earlier run ended before recording it), so keel cannot say how it went. It may have run and may have had side effects; check the current state before running it again."
            ),
        }
    }
}

/// One tool call closed with a synthetic result.
#[derive(Clone, Debug, PartialEq)]
pub struct Repair {
    /// The call.
    pub tool_use_id: String,
    /// Its tool.
    pub tool_name: String,
    /// Why it had no result.
    pub cause: RepairCause,
    /// The synthetic `user` frame carrying the result.
    pub frame: Frame,
}

/// A rebuilt conversation.
#[derive(Debug)]
pub struct Rebuilt {
    /// The history, well-formed.
    pub history: History,
    /// The main conversation's frames (user and assistant), repaired, in order.
    pub frames: Vec<Frame>,
    /// The calls that got synthetic results, in order.
    pub repairs: Vec<Repair>,
    /// Tool results dropped because no open call matched them.
    pub dropped_results: Vec<String>,
    /// The first message was not a prompt, so a placeholder prompt was put first.
    pub missing_prompt: bool,
    /// The text of the first prompt.
    pub first_prompt: Option<String>,
}

/// Rebuild the main conversation of `records`; synthetic frames are stamped `session_id`.
/// The records are consumed (a long session's are large; they are not copied).
pub fn rebuild(records: Vec<Record>, session_id: &str) -> Rebuilt {
    rebuild_as(records, session_id, true)
}

/// [`rebuild`] for a resume, which needs the history but not the frames: their content moves
/// into the history instead of being copied (`frames` is left empty), so a long transcript is
/// held once, not twice.
pub fn rebuild_history(records: Vec<Record>, session_id: &str) -> Rebuilt {
    rebuild_as(records, session_id, false)
}

fn rebuild_as(records: Vec<Record>, session_id: &str, keep_frames: bool) -> Rebuilt {
    let mut frames: Vec<Frame> = Vec::new();
    let mut repairs: Vec<Repair> = Vec::new();
    let mut dropped = Vec::new();
    // Calls of the assistant message being read that have no result yet, in call order.
    let mut open: Vec<(String, String)> = Vec::new();
    let mut current_reply: Option<String> = None;
    for r in records {
        match r.frame {
            Frame::Assistant(a) if a.parent_tool_use_id.is_none() => {
                if current_reply.as_deref() != Some(a.message.id.as_str()) {
                    close_open(
                        &mut open,
                        RepairCause::ResultMissing,
                        session_id,
                        &mut frames,
                        &mut repairs,
                    );
                    current_reply = Some(a.message.id.clone());
                }
                for b in &a.message.content {
                    if let ContentBlock::ToolUse(t) = b {
                        open.push((t.id.clone(), t.name.clone()));
                    }
                }
                frames.push(Frame::Assistant(a));
            }
            Frame::User(mut u) if u.parent_tool_use_id.is_none() => {
                current_reply = None;
                let mut kept = Vec::new();
                let mut prompt = false;
                let content =
                    std::mem::replace(&mut u.message.content, MessageContent::Blocks(Vec::new()));
                for b in content.into_blocks() {
                    match b {
                        ContentBlock::ToolResult(ref tr) => {
                            match open.iter().position(|(id, _)| *id == tr.tool_use_id) {
                                Some(i) => {
                                    open.remove(i);
                                    kept.push(b);
                                }
                                None => dropped.push(tr.tool_use_id.clone()),
                            }
                        }
                        ContentBlock::Text(ref t) if t.text.trim().is_empty() => {}
                        other => {
                            prompt = true;
                            kept.push(other);
                        }
                    }
                }
                if prompt {
                    // A prompt after unanswered calls: the conversation went on without them.
                    close_open(
                        &mut open,
                        RepairCause::ResultMissing,
                        session_id,
                        &mut frames,
                        &mut repairs,
                    );
                }
                if kept.is_empty() {
                    continue;
                }
                u.message.content = MessageContent::Blocks(kept);
                frames.push(Frame::User(u));
            }
            Frame::System(SystemFrame::Other(v))
                if v.get("subtype").and_then(serde_json::Value::as_str)
                    == Some(crate::wire::COMPACTED_HISTORY) =>
            {
                // A compaction: what the model saw from here on starts from this record. The
                // records before it stay in the file; the conversation is rebuilt from it.
                let Ok(messages) = serde_json::from_value::<Vec<ApiMessage>>(
                    v.get("messages").cloned().unwrap_or_default(),
                ) else {
                    tracing::warn!("a compacted history that cannot be read was skipped");
                    continue;
                };
                frames.clear();
                open.clear();
                repairs.clear();
                dropped.clear();
                current_reply = None;
                for (i, m) in messages.into_iter().enumerate() {
                    let blocks = m.content.into_blocks();
                    match m.role {
                        Role::User => frames.push(user_frame(session_id, blocks, None)),
                        Role::Assistant => {
                            let id = format!("msg_compacted_{}_{i}", r.uuid);
                            for b in &blocks {
                                if let ContentBlock::ToolUse(t) = b {
                                    open.push((t.id.clone(), t.name.clone()));
                                }
                            }
                            frames.push(assistant_frame(session_id, id, blocks));
                        }
                    }
                    if m.role == Role::User {
                        open.clear();
                    }
                }
            }
            _ => {}
        }
    }
    close_open(
        &mut open,
        RepairCause::SessionEnded,
        session_id,
        &mut frames,
        &mut repairs,
    );

    let missing_prompt = matches!(frames.first(), Some(Frame::Assistant(_)));
    if missing_prompt {
        frames.insert(0, user_frame(
            session_id,
            vec![ContentBlock::text("(The first prompt of this session could not be read back from its transcript.)")],
            None,
        ));
    }
    let first_prompt = frames.iter().find_map(|f| match f {
        Frame::User(u) => u
            .message
            .content
            .clone()
            .into_blocks()
            .into_iter()
            .find_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text),
                _ => None,
            }),
        _ => None,
    });
    let conversation = if keep_frames {
        messages(frames.iter().cloned())
    } else {
        messages(std::mem::take(&mut frames))
    };
    let (history, leftover) =
        History::rebuild(conversation, |c| RepairCause::ResultMissing.text(&c.name));
    // The frame pass closes every call, so the history has nothing left to repair, except
    // in inputs no keel writes (a reply that repeats a call id, say): still well-formed.
    if !leftover.is_empty() {
        tracing::warn!("transcript rebuild: calls {leftover:?} were repaired only in the history");
    }
    Rebuilt {
        history,
        frames,
        repairs,
        dropped_results: dropped,
        missing_prompt,
        first_prompt,
    }
}

/// Merge frames into API messages (taking their content: pass clones to keep the frames).
fn messages(frames: impl IntoIterator<Item = Frame>) -> Vec<ApiMessage> {
    let mut out: Vec<ApiMessage> = Vec::new();
    let mut last_reply: Option<String> = None;
    for f in frames {
        match f {
            Frame::Assistant(a) => {
                let id = a.message.id;
                let blocks: Vec<ContentBlock> = a
                    .message
                    .content
                    .into_iter()
                    .filter(|b| !matches!(b, ContentBlock::Text(t) if t.text.is_empty()))
                    .collect();
                if blocks.is_empty() {
                    continue;
                }
                match out.last_mut() {
                    // Blocks of the same reply; or a reply that followed a reply without tool
                    // calls (roles must alternate, and nothing is owed between them).
                    Some(m)
                        if m.role == Role::Assistant
                            && (last_reply.as_deref() == Some(id.as_str())
                                || !m
                                    .content
                                    .blocks()
                                    .iter()
                                    .any(|b| matches!(b, ContentBlock::ToolUse(_)))) =>
                    {
                        extend(m, blocks)
                    }
                    _ => out.push(ApiMessage {
                        role: Role::Assistant,
                        content: MessageContent::Blocks(blocks),
                    }),
                }
                last_reply = Some(id);
            }
            Frame::User(u) => {
                let blocks = u.message.content.into_blocks();
                match out.last_mut() {
                    Some(m) if m.role == Role::User => extend(m, blocks),
                    _ => out.push(ApiMessage {
                        role: Role::User,
                        content: MessageContent::Blocks(blocks),
                    }),
                }
            }
            _ => {}
        }
    }
    out
}

fn extend(m: &mut ApiMessage, blocks: Vec<ContentBlock>) {
    let mut all =
        std::mem::replace(&mut m.content, MessageContent::Blocks(Vec::new())).into_blocks();
    all.extend(blocks);
    m.content = MessageContent::Blocks(all);
}

fn close_open(
    open: &mut Vec<(String, String)>,
    cause: RepairCause,
    session_id: &str,
    frames: &mut Vec<Frame>,
    repairs: &mut Vec<Repair>,
) {
    for (id, name) in open.drain(..) {
        let frame = user_frame(
            session_id,
            vec![ContentBlock::tool_result(&id, cause.text(&name), true)],
            Some(json!([{ "id": id, "repair": cause.as_str() }])),
        );
        frames.push(frame.clone());
        repairs.push(Repair {
            tool_use_id: id,
            tool_name: name,
            cause,
            frame,
        });
    }
}

fn assistant_frame(session_id: &str, id: String, blocks: Vec<ContentBlock>) -> Frame {
    Frame::Assistant(keel_protocol::AssistantFrame {
        message: keel_protocol::content::AssistantMessage {
            id,
            kind: "message".into(),
            role: Role::Assistant,
            model: "<compacted>".into(),
            content: blocks,
            stop_reason: None,
            stop_sequence: None,
            usage: Default::default(),
            extra: Extra::new(),
        },
        parent_tool_use_id: None,
        session_id: session_id.to_owned(),
        uuid: new_uuid(),
        timestamp: Some(now_rfc3339()),
        request_id: None,
        extra: Extra::new(),
    })
}

fn user_frame(
    session_id: &str,
    blocks: Vec<ContentBlock>,
    meta: Option<serde_json::Value>,
) -> Frame {
    Frame::User(UserFrame {
        message: UserMessage {
            role: Role::User,
            content: MessageContent::Blocks(blocks),
            extra: Extra::new(),
        },
        parent_tool_use_id: None,
        session_id: session_id.to_owned(),
        uuid: Some(new_uuid()),
        timestamp: Some(now_rfc3339()),
        tool_use_result: None,
        tool_result_meta: meta,
        extra: Extra::new(),
    })
}
