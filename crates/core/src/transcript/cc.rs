//! Claude Code's transcript entries, keel's on-disk format: frames to entries and back.
//!
//! A `user` or `assistant` frame is one entry of Claude Code's shape (`parentUuid`,
//! `isSidechain`, `type`, `message`, `uuid`, `timestamp`, `cwd`, `sessionId`, `version`, and
//! `requestId` / `toolUseResult`), chained by `parentUuid` to the entry before it in the same
//! file, so the SDKs' readers and Claude Code's resume follow it. What keel knows about such a
//! frame and Claude Code has no field for (the permission outcome of a tool result, ...) sits
//! in one `keel` object that other readers skip. Every other frame (system notices, retries,
//! results, compactions, ...) is a `keel-frame` entry wrapping the wire frame: a type Claude
//! Code's readers do not know and so pass over, and no `parentUuid`, so it never breaks the
//! chain.

use keel_protocol::frames::UserMessage;
use keel_protocol::{AssistantFrame, ContentBlock, Extra, Frame, MessageContent, UserFrame};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The `type` of keel's wrapped frames.
pub const KEEL_FRAME: &str = "keel-frame";
/// The `type` of keel's session header (first line of a file keel created).
pub const KEEL_SESSION: &str = "keel-session";

/// Where an entry goes: the facts every entry of one file shares.
pub(super) struct Place<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The session's working directory.
    pub cwd: &'a str,
    /// The uuid of the previous `user`/`assistant` entry of the same file.
    pub parent: Option<&'a str>,
    /// For a subagent's file: its agent id (the entries are a sidechain).
    pub agent_id: Option<&'a str>,
}

/// What keel keeps about a message that Claude Code has no field for.
#[derive(Serialize, Deserialize, Default)]
struct KeelFields<'a> {
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    parent_tool_use_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_result_meta: Option<Value>,
    #[serde(default, flatten)]
    extra: Extra,
}

impl KeelFields<'_> {
    fn is_empty(&self) -> bool {
        self.parent_tool_use_id.is_none()
            && self.tool_result_meta.is_none()
            && self.extra.is_empty()
    }
}

/// A user message as Claude Code writes it: a prompt that is one text block is a string.
#[derive(Serialize)]
struct UserMessageOut<'a> {
    role: &'static str,
    content: ContentOut<'a>,
    #[serde(flatten)]
    extra: &'a Extra,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ContentOut<'a> {
    Text(&'a str),
    Blocks(&'a MessageContent),
}

#[derive(Serialize)]
#[serde(untagged)]
enum MessageOut<'a> {
    User(UserMessageOut<'a>),
    Assistant(&'a keel_protocol::content::AssistantMessage),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EntryOut<'a> {
    parent_uuid: Option<&'a str>,
    is_sidechain: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<&'a str>,
    user_type: &'static str,
    cwd: &'a str,
    session_id: &'a str,
    version: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    message: MessageOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    uuid: &'a str,
    timestamp: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_result: Option<&'a Value>,
    #[serde(skip_serializing_if = "KeelFields::is_empty")]
    keel: KeelFields<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KeelFrameOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    uuid: &'a str,
    session_id: &'a str,
    timestamp: &'a str,
    frame: &'a Frame,
}

/// One line (newline included) for `frame` at `place`: `(uuid, joins the chain, line)`.
/// `stream_event` frames are partial and never reach here.
pub(super) fn entry_line(
    frame: &Frame,
    place: &Place<'_>,
    uuid: &str,
    timestamp: &str,
) -> Result<(bool, Vec<u8>), serde_json::Error> {
    let entry = |kind, message, request_id, tool_use_result, keel| EntryOut {
        parent_uuid: place.parent,
        is_sidechain: place.agent_id.is_some(),
        agent_id: place.agent_id,
        user_type: "external",
        cwd: place.cwd,
        session_id: place.session_id,
        version: crate::KEEL_VERSION,
        kind,
        message,
        request_id,
        uuid,
        timestamp,
        tool_use_result,
        keel,
    };
    let mut line = match frame {
        // A subagent's frame that reaches this file (its own file is written elsewhere) is
        // not part of this conversation: keel's own entry, outside the chain.
        Frame::User(UserFrame {
            parent_tool_use_id: Some(_),
            ..
        })
        | Frame::Assistant(AssistantFrame {
            parent_tool_use_id: Some(_),
            ..
        }) => return keel_frame(frame, place, uuid, timestamp),
        Frame::User(u) => {
            let content = match &u.message.content {
                MessageContent::Text(t) => ContentOut::Text(t),
                MessageContent::Blocks(b) => match b.as_slice() {
                    [ContentBlock::Text(t)] if is_plain_text(t) => ContentOut::Text(&t.text),
                    _ => ContentOut::Blocks(&u.message.content),
                },
            };
            let keel = KeelFields {
                parent_tool_use_id: u.parent_tool_use_id.as_deref().map(Into::into),
                tool_result_meta: u.tool_result_meta.clone(),
                extra: u.extra.clone(),
            };
            let message = MessageOut::User(UserMessageOut {
                role: "user",
                content,
                extra: &u.message.extra,
            });
            serde_json::to_vec(&entry(
                "user",
                message,
                None,
                u.tool_use_result.as_ref(),
                keel,
            ))?
        }
        Frame::Assistant(a) => {
            let keel = KeelFields {
                parent_tool_use_id: a.parent_tool_use_id.as_deref().map(Into::into),
                tool_result_meta: None,
                extra: a.extra.clone(),
            };
            serde_json::to_vec(&entry(
                "assistant",
                MessageOut::Assistant(&a.message),
                a.request_id.as_deref(),
                None,
                keel,
            ))?
        }
        other => return keel_frame(other, place, uuid, timestamp),
    };
    line.push(b'\n');
    Ok((true, line))
}

fn keel_frame(
    frame: &Frame,
    place: &Place<'_>,
    uuid: &str,
    timestamp: &str,
) -> Result<(bool, Vec<u8>), serde_json::Error> {
    let mut line = serde_json::to_vec(&KeelFrameOut {
        kind: KEEL_FRAME,
        uuid,
        session_id: place.session_id,
        timestamp,
        frame,
    })?;
    line.push(b'\n');
    Ok((false, line))
}

/// A text block that is nothing but text (no citations, no cache control): written as the
/// string Claude Code writes for a prompt, read back as the same block.
fn is_plain_text(t: &keel_protocol::content::TextBlock) -> bool {
    t.extra.is_empty()
}

/// A `user` or `assistant` entry as read (Claude Code's or keel's).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EntryIn<'a> {
    #[serde(rename = "type")]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub parent_uuid: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub timestamp: Option<String>,
    #[serde(default)]
    pub is_sidechain: bool,
    /// Claude Code's `isMeta`: a message sent to the model but not shown (a caveat, ...).
    #[serde(default)]
    is_meta: Option<bool>,
    /// Claude Code's `teamName`: written by a teammate agent.
    #[serde(default)]
    team_name: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    tool_use_result: Option<Value>,
    #[serde(default, borrow)]
    keel: Option<KeelFields<'a>>,
}

/// Why an entry of Claude Code's format cannot be turned into a frame.
#[derive(Debug, thiserror::Error)]
pub enum EntryProblem {
    /// A message entry without its `message`.
    #[error("a {0} entry without a message")]
    NoMessage(String),
    /// The message does not read as a user or assistant message.
    #[error("{0} message that cannot be read ({1})")]
    Unreadable(&'static str, String),
}

impl EntryIn<'_> {
    /// Whether this is a message entry (`user` or `assistant` with a `message`).
    pub fn is_message(&self) -> bool {
        matches!(self.kind.as_ref(), "user" | "assistant") && self.message.is_some()
    }

    /// Whether Claude Code would never pick this message as the newest of the main
    /// conversation (`isMeta`, or written by a teammate).
    pub fn is_meta(&self) -> bool {
        self.is_meta == Some(true) || self.team_name.is_some()
    }

    /// The frame this entry stands for.
    pub fn into_frame(self) -> Result<Frame, EntryProblem> {
        let message = self
            .message
            .ok_or_else(|| EntryProblem::NoMessage(self.kind.to_string()))?;
        let keel = self.keel.unwrap_or_default();
        let session_id = self.session_id.unwrap_or_default();
        match self.kind.as_ref() {
            "user" => {
                let mut message: UserMessage = serde_json::from_str(message.get())
                    .map_err(|e| EntryProblem::Unreadable("a user", e.to_string()))?;
                // A prompt written as a string is the text block keel's frames carry.
                if let MessageContent::Text(t) = &mut message.content {
                    let text = std::mem::take(t);
                    message.content = MessageContent::Blocks(vec![ContentBlock::text(text)]);
                }
                Ok(Frame::User(UserFrame {
                    message,
                    parent_tool_use_id: keel.parent_tool_use_id.map(Into::into),
                    session_id,
                    uuid: self.uuid,
                    timestamp: self.timestamp,
                    tool_use_result: self.tool_use_result,
                    tool_result_meta: keel.tool_result_meta,
                    extra: keel.extra,
                }))
            }
            _ => {
                let message = serde_json::from_str(message.get())
                    .map_err(|e| EntryProblem::Unreadable("an assistant", e.to_string()))?;
                Ok(Frame::Assistant(AssistantFrame {
                    message,
                    parent_tool_use_id: keel.parent_tool_use_id.map(Into::into),
                    session_id,
                    uuid: self.uuid.unwrap_or_default(),
                    timestamp: self.timestamp,
                    request_id: self.request_id,
                    extra: keel.extra,
                }))
            }
        }
    }
}

/// Entry types Claude Code writes for its own bookkeeping, which carry nothing of the
/// conversation the model sees: skipped without a word.
pub(super) fn is_bookkeeping(kind: &str) -> bool {
    matches!(
        kind,
        "queue-operation"
            | "last-prompt"
            | "atis-latch"
            | "cost-state"
            | "tools-used"
            | "file-history-snapshot"
            | "summary"
            | "custom-title"
            | "ai-title"
            | "tag"
            | "agent-name"
            | "agent_metadata"
            | "permission-mode"
            | "mode"
    )
}
