//! `--input-format stream-json`: NDJSON on stdin drives a multi-turn session (this is how the
//! official SDKs run keel).
//!
//! A reader task parses stdin line by line: `user` messages are queued as turns, control
//! requests are answered at once (also while a turn runs), control responses are routed to the
//! keel → host request they answer. The main loop takes one queued message at a time and runs
//! a turn: `system/init` at its start, exactly one `result` at its end. At stdin EOF keel
//! finishes the turn in progress and the queued ones, then exits with the last turn's code. A
//! bad line is reported on stderr and skipped; it never ends the session.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_core::TurnEnd;
use keel_protocol::frames::{ControlRequestFrame, ControlResponseFrame};
use keel_protocol::{CancelReason, ContentBlock, UserFrame};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::Notify;

use crate::args::{Cli, OutputFormat};
use crate::control::host::{Bridge, HostApprover, HostHooks};
use crate::control::{ControlInfo, Controller};
use crate::printer;
use crate::run::{self, Prepared, RunInputs, UsageError};

/// Longest stdin line keel reads (a large image or document fits; a runaway writer does not).
pub const MAX_LINE_BYTES: usize = 256 * 1024 * 1024;
/// Most user messages that may wait for their turn.
pub const MAX_QUEUED: usize = 1000;

/// A change to the session applied between turns, in arrival order with the messages.
pub enum Edit {
    /// The system prompt of the host's `initialize` (TS SDK).
    SystemPrompt {
        /// `Some(text)` replaces keel's prompt ("" sends none); `None` keeps it.
        prompt: Option<Option<String>>,
        /// Appended to the prompt.
        append: Option<String>,
    },
}

enum Item {
    Turn {
        uuid: Option<String>,
        blocks: Vec<ContentBlock>,
    },
    Edit(Edit),
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Item>,
    /// stdin is closed: run what is queued, then stop.
    eof: bool,
    /// A signal: stop after the turn in progress, drop the rest.
    stop: bool,
    /// A message was taken for a turn that is starting or running.
    active: bool,
}

/// Messages waiting for their turn (one consumer: the main loop).
#[derive(Default)]
pub struct Queue {
    state: Mutex<QueueState>,
    notify: Notify,
}

enum Next {
    Turn(Vec<ContentBlock>),
    Edit(Edit),
    Done,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, item: Item) -> Result<(), String> {
        {
            let mut s = self.lock();
            let turns = s
                .items
                .iter()
                .filter(|i| matches!(i, Item::Turn { .. }))
                .count();
            if matches!(item, Item::Turn { .. }) && turns >= MAX_QUEUED {
                return Err(format!(
                    "{MAX_QUEUED} messages are already waiting for their turn"
                ));
            }
            s.items.push_back(item);
        }
        self.notify.notify_one();
        Ok(())
    }

    /// Queue an edit of the session (applied before the next queued turn).
    pub fn push_edit(&self, edit: Edit) {
        let _ = self.push(Item::Edit(edit));
    }

    fn set_eof(&self) {
        self.lock().eof = true;
        self.notify.notify_one();
    }

    fn stop(&self) {
        let mut s = self.lock();
        s.stop = true;
        s.items.clear();
        drop(s);
        self.notify.notify_one();
    }

    fn turn_done(&self) {
        self.lock().active = false;
    }

    /// Whether a message was taken for a turn (that may not have armed its cancel token yet).
    pub fn is_starting(&self) -> bool {
        self.lock().active
    }

    /// The uuids of queued messages; with `cancel`, drop them and report them as cancelled.
    pub fn interrupt_snapshot(&self, cancel: bool) -> (Vec<String>, Vec<String>) {
        let mut s = self.lock();
        let uuids: Vec<String> = s
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Turn { uuid, .. } => uuid.clone(),
                Item::Edit(_) => None,
            })
            .collect();
        if !cancel {
            return (uuids, Vec::new());
        }
        s.items.retain(|i| matches!(i, Item::Edit(_)));
        (Vec::new(), uuids)
    }

    async fn next(&self) -> Next {
        loop {
            {
                let mut s = self.lock();
                if s.stop {
                    return Next::Done;
                }
                match s.items.pop_front() {
                    Some(Item::Turn { blocks, .. }) => {
                        s.active = true;
                        return Next::Turn(blocks);
                    }
                    Some(Item::Edit(e)) => return Next::Edit(e),
                    None if s.eof => return Next::Done,
                    None => {}
                }
            }
            // One consumer: a notify_one that raced ahead of this wait left a permit.
            self.notify.notified().await;
        }
    }
}

/// Run a streaming session; the exit code is the last turn's (0 when no turn ran).
pub async fn run(cli: Cli, inputs: RunInputs) -> Result<i32, UsageError> {
    if cli.output_format != OutputFormat::StreamJson {
        return Err(UsageError(
            "Error: --input-format=stream-json requires --output-format=stream-json (with --verbose)".into(),
        ));
    }
    if cli.prompt.is_some() {
        return Err(UsageError(
            "Error: with --input-format stream-json the prompt comes on stdin as a user message, not as an argument".into(),
        ));
    }
    let env = inputs.env.clone();
    let state_frames = env("CLAUDE_CODE_SDK_READS_SESSION_STATE")
        .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let Prepared { mut session, rx } = match run::prepare(&cli, inputs) {
        Ok(p) => p,
        Err(e) => return e.into_exit(),
    };
    let bridge = Arc::new(Bridge::new(
        session.emitter().sender(),
        session.emitter().session_id().to_owned(),
        state_frames,
        cli.compat.include_hook_events,
    ));
    session.set_hooks(Some(Arc::new(HostHooks::new(bridge.clone()))));
    if cli.compat.permission_prompt_tool.as_deref() == Some("stdio") {
        session.set_approver(Some(Arc::new(HostApprover::new(bridge.clone()))));
    }
    let printer = tokio::spawn(printer::print(rx, OutputFormat::StreamJson, true));
    let queue = Arc::new(Queue::default());
    let info = ControlInfo {
        initial_model: session.config().model.clone(),
        api_key_source: session.config().api_key_source.clone(),
    };
    let controller = Arc::new(Controller::new(
        bridge.clone(),
        session.handle(),
        queue.clone(),
        info,
    ));
    let stdin = tokio::io::BufReader::with_capacity(1 << 16, tokio::io::stdin());
    let reader = tokio::spawn(read_input(stdin, controller.clone(), queue.clone()));
    let signals = spawn_signal_handler(session.handle(), queue.clone());

    let mut last: Option<TurnEnd> = None;
    loop {
        match queue.next().await {
            Next::Turn(blocks) => {
                bridge.state("running").await;
                let end = session.run_turn(blocks).await;
                queue.turn_done();
                bridge.state("idle").await;
                last = Some(end);
            }
            Next::Edit(Edit::SystemPrompt { prompt, append }) => {
                let prompt = prompt.unwrap_or_else(|| session.config().system_prompt.clone());
                let append = append.or_else(|| session.config().append_system_prompt.clone());
                session.set_system_prompt(prompt, append);
            }
            Next::Done => break,
        }
    }
    signals.abort();
    reader.abort();
    let _ = reader.await;
    bridge.close();
    let killed = session.shutdown().await;
    if killed > 0 {
        tracing::info!("stopped {killed} leftover process group(s) at exit");
    }
    // Every sender into the frame channel must go for the printer to finish.
    drop(session);
    drop(controller);
    drop(bridge);
    let printed = printer.await.unwrap_or_default();
    Ok(match &last {
        Some(end) => run::finish(end, &printed, OutputFormat::StreamJson),
        None if printed.write_error.is_some() => 1,
        None => 0,
    })
}

/// SIGINT or SIGTERM: stop the turn in progress, drop the queue, exit after the turn's result.
fn spawn_signal_handler(
    handle: keel_core::SessionHandle,
    queue: Arc<Queue>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        let reason = tokio::select! {
            _ = int.recv() => CancelReason::UserInterrupted,
            _ = term.recv() => CancelReason::Shutdown,
        };
        queue.stop();
        if queue.is_starting() {
            handle.wait_until_running(Duration::from_secs(2)).await;
        }
        let receipt = handle.interrupt_with(reason).await;
        tracing::info!("interrupted by a signal: {receipt:?}");
    })
}

/// One line of input, or why it is skipped.
enum Line {
    Bytes(Vec<u8>),
    TooLong(usize),
}

/// Read one `\n`-terminated line (the last may lack it), bounded by [`MAX_LINE_BYTES`]: an
/// overlong line is consumed and reported, not kept.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> std::io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let mut dropped = 0usize;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (buf.is_empty(), dropped) {
                (true, 0) => None,
                (_, 0) => Some(Line::Bytes(buf)),
                _ => Some(Line::TooLong(dropped + buf.len())),
            });
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if dropped == 0 && buf.len() + take <= MAX_LINE_BYTES {
            buf.extend_from_slice(&chunk[..take]);
        } else {
            dropped += buf.len() + take;
            buf.clear();
        }
        r.consume(take);
        if done {
            return Ok(Some(if dropped > 0 {
                Line::TooLong(dropped)
            } else {
                Line::Bytes(buf)
            }));
        }
    }
}

/// Read stdin to EOF, handing each line to the controller or the queue.
async fn read_input<R: AsyncBufRead + Unpin>(
    mut input: R,
    controller: Arc<Controller>,
    queue: Arc<Queue>,
) {
    let mut n = 0usize;
    loop {
        let line = match read_line(&mut input).await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                eprintln!("keel: reading stdin failed ({e}); treating it as closed");
                break;
            }
        };
        n += 1;
        match line {
            Line::TooLong(len) => eprintln!(
                "keel: stdin line {n} is {len} bytes, over keel's limit of {MAX_LINE_BYTES}; skipped"
            ),
            Line::Bytes(bytes) => accept(n, &bytes, &controller, &queue).await,
        }
    }
    // No answer can come any more: fail what waits for one, then let the queue run out.
    controller.bridge.close();
    queue.set_eof();
}

/// The input types keel reads.
const INPUT_TYPES: &str =
    "user, control_request, control_response, control_cancel_request, keep_alive";

async fn accept(n: usize, bytes: &[u8], controller: &Arc<Controller>, queue: &Queue) {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "keel: stdin line {n} is not JSON ({e}): {}; skipped",
                preview(text)
            );
            return;
        }
    };
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match kind.as_str() {
        "user" => match user_turn(v) {
            Ok((uuid, blocks)) => {
                if let Err(e) = queue.push(Item::Turn { uuid, blocks }) {
                    eprintln!("keel: stdin line {n}: {e}; this message was dropped");
                }
            }
            Err(e) => eprintln!("keel: stdin line {n}: {e}; skipped"),
        },
        "control_request" => {
            let id = v.get("request_id").and_then(Value::as_str).map(str::to_owned);
            match serde_json::from_value::<ControlRequestFrame>(v) {
                Ok(frame) => controller.handle(frame).await,
                Err(e) => {
                    eprintln!("keel: stdin line {n}: a control_request keel cannot read ({e}); skipped");
                    if let Some(id) = id {
                        controller
                            .respond(id, Err((format!("Malformed control request: {e}"), "invalid_request")))
                            .await;
                    }
                }
            }
        }
        "control_response" => match serde_json::from_value::<ControlResponseFrame>(v) {
            Ok(frame) => {
                if !controller.bridge.deliver(frame.response) {
                    tracing::debug!(
                        "stdin line {n}: a control_response for a request that is no longer waiting"
                    );
                }
            }
            Err(e) => eprintln!("keel: stdin line {n}: a control_response keel cannot read ({e}); skipped"),
        },
        // keel answers host requests at once, so there is nothing in flight to withdraw.
        "control_cancel_request" | "keep_alive" => {}
        "" => eprintln!(
            "keel: stdin line {n} has no \"type\" (keel reads {INPUT_TYPES}): {}; skipped",
            preview(text)
        ),
        other => eprintln!(
            "keel: stdin line {n} has type {other:?}, which keel does not read (it reads {INPUT_TYPES}); skipped"
        ),
    }
}

/// The uuid and prompt blocks of a `user` message.
fn user_turn(v: Value) -> Result<(Option<String>, Vec<ContentBlock>), String> {
    let frame: UserFrame =
        serde_json::from_value(v).map_err(|e| format!("a user message keel cannot read ({e})"))?;
    let blocks: Vec<ContentBlock> = frame
        .message
        .content
        .into_blocks()
        .into_iter()
        .filter(|b| !matches!(b, ContentBlock::Text(t) if t.text.trim().is_empty()))
        .collect();
    if blocks.is_empty() {
        return Err("the user message is empty".into());
    }
    if let Some(b) = blocks
        .iter()
        .find(|b| matches!(b, ContentBlock::ToolResult(_) | ContentBlock::ToolUse(_)))
    {
        return Err(format!(
            "a user message may not carry {} blocks (keel pairs tool calls and results itself)",
            b.kind()
        ));
    }
    Ok((frame.uuid, blocks))
}

fn preview(s: &str) -> String {
    if s.chars().count() <= 80 {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(80).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_the_last_may_lack_a_newline() {
        let data = b"{\"a\":1}\n\nlast".to_vec();
        let mut r = tokio::io::BufReader::new(&data[..]);
        let mut got = Vec::new();
        while let Some(l) = read_line(&mut r).await.unwrap() {
            match l {
                Line::Bytes(b) => got.push(String::from_utf8(b).unwrap()),
                Line::TooLong(_) => panic!(),
            }
        }
        assert_eq!(got, ["{\"a\":1}\n", "\n", "last"]);
    }

    #[test]
    fn user_messages_take_strings_and_blocks() {
        let (uuid, b) = user_turn(serde_json::json!({"type":"user","session_id":"","message":{"role":"user","content":"hi"},"parent_tool_use_id":null,"uuid":"u1"})).unwrap();
        assert_eq!((uuid.as_deref(), b.len()), (Some("u1"), 1));
        let (_, b) = user_turn(serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}})).unwrap();
        assert_eq!(b.len(), 2);
        assert!(user_turn(
            serde_json::json!({"type":"user","message":{"role":"user","content":""}})
        )
        .is_err());
        assert!(user_turn(serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"y"}]}})).is_err());
        assert!(user_turn(serde_json::json!({"type":"user"})).is_err());
    }

    #[tokio::test]
    async fn the_queue_runs_out_at_eof_and_reports_uuids() {
        let q = Queue::default();
        q.push(Item::Turn {
            uuid: Some("a".into()),
            blocks: vec![ContentBlock::text("x")],
        })
        .unwrap();
        q.push(Item::Turn {
            uuid: None,
            blocks: vec![ContentBlock::text("y")],
        })
        .unwrap();
        assert_eq!(q.interrupt_snapshot(false), (vec!["a".to_owned()], vec![]));
        q.set_eof();
        assert!(matches!(q.next().await, Next::Turn(_)));
        assert!(q.is_starting());
        q.turn_done();
        assert_eq!(q.interrupt_snapshot(true), (vec![], vec![]));
        assert!(matches!(q.next().await, Next::Done));
    }
}
