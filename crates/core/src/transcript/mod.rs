//! Durable session transcripts: one append-only JSONL file per session, written ahead of every
//! consumer, read back tolerantly, and rebuilt into a well-formed history on resume.
//!
//! Layout: `$KEEL_HOME/projects/<slug of the working directory>/<session id>.jsonl`. The first
//! line describes the session (a [`SessionHeader`]); every later line is one frame record:
//! `{"type":"frame","uuid","parent_uuid","session_id","timestamp","frame":{...}}`, each record's
//! `parent_uuid` naming the record before it. docs/sessions.md is the user-facing description.
//!
//! - [`writer`]: [`TranscriptWriter`], the [`Persist`](crate::persist::Persist) behind the emitter.
//! - [`reader`]: parsing a file; a torn tail is found (and later cut), a damaged line skipped and
//!   reported, the rest still read.
//! - [`rebuild`]: records → the conversation, with every open `tool_use` closed by a synthetic
//!   result that says why.
//! - [`store`]: where files live; new, resume, continue, fork; listing sessions.

mod cc;
mod chain;
mod chain_load;
pub mod checkpoint;
mod link;
mod list;
pub mod mirror;
mod notices;
mod position;
mod reader;
mod rebuild;
mod store;
mod truncate;
mod writer;

use std::path::{Path, PathBuf};

use keel_protocol::Extra;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use list::SessionSummary;
pub use mirror::{MirrorBatch, MirrorSink};
use reader::parse_reader_at;
pub use reader::{
    parse, parse_reader, parse_reader_with, read_file, LineIssue, Loaded, Record, TornTail,
};
pub use rebuild::{
    rebuild, rebuild_history, RebuildState, Rebuilder, Rebuilt, Repair, RepairCause,
};

pub use chain_load::load_file;
pub use link::{ChainIssue, ChainIssueKind, ChainReport};
pub use store::{config_root, OpenError, OpenRequest, Opened, Start, Store};
pub use truncate::{load_truncated, TruncateError, Truncation};
pub use writer::TranscriptWriter;

/// The record format version this keel writes (and the newest it reads).
/// Schema 1: keel's old `{"type":"frame"}` records; schema 2: Claude Code's entries.
pub const SCHEMA: u32 = 2;

/// When the transcript is fsynced. Every record is handed to the OS (one `write` per line)
/// before the frame is emitted in both modes; the modes differ in when it reaches the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncMode {
    /// At every turn boundary (after each batch of tool results) and before and after every
    /// `result` (the default). A kill of keel loses nothing; a power loss may lose the current
    /// turn's last records.
    #[default]
    Turn,
    /// After every record as well (`KEEL_FSYNC=message`): a power loss loses at most the record
    /// being written, at the cost of one fsync per frame.
    Message,
}

impl FsyncMode {
    /// Parse a `KEEL_FSYNC` value (`turn` or `message`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "turn" => Some(FsyncMode::Turn),
            "message" => Some(FsyncMode::Message),
            _ => None,
        }
    }

    /// The `KEEL_FSYNC` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FsyncMode::Turn => "turn",
            FsyncMode::Message => "message",
        }
    }
}

/// The first record of every transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// `"keel-session"` (`"session"` in files of schema 1).
    #[serde(rename = "type")]
    pub kind: String,
    /// The record format version ([`SCHEMA`]).
    pub schema: u32,
    /// The keel that created the file.
    pub keel_version: String,
    /// The session id (also the file name).
    pub session_id: String,
    /// The working directory of the session.
    pub cwd: String,
    /// The model when the session was created.
    pub model: String,
    /// When the session was created (RFC 3339).
    pub created_at: String,
    /// For a fork: `{"session_id": ..., "path": ...}` of the session it was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<Value>,
    /// Fields this keel does not know (written by a newer one).
    #[serde(flatten)]
    pub extra: Extra,
}

impl SessionHeader {
    /// A header for a session created now.
    pub fn new(session_id: &str, cwd: &Path, model: &str) -> Self {
        Self {
            kind: cc::KEEL_SESSION.to_owned(),
            schema: SCHEMA,
            keel_version: crate::KEEL_VERSION.to_owned(),
            session_id: session_id.to_owned(),
            cwd: cwd.display().to_string(),
            model: model.to_owned(),
            created_at: crate::ids::now_rfc3339(),
            forked_from: None,
            extra: Extra::new(),
        }
    }
}

/// The project key of a working directory, as Claude Code and its SDKs name the directory of
/// its sessions: every character that is not an ASCII letter or digit becomes `-`
/// (`/work/main` → `-work-main`); a key over 200 characters is cut to 200 and gets `-` and a
/// 32-bit string hash of the whole path in base 36, so it stays within file-name limits and
/// unique. Characters are Unicode scalar values, as the SDKs' function counts them.
pub fn slug(cwd: &Path) -> String {
    let path = cwd.to_string_lossy();
    let full: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    const MAX: usize = 200;
    if full.chars().count() <= MAX {
        return full;
    }
    let cut: String = full.chars().take(MAX).collect();
    format!("{cut}-{}", string_hash(&path))
}

/// The directory name keel gave a working directory before it used Claude Code's project key:
/// the same for paths up to 200 bytes of ASCII; longer ones had an FNV-1a hex hash. Only
/// used to find old sessions.
pub fn slug_v1(cwd: &Path) -> String {
    let full: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    const MAX: usize = 200;
    if full.len() <= MAX {
        return full;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in cwd.to_string_lossy().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}-{h:016x}", &full[..MAX])
}

/// The JavaScript string hash (`h = (h << 5) - h + c | 0` over the characters), absolute
/// value, in base 36.
fn string_hash(s: &str) -> String {
    let mut h: i32 = 0;
    for c in s.chars() {
        h = (h << 5).wrapping_sub(h).wrapping_add(c as i32);
    }
    let mut n = h.unsigned_abs();
    if n == 0 {
        return "0".to_owned();
    }
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// What a notice is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    /// A damaged line in the middle was skipped.
    CorruptLine,
    /// An incomplete last record was ignored (and cut off before appending).
    TornTail,
    /// Tool calls without results were closed with synthetic results.
    RepairedToolCalls,
    /// The first message was not a prompt; a placeholder prompt was put first.
    MissingPrompt,
    /// The file was written by a newer keel.
    NewerSchema,
    /// Entries of a type keel cannot map onto the conversation were not sent to the model.
    UnmappedEntry,
    /// An entry's `parentUuid` leads back to the entry itself: the history starts after it.
    ChainCycle,
    /// An entry's `parentUuid` names no entry of the file: the history starts at it.
    DanglingParent,
    /// Messages on other branches than the newest (a rewind, an edited prompt) were not sent.
    OtherBranches,
}

impl NoticeKind {
    /// The `kind` field of the warning frame.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::CorruptLine => "corrupt_line",
            NoticeKind::TornTail => "torn_tail",
            NoticeKind::RepairedToolCalls => "repaired_tool_calls",
            NoticeKind::MissingPrompt => "missing_prompt",
            NoticeKind::NewerSchema => "newer_schema",
            NoticeKind::UnmappedEntry => "unmapped_entry",
            NoticeKind::ChainCycle => "chain_cycle",
            NoticeKind::DanglingParent => "dangling_parent",
            NoticeKind::OtherBranches => "other_branches",
        }
    }
}

/// Something found while loading a transcript that the user should know: shown on stderr and
/// emitted as a `system/warning` frame at the start of the resumed run.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    /// What kind of problem.
    pub kind: NoticeKind,
    /// What happened and what keel did, for people.
    pub message: String,
    /// The transcript.
    pub path: PathBuf,
    /// The line, when one line is concerned (1-based).
    pub line: Option<usize>,
    /// The tool calls concerned (repairs).
    pub tool_use_ids: Vec<String>,
    /// The entry type concerned (unmapped entries).
    pub entry_type: Option<String>,
    /// The entry concerned (a break in the chain): its `uuid`.
    pub entry_uuid: Option<String>,
}

impl Notice {
    /// The extra fields of the `system/warning` frame: `source`, `kind`, `path`, `line`, ...
    pub fn fields(&self) -> Extra {
        let mut m = Extra::new();
        m.insert("source".into(), json!("transcript"));
        m.insert("kind".into(), json!(self.kind.as_str()));
        m.insert("path".into(), json!(self.path.display().to_string()));
        if let Some(l) = self.line {
            m.insert("line".into(), json!(l));
        }
        if !self.tool_use_ids.is_empty() {
            m.insert("tool_use_ids".into(), json!(self.tool_use_ids));
        }
        if let Some(t) = &self.entry_type {
            m.insert("entry_type".into(), json!(t));
        }
        if let Some(u) = &self.entry_uuid {
            m.insert("entry_uuid".into(), json!(u));
        }
        m
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cc;
#[cfg(test)]
mod tests_chain;
