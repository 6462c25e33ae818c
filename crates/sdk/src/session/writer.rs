//! The task that owns the CLI's stdin.

use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot, watch};

/// Lines queued for the writer; a caller waits for room beyond this.
pub(super) const QUEUE: usize = 16;

/// Why a line was not written.
pub(super) enum WriteError {
    /// The SDK closed stdin (end of input, or the session ended).
    Closed,
    /// The write failed: the CLI is gone or going.
    Io(std::io::Error),
}

/// One whole line to write, and where to report how it went.
pub(super) type LineCmd = (
    Vec<u8>,
    oneshot::Sender<std::result::Result<(), WriteError>>,
);

/// Owns the CLI's stdin. Lines are written whole, in order, even when the caller that queued
/// one gives up waiting: a cancelled caller can never leave half a line on the wire.
///
/// The end of input comes on `close`, not in the queue, so that ending it never waits for room
/// (the reader ends it, and the reader must never wait on the CLI's stdin); the lines already
/// queued are still written first.
pub(super) async fn writer_task(
    mut stdin: Option<ChildStdin>,
    mut rx: mpsc::Receiver<LineCmd>,
    mut close: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            biased;
            cmd = rx.recv() => {
                let Some((line, ack)) = cmd else { break };
                let outcome = match stdin.as_mut() {
                    None => Err(WriteError::Closed),
                    Some(w) => {
                        let written = async {
                            w.write_all(&line).await?;
                            w.flush().await
                        }
                        .await;
                        written.map_err(|e| {
                            stdin = None;
                            WriteError::Io(e)
                        })
                    }
                };
                let _ = ack.send(outcome);
            }
            // Whether closed on purpose or because the session is gone, the input ends.
            () = closed(&mut close), if stdin.is_some() => stdin = None,
        }
    }
}

/// Completes once the input is to end (or nobody can end it any more).
async fn closed(close: &mut watch::Receiver<bool>) {
    let _ = close.wait_for(|closed| *closed).await;
}
