//! The task that owns the CLI's stdin.

use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot};

/// Why a line was not written.
pub(super) enum WriteError {
    /// The SDK closed stdin (end of input, or the session ended).
    Closed,
    /// The write failed: the CLI is gone or going.
    Io(std::io::Error),
}

/// What the writer task is asked to do.
pub(super) enum WriterCmd {
    /// Write one whole line, then report how it went.
    Line(
        Vec<u8>,
        oneshot::Sender<std::result::Result<(), WriteError>>,
    ),
    /// End the input (EOF), after the lines queued before.
    Close,
}

/// Owns the CLI's stdin. Lines are written whole, in order, even when the caller that queued
/// one gives up waiting: a cancelled caller can never leave half a line on the wire.
pub(super) async fn writer_task(
    mut stdin: Option<ChildStdin>,
    mut rx: mpsc::UnboundedReceiver<WriterCmd>,
) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            WriterCmd::Line(line, ack) => {
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
            WriterCmd::Close => stdin = None,
        }
    }
}
