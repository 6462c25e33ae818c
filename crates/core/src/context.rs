//! [`SessionContext`]: the live state every agent of a session reads at decision time.
//!
//! One context per session, shared by handle (`Arc`) by the main agent, every subagent, the
//! background tasks and the front end's [`SessionHandle`](crate::SessionHandle). What a host
//! changes while the session runs — the model, the permission mode, rules granted with an
//! approval or sent in `initialize`, hooks, the approver — lands here and is seen by every
//! agent at its next decision: nothing is copied into a subagent. A subagent's own limits
//! (plan mode for read-only types, its tool subset, its model) are layered on top by its
//! [`AgentScope`](crate::session::AgentScope), never by editing a copy.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use keel_model::Model;
use keel_tools::ToolLimits;

use crate::agent_defs::{AgentDef, AgentRegistry, AgentsError, SubagentLimits};
use crate::approval::{Approver, PermissionUpdate, RuleBehavior};
use crate::cost::CostTracker;
use crate::event::CostReport;
use crate::hooks::Hooks;
use crate::permissions::{PermissionConfig, PermissionMode, Rule};
use crate::retry::RetryPolicy;
use crate::tasks::TaskManager;

/// Bounds of a session, fixed when it is built.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Output token cap per request.
    pub max_tokens: u32,
    /// Model calls allowed per turn of the main agent (`--max-turns`).
    pub max_turns: Option<u32>,
    /// Dollars allowed for the whole session, subagents included (`--max-budget-usd`).
    pub max_budget_usd: Option<f64>,
    /// Retries of model requests.
    pub retry: RetryPolicy,
    /// Bounds of tool calls.
    pub tools: Arc<ToolLimits>,
    /// Switched to after repeated overload.
    pub fallback_model: Option<String>,
    /// Bounds of subagents.
    pub subagents: SubagentLimits,
    /// Prompt caching, thinking and the context window.
    pub context: ContextLimits,
}

/// How keel uses the model's context: prompt caching, thinking, and when to compact.
#[derive(Clone, Debug)]
pub struct ContextLimits {
    /// Mark cache breakpoints in requests (off with `DISABLE_PROMPT_CACHING`).
    pub prompt_caching: bool,
    /// Extended thinking budget in tokens (`--max-thinking-tokens`, `MAX_THINKING_TOKENS`).
    pub thinking_tokens: Option<u32>,
    /// The model's context window, overriding the table (`KEEL_CONTEXT_WINDOW`).
    pub context_window: Option<u64>,
    /// Compact when a request would pass this many tokens (`KEEL_COMPACT_THRESHOLD_TOKENS`);
    /// by default the window minus the output budget and a margin.
    pub compact_threshold: Option<u64>,
    /// Compact automatically at all (off with `DISABLE_AUTO_COMPACT`).
    pub auto_compact: bool,
}

impl Default for ContextLimits {
    fn default() -> Self {
        Self {
            prompt_caching: true,
            thinking_tokens: None,
            context_window: None,
            compact_threshold: None,
            auto_compact: true,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tokens: 32_000,
            max_turns: None,
            max_budget_usd: None,
            retry: RetryPolicy::default(),
            tools: Arc::new(ToolLimits::default()),
            fallback_model: None,
            subagents: SubagentLimits::default(),
            context: ContextLimits::default(),
        }
    }
}

/// What a host may change while the session runs.
#[derive(Clone, Debug)]
struct Live {
    model: String,
    permissions: PermissionConfig,
    /// The thinking budget of the next request (`set_max_thinking_tokens` changes it).
    thinking_tokens: Option<u32>,
}

/// Subagents: the agent types and how many run.
pub(crate) struct Agents {
    registry: RwLock<AgentRegistry>,
    /// Bumped whenever agent types are added: the Task tool's schema lists them.
    pub(crate) generation: std::sync::atomic::AtomicU64,
    running: Arc<AtomicUsize>,
    /// Where subagent transcripts go (`<session dir>/subagents`), when transcripts are kept;
    /// `/clear` moves it to the new session's directory.
    transcript_dir: RwLock<Option<PathBuf>>,
}

impl Agents {
    /// Where the next subagent's transcript goes (`<session dir>/subagents`), when
    /// transcripts are kept.
    pub(crate) fn transcript_dir(&self) -> Option<PathBuf> {
        read(&self.transcript_dir).clone()
    }
}

/// A subagent's place among the session's running subagents; given back when dropped, on
/// every path (a stuck call abandoned, a panic, a cancel).
#[derive(Debug)]
pub(crate) struct SubagentSlot(Arc<AtomicUsize>);

impl Drop for SubagentSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Who may enter bypassPermissions while a session runs: decided once, at launch, and
/// consulted by every route that changes the mode (a host's `set_permission_mode`, a
/// `setMode` in an approval answer, the interactive UI).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BypassGate {
    /// Launched in bypassPermissions, or with `--allow-dangerously-skip-permissions`.
    pub launched_allowed: bool,
    /// Running as root without `IS_SANDBOX`: bypass is refused whatever the flags say.
    pub root_refused: bool,
}

/// Why a mode change was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModeRefused {
    /// The session was not launched with bypass allowed.
    #[error("bypassPermissions is only available when keel is launched with --dangerously-skip-permissions, --allow-dangerously-skip-permissions or --permission-mode bypassPermissions")]
    NotLaunched,
    /// Root without `IS_SANDBOX`.
    #[error("bypassPermissions cannot be used as root, where a command could change anything on the machine (set IS_SANDBOX=1 in a disposable sandbox)")]
    Root,
}

impl BypassGate {
    /// Whether the session may switch to `mode` now.
    pub fn check(&self, mode: PermissionMode) -> Result<(), ModeRefused> {
        if mode != PermissionMode::BypassPermissions {
            return Ok(());
        }
        if self.root_refused {
            return Err(ModeRefused::Root);
        }
        if !self.launched_allowed {
            return Err(ModeRefused::NotLaunched);
        }
        Ok(())
    }
}

/// The live, shared state of one session.
pub struct SessionContext {
    /// Shared with the session's emitters; `/clear` switches it.
    pub(crate) session_id: crate::session_id::SessionId,
    cwd: PathBuf,
    home: Option<PathBuf>,
    client: Arc<dyn Model>,
    /// Which provider serves which model.
    providers: keel_model::ProviderChoice,
    limits: Limits,
    tasks: Arc<TaskManager>,
    pub(crate) agents: Agents,
    transcript_path: RwLock<Option<PathBuf>>,
    include_partial_messages: bool,
    api_key_source: String,
    additional_directories: Vec<PathBuf>,
    /// The session's MCP servers.
    mcp: Arc<crate::mcp::McpHub>,
    /// The copy of the transcript in object storage (`KEEL_TRANSCRIPT_URL`).
    remote: RwLock<Option<Arc<crate::remote::Uploader>>>,
    /// Skills and custom commands.
    extensions: Arc<crate::extend::Extensions>,
    initial_model: String,
    live: RwLock<Live>,
    hooks: RwLock<Option<Arc<dyn Hooks>>>,
    /// The file checkpoints, when a front end turned them on.
    checkpoints: RwLock<Option<Arc<keel_tools::Checkpoints>>>,
    /// The settings files' command hooks: fixed for the session, run beside a host's.
    settings_hooks: Option<Arc<dyn Hooks>>,
    approver: RwLock<Option<Arc<dyn Approver>>>,
    /// What this session spent (results report it; `/clear` starts it again from zero).
    cost: Mutex<CostTracker>,
    /// What the sessions this process ran before a `/clear` spent: still counted against the
    /// budget (`--max-budget-usd` bounds the process, not one conversation).
    spent_before: Mutex<f64>,
    bypass: BypassGate,
    /// The name of the output style the main agent uses (`initialize` reports it).
    output_style: RwLock<String>,
}

impl std::fmt::Debug for SessionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionContext")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

/// What [`SessionContext::new`] needs.
pub(crate) struct ContextParts {
    pub session_id: crate::session_id::SessionId,
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    pub client: Arc<dyn Model>,
    pub providers: keel_model::ProviderChoice,
    pub model: String,
    pub permissions: PermissionConfig,
    pub limits: Limits,
    pub tasks: Arc<TaskManager>,
    pub registry: AgentRegistry,
    pub transcript_path: Option<PathBuf>,
    pub include_partial_messages: bool,
    pub api_key_source: String,
    pub additional_directories: Vec<PathBuf>,
    pub settings_hooks: Option<Arc<dyn Hooks>>,
    pub mcp: Arc<crate::mcp::McpHub>,
    pub remote: Option<Arc<crate::remote::Uploader>>,
    pub bypass: BypassGate,
    pub extensions: Arc<crate::extend::Extensions>,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the data is still usable.
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl SessionContext {
    /// The session's MCP servers and their state (`init`, `mcp_status`).
    /// The provider that serves `model` (`anthropic`, `openai`, `openai-chat`).
    pub fn provider_of(&self, model: &str) -> keel_model::Provider {
        self.providers.resolve(model).0
    }

    /// Where each MCP server of the session stands now (connected, failed, ...), as the init
    /// frame, `/mcp` and the `mcp_status` control request report it.
    pub fn mcp_servers(&self) -> Vec<crate::mcp::ServerStatus> {
        self.mcp.statuses()
    }

    /// The session's skills and custom commands.
    pub fn extensions(&self) -> &Arc<crate::extend::Extensions> {
        &self.extensions
    }

    /// The session's MCP servers (reconnect, toggle, the route to an SDK host).
    pub fn mcp(&self) -> &Arc<crate::mcp::McpHub> {
        &self.mcp
    }

    pub(crate) fn new(p: ContextParts) -> Arc<Self> {
        let thinking_tokens = p.limits.context.thinking_tokens;
        let transcript_dir = p
            .transcript_path
            .as_ref()
            .map(|t| t.with_extension("").join("subagents"));
        Arc::new(Self {
            session_id: p.session_id,
            cwd: p.cwd,
            home: p.home,
            client: p.client,
            providers: p.providers,
            limits: p.limits,
            tasks: p.tasks,
            agents: Agents {
                registry: RwLock::new(p.registry),
                generation: std::sync::atomic::AtomicU64::new(0),
                running: Arc::new(AtomicUsize::new(0)),
                transcript_dir: RwLock::new(transcript_dir),
            },
            transcript_path: RwLock::new(p.transcript_path),
            include_partial_messages: p.include_partial_messages,
            api_key_source: p.api_key_source,
            additional_directories: p.additional_directories,
            mcp: p.mcp,
            remote: RwLock::new(p.remote),
            extensions: p.extensions,
            initial_model: p.model.clone(),
            live: RwLock::new(Live {
                model: p.model,
                permissions: p.permissions,
                thinking_tokens,
            }),
            hooks: RwLock::new(None),
            checkpoints: RwLock::new(None),
            settings_hooks: p.settings_hooks,
            approver: RwLock::new(None),
            cost: Mutex::new(CostTracker::default()),
            spent_before: Mutex::new(0.0),
            bypass: p.bypass,
            output_style: RwLock::new(crate::output_style::DEFAULT_STYLE.to_owned()),
        })
    }

    /// The session id now (`/clear` starts a new one).
    pub fn session_id(&self) -> String {
        self.session_id.get().to_string()
    }

    /// The working directory.
    pub fn cwd(&self) -> &std::path::Path {
        &self.cwd
    }

    /// The home directory `~` means in paths (the session's, not necessarily the process's).
    pub(crate) fn home(&self) -> Option<&std::path::Path> {
        self.home.as_deref()
    }

    /// The client every model request of the session goes through.
    pub(crate) fn client(&self) -> &Arc<dyn Model> {
        &self.client
    }

    /// Whether partial messages (`stream_event` frames) are forwarded.
    pub(crate) fn include_partial_messages(&self) -> bool {
        self.include_partial_messages
    }

    /// The directories added to the project (`--add-dir`, settings).
    pub(crate) fn additional_directories(&self) -> &[PathBuf] {
        &self.additional_directories
    }

    /// The model the session started with (what `set_model(null)` returns to).
    pub fn initial_model(&self) -> &str {
        &self.initial_model
    }

    /// Where the API key came from (`ANTHROPIC_API_KEY`, `none`).
    pub fn api_key_source(&self) -> &str {
        &self.api_key_source
    }

    /// The bounds the session was built with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The name of the output style in effect (the `outputStyle` setting).
    pub fn output_style(&self) -> String {
        read(&self.output_style).clone()
    }

    /// The styles this session could use: the built-in ones and the custom files it can see.
    pub fn available_output_styles(&self) -> Vec<String> {
        let mut names = crate::output_style::available(&self.cwd, self.home.as_deref());
        let current = self.output_style();
        if !names.contains(&current) {
            names.push(current);
        }
        names
    }

    pub(crate) fn set_output_style_name(&self, name: &str) {
        *write(&self.output_style) = name.to_owned();
    }

    /// The session id's shared cell: a front end stamping frames of its own reads the id from
    /// it, so it follows `/clear`.
    pub fn session_cell(&self) -> &crate::session_id::SessionId {
        &self.session_id
    }

    /// The transcript file, when the session keeps one (`/clear` starts a new one).
    pub fn transcript_path(&self) -> Option<PathBuf> {
        read(&self.transcript_path).clone()
    }

    /// The copy of the transcript in object storage (`KEEL_TRANSCRIPT_URL`), when one is kept.
    pub(crate) fn remote(&self) -> Option<Arc<crate::remote::Uploader>> {
        read(&self.remote).clone()
    }

    /// The session is now `id` (after `/clear`): its transcript is `transcript`, its
    /// subagents' go beside it, and its remote copy is `remote`. Returns the old id.
    pub(crate) fn switch_session(
        &self,
        id: &str,
        transcript: Option<PathBuf>,
        remote: Option<Arc<crate::remote::Uploader>>,
    ) -> Arc<str> {
        *write(&self.agents.transcript_dir) = transcript
            .as_ref()
            .map(|t| t.with_extension("").join("subagents"));
        *write(&self.transcript_path) = transcript;
        *write(&self.remote) = remote;
        self.restart_cost();
        self.session_id.switch(id)
    }

    /// The model agents without a model of their own use for their next request.
    pub fn model(&self) -> String {
        read(&self.live).model.clone()
    }

    /// Use `model` from every agent's next request on.
    pub fn set_model(&self, model: String) {
        write(&self.live).model = model;
    }

    /// The thinking budget of every agent's next request (`None`: no thinking).
    pub fn thinking_tokens(&self) -> Option<u32> {
        read(&self.live).thinking_tokens
    }

    /// The thinking budget the session was built with.
    pub fn launch_thinking_tokens(&self) -> Option<u32> {
        self.limits.context.thinking_tokens
    }

    /// Use a thinking budget of `tokens` (`None`: no thinking) from every agent's next request
    /// on. The caller checks the range (`builder::options::ThinkingBudget`); the budget is kept
    /// below the output limit, as at launch. Returns the budget now in force.
    pub fn set_thinking_tokens(&self, tokens: Option<u32>) -> Option<u32> {
        let tokens = tokens.map(|n| n.min(self.limits.max_tokens.saturating_sub(1)));
        write(&self.live).thinking_tokens = tokens;
        tokens
    }

    /// The permission mode in force.
    pub fn permission_mode(&self) -> PermissionMode {
        read(&self.live).permissions.mode
    }

    /// Use `mode` from every agent's next decision on, if the launch allows it (see
    /// [`BypassGate`]); a refused change leaves the mode as it was.
    pub fn set_permission_mode(&self, mode: PermissionMode) -> Result<(), ModeRefused> {
        self.bypass.check(mode)?;
        write(&self.live).permissions.mode = mode;
        Ok(())
    }

    /// The session's bypass gate, fixed at launch.
    pub fn bypass_gate(&self) -> BypassGate {
        self.bypass
    }

    /// Whether the session may switch to `mode` (the same gate as [`Self::set_permission_mode`]).
    pub fn may_enter(&self, mode: PermissionMode) -> Result<(), ModeRefused> {
        self.bypass.check(mode)
    }

    /// Apply updates (session rules, a mode) from every agent's next decision on. A mode the
    /// launch does not allow is not applied; the refusals are returned.
    pub fn apply_permission_updates(&self, updates: &[PermissionUpdate]) -> Vec<ModeRefused> {
        let mut refused = Vec::new();
        let mut live = write(&self.live);
        for u in updates {
            match u {
                PermissionUpdate::AddRules { behavior, rules } => {
                    let list = match behavior {
                        RuleBehavior::Allow => &mut live.permissions.allow,
                        RuleBehavior::Deny => &mut live.permissions.deny,
                        RuleBehavior::Ask => &mut live.permissions.ask,
                    };
                    list.extend(rules.iter().cloned());
                }
                PermissionUpdate::SetMode(m) => match self.bypass.check(*m) {
                    Ok(()) => live.permissions.mode = *m,
                    Err(e) => {
                        tracing::warn!("a permission update was not applied: {e}");
                        refused.push(e);
                    }
                },
            }
        }
        refused
    }

    /// Add deny rules (an SDK host's `disallowedTools`).
    pub fn deny(&self, rules: Vec<Rule>) {
        // Rules only: nothing here can be refused.
        let _ = self.apply_permission_updates(&[PermissionUpdate::AddRules {
            behavior: RuleBehavior::Deny,
            rules,
        }]);
    }

    /// The mode and rules in force now (what a front end lists for the user).
    pub fn permission_rules(&self) -> PermissionConfig {
        self.permissions(false)
    }

    /// The mode and rules for one decision, with `plan_only` (a read-only agent type) on top.
    pub(crate) fn permissions(&self, plan_only: bool) -> PermissionConfig {
        let mut p = read(&self.live).permissions.clone();
        if plan_only {
            p.mode = PermissionMode::Plan;
        }
        p
    }

    /// The hooks every agent runs: the settings files' and the host's.
    pub fn hooks(&self) -> Option<Arc<dyn Hooks>> {
        let host = read(&self.hooks).clone();
        match (&self.settings_hooks, host) {
            (None, h) => h,
            (Some(s), None) => Some(s.clone()),
            (Some(s), Some(h)) => Some(Arc::new(crate::hooks::Chain(vec![s.clone(), h]))),
        }
    }

    /// Set (or clear) the hooks; every agent's next hook point uses them.
    pub fn set_hooks(&self, hooks: Option<Arc<dyn Hooks>>) {
        *write(&self.hooks) = hooks;
    }

    /// The file checkpoints (`None`: not kept).
    pub fn checkpoints(&self) -> Option<Arc<keel_tools::Checkpoints>> {
        read(&self.checkpoints).clone()
    }

    /// Keep file checkpoints in `store` (or stop keeping them): every agent's next file tool
    /// call snapshots what it writes there.
    pub fn set_checkpoints(&self, store: Option<Arc<keel_tools::Checkpoints>>) {
        *write(&self.checkpoints) = store;
    }

    /// The directory a session's file checkpoints are kept in: `$KEEL_HOME/checkpoints/<id>`.
    pub fn checkpoint_dir(&self, env: &crate::Env) -> Option<PathBuf> {
        crate::env::keel_home(env, &self.cwd)
            .map(|h| h.join("checkpoints").join(&*self.session_id.get()))
    }

    /// The session's file checkpoint store, opened again where an earlier run of the session
    /// left it (a resume rewinds to that run's prompts): its saved index is read back only if
    /// every file it names is inside the project or an added directory. `None`: there is
    /// nowhere to keep it; the error: why a saved index was refused (the store starts empty).
    pub fn open_checkpoints(
        &self,
        env: &crate::Env,
    ) -> Option<(
        keel_tools::Checkpoints,
        Option<keel_tools::checkpoint::IndexError>,
    )> {
        let dir = self.checkpoint_dir(env)?;
        // Stores outlive their run (a resume rewinds to earlier prompts); the ones no session
        // has written to for a month go, so they do not pile up.
        if let Some(parent) = dir.parent() {
            keel_tools::checkpoint::prune_stale(parent, &dir, keel_tools::checkpoint::RETENTION);
        }
        let roots: Vec<PathBuf> = std::iter::once(&self.cwd)
            .chain(&self.additional_directories)
            .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
            .collect();
        Some(keel_tools::Checkpoints::open(dir, &roots))
    }

    /// Who is asked about calls the rules leave open (`None`: headless, they are denied).
    pub fn approver(&self) -> Option<Arc<dyn Approver>> {
        read(&self.approver).clone()
    }

    /// Set (or clear) the approver.
    pub fn set_approver(&self, approver: Option<Arc<dyn Approver>>) {
        *write(&self.approver) = approver;
    }

    /// Add agent types given as JSON in the `--agents` shape (what an SDK host sends in
    /// `initialize`); returns their names.
    pub fn register_agents(&self, json: &str) -> Result<Vec<String>, AgentsError> {
        let defs = crate::agent_defs::parse_agents_json(json)?;
        let names = defs.iter().map(|d| d.name.clone()).collect();
        let mut reg = write(&self.agents.registry);
        for d in defs {
            reg.insert(d);
        }
        self.agents.generation.fetch_add(1, Ordering::SeqCst);
        Ok(names)
    }

    /// The agent types the Task tool offers.
    pub fn agent_names(&self) -> Vec<String> {
        read(&self.agents.registry)
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn agent(&self, name: &str) -> Option<AgentDef> {
        read(&self.agents.registry).get(name).cloned()
    }

    /// Take a subagent slot, unless as many subagents run as the limit allows.
    pub(crate) fn subagent_slot(&self) -> Option<SubagentSlot> {
        let max = self.limits.subagents.max_concurrent;
        let running = &self.agents.running;
        running
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| SubagentSlot(running.clone()))
    }

    /// The session's background tasks.
    pub fn tasks(&self) -> &Arc<TaskManager> {
        &self.tasks
    }

    /// Record one reply's usage (every agent's replies count against one budget).
    pub(crate) fn add_usage(&self, model: &str, usage: &keel_protocol::Usage) {
        self.cost_tracker().add(model, usage);
    }

    fn cost_tracker(&self) -> std::sync::MutexGuard<'_, CostTracker> {
        self.cost.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Dollars spent so far by every agent, in this session and in those `/clear` ended in
    /// this process (what the budget bounds).
    pub fn spent_usd(&self) -> f64 {
        let before = *self.spent_before.lock().unwrap_or_else(|p| p.into_inner());
        before + self.cost_tracker().total_usd()
    }

    /// A new session starts (`/clear`): its results report its own cost from zero, while the
    /// budget keeps counting what the old one spent.
    pub(crate) fn restart_cost(&self) {
        let ended = std::mem::take(&mut *self.cost_tracker());
        *self.spent_before.lock().unwrap_or_else(|p| p.into_inner()) += ended.total_usd();
    }

    /// The session's cost so far, as a result reports it.
    pub fn cost(&self) -> CostReport {
        let c = self.cost_tracker();
        CostReport {
            total_usd: c.total_usd(),
            usage: c.usage_json(),
            model_usage: c.model_usage_json(),
            unpriced_models: c.unknown_models().to_vec(),
        }
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;

    #[test]
    fn bypass_needs_the_launch_and_never_passes_the_root_rule() {
        let bypass = PermissionMode::BypassPermissions;
        let closed = BypassGate::default();
        assert_eq!(closed.check(bypass), Err(ModeRefused::NotLaunched));
        assert_eq!(closed.check(PermissionMode::AcceptEdits), Ok(()));
        let open = BypassGate {
            launched_allowed: true,
            root_refused: false,
        };
        assert_eq!(open.check(bypass), Ok(()));
        let root = BypassGate {
            launched_allowed: true,
            root_refused: true,
        };
        assert_eq!(root.check(bypass), Err(ModeRefused::Root));
        assert_eq!(root.check(PermissionMode::Plan), Ok(()));
        assert!(ModeRefused::NotLaunched
            .to_string()
            .contains("--allow-dangerously-skip-permissions"));
    }
}
