//! Listing sessions, as `keel sessions` shows them.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use keel_protocol::Frame;

use super::store::transcripts_in;
use super::{rebuild, Store};

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
}

impl Store {
    /// The sessions of `cwd` (or of every directory when `None`), most recent first.
    pub fn list(&self, cwd: Option<&Path>) -> Vec<SessionSummary> {
        let dirs = match cwd {
            Some(c) => vec![self.project_dir(c)],
            None => self.project_dirs(),
        };
        let want = cwd.map(|c| c.display().to_string());
        let mut out: Vec<SessionSummary> = dirs
            .iter()
            .flat_map(|d| transcripts_in(d))
            .filter_map(|(id, path, modified)| {
                let mut loaded = super::read_file(&path).ok()?;
                let header = loaded.header.clone();
                if let (Some(w), Some(h)) = (&want, &header) {
                    if &h.cwd != w {
                        return None;
                    }
                }
                let last_result = loaded.records.last().and_then(|r| match &r.frame {
                    Frame::Result(res) => Some(res.subtype.clone()),
                    _ => None,
                });
                let rebuilt = rebuild(std::mem::take(&mut loaded.records), &id);
                Some(SessionSummary {
                    session_id: id,
                    path,
                    cwd: header.as_ref().map(|h| h.cwd.clone()),
                    created_at: header.as_ref().map(|h| h.created_at.clone()),
                    last_activity: modified,
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
            })
            .collect();
        out.sort_by(|a, b| {
            b.last_activity
                .cmp(&a.last_activity)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        out
    }
}
