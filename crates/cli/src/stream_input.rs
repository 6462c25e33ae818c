//! `--input-format stream-json`: NDJSON on stdin drives a multi-turn session (this is how the
//! official SDKs run keel).
//!
//! A reader task parses stdin line by line: `user` messages are queued as turns, control
//! requests are answered at once (also while a turn runs), control responses are routed to the
//! keel → host request they answer. The main loop takes one queued message at a time and runs
//! a turn: `system/init` at its start, exactly one `result` at its end. At stdin EOF keel
//! finishes the turn in progress and the queued ones, then exits with the last turn's code. A
//! bad line is reported on stderr and skipped; it never ends the session.

use std::sync::Arc;
use std::time::Duration;

use keel_core::{Built, TurnEnd};
use keel_protocol::input::{parse_input_line, InputLine};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

use crate::args::{Cli, OutputFormat};
use crate::control::host::{Bridge, HostApprover, HostHooks, HostMcp};
use crate::control::Controller;
use crate::printer;
use crate::queue::{Edit, Item, Next, Queue};
use crate::run::{self, RunInputs, UsageError};

/// Longest stdin line keel reads (a large image or document fits; a runaway writer does not).
pub const MAX_LINE_BYTES: usize = 256 * 1024 * 1024;
/// Control frames (responses, requests to the host) that may wait for the printer.
pub const CONTROL_CHANNEL_CAPACITY: usize = 256;

/// Run a streaming session; the exit code is the last turn's (0 when no turn ran).
pub async fn run(cli: Cli, inputs: RunInputs) -> Result<i32, UsageError> {
    check_flags(&cli)?;
    let env = inputs.env.clone();
    let heartbeat = printer::heartbeat_from_env(&*env).map_err(UsageError)?;
    let state_frames = env("CLAUDE_CODE_SDK_READS_SESSION_STATE")
        .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let (
        Built {
            mut session,
            events,
            ..
        },
        mirror,
    ) = match run::build(&cli, inputs).await {
        Ok(b) => b,
        Err(code) => return Ok(code),
    };
    let handle = session.handle();
    let ctx = handle.context().clone();
    crate::control::rewind::enable_from_env(&ctx, &*env);
    let (control_tx, control_rx) = tokio::sync::mpsc::channel(CONTROL_CHANNEL_CAPACITY);
    let bridge = connect_host(&cli, &ctx, control_tx, state_frames);
    let queue = Arc::new(Queue::default());
    let (h, q) = (handle.failer(), queue.clone());
    let printer = tokio::spawn(printer::print(
        events,
        Some(control_rx),
        mirror,
        OutputFormat::StreamJson,
        true,
        // Nobody reads any more: stop the turn (and its tools), and run no further turn.
        Some(Box::new(move |why| {
            q.stop();
            h.fail(why);
        })),
        heartbeat,
    ));
    let controller = Arc::new(Controller::new(
        bridge.clone(),
        handle.clone(),
        queue.clone(),
    ));
    let reader = tokio::spawn(read_input(
        tokio::io::stdin(),
        controller.clone(),
        queue.clone(),
    ));
    let signals = spawn_signal_handler(handle.clone(), queue.clone());

    let replay = cli.compat.replay_user_messages;
    let last = serve(&mut session, &queue, &bridge, &ctx, replay).await;
    // Listen before the turn's handler goes, so no signal falls between the two.
    let stops = crate::signals::Stops::install();
    signals.abort();
    reader.abort();
    let _ = reader.await;
    bridge.close();
    let killed = crate::signals::shutdown(&session, stops).await;
    if killed > 0 {
        tracing::info!("stopped {killed} leftover process group(s) at exit");
    }
    // Every sender into the printer's channels must go for the printer to finish; the context
    // holds the hooks and the approver, which hold the bridge.
    ctx.set_hooks(None);
    ctx.set_approver(None);
    drop(session);
    drop(controller);
    drop(bridge);
    drop(handle);
    drop(ctx);
    let printed = printer.await.unwrap_or_default();
    Ok(match &last {
        Some(end) => run::finish(end, &printed, OutputFormat::StreamJson),
        None if printed.write_error.is_some() => 1,
        None => 0,
    })
}

/// The flags stream-json input needs (and the prompt it cannot have).
fn check_flags(cli: &Cli) -> Result<(), UsageError> {
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
    Ok(())
}

/// The bridge to the host, wired into the session: the host's hooks, its approver (with
/// `--permission-prompt-tool stdio`) and the MCP servers it runs.
fn connect_host(
    cli: &Cli,
    ctx: &Arc<keel_core::SessionContext>,
    control_tx: tokio::sync::mpsc::Sender<crate::control::host::Outgoing>,
    state_frames: bool,
) -> Arc<Bridge> {
    let bridge = Arc::new(Bridge::new(
        control_tx,
        ctx.session_cell().clone(),
        state_frames,
        cli.compat.include_hook_events,
    ));
    // Hooks and the approver live in the session's context: every agent of the session, its
    // subagents included, asks the host at its next decision.
    ctx.set_hooks(Some(Arc::new(HostHooks::new(bridge.clone()))));
    if cli.compat.permission_prompt_tool.as_deref() == Some("stdio") {
        ctx.set_approver(Some(Arc::new(HostApprover::new(
            bridge.clone(),
            ctx.bypass_gate(),
        ))));
    }
    // MCP servers the host runs (`type: sdk`) are reached through it.
    ctx.mcp()
        .set_sdk_host(Arc::new(HostMcp::new(bridge.clone())));
    bridge
}

/// Runs the queued turns and edits one at a time until stdin ends (or the queue is stopped);
/// returns how the last turn ended.
async fn serve(
    session: &mut keel_core::Session,
    queue: &Queue,
    bridge: &Arc<Bridge>,
    ctx: &Arc<keel_core::SessionContext>,
    replay: bool,
) -> Option<TurnEnd> {
    let mut last: Option<TurnEnd> = None;
    loop {
        match queue.next().await {
            Next::Turn(blocks, origin, uuid) => {
                session.set_turn_prompt_uuid(uuid.as_deref());
                crate::control::rewind::start_prompt(bridge, ctx, replay, uuid, &blocks).await;
                bridge.state("running").await;
                session.set_turn_origin(origin);
                let end = session.run_turn(blocks).await;
                queue.turn_done();
                bridge.state("idle").await;
                last = Some(end);
            }
            Next::Edit(Edit::SystemPrompt { prompt, append }) => {
                let (old_prompt, old_append) = session.system_prompt();
                let prompt = prompt.unwrap_or_else(|| old_prompt.map(str::to_owned));
                let append = append.or_else(|| old_append.map(str::to_owned));
                session.set_system_prompt(prompt, append);
            }
            Next::Edit(Edit::ForwardSubagentText(on)) => session.set_forward_subagent_text(on),
            Next::Done => break,
        }
    }
    last
}

/// SIGINT or SIGTERM: stop the turn in progress, drop the queue, exit after the turn's result.
fn spawn_signal_handler(
    handle: keel_core::SessionHandle,
    queue: Arc<Queue>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(reason) = crate::signals::next().await else {
            return;
        };
        queue.stop();
        if queue.is_starting() {
            handle.wait_until_running(Duration::from_secs(2)).await;
        }
        let receipt = handle.interrupt_with(reason).await;
        tracing::info!("interrupted by a signal: {receipt:?}");
    })
}

/// A line of input, or why one was skipped.
#[derive(Debug, PartialEq)]
enum Input {
    Line(String),
    TooLong,
    NotUtf8,
}

/// Lines of stdin, bounded: an overlong or non-UTF-8 line is reported and skipped, and the
/// next one is read as usual. `LinesCodec` does the framing; it is driven here rather than by a
/// framed reader, which stops at its first error and could drop lines already buffered.
struct Lines<R> {
    input: R,
    buf: BytesMut,
    codec: LinesCodec,
    eof: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(input: R, max: usize) -> Self {
        Self {
            input,
            buf: BytesMut::with_capacity(1 << 16),
            codec: LinesCodec::new_with_max_length(max),
            eof: false,
        }
    }

    /// The next line; `None` at the end of input (or when reading failed: then it is reported
    /// on stderr and treated as closed).
    async fn next(&mut self) -> Option<Input> {
        loop {
            let decoded = if self.eof {
                self.codec.decode_eof(&mut self.buf)
            } else {
                self.codec.decode(&mut self.buf)
            };
            match decoded {
                Ok(Some(l)) => return Some(Input::Line(l)),
                Ok(None) if self.eof => return None,
                Ok(None) => {}
                Err(LinesCodecError::MaxLineLengthExceeded) => return Some(Input::TooLong),
                Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Some(Input::NotUtf8)
                }
                Err(LinesCodecError::Io(e)) => {
                    eprintln!("keel: reading stdin failed ({e}); treating it as closed");
                    return None;
                }
            }
            match self.input.read_buf(&mut self.buf).await {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) => {
                    eprintln!("keel: reading stdin failed ({e}); treating it as closed");
                    return None;
                }
            }
        }
    }
}

/// Read stdin to EOF, handing each line to the controller or the queue.
async fn read_input<R: AsyncRead + Unpin>(
    input: R,
    controller: Arc<Controller>,
    queue: Arc<Queue>,
) {
    let mut lines = Lines::new(input, MAX_LINE_BYTES);
    let mut n = 0usize;
    while let Some(input) = lines.next().await {
        n += 1;
        match input {
            Input::Line(l) => accept(n, &l, &controller, &queue).await,
            Input::TooLong => eprintln!(
                "keel: stdin line {n} is longer than keel's limit of {MAX_LINE_BYTES} bytes; skipped"
            ),
            Input::NotUtf8 => eprintln!("keel: stdin line {n} is not UTF-8 text; skipped"),
        }
    }
    // No answer can come any more: fail what waits for one, then let the queue run out.
    controller.bridge.close();
    queue.set_eof();
}

async fn accept(n: usize, text: &str, controller: &Arc<Controller>, queue: &Queue) {
    match parse_input_line(text) {
        Ok(InputLine::User {
            uuid,
            blocks,
            origin,
        }) => {
            if let Err(e) = queue.push(Item::Turn {
                uuid,
                blocks,
                origin,
            }) {
                eprintln!("keel: stdin line {n}: {e}; this message was dropped");
            }
        }
        Ok(InputLine::ControlRequest(frame)) => controller.handle(frame).await,
        Ok(InputLine::ControlResponse(frame)) => {
            if !controller.bridge.deliver(frame.response) {
                tracing::debug!(
                    "stdin line {n}: a control_response for a request that is no longer waiting"
                );
            }
        }
        Ok(InputLine::Nothing) => {}
        Err(e) => {
            // "stdin line 3 is not JSON …", "stdin line 4: the user message is empty"
            let sep = if e.message.starts_with("is ") || e.message.starts_with("has ") {
                " "
            } else {
                ": "
            };
            let message = format!("stdin line {n}{sep}{}; skipped", e.message);
            if e.request_id.is_none() {
                // A frame as well as stderr: a host whose message was refused learns why
                // (and that no result will come for it) on the stream it reads.
                controller.bridge.warn(message, "input").await;
            } else {
                eprintln!("keel: {message}");
            }
            if let Some(id) = e.request_id {
                let why = e
                    .message
                    .strip_prefix("a control_request keel cannot read (")
                    .and_then(|m| m.strip_suffix(')'))
                    .unwrap_or(&e.message)
                    .to_owned();
                controller
                    .respond(
                        id,
                        Err((
                            format!("Malformed control request: {why}"),
                            "invalid_request",
                        )),
                    )
                    .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_skipped_and_the_last_may_lack_a_newline() {
        let data = b"{\"a\":1}\r\n0123456789abcdef\n\xff\xfe\n\nlast".to_vec();
        let mut lines = Lines::new(&data[..], 10);
        let mut got = Vec::new();
        while let Some(l) = lines.next().await {
            got.push(l);
        }
        assert_eq!(
            got,
            [
                Input::Line("{\"a\":1}".into()),
                Input::TooLong,
                Input::NotUtf8,
                Input::Line(String::new()),
                Input::Line("last".into()),
            ]
        );
    }
}
