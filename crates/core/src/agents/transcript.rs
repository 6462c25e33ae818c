//! Subagent transcripts: `<session dir>/subagents/agent-<id>.jsonl`, self-contained (the prompt
//! that started the agent and every later one are in it), in the same record format as a
//! session's, so the same tolerant reader and repair apply on resume.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::emit::{Persist, PersistError, PersistOp};
use crate::event::{Emitted, Envelope};
use crate::history::History;
use crate::transcript::{
    read_file, rebuild, FsyncMode, MirrorSink, SessionHeader, TranscriptWriter,
};

/// `--session-mirror` for one subagent: the sink, and what its `agent_metadata` entry says
/// (`agentType`, `description`, `toolUseId`).
pub struct AgentMirror {
    /// Where the agent's lines go.
    pub sink: MirrorSink,
    /// The sidecar's fields.
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// Persists a subagent's frames; on resume the rewritten file replaces the old one atomically
/// once its first new record is written.
struct AgentPersist {
    inner: TranscriptWriter,
    replace: Mutex<Option<(PathBuf, PathBuf)>>,
}

impl Persist for AgentPersist {
    fn append(&self, e: &Emitted) -> Result<(), PersistError> {
        // A subagent's events carry the parent's Task call id on the wire; in the agent's own
        // file they are its main conversation, so the id is dropped there.
        let env = Envelope {
            parent_tool_use_id: None,
            ..e.envelope.clone()
        };
        self.inner
            .append_frame(&crate::wire::frame_of(&env, &e.event))?;
        let pending = self
            .replace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((tmp, fin)) = pending {
            std::fs::rename(&tmp, &fin).map_err(|e| {
                let message = format!(
                    "could not replace the agent transcript {}: {e}",
                    fin.display()
                );
                PersistError::io(PersistOp::Replace, &fin, &e, message)
            })?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), PersistError> {
        self.inner.sync_now()
    }
}

/// Open the transcript of a subagent at `path`: a new one, or (when the file exists) the old
/// conversation rebuilt — repaired if a crash left a call open — to continue.
pub fn open(
    path: &Path,
    session_id: &str,
    cwd: &Path,
    model: &str,
    mirror: Option<AgentMirror>,
) -> Result<(Arc<dyn Persist>, Option<History>), PersistError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            let message = format!("could not create {}: {e}", dir.display());
            PersistError::io(PersistOp::Create, dir, &e, message)
        })?;
    }
    let header = SessionHeader::new(session_id, cwd, model);
    if let Some(m) = &mirror {
        write_metadata(path, m)?;
    }
    if !path.exists() {
        let w = TranscriptWriter::create_lazily(path.to_path_buf(), &header, &[], FsyncMode::Turn)?;
        if let Some(m) = mirror {
            w.mirror_to(m.sink, path.to_path_buf());
        }
        return Ok((
            Arc::new(AgentPersist {
                inner: w,
                replace: Mutex::new(None),
            }),
            None,
        ));
    }
    let loaded = read_file(path).map_err(|e| {
        let message = format!(
            "could not read the agent transcript {}: {e}",
            path.display()
        );
        PersistError::io(PersistOp::Read, path, &e, message)
    })?;
    let rebuilt = rebuild(loaded.records, session_id);
    let tmp = path.with_extension("jsonl.resuming");
    let _ = std::fs::remove_file(&tmp);
    let w =
        TranscriptWriter::create_lazily(tmp.clone(), &header, &rebuilt.frames, FsyncMode::Turn)?;
    if let Some(m) = mirror {
        // Named by its final path: the host keeps one file per agent.
        w.mirror_to(m.sink, path.to_path_buf());
    }
    let persist = AgentPersist {
        inner: w,
        replace: Mutex::new(Some((tmp, path.to_path_buf()))),
    };
    Ok((Arc::new(persist), Some(rebuilt.history)))
}

/// The agent's sidecar `agent-<id>.meta.json` (what kind of agent, started by which call),
/// mirrored as an `agent_metadata` entry of the agent's file, as the SDKs' stores expect.
fn write_metadata(path: &Path, m: &AgentMirror) -> Result<(), PersistError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let meta_path = path.with_extension("meta.json");
    let body = serde_json::Value::Object(m.metadata.clone()).to_string();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&meta_path)
        .and_then(|mut f| f.write_all(body.as_bytes()));
    written.map_err(|e| {
        let message = format!(
            "could not write the agent metadata {}: {e}",
            meta_path.display()
        );
        PersistError::io(PersistOp::Create, &meta_path, &e, message)
    })?;
    let mut entry = serde_json::Map::new();
    entry.insert("type".into(), "agent_metadata".into());
    entry.extend(m.metadata.clone());
    let mut line = serde_json::Value::Object(entry).to_string().into_bytes();
    line.push(b'\n');
    m.sink.offer(path, &line);
    Ok(())
}
