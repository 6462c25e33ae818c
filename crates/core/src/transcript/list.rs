//! Listing sessions, as `keel sessions` shows them.
//!
//! A summary needs a pass over the whole transcript (the message count, damaged lines), so
//! summaries are kept in a cache per project directory (`.sessions-index.json`), keyed by each
//! transcript's size and modification time: a listing reads only the transcripts that changed
//! since the last one. The cache is derived data: a missing, damaged or unwritable one only
//! costs the full reads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use keel_protocol::{Frame, ResultSubtype};
use serde::{Deserialize, Serialize};

use super::store::transcripts_in;
use super::Store;

/// The cache file, in each project directory.
const INDEX: &str = ".sessions-index.json";
/// Its format.
const INDEX_VERSION: u32 = 2;

/// One session, as `keel sessions` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionSummary {
    /// The id.
    pub session_id: String,
    /// The transcript.
    pub path: PathBuf,
    /// The working directory (from the header).
    pub cwd: Option<String>,
    /// When it was created (from the header).
    pub created_at: Option<String>,
    /// The last write to the transcript.
    pub last_activity: SystemTime,
    /// The first prompt.
    pub first_prompt: Option<String>,
    /// Messages in the conversation (as sent to the model).
    pub messages: usize,
    /// The last record is a `result`: the last run ended properly (whatever its outcome).
    pub ended_cleanly: bool,
    /// The `subtype` of the last `result`, if any.
    pub last_result: Option<keel_protocol::ResultSubtype>,
    /// Damaged lines (a torn tail included).
    pub damaged_lines: usize,
    /// The session it was forked from.
    pub forked_from: Option<String>,
    /// The file's format: `claude-code` (Claude Code's entries, what keel writes), or
    /// `keel-v1` (keel's old records, still read and resumed).
    pub format: &'static str,
}

/// One cached summary, valid while the transcript keeps this size and modification time.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Cached {
    len: u64,
    modified_ns: u128,
    cwd: Option<String>,
    created_at: Option<String>,
    first_prompt: Option<String>,
    messages: usize,
    ended_cleanly: bool,
    last_result: Option<ResultSubtype>,
    damaged_lines: usize,
    forked_from: Option<String>,
    legacy: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    version: u32,
    sessions: HashMap<String, Cached>,
}

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos()
}

fn read_index(dir: &Path) -> Index {
    std::fs::read(dir.join(INDEX))
        .ok()
        .and_then(|b| serde_json::from_slice::<Index>(&b).ok())
        .filter(|i| i.version == INDEX_VERSION)
        .unwrap_or_default()
}

/// Write the cache whole, then rename it into place (a reader never sees half of one).
fn write_index(dir: &Path, index: &Index) {
    let tmp = dir.join(format!("{INDEX}.{}.tmp", std::process::id()));
    let ok = serde_json::to_vec(index)
        .ok()
        .is_some_and(|b| std::fs::write(&tmp, b).is_ok());
    if !ok || std::fs::rename(&tmp, dir.join(INDEX)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Summarize a transcript in one streaming pass (its records are never all held).
fn summarize(id: &str, path: &Path, len: u64, modified: SystemTime) -> Option<Cached> {
    let mut last_result: Option<ResultSubtype> = None;
    let mut first_timestamp: Option<String> = None;
    let mut rebuilder = super::Rebuilder::new(id, false);
    let file = std::fs::File::open(path).ok()?;
    let loaded = super::parse_reader_with(
        path,
        std::io::BufReader::with_capacity(256 * 1024, file),
        len,
        |r| {
            if first_timestamp.is_none() {
                first_timestamp = r.timestamp.clone();
            }
            last_result = match &r.frame {
                Frame::Result(res) => Some(res.subtype.clone()),
                _ => None,
            };
            rebuilder.push(r);
        },
    )
    .ok()?;
    let rebuilt = rebuilder.finish();
    let header = loaded.header;
    let legacy = loaded.legacy || header.as_ref().is_some_and(|h| h.schema < 2);
    Some(Cached {
        len,
        modified_ns: nanos(modified),
        legacy,
        cwd: header.as_ref().map(|h| h.cwd.clone()).or(loaded.first_cwd),
        created_at: header
            .as_ref()
            .map(|h| h.created_at.clone())
            .or(first_timestamp),
        first_prompt: rebuilt.first_prompt,
        messages: rebuilt.history.len(),
        ended_cleanly: last_result.is_some() && loaded.torn.is_none(),
        last_result,
        damaged_lines: loaded.issues.len() + usize::from(loaded.torn.is_some()),
        forked_from: header.and_then(|h| {
            h.forked_from
                .and_then(|f| f.get("session_id")?.as_str().map(str::to_owned))
        }),
    })
}

impl Store {
    /// The sessions of `cwd` (or of every directory when `None`), most recent first.
    pub fn list(&self, cwd: Option<&Path>) -> Vec<SessionSummary> {
        let dirs = match cwd {
            Some(c) => self.project_dirs_of(c),
            None => self.project_dirs(),
        };
        let want = cwd.map(|c| c.display().to_string());
        let mut out: Vec<SessionSummary> = Vec::new();
        for dir in &dirs {
            let old = read_index(dir);
            let mut index = Index {
                version: INDEX_VERSION,
                sessions: HashMap::new(),
            };
            let mut changed = false;
            for (id, path, modified) in transcripts_in(dir) {
                let len = std::fs::metadata(&path).map_or(0, |m| m.len());
                let cached = old
                    .sessions
                    .get(&id)
                    .filter(|c| c.len == len && c.modified_ns == nanos(modified))
                    .cloned();
                let Some(c) = cached.or_else(|| {
                    changed = true;
                    summarize(&id, &path, len, modified)
                }) else {
                    continue;
                };
                index.sessions.insert(id.clone(), c.clone());
                if let (Some(w), Some(cwd)) = (&want, &c.cwd) {
                    if cwd != w {
                        continue;
                    }
                }
                out.push(SessionSummary {
                    session_id: id,
                    path,
                    cwd: c.cwd,
                    created_at: c.created_at,
                    last_activity: modified,
                    first_prompt: c.first_prompt,
                    messages: c.messages,
                    ended_cleanly: c.ended_cleanly,
                    last_result: c.last_result,
                    damaged_lines: c.damaged_lines,
                    forked_from: c.forked_from,
                    format: if c.legacy { "keel-v1" } else { "claude-code" },
                });
            }
            if changed || index.sessions.len() != old.sessions.len() {
                write_index(dir, &index);
            }
        }
        out.sort_by(|a, b| {
            b.last_activity
                .cmp(&a.last_activity)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        out
    }
}
