//! One running CLI: the reader that sorts its stdout into messages, control answers and
//! callbacks; the writer; pending control requests; and how the session ends.

mod incoming;
mod outbox;
mod pending;
mod reader;
mod writer;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::future::AbortHandle;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};

use keel_protocol::{
    ControlRequest, ControlRequestFrame, Extra, Frame, MessageContent, Role, UserFrame, UserMessage,
};

use crate::argv::{build_args, resolve_cli};
use crate::callbacks::{CanUseTool, HookCallback};
use crate::error::{Error, Result};
use crate::message::Message;
use crate::options::{Options, PromptMode};
use crate::process::{self, Killer, ProcessGuard, Spec};
use crate::stderr::{pump, StderrRing};
use crate::tracker::{ErrorResult, Tracker};

use outbox::Outbox;
use pending::PendingTable;
use writer::{writer_task, LineCmd, WriteError};

/// Locks a std mutex, ignoring poisoning (the data stays consistent: every critical section is a
/// few plain assignments).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A started session. The owner keeps `guard`: dropping it kills the CLI's process group.
pub(crate) struct Session {
    pub shared: Arc<Shared>,
    pub rx: mpsc::Receiver<Result<Message>>,
    /// Held for its Drop: kills the process group when the owner goes away.
    pub _guard: ProcessGuard,
    pub killer: Killer,
    pub exit: watch::Receiver<Option<i32>>,
    pub pid: u32,
    pub command: String,
    pub close_grace: Duration,
}

/// Counts of what the reader saw, for diagnostics.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    /// Non-empty stdout lines.
    pub lines: u64,
    /// Messages delivered (control frames not counted).
    pub messages: u64,
    /// Lines that were not JSON objects (skipped).
    pub ignored: u64,
    /// The first such line, shortened.
    pub first_ignored: Option<String>,
}

/// How the CLI ended, once it has.
#[derive(Clone, Debug)]
pub(crate) struct Ended {
    pub exit_code: i32,
    pub stderr: String,
    pub error_result: Option<ErrorResult>,
}

impl Ended {
    /// The error that ends the message stream: none for exit 0; [`Error::Result`] right after
    /// an error result; [`Error::Process`] otherwise.
    pub(crate) fn stream_error(&self) -> Option<Error> {
        if self.exit_code == 0 {
            return None;
        }
        Some(match &self.error_result {
            Some(r) => r.clone().into_error(self.exit_code, self.stderr.clone()),
            None => Error::Process {
                exit_code: self.exit_code,
                stderr: self.stderr.clone(),
            },
        })
    }

    /// The error for a control request the CLI never answered.
    fn error_for(&self, subtype: &str) -> Error {
        self.stream_error().unwrap_or_else(|| Error::Connection {
            message: format!("the CLI exited (code 0) before answering the {subtype} request"),
        })
    }
}

/// State shared by the owner, its handles, the reader and callback tasks.
pub(crate) struct Shared {
    writer: mpsc::Sender<LineCmd>,
    /// Ends the CLI's input (after the lines already queued).
    close_input: watch::Sender<bool>,
    pending: PendingTable,
    counter: AtomicU64,
    tracker: Mutex<Tracker>,
    exit: watch::Receiver<Option<i32>>,
    stderr: StderrRing,
    control_timeout: Duration,
    can_use_tool: Option<CanUseTool>,
    hooks: HashMap<String, HookCallback>,
    hooks_config: Value,
    inflight: Mutex<HashMap<String, AbortHandle>>,
    close_after_result: AtomicBool,
    stats: Mutex<Stats>,
    /// The CLI's working directory, for diagnostics.
    pub cwd: PathBuf,
}

/// Starts the CLI for `mode` (`prompt` is the argv prompt of [`PromptMode::Argv`]).
pub(crate) fn start(options: &Options, mode: PromptMode, prompt: Option<&str>) -> Result<Session> {
    if mode == PromptMode::Argv && options.has_callbacks() {
        return Err(Error::InvalidOptions {
            message: "can_use_tool and hooks need PromptMode::StreamJson: with PromptMode::Argv the CLI cannot call back".into(),
        });
    }
    if let Some(dir) = &options.cwd {
        if !dir.is_dir() {
            return Err(Error::InvalidOptions {
                message: format!("the working directory does not exist: {}", dir.display()),
            });
        }
    }
    let program = resolve_cli(options)?;
    let args = build_args(options, mode, prompt);
    let cwd = options
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let mut env: Vec<(String, String)> = Vec::new();
    if !options.env.contains_key("CLAUDE_CODE_ENTRYPOINT") {
        env.push(("CLAUDE_CODE_ENTRYPOINT".into(), "sdk-rust".into()));
    }
    if options.cwd.is_some() {
        env.push(("PWD".into(), cwd.to_string_lossy().into_owned()));
    }
    env.extend(options.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let spawned = process::spawn(Spec {
        program,
        args,
        cwd: options.cwd.clone(),
        env,
        // Set inside a Claude Code session; a nested `claude` refuses to start when it sees it.
        env_remove: if options.env.contains_key("CLAUDECODE") {
            vec![]
        } else {
            vec!["CLAUDECODE".into()]
        },
        pipe_stdin: mode == PromptMode::StreamJson,
    })?;

    let (hooks, hooks_config) = register_hooks(options);
    let (writer, writer_rx) = mpsc::channel(writer::QUEUE);
    let (close_input, close_rx) = watch::channel(false);
    tokio::spawn(writer_task(spawned.stdin, writer_rx, close_rx));
    let shared = Arc::new(Shared {
        writer,
        close_input,
        pending: PendingTable::default(),
        counter: AtomicU64::new(0),
        tracker: Mutex::new(Tracker::default()),
        exit: spawned.exit.clone(),
        stderr: StderrRing::new(options.stderr_ring_bytes()),
        control_timeout: options.control_timeout(),
        can_use_tool: options.can_use_tool.clone(),
        hooks,
        hooks_config,
        inflight: Mutex::new(HashMap::new()),
        close_after_result: AtomicBool::new(false),
        stats: Mutex::new(Stats::default()),
        cwd,
    });
    let stderr_task = {
        let shared = shared.clone();
        let cb = options.stderr.clone();
        tokio::spawn(async move { pump(spawned.stderr, &shared.stderr, cb).await })
    };
    let (tx, rx) = mpsc::channel(outbox::QUEUE);
    tokio::spawn(reader::read_loop(
        shared.clone(),
        spawned.stdout,
        stderr_task,
        Outbox::new(tx),
        options.max_line_bytes(),
    ));
    Ok(Session {
        shared,
        rx,
        _guard: ProcessGuard::new(spawned.killer.clone()),
        killer: spawned.killer,
        exit: spawned.exit,
        pid: spawned.pid,
        command: spawned.command,
        close_grace: options.close_grace(),
    })
}

/// Gives every hook callback an id (`hook_0`, ...) and builds the `hooks` field of `initialize`.
fn register_hooks(options: &Options) -> (HashMap<String, HookCallback>, Value) {
    let mut by_id = HashMap::new();
    let mut config = serde_json::Map::new();
    for (event, matchers) in &options.hooks {
        let mut list = Vec::new();
        for m in matchers {
            let mut ids = Vec::new();
            for cb in &m.callbacks {
                let id = format!("hook_{}", by_id.len());
                by_id.insert(id.clone(), cb.clone());
                ids.push(Value::String(id));
            }
            let mut entry = json!({"matcher": m.matcher, "hookCallbackIds": ids});
            if let Some(t) = m.timeout {
                entry["timeout"] = json!(t.as_secs_f64().ceil() as u64);
            }
            list.push(entry);
        }
        if !list.is_empty() {
            config.insert(event.clone(), Value::Array(list));
        }
    }
    let config = if config.is_empty() {
        Value::Null
    } else {
        Value::Object(config)
    };
    (by_id, config)
}

impl Shared {
    /// Sends `initialize` (with the hook registrations) and returns the CLI's answer.
    pub(crate) async fn initialize(&self) -> Result<Value> {
        let mut fields = Extra::new();
        fields.insert("hooks".into(), self.hooks_config.clone());
        self.request("initialize", fields).await
    }

    /// Sends a control request and waits for its answer (bounded by the control timeout; failed
    /// at once with the process error if the CLI exits first).
    pub(crate) async fn request(&self, subtype: &str, fields: Extra) -> Result<Value> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("req_{n}_{:08x}", uuid::Uuid::new_v4().as_u128() as u32);
        let rx = self.pending.insert(&id, subtype)?;
        // However this ends (answer, timeout, the caller giving up), the entry goes.
        let _entry = self.pending.entry(&id);
        let frame = Frame::ControlRequest(ControlRequestFrame {
            request_id: id.clone(),
            request: ControlRequest {
                subtype: subtype.to_owned(),
                fields,
            },
        });
        // The whole exchange is bounded: a CLI that stops reading its stdin (a full pipe) must
        // not hang the caller either.
        let exchange = async {
            if let Err(WriteError::Closed) = self.write_frame(&frame).await {
                return Err(self.closed_error());
            }
            // A failed write means the CLI is exiting: the reader fails this request with the
            // process error as soon as it has the exit code, so wait for that.
            rx.await.unwrap_or_else(|_| {
                Err(Error::Connection {
                    message: format!("the session ended before the {subtype} request was answered"),
                })
            })
        };
        tokio::time::timeout(self.control_timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(Error::ControlTimeout {
                    subtype: subtype.to_owned(),
                    timeout: self.control_timeout,
                })
            })
    }

    /// Sends a user message; a new turn begins (the last error result is forgotten).
    pub(crate) async fn send_user(&self, content: MessageContent) -> Result<()> {
        lock(&self.tracker).new_turn();
        let frame = Frame::User(UserFrame {
            message: UserMessage {
                role: Role::User,
                content,
                extra: Extra::new(),
            },
            parent_tool_use_id: None,
            session_id: String::new(),
            uuid: None,
            timestamp: None,
            tool_use_result: None,
            tool_result_meta: None,
            extra: Extra::new(),
        });
        match self.write_frame(&frame).await {
            Ok(()) => Ok(()),
            Err(WriteError::Closed) => Err(self.closed_error()),
            Err(WriteError::Io(e)) => Err(self.io_error(e).await),
        }
    }

    /// Ends the CLI's input (EOF on its stdin) once the lines already queued are written.
    pub(crate) fn close_stdin(&self) {
        self.close_input.send_replace(true);
    }

    /// Close stdin as soon as a `result` arrives (one-shot queries with callbacks).
    pub(crate) fn set_close_after_result(&self, yes: bool) {
        self.close_after_result.store(yes, Ordering::Relaxed);
    }

    /// The tail of stderr so far.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr.snapshot()
    }

    /// What the reader has seen so far.
    pub(crate) fn stats(&self) -> Stats {
        lock(&self.stats).clone()
    }

    /// The exit code, once the CLI has been reaped.
    pub(crate) fn exit_code(&self) -> Option<i32> {
        *self.exit.borrow()
    }

    fn closed_error(&self) -> Error {
        let message = match self.exit_code() {
            Some(code) => format!("the CLI has exited with code {code}; its stdin is closed"),
            None => "the CLI's stdin is closed (the input was ended)".to_owned(),
        };
        Error::Connection { message }
    }

    async fn io_error(&self, e: std::io::Error) -> Error {
        // A broken pipe usually arrives just before the exit: give the exit code a moment.
        let mut exit = self.exit.clone();
        let message = match process::wait_exit(&mut exit, Duration::from_millis(500)).await {
            Some(code) => format!("cannot write to the CLI: it has exited with code {code} ({e})"),
            None => format!("cannot write to the CLI: {e}"),
        };
        Error::Connection { message }
    }

    async fn write_frame(&self, frame: &Frame) -> std::result::Result<(), WriteError> {
        let mut line = serde_json::to_vec(frame).map_err(|e| WriteError::Io(e.into()))?;
        line.push(b'\n');
        let (ack, done) = oneshot::channel();
        // Waits for room: a CLI that does not read its stdin holds its writers back.
        self.writer
            .send((line, ack))
            .await
            .map_err(|_| WriteError::Closed)?;
        done.await.unwrap_or(Err(WriteError::Closed))
    }

    /// The CLI has ended: stop callbacks, fail pending requests, refuse new ones.
    fn finish(&self, ended: &Ended) {
        self.abort_incoming();
        self.pending.end(ended);
    }
}
