//! Where events are made durable before anyone sees them ([`Persist`]) and how that fails
//! ([`PersistError`]). A leaf: the emitter calls it, the transcript writer implements it.

use std::sync::Arc;

use crate::event::Emitted;

/// What keel was doing with a transcript when writing it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistOp {
    /// Turning a record into JSON.
    Encode,
    /// Creating the file or its directory.
    Create,
    /// Taking the one-writer lock on it.
    Lock,
    /// Appending a record.
    Write,
    /// Making what was appended durable (fsync).
    Sync,
    /// Reading a transcript back to continue it.
    Read,
    /// Replacing a subagent's transcript after a resume.
    Replace,
    /// The blocking task that writes it ended without an answer (a panic).
    Lost,
}

/// A transcript could not be written: what keel was doing, the file, and the kind of error the
/// OS gave (a full disk and a permission error are told apart by `io`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PersistError {
    /// What was being done.
    pub op: PersistOp,
    /// The OS's kind of error, when the OS refused.
    pub io: Option<std::io::ErrorKind>,
    /// The transcript (or its directory), when one is concerned.
    pub path: Option<std::path::PathBuf>,
    message: String,
}

impl PersistError {
    /// A failure that is not the OS's (`message` says what and where).
    pub fn new(op: PersistOp, message: impl Into<String>) -> Self {
        Self {
            op,
            io: None,
            path: None,
            message: message.into(),
        }
    }

    /// The OS refused `op` on `path`; `message` says what and where (it ends with the OS's
    /// own words).
    pub fn io(
        op: PersistOp,
        path: &std::path::Path,
        e: &std::io::Error,
        message: impl Into<String>,
    ) -> Self {
        Self {
            op,
            io: Some(e.kind()),
            path: Some(path.to_path_buf()),
            message: message.into(),
        }
    }
}

/// Where events are made durable before anyone sees them (the transcript writer).
pub trait Persist: Send + Sync {
    /// Append one event. An error ends the turn with an honest internal-error result.
    fn append(&self, event: &Emitted) -> Result<(), PersistError>;
    /// Make everything appended so far durable (called at turn boundaries and before `result`).
    fn sync(&self) -> Result<(), PersistError>;
    /// Where a new session started in this process after this one (`/clear`) persists, and
    /// its file; `None`: nowhere (this place keeps no files).
    fn next_session(
        &self,
        _session_id: &str,
        _model: &str,
    ) -> Option<(Arc<dyn Persist>, std::path::PathBuf)> {
        None
    }
}
