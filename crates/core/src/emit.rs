//! The one outbound path: every event is stamped, persisted first (write-ahead), then sent to
//! the front end's channel.
//!
//! Persisting is file I/O (and, at turn boundaries, fsync), so it runs on the blocking pool,
//! never on the async workers; the emitter waits for it before sending, so what a consumer saw
//! is always on disk. The channel is bounded: a slow consumer slows the session down instead
//! of growing memory.

use std::sync::{Arc, RwLock};

use tokio::sync::mpsc;

use crate::session_id::SessionId;

use crate::event::{Emitted, Envelope, Event};

pub use crate::persist::{Persist, PersistError, PersistOp};

/// Emitting failed: the output channel is gone, persisting failed, or the history refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// Nobody reads the events any more (the front end exited).
    #[error("the output stream was closed")]
    Closed,
    /// The transcript could not be written.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// The history refused a message (a keel bug: it would break the pairing invariant).
    #[error("internal: {0}")]
    History(#[from] crate::history::HistoryError),
}

/// Where an emitter and its clones persist: shared, so that `/clear` can point all of them
/// (the Task tool's, the background tasks') at the new session's transcript at once.
type PersistSlot = Arc<RwLock<Option<Arc<dyn Persist>>>>;

/// Sends the events of one session (or one subagent of it).
#[derive(Clone)]
pub struct Emitter {
    /// Read at every stamp: `/clear` switches it for every clone.
    session_id: SessionId,
    tx: mpsc::Sender<Emitted>,
    persist: PersistSlot,
    parent_tool_use_id: Option<Arc<str>>,
    /// Whether subagents' text and thinking reach the front end (shared by the session's
    /// emitters; off by default, as `initialize.forwardSubagentText` defaults).
    forward_subagent_text: Arc<std::sync::atomic::AtomicBool>,
    /// `--session-mirror`: the sink subagents' transcript writers hand their lines to too.
    mirror: Option<crate::transcript::MirrorSink>,
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
    pub(crate) fn new(session_id: impl Into<Arc<str>>, tx: mpsc::Sender<Emitted>) -> Self {
        Self {
            session_id: SessionId::new(session_id),
            tx,
            persist: PersistSlot::default(),
            parent_tool_use_id: None,
            forward_subagent_text: Arc::default(),
            mirror: None,
        }
    }

    /// Subagents started through this emitter mirror their transcripts to `sink` as well.
    pub(crate) fn with_mirror(mut self, sink: crate::transcript::MirrorSink) -> Self {
        self.mirror = Some(sink);
        self
    }

    /// The transcript mirror, when `--session-mirror` asked for one.
    pub(crate) fn mirror(&self) -> Option<&crate::transcript::MirrorSink> {
        self.mirror.as_ref()
    }

    /// Let subagents' text and thinking reach the front end, or keep it in the transcript only.
    pub(crate) fn set_forward_subagent_text(&self, on: bool) {
        self.forward_subagent_text
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// A subagent's text or thinking block while forwarding is off: recorded, not sent (the
    /// parent's stream shows the subagent's tool calls and results, and the Task result).
    fn withheld(&self, event: &Event) -> bool {
        self.parent_tool_use_id.is_some()
            && !self
                .forward_subagent_text
                .load(std::sync::atomic::Ordering::SeqCst)
            && match event {
                Event::Assistant { message, .. } => message.content.iter().all(|b| {
                    matches!(
                        b,
                        keel_protocol::ContentBlock::Text(_)
                            | keel_protocol::ContentBlock::Thinking(_)
                            | keel_protocol::ContentBlock::RedactedThinking(_)
                    )
                }),
                _ => false,
            }
    }

    /// Persist every event to `persist` before sending it.
    pub(crate) fn with_persist(mut self, persist: Arc<dyn Persist>) -> Self {
        self.persist = Arc::new(RwLock::new(Some(persist)));
        self
    }

    /// From now on this emitter and every clone of it persist to `persist` (a new session's
    /// transcript after `/clear`); returns the place they persisted to before.
    pub(crate) fn switch_persist(&self, persist: Arc<dyn Persist>) -> Option<Arc<dyn Persist>> {
        let mut g = self.persist.write().unwrap_or_else(|p| p.into_inner());
        g.replace(persist)
    }

    /// Where this emitter persists now (the main transcript's writer).
    pub(crate) fn persist_place(&self) -> Option<Arc<dyn Persist>> {
        self.persist_target()
    }

    /// The session id cell this emitter stamps from (shared with the session's context).
    pub(crate) fn session_cell(&self) -> &SessionId {
        &self.session_id
    }

    fn persist_target(&self) -> Option<Arc<dyn Persist>> {
        self.persist
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// An emitter into the same channel for a subagent started by the Task call
    /// `tool_use_id`: its events carry that id, and it persists nowhere until given a place.
    pub(crate) fn for_subagent(&self, tool_use_id: &str) -> Self {
        Self {
            session_id: self.session_id.clone(),
            tx: self.tx.clone(),
            persist: PersistSlot::default(),
            parent_tool_use_id: Some(tool_use_id.into()),
            forward_subagent_text: self.forward_subagent_text.clone(),
            mirror: self.mirror.clone(),
        }
    }

    /// The session id stamped on events now.
    pub fn session_id(&self) -> String {
        self.session_id.get().to_string()
    }

    /// The Task call events are attributed to, for subagents.
    pub fn parent_tool_use_id(&self) -> Option<&str> {
        self.parent_tool_use_id.as_deref()
    }

    fn stamp(&self, event: Event) -> Emitted {
        Emitted {
            envelope: Envelope {
                uuid: new_uuid(),
                session_id: self.session_id.get().to_string(),
                parent_tool_use_id: self.parent_tool_use_id.as_deref().map(str::to_owned),
                timestamp: now_rfc3339(),
            },
            event,
        }
    }

    /// Persist; hands the event back with the outcome. An append is one `write` of one line
    /// into the page cache, done in place: handing each event to the blocking pool cost more
    /// (two thread wake-ups per event) than the write itself. What can wait on the disk — the
    /// fsync at a turn's end — runs on the blocking pool ([`sync`](Self::sync)).
    async fn persist(&self, e: Emitted) -> Result<(Emitted, Result<(), EmitError>), EmitError> {
        let Some(p) = self.persist_target() else {
            return Ok((e, Ok(())));
        };
        if matches!(e.event, Event::StreamEvent { .. } | Event::Hook(_)) {
            return Ok((e, Ok(()))); // partial events and hook progress are never kept
        }
        // A panicking writer is an error like any other: the event must come back.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.append(&e)))
            .unwrap_or_else(|_| {
                Err(PersistError::new(
                    PersistOp::Lost,
                    "the transcript writer crashed (a keel bug)",
                ))
            });
        Ok((e, r.map_err(EmitError::from)))
    }

    /// Persist, then send.
    pub async fn emit(&self, event: Event) -> Result<(), EmitError> {
        if self.withheld(&event) {
            return self.record(event).await;
        }
        let (e, persisted) = self.persist(self.stamp(event)).await?;
        persisted?;
        self.tx.send(e).await.map_err(|_| EmitError::Closed)
    }

    /// Persist, then send even if persisting failed: for `init` and `result`, which must reach
    /// the consumer whatever else broke. Returns the persistence error, if any.
    pub async fn emit_final(&self, event: Event) -> Result<(), EmitError> {
        let (e, persisted) = self.persist(self.stamp(event)).await?;
        self.tx.send(e).await.map_err(|_| EmitError::Closed)?;
        persisted
    }

    /// Persist only (the prompt, which front ends do not echo).
    pub async fn record(&self, event: Event) -> Result<(), EmitError> {
        self.record_as(None, event).await
    }

    /// [`record`](Self::record) under `uuid` when one is given (a prompt whose uuid the host
    /// chose).
    pub async fn record_as(&self, uuid: Option<String>, event: Event) -> Result<(), EmitError> {
        let mut e = self.stamp(event);
        if let Some(u) = uuid {
            e.envelope.uuid = u;
        }
        self.persist(e).await?.1
    }

    /// Make what was persisted durable (fsync, on the blocking pool).
    pub async fn sync(&self) -> Result<(), EmitError> {
        let Some(p) = self.persist_target() else {
            return Ok(());
        };
        match tokio::task::spawn_blocking(move || p.sync()).await {
            Ok(r) => r.map_err(EmitError::from),
            Err(join) => Err(EmitError::Persist(PersistError::new(
                PersistOp::Lost,
                format!("the transcript writer stopped: {join}"),
            ))),
        }
    }

    /// Whether the front end stopped reading.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

pub use crate::ids::{new_uuid, now_rfc3339};
