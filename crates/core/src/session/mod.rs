//! A session: one agent's conversation, run turn by turn against the shared
//! [`SessionContext`].
//!
//! The main agent and every subagent are a `Session`; they differ only in their
//! [`AgentScope`] (who they are, and the restrictions layered on the context) and their
//! history. Sessions are made by [`SessionBuilder`](crate::SessionBuilder) (the main agent)
//! and by the Task tool (subagents).

mod account;
mod boundary;
mod clear;
mod command;
mod compact;
mod handle;
mod hook_points;

mod turn;

pub use crate::session_id::SessionId;
pub use account::Requested;
pub(crate) use handle::TurnState;
pub use handle::{Failer, InterruptReceipt, SessionHandle};

use std::sync::Arc;

use keel_model::ToolSpec;
use keel_protocol::{ContentBlock, Extra, Role};
use keel_tools::{ProcessRegistry, ReadLedger, Tool};
use serde_json::{json, Value};

use crate::context::SessionContext;
use crate::emit::Emitter;
use crate::history::History;
use crate::prompt::{default_prompt, PromptContext};

/// Who a session is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SessionRole {
    /// The main agent: emits `init` and `result`.
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

/// One agent's place in the session: who it is and what is layered on the shared context.
#[derive(Clone, Debug, Default)]
pub struct AgentScope {
    /// Main agent or subagent.
    pub role: SessionRole,
    /// Held to plan mode whatever the session's mode (read-only agent types).
    pub plan_only: bool,
    /// Its own model (a subagent's type or Task call may name one); `None`: the session's.
    pub model: Option<String>,
    /// Model calls per turn; `None`: unbounded.
    pub max_turns: Option<u32>,
    /// Replaces keel's system prompt when set.
    pub system_prompt: Option<String>,
    /// Appended to the system prompt.
    pub append_system_prompt: Option<String>,
    /// How deep under the main agent (0 for the main agent).
    pub depth: u32,
}

/// One conversation with the model.
pub struct Session {
    pub(crate) ctx: Arc<SessionContext>,
    pub(crate) scope: AgentScope,
    /// The tools offered: the agent's own, then the MCP servers' (see `sync_mcp_tools`).
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    /// The agent's own tools (no MCP server's).
    base_tools: Vec<Arc<dyn Tool>>,
    /// The generation of the MCP tools `tools` holds.
    mcp_generation: u64,
    /// The MCP tools this agent may have (`None`: all; a subagent type lists its tools).
    mcp_filter: Option<Vec<String>>,
    pub(crate) history: History,
    pub(crate) emitter: Emitter,
    pub(crate) turn_state: Arc<TurnState>,
    pub(crate) processes: Arc<ProcessRegistry>,
    /// The files this agent has read (each agent, subagents too, has its own).
    pub(crate) reads: Arc<ReadLedger>,
    pub(crate) results_emitted: u32,
    /// SessionStart hooks have run (they run before the main agent's first prompt).
    pub(crate) session_start_done: bool,
    /// What SessionStart hooks run by `/clear` added, for the next prompt.
    pub(crate) pending_start_notes: Vec<ContentBlock>,
    /// The built-in command the running turn runs instead of calling the model (`clear`).
    pub(crate) local_command: Option<&'static str>,
    pub(crate) system: Vec<Value>,
    /// Warnings to emit right after the next `system/init` (what resuming found and repaired).
    pub(crate) warnings: Vec<(String, Extra)>,
    /// The tools as last offered, the agent-type generation they were made for, and their
    /// size in bytes of JSON.
    specs: Option<(u64, Arc<Vec<ToolSpec>>, usize)>,
    /// The deny rules (as written) the cached specs were filtered with: a host may add some
    /// between turns (`initialize.disallowedTools`).
    specs_deny: Vec<String>,
    /// The history's length right after the last compaction.
    pub(crate) compacted_len: Option<usize>,
    /// The host's `origin` of the next turn's prompt, echoed on that turn's result.
    pub(crate) origin: Option<Value>,
    /// The uuid the host gave the next turn's prompt: its transcript record gets it, so a
    /// truncating fork (`--resume-drops-turn`) can name the turn the way the host knows it.
    pub(crate) prompt_uuid: Option<String>,
    /// Structured output (`--json-schema`): the schema and the turn's calls.
    pub(crate) structured: Option<crate::structured::Structured>,
    /// How the model is asked to answer (the `outputStyle` setting).
    pub(crate) output_style: crate::output_style::OutputStyle,
    /// What the run asked for, for the capability account.
    pub(crate) requested: Requested,
    /// The custom command the running turn runs, if any.
    pub(crate) command: Option<command::CommandTurn>,
}

impl Session {
    /// A session of `scope` on `ctx`, starting from `history`.
    pub(crate) fn new(
        ctx: Arc<SessionContext>,
        scope: AgentScope,
        tools: Vec<Arc<dyn Tool>>,
        emitter: Emitter,
        history: History,
    ) -> Self {
        let mut s = Self {
            ctx,
            scope,
            tools: tools.clone(),
            base_tools: tools,
            mcp_generation: 0,
            mcp_filter: None,
            history,
            emitter,
            turn_state: Arc::new(TurnState::new()),
            processes: Arc::new(ProcessRegistry::new()),
            reads: Arc::new(ReadLedger::new()),
            results_emitted: 0,
            session_start_done: false,
            pending_start_notes: Vec::new(),
            local_command: None,
            system: Vec::new(),
            warnings: Vec::new(),
            specs: None,
            specs_deny: Vec::new(),
            compacted_len: None,
            origin: None,
            prompt_uuid: None,
            structured: None,
            output_style: Default::default(),
            requested: Requested::default(),
            command: None,
        };
        s.sync_mcp_tools();
        s.system = s.build_system();
        s
    }

    /// Offer only the MCP tools `listed` names (a subagent type's tool list; `None`: all).
    pub(crate) fn limit_mcp_tools(&mut self, listed: Option<Vec<String>>) {
        self.mcp_filter = listed;
        self.mcp_generation = 0;
        self.sync_mcp_tools();
    }

    /// Take up the MCP servers' current tools when they changed (a server connected,
    /// restarted, changed its list, was disabled): before each request, so the model is
    /// offered exactly what can be called.
    pub(crate) fn sync_mcp_tools(&mut self) {
        let hub = self.ctx.mcp().clone();
        if hub.generation() == self.mcp_generation {
            return;
        }
        let (generation, mcp) = hub.tools();
        let mut tools = self.base_tools.clone();
        tools.extend(mcp.into_iter().filter(|t| {
            self.mcp_filter
                .as_ref()
                .is_none_or(|l| l.iter().any(|n| mcp_tool_listed(t.name(), n)))
        }));
        let changed = self.mcp_generation != 0;
        self.tools = tools;
        self.mcp_generation = generation;
        self.specs = None;
        if changed && self.scope.system_prompt.is_none() {
            // keel's own prompt names the tools.
            self.system = self.build_system();
        }
    }

    /// The live state this session shares with its subagents and its front end.
    pub fn context(&self) -> &Arc<SessionContext> {
        &self.ctx
    }

    /// A handle for steering the session from elsewhere (a signal handler, a control request,
    /// an interactive UI).
    pub fn handle(&self) -> SessionHandle {
        SessionHandle::new(self.turn_state.clone(), self.ctx.clone())
    }

    /// The conversation so far.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Who this session is.
    pub fn scope(&self) -> &AgentScope {
        &self.scope
    }

    /// The model this agent's next request uses.
    pub fn model(&self) -> String {
        self.scope.model.clone().unwrap_or_else(|| self.ctx.model())
    }

    /// Emit a `system/warning` right after the next `system/init` (a resumed transcript's
    /// damaged lines and repairs, say).
    pub fn queue_warning(&mut self, message: impl Into<String>, fields: Extra) {
        self.warnings.push((message.into(), fields));
    }

    /// The system prompt and what is appended to it (`None`: keel's default / nothing).
    pub fn system_prompt(&self) -> (Option<&str>, Option<&str>) {
        (
            self.scope.system_prompt.as_deref(),
            self.scope.append_system_prompt.as_deref(),
        )
    }

    /// Replace the system prompt (`None`: keel's default) and what is appended to it, for
    /// later requests (an SDK host sends these in `initialize`).
    pub fn set_system_prompt(&mut self, prompt: Option<String>, append: Option<String>) {
        self.scope.system_prompt = prompt;
        self.scope.append_system_prompt = append;
        self.system = self.build_system();
    }

    /// Ask every turn of this (main) agent for a structured answer: the `StructuredOutput`
    /// tool is offered, and a turn succeeds only with a call that matches the schema.
    pub fn enable_structured_output(&mut self, s: crate::structured::Structured) {
        let tool = s.tool();
        self.base_tools.push(tool.clone());
        self.tools.push(tool);
        self.specs = None;
        self.structured = Some(s);
    }

    /// Use `style` for later requests: its text goes at the end of the system prompt, and
    /// `system/init` names it.
    pub fn set_output_style(&mut self, style: crate::output_style::OutputStyle) {
        if self.scope.role.is_main() {
            self.ctx.set_output_style_name(&style.name);
        }
        self.output_style = style;
        self.system = self.build_system();
    }

    /// The `origin` of the next turn's prompt (a stream-json user line's), echoed on that
    /// turn's `result`.
    pub fn set_turn_origin(&mut self, origin: Option<Value>) {
        self.origin = origin;
    }

    /// The uuid a host gave the next turn's prompt (a stream-json user line's `uuid`): the
    /// prompt is recorded under it. Anything that is not a UUID is ignored (keel picks one).
    pub fn set_turn_prompt_uuid(&mut self, uuid: Option<&str>) {
        self.prompt_uuid = uuid
            .and_then(|u| uuid::Uuid::parse_str(u.trim()).ok())
            .map(|u| u.hyphenated().to_string());
    }

    /// Whether subagents' text reaches the front end (`initialize.forwardSubagentText`); off
    /// by default. Their tool calls and results always do; the transcript keeps everything.
    pub fn set_forward_subagent_text(&self, on: bool) {
        self.emitter.set_forward_subagent_text(on);
    }

    /// The names of the tools offered to the model: all but those a deny rule removes wholly.
    pub fn offered_tool_names(&self) -> Vec<String> {
        let rules = self.ctx.permission_rules();
        self.tools
            .iter()
            .map(|t| t.name().to_owned())
            .filter(|n| !rules.withholds(n))
            .collect()
    }

    /// The tools as offered to the model (a tool a deny rule removes wholly is left out).
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        let rules = self.ctx.permission_rules();
        self.tools
            .iter()
            .filter(|t| !rules.withholds(t.name()))
            .map(|t| ToolSpec {
                name: t.name().to_owned(),
                description: t.description().to_owned(),
                input_schema: t.input_schema(),
                server: None,
            })
            .collect()
    }

    /// The tools for the next request: made once, and again only when agent types were added
    /// (the Task tool's schema lists them).
    pub(crate) fn request_tools(&mut self) -> Arc<Vec<ToolSpec>> {
        let generation = self
            .ctx
            .agents
            .generation
            .load(std::sync::atomic::Ordering::SeqCst);
        let deny: Vec<String> = self
            .ctx
            .permission_rules()
            .deny
            .iter()
            .map(|r| r.text())
            .collect();
        if deny != self.specs_deny {
            self.specs = None;
            self.specs_deny = deny;
        }
        match &self.specs {
            Some((g, specs, _)) if *g == generation => specs.clone(),
            _ => {
                let specs = Arc::new(self.tool_specs());
                let bytes = serde_json::to_string(&*specs).map_or(0, |j| j.len());
                self.specs = Some((generation, specs.clone(), bytes));
                specs
            }
        }
    }

    /// Bytes of JSON a request carries before its messages: the tools and the system prompt.
    pub(crate) fn prefix_bytes(&mut self) -> usize {
        self.request_tools();
        let tools = self.specs.as_ref().map_or(0, |(_, _, b)| *b);
        let system: usize = self.system.iter().map(|s| s.to_string().len()).sum();
        tools + system
    }

    fn build_system(&self) -> Vec<Value> {
        let mut text = match &self.scope.system_prompt {
            Some(s) => s.clone(),
            None => {
                let date = chrono::Local::now().format("%Y-%m-%d").to_string();
                let specs = self.tool_specs();
                default_prompt(&PromptContext {
                    cwd: self.ctx.cwd(),
                    tools: &specs,
                    date: &date,
                    home: self.ctx.home(),
                })
            }
        };
        let style = self.output_style.prompt.as_ref();
        for a in self.scope.append_system_prompt.iter().chain(style) {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(a);
        }
        if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![json!({ "type": "text", "text": text })]
        }
    }

    /// The text of the last assistant message in the history (a subagent's partial report).
    pub fn last_assistant_text(&self) -> String {
        self.history
            .last_of(Role::Assistant)
            .map(|m| text_of(m.content.blocks()))
            .unwrap_or_default()
    }

    /// The transcript's path as hook inputs give it (empty when no transcript is kept).
    pub(crate) fn transcript_path(&self) -> String {
        self.ctx
            .transcript_path()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// Stop everything this session started: the running turn, the background tasks (the main
    /// agent's only: they belong to the session), and every process group still alive.
    /// Returns how many process groups were stopped.
    pub async fn shutdown(&self) -> usize {
        self.shutdown_until(std::future::pending::<()>()).await
    }

    /// [`Self::shutdown`], cut short by `stop` (a signal): the SessionEnd hooks still running
    /// when it finishes are dropped, which kills their process groups, and shutdown goes on.
    pub async fn shutdown_until(&self, stop: impl std::future::Future<Output = ()>) -> usize {
        self.turn_state
            .cancel_running(keel_protocol::CancelReason::Shutdown);
        if self.scope.role.is_main() {
            tokio::select! {
                () = self.session_end_hooks("other") => {}
                () = stop => {}
            }
        }
        if self.scope.role.is_main() {
            for (id, status) in self.ctx.tasks().shutdown().await {
                tracing::info!(
                    "background task {id} stopped at the end of the session: {}",
                    status.describe()
                );
            }
        }
        // The last records (the result) go to the remote copy too, within the grace a
        // supervisor gives a stopping process.
        if let (Some(remote), true) = (self.ctx.remote(), self.scope.role.is_main()) {
            if let Err(e) = remote
                .flush(crate::remote::DEFAULT_FINAL_UPLOAD_TIMEOUT)
                .await
            {
                tracing::warn!(
                    "the transcript's last records were not copied to object storage: {e}"
                );
            }
        }
        let procs = self.processes.clone();
        let grace = self.ctx.limits().tools.kill_grace;
        tokio::task::spawn_blocking(move || procs.kill_all_blocking(grace))
            .await
            .unwrap_or(0)
    }
}

pub(crate) use keel_protocol::content::text_of;

/// Whether a tool list's entry `listed` names the MCP tool `name`: the tool itself, or its
/// server (`mcp__server`, `mcp__server__*`).
fn mcp_tool_listed(name: &str, listed: &str) -> bool {
    let server = listed.strip_suffix("__*").unwrap_or(listed);
    name == listed
        || (server.starts_with("mcp__")
            && server.matches("__").count() == 1
            && name
                .strip_prefix(server)
                .is_some_and(|r| r.starts_with("__")))
}
