//! Reading a transcript tolerantly: every good record is kept; a damaged line in the middle is
//! skipped and reported; an incomplete last record (a crash mid-append) is found so that the
//! writer can cut it off before appending.

use std::path::{Path, PathBuf};

use keel_protocol::Frame;
use serde_json::Value;

use super::cc::{is_bookkeeping, EntryIn, KEEL_FRAME, KEEL_SESSION};
use super::link::{Link, LinkKind};
use super::SessionHeader;

/// One frame record.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The line it was read from (1-based).
    pub line: usize,
    /// The record's id (the frame's `uuid` when it has one).
    pub uuid: String,
    /// The record written just before it.
    pub parent_uuid: Option<String>,
    /// The session that wrote it.
    pub session_id: String,
    /// When it was written (RFC 3339).
    pub timestamp: Option<String>,
    /// The frame.
    pub frame: Frame,
}

/// A damaged line that was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineIssue {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong with it, briefly.
    pub reason: String,
}

/// The incomplete record at the end of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// Its line (1-based).
    pub line: usize,
    /// Its length in bytes.
    pub bytes: u64,
    /// Why it is not a record.
    pub reason: String,
}

/// A transcript as read.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The file.
    pub path: PathBuf,
    /// The session header, when the first record is one.
    pub header: Option<SessionHeader>,
    /// Every frame record that could be read, in file order.
    pub records: Vec<Record>,
    /// Damaged lines that were skipped (not counting the torn tail).
    pub issues: Vec<LineIssue>,
    /// An incomplete last record.
    pub torn: Option<TornTail>,
    /// Length of the file up to the end of the last good record (its newline included, if it
    /// has one): everything after it is cut off before the next append.
    pub good_len: u64,
    /// The last good record has no newline yet (the writer adds one before appending).
    pub needs_newline: bool,
    /// The id of the last good record.
    pub last_uuid: Option<String>,
    /// The id of the last `user`/`assistant` entry of the main conversation: the
    /// `parentUuid` of the next one.
    pub last_chain_uuid: Option<String>,
    /// Entries that carry something keel does not send to the model (`attachment`, ...):
    /// `(type, how many, first line)`, in order of first appearance.
    pub unmapped: Vec<(String, usize, usize)>,
    /// The working directory named by the first entry that has one (a file without a header).
    pub first_cwd: Option<String>,
    /// The file is keel's own old format (`{"type":"frame"}` records).
    pub legacy: bool,
    /// What the walk of the `parentUuid` chain found (breaks, other branches).
    pub chain: super::link::ChainReport,
    /// Total length of the file.
    pub file_len: u64,
    /// Lines up to `good_len`.
    pub good_lines: usize,
}

/// Read and parse a transcript file, a line at a time (the file is never held whole).
pub fn read_file(path: &Path) -> std::io::Result<Loaded> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    parse_reader(
        path,
        std::io::BufReader::with_capacity(256 * 1024, file),
        len,
    )
}

/// What one line turned out to be.
enum Parsed {
    Header(Box<SessionHeader>),
    Record(Box<Read>),
    /// A well-formed record of a kind this keel does not know (kept in the file, ignored),
    /// and its place in the `parentUuid` chain when it has one.
    Unknown(Option<Link>),
    /// An entry keel cannot map onto the conversation (kept in the file, reported).
    Unmapped(String, Option<Link>),
    Blank,
}

/// Parse the bytes of a transcript.
pub fn parse(path: &Path, bytes: &[u8]) -> Loaded {
    // Reading from memory cannot fail.
    parse_reader(path, bytes, bytes.len() as u64).unwrap_or_default()
}

/// Parse a transcript from `reader`, a line at a time. `file_len` is reported as is.
pub fn parse_reader(
    path: &Path,
    reader: impl std::io::BufRead,
    file_len: u64,
) -> std::io::Result<Loaded> {
    let mut records = Vec::new();
    let mut out = parse_reader_with(path, reader, file_len, |r| records.push(r))?;
    out.records = records;
    Ok(out)
}

/// [`parse_reader`] that hands each record to `sink` as it is read instead of collecting them
/// (`records` is left empty): a long transcript is never held as records.
pub fn parse_reader_with(
    path: &Path,
    reader: impl std::io::BufRead,
    file_len: u64,
    sink: impl FnMut(Record),
) -> std::io::Result<Loaded> {
    parse_reader_at(path, reader, file_len, (0, 0), sink)
}

/// [`parse_reader_with`] for a reader positioned after the first `at.0` bytes (`at.1` lines)
/// of the file, which were read before: offsets and line numbers count from the file's start.
pub(crate) fn parse_reader_at(
    path: &Path,
    reader: impl std::io::BufRead,
    file_len: u64,
    at: (u64, usize),
    mut sink: impl FnMut(Record),
) -> std::io::Result<Loaded> {
    parse_reader_links(path, reader, file_len, at, |item| {
        if let Item::Record(r) = item {
            sink(r)
        }
    })
}

/// The header of a transcript (its first line), if it has a readable one.
pub(crate) fn read_header(path: &Path) -> Option<SessionHeader> {
    let f = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    // A header is small; a file whose first line is huge has no header worth reading.
    std::io::BufRead::read_until(
        &mut std::io::BufReader::new(std::io::Read::take(f, 64 * 1024)),
        b'\n',
        &mut line,
    )
    .ok()?;
    serde_json::from_slice(&line).ok()
}

/// What [`parse_reader_links`] hands on.
// Handed on once and never stored: boxing the record would cost an allocation per line.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Item {
    /// A record.
    Record(Record),
    /// An entry's place in Claude Code's `parentUuid` chain (a record's comes just before it).
    Link(Link),
}

/// [`parse_reader_at`] that also hands on the place in Claude Code's `parentUuid` chain of
/// every entry that has one, records and skipped entries alike.
pub(crate) fn parse_reader_links(
    path: &Path,
    mut reader: impl std::io::BufRead,
    file_len: u64,
    at: (u64, usize),
    mut each: impl FnMut(Item),
) -> std::io::Result<Loaded> {
    let mut seen_record = at.0 > 0;
    // In a subagent's own file, its sidechain entries are the conversation.
    let sidechain_is_main = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "subagents");
    let mut out = Loaded {
        path: path.to_owned(),
        file_len,
        good_len: at.0,
        good_lines: at.1,
        ..Loaded::default()
    };
    // Damaged lines after the last good record are cut with the torn tail, but still reported.
    let mut trailing_bad: Vec<(LineIssue, u64)> = Vec::new();
    let mut offset = at.0;
    let mut line_no = at.1;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let has_newline = buf.last() == Some(&b'\n');
        let raw = if has_newline { &buf[..n - 1] } else { &buf[..] };
        let next = offset + n as u64;
        match parse_line(raw, line_no, sidechain_is_main) {
            Ok(Parsed::Blank) => {}
            Ok(parsed) => {
                // Everything damaged before this good line is a middle line: skipped, reported.
                out.issues.extend(trailing_bad.drain(..).map(|(i, _)| i));
                out.good_len = next;
                out.good_lines = line_no;
                out.needs_newline = !has_newline;
                match parsed {
                    Parsed::Header(h) => {
                        if out.header.is_none() && !seen_record {
                            out.header = Some(*h);
                        }
                    }
                    Parsed::Record(r) => {
                        seen_record = true;
                        out.last_uuid = Some(r.record.uuid.clone());
                        if r.chained {
                            out.last_chain_uuid = Some(r.record.uuid.clone());
                        }
                        if out.first_cwd.is_none() {
                            out.first_cwd = r.cwd.clone();
                        }
                        out.legacy |= r.legacy;
                        if let Some(l) = r.link() {
                            each(Item::Link(l));
                        }
                        each(Item::Record(r.into_record()));
                    }
                    Parsed::Unmapped(kind, link) => {
                        if let Some(l) = link {
                            each(Item::Link(l));
                        }
                        match out.unmapped.iter_mut().find(|(k, _, _)| *k == kind) {
                            Some((_, n, _)) => *n += 1,
                            None => out.unmapped.push((kind, 1, line_no)),
                        }
                    }
                    Parsed::Unknown(Some(l)) => each(Item::Link(l)),
                    Parsed::Unknown(None) | Parsed::Blank => {}
                }
            }
            Err(problem) => trailing_bad.push((
                LineIssue {
                    line: line_no,
                    reason: problem.to_string(),
                },
                n as u64,
            )),
        }
        offset = next;
    }
    // The last damaged line is the torn tail; damaged lines before it (after the last good
    // record) are reported as damaged, and go with it when the file is cut.
    if let Some((last, bytes)) = trailing_bad.pop() {
        out.torn = Some(TornTail {
            line: last.line,
            bytes,
            reason: last.reason,
        });
        out.issues.extend(trailing_bad.into_iter().map(|(i, _)| i));
    }
    Ok(out)
}

/// Why a line of a transcript cannot be used (said in its `corrupt_line` notice).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineProblem {
    /// Only zero bytes: space an interrupted append had reserved.
    #[error("{0} zero bytes, left by an interrupted write")]
    Zeros(usize),
    /// JSON cut off at its end.
    #[error("the record is incomplete (cut off while being written)")]
    Incomplete,
    /// Not JSON at all.
    #[error("not valid JSON ({0})")]
    NotJson(String),
    /// JSON without a `type`.
    #[error("a JSON value that is not a keel record")]
    NotARecord,
    /// A frame record without its frame.
    #[error("a frame record without a frame")]
    NoFrame,
    /// An entry of a known type whose fields do not read.
    #[error("{what} that cannot be read ({why})")]
    Unreadable {
        /// What it is ("a user entry", "a frame", ...).
        what: String,
        /// The parser's words.
        why: String,
    },
    /// A message entry keel cannot turn into a frame.
    #[error("a {0} entry that cannot be read")]
    Unmappable(String),
}

fn unreadable(what: &str, e: impl std::fmt::Display) -> LineProblem {
    LineProblem::Unreadable {
        what: what.to_owned(),
        why: e.to_string(),
    }
}

fn parse_line(raw: &[u8], line: usize, sidechain_is_main: bool) -> Result<Parsed, LineProblem> {
    // Zero bytes are what a file system leaves where an interrupted append had reserved
    // space; a record may follow them on the same line.
    let zeros = raw.iter().take_while(|b| **b == 0).count();
    let rest = trim_ascii(&raw[zeros..]);
    if rest.is_empty() {
        return if zeros > 0 {
            Err(LineProblem::Zeros(zeros))
        } else {
            Ok(Parsed::Blank)
        };
    }
    // The fast paths, for the lines keel writes: one typed parse. Anything else, or a line
    // they cannot read, takes the general path, which words the error.
    if rest.starts_with(br#"{"parentUuid":"#) {
        if let Ok(e) = serde_json::from_slice::<EntryIn>(rest) {
            if let Some(parsed) = from_entry(e, line, sidechain_is_main) {
                return Ok(parsed);
            }
        }
    } else if rest.starts_with(br#"{"type":"keel-frame","#)
        || rest.starts_with(br#"{"type":"frame","#)
    {
        if let Ok(RecordIn {
            uuid,
            parent_uuid,
            session_id,
            session_id_cc,
            timestamp,
            frame: Some(frame),
        }) = serde_json::from_slice::<RecordIn>(rest)
        {
            let legacy = rest.starts_with(br#"{"type":"frame","#);
            return Ok(Parsed::Record(Box::new(Read {
                record: Record {
                    line,
                    uuid: uuid
                        .or_else(|| frame.uuid().map(str::to_owned))
                        .unwrap_or_default(),
                    parent_uuid,
                    session_id: session_id.or(session_id_cc).unwrap_or_default(),
                    timestamp,
                    frame,
                },
                // An old record chains to the one before it, whatever its kind.
                chained: legacy,
                cwd: None,
                legacy,
                meta: false,
            })));
        }
    }
    let v: Value = serde_json::from_slice(rest).map_err(|e| {
        if e.is_eof() {
            LineProblem::Incomplete
        } else {
            LineProblem::NotJson(e.to_string())
        }
    })?;
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match kind.as_str() {
        "session" | KEEL_SESSION => serde_json::from_value::<SessionHeader>(v)
            .map(|h| Parsed::Header(Box::new(h)))
            .map_err(|e| unreadable("a session header", e)),
        "frame" | KEEL_FRAME => wrapped_frame(v, kind == "frame", line),
        "user" | "assistant" => {
            let e: EntryIn = serde_json::from_slice(rest)
                .map_err(|e| unreadable(&format!("a {kind} entry"), e))?;
            if !e.is_message() {
                let link = other_link(&v, line);
                return Ok(Parsed::Unmapped(kind, link));
            }
            from_entry(e, line, sidechain_is_main)
                .ok_or_else(|| LineProblem::Unmappable(kind.clone()))
        }
        // Claude Code's compaction: what the model sees starts again after it (the summary
        // follows as a prompt).
        "system" if v.get("subtype").and_then(Value::as_str) == Some("compact_boundary") => {
            compact_boundary(&v, line)
        }
        "" => Err(LineProblem::NotARecord),
        k if is_bookkeeping(k) => Ok(Parsed::Unknown(other_link(&v, line))),
        _ => {
            let link = other_link(&v, line);
            Ok(Parsed::Unmapped(kind, link))
        }
    }
}

/// A frame wrapped in a record: keel's old `frame` record (`legacy`) or a `keel-frame` entry.
fn wrapped_frame(mut v: Value, legacy: bool, line: usize) -> Result<Parsed, LineProblem> {
    let frame_v = v
        .get_mut("frame")
        .map(Value::take)
        .ok_or(LineProblem::NoFrame)?;
    let frame: Frame = serde_json::from_value(frame_v).map_err(|e| unreadable("a frame", e))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let uuid = s("uuid")
        .or_else(|| frame.uuid().map(str::to_owned))
        .unwrap_or_default();
    Ok(Parsed::Record(Box::new(Read {
        record: Record {
            line,
            uuid,
            parent_uuid: s("parent_uuid"),
            session_id: s("session_id")
                .or_else(|| s("sessionId"))
                .unwrap_or_default(),
            timestamp: s("timestamp"),
            frame,
        },
        // An old record chains to the one before it, whatever its kind.
        chained: legacy,
        cwd: None,
        legacy,
        meta: false,
    })))
}

/// The chain place of an entry keel does not send to the model (an `attachment`, a `system`
/// notice, ...): abandoned or not, it links its neighbours.
fn other_link(v: &Value, line: usize) -> Option<Link> {
    let uuid = v.get("uuid").and_then(Value::as_str)?;
    Some(Link {
        line,
        uuid: uuid.into(),
        parent: v.get("parentUuid").and_then(Value::as_str).map(Into::into),
        kind: LinkKind::Other,
    })
}

/// Claude Code's `compact_boundary` as keel's own compaction record with no messages: the
/// rebuild starts again from it.
fn compact_boundary(v: &Value, line: usize) -> Result<Parsed, LineProblem> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let frame: Frame = serde_json::from_value(serde_json::json!({
        "type": "system",
        "subtype": crate::wire::COMPACTED_HISTORY,
        "messages": [],
    }))
    .map_err(|e| unreadable("a compaction entry", e))?;
    Ok(Parsed::Record(Box::new(Read {
        record: Record {
            line,
            uuid: s("uuid").unwrap_or_default(),
            parent_uuid: s("parentUuid"),
            session_id: s("sessionId").unwrap_or_default(),
            timestamp: s("timestamp"),
            frame,
        },
        chained: true,
        cwd: s("cwd"),
        legacy: false,
        meta: false,
    })))
}

/// A `user`/`assistant` entry as a record. `None`: the message does not read as one.
fn from_entry(e: EntryIn<'_>, line: usize, sidechain_is_main: bool) -> Option<Parsed> {
    if !e.is_message() {
        return None;
    }
    if e.is_sidechain && !sidechain_is_main {
        // A subagent's message written into the main file (older Claude Code): not part of
        // the main conversation, and not something the model of this session saw. It still
        // has children, which decides what the newest message is.
        let link = e.uuid.as_deref().map(|u| Link {
            line,
            uuid: u.into(),
            parent: e.parent_uuid.as_deref().map(Into::into),
            kind: LinkKind::Message {
                record: false,
                main: false,
                facts: None,
            },
        });
        return Some(Parsed::Unknown(link));
    }
    let meta = e.is_meta();
    let uuid = e.uuid.clone().unwrap_or_default();
    let parent_uuid = e.parent_uuid.clone();
    let session_id = e.session_id.clone().unwrap_or_default();
    let timestamp = e.timestamp.clone();
    let cwd = e.cwd.clone();
    let frame = e.into_frame().ok()?;
    Some(Parsed::Record(Box::new(Read {
        record: Record {
            line,
            uuid,
            parent_uuid,
            session_id,
            timestamp,
            frame,
        },
        chained: true,
        cwd,
        legacy: false,
        meta,
    })))
}

/// A record and what the reader notes about it.
struct Read {
    record: Record,
    /// Part of the file's `parentUuid` chain.
    chained: bool,
    /// The entry's working directory.
    cwd: Option<String>,
    /// Written in keel's old format.
    legacy: bool,
    /// Claude Code's `isMeta` or `teamName`: sent to the model, never picked as the newest
    /// message of the main conversation.
    meta: bool,
}

impl Read {
    fn into_record(self) -> Record {
        self.record
    }

    /// The record's place in Claude Code's chain (keel's own and old records have none).
    fn link(&self) -> Option<Link> {
        if !self.chained || self.legacy || self.record.uuid.is_empty() {
            return None;
        }
        let r = &self.record;
        Some(Link {
            line: r.line,
            uuid: r.uuid.as_str().into(),
            parent: r.parent_uuid.as_deref().map(Into::into),
            kind: LinkKind::of_frame(&r.frame, self.meta),
        })
    }
}

/// A frame record, as the fast path reads it.
#[derive(serde::Deserialize)]
struct RecordIn {
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    parent_uuid: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default, rename = "sessionId")]
    session_id_cc: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    frame: Option<Frame>,
}

fn trim_ascii(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if first.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}
