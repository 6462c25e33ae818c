//! keel's built-in tools and process supervision.
//!
//! The engine (`keel-core`) owns turns, permissions and what the model is told; this crate only
//! knows how to run one tool call and report honestly how it went ([`ToolOutcome`]).

pub mod cancel;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use cancel::CancelToken;
pub use keel_protocol::CancelReason;
use serde_json::Value;

/// A boxed, sendable future: what [`Tool::call`] returns, so tools can live behind `dyn Tool`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One built-in tool.
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`Bash`, `Read`, ...).
    fn name(&self) -> &'static str;
    /// What the model is told about the tool, in keel's own words.
    fn description(&self) -> &'static str;
    /// The JSON schema of the tool's input.
    fn input_schema(&self) -> Value;
    /// Whether this particular call only reads (it may run in parallel and needs no permission).
    fn is_read_only(&self, input: &Value) -> bool;
    /// Run one call. Must return promptly once `cx.cancel` is cancelled.
    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome>;
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

/// The built-in tools, in the order they are offered to the model.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    Vec::new()
}
