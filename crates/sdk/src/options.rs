//! [`Options`]: which CLI to run, how, and with which callbacks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::callbacks::{
    can_use_tool, CallbackResult, CanUseTool, HookMatcher, PermissionResult, StderrCallback,
    ToolPermissionRequest,
};

/// Default time a control request waits for its answer.
pub const DEFAULT_CONTROL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default size of the stderr ring buffer.
pub const DEFAULT_STDERR_RING_BYTES: usize = 64 * 1024;
/// Default cap on one stdout line (large: images and big tool outputs travel as one line).
pub const DEFAULT_MAX_LINE_BYTES: usize = 256 * 1024 * 1024;
/// Default time each step of a close (stdin EOF, SIGTERM, SIGKILL) waits for the exit.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How the prompt reaches the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptMode {
    /// `--output-format stream-json --verbose --input-format stream-json`: an `initialize`
    /// control request, then the prompt as a `user` message on stdin. Needed for control requests
    /// and callbacks. What the official SDKs do.
    StreamJson,
    /// `-p PROMPT --output-format stream-json --verbose`: the prompt in argv, stdin closed. One
    /// turn, no control requests; works with any claude-compatible CLI.
    Argv,
}

/// Options for [`query`](crate::query()), [`Client`](crate::Client) and the executor API.
///
/// Fields are public; start from `Options::default()` and set what you need. Every field maps to
/// a CLI flag or to how the SDK runs the process.
#[derive(Clone, Default)]
pub struct Options {
    /// The CLI: a path, or a bare name looked up on `PATH`. Default: `keel` on `PATH`
    /// ([`Error::CliNotFound`](crate::Error::CliNotFound) otherwise). Any compatible executable
    /// works, `claude` included.
    pub cli_path: Option<PathBuf>,
    /// The CLI's working directory (default: this process's).
    pub cwd: Option<PathBuf>,
    /// Environment variables added to (or overriding) the inherited environment. A `PATH` here is
    /// also where a bare `cli_path` is looked up.
    pub env: BTreeMap<String, String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// `--max-budget-usd`.
    pub max_budget_usd: Option<f64>,
    /// `--allowedTools` (joined with commas).
    pub allowed_tools: Vec<String>,
    /// `--disallowedTools` (joined with commas).
    pub disallowed_tools: Vec<String>,
    /// `--permission-mode` (`default`, `acceptEdits`, `plan`, `bypassPermissions`, `dontAsk`).
    pub permission_mode: Option<String>,
    /// `--system-prompt` (replaces the CLI's own; `Some("")` sends none).
    pub system_prompt: Option<String>,
    /// `--append-system-prompt`.
    pub append_system_prompt: Option<String>,
    /// `--resume=<session id>`.
    pub resume: Option<String>,
    /// `--include-partial-messages` (raw `stream_event` messages).
    pub include_partial_messages: bool,
    /// Extra arguments, passed verbatim before the SDK's closing flags.
    pub extra_args: Vec<String>,
    /// How the prompt is sent. `None`: [`PromptMode::StreamJson`] for `query` and `Client`,
    /// [`PromptMode::Argv`] for the executor API.
    pub prompt_mode: Option<PromptMode>,
    /// Answers the CLI's permission questions (adds `--permission-prompt-tool stdio`).
    pub can_use_tool: Option<CanUseTool>,
    /// Hook callbacks by event name (`PreToolUse`, `PostToolUse`, ...), sent in `initialize`.
    pub hooks: BTreeMap<String, Vec<HookMatcher>>,
    /// Called with each stderr line as it arrives (stderr is captured either way).
    pub stderr: Option<StderrCallback>,
    /// How long a control request waits for its answer (default 60 s).
    pub control_timeout: Option<Duration>,
    /// How much of the CLI's stderr is kept for errors (default 64 KiB; the tail is kept).
    pub stderr_ring_bytes: Option<usize>,
    /// The longest stdout line accepted (default 256 MiB); a longer one is skipped with
    /// [`Error::LineTooLong`](crate::Error::LineTooLong).
    pub max_line_bytes: Option<usize>,
    /// How long each close step waits: stdin EOF, then SIGTERM, then SIGKILL (default 5 s).
    pub close_grace: Option<Duration>,
    /// Executor API only: a wall-clock limit; on expiry the CLI's process group is killed and
    /// a [`ExecEvent::ProcessError`](crate::ExecEvent::ProcessError) is reported. (`query` and
    /// `Client` are bounded by the caller: drop them to stop the CLI.)
    pub timeout: Option<Duration>,
}

impl Options {
    /// Default options.
    pub fn new() -> Options {
        Options::default()
    }

    /// Sets the CLI path.
    pub fn with_cli_path(mut self, path: impl Into<PathBuf>) -> Options {
        self.cli_path = Some(path.into());
        self
    }

    /// Sets the working directory.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Options {
        self.cwd = Some(cwd.into());
        self
    }

    /// Adds an environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Options {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the async permission callback.
    pub fn with_can_use_tool<F, Fut>(mut self, f: F) -> Options
    where
        F: Fn(ToolPermissionRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = CallbackResult<PermissionResult>> + Send + 'static,
    {
        self.can_use_tool = Some(can_use_tool(f));
        self
    }

    /// Registers hook callbacks for `event` (`PreToolUse`, ...).
    pub fn with_hook(mut self, event: impl Into<String>, matcher: HookMatcher) -> Options {
        self.hooks.entry(event.into()).or_default().push(matcher);
        self
    }

    /// Sets the live stderr callback.
    pub fn with_stderr<F: Fn(&str) + Send + Sync + 'static>(mut self, f: F) -> Options {
        self.stderr = Some(std::sync::Arc::new(f));
        self
    }

    /// Whether any callback needs the CLI to call back on stdin.
    pub(crate) fn has_callbacks(&self) -> bool {
        self.can_use_tool.is_some() || self.hooks.values().any(|m| !m.is_empty())
    }

    pub(crate) fn control_timeout(&self) -> Duration {
        self.control_timeout.unwrap_or(DEFAULT_CONTROL_TIMEOUT)
    }

    pub(crate) fn stderr_ring_bytes(&self) -> usize {
        self.stderr_ring_bytes
            .unwrap_or(DEFAULT_STDERR_RING_BYTES)
            .max(1)
    }

    pub(crate) fn max_line_bytes(&self) -> usize {
        self.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES).max(1)
    }

    pub(crate) fn close_grace(&self) -> Duration {
        self.close_grace.unwrap_or(DEFAULT_CLOSE_GRACE)
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("cli_path", &self.cli_path)
            .field("cwd", &self.cwd)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("model", &self.model)
            .field("max_turns", &self.max_turns)
            .field("max_budget_usd", &self.max_budget_usd)
            .field("allowed_tools", &self.allowed_tools)
            .field("disallowed_tools", &self.disallowed_tools)
            .field("permission_mode", &self.permission_mode)
            .field("system_prompt", &self.system_prompt)
            .field("append_system_prompt", &self.append_system_prompt)
            .field("resume", &self.resume)
            .field("include_partial_messages", &self.include_partial_messages)
            .field("extra_args", &self.extra_args)
            .field("prompt_mode", &self.prompt_mode)
            .field("can_use_tool", &self.can_use_tool.is_some())
            .field("hooks", &self.hooks)
            .field("stderr", &self.stderr.is_some())
            .field("control_timeout", &self.control_timeout)
            .field("stderr_ring_bytes", &self.stderr_ring_bytes)
            .field("max_line_bytes", &self.max_line_bytes)
            .field("close_grace", &self.close_grace)
            .field("timeout", &self.timeout)
            .finish()
    }
}
