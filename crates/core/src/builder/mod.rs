//! [`SessionBuilder`]: the only way to make a session.
//!
//! Options (what the flags say), the environment and the settings files go in; the transcript
//! is opened (new, resumed, continued or forked), the model client, tools, agents and tasks are
//! wired to one [`SessionContext`]; a complete [`Session`] and the receiving end of its events
//! come out — or a [`BuildError`] that names what is wrong and where. `keel -p`, stream-json,
//! `keel demo` and the interactive UI all start here, so none of them assembles a session by
//! hand.

mod clients;
mod cloud;
mod knobs;
pub mod options;
mod parts;
pub(crate) mod settings;
mod start;
pub mod trust;

pub use knobs::Env;
pub use options::SessionOptions;
use options::ToolSet;
pub use start::{claude_json, keel_home, user_config_dir};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_model::{Model, ProviderChoice};
use keel_protocol::Extra;
use keel_tools::{Tool, ToolKind};
use tokio::sync::mpsc;

use crate::agents::{self, AgentRegistry};
use crate::context::{ContextParts, Limits, SessionContext};
use crate::emit::Emitter;
use crate::event::Emitted;
use crate::permissions::{PermissionConfig, PermissionMode};
use crate::retry::RetryPolicy;
use crate::session::{AgentScope, Session};
use crate::tasks::TaskManager;
use clients::{api_key_source, clients, model_for, provider_choice};
use knobs::Knobs;

/// The default model when neither an option nor `ANTHROPIC_MODEL` names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// How many events may wait for a slow front end before the session waits for it.
pub const EVENT_CHANNEL_CAPACITY: usize = 1024;

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

/// What [`SessionBuilder::prepare`] makes of the options before the session is opened.
struct Prepared {
    env: Arc<Env>,
    home: Option<PathBuf>,
    limits: Limits,
    web_limits: keel_tools::web::FetchLimits,
    structured: Option<crate::structured::Structured>,
    requested: crate::session::Requested,
    settings_hooks: Option<Arc<dyn crate::hooks::Hooks>>,
    trust_warnings: Vec<String>,
    sandbox: Option<Arc<keel_tools::sandbox::Sandbox>>,
    providers: ProviderChoice,
    permissions: PermissionConfig,
    bypass: crate::context::BypassGate,
    system_prompt: Option<String>,
    append: Option<String>,
    model: String,
    client: Arc<dyn Model>,
    base_tools: Vec<Arc<dyn Tool>>,
    mcp: (keel_mcp::ServerSet, crate::mcp::Bounds),
    extra_agents: Vec<crate::agent_defs::AgentDef>,
    remote: Option<crate::remote::RemoteTranscripts>,
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
    fn merged_env(&self, settings: &settings::SettingsRules) -> Arc<Env> {
        let process_env = self.env.clone();
        let settings_env = settings.env.clone();
        Arc::new(move |k: &str| process_env(k).or_else(|| settings_env.get(k).cloned()))
    }

    /// Everything that can be refused before the transcript is touched: the settings, the
    /// environment, the permissions, the model and its client, the tools and MCP servers asked
    /// for, the agent types and the remote store.
    fn prepare(&self) -> Result<Prepared, BuildError> {
        let o = &self.options;
        let (mut settings, home) = self.load_settings()?;
        let merged = self.merged_env(&settings);
        let env: &Env = &*merged;
        let k = Knobs::new(env);
        let limits = self.limits(&k)?;
        let web_limits = web_limits(&k)?;
        // A schema keel cannot use stops the run before anything starts.
        let structured = crate::structured::Structured::from_options(o.json_schema.as_deref(), env)
            .map_err(|e| BuildError::Usage(format!("Error: {e}")))?;
        for note in &settings.hook_notes {
            tracing::warn!("{note}");
        }
        let (requested, settings_hooks) = self.settings_hooks(&mut settings);
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
        let model = model_for(o, env, &providers)?;
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
        let remote = remote_store(o, env)?;
        Ok(Prepared {
            env: merged.clone(),
            home,
            limits,
            web_limits,
            structured,
            requested,
            settings_hooks,
            trust_warnings,
            sandbox,
            providers,
            permissions,
            bypass,
            system_prompt,
            append,
            model,
            client,
            base_tools,
            mcp,
            extra_agents,
            remote,
        })
    }

    fn build_blocking(self) -> Result<Built, BuildError> {
        let o = &self.options;
        let p = self.prepare()?;
        let env: &Env = &*p.env;
        // The session: new, resumed, continued or forked; its transcript is written ahead of
        // every consumer — unless the host asked for no persistence at all.
        let started = start::open(o, env, &self.cwd, &p.model, p.remote.as_ref())?;
        // MCP servers start side by side, each within MCP_TIMEOUT, before the first request.
        // (SDK servers connect when the first turn starts: the host answers only then.)
        let mcp = tokio::runtime::Handle::current()
            .block_on(crate::mcp::McpHub::start(&p.mcp.0, &self.cwd, p.mcp.1));
        let transcript_path = started
            .writer
            .as_ref()
            .map(|w| w.path().to_path_buf())
            .filter(|p| !p.as_os_str().is_empty());
        let (emitter, events) = session_emitter(o, &started);
        let limits = with_sandbox(
            with_spill_dir(p.limits, transcript_path.as_ref(), &started.session_id),
            p.sandbox,
        );
        let (registry, extensions, mut warnings) = self.agents_and_extensions(
            p.home.as_deref(),
            p.extra_agents,
            p.system_prompt.is_none(),
        );
        let session_dir = transcript_path.as_ref().map(|p| p.with_extension(""));
        let tasks = TaskManager::new(emitter.clone(), session_dir.map(|d| d.join("tasks")));
        let api_key_source = api_key_source(&p.providers, &p.model, env);
        let remote = uploader(
            p.remote,
            transcript_path.as_ref(),
            &emitter,
            &started.session_id,
        );
        let ctx = SessionContext::new(ContextParts {
            session_id: emitter.session_cell().clone(),
            cwd: self.cwd.clone(),
            home: p.home,
            client: p.client,
            providers: p.providers,
            model: p.model,
            permissions: p.permissions,
            limits,
            tasks,
            registry,
            transcript_path,
            include_partial_messages: o.include_partial_messages,
            api_key_source,
            additional_directories: o.add_dirs.clone(),
            settings_hooks: p.settings_hooks,
            mcp,
            remote,
            bypass: p.bypass,
            extensions: extensions.clone(),
        });
        let tools = self.session_tools(p.base_tools, &ctx, &emitter, p.web_limits, &extensions);
        let scope = AgentScope {
            max_turns: ctx.limits().max_turns,
            system_prompt: p.system_prompt,
            append_system_prompt: p.append,
            ..AgentScope::default()
        };
        let mut session = Session::new(ctx, scope, tools, emitter, started.history);
        if let Some(s) = p.structured {
            session.enable_structured_output(s);
        }
        session.set_requested(p.requested);
        warnings.extend(p.trust_warnings);
        warnings.extend(extensions.warnings());
        let notices = self.startup_notices(&mut session, warnings, &started.notices);
        Ok(Built {
            session,
            events,
            notices,
        })
    }

    /// The settings files' hooks, to run, and counted for `system/init`.
    fn settings_hooks(
        &self,
        settings: &mut settings::SettingsRules,
    ) -> (
        crate::session::Requested,
        Option<Arc<dyn crate::hooks::Hooks>>,
    ) {
        let o = &self.options;
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
        (requested, settings_hooks)
    }

    /// The session's tools: the base set, the web tools, the agent tools and (when there is a
    /// skill to load) the Skill tool, as `--tools` allows.
    fn session_tools(
        &self,
        mut base_tools: Vec<Arc<dyn Tool>>,
        ctx: &Arc<SessionContext>,
        emitter: &Emitter,
        web_limits: keel_tools::web::FetchLimits,
        extensions: &Arc<crate::extend::Extensions>,
    ) -> Vec<Arc<dyn Tool>> {
        // Subagents get the web tools too: they are part of the base set.
        base_tools.extend(crate::web::web_tools(ctx, emitter, web_limits, |kind| {
            self.wants(kind)
        }));
        let mut tools = agents::session_tools(base_tools, |kind| self.wants(kind), ctx, emitter);
        // Offered when there is a skill to load (a tool with nothing behind it is noise).
        if !extensions.skills.is_empty() && self.wants_tool("Skill") {
            tools.push(Arc::new(crate::extend::skill_tool::SkillTool::new(
                extensions.clone(),
            )));
        }
        tools
    }

    /// The output style, and what building found that did not stop it: each queued as a
    /// warning of the first turn, and returned worded for stderr.
    fn startup_notices(
        &self,
        session: &mut Session,
        warnings: Vec<String>,
        started: &[crate::transcript::Notice],
    ) -> Vec<String> {
        let o = &self.options;
        let mut notices = Vec::new();
        let (style, style_warnings) = crate::output_style::resolve(&crate::output_style::Places {
            cwd: &self.cwd,
            home: session.ctx.home(),
            sources: o.setting_sources,
            flag_settings: o.settings.as_deref(),
        });
        session.set_output_style(style);
        for w in style_warnings {
            notices.push(format!("keel: warning: {w}"));
            session.queue_warning(w, Extra::new());
        }
        for w in warnings {
            notices.push(format!("keel: {w}"));
            session.queue_warning(w, Extra::new());
        }
        for n in started {
            notices.push(format!("keel: warning: {}", n.message));
            session.queue_warning(n.message.clone(), n.fields());
        }
        notices
    }

    /// The agent types (found on disk, then `--agents`), the skills and commands, and what
    /// loading them (and the memory files, for keel's own prompt) found wrong.
    fn agents_and_extensions(
        &self,
        home: Option<&Path>,
        extra_agents: Vec<crate::agent_defs::AgentDef>,
        keel_prompt: bool,
    ) -> (AgentRegistry, Arc<crate::extend::Extensions>, Vec<String>) {
        let o = &self.options;
        let (mut registry, mut warnings) = AgentRegistry::load(&self.cwd, home);
        let extensions = Arc::new(crate::extend::Extensions::load(
            &self.cwd,
            home,
            start::user_config_dir(&*self.env, &self.cwd).as_deref(),
            o.setting_sources,
        ));
        // Memory files skipped or cut are said once, at start (keel's own prompt only).
        if keel_prompt {
            warnings.extend(crate::prompt::read_memory(&self.cwd, home).warnings);
        }
        for d in extra_agents {
            registry.insert(d);
        }
        (registry, extensions, warnings)
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
            &*merged,
        )
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

/// The uploader of the transcript to the remote store (`KEEL_TRANSCRIPT_URL`), whose
/// failures become warnings of the session.
fn uploader(
    remote: Option<crate::remote::RemoteTranscripts>,
    transcript_path: Option<&PathBuf>,
    emitter: &Emitter,
    session_id: &str,
) -> Option<Arc<crate::remote::Uploader>> {
    match (remote, transcript_path) {
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
                session_id.to_owned(),
                path.clone(),
                warn,
            ))
        }
        _ => None,
    }
}

/// The remote transcript store `KEEL_TRANSCRIPT_URL` names (none for a session that is not
/// kept).
fn remote_store(
    o: &SessionOptions,
    env: &Env,
) -> Result<Option<crate::remote::RemoteTranscripts>, BuildError> {
    match env("KEEL_TRANSCRIPT_URL").filter(|u| !u.trim().is_empty()) {
        Some(_) if o.no_session_persistence => Ok(None),
        Some(url) => crate::remote::RemoteTranscripts::from_url(&url, env)
            .map(Some)
            .map_err(|e| BuildError::Usage(format!("Error: {e}"))),
        None => Ok(None),
    }
}

/// The session's emitter and the receiving end of its events: persisted to the transcript
/// (when there is one) and mirrored where the options ask.
fn session_emitter(
    o: &SessionOptions,
    started: &start::SessionStart,
) -> (Emitter, mpsc::Receiver<Emitted>) {
    let (tx, events) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let mut emitter = Emitter::new(started.session_id.clone(), tx);
    if let Some(w) = &started.writer {
        emitter = emitter.with_persist(w.clone());
    }
    if let Some(m) = &o.mirror {
        emitter = emitter.with_mirror(m.clone());
    }
    (emitter, events)
}

/// Bash runs in the OS sandbox, when there is one.
fn with_sandbox(mut limits: Limits, sandbox: Option<Arc<keel_tools::sandbox::Sandbox>>) -> Limits {
    if let Some(sb) = sandbox {
        let mut tools = (*limits.tools).clone();
        tools.sandbox = Some(sb);
        limits.tools = Arc::new(tools);
    }
    limits
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
