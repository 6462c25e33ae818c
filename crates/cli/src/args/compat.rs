//! Flags the official SDKs pass (Claude Code's `§3a`/`§3b` argv) that keel accepts. Each is
//! either honoured, or accepted with one stderr line saying it is not supported yet — an SDK
//! option must never turn into a hard failure. Flags nobody passes stay unknown (exit 2).

use std::path::PathBuf;

use clap::{ArgAction, Args};

use super::InputFormat;

/// SDK-compatibility flags (flattened into [`super::Cli`]).
#[derive(Debug, Default, Clone, Args)]
pub struct CompatArgs {
    /// How to approve tool calls the rules leave open: `stdio` asks the SDK host with a
    /// `can_use_tool` control request (needs --input-format stream-json).
    #[arg(long = "permission-prompt-tool", value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,

    /// MCP server configuration (JSON or a file), repeatable. stdio servers are started; http,
    /// sse and sdk servers are not run yet (they are listed as failed).
    #[arg(long = "mcp-config", action = ArgAction::Append, value_name = "JSON_OR_FILE")]
    pub mcp_config: Vec<String>,

    /// Use only --mcp-config servers (keel reads no other MCP configuration).
    #[arg(long = "strict-mcp-config")]
    pub strict_mcp_config: bool,

    /// Settings JSON or file; its `permissions` (allow, deny, ask, defaultMode,
    /// additionalDirectories), `hooks`, `sandbox` and `env` are applied.
    #[arg(long = "settings", value_name = "JSON_OR_FILE")]
    pub settings: Option<String>,

    /// Which settings files to read: user, project, local (default all).
    #[arg(long = "setting-sources", value_name = "LIST")]
    pub setting_sources: Option<String>,

    /// Another directory the session works in (repeatable); listed in system/init.
    #[arg(long = "add-dir", action = ArgAction::Append, value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,

    /// Run Bash commands in the OS sandbox: they may write only in the working directory,
    /// the added directories and the temp directory, and have no network.
    #[arg(long = "sandbox")]
    pub sandbox: bool,

    /// With --sandbox: let commands use the network.
    #[arg(long = "sandbox-network")]
    pub sandbox_network: bool,

    /// Emit system/hook_started and system/hook_response frames around hook callbacks.
    #[arg(long = "include-hook-events")]
    pub include_hook_events: bool,

    /// Echo each user message read from stdin as a `user` frame with its uuid (the id
    /// `rewind_files` takes), before its turn starts.
    #[arg(long = "replay-user-messages")]
    pub replay_user_messages: bool,

    /// Wait for the host's initialize before the first turn (keel reads stdin in order anyway).
    #[arg(long = "await-initialize", hide = true)]
    pub await_initialize: bool,

    /// Fields the host sends in initialize instead of flags (settings, disallowedTools).
    #[arg(long = "initialize-fields", hide = true, value_name = "LIST")]
    pub initialize_fields: Option<String>,

    /// Do not save the session to disk: no transcript is written (it cannot be resumed).
    #[arg(long = "no-session-persistence")]
    pub no_session_persistence: bool,

    /// Extended thinking: enabled, adaptive (both ask for thinking) or disabled.
    #[arg(long = "thinking", value_name = "MODE")]
    pub thinking: Option<String>,

    /// Extended thinking budget in tokens (0: none); also MAX_THINKING_TOKENS.
    #[arg(long = "max-thinking-tokens", value_name = "N")]
    pub max_thinking_tokens: Option<String>,

    /// How thinking is shown. Accepted; not supported yet.
    #[arg(long = "thinking-display", hide = true, value_name = "MODE")]
    pub thinking_display: Option<String>,

    /// Reasoning effort. Accepted; not supported yet.
    #[arg(long = "effort", hide = true, value_name = "LEVEL")]
    pub effort: Option<String>,

    /// API beta headers. Accepted; not supported yet.
    #[arg(long = "betas", action = ArgAction::Append, hide = true, value_name = "LIST")]
    pub betas: Vec<String>,

    /// Custom subagent types (JSON): `{"name": {"description", "prompt", "tools", "model"}}`.
    #[arg(long = "agents", hide = true, value_name = "JSON")]
    pub agents: Option<String>,

    /// Run as a named agent. Accepted; not supported yet.
    #[arg(long = "agent", hide = true, value_name = "NAME")]
    pub agent: Option<String>,

    /// Structured output: the answer must be a JSON object matching this JSON Schema (the
    /// model gives it through a `StructuredOutput` tool; the result carries it).
    #[arg(long = "json-schema", value_name = "JSON")]
    pub json_schema: Option<String>,

    /// Plugin directories. Accepted; keel has no plugins yet.
    #[arg(long = "plugin-dir", action = ArgAction::Append, hide = true, value_name = "DIR")]
    pub plugin_dir: Vec<String>,

    /// Plugin directories without MCP discovery. Accepted; keel has no plugins yet.
    #[arg(long = "plugin-dir-no-mcp", action = ArgAction::Append, hide = true, value_name = "DIR")]
    pub plugin_dir_no_mcp: Vec<String>,

    /// Log debug output on stderr (same as KEEL_LOG=debug); an optional filter is ignored.
    #[arg(long = "debug", num_args = 0..=1, require_equals = true, default_missing_value = "", value_name = "FILTER")]
    pub debug: Option<String>,

    /// Write debug logs to this file.
    #[arg(long = "debug-file", value_name = "FILE")]
    pub debug_file: Option<PathBuf>,

    /// Log debug output on stderr.
    #[arg(long = "debug-to-stderr", hide = true)]
    pub debug_to_stderr: bool,

    /// Allow a host to switch to bypassPermissions later (never as root without IS_SANDBOX).
    #[arg(long = "allow-dangerously-skip-permissions", hide = true)]
    pub allow_dangerously_skip_permissions: bool,

    /// Task budget. Accepted; not supported yet.
    #[arg(long = "task-budget", hide = true, value_name = "N")]
    pub task_budget: Option<String>,

    /// Permission prompt routing. Accepted; not supported yet.
    #[arg(long = "permission-prompts", hide = true, value_name = "V")]
    pub permission_prompts: Option<String>,

    /// Channels. Accepted; not supported yet.
    #[arg(long = "channels", action = ArgAction::Append, hide = true, value_name = "V")]
    pub channels: Vec<String>,

    /// Project configuration root. Accepted; not supported yet.
    #[arg(long = "project-config-root", hide = true, value_name = "DIR")]
    pub project_config_root: Option<String>,

    /// Managed settings. Accepted; not supported yet.
    #[arg(long = "managed-settings", hide = true, value_name = "JSON")]
    pub managed_settings: Option<String>,

    /// Managed settings arrive in initialize. Accepted; not supported yet.
    #[arg(long = "managed-settings-in-initialize", hide = true)]
    pub managed_settings_in_initialize: bool,
}

impl CompatArgs {
    /// One line per flag given that keel accepts but does not honour (yet).
    pub fn notices(&self, input: InputFormat) -> Vec<String> {
        let mut out = Vec::new();
        let mut note = |flag: &str, what: &str| {
            out.push(format!(
                "keel: {flag} is accepted but not supported yet: {what}"
            ));
        };
        match self.permission_prompt_tool.as_deref() {
            None => {}
            Some("stdio") if input == InputFormat::StreamJson => {}
            Some("stdio") => note(
                "--permission-prompt-tool stdio",
                "it needs --input-format stream-json (a host to answer); calls that need approval are denied",
            ),
            Some(other) => note(
                &format!("--permission-prompt-tool {other}"),
                "only `stdio` is supported (MCP permission tools come with MCP); calls that need approval are denied",
            ),
        }
        if self.settings.is_some() {
            note(
                "--settings",
                "only its `permissions`, `hooks`, `sandbox` and `env` are applied",
            );
        }

        if self.effort.is_some() {
            note("--effort", "requests use the model's default effort");
        }
        if !self.betas.is_empty() {
            note("--betas", "no beta headers are sent");
        }
        if self.agent.is_some() {
            note(
                "--agent",
                "the main agent is always keel's own; use --agents to define subagent types",
            );
        }
        if !self.plugin_dir.is_empty() || !self.plugin_dir_no_mcp.is_empty() {
            note("--plugin-dir", "keel has no plugins yet");
        }
        let mut rest = Vec::new();
        if self.task_budget.is_some() {
            rest.push("--task-budget");
        }
        if self.permission_prompts.is_some() {
            rest.push("--permission-prompts");
        }
        if !self.channels.is_empty() {
            rest.push("--channels");
        }
        if self.project_config_root.is_some() {
            rest.push("--project-config-root");
        }
        if self.managed_settings.is_some() || self.managed_settings_in_initialize {
            rest.push("--managed-settings");
        }
        for flag in rest {
            note(flag, "it has no effect in keel");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_name_only_what_is_not_honoured() {
        let quiet = CompatArgs {
            permission_prompt_tool: Some("stdio".into()),
            thinking: Some("disabled".into()),
            strict_mcp_config: true,
            mcp_config: vec![r#"{"mcpServers":{}}"#.into()],
            await_initialize: true,
            include_hook_events: true,
            ..CompatArgs::default()
        };
        assert!(quiet.notices(InputFormat::StreamJson).is_empty());
        let loud = CompatArgs {
            thinking: Some("adaptive".into()),
            effort: Some("high".into()),
            ..CompatArgs::default()
        };
        let n = loud.notices(InputFormat::StreamJson);
        // Thinking is honoured now: only the effort is noted.
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains("--effort"), "{n:?}");
    }
}

/// `--debug`, `--debug-to-stderr` and `--debug-file`, read from argv before flags are parsed
/// (logging starts first).
#[derive(Debug, Default, PartialEq)]
pub struct DebugFlags {
    /// Debug logging was asked for.
    pub on: bool,
    /// Where to write it (stderr when `None`).
    pub file: Option<PathBuf>,
}

impl DebugFlags {
    /// Scan `argv` (program name first).
    pub fn from_argv(argv: impl IntoIterator<Item = String>) -> Self {
        let mut out = Self::default();
        let mut it = argv.into_iter().skip(1);
        while let Some(a) = it.next() {
            if a == "--" {
                break;
            }
            if a == "--debug" || a.starts_with("--debug=") || a == "--debug-to-stderr" {
                out.on = true;
            } else if let Some(p) = a.strip_prefix("--debug-file=") {
                out.on = true;
                out.file = Some(PathBuf::from(p));
            } else if a == "--debug-file" {
                out.on = true;
                out.file = it.next().map(PathBuf::from);
            }
        }
        out
    }
}

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn debug_flags_from_argv() {
        let argv = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            DebugFlags::from_argv(argv("keel -p hi")),
            DebugFlags::default()
        );
        assert!(DebugFlags::from_argv(argv("keel --debug")).on);
        assert_eq!(
            DebugFlags::from_argv(argv("keel --debug-file=/tmp/x")).file,
            Some(PathBuf::from("/tmp/x"))
        );
        assert_eq!(
            DebugFlags::from_argv(argv("keel --debug-file /tmp/y -p hi")).file,
            Some(PathBuf::from("/tmp/y"))
        );
    }
}
