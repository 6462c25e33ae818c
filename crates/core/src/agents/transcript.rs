//! Subagent transcripts: `<session dir>/subagents/agent-<id>.jsonl`, self-contained (the prompt
//! that started the agent and every later one are in it), in the same record format as a
//! session's, so the same tolerant reader and repair apply on resume.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_protocol::Frame;

use crate::config::SessionConfig;
use crate::emit::Persist;
use crate::history::History;
use crate::transcript::{read_file, rebuild, FsyncMode, SessionHeader, TranscriptWriter};

/// A subagent's frames carry the parent's Task call id on the wire; in the agent's own file
/// they are its main conversation, so the id is dropped there.
fn without_parent(frame: &Frame) -> Frame {
    let mut f = frame.clone();
    match &mut f {
        Frame::Assistant(a) => a.parent_tool_use_id = None,
        Frame::User(u) => u.parent_tool_use_id = None,
        Frame::StreamEvent(e) => e.parent_tool_use_id = None,
        _ => {}
    }
    f
}

/// Persists a subagent's frames; on resume the rewritten file replaces the old one atomically
/// once its first new record is written.
struct AgentPersist {
    inner: TranscriptWriter,
    replace: Mutex<Option<(PathBuf, PathBuf)>>,
}

impl Persist for AgentPersist {
    fn append(&self, frame: &Frame) -> Result<(), String> {
        if matches!(frame, Frame::StreamEvent(_)) {
            return Ok(());
        }
        self.inner.append(&without_parent(frame))?;
        let pending = self
            .replace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((tmp, fin)) = pending {
            std::fs::rename(&tmp, &fin).map_err(|e| {
                format!(
                    "could not replace the agent transcript {}: {e}",
                    fin.display()
                )
            })?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), String> {
        self.inner.sync()
    }
}

/// Open the transcript of a subagent at `path`: a new one, or (when the file exists) the old
/// conversation rebuilt — repaired if a crash left a call open — to continue.
pub fn open(
    path: &Path,
    cfg: &SessionConfig,
) -> Result<(Arc<dyn Persist>, Option<History>), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    }
    let header = SessionHeader::new(&cfg.session_id, &cfg.cwd, &cfg.model);
    if !path.exists() {
        let w = TranscriptWriter::create_lazily(path.to_path_buf(), &header, &[], FsyncMode::Turn)?;
        return Ok((
            Arc::new(AgentPersist {
                inner: w,
                replace: Mutex::new(None),
            }),
            None,
        ));
    }
    let loaded = read_file(path).map_err(|e| {
        format!(
            "could not read the agent transcript {}: {e}",
            path.display()
        )
    })?;
    let rebuilt = rebuild(loaded.records, &cfg.session_id);
    let tmp = path.with_extension("jsonl.resuming");
    let _ = std::fs::remove_file(&tmp);
    let w =
        TranscriptWriter::create_lazily(tmp.clone(), &header, &rebuilt.frames, FsyncMode::Turn)?;
    let persist = AgentPersist {
        inner: w,
        replace: Mutex::new(Some((tmp, path.to_path_buf()))),
    };
    Ok((Arc::new(persist), Some(rebuilt.history)))
}
