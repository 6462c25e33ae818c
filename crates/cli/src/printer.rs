//! Headless printers: text, json, stream-json. They read the session's events (mapped to wire
//! frames by `keel_core::wire`) and, in stream-json sessions, the control server's frames, so
//! that every stdout line is whole and in order.

use std::io::Write;
use std::time::Duration;

use keel_core::Emitted;
use keel_protocol::{ContentBlock, Frame, HeartbeatFrame, ResultFrame, SystemFrame};
use tokio::time::Instant;

use crate::control::host::Outgoing;
use tokio::sync::mpsc;

use crate::args::OutputFormat;

/// The receiving end of `--session-mirror`, and the sink (to learn what it could not take).
pub struct Mirror {
    /// Batches of lines written, in order.
    pub rx: tokio::sync::mpsc::Receiver<keel_core::transcript::MirrorBatch>,
    /// The sink the writers share.
    pub sink: keel_core::transcript::MirrorSink,
}

/// What the printer saw, for the exit path.
#[derive(Debug, Default)]
pub struct Printed {
    /// The last result frame.
    pub result: Option<ResultFrame>,
    /// Set when writing to stdout failed.
    pub write_error: Option<String>,
}

/// Called once when stdout cannot be written any more (the reader went away): the run must
/// stop, since nobody sees it.
pub type OnClosed = Box<dyn FnOnce(String) + Send>;

/// The shortest and longest heartbeat interval `KEEL_HEARTBEAT_MS` may set.
const HEARTBEAT_RANGE_MS: (u64, u64) = (100, 3_600_000);

/// `KEEL_HEARTBEAT_MS`: write a `system/heartbeat` frame whenever stream-json stdout has been
/// silent that long during a turn. Unset or empty: no heartbeats.
pub fn heartbeat_from_env(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Duration>, String> {
    let Some(v) = env("KEEL_HEARTBEAT_MS") else {
        return Ok(None);
    };
    if v.trim().is_empty() {
        return Ok(None);
    }
    let (lo, hi) = HEARTBEAT_RANGE_MS;
    match v.trim().parse::<u64>() {
        Ok(ms) if (lo..=hi).contains(&ms) => Ok(Some(Duration::from_millis(ms))),
        _ => Err(format!(
            "Error: KEEL_HEARTBEAT_MS={v:?} is not valid: expected milliseconds between {lo} and {hi}"
        )),
    }
}

/// What a heartbeat needs to know: whether a turn is on, its session, the calls running.
#[derive(Default)]
struct Pulse {
    in_turn: bool,
    session_id: String,
    /// (call id, tool name) of calls started and not yet answered.
    running: Vec<(String, String)>,
}

impl Pulse {
    fn saw(&mut self, frame: &Frame) {
        match frame {
            Frame::System(SystemFrame::Init(i)) => {
                self.in_turn = true;
                self.session_id = i.session_id.clone();
            }
            Frame::Result(_) => {
                self.in_turn = false;
                self.running.clear();
            }
            Frame::Assistant(a) => {
                for b in &a.message.content {
                    if let ContentBlock::ToolUse(u) = b {
                        self.running.push((u.id.clone(), u.name.clone()));
                    }
                }
            }
            Frame::User(u) => {
                if let keel_protocol::MessageContent::Blocks(bs) = &u.message.content {
                    for b in bs {
                        if let ContentBlock::ToolResult(r) = b {
                            self.running.retain(|(id, _)| *id != r.tool_use_id);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn frame(&self, silent: Duration) -> Frame {
        Frame::System(SystemFrame::Heartbeat(HeartbeatFrame {
            silent_ms: silent.as_millis() as u64,
            running: self.running.iter().map(|(_, n)| n.clone()).collect(),
            session_id: self.session_id.clone(),
            uuid: keel_core::emit::new_uuid(),
            extra: Default::default(),
        }))
    }
}

/// Print until the event channel (and the control channel, when given) close. Session events
/// go first when both are ready: a control request about a call is written after the call.
/// With `heartbeat` (stream-json only), a `system/heartbeat` frame is written whenever stdout
/// was silent that long during a turn. With `mirror` (`--session-mirror`), the lines written
/// to transcripts are printed as `transcript_mirror` frames; every batch written before a
/// frame was emitted is printed before that frame, so a turn's lines come before its result.
pub async fn print(
    mut events: mpsc::Receiver<Emitted>,
    mut control: Option<mpsc::Receiver<Outgoing>>,
    mut mirror: Option<Mirror>,
    format: OutputFormat,
    verbose: bool,
    mut on_closed: Option<OnClosed>,
    heartbeat: Option<Duration>,
) -> Printed {
    let mut out = Printed::default();
    let mut all: Vec<Frame> = Vec::new();
    let mut events_open = true;
    let heartbeat = heartbeat.filter(|_| format == OutputFormat::StreamJson);
    let mut pulse = Pulse::default();
    let mut last_write = Instant::now();
    loop {
        let beat_at = last_write + heartbeat.unwrap_or_default();
        let beating = heartbeat.is_some() && pulse.in_turn && out.write_error.is_none();
        let (frame, written) = tokio::select! {
            biased;
            e = events.recv(), if events_open => match e {
                Some(e) => (keel_core::wire::frame(&e), None),
                None => {
                    events_open = false;
                    continue;
                }
            },
            f = recv(&mut control), if control.is_some() => match f {
                Some(o) => (o.frame, o.written),
                None => {
                    control = None;
                    continue;
                }
            },
            // Lines no frame follows soon (a subagent's withheld text) are shown as they come,
            // once the turn's init is out.
            Some(batch) = recv_mirror(&mut mirror), if pulse.in_turn && (events_open || control.is_some()) => {
                if out.write_error.is_none() {
                    if let Err(e) = write_mirror(&batch) {
                        stdout_failed(&mut out, &mut on_closed, &e);
                    }
                }
                last_write = Instant::now();
                continue;
            }
            _ = tokio::time::sleep_until(beat_at), if beating && (events_open || control.is_some()) => {
                (pulse.frame(last_write.elapsed()), None)
            }
            else => break,
        };
        // A turn's transcript lines are shown before its result (other frames come first,
        // then the lines their writing added, as hosts are used to).
        let is_result = matches!(frame, Frame::Result(_));
        if is_result && out.write_error.is_none() {
            if let Err(e) = drain_mirror(&mut mirror, &pulse.session_id) {
                stdout_failed(&mut out, &mut on_closed, &e);
            }
        }
        pulse.saw(&frame);
        last_write = Instant::now();
        if let Frame::Result(r) = &frame {
            out.result = Some(r.clone());
        }
        // Whoever waits for this frame hears once it was handled (also when it was not
        // written because stdout is gone: nobody would ever read it).
        let _written = Ack(written);
        if out.write_error.is_some() {
            continue; // keep draining so the session never blocks on a dead printer
        }
        let res = match format {
            OutputFormat::StreamJson => write_frame(&frame),
            OutputFormat::Json if verbose => {
                all.push(frame);
                Ok(())
            }
            OutputFormat::Json | OutputFormat::Text => Ok(()),
        };
        let res = res.and_then(|()| match is_result {
            true => Ok(()),
            false => drain_mirror(&mut mirror, &pulse.session_id),
        });
        if let Err(e) = res {
            stdout_failed(&mut out, &mut on_closed, &e);
        }
    }
    if out.write_error.is_none() {
        if let Err(e) = drain_mirror(&mut mirror, &pulse.session_id) {
            out.write_error = Some(format!("writing to stdout failed: {e}"));
        }
    }
    if let Err(e) = write_final(format, verbose, &all, out.result.as_ref()) {
        out.write_error
            .get_or_insert(format!("writing to stdout failed: {e}"));
    }
    out
}

/// What `--output-format json` and `text` print once the run is over: every frame (json,
/// verbose), the result frame (json), or the result's text when it succeeded (text).
fn write_final(
    format: OutputFormat,
    verbose: bool,
    all: &[Frame],
    result: Option<&ResultFrame>,
) -> std::io::Result<()> {
    match (format, result) {
        (OutputFormat::Json, _) if verbose => {
            write_line(&serde_json::to_string(all).unwrap_or_default())
        }
        (OutputFormat::Json, Some(r)) => {
            write_line(&serde_json::to_string(&Frame::Result(r.clone())).unwrap_or_default())
        }
        (OutputFormat::Text, Some(r)) if !r.is_error => {
            write_line(r.result.as_deref().unwrap_or(""))
        }
        _ => Ok(()),
    }
}

/// stdout cannot be written any more: remember why, and stop the run (nobody sees it).
fn stdout_failed(out: &mut Printed, on_closed: &mut Option<OnClosed>, e: &std::io::Error) {
    let why = format!("keel's output (stdout) could not be written any more ({e}): whoever read it went away, so the run was stopped");
    out.write_error = Some(format!("writing to stdout failed: {e}"));
    if let Some(f) = on_closed.take() {
        f(why);
    }
}

/// Tells its waiter when dropped, i.e. once the frame was handled.
struct Ack(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for Ack {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// The next control frame; pending forever when there is no control channel (the `select!`
/// then waits on events alone).
async fn recv(control: &mut Option<mpsc::Receiver<Outgoing>>) -> Option<Outgoing> {
    match control {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The next batch of the transcript mirror; pending forever without one.
async fn recv_mirror(mirror: &mut Option<Mirror>) -> Option<keel_core::transcript::MirrorBatch> {
    match mirror {
        Some(m) => m.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Print every mirror batch already handed over, then say so if any could not be.
fn drain_mirror(mirror: &mut Option<Mirror>, session_id: &str) -> std::io::Result<()> {
    let Some(m) = mirror else {
        return Ok(());
    };
    while let Ok(batch) = m.rx.try_recv() {
        write_mirror(&batch)?;
    }
    let lost = m.sink.take_lost();
    if lost > 0 {
        let message = format!(
            "the transcript mirror could not take {lost} transcript entries (output fell behind); \
             the transcript on disk has them, but a copy kept from transcript_mirror frames is incomplete"
        );
        let mut extra = keel_protocol::Extra::new();
        extra.insert("source".into(), "transcript_mirror".into());
        extra.insert("lost_entries".into(), lost.into());
        write_frame(&Frame::System(SystemFrame::Warning(
            keel_protocol::frames::WarningFrame {
                message,
                session_id: session_id.to_owned(),
                uuid: keel_core::emit::new_uuid(),
                extra,
            },
        )))?;
    }
    Ok(())
}

/// One `transcript_mirror` frame: the file and its new lines, each as written.
fn write_mirror(batch: &keel_core::transcript::MirrorBatch) -> std::io::Result<()> {
    // Written by hand: the entries are copied as written, never re-encoded.
    let path =
        serde_json::to_string(&batch.file_path.to_string_lossy()).map_err(std::io::Error::other)?;
    let mut line = Vec::with_capacity(
        64 + path.len()
            + batch
                .entries
                .iter()
                .map(|e| e.get().len() + 1)
                .sum::<usize>(),
    );
    line.extend_from_slice(b"{\"type\":\"transcript_mirror\",\"filePath\":");
    line.extend_from_slice(path.as_bytes());
    line.extend_from_slice(b",\"entries\":[");
    for (i, e) in batch.entries.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        line.extend_from_slice(e.get().as_bytes());
    }
    line.extend_from_slice(b"]}\n");
    let mut lock = std::io::stdout().lock();
    lock.write_all(&line)?;
    lock.flush()
}

/// Write one frame on stdout outside a printer (a run that ends before its session starts).
pub fn print_frame(frame: &Frame) {
    if let Err(e) = write_frame(frame) {
        eprintln!("keel: writing to stdout failed: {e}");
    }
}

fn write_frame(frame: &Frame) -> std::io::Result<()> {
    let mut lock = std::io::stdout().lock();
    serde_json::to_writer(&mut lock, frame).map_err(std::io::Error::other)?;
    lock.write_all(b"\n")?;
    lock.flush()
}

fn write_line(s: &str) -> std::io::Result<()> {
    let mut lock = std::io::stdout().lock();
    lock.write_all(s.as_bytes())?;
    lock.write_all(b"\n")?;
    lock.flush()
}
