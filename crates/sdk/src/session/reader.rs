//! The reader: sorts the CLI's stdout into messages, control answers and callbacks, then
//! reports how the CLI ended.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tokio::process::ChildStdout;
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;

use keel_protocol::{ControlRequestFrame, Frame};

use super::outbox::Outbox;
use super::{lock, Ended, Shared};
use crate::error::{Error, Result};
use crate::lines::{Line, LineCodec};
use crate::message::Message;
use crate::process;

/// After the CLI exits, how long its pipes may still deliver output (a grandchild that inherited
/// them could hold them open forever).
const PIPE_DRAIN: Duration = Duration::from_secs(2);

/// Reads stdout to its end, at the consumer's pace (see [`Outbox`]), then reports how the CLI
/// ended.
pub(super) async fn read_loop(
    shared: Arc<Shared>,
    stdout: ChildStdout,
    stderr_task: JoinHandle<()>,
    mut outbox: Outbox,
    max_line: usize,
) {
    let mut lines = FramedRead::with_capacity(stdout, LineCodec::new(max_line), 64 * 1024);
    let mut exit = shared.exit.clone();
    let drained = {
        let mut exit = shared.exit.clone();
        async move {
            let _ = exit.wait_for(Option::is_some).await;
            tokio::time::sleep(PIPE_DRAIN).await;
        }
    };
    tokio::pin!(drained);
    let mut stdout_held_open = false;
    loop {
        outbox.flush();
        let exited = shared.exit_code().is_some();
        // Read when the consumer has taken everything; while a control request waits, read
        // ahead of it so that the answer gets through: up to the backlog's cap, or to the end
        // once the CLI has exited (what is left in the pipe is then all there will be).
        let may_read =
            outbox.is_empty() || (shared.pending.is_waiting() && (outbox.has_room() || exited));
        tokio::select! {
            biased;
            () = outbox.deliver_one(), if !outbox.is_empty() => {}
            line = lines.next(), if may_read => match line {
                // A read error is as final as the end: the CLI's stdout is gone either way.
                None | Some(Err(_)) => break,
                Some(Ok(Line::TooLong(len))) => {
                    lock(&shared.stats).lines += 1;
                    outbox.push(Err(Error::LineTooLong { len, limit: max_line }), 0);
                }
                Some(Ok(Line::Text(line))) => {
                    if let Some(item) = shared.handle_line(&line) {
                        outbox.push(item, line.len());
                    }
                }
            },
            () = &mut drained, if may_read => {
                stdout_held_open = true;
                break;
            }
            // Held back by the consumer: a request that starts, or the exit (which bounds what
            // is left to read), lets the reader read ahead again.
            () = shared.pending.started(), if !may_read => {}
            () = process::exited(&mut exit), if !may_read && !exited => {}
        }
    }
    let exit_code = process::exit_code_of(&mut exit).await;
    // stderr gets the same drain time after the exit; if stdout already used it up, only a
    // moment more.
    let stderr_drain = if stdout_held_open {
        Duration::from_millis(100)
    } else {
        PIPE_DRAIN
    };
    let abort = stderr_task.abort_handle();
    if tokio::time::timeout(stderr_drain, stderr_task)
        .await
        .is_err()
    {
        abort.abort();
    }
    let ended = Ended {
        exit_code,
        stderr: shared.stderr.snapshot(),
        error_result: lock(&shared.tracker).last_error(),
    };
    // Waiting callers learn the end now, not once a slow consumer has read everything.
    shared.finish(&ended);
    shared.close_stdin();
    if let Some(e) = ended.stream_error() {
        outbox.push(Err(e), 0);
    }
    outbox.drain().await;
}

impl Shared {
    /// Sorts one stdout line: a message for the stream (returned), a control answer, or a
    /// callback to run. Never blocks.
    fn handle_line(self: &Arc<Self>, line: &[u8]) -> Option<Result<Message>> {
        let line = line.trim_ascii();
        if line.is_empty() {
            return None;
        }
        {
            let mut s = lock(&self.stats);
            s.lines += 1;
            if line[0] != b'{' {
                // Not a JSON object: noise (a banner, a debug print). Counted, kept out of the stream.
                s.ignored += 1;
                if s.first_ignored.is_none() {
                    let text = String::from_utf8_lossy(line);
                    s.first_ignored = Some(text.chars().take(200).collect());
                }
                return None;
            }
        }
        let v: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                return Some(Err(Error::JsonDecode {
                    line: String::from_utf8_lossy(line).into_owned(),
                    error: e.to_string(),
                }))
            }
        };
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match kind.as_str() {
            "control_response" => self.pending.answer(v),
            "control_request" => match ControlRequestFrame::deserialize(&v) {
                Ok(f) => self.spawn_incoming(f),
                Err(e) => {
                    return Some(Err(Error::MessageParse {
                        message: format!("a control_request: {e}"),
                        raw: v,
                    }))
                }
            },
            "control_cancel_request" => {
                if let Some(id) = v.get("request_id").and_then(Value::as_str) {
                    self.cancel_incoming(id);
                }
            }
            _ => {
                lock(&self.tracker).observe(&v);
                let item = match Frame::deserialize(&v) {
                    Ok(frame) => {
                        lock(&self.stats).messages += 1;
                        Ok(Message(frame))
                    }
                    Err(e) => Err(Error::MessageParse {
                        message: format!("a `{kind}` message: {e}"),
                        raw: v,
                    }),
                };
                if kind == "result" && self.close_after_result.load(Ordering::Relaxed) {
                    self.close_stdin();
                }
                return Some(item);
            }
        }
        None
    }
}
