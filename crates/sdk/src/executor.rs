//! The executor API: run a prompt from a script or a tool and get a plain verdict.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::Stream;
use keel_protocol::{Frame, MessageContent};
use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::argv::{build_args, render_command, resolve_cli};
use crate::error::{result_message, tail_chars, Error};
use crate::message::Message;
use crate::options::{Options, PromptMode};
use crate::process::{wait_exit, Killer};
use crate::session::{self, Session};

/// How much stderr a diagnostic quotes.
const STDERR_IN_DIAGNOSTIC: usize = 4000;
/// Events queued for the consumer of an [`ExecStream`]; the run waits for room beyond this.
const EVENT_QUEUE: usize = 32;

/// The verdict of [`execute_prompt`].
#[derive(Clone, Debug, PartialEq)]
pub struct PromptResult {
    /// The CLI exited 0 with a `result` that is not an error, after at least one turn.
    pub success: bool,
    /// The result text (else the assistant's text).
    pub output: String,
    /// Why it failed: the CLI's stderr (trimmed), else the result's error text, else
    /// "exit code N" (or the timeout / start failure). `None` on success.
    pub error: Option<String>,
    /// The session id, when the CLI reported one.
    pub session_id: Option<String>,
    /// The result's `num_turns` (0 without a result).
    pub num_turns: u32,
    /// The exit code; `None` if the CLI never started.
    pub exit_code: Option<i32>,
    /// Wall time, start to exit.
    pub duration: Duration,
}

/// An event of [`execute_streaming`]. The order: `Started`, `Message`s, at most one of
/// `NoTurns`, then at most one of `Error` / `NoOutput` / `ProcessError`, and always `Finished` last.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // each event is moved once, through a channel
pub enum ExecEvent {
    /// The CLI started.
    Started {
        /// The full command line.
        command: String,
        /// Its process id.
        pid: u32,
    },
    /// A message from the CLI.
    Message(Message),
    /// A stdout line the SDK could not read (bad JSON, a malformed known message, too long);
    /// the run goes on.
    Warning {
        /// What was wrong.
        message: String,
    },
    /// The CLI exited non-zero: the command, the exit code, how many lines it wrote, its stderr.
    Error {
        /// The explanation.
        message: String,
    },
    /// The CLI exited 0 without producing a result: exit code, working directory, stderr.
    NoOutput {
        /// The explanation.
        diagnostic: String,
    },
    /// The run ended with `num_turns` 0: the prompt never reached the model (usually a hook
    /// blocked it).
    NoTurns {
        /// The explanation, and how to see the hook's message.
        diagnostic: String,
    },
    /// The CLI could not be started, or it timed out and its process group was killed: the
    /// full command line and the OS error.
    ProcessError {
        /// The explanation.
        message: String,
    },
    /// The run is over; always the last event.
    Finished(PromptResult),
}

/// Runs `prompt` and returns the verdict. Uses [`PromptMode::Argv`] unless
/// `options.prompt_mode` says otherwise, and honours `options.timeout`.
///
/// ```no_run
/// # async fn demo() {
/// let r = keel_sdk::execute_prompt("Summarize README.md", keel_sdk::Options::default()).await;
/// if r.success { println!("{}", r.output) } else { eprintln!("failed: {:?}", r.error) }
/// # }
/// ```
pub async fn execute_prompt(prompt: impl Into<String>, options: Options) -> PromptResult {
    use futures_util::StreamExt;
    let mut events = execute_streaming(prompt, options);
    while let Some(ev) = events.next().await {
        if let ExecEvent::Finished(r) = ev {
            return r;
        }
    }
    // The task always ends with Finished; reaching here means it panicked.
    PromptResult {
        success: false,
        output: String::new(),
        error: Some("keel-sdk: the executor task ended without a verdict".into()),
        session_id: None,
        num_turns: 0,
        exit_code: None,
        duration: Duration::ZERO,
    }
}

/// Runs `prompt` and streams [`ExecEvent`]s. Dropping the stream kills the CLI.
pub fn execute_streaming(prompt: impl Into<String>, options: Options) -> ExecStream {
    let (tx, rx) = mpsc::channel(EVENT_QUEUE);
    let task = tokio::spawn(run(prompt.into(), options, tx));
    ExecStream { rx, task }
}

/// The events of [`execute_streaming`].
#[must_use = "streams do nothing unless polled"]
pub struct ExecStream {
    rx: mpsc::Receiver<ExecEvent>,
    task: JoinHandle<()>,
}

impl Stream for ExecStream {
    type Item = ExecEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ExecEvent>> {
        self.get_mut().rx.poll_recv(cx)
    }
}

impl Drop for ExecStream {
    fn drop(&mut self) {
        // Dropping the task drops its session, whose guard kills the CLI's process group.
        self.task.abort();
    }
}

/// What the run has produced so far.
#[derive(Default)]
struct Seen {
    result: Option<keel_protocol::ResultFrame>,
    /// A result that failed typed parsing, kept raw.
    raw_result: Option<serde_json::Value>,
    assistant_text: String,
    session_id: Option<String>,
}

async fn run(prompt: String, options: Options, tx: mpsc::Sender<ExecEvent>) {
    let started = Instant::now();
    let deadline = options.timeout.map(|t| tokio::time::Instant::now() + t);
    // A consumer that has gone also aborts this task (ExecStream's Drop): a failed send needs
    // no handling.
    let send = |ev: ExecEvent| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(ev).await;
        }
    };
    let mode = options.prompt_mode.unwrap_or(PromptMode::Argv);
    let command_line = planned_command(&options, mode, &prompt);

    let start = start(&prompt, &options, mode);
    let started_session = match deadline {
        Some(d) => tokio::time::timeout_at(d, start).await.ok(),
        None => Some(start.await),
    };
    let mut session = match started_session {
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            let message = start_failure(&command_line, &e);
            for ev in failed_start(message, e.exit_code(), started.elapsed()) {
                send(ev).await;
            }
            return;
        }
        None => {
            // Timed out while starting (initialize never answered): the session was dropped
            // with its guard, which killed the process group.
            let message = format!(
                "timed out after {:?} while starting `{command_line}`; its process group was killed",
                options.timeout.unwrap_or_default()
            );
            for ev in failed_start(message, None, started.elapsed()) {
                send(ev).await;
            }
            return;
        }
    };
    send(ExecEvent::Started {
        command: session.command.clone(),
        pid: session.pid,
    })
    .await;

    let mut seen = Seen::default();
    let mut terminal: Option<Error> = None;
    let mut deadline = Deadline {
        at: deadline,
        killer: session.killer.clone(),
        expired: false,
    };
    loop {
        let event = match deadline.guard(session.rx.recv()).await {
            None => break,
            Some(Ok(m)) => {
                seen.record(&m);
                ExecEvent::Message(m)
            }
            Some(Err(e)) if e.is_terminal() => {
                terminal = Some(e);
                continue;
            }
            Some(Err(e)) => {
                if let Error::MessageParse { raw, .. } = &e {
                    if raw.get("type").and_then(|t| t.as_str()) == Some("result") {
                        seen.raw_result = Some(raw.clone());
                    }
                }
                ExecEvent::Warning {
                    message: e.to_string(),
                }
            }
        };
        deadline.guard(send(event)).await;
    }
    let exit_code = wait_exit(&mut session.exit, Duration::from_secs(5)).await;
    let verdict = Verdict {
        command: &session.command,
        exit_code,
        stderr: session.shared.stderr_tail(),
        stats: session.shared.stats(),
        cwd: &session.shared.cwd,
        seen: &seen,
        terminal: terminal.as_ref(),
        timed_out: deadline
            .expired
            .then(|| options.timeout.unwrap_or_default()),
        duration: started.elapsed(),
    };
    for ev in verdict.events() {
        send(ev).await;
    }
}

/// `Options::timeout` once the CLI runs: when it passes, the process group is killed, whatever
/// the run is waiting for then (the CLI's output, or room in a slow consumer's queue); the run
/// goes on to collect what the CLI wrote.
struct Deadline {
    at: Option<tokio::time::Instant>,
    killer: Killer,
    expired: bool,
}

impl Deadline {
    /// Awaits `fut`, killing the CLI if the deadline passes first (and still awaiting `fut`).
    async fn guard<F: Future>(&mut self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        if let (Some(at), false) = (self.at, self.expired) {
            tokio::select! {
                out = &mut fut => return out,
                () = tokio::time::sleep_until(at) => {
                    self.expired = true;
                    self.killer.signal(Signal::SIGKILL);
                }
            }
        }
        fut.await
    }
}

/// The events of a run that never started: why, then the verdict.
fn failed_start(message: String, exit_code: Option<i32>, duration: Duration) -> [ExecEvent; 2] {
    [
        ExecEvent::ProcessError {
            message: message.clone(),
        },
        ExecEvent::Finished(PromptResult {
            success: false,
            output: String::new(),
            error: Some(message),
            session_id: None,
            num_turns: 0,
            exit_code,
            duration,
        }),
    ]
}

async fn start(prompt: &str, options: &Options, mode: PromptMode) -> crate::Result<Session> {
    let session = session::start(options, mode, Some(prompt))?;
    if mode == PromptMode::StreamJson {
        let callbacks = options.has_callbacks();
        session.shared.set_close_after_result(callbacks);
        session.shared.initialize().await?;
        session
            .shared
            .send_user(MessageContent::Text(prompt.to_owned()))
            .await?;
        if !callbacks {
            session.shared.close_stdin();
        }
    }
    Ok(session)
}

/// The command line the run will use, for messages about a start that failed.
fn planned_command(options: &Options, mode: PromptMode, prompt: &str) -> String {
    let program = resolve_cli(options).unwrap_or_else(|_| {
        options
            .cli_path
            .clone()
            .unwrap_or_else(|| crate::argv::DEFAULT_CLI.into())
    });
    let prompt = (mode == PromptMode::Argv).then_some(prompt);
    render_command(&program, &build_args(options, mode, prompt))
}

fn start_failure(command: &str, e: &Error) -> String {
    match e {
        Error::CliNotFound { path } => format!(
            "could not start `{command}`: {}: {} (set Options::cli_path, or put the CLI on PATH)",
            path.display(),
            std::io::Error::from(nix::errno::Errno::ENOENT)
        ),
        Error::Spawn { source, .. } => format!("could not start `{command}`: {source}"),
        other => format!("could not start `{command}`: {other}"),
    }
}

impl Seen {
    fn record(&mut self, m: &Message) {
        if self.session_id.is_none() {
            self.session_id = m.session_id().map(str::to_owned);
        }
        match m.frame() {
            Frame::Result(r) => {
                self.result = Some(r.clone());
                self.raw_result = None;
            }
            Frame::Assistant(_) => {
                if let Some(t) = m.assistant_text() {
                    self.assistant_text.push_str(&t);
                }
            }
            _ => {}
        }
    }

    fn has_result(&self) -> bool {
        self.result.is_some() || self.raw_result.is_some()
    }

    fn num_turns(&self) -> u32 {
        match (&self.result, &self.raw_result) {
            (Some(r), _) => r.num_turns,
            (None, Some(v)) => v.get("num_turns").and_then(|n| n.as_u64()).unwrap_or(0) as u32,
            (None, None) => 0,
        }
    }

    fn is_error(&self) -> bool {
        match (&self.result, &self.raw_result) {
            (Some(r), _) => r.is_error,
            (None, Some(v)) => v.get("is_error").and_then(|b| b.as_bool()).unwrap_or(true),
            (None, None) => true,
        }
    }

    /// The result's own error text: errors joined, else the result text, else the subtype.
    fn result_error_text(&self) -> Option<String> {
        if !self.is_error() || !self.has_result() {
            return None;
        }
        Some(match &self.result {
            Some(r) => result_message(
                r.errors.as_deref().unwrap_or_default(),
                r.result.as_deref(),
                r.subtype.as_str(),
            ),
            None => "the CLI reported an error result".to_owned(),
        })
    }

    fn output(&self) -> String {
        match self.result.as_ref().and_then(|r| r.result.clone()) {
            Some(text) if !self.is_error() => text,
            _ => self.assistant_text.clone(),
        }
    }
}

/// Everything known at the end of a run, turned into the closing events.
struct Verdict<'a> {
    command: &'a str,
    exit_code: Option<i32>,
    stderr: String,
    stats: session::Stats,
    cwd: &'a std::path::Path,
    seen: &'a Seen,
    terminal: Option<&'a Error>,
    timed_out: Option<Duration>,
    duration: Duration,
}

impl Verdict<'_> {
    fn events(&self) -> Vec<ExecEvent> {
        let mut events = Vec::new();
        let stderr = self.stderr.trim();
        let stderr_quoted = if stderr.is_empty() {
            "(stderr was empty)".to_owned()
        } else {
            format!("stderr:\n{}", tail_chars(stderr, STDERR_IN_DIAGNOSTIC))
        };
        let code = self
            .exit_code
            .or_else(|| self.terminal.and_then(Error::exit_code));
        let code_text = code.map_or("unknown".to_owned(), |c| c.to_string());
        let no_turns = self.seen.has_result() && self.seen.num_turns() == 0;
        if no_turns {
            events.push(self.no_turns_event(&stderr_quoted));
        }
        let mut error: Option<String> = None;
        if let Some(limit) = self.timed_out {
            let message = format!(
                "timed out after {limit:?}: killed the process group of `{}` (exit code {code_text}, {} stdout lines); {stderr_quoted}",
                self.command, self.stats.lines
            );
            events.push(ExecEvent::ProcessError {
                message: message.clone(),
            });
            error = Some(message);
        } else if code != Some(0) {
            let result_text = self
                .seen
                .result_error_text()
                .map(|t| format!("; the result says: {t}"))
                .unwrap_or_default();
            events.push(ExecEvent::Error {
                message: format!(
                    "`{}` exited with code {code_text} after {} stdout lines{result_text}; {stderr_quoted}",
                    self.command, self.stats.lines
                ),
            });
        } else if !self.seen.has_result() {
            let diagnostic = self.no_output_diagnostic(&stderr_quoted);
            events.push(ExecEvent::NoOutput {
                diagnostic: diagnostic.clone(),
            });
            error = Some(diagnostic);
        }
        let success = self.timed_out.is_none()
            && code == Some(0)
            && self.seen.has_result()
            && !self.seen.is_error()
            && !no_turns;
        if !success && error.is_none() {
            error = Some(if !stderr.is_empty() {
                stderr.to_owned()
            } else if let Some(t) = self.seen.result_error_text() {
                t
            } else if no_turns {
                "the run ended with num_turns 0: the prompt never reached the model".to_owned()
            } else {
                format!("exit code {code_text}")
            });
        }
        events.push(ExecEvent::Finished(PromptResult {
            success,
            output: self.seen.output(),
            error,
            session_id: self.seen.session_id.clone(),
            num_turns: self.seen.num_turns(),
            exit_code: code,
            duration: self.duration,
        }));
        events
    }

    /// The run ended before any turn: most often a hook blocked the prompt, whose message is
    /// in stderr.
    fn no_turns_event(&self, stderr_quoted: &str) -> ExecEvent {
        let said = self
            .seen
            .result
            .as_ref()
            .and_then(|r| {
                r.result
                    .clone()
                    .or_else(|| r.errors.as_ref().map(|e| e.join("; ")))
            })
            .filter(|t| !t.trim().is_empty())
            .map(|t| format!(" The result says: {t}."))
            .unwrap_or_default();
        ExecEvent::NoTurns {
            diagnostic: format!(
                "the run ended with num_turns 0: the prompt never reached the model. This usually means a hook (UserPromptSubmit or SessionStart) blocked it.{said} To see the hook's message, read the {stderr_quoted}\nor run the command by hand: {}",
                self.command
            ),
        }
    }

    /// Exit code 0 without a result: what the process wrote instead, and where it ran.
    fn no_output_diagnostic(&self, stderr_quoted: &str) -> String {
        let noise = match &self.stats.first_ignored {
            Some(l) => format!(
                " It wrote {} line(s) that are not JSON, the first: {l:?}.",
                self.stats.ignored
            ),
            None => String::new(),
        };
        format!(
            "`{}` exited with code 0 but produced no result ({} stdout lines, {} messages).{noise} Working directory: {}; {stderr_quoted}",
            self.command,
            self.stats.lines,
            self.stats.messages,
            self.cwd.display()
        )
    }
}
