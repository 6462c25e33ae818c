//! Resume checkpoints: the rebuilt conversation of a long transcript, saved beside it, so that
//! the next resume reads only the records written after it.
//!
//! `<session id>/resume-checkpoint.jsonl`: a first line that says where in the transcript the
//! checkpoint stands (its length and line count there, and the uuid of the record that ends
//! there) and the rebuild's small state; then one line per message, as requests encode it.
//!
//! A checkpoint is derived data, never the record: it is used only when the transcript still
//! holds, at the length it names, the record it names (else the whole transcript is read, as
//! without one), and it is replaced whole (written aside, then renamed). It is written when a
//! resume, or the end of a process that wrote to the transcript ([`at_exit`]), had to read more
//! than [`REWRITE_AFTER`] bytes of records past the last one, for a transcript of at least
//! [`MIN_TRANSCRIPT`] bytes; smaller sessions resume fast without one.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use keel_model::EncodedMessage;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::chain_load::{read_tail, read_whole};
use super::link::ChainReport;
use super::rebuild::{RebuildState, Rebuilder};
use super::{parse_reader_at, Loaded, Rebuilt};

/// The format of the first line. 2: the history is the `parentUuid` walk from the newest
/// message (version 1 took the file order, which a branched file makes wrong).
const VERSION: u32 = 2;
/// Transcripts smaller than this get no checkpoint.
pub const MIN_TRANSCRIPT: u64 = 1 << 20;
/// A checkpoint is written again once this many bytes of records were read past it.
pub const REWRITE_AFTER: u64 = 256 << 10;
/// How far back from the checkpoint's position its record is looked for.
const RECORD_WINDOW: u64 = 8 << 20;

pub use super::position::Position;

#[derive(Serialize, Deserialize)]
struct Head {
    version: u32,
    session_id: String,
    at: Position,
    messages: usize,
    history_len: usize,
    current_reply: Option<String>,
    last_reply: Option<String>,
    first: bool,
    missing_prompt: bool,
    first_prompt: Option<String>,
    /// Messages before the checkpoint on other branches than its history (told again on
    /// every resume from it), and the line of the first.
    #[serde(default)]
    abandoned: usize,
    #[serde(default)]
    abandoned_line: Option<usize>,
}

/// Checkpoints being written in the background.
static WRITING: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

/// The transcripts this process wrote to (path, session id).
static TOUCHED: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());

/// Note that this process writes to `transcript`: [`at_exit`] brings its checkpoint up to date.
pub fn touched(transcript: &Path, session_id: &str) {
    let mut t = TOUCHED.lock().unwrap_or_else(|p| p.into_inner());
    if !t.iter().any(|(p, _)| p == transcript) {
        t.push((transcript.to_owned(), session_id.to_owned()));
    }
}

/// Wait for the checkpoints being written in the background (a resume starts one), then bring
/// the checkpoint of every long transcript this process wrote to up to date, so that the next
/// resume reads only what comes after. Call it once the sessions are over, before the process
/// exits (the `keel` binary does); skipping it costs the next resume time, nothing else.
pub fn at_exit() {
    let pending = std::mem::take(&mut *WRITING.lock().unwrap_or_else(|p| p.into_inner()));
    for t in pending {
        let _ = t.join();
    }
    let touched = std::mem::take(&mut *TOUCHED.lock().unwrap_or_else(|p| p.into_inner()));
    for (path, id) in touched {
        let Ok(file) = File::open(&path) else {
            continue;
        };
        let len = file.metadata().map_or(0, |m| m.len());
        // Only the checkpoint's first line is read to tell whether enough came after it.
        let behind = saved_at(&path).map_or(len, |at| len.saturating_sub(at));
        if len >= MIN_TRANSCRIPT && behind >= REWRITE_AFTER {
            let _ = load_as(&path, &file, len, &id, Save::Now);
        }
    }
}

/// When a new checkpoint is saved.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Save {
    /// In a background thread ([`at_exit`] waits for it).
    Background,
    /// Before returning.
    Now,
}

/// The checkpoint of `transcript`.
pub fn path_for(transcript: &Path) -> PathBuf {
    transcript
        .with_extension("")
        .join("resume-checkpoint.jsonl")
}

/// Save `state`, taken at `at` in `transcript`. Written aside, then renamed into place.
pub fn write(
    transcript: &Path,
    session_id: &str,
    at: &Position,
    state: &RebuildState,
) -> std::io::Result<()> {
    write_with(transcript, session_id, at, state, &ChainReport::default())
}

/// [`write`], with the messages before `at` on other branches than its history.
fn write_with(
    transcript: &Path,
    session_id: &str,
    at: &Position,
    state: &RebuildState,
    chain: &ChainReport,
) -> std::io::Result<()> {
    let path = path_for(transcript);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let head = Head {
        version: VERSION,
        session_id: session_id.to_owned(),
        at: at.clone(),
        messages: state.messages.len(),
        history_len: state.history_len,
        current_reply: state.current_reply.clone(),
        last_reply: state.last_reply.clone(),
        first: state.first,
        missing_prompt: state.missing_prompt,
        first_prompt: state.first_prompt.clone(),
        abandoned: chain.abandoned,
        abandoned_line: chain.abandoned_line,
    };
    // Aside under a name of this process's own: two processes saving at once (one ending, one
    // resuming) each rename a whole file.
    let tmp = path.with_extension(format!("jsonl.{}.tmp", std::process::id()));
    let mut w = std::io::BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    serde_json::to_writer(&mut w, &head)?;
    w.write_all(b"\n")?;
    for m in &state.messages {
        w.write_all(m.as_str().as_bytes())?;
        w.write_all(b"\n")?;
    }
    let written = w
        .into_inner()
        .map_err(|e| e.into_error())
        .and_then(|_| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Where the checkpoint of `transcript` stands (its transcript length), from its first line.
fn saved_at(transcript: &Path) -> Option<u64> {
    let mut line = String::new();
    BufReader::new(File::open(path_for(transcript)).ok()?.take(64 << 10))
        .read_line(&mut line)
        .ok()?;
    Some(serde_json::from_str::<Head>(&line).ok()?.at.len)
}

/// The checkpoint of `transcript` (open as `file`, `file_len` bytes long), if there is one
/// that still holds: a rebuild ready to read the records after it, and where it stands.
pub fn read(
    transcript: &Path,
    file: &File,
    file_len: u64,
    session_id: &str,
) -> Option<(Rebuilder, Position)> {
    read_with(transcript, file, file_len, session_id).map(|(r, at, _)| (r, at))
}

/// [`read`], with what the checkpoint says of other branches before it.
fn read_with(
    transcript: &Path,
    file: &File,
    file_len: u64,
    session_id: &str,
) -> Option<(Rebuilder, Position, ChainReport)> {
    let mut r = BufReader::with_capacity(1 << 20, File::open(path_for(transcript)).ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let head: Head = serde_json::from_str(&line).ok()?;
    if head.version != VERSION
        || head.session_id != session_id
        || head.at.len > file_len
        || !record_ends_at(file, &head.at)
    {
        return None;
    }
    // The count comes from the file: it sizes nothing before the lines are there.
    let mut messages = Vec::with_capacity(head.messages.min(1 << 16));
    for _ in 0..head.messages {
        let mut l = String::new();
        if r.read_line(&mut l).ok()? == 0 || !l.ends_with('\n') {
            return None;
        }
        l.pop();
        // Each line must be one message as requests encode it (what was written); anything
        // else is a damaged file.
        if !(l.starts_with(r#"{"role":"user","content":"#)
            || l.starts_with(r#"{"role":"assistant","content":"#))
        {
            return None;
        }
        let raw = RawValue::from_string(l).ok()?;
        messages.push(EncodedMessage::from_raw(raw));
    }
    let chain = ChainReport {
        abandoned: head.abandoned,
        abandoned_line: head.abandoned_line,
        ..ChainReport::default()
    };
    let state = RebuildState {
        messages,
        history_len: head.history_len,
        current_reply: head.current_reply,
        last_reply: head.last_reply,
        first: head.first,
        missing_prompt: head.missing_prompt,
        first_prompt: head.first_prompt,
    };
    Some((Rebuilder::from_state(session_id, state)?, head.at, chain))
}

/// Whether the record that ends at `at.len` in `file` (its newline included) has `at.uuid`.
fn record_ends_at(file: &File, at: &Position) -> bool {
    if at.len == 0 {
        return false;
    }
    let start = at.len.saturating_sub(RECORD_WINDOW);
    let mut buf = Vec::new();
    let mut f = file;
    if f.seek(SeekFrom::Start(start)).is_err()
        || f.take(at.len - start).read_to_end(&mut buf).is_err()
        || buf.last() != Some(&b'\n')
    {
        return false;
    }
    let body = &buf[..buf.len() - 1];
    let line = match body.iter().rposition(|b| *b == b'\n') {
        Some(i) => &body[i + 1..],
        None if start == 0 => body,
        None => return false,
    };
    let mut uuid = None;
    let loaded = parse_reader_at(Path::new(""), line, line.len() as u64, (0, 0), |r| {
        uuid = Some(r.uuid)
    });
    loaded.is_ok() && uuid.as_deref() == Some(at.uuid.as_str())
}

/// Read `transcript` (open as `file`) and rebuild it, from its checkpoint when one holds, and
/// save a new checkpoint when this read went far enough past the old one. The file's cursor is
/// left anywhere.
pub fn load(
    transcript: &Path,
    file: &File,
    file_len: u64,
    session_id: &str,
) -> std::io::Result<(Loaded, Rebuilt)> {
    load_as(transcript, file, file_len, session_id, Save::Background)
}

fn load_as(
    transcript: &Path,
    file: &File,
    file_len: u64,
    session_id: &str,
    save: Save,
) -> std::io::Result<(Loaded, Rebuilt)> {
    let from = read_with(transcript, file, file_len, session_id);
    // From the checkpoint when what follows it continues its history; else the whole file.
    let mut tail = None;
    if let Some((r, at, before)) = from {
        if let Some((loaded, r)) = read_tail(transcript, file, file_len, r, &at)? {
            tail = Some((loaded, r, at, before));
        }
    }
    let (loaded, rebuilder, start) = match tail {
        Some((mut loaded, r, at, before)) => {
            // The header was before the checkpoint; the last record may be too.
            loaded.header = super::reader::read_header(transcript);
            if loaded.last_uuid.is_none() {
                loaded.last_uuid = Some(at.uuid.clone());
            }
            if loaded.last_chain_uuid.is_none() {
                loaded.last_chain_uuid = at.chain_uuid.clone();
            }
            loaded.chain.abandoned += before.abandoned;
            loaded.chain.abandoned_line = before.abandoned_line.or(loaded.chain.abandoned_line);
            (loaded, r, at.len)
        }
        None => {
            let (loaded, r) = read_whole(transcript, file, file_len, session_id, false)?;
            (loaded, r, 0)
        }
    };
    if !loaded.chain.issues.is_empty() {
        // No checkpoint: a broken chain is told on every resume, which one would skip.
        return Ok((loaded, rebuilder.finish()));
    }
    let read = loaded.good_len - start;
    if loaded.good_len >= MIN_TRANSCRIPT && read >= REWRITE_AFTER && !loaded.needs_newline {
        if let (Some(state), Some(uuid)) = (rebuilder.state(), loaded.last_uuid.clone()) {
            let at = Position {
                len: loaded.good_len,
                lines: loaded.good_lines,
                uuid,
                chain_uuid: loaded.last_chain_uuid.clone(),
            };
            let path = transcript.to_owned();
            let id = session_id.to_owned();
            let chain = loaded.chain.clone();
            let save_it = move || {
                if let Err(e) = write_with(&path, &id, &at, &state, &chain) {
                    tracing::debug!("no resume checkpoint for {}: {e}", path.display());
                }
            };
            match save {
                Save::Now => save_it(),
                // Off the way to the first request.
                Save::Background => {
                    let writing = std::thread::spawn(save_it);
                    WRITING
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(writing);
                }
            }
        }
    }
    Ok((loaded, rebuilder.finish()))
}
