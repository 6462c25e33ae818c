//! The one outbound path: every frame is persisted first (write-ahead), then sent to the front
//! end's channel.

use std::sync::Arc;

use keel_protocol::Frame;
use tokio::sync::mpsc;

/// Where frames are made durable before anyone sees them (the transcript writer).
pub trait Persist: Send + Sync {
    /// Append one frame. An error ends the turn with an honest internal-error result.
    fn append(&self, frame: &Frame) -> Result<(), String>;
    /// Make everything appended so far durable (called at turn boundaries and before `result`).
    fn sync(&self) -> Result<(), String>;
}

/// Emitting failed: the output channel is gone or persisting failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// Nobody reads the frames any more (the front end exited).
    #[error("the output stream was closed")]
    Closed,
    /// The transcript could not be written.
    #[error("{0}")]
    Persist(String),
}

/// Sends frames for one session (or one subagent of it).
#[derive(Clone)]
pub struct Emitter {
    session_id: String,
    tx: mpsc::Sender<Frame>,
    persist: Option<Arc<dyn Persist>>,
    parent_tool_use_id: Option<String>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Emitter {
    /// An emitter that sends to `tx`.
    pub fn new(session_id: impl Into<String>, tx: mpsc::Sender<Frame>) -> Self {
        Self {
            session_id: session_id.into(),
            tx,
            persist: None,
            parent_tool_use_id: None,
        }
    }

    /// Persist every frame to `persist` before sending it.
    pub fn with_persist(mut self, persist: Arc<dyn Persist>) -> Self {
        self.persist = Some(persist);
        self
    }

    /// Frames from a subagent carry the parent's Task call id.
    pub fn with_parent(mut self, parent_tool_use_id: Option<String>) -> Self {
        self.parent_tool_use_id = parent_tool_use_id;
        self
    }

    /// The session id stamped on frames.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The Task call id frames are attributed to, for subagents.
    pub fn parent_tool_use_id(&self) -> Option<&str> {
        self.parent_tool_use_id.as_deref()
    }

    /// A sender into the same channel, for front-end frames that are not part of the
    /// conversation (control responses, state frames): one channel keeps stdout lines whole
    /// and in order. Frames sent this way are not persisted.
    pub fn sender(&self) -> mpsc::Sender<Frame> {
        self.tx.clone()
    }

    /// Persist, then send.
    pub async fn emit(&self, frame: Frame) -> Result<(), EmitError> {
        self.record(&frame)?;
        self.tx.send(frame).await.map_err(|_| EmitError::Closed)
    }

    /// Persist, then send even if persisting failed: for the `result` frame, which must reach
    /// the consumer whatever else broke. Returns the persistence error, if any.
    pub async fn emit_final(&self, frame: Frame) -> Result<(), EmitError> {
        let persisted = self.record(&frame);
        self.tx.send(frame).await.map_err(|_| EmitError::Closed)?;
        persisted
    }

    /// Persist only (the prompt, which front ends do not echo).
    pub fn record(&self, frame: &Frame) -> Result<(), EmitError> {
        match &self.persist {
            Some(p) => p.append(frame).map_err(EmitError::Persist),
            None => Ok(()),
        }
    }

    /// Make what was persisted durable.
    pub fn sync(&self) -> Result<(), EmitError> {
        match &self.persist {
            Some(p) => p.sync().map_err(EmitError::Persist),
            None => Ok(()),
        }
    }
}

/// A fresh frame id.
pub fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Now, as RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
