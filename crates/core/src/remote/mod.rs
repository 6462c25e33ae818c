//! Transcripts in object storage (`KEEL_TRANSCRIPT_URL`): a session that moves between
//! machines takes its history along.
//!
//! The local transcript stays the write-ahead copy; the remote one follows it. After every
//! model turn (and at the end of a run) the file is uploaded as a **new object**
//! (`<prefix>/<session id>/<generation>.jsonl`), and only then the session's **pointer**
//! (`<prefix>/<session id>/latest.json`) is replaced to name it, so a reader never sees a
//! half-written transcript; the previous object is removed afterwards. Uploads run on a task
//! of their own and coalesce (a slow bucket never slows a turn); a failed upload never touches
//! the local copy and is reported as a `system/warning`, and the result says whether the
//! remote copy is current. `--resume <id>` fetches the transcript when it is not on this disk.

//!
//! Object storage is the cargo feature `remote` (on in the `keel` binary by default); a keel
//! built without it refuses `KEEL_TRANSCRIPT_URL` at start, saying so.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

#[cfg(not(feature = "remote"))]
mod off;
#[cfg(feature = "remote")]
mod store;

#[cfg(not(feature = "remote"))]
pub use off::RemoteTranscripts;
#[cfg(feature = "remote")]
pub use store::RemoteTranscripts;

/// How long the end of a run waits for the last upload.
pub const DEFAULT_FINAL_UPLOAD_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest transcript keel fetches (a larger object is refused, not read into memory).
pub const MAX_FETCH_BYTES: u64 = 4 << 30;

/// Whether the remote copy is current: `Err` says why not (the local copy is intact).
pub type RemoteState = Result<(), String>;

/// A session's uploader: turns ask for an upload; one task does them, latest first.
pub struct Uploader {
    remote: RemoteTranscripts,
    session_id: String,
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
        let (r, sid) = (remote.clone(), session_id.clone());
        tokio::spawn(async move {
            let mut previous: Option<u64> = None;
            let mut warned = false;
            while asked_rx.changed().await.is_ok() {
                let want = *asked_rx.borrow_and_update();
                // Each upload is a new generation (the request number), so a retried upload
                // never overwrites the object the pointer names.
                match r.upload(&sid, &path, want, previous).await {
                    Ok(()) => {
                        previous = Some(want);
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
                        let _ = state_tx.send((want, Err(e)));
                    }
                }
            }
        });
        Arc::new(Self {
            remote,
            session_id,
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
            Ok(Err(_)) => Err("the uploader stopped".into()),
            Err(_) => Err(format!(
                "the upload did not finish within {} s",
                limit.as_secs()
            )),
        }
    }

    /// The URL of this session's pointer.
    pub fn pointer_url(&self) -> String {
        self.remote.pointer_url(&self.session_id)
    }
}
