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

/// Who a subagent is, for the `agent-<id>.meta.json` sidecar beside its transcript (the
/// fields Claude Code's and its SDKs' readers take from it).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMeta {
    /// The agent's id (its file is `agent-<id>.jsonl`).
    #[serde(skip)]
    pub agent_id: String,
    /// Its type (`general-purpose`, a custom agent's name).
    pub agent_type: String,
    /// What the Task call said it is for.
    pub description: String,
    /// The Task call that started it.
    pub tool_use_id: String,
    /// The subagent whose Task call started it (`None`: the main agent).
    pub parent_agent_id: Option<String>,
}

/// Write the sidecar beside the transcript `path` (written whole, then renamed into place).
fn write_meta(path: &Path, meta: &AgentMeta) -> Result<(), PersistError> {
    let file = path.with_extension("meta.json");
    let tmp = path.with_extension("meta.json.tmp");
    let bytes = serde_json::to_vec(meta).map_err(|e| {
        PersistError::new(
            PersistOp::Encode,
            format!("could not encode {}: {e}", file.display()),
        )
    })?;
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, &file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            let message = format!("could not write {}: {e}", file.display());
            PersistError::io(PersistOp::Write, &file, &e, message)
        })
}

/// Open the transcript of a subagent at `path`: a new one, or (when the file exists) the old
/// conversation rebuilt — repaired if a crash left a call open — to continue.
pub fn open(
    path: &Path,
    session_id: &str,
    cwd: &Path,
    model: &str,
    meta: &AgentMeta,
    mirror: Option<MirrorSink>,
) -> Result<(Arc<dyn Persist>, Option<History>), PersistError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            let message = format!("could not create {}: {e}", dir.display());
            PersistError::io(PersistOp::Create, dir, &e, message)
        })?;
    }
    write_meta(path, meta)?;
    let header = SessionHeader::new(session_id, cwd, model);
    if let Some(sink) = &mirror {
        mirror_metadata(path, meta, sink);
    }
    let agent = Some(meta.agent_id.as_str());
    if !path.exists() {
        let w = TranscriptWriter::create_lazily_as(
            path.to_path_buf(),
            &header,
            &[],
            FsyncMode::Turn,
            agent,
        )?;
        if let Some(sink) = mirror {
            w.mirror_to(sink, path.to_path_buf());
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
    let w = TranscriptWriter::create_lazily_as(
        tmp.clone(),
        &header,
        &rebuilt.frames,
        FsyncMode::Turn,
        agent,
    )?;
    if let Some(sink) = mirror {
        // Named by its final path: the host keeps one file per agent.
        w.mirror_to(sink, path.to_path_buf());
    }
    let persist = AgentPersist {
        inner: w,
        replace: Mutex::new(Some((tmp, path.to_path_buf()))),
    };
    Ok((Arc::new(persist), Some(rebuilt.history)))
}

/// The agent's sidecar (written by [`write_meta`]) mirrored as an `agent_metadata` entry of the
/// agent's file, as the SDKs' stores expect.
fn mirror_metadata(path: &Path, meta: &AgentMeta, sink: &MirrorSink) {
    let mut entry = serde_json::Map::new();
    entry.insert("type".into(), "agent_metadata".into());
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(meta) {
        entry.extend(fields);
    }
    let mut line = serde_json::Value::Object(entry).to_string().into_bytes();
    line.push(b'\n');
    sink.offer(path, &line);
}
