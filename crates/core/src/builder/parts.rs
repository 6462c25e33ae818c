//! The parts of a session the options and the settings decide, checked before anything
//! starts: its limits (turns, budget, thinking, tool bounds), the OS sandbox, the permission
//! mode and rules, the system prompt, and the MCP servers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_tools::ToolLimits;

use super::knobs::{Env, Knobs};
use super::options::{SettingSource, ThinkingMode, UsdBudget, MIN_THINKING_TOKENS};
use super::{bypass_refused, settings, start, BuildError, SessionBuilder, SessionOptions};
use crate::context::Limits;
use crate::permissions::{PermissionConfig, PermissionMode};
use crate::retry::RetryPolicy;

/// Prompt caching, thinking and compaction, from the options and the environment.
fn context_limits(
    k: &Knobs<'_>,
    o: &SessionOptions,
    max_tokens: u32,
) -> Result<crate::context::ContextLimits, BuildError> {
    let mut c = crate::context::ContextLimits::default();
    let truthy = |var: &str| {
        (k.env)(var).is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            !v.is_empty() && v != "0" && v != "false" && v != "no"
        })
    };
    c.prompt_caching = !truthy("DISABLE_PROMPT_CACHING");
    c.auto_compact = !truthy("DISABLE_AUTO_COMPACT");
    c.context_window = k.count("KEEL_CONTEXT_WINDOW", 4_096, 10_000_000)?;
    c.compact_threshold = k.count("KEEL_COMPACT_THRESHOLD_TOKENS", 1_000, 10_000_000)?;
    // The API needs room for an answer beside the thinking.
    let most = u64::from(max_tokens.saturating_sub(1));
    let tokens = match o.max_thinking_tokens {
        // The type holds it in range; the output limit is the one the type checks against.
        Some(budget) => budget.tokens().map(|n| n.min(most as u32)),
        None => k
            .count("MAX_THINKING_TOKENS", 0, most)?
            .and_then(|n| match n {
                0 => None,
                n => Some(n.max(u64::from(MIN_THINKING_TOKENS)) as u32),
            }),
    };
    c.thinking_tokens = match o.thinking {
        None => tokens,
        Some(ThinkingMode::Disabled) => None,
        Some(ThinkingMode::Enabled | ThinkingMode::Adaptive) => {
            tokens.or(Some(DEFAULT_THINKING_TOKENS.min(most as u32)))
        }
    };
    Ok(c)
}

/// The thinking budget when thinking is asked for without one.
const DEFAULT_THINKING_TOKENS: u32 = 10_000;

impl SessionBuilder {
    /// Turns, budget, retries, thinking and the tools' and subagents' bounds, from the options
    /// and the environment.
    pub(super) fn limits(&self, k: &Knobs<'_>) -> Result<Limits, BuildError> {
        let o = &self.options;
        let mut limits = Limits {
            max_turns: o.max_turns.map(std::num::NonZeroU32::get),
            fallback_model: o.fallback_model.clone().filter(|m| !m.trim().is_empty()),
            retry: match &self.retry {
                Some(p) => p.clone(),
                None => RetryPolicy::from_env(|v| (k.env)(v))
                    .map_err(|e| BuildError::Usage(format!("Error: {e}")))?,
            },
            ..Limits::default()
        };
        limits.max_budget_usd = o.max_budget_usd.map(UsdBudget::dollars);
        let mut tools = ToolLimits::default();
        if let Some(d) = k.ms("KEEL_BASH_DEFAULT_TIMEOUT_MS", 1, tools.max_timeout)? {
            tools.default_timeout = d;
        }
        if let Some(d) = k.ms(
            "KEEL_FILE_TOOL_TIMEOUT_MS",
            1,
            std::time::Duration::from_secs(3600),
        )? {
            tools.file_deadline = d;
        }
        if let Some(n) = k.count("KEEL_SEARCH_THREADS", 1, 64)? {
            tools.search_threads = n as usize;
        }
        limits.context = context_limits(k, o, limits.max_tokens)?;
        limits.tools = Arc::new(tools);
        if let Some(n) = k.count("KEEL_SUBAGENT_MAX_DEPTH", 0, 16)? {
            limits.subagents.max_depth = n as u32;
        }
        if let Some(n) = k.count("KEEL_SUBAGENT_MAX_CONCURRENCY", 1, 256)? {
            limits.subagents.max_concurrent = n as usize;
        }
        if let Some(n) = k.count("KEEL_SUBAGENT_MAX_TURNS", 1, 100_000)? {
            limits.subagents.default_max_turns = Some(n as u32);
        }
        Ok(limits)
    }

    /// The OS sandbox for Bash, when the flags or the settings enable it. Enabled on a
    /// machine that cannot have it, the session does not start.
    pub(super) fn sandbox(
        &self,
        settings: &settings::SettingsRules,
        home: Option<&Path>,
    ) -> Result<Option<Arc<keel_tools::sandbox::Sandbox>>, BuildError> {
        let o = &self.options;
        if !(o.sandbox || settings.sandbox_enabled == Some(true)) {
            return Ok(None);
        }
        use crate::permissions::paths::real_path;
        let abs = |d: &str| {
            let expanded = match (d.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ => PathBuf::from(d),
            };
            // Resolved as the kernel does (a `..` after a link leaves the link's target).
            real_path(&self.cwd.join(expanded))
        };
        let mut writable = vec![real_path(&self.cwd)];
        for d in &o.add_dirs {
            writable.push(abs(&d.display().to_string()));
        }
        for d in settings
            .sandbox_directories
            .iter()
            .chain(&settings.sandbox_writable)
        {
            writable.push(abs(d));
        }
        let tmp = real_path(&std::env::temp_dir());
        writable.push(tmp);
        writable.dedup();
        let policy = keel_tools::sandbox::SandboxPolicy {
            writable,
            network: o.sandbox_network || settings.sandbox_network == Some(true),
        };
        keel_tools::sandbox::Sandbox::new(policy)
            .map(|s| Some(Arc::new(s)))
            .map_err(|e| BuildError::Usage(format!("Error: {e}")))
    }

    /// The starting mode and rules: the flags', then the settings files'.
    pub(super) fn permissions(
        &self,
        settings: settings::SettingsRules,
        env: &Env,
        home: Option<&Path>,
    ) -> Result<PermissionConfig, BuildError> {
        let o = &self.options;
        let mut mode = o
            .permission_mode
            .unwrap_or_else(|| settings.default_mode.unwrap_or_default());
        if o.skip_permissions {
            mode = PermissionMode::BypassPermissions;
        }
        if mode == PermissionMode::BypassPermissions && bypass_refused(env) {
            return Err(BuildError::Usage(
                "Error: bypassPermissions cannot be used as root, where a command could change anything on the machine. Run as a normal user, or set IS_SANDBOX=1 if this is a disposable sandbox.".into(),
            ));
        }
        let mut allow = o.allowed_tools.clone();
        allow.extend(settings.allow);
        let mut deny = o.disallowed_tools.clone();
        deny.extend(settings.deny);
        let settings_ask = settings.ask;
        // Rules match real paths: the working directory in its real spelling too.
        let cwd = crate::permissions::paths::real_path(&self.cwd);
        let mut dirs = Vec::new();
        for d in o
            .add_dirs
            .iter()
            .map(|d| d.display().to_string())
            .chain(settings.additional_directories.iter().cloned())
        {
            let expanded = match (d.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ => PathBuf::from(&d),
            };
            let abs = crate::permissions::paths::real_path(&self.cwd.join(expanded));
            if !abs.is_dir() {
                return Err(BuildError::Usage(format!(
                    "Error: the added directory {d} is not a directory ({})",
                    abs.display()
                )));
            }
            dirs.push(abs);
        }
        Ok(PermissionConfig {
            mode,
            allow,
            deny,
            ask: settings_ask,
            roots: crate::permissions::Roots {
                cwd,
                dirs,
                home: home.map(Path::to_path_buf),
                readable: Vec::new(),
            },
        })
    }

    /// The system prompt that replaces keel's (`--system-prompt` or its file), and the text
    /// appended to it.
    pub(super) fn system_prompt(&self) -> Result<(Option<String>, Option<String>), BuildError> {
        let o = &self.options;
        let prompt = match (&o.system_prompt, &o.system_prompt_file) {
            (Some(_), Some(_)) => {
                return Err(BuildError::Usage(
                    "Error: use either --system-prompt or --system-prompt-file, not both".into(),
                ))
            }
            (Some(s), None) => Some(s.clone()),
            (None, Some(p)) => Some(std::fs::read_to_string(p).map_err(|e| {
                BuildError::Usage(format!(
                    "Error: cannot read --system-prompt-file {}: {e}",
                    p.display()
                ))
            })?),
            (None, None) => None,
        };
        Ok((prompt, o.append_system_prompt.clone()))
    }

    /// The session's MCP servers, as configured in the user's state file (`~/.claude.json`),
    /// the settings files, the project's `.mcp.json` and `--mcp-config` (only those with
    /// `--strict-mcp-config`), with the bounds they work within. Servers the project
    /// configures (its `.mcp.json`, its settings files) are marked failed unless the user's
    /// own settings approve them: a repository that was cloned must not run programs by itself.
    pub(super) fn mcp(
        &self,
        settings: Vec<(PathBuf, serde_json::Value)>,
        approvals: &settings::McpApprovals,
        user_settings: Option<&Path>,
        env: &Env,
    ) -> Result<(keel_mcp::ServerSet, crate::mcp::Bounds), BuildError> {
        let o = &self.options;
        let project = self.cwd.join(".mcp.json");
        let usage = |e: String| BuildError::Usage(format!("Error: {e}"));
        // `--setting-sources` limits the state file's scopes as it does the settings files.
        let wants = |scope: SettingSource| o.setting_sources.contains(scope);
        let user_state = match start::claude_json(&*self.env, &self.cwd) {
            Some(state_file)
                if !o.strict_mcp_config
                    && (wants(SettingSource::User) || wants(SettingSource::Local)) =>
            {
                let cache = start::keel_home(env, &self.cwd)
                    .map(|k| k.join("cache").join("claude-json-mcp.json"));
                keel_mcp::UserState::read_cached(&state_file, &self.cwd, cache.as_deref())
                    .map_err(|e| usage(e.to_string()))?
                    .map(|mut s| {
                        if !wants(SettingSource::User) {
                            s.user = None;
                        }
                        if !wants(SettingSource::Local) {
                            s.local = None;
                        }
                        s
                    })
            }
            _ => None,
        };
        let sources = keel_mcp::Sources {
            user_state,
            settings,
            // Any entry, links included: one that is not a readable file is an error, not skipped.
            project_file: project.symlink_metadata().is_ok().then_some(project),
            flags: o.mcp_config.clone(),
            strict: o.strict_mcp_config,
        };
        let mut set =
            keel_mcp::config::load(&sources, &self.cwd, env).map_err(|e| usage(e.to_string()))?;
        for e in &mut set.entries {
            let trusted = match &e.origin {
                // The user's own: flags, and what `mcp add` wrote into their state file.
                keel_mcp::Origin::Flag { .. } | keel_mcp::Origin::UserState { .. } => true,
                keel_mcp::Origin::File(p) => Some(p.as_path()) == user_settings,
            };
            if !trusted && e.spec.is_ok() && !approvals.allows(&e.name) {
                e.spec = Err(keel_mcp::ConfigError {
                    origin: e.origin.clone(),
                    server: Some(e.name.clone()),
                    field: None,
                    message: format!(
                        "not started: the project configures it, and project servers run only when your own settings approve them (add {:?} to enabledMcpjsonServers, or set enableAllProjectMcpServers, in ~/.claude/settings.json; or pass the server with --mcp-config)",
                        e.name
                    ),
                });
            }
        }
        let start =
            crate::mcp::timeout_from_env(env, "MCP_TIMEOUT", crate::mcp::DEFAULT_START_TIMEOUT)
                .map_err(|e| usage(e.to_string()))?;
        let call =
            crate::mcp::timeout_from_env(env, "MCP_TOOL_TIMEOUT", crate::mcp::DEFAULT_CALL_TIMEOUT)
                .map_err(|e| usage(e.to_string()))?;
        let tokens = crate::mcp::output_cap_from_env(env).map_err(|e| usage(e.to_string()))?;
        let bounds = crate::mcp::Bounds {
            start,
            call,
            ..crate::mcp::Bounds::default()
        }
        .with_output_tokens(tokens);
        Ok((set, bounds))
    }
}
