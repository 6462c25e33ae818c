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
use crate::history::{History, HistoryBuilder};
use crate::ids::{new_uuid, now_rfc3339};
use keel_model::EncodedMessage;

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
    let mut r = Rebuilder::new(session_id, true);
    records.into_iter().for_each(|rec| r.push(rec));
    r.finish()
}

/// [`rebuild`] for a resume, which needs the history but not the frames: their content moves
/// into the history instead of being copied (`frames` is left empty), so a long transcript is
/// held once, not twice.
pub fn rebuild_history(records: Vec<Record>, session_id: &str) -> Rebuilt {
    let mut r = Rebuilder::new(session_id, false);
    records.into_iter().for_each(|rec| r.push(rec));
    r.finish()
}

/// The rebuild a record at a time, as the reader streams them: nothing is held but the
/// conversation being built (and the frames, when they are kept).
///
/// Frames pass through two stages: the first closes calls whose result never came (a
/// synthetic result frame, inserted where the result belonged); the second merges frames into
/// API messages and hands each finished message to the history.
pub struct Rebuilder {
    session_id: String,
    keep_frames: bool,
    frames: Vec<Frame>,
    repairs: Vec<Repair>,
    dropped: Vec<String>,
    /// Calls of the assistant message being read that have no result yet, in call order.
    open: Vec<(String, String)>,
    current_reply: Option<String>,
    /// No frame of the conversation has been passed on yet.
    first: bool,
    missing_prompt: bool,
    first_prompt: Option<String>,
    merge: Merge,
}

/// Frames → API messages → the history. The message being merged is held until a frame that
/// cannot belong to it arrives.
struct Merge {
    building: Option<ApiMessage>,
    last_reply: Option<String>,
    history: HistoryBuilder<fn(&keel_protocol::ToolUseBlock) -> String>,
}

fn missing_text(c: &keel_protocol::ToolUseBlock) -> String {
    RepairCause::ResultMissing.text(&c.name)
}

impl Merge {
    fn new() -> Self {
        Self {
            building: None,
            last_reply: None,
            history: HistoryBuilder::new(missing_text as fn(&_) -> String),
        }
    }

    fn push(&mut self, f: Frame) {
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
                    return;
                }
                match &mut self.building {
                    // Blocks of the same reply; or a reply that followed a reply without tool
                    // calls (roles must alternate, and nothing is owed between them).
                    Some(m)
                        if m.role == Role::Assistant
                            && (self.last_reply.as_deref() == Some(id.as_str())
                                || !m
                                    .content
                                    .blocks()
                                    .iter()
                                    .any(|b| matches!(b, ContentBlock::ToolUse(_)))) =>
                    {
                        extend(m, blocks)
                    }
                    _ => self.start(ApiMessage {
                        role: Role::Assistant,
                        content: MessageContent::Blocks(blocks),
                    }),
                }
                self.last_reply = Some(id);
            }
            Frame::User(u) => {
                let blocks = u.message.content.into_blocks();
                match &mut self.building {
                    Some(m) if m.role == Role::User => extend(m, blocks),
                    _ => self.start(ApiMessage {
                        role: Role::User,
                        content: MessageContent::Blocks(blocks),
                    }),
                }
            }
            _ => {}
        }
    }

    fn start(&mut self, m: ApiMessage) {
        if let Some(done) = self.building.replace(m) {
            self.history.push(done);
        }
    }

    fn finish(mut self) -> History {
        if let Some(done) = self.building.take() {
            self.history.push(done);
        }
        let (history, leftover) = self.history.finish();
        // The frame pass closes every call, so the history has nothing left to repair, except
        // in inputs no keel writes (a reply that repeats a call id, say): still well-formed.
        if !leftover.is_empty() {
            tracing::warn!(
                "transcript rebuild: calls {leftover:?} were repaired only in the history"
            );
        }
        history
    }
}

/// A rebuild's state between two records, when no call is waiting for its result: what a
/// resume can start from instead of reading the records before it again.
#[derive(Debug)]
pub struct RebuildState {
    /// The history's messages, encoded, then the message being merged (if any).
    pub messages: Vec<EncodedMessage>,
    /// How many of `messages` are in the history (the one after them is being merged).
    pub history_len: usize,
    /// The reply whose frames were being read.
    pub current_reply: Option<String>,
    /// The reply id of the message being merged.
    pub last_reply: Option<String>,
    /// No frame of the conversation had been passed on yet.
    pub first: bool,
    /// A placeholder prompt was put first.
    pub missing_prompt: bool,
    /// The first prompt's text.
    pub first_prompt: Option<String>,
}

impl Rebuilder {
    /// The state so far, if it can be saved: frames are not kept, and no call is open.
    pub fn state(&self) -> Option<RebuildState> {
        if self.keep_frames || !self.open.is_empty() {
            return None;
        }
        let (mut messages, history_len) = match self.merge.history.idle_history() {
            Some(h) => {
                let mut messages: Vec<EncodedMessage> = h.sealed().to_vec();
                messages.extend(h.last().map(EncodedMessage::new));
                let n = messages.len();
                messages.extend(self.merge.building.as_ref().map(EncodedMessage::new));
                (messages, n)
            }
            // The results of the last reply's calls are the message being merged, and every
            // call has its result (`open` is empty): no later frame can add to what they owe,
            // so the message can go into the history now. What follows merges into it there
            // just as it would have here.
            None => {
                let building = self.merge.building.clone()?;
                if building.role != Role::User {
                    return None;
                }
                let h = self.merge.history.idle_with(building)?;
                let mut messages: Vec<EncodedMessage> = h.sealed().to_vec();
                messages.extend(h.last().map(EncodedMessage::new));
                let n = messages.len();
                (messages, n)
            }
        };
        messages.shrink_to_fit();
        Some(RebuildState {
            messages,
            history_len,
            current_reply: self.current_reply.clone(),
            last_reply: self.merge.last_reply.clone(),
            first: self.first,
            missing_prompt: self.missing_prompt,
            first_prompt: self.first_prompt.clone(),
        })
    }

    /// A rebuild that goes on from a saved state (the frames are not kept). `None` when the
    /// state does not hold together (a message that does not decode, counts that disagree).
    pub fn from_state(session_id: &str, st: RebuildState) -> Option<Self> {
        let RebuildState {
            mut messages,
            history_len,
            current_reply,
            last_reply,
            first,
            missing_prompt,
            first_prompt,
        } = st;
        if history_len > messages.len() || messages.len() > history_len + 1 {
            return None;
        }
        let building = match messages.len() > history_len {
            true => Some(messages.pop()?.decode()?),
            false => None,
        };
        let last = match messages.pop() {
            Some(e) => Some(e.decode()?),
            None => None,
        };
        let history = History::from_parts(messages, last);
        let mut r = Rebuilder::new(session_id, false);
        r.current_reply = current_reply;
        r.first = first;
        r.missing_prompt = missing_prompt;
        r.first_prompt = first_prompt;
        r.merge = Merge {
            building,
            last_reply,
            history: HistoryBuilder::resume(history, missing_text as fn(&_) -> String),
        };
        Some(r)
    }

    /// A rebuild whose synthetic frames are stamped `session_id`; `keep_frames`: also keep the
    /// repaired frames (a fork copies them), at the cost of a second copy of their content.
    pub fn new(session_id: &str, keep_frames: bool) -> Self {
        Self {
            session_id: session_id.to_owned(),
            keep_frames,
            frames: Vec::new(),
            repairs: Vec::new(),
            dropped: Vec::new(),
            open: Vec::new(),
            current_reply: None,
            first: true,
            missing_prompt: false,
            first_prompt: None,
            merge: Merge::new(),
        }
    }

    /// Pass a frame of the conversation on to the merge (and keep it, when frames are kept).
    fn emit(&mut self, f: Frame) {
        if std::mem::take(&mut self.first) && matches!(f, Frame::Assistant(_)) {
            self.missing_prompt = true;
            self.emit(user_frame(
                &self.session_id,
                vec![ContentBlock::text(
                    "(The first prompt of this session could not be read back from its transcript.)",
                )],
                None,
            ));
        }
        if self.first_prompt.is_none() {
            if let Frame::User(u) = &f {
                self.first_prompt = u.message.content.blocks().iter().find_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                });
            }
        }
        if self.keep_frames {
            self.frames.push(f.clone());
        }
        self.merge.push(f);
    }

    /// Start again from nothing (a compaction record: what the model saw starts there).
    fn reset(&mut self) {
        self.frames.clear();
        self.open.clear();
        self.repairs.clear();
        self.dropped.clear();
        self.current_reply = None;
        self.first = true;
        self.missing_prompt = false;
        self.first_prompt = None;
        self.merge = Merge::new();
    }

    /// The next record, in file order.
    pub fn push(&mut self, r: Record) {
        match r.frame {
            Frame::Assistant(a) if a.parent_tool_use_id.is_none() => {
                if self.current_reply.as_deref() != Some(a.message.id.as_str()) {
                    self.close_open(RepairCause::ResultMissing);
                    self.current_reply = Some(a.message.id.clone());
                }
                for b in &a.message.content {
                    if let ContentBlock::ToolUse(t) = b {
                        self.open.push((t.id.clone(), t.name.clone()));
                    }
                }
                self.emit(Frame::Assistant(a));
            }
            Frame::User(mut u) if u.parent_tool_use_id.is_none() => {
                self.current_reply = None;
                let mut kept = Vec::new();
                let mut prompt = false;
                let content =
                    std::mem::replace(&mut u.message.content, MessageContent::Blocks(Vec::new()));
                for b in content.into_blocks() {
                    match b {
                        ContentBlock::ToolResult(ref tr) => {
                            match self.open.iter().position(|(id, _)| *id == tr.tool_use_id) {
                                Some(i) => {
                                    self.open.remove(i);
                                    kept.push(b);
                                }
                                None => self.dropped.push(tr.tool_use_id.clone()),
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
                    self.close_open(RepairCause::ResultMissing);
                }
                if kept.is_empty() {
                    return;
                }
                u.message.content = MessageContent::Blocks(kept);
                // What the tool reported besides its result is not part of the conversation.
                if !self.keep_frames {
                    u.tool_use_result = None;
                }
                self.emit(Frame::User(u));
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
                    return;
                };
                self.reset();
                for (i, m) in messages.into_iter().enumerate() {
                    let blocks = m.content.into_blocks();
                    match m.role {
                        Role::User => {
                            let f = user_frame(&self.session_id, blocks, None);
                            self.emit(f);
                            self.open.clear();
                        }
                        Role::Assistant => {
                            let id = format!("msg_compacted_{}_{i}", r.uuid);
                            for b in &blocks {
                                if let ContentBlock::ToolUse(t) = b {
                                    self.open.push((t.id.clone(), t.name.clone()));
                                }
                            }
                            let f = assistant_frame(&self.session_id, id, blocks);
                            self.emit(f);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The conversation: every call still open is closed as ended with the session.
    pub fn finish(mut self) -> Rebuilt {
        self.close_open(RepairCause::SessionEnded);
        Rebuilt {
            history: self.merge.finish(),
            frames: self.frames,
            repairs: self.repairs,
            dropped_results: self.dropped,
            missing_prompt: self.missing_prompt,
            first_prompt: self.first_prompt,
        }
    }

    fn close_open(&mut self, cause: RepairCause) {
        for (id, name) in std::mem::take(&mut self.open) {
            let frame = user_frame(
                &self.session_id,
                vec![ContentBlock::tool_result(&id, cause.text(&name), true)],
                Some(json!([{ "id": id, "repair": cause.as_str() }])),
            );
            self.repairs.push(Repair {
                tool_use_id: id,
                tool_name: name,
                cause,
                frame: frame.clone(),
            });
            self.emit(frame);
        }
    }
}

fn extend(m: &mut ApiMessage, blocks: Vec<ContentBlock>) {
    let mut all =
        std::mem::replace(&mut m.content, MessageContent::Blocks(Vec::new())).into_blocks();
    all.extend(blocks);
    m.content = MessageContent::Blocks(all);
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
