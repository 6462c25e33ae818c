//! Transcripts in object storage (`KEEL_TRANSCRIPT_URL`): a session that moves between
//! machines takes its history along, and the agent SDKs' session stores can list, read and
//! resume it.
//!
//! The local transcript stays the write-ahead copy; the remote one follows it. After every
//! model turn (and at the end of a run) the lines appended since the last upload go up as one
//! new **part** in the SDK stores' layout (see [`layout`]):
//! `<prefix>/<project key>/<session id>/part-<13-digit ms>-<6 hex>.jsonl`, subagents under
//! `subagents/agent-<id>/`. Parts are never rewritten, so a reader never sees a half-written
//! one, and an upload costs what the turn added, not the session's size. Uploads run on a task
//! of their own and coalesce (a slow bucket never slows a turn); a failed upload never touches
//! the local copy and is reported as a `system/warning`, and the result says whether the
//! remote copy is current. `--resume <id>` fetches the session when it is not on this disk
//! (also one stored by an older keel as a single object behind `<session id>/latest.json`).
//!
//! Object storage is the cargo feature `remote` (on in the `keel` binary by default); a keel
//! built without it refuses `KEEL_TRANSCRIPT_URL` at start, saying so.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

#[cfg(feature = "remote")]
pub mod layout;
#[cfg(not(feature = "remote"))]
mod off;
#[cfg(feature = "remote")]
mod store;

#[cfg(not(feature = "remote"))]
pub use off::{RemoteTranscripts, Synced};
#[cfg(feature = "remote")]
pub use store::{RemoteTranscripts, Synced};

/// How long the end of a run waits for the last upload.
pub const DEFAULT_FINAL_UPLOAD_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest transcript keel fetches (a larger object is refused, not read into memory).
#[cfg_attr(not(feature = "remote"), allow(dead_code))] // only the store fetches
pub const MAX_FETCH_BYTES: u64 = 4 << 30;

/// Whether the remote copy is current: `Err` says why not (the local copy is intact).
pub type RemoteState = Result<(), NotCurrent>;

/// Why the remote copy does not hold the whole turn.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotCurrent {
    /// The last upload failed (the store's or the file's error, as said).
    #[error("{0}")]
    Failed(String),
    /// The uploader's task is gone.
    #[error("the uploader stopped")]
    Stopped,
    /// The upload did not finish in time.
    #[error("the upload did not finish within {0} s")]
    TimedOut(u64),
}

/// What went wrong with the remote copy, naming the URL, object or file.
#[derive(Debug, thiserror::Error)]
#[cfg_attr(not(feature = "remote"), allow(dead_code))] // without a store only `Config` is said
pub enum RemoteError {
    /// `KEEL_TRANSCRIPT_URL` cannot be used.
    #[error("KEEL_TRANSCRIPT_URL={url:?} {reason}")]
    Config {
        /// The URL as given.
        url: String,
        /// Why not.
        reason: String,
    },
    /// A local file could not be read or written.
    #[error("{op} {}: {source}", path.display())]
    Local {
        /// What keel was doing.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The store refused or did not answer.
    #[cfg(feature = "remote")]
    #[error("{op} {object}: {source}")]
    Store {
        /// What keel was doing.
        op: &'static str,
        /// The object's URL.
        object: String,
        /// The store's error.
        source: object_store::Error,
    },
    /// What the store (or the local transcript) holds is not what keel can use.
    #[error("{object}: {reason}")]
    Invalid {
        /// The object or file.
        object: String,
        /// Why not.
        reason: String,
    },
}

/// A session's uploader: turns ask for an upload; one task does them, latest first.
pub struct Uploader {
    remote: RemoteTranscripts,
    session_id: String,
    path: PathBuf,
    asked: watch::Sender<u64>,
    /// The last request number uploaded (or failed), and how it went.
    state: watch::Receiver<(u64, RemoteState)>,
}

impl Uploader {
    /// Start the task that uploads `path` for `session_id` whenever asked; `warn` is called
    /// with a message the first time an upload fails after one that succeeded (or the first).
    pub fn start(
        remote: RemoteTranscripts,
        session_id: String,
        path: PathBuf,
        warn: Box<dyn Fn(String) + Send + Sync>,
    ) -> Arc<Self> {
        let (asked, mut asked_rx) = watch::channel(0u64);
        let (state_tx, state) = watch::channel((0u64, Ok(())));
        let (r, sid, p) = (remote.clone(), session_id.clone(), path.clone());
        tokio::spawn(async move {
            let mut synced = Synced::default();
            let mut warned = false;
            while asked_rx.changed().await.is_ok() {
                let want = *asked_rx.borrow_and_update();
                // Only what is new since the last upload goes up (a failed part is sent again,
                // under its name, before anything newer).
                match r.sync(&sid, &p, &mut synced).await {
                    Ok(sent) => {
                        tracing::debug!("uploaded {sent} bytes of session {sid}");
                        warned = false;
                        let _ = state_tx.send((want, Ok(())));
                    }
                    Err(e) => {
                        if !warned {
                            warn(format!(
                                "the transcript could not be copied to {} ({e}); the local copy is intact and keel will try again at the next turn",
                                r.url()
                            ));
                            warned = true;
                        }
                        let _ = state_tx.send((want, Err(NotCurrent::Failed(e.to_string()))));
                    }
                }
            }
        });
        Arc::new(Self {
            remote,
            session_id,
            path,
            asked,
            state,
        })
    }

    /// Ask for an upload of the transcript as it is now; returns the request's number.
    pub fn request(&self) -> u64 {
        let mut n = 0;
        self.asked.send_modify(|v| {
            *v += 1;
            n = *v;
        });
        n
    }

    /// Upload now and wait (at most `limit`) for it: whether the remote copy is current.
    pub async fn flush(&self, limit: Duration) -> RemoteState {
        let n = self.request();
        let mut state = self.state.clone();
        let done = tokio::time::timeout(limit, state.wait_for(|(at, _)| *at >= n)).await;
        match done {
            Ok(Ok(s)) => s.1.clone(),
            Ok(Err(_)) => Err(NotCurrent::Stopped),
            Err(_) => Err(NotCurrent::TimedOut(limit.as_secs())),
        }
    }

    /// The store the transcript is copied to (a new session started in this process after
    /// this one, by `/clear`, is copied there too).
    pub fn store(&self) -> &RemoteTranscripts {
        &self.remote
    }

    /// The URL of this session's folder of parts in the store.
    pub fn session_url(&self) -> String {
        self.remote.session_url(&self.path, &self.session_id)
    }
}
