//! [`SessionBuilder`]: the only way to make a session.
//!
//! Options (what the flags say), the environment and the settings files go in; the transcript
//! is opened (new, resumed, continued or forked), the model client, tools, agents and tasks are
//! wired to one [`SessionContext`]; a complete [`Session`] and the receiving end of its events
//! come out — or a [`BuildError`] that names what is wrong and where. `keel -p`, stream-json,
//! `keel demo` and the interactive UI all start here, so none of them assembles a session by
//! hand.

mod cloud;
mod knobs;
pub mod options;
pub(crate) mod settings;
mod start;
pub mod trust;

pub use knobs::Env;
pub use options::SessionOptions;
use options::{SettingSource, ThinkingMode, ToolSet, UsdBudget, MIN_THINKING_TOKENS};
pub use start::{claude_json, keel_home, user_config_dir};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_model::{
    AnthropicClient, ApiErrorKind, ClientConfig, Model, OpenAiApi, OpenAiClient, OpenAiOptions,
    Provider, ProviderChoice, Router, DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL,
};
use keel_protocol::Extra;
use keel_tools::{Tool, ToolKind, ToolLimits};
use tokio::sync::mpsc;

use crate::agents::{self, AgentRegistry};
use crate::context::{ContextParts, Limits, SessionContext};
use crate::emit::Emitter;
use crate::event::Emitted;
use crate::permissions::{PermissionConfig, PermissionMode};
use crate::retry::RetryPolicy;
use crate::session::{AgentScope, Session};
use crate::tasks::TaskManager;
use knobs::Knobs;

/// The default model when neither an option nor `ANTHROPIC_MODEL` names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// How many events may wait for a slow front end before the session waits for it.
pub const EVENT_CHANNEL_CAPACITY: usize = 1024;

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

/// Why a session could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The options, environment or settings are wrong (exit 2): the message names which.
    #[error("{0}")]
    Usage(String),
    /// The session asked for cannot be opened: it does not exist, is in use, ... (exit 1).
    #[error("{0}")]
    Session(String),
    /// A truncating fork was refused (`--resume-drops-turn`, `--resume-session-at`); the text
    /// starts `Resume rejected by --…:` (exit 1). Front ends that print frames end the run
    /// with an error `result` carrying it, as hosts expect.
    #[error("{0}")]
    ResumeRejected(String),
}

impl BuildError {
    /// The exit code of a run that could not start this way.
    pub fn exit_code(&self) -> i32 {
        match self {
            BuildError::Usage(_) => 2,
            BuildError::Session(_) | BuildError::ResumeRejected(_) => 1,
        }
    }
}

/// A session, ready to run.
pub struct Built {
    /// The session.
    pub session: Session,
    /// Its events, for the front end (bounded: read them, or the session waits).
    pub events: mpsc::Receiver<Emitted>,
    /// Problems found while building that did not stop it (each is also queued as a
    /// `system/warning` of the first turn), worded for stderr.
    pub notices: Vec<String>,
}

/// Makes sessions.
pub struct SessionBuilder {
    cwd: PathBuf,
    env: Arc<Env>,
    options: SessionOptions,
    client: Option<Arc<dyn Model>>,
    extra_tools: Vec<Arc<dyn Tool>>,
    retry: Option<RetryPolicy>,
}

impl SessionBuilder {
    /// A builder for a session working in `cwd`, reading the process environment.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            env: Arc::new(|k: &str| std::env::var(k).ok()),
            options: SessionOptions::default(),
            client: None,
            extra_tools: Vec::new(),
            retry: None,
        }
    }

    /// Read the environment through `env` instead (tests, the demo, embedders).
    pub fn env(mut self, env: Arc<Env>) -> Self {
        self.env = env;
        self
    }

    /// The options (what the flags say).
    pub fn options(mut self, options: SessionOptions) -> Self {
        self.options = options;
        self
    }

    /// Talk to this model client instead of the one the environment describes.
    pub fn model_client(mut self, client: Arc<dyn Model>) -> Self {
        self.client = Some(client);
        self
    }

    /// Offer these tools too, after the built-in ones `--tools` selects (an embedder's own).
    pub fn extra_tools(mut self, tools: Vec<Arc<dyn Tool>>) -> Self {
        self.extra_tools.extend(tools);
        self
    }

    /// Retry model requests with this policy instead of the one the environment describes.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// The permission mode and rules a session built from this would start with (settings
    /// files, flags, added directories), without starting one: `keel permissions check`.
    pub fn permission_config(&self) -> Result<PermissionConfig, BuildError> {
        let (settings, home) = self.load_settings()?;
        let env = self.env.clone();
        self.permissions(settings, &*env, home.as_deref())
    }

    /// Build the session. File work (settings, the transcript) runs on the blocking pool.
    pub async fn build(self) -> Result<Built, BuildError> {
        tokio::task::spawn_blocking(move || self.build_blocking())
            .await
            .map_err(|e| BuildError::Session(format!("Error: could not set the session up: {e}")))?
    }

    /// The settings files that apply here (and `HOME`, which locates the user's).
    fn load_settings(&self) -> Result<(settings::SettingsRules, Option<PathBuf>), BuildError> {
        let home = (self.env)("HOME")
            .filter(|h| !h.trim().is_empty())
            .map(PathBuf::from);
        let user_dir = start::user_config_dir(&*self.env, &self.cwd);
        let settings = settings::load(
            self.options.settings.as_deref(),
            self.options.setting_sources,
            &self.cwd,
            user_dir.as_deref(),
        )?;
        Ok((settings, home))
    }

    /// The environment: the process's, then the settings files' `env` for what it does not set.
    fn merged_env(&self, settings: &settings::SettingsRules) -> impl Fn(&str) -> Option<String> {
        let process_env = self.env.clone();
        let settings_env = settings.env.clone();
        move |k: &str| process_env(k).or_else(|| settings_env.get(k).cloned())
    }

    fn build_blocking(self) -> Result<Built, BuildError> {
        let o = &self.options;
        let (mut settings, home) = self.load_settings()?;
        let merged = self.merged_env(&settings);
        let env: &Env = &merged;
        let k = Knobs::new(env);
        let model = o
            .model
            .clone()
            .or_else(|| env("KEEL_MODEL"))
            .or_else(|| env("ANTHROPIC_MODEL"))
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let limits = self.limits(&k)?;
        let web_limits = web_limits(&k)?;
        // A schema keel cannot use stops the run before anything starts.
        let structured = crate::structured::Structured::from_options(o.json_schema.as_deref(), env)
            .map_err(|e| BuildError::Usage(format!("Error: {e}")))?;
        for note in &settings.hook_notes {
            tracing::warn!("{note}");
        }
        let mut requested = crate::session::Requested {
            strict_mcp: o.strict_mcp_config,
            ..Default::default()
        };
        for h in &settings.hooks {
            *requested
                .hooks
                .entry(h.event.as_str().to_owned())
                .or_default() += 1;
        }
        let settings_hooks: Option<Arc<dyn crate::hooks::Hooks>> = if settings.hooks.is_empty() {
            None
        } else {
            Some(crate::command_hooks::CommandHooks::new(
                std::mem::take(&mut settings.hooks),
                self.cwd.clone(),
                o.include_hook_events,
            ))
        };
        let mut trust_warnings = Vec::new();
        settings::hold_back_repository(
            &mut settings,
            o.skip_permissions || o.allow_skip_permissions || o.permission_mode.is_some(),
            o.sandbox,
            &mut trust_warnings,
        );
        let sandbox = self.sandbox(&settings, home.as_deref())?;
        let mcp_settings = std::mem::take(&mut settings.mcp_servers);
        let mcp_approvals = std::mem::take(&mut settings.mcp_approvals);
        let user_settings = settings.user_file.clone();
        let providers = provider_choice(o, settings.provider.take(), env)?;
        let permissions = self.permissions(settings, env, home.as_deref())?;
        let bypass = crate::context::BypassGate {
            launched_allowed: o.skip_permissions
                || o.allow_skip_permissions
                || permissions.mode == PermissionMode::BypassPermissions,
            root_refused: bypass_refused(env),
        };
        let (system_prompt, append) = self.system_prompt()?;
        let named = o
            .model
            .clone()
            .or_else(|| env("KEEL_MODEL"))
            .is_some_and(|m| !m.trim().is_empty());
        let model = match (named, env("ANTHROPIC_MODEL"), providers.explicit) {
            // A cloud serving Claude has a model of its own when none is named.
            (false, None, true) if cloud::default_model(providers.default).is_some() => {
                cloud::default_model(providers.default).unwrap_or(DEFAULT_MODEL).to_owned()
            }
            // The Anthropic model variable names no model of another provider.
            (false, Some(_), true) if !providers.default.speaks_messages() => {
                return Err(BuildError::Usage(format!(
                    "Error: the {} provider needs a model: pass --model or set KEEL_MODEL (ANTHROPIC_MODEL names an Anthropic model)",
                    providers.default
                )))
            }
            (false, None, true) if !providers.default.speaks_messages() => {
                return Err(BuildError::Usage(format!(
                    "Error: the {} provider needs a model: pass --model or set KEEL_MODEL",
                    providers.default
                )))
            }
            _ => model,
        };
        let client = match &self.client {
            Some(c) => c.clone(),
            None => clients(env, &k, providers, &model, limits.fallback_model.as_deref())?,
        };
        let mut base_tools = select_tools(&o.tools);
        base_tools.extend(self.extra_tools.iter().cloned());
        // The MCP configuration is checked now (a broken one stops the run before anything
        // starts); the servers start once the session is open.
        let mcp = self.mcp(mcp_settings, &mcp_approvals, user_settings.as_deref(), env)?;
        let extra_agents = match &o.agents {
            Some(json) => crate::agent_defs::parse_agents_json(json)
                .map_err(|e| BuildError::Usage(format!("Error: {e}")))?,
            None => Vec::new(),
        };
        // The session: new, resumed, continued or forked; its transcript is written ahead of
        // every consumer — unless the host asked for no persistence at all.
        let remote = match env("KEEL_TRANSCRIPT_URL").filter(|u| !u.trim().is_empty()) {
            Some(_) if o.no_session_persistence => None,
            Some(url) => Some(
                crate::remote::RemoteTranscripts::from_url(&url, env)
                    .map_err(|e| BuildError::Usage(format!("Error: {e}")))?,
            ),
            None => None,
        };
        let started = start::open(o, env, &self.cwd, &model, remote.as_ref())?;
        // MCP servers start side by side, each within MCP_TIMEOUT, before the first request.
        // (SDK servers connect when the first turn starts: the host answers only then.)
        let (set, bounds) = mcp;
        let mcp = tokio::runtime::Handle::current()
            .block_on(crate::mcp::McpHub::start(&set, &self.cwd, bounds));
        let transcript_path = started
            .writer
            .as_ref()
            .map(|w| w.path().to_path_buf())
            .filter(|p| !p.as_os_str().is_empty());
        let (tx, events) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
        let mut emitter = Emitter::new(started.session_id.clone(), tx);
        if let Some(w) = &started.writer {
            emitter = emitter.with_persist(w.clone());
        }
        if let Some(m) = &o.mirror {
            emitter = emitter.with_mirror(m.clone());
        }
        let mut limits = with_spill_dir(limits, transcript_path.as_ref(), &started.session_id);
        if let Some(sb) = sandbox {
            let mut tools = (*limits.tools).clone();
            tools.sandbox = Some(sb);
            limits.tools = Arc::new(tools);
        }
        let (mut registry, agent_warnings) = AgentRegistry::load(&self.cwd, home.as_deref());
        let extensions = Arc::new(crate::extend::Extensions::load(
            &self.cwd,
            home.as_deref(),
            start::user_config_dir(&*self.env, &self.cwd).as_deref(),
            o.setting_sources,
        ));
        // Memory files skipped or cut are said once, at start (keel's own prompt only).
        let memory_warnings = match system_prompt {
            None => crate::prompt::read_memory(&self.cwd, home.as_deref()).warnings,
            Some(_) => Vec::new(),
        };
        for d in extra_agents {
            registry.insert(d);
        }
        let session_dir = transcript_path.as_ref().map(|p| p.with_extension(""));
        let tasks = TaskManager::new(emitter.clone(), session_dir.map(|d| d.join("tasks")));
        let api_key_source = match providers.resolve(&model).0 {
            Provider::Anthropic if env("ANTHROPIC_API_KEY").is_some() => "ANTHROPIC_API_KEY",
            Provider::OpenAi | Provider::OpenAiChat if env("OPENAI_API_KEY").is_some() => {
                "OPENAI_API_KEY"
            }
            Provider::Bedrock if env("AWS_BEARER_TOKEN_BEDROCK").is_some() => {
                "AWS_BEARER_TOKEN_BEDROCK"
            }
            Provider::Foundry if env("ANTHROPIC_FOUNDRY_API_KEY").is_some() => {
                "ANTHROPIC_FOUNDRY_API_KEY"
            }
            _ => "none",
        }
        .to_owned();
        let remote = match (remote, &transcript_path) {
            (Some(r), Some(path)) => {
                let em = emitter.clone();
                let warn = Box::new(move |message: String| {
                    let em = em.clone();
                    tokio::spawn(async move {
                        let _ = em
                            .emit(crate::event::Event::Warning {
                                message,
                                fields: Extra::new(),
                            })
                            .await;
                    });
                });
                Some(crate::remote::Uploader::start(
                    r,
                    started.session_id.clone(),
                    path.clone(),
                    warn,
                ))
            }
            _ => None,
        };
        let ctx = SessionContext::new(ContextParts {
            session_id: emitter.session_cell().clone(),
            cwd: self.cwd.clone(),
            home,
            client,
            providers,
            model,
            permissions,
            limits,
            tasks,
            registry,
            transcript_path,
            include_partial_messages: o.include_partial_messages,
            api_key_source,
            additional_directories: o.add_dirs.clone(),
            settings_hooks,
            mcp,
            remote,
            bypass,
            extensions: extensions.clone(),
        });
        // Subagents get the web tools too: they are part of the base set.
        base_tools.extend(crate::web::web_tools(&ctx, &emitter, web_limits, |kind| {
            self.wants(kind)
        }));
        let mut tools = agents::session_tools(base_tools, |kind| self.wants(kind), &ctx, &emitter);
        // Offered when there is a skill to load (a tool with nothing behind it is noise).
        if !extensions.skills.is_empty() && self.wants_tool("Skill") {
            tools.push(Arc::new(crate::extend::skill_tool::SkillTool::new(
                extensions.clone(),
            )));
        }
        let scope = AgentScope {
            max_turns: ctx.limits.max_turns,
            system_prompt,
            append_system_prompt: append,
            ..AgentScope::default()
        };
        let mut session = Session::new(ctx, scope, tools, emitter, started.history);
        if let Some(s) = structured {
            session.enable_structured_output(s);
        }
        let mut notices = Vec::new();
        let (style, style_warnings) = crate::output_style::resolve(&crate::output_style::Places {
            cwd: &self.cwd,
            home: session.ctx.home.as_deref(),
            sources: o.setting_sources,
            flag_settings: o.settings.as_deref(),
        });
        session.set_output_style(style);
        session.set_requested(requested);
        for w in style_warnings {
            notices.push(format!("keel: warning: {w}"));
            session.queue_warning(w, Extra::new());
        }
        let extension_warnings = extensions.warnings();
        for w in agent_warnings
            .into_iter()
            .chain(memory_warnings)
            .chain(trust_warnings)
            .chain(extension_warnings)
        {
            notices.push(format!("keel: {w}"));
            session.queue_warning(w, Extra::new());
        }
        for n in &started.notices {
            notices.push(format!("keel: warning: {}", n.message));
            session.queue_warning(n.message.clone(), n.fields());
        }
        Ok(Built {
            session,
            events,
            notices,
        })
    }

    fn limits(&self, k: &Knobs<'_>) -> Result<Limits, BuildError> {
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
    fn sandbox(
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

    fn permissions(
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

    fn system_prompt(&self) -> Result<(Option<String>, Option<String>), BuildError> {
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

    /// The MCP servers a session here would have (each as configured, or why it cannot be
    /// used), and the bounds they work within — what `keel mcp list` shows and checks.
    pub fn mcp_servers(&self) -> Result<(keel_mcp::ServerSet, crate::mcp::Bounds), BuildError> {
        let (mut settings, _) = self.load_settings()?;
        let merged = self.merged_env(&settings);
        let servers = std::mem::take(&mut settings.mcp_servers);
        let user_file = settings.user_file.clone();
        self.mcp(
            servers,
            &settings.mcp_approvals,
            user_file.as_deref(),
            &merged,
        )
    }

    /// The session's MCP servers, as configured in the user's state file (`~/.claude.json`),
    /// the settings files, the project's `.mcp.json` and `--mcp-config` (only those with
    /// `--strict-mcp-config`), with the bounds they work within. Servers the project
    /// configures (its `.mcp.json`, its settings files) are marked failed unless the user's
    /// own settings approve them: a repository that was cloned must not run programs by itself.
    fn mcp(
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

    /// Whether an agent or web tool is offered: always, unless `--tools` lists tools and
    /// leaves it out.
    fn wants(&self, kind: ToolKind) -> bool {
        let name = if crate::web::WEB_TOOLS.contains(&kind) {
            kind.canonical_name()
        } else {
            agents::agent_tool_name(kind)
        };
        self.wants_tool(name)
    }

    /// Whether the engine's tool `name` is offered: always, unless `--tools` leaves it out.
    fn wants_tool(&self, name: &str) -> bool {
        self.options.tools.offers(name)
    }
}

/// WebFetch's bounds: `KEEL_WEBFETCH_TIMEOUT_MS` (the whole call) and
/// `KEEL_WEBFETCH_MAX_BYTES` (the body read).
fn web_limits(k: &Knobs<'_>) -> Result<keel_tools::web::FetchLimits, BuildError> {
    let mut l = keel_tools::web::FetchLimits::default();
    if let Some(d) = k.ms(
        "KEEL_WEBFETCH_TIMEOUT_MS",
        100,
        std::time::Duration::from_secs(600),
    )? {
        l.total = d;
    }
    if let Some(n) = k.count("KEEL_WEBFETCH_MAX_BYTES", 1024, 100 * 1024 * 1024)? {
        l.max_bytes = n as usize;
    }
    Ok(l)
}

/// bypassPermissions is refused as root, unless `IS_SANDBOX` says this is a disposable box.
pub fn bypass_refused(env: &Env) -> bool {
    nix::unistd::geteuid().is_root() && env("IS_SANDBOX").is_none()
}

/// Long command output keeps head and tail for the model; the whole of it goes beside the
/// session's transcript (or to the temp directory when no transcript is kept).
fn with_spill_dir(mut limits: Limits, transcript: Option<&PathBuf>, session_id: &str) -> Limits {
    let spill = match transcript {
        Some(t) => t.with_extension("").join("tool-output"),
        None => std::env::temp_dir().join(format!("keel-tool-output-{session_id}")),
    };
    let mut tools = (*limits.tools).clone();
    tools.spill_dir = Some(spill);
    limits.tools = Arc::new(tools);
    limits
}

/// The built-in tools `--tools` asks for (its names were checked when it was parsed).
fn select_tools(set: &ToolSet) -> Vec<Arc<dyn Tool>> {
    keel_tools::builtin_tools()
        .into_iter()
        .filter(|t| set.offers(t.name()))
        .collect()
}

/// The provider `--provider`, the settings or `KEEL_PROVIDER` chose, if any.
fn provider_choice(
    o: &SessionOptions,
    setting: Option<(String, String)>,
    env: &Env,
) -> Result<ProviderChoice, BuildError> {
    if let Some(default) = o.provider {
        return Ok(ProviderChoice {
            default,
            explicit: true,
        });
    }
    let named = match (setting, env("KEEL_PROVIDER")) {
        (Some((p, at)), _) => Some((p, format!("the provider setting in {at}"))),
        (None, Some(p)) => Some((p, "KEEL_PROVIDER".to_owned())),
        (None, None) => None,
    };
    let Some((name, from)) = named.filter(|(n, _)| !n.trim().is_empty()) else {
        return Ok(match cloud::switched(env)? {
            Some(default) => ProviderChoice {
                default,
                explicit: true,
            },
            None => ProviderChoice::default(),
        });
    };
    let default = Provider::parse(&name).ok_or_else(|| {
        let all: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
        BuildError::Usage(format!(
            "Error: {from} names the provider {name:?}, which keel does not speak; it speaks {}",
            all.join(", ")
        ))
    })?;
    Ok(ProviderChoice {
        default,
        explicit: true,
    })
}

/// A client for every provider the session's models need (the model and the fallback model),
/// behind one router.
fn clients(
    env: &Env,
    k: &Knobs<'_>,
    choice: ProviderChoice,
    model: &str,
    fallback: Option<&str>,
) -> Result<Arc<dyn Model>, BuildError> {
    let mut needed = vec![choice.resolve(model).0];
    if let Some(f) = fallback {
        let p = choice.resolve(f).0;
        if !needed.contains(&p) {
            needed.push(p);
        }
    }
    let mut router = Router::new(choice);
    for p in needed {
        let client: Arc<dyn Model> = match p {
            Provider::Anthropic => Arc::new(client_from_env(env, k)?),
            Provider::OpenAi => Arc::new(openai_from_env(env, k, OpenAiApi::Responses)?),
            Provider::OpenAiChat => Arc::new(openai_from_env(env, k, OpenAiApi::Chat)?),
            Provider::Foundry => cloud::foundry(env, k)?,
            Provider::Vertex => Arc::new(cloud::vertex(env, k)?),
            Provider::Bedrock => Arc::new(cloud::bedrock(env, k)?),
        };
        router = router.with(p, client);
    }
    Ok(Arc::new(router))
}

/// Timeouts from the environment, the same for every provider.
fn timeouts(cfg: &mut ClientConfig, k: &Knobs<'_>) -> Result<(), BuildError> {
    if let Some(d) = k.ms(
        "KEEL_STREAM_IDLE_TIMEOUT_MS",
        50,
        std::time::Duration::from_secs(3600),
    )? {
        cfg.idle_timeout = d;
    }
    if let Some(d) = k.ms(
        "KEEL_CONNECT_TIMEOUT_MS",
        1,
        std::time::Duration::from_secs(600),
    )? {
        cfg.connect_timeout = d;
    }
    Ok(())
}

/// An OpenAI client (Responses or Chat Completions) the environment describes.
fn openai_from_env(env: &Env, k: &Knobs<'_>, api: OpenAiApi) -> Result<OpenAiClient, BuildError> {
    let from_env = env("OPENAI_BASE_URL").filter(|s| !s.trim().is_empty());
    let base_url = from_env
        .clone()
        .unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.to_owned());
    let api_key = env("OPENAI_API_KEY").filter(|s| !s.trim().is_empty());
    if api_key.is_none() && base_url == OPENAI_DEFAULT_BASE_URL {
        return Err(BuildError::Usage(
            "Error: keel needs an API key to talk to OpenAI. Set OPENAI_API_KEY, or point OPENAI_BASE_URL at a compatible server (see docs/providers.md).".into(),
        ));
    }
    let mut cfg = ClientConfig {
        base_url,
        api_key,
        ..ClientConfig::default()
    };
    timeouts(&mut cfg, k)?;
    let mut options = OpenAiOptions::default();
    if let Some(f) = env("KEEL_OPENAI_MAX_TOKENS_FIELD").filter(|s| !s.trim().is_empty()) {
        options.chat_max_tokens_field = f.trim().to_owned();
    }
    OpenAiClient::new(api, cfg, options).map_err(|e| match (e.kind, from_env) {
        (ApiErrorKind::Config, Some(url)) if e.message.contains("URL") => {
            BuildError::Usage(format!(
                "Error: OPENAI_BASE_URL={url:?} cannot be used: {}",
                e.message
            ))
        }
        (ApiErrorKind::Config, _) if e.message.contains("output cap") => BuildError::Usage(
            format!("Error: KEEL_OPENAI_MAX_TOKENS_FIELD: {}", e.message),
        ),
        _ => BuildError::Usage(format!("Error: {e}")),
    })
}

/// The Anthropic client the environment describes.
fn client_from_env(env: &Env, k: &Knobs<'_>) -> Result<AnthropicClient, BuildError> {
    let from_env = env("ANTHROPIC_BASE_URL").filter(|s| !s.trim().is_empty());
    let base_url = from_env
        .clone()
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let api_key = env("ANTHROPIC_API_KEY").filter(|s| !s.trim().is_empty());
    let auth_token = env("ANTHROPIC_AUTH_TOKEN").filter(|s| !s.trim().is_empty());
    if api_key.is_none() && auth_token.is_none() && base_url == DEFAULT_BASE_URL {
        return Err(BuildError::Usage(
            "Error: keel needs an API key to talk to the model. Set ANTHROPIC_API_KEY (create a key in the Anthropic Console), or point ANTHROPIC_BASE_URL at a compatible server. To see keel work without a key, run `keel demo`.".into(),
        ));
    }
    let mut cfg = ClientConfig {
        base_url,
        api_key,
        auth_token,
        ..ClientConfig::default()
    };
    timeouts(&mut cfg, k)?;
    AnthropicClient::new(cfg).map_err(|e| match (e.kind, from_env) {
        (ApiErrorKind::Config, Some(url)) => BuildError::Usage(format!(
            "Error: ANTHROPIC_BASE_URL={url:?} cannot be used: {}",
            e.message
        )),
        _ => BuildError::Usage(format!("Error: {e}")),
    })
}
