//! What a session is configured with. The CLI (or an SDK host) builds one; nothing here reads
//! the environment by itself except [`RetryPolicy::from_env`], which callers invoke explicitly.

use std::path::PathBuf;
use std::sync::Arc;

use keel_tools::ToolLimits;

use crate::permissions::PermissionConfig;
use crate::retry::RetryPolicy;

/// The default model when neither `--model` nor `ANTHROPIC_MODEL` is given.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// Who a session is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SessionRole {
    /// The main agent: emits `init` and `result` frames.
    #[default]
    Main,
    /// A subagent started by the Task tool; its parent reports how it ended.
    Subagent {
        /// Its id (resumable).
        agent_id: String,
        /// Its agent type.
        agent_type: String,
    },
}

impl SessionRole {
    /// Whether this is the main agent.
    pub fn is_main(&self) -> bool {
        matches!(self, SessionRole::Main)
    }
}

/// How a session runs.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The session id (a UUID).
    pub session_id: String,
    /// Working directory of the session and its tools.
    pub cwd: PathBuf,
    /// The model.
    pub model: String,
    /// Switched to after repeated overload on `model`.
    pub fallback_model: Option<String>,
    /// Output token cap per request.
    pub max_tokens: u32,
    /// Model calls allowed per turn (`--max-turns`).
    pub max_turns: Option<u32>,
    /// Dollars allowed per session (`--max-budget-usd`).
    pub max_budget_usd: Option<f64>,
    /// Permission mode and rules.
    pub permissions: PermissionConfig,
    /// Replaces keel's system prompt when set (`--system-prompt`).
    pub system_prompt: Option<String>,
    /// Appended to the system prompt (`--append-system-prompt`).
    pub append_system_prompt: Option<String>,
    /// Forward raw SSE events as `stream_event` frames.
    pub include_partial_messages: bool,
    /// Retry policy for model requests.
    pub retry: RetryPolicy,
    /// Limits for tools.
    pub tool_limits: Arc<ToolLimits>,
    /// Where the API key came from, for `system/init` (`ANTHROPIC_API_KEY` or `none`).
    pub api_key_source: String,
    /// Home directory, for `~/.claude/CLAUDE.md`.
    pub home: Option<PathBuf>,
    /// The session's transcript file (hooks report it as `transcript_path`); `None` when the
    /// session keeps none.
    /// Whether this is the main agent or a subagent.
    pub role: SessionRole,
    pub transcript_path: Option<PathBuf>,
    /// Asked when a tool call needs approval; `None`: headless, such calls are denied.
    pub approver: Option<Arc<dyn crate::approval::Approver>>,
    /// Hooks (PreToolUse, PostToolUse, UserPromptSubmit, Stop); `None`: no hooks.
    pub hooks: Option<Arc<dyn crate::hooks::Hooks>>,
    /// Extra directories the user granted (`--add-dir`), reported in `system/init`.
    pub additional_directories: Vec<PathBuf>,
}

impl SessionConfig {
    /// A configuration with keel's defaults for `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        Self {
            session_id: uuid::Uuid::new_v4().to_string(),
            cwd,
            model: DEFAULT_MODEL.to_owned(),
            fallback_model: None,
            max_tokens: 32_000,
            max_turns: None,
            max_budget_usd: None,
            permissions: PermissionConfig::default(),
            system_prompt: None,
            append_system_prompt: None,
            include_partial_messages: false,
            retry: RetryPolicy::default(),
            tool_limits: Arc::new(ToolLimits::default()),
            api_key_source: "none".to_owned(),
            home: None,
            transcript_path: None,
            role: SessionRole::Main,
            approver: None,
            hooks: None,
            additional_directories: Vec::new(),
        }
    }
}
