//! keel's built-in tools and process supervision.
//!
//! The engine (`keel-core`) owns turns, permissions and what the model is told; this crate only
//! knows how to run one tool call and report honestly how it went ([`ToolOutcome`]).

pub mod bash;
pub mod cancel;
pub mod checkpoint;
pub mod edit;
pub mod files;
mod fsutil;
pub mod glob;
pub mod grep;
pub mod image;
mod input;
pub mod json_file;
pub use keel_policy::kpath;
pub mod launcher;
pub mod lineindex;
pub mod notebook;
mod notebook_view;
pub mod output;
pub mod process;
pub mod read;
pub mod repofile;
pub mod sandbox;
pub mod spawn;
pub use keel_policy::shell;
mod stamp;
mod supervise;
pub mod todo;
mod typed;
pub mod walk;
pub mod web;
pub mod write;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use bash::BashTool;
pub use cancel::CancelToken;
pub use checkpoint::Checkpoints;
pub use edit::EditTool;
pub use files::{FileStamp, Freshness, ReadLedger};
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use input::{input_schema, parse_input, InputError, InputProblem};
pub use keel_protocol::CancelReason;
pub use notebook::NotebookEditTool;
pub use process::ProcessRegistry;
pub use read::ReadTool;
use serde_json::Value;
pub use shell::is_read_only_command;
pub use todo::TodoWriteTool;
pub use typed::TypedTool;
pub use web::{WebFetchTool, WebSearchTool};
pub use write::WriteTool;

/// A boxed, sendable future: what [`Tool::call`] returns, so tools can live behind `dyn Tool`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use keel_policy::ToolKind;

/// One tool the model can call.
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`Bash`, `Read`, ...).
    fn name(&self) -> &str;
    /// What kind of tool it is.
    fn kind(&self) -> ToolKind;
    /// What the model is told about the tool, in keel's own words.
    fn description(&self) -> &str;
    /// The JSON schema of the tool's input.
    fn input_schema(&self) -> Value;
    /// Whether this particular call only reads (it may run in parallel and needs no permission).
    fn is_read_only(&self, input: &Value) -> bool;
    /// Run one call. Must return promptly once `cx.cancel` is cancelled.
    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome>;
    /// Called for each call of a batch in the order the model gave them, before any of them
    /// starts (calls then run side by side): the place to take what must follow that order,
    /// such as an id the model will see.
    fn prepare(&self, _input: &Value, _tool_use_id: &str) {}
}

/// Everything a tool call may use from its surroundings.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// The cancel token of the turn (or tool call) that dispatched this call.
    pub cancel: CancelToken,
    /// Output and time limits.
    pub limits: Arc<ToolLimits>,
    /// The id of the tool_use block this call answers.
    pub tool_use_id: String,
    /// The session's registry of process groups left running in the background (killed at the
    /// end of the session). Share one registry per session: dropping the last handle kills them.
    pub processes: Arc<ProcessRegistry>,
    /// The files this agent has read (Write and Edit refuse to overwrite a file it has not
    /// read, or that changed since). One per agent.
    pub reads: Arc<ReadLedger>,
    /// Files the permission rules forbid reading: searches of a directory pass over them
    /// (and say how many they passed over). None: nothing is hidden.
    pub hidden: Option<PathFilter>,
    /// The path the permission check judged for this call, resolved as the kernel resolves
    /// it: the file tools open exactly this one (see [`ToolContext::target`]).
    pub judged: Option<PathBuf>,
    /// The session's file checkpoints, when they are kept: the file tools snapshot a file
    /// before they write it.
    pub checkpoints: Option<Arc<Checkpoints>>,
    /// For a WebFetch call: the decision its first URL went through, made again for each
    /// redirect (`None`: the tool's own view of the rules judges them).
    pub web_gate: Option<Arc<dyn web::HopGate>>,
    /// The home directory `~/` expands to: the session's (from its environment), so that a
    /// path is resolved against the same home the permission check used.
    pub home: Option<PathBuf>,
}

/// A test on a path (true: it is hidden), shared between threads.
#[derive(Clone)]
pub struct PathFilter(Arc<dyn Fn(&Path) -> bool + Send + Sync>);

impl PathFilter {
    /// A filter from a test.
    pub fn new(f: impl Fn(&Path) -> bool + Send + Sync + 'static) -> Self {
        PathFilter(Arc::new(f))
    }

    /// Whether `p` is hidden.
    pub fn hides(&self, p: &Path) -> bool {
        (self.0)(p)
    }
}

impl std::fmt::Debug for PathFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PathFilter")
    }
}

impl ToolContext {
    /// A context with default limits, an empty tool_use id and a fresh process registry.
    pub fn new(cwd: impl Into<PathBuf>, cancel: CancelToken) -> Self {
        Self {
            cwd: cwd.into(),
            cancel,
            limits: Arc::new(ToolLimits::default()),
            tool_use_id: String::new(),
            processes: Arc::new(ProcessRegistry::new()),
            reads: Arc::new(ReadLedger::new()),
            hidden: None,
            judged: None,
            checkpoints: None,
            web_gate: None,
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }

    /// Expand `~/` to `home` (the session's home directory) rather than the process's.
    pub fn with_home(mut self, home: Option<PathBuf>) -> Self {
        self.home = home;
        self
    }

    /// Judge a WebFetch call's further URLs with `gate`.
    pub fn with_web_gate(mut self, gate: Option<Arc<dyn web::HopGate>>) -> Self {
        self.web_gate = gate;
        self
    }

    /// Snapshot files into `checkpoints` before writing them.
    pub fn with_checkpoints(mut self, checkpoints: Option<Arc<Checkpoints>>) -> Self {
        self.checkpoints = checkpoints;
        self
    }

    /// Open the path the permission check judged (already resolved) instead of resolving the
    /// call's own path again.
    pub fn with_judged(mut self, path: Option<PathBuf>) -> Self {
        self.judged = path;
        self
    }

    /// The file a file tool acts on for `path` from its input: the path the permission check
    /// judged when there is one (one resolution, not two), else `path` resolved here as the
    /// kernel would (a path that cannot be resolved, such as a symlink loop, is left for the
    /// open to fail on).
    pub fn target(&self, path: &str) -> PathBuf {
        if let Some(j) = &self.judged {
            return j.clone();
        }
        let p = self.resolve(path);
        kpath::kernel_path(&p).unwrap_or(p)
    }

    /// Hide the files `filter` names from directory searches.
    pub fn with_hidden(mut self, filter: Option<PathFilter>) -> Self {
        self.hidden = filter;
        self
    }

    /// Use this agent's read ledger.
    pub fn with_reads(mut self, reads: Arc<ReadLedger>) -> Self {
        self.reads = reads;
        self
    }

    /// Replace the limits.
    pub fn with_limits(mut self, limits: Arc<ToolLimits>) -> Self {
        self.limits = limits;
        self
    }

    /// Set the id of the tool_use block this call answers.
    pub fn with_tool_use_id(mut self, id: impl Into<String>) -> Self {
        self.tool_use_id = id.into();
        self
    }

    /// Use the session's process registry.
    pub fn with_processes(mut self, processes: Arc<ProcessRegistry>) -> Self {
        self.processes = processes;
        self
    }

    /// Resolve a path from tool input: `~/` expands to [`ToolContext::home`], relative paths
    /// join `cwd`.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = match (path.strip_prefix("~/"), &self.home) {
            (Some(rest), Some(home)) => home.join(rest),
            (None, Some(home)) if path == "~" => home.clone(),
            _ => PathBuf::from(path),
        };
        if p.is_absolute() {
            p
        } else {
            self.cwd.join(p)
        }
    }

    /// The outcome for a call stopped by `self.cancel` (its reason, or `Shutdown` if none).
    pub fn stopped(
        &self,
        started: bool,
        partial: String,
        elapsed: Duration,
        processes_killed: usize,
    ) -> ToolOutcome {
        ToolOutcome::Stopped {
            reason: self.cancel.reason().unwrap_or(CancelReason::Shutdown),
            started,
            partial,
            elapsed,
            processes_killed,
        }
    }
}

/// Bounds on what a tool may produce and how long it may run.
#[derive(Clone, Debug)]
pub struct ToolLimits {
    /// Bytes of output kept from the start of a long output.
    pub head_bytes: usize,
    /// Bytes of output kept from the end of a long output.
    pub tail_bytes: usize,
    /// Bash timeout when the call gives none.
    pub default_timeout: Duration,
    /// The largest Bash timeout a call may ask for.
    pub max_timeout: Duration,
    /// After the main process of a command exits (or is killed), how long to keep reading pipes
    /// that a grandchild may still hold open.
    pub drain_deadline: Duration,
    /// Between SIGTERM and SIGKILL to a command's process group.
    pub kill_grace: Duration,
    /// Where the full output of a truncated command is saved (the marker names the file).
    pub spill_dir: Option<PathBuf>,
    /// The most bytes any one tool result may give the model; a longer one keeps its head and
    /// tail around a marker, and the whole is saved beside the session. Tools have tighter
    /// limits of their own; this one binds them all, a host's or a server's tools included.
    pub max_result_bytes: usize,
    /// The longest a file tool (Read, Write, Edit, Glob, Grep) may wait on the file system: a
    /// hung network mount or a disk that stopped answering ends the call with an error that
    /// says so, instead of holding the turn.
    pub file_deadline: Duration,
    /// Threads Grep and Glob walk and search with (1: one thread).
    pub search_threads: usize,
    /// The OS sandbox Bash commands run in, when enabled.
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
    /// A file Bash copies its output into as it arrives (stdout and stderr, as they come), so
    /// the output of a command can be followed while it runs — set per call for a command the
    /// user may move to the background.
    pub live_log: Option<PathBuf>,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            head_bytes: 15_000,
            tail_bytes: 15_000,
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            drain_deadline: Duration::from_millis(500),
            kill_grace: Duration::from_millis(500),
            spill_dir: None,
            max_result_bytes: 256 * 1024,
            file_deadline: Duration::from_secs(120),
            search_threads: crate::walk::default_threads(),
            sandbox: None,
            live_log: None,
        }
    }
}

/// How one tool call ended. The engine turns `Stopped` into the text the model reads.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolOutcome {
    /// The tool did its job. `content` is what the model reads.
    Ok {
        /// Text for the model.
        content: String,
        /// Structured detail for stream consumers (`tool_use_result`), e.g. Bash's stdout/stderr.
        meta: Option<Value>,
    },
    /// The tool ran (or tried to) and failed; `message` tells the model what to fix.
    Failed {
        /// Text for the model, in keel's words.
        message: String,
        /// Structured detail, as for `Ok`.
        meta: Option<Value>,
    },
    /// The call was stopped before it finished.
    Stopped {
        /// Why: the cancel token's reason, or `Timeout` when the tool's own deadline fired.
        reason: CancelReason,
        /// Whether the tool had started doing its work (a process spawned, a file opened).
        started: bool,
        /// Output produced before the stop (already head+tail bounded).
        partial: String,
        /// How long the call ran.
        elapsed: Duration,
        /// How many processes were signalled when it was stopped.
        processes_killed: usize,
    },
}

impl ToolOutcome {
    /// `Ok` with content and no meta.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutcome::Ok {
            content: content.into(),
            meta: None,
        }
    }

    /// `Failed` with a message and no meta.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolOutcome::Failed {
            message: message.into(),
            meta: None,
        }
    }

    /// The text the model would read for `Ok`/`Failed`, or the partial output for `Stopped`.
    pub fn text(&self) -> &str {
        match self {
            ToolOutcome::Ok { content, .. } => content,
            ToolOutcome::Failed { message, .. } => message,
            ToolOutcome::Stopped { partial, .. } => partial,
        }
    }
}

/// Refused input is a failed call whose message is the error's text.
impl From<InputError> for ToolOutcome {
    fn from(e: InputError) -> Self {
        ToolOutcome::failed(e.to_string())
    }
}

/// The built-in tools, in the order they are offered to the model.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(BashTool),
        Arc::new(ReadTool),
        Arc::new(WriteTool),
        Arc::new(EditTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(NotebookEditTool),
        Arc::new(TodoWriteTool::new()),
    ]
}

/// Display form of a path in replies.
pub(crate) fn show(path: &Path) -> String {
    path.display().to_string()
}
