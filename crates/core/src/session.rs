//! A session: the conversation, its limits and cost, and the turn loop.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_model::{Model, ModelRequest, ToolSpec};
use keel_protocol::content::AssistantMessage;
use keel_protocol::frames::{AssistantFrame, InitFrame, ResultFrame, UserMessage};
use keel_protocol::{
    CancelReason, ContentBlock, Extra, Frame, MessageContent, PermissionDenial, Role, SystemFrame,
    ToolUseBlock, UserFrame,
};
use keel_tools::{CancelToken, ProcessRegistry, Tool};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::config::SessionConfig;
use crate::cost::CostTracker;
use crate::dispatch::{rejected_text, run_calls, DispatchCx};
use crate::emit::{new_uuid, now_rfc3339, EmitError, Emitter};
use crate::end::{Phase, TurnEnd};
use crate::history::{History, PendingResults};
use crate::prompt::{default_prompt, PromptContext};
use crate::reply::{call_with_retry, CallCx, CallFailure};

mod hook_points;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallState {
    Queued,
    Running,
    Done,
}

#[derive(Default)]
struct SharedInner {
    turn: Option<CancelToken>,
    calls: Vec<(String, String, CallState)>,
    killed: usize,
}

/// State shared between a running turn and [`SessionHandle`]s.
pub(crate) struct Shared {
    inner: Mutex<SharedInner>,
    /// Counts finished turns; `interrupt()` waits on it.
    turns_done: watch::Sender<u64>,
    /// Counts started turns; `wait_until_running()` waits on it.
    turns_started: watch::Sender<u64>,
    /// Model, mode and rules a host changed while the session runs.
    pub(crate) live: Mutex<crate::live::Live>,
    /// The session's background tasks, for stop requests and interrupt receipts.
    tasks: std::sync::OnceLock<Arc<crate::tasks::TaskManager>>,
    /// The Task tool's shared state, so a host can add agent types.
    agents: std::sync::OnceLock<Arc<crate::agents::SubagentRuntime>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, SharedInner> {
        // A poisoned lock only means a panic elsewhere; the data is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(crate) fn set_queued(&self, calls: &[ToolUseBlock]) {
        let mut g = self.lock();
        g.calls = calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone(), CallState::Queued))
            .collect();
    }
    fn set_state(&self, id: &str, state: CallState) {
        if let Some(c) = self.lock().calls.iter_mut().find(|c| c.0 == id) {
            c.2 = state;
        }
    }
    pub(crate) fn set_running(&self, id: &str) {
        self.set_state(id, CallState::Running);
    }
    pub(crate) fn set_done(&self, id: &str) {
        self.set_state(id, CallState::Done);
    }
    pub(crate) fn add_killed(&self, n: usize) {
        self.lock().killed += n;
    }
    pub(crate) fn live(&self) -> std::sync::MutexGuard<'_, crate::live::Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What an interrupt did, truthfully.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct InterruptReceipt {
    /// Whether a turn was running.
    pub was_running: bool,
    /// Tool calls that were running and were stopped (ids).
    pub stopped: Vec<String>,
    /// Tool calls that were queued and never started (ids).
    pub never_started: Vec<String>,
    /// Processes that were signalled while stopping the calls.
    pub processes_killed: usize,
    /// Whether the turn had wound down (result emitted) when the receipt was made.
    pub turn_ended: bool,
    /// Background tasks still running: an interrupt does not stop them (`stop_task` does).
    pub background_running: Vec<String>,
}

/// A cheap handle to interrupt a session from elsewhere (a signal handler, a control request).
#[derive(Clone)]
pub struct SessionHandle {
    shared: Arc<Shared>,
}

impl SessionHandle {
    /// Stop the running turn (if any) with `reason`, wait (bounded) for it to wind down, and
    /// report what was stopped.
    pub async fn interrupt_with(&self, reason: CancelReason) -> InterruptReceipt {
        let mut done = self.shared.turns_done.subscribe();
        let before = *done.borrow_and_update();
        let mut receipt = InterruptReceipt::default();
        {
            let g = self.shared.lock();
            let Some(token) = g.turn.clone() else {
                drop(g);
                receipt.background_running = self.background_running();
                return receipt;
            };
            receipt.was_running = true;
            for (id, _, state) in &g.calls {
                match state {
                    CallState::Running => receipt.stopped.push(id.clone()),
                    CallState::Queued => receipt.never_started.push(id.clone()),
                    CallState::Done => {}
                }
            }
            token.cancel(reason);
        }
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while *done.borrow_and_update() == before {
                if done.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        receipt.turn_ended = waited.is_ok();
        receipt.background_running = self.background_running();
        receipt.processes_killed = self.shared.lock().killed;
        receipt
    }

    /// Add agent types (the `--agents` JSON shape) for the Task tool; returns their names.
    pub fn register_agents(&self, json: &str) -> Result<Vec<String>, String> {
        match self.shared.agents.get() {
            Some(rt) => rt.register_json(json),
            None => Err("this session offers no Task tool, so agent types cannot be added".into()),
        }
    }

    /// The agent types the Task tool offers.
    pub fn agent_names(&self) -> Vec<String> {
        self.shared
            .agents
            .get()
            .map(|r| r.agent_names())
            .unwrap_or_default()
    }

    /// Ids of the background tasks still running.
    pub fn background_running(&self) -> Vec<String> {
        let Some(tasks) = self.shared.tasks.get() else {
            return Vec::new();
        };
        tasks
            .statuses()
            .into_iter()
            .filter(|(_, s)| *s == crate::tasks::TaskStatus::Running)
            .map(|(id, _)| id)
            .collect()
    }

    /// Stop one background task on the user's behalf; its final status, or why it could not be.
    pub async fn stop_task(&self, id: &str) -> Result<crate::tasks::TaskStatus, String> {
        match self.shared.tasks.get() {
            Some(t) => t.kill(id, "user").await,
            None => Err(format!(
                "There is no background task {id:?}: this session runs none."
            )),
        }
    }

    /// Stop the running turn on the user's behalf.
    pub async fn interrupt(&self) -> InterruptReceipt {
        self.interrupt_with(CancelReason::UserInterrupted).await
    }

    /// Ids of the tool calls running right now.
    pub fn running_calls(&self) -> Vec<String> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.2 == CallState::Running)
            .map(|c| c.0.clone())
            .collect()
    }

    /// Whether a turn is running.
    pub fn is_running(&self) -> bool {
        self.shared.lock().turn.is_some()
    }

    /// Wait (at most `timeout`) until a turn is running; whether one is.
    pub async fn wait_until_running(&self, timeout: Duration) -> bool {
        let mut started = self.shared.turns_started.subscribe();
        let _ = tokio::time::timeout(timeout, async {
            while !self.is_running() {
                if started.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        self.is_running()
    }

    /// Use `model` from the next model request on (also in the running turn).
    pub fn set_model(&self, model: String) {
        self.shared.live().set_model(model);
    }

    /// Use `mode` from the next permission decision on (also in the running turn).
    pub fn set_permission_mode(&self, mode: crate::permissions::PermissionMode) {
        self.shared.live().set_mode(mode);
    }

    /// Apply permission updates (session rules, a mode) from the next decision on.
    pub fn apply_permission_updates(&self, updates: &[crate::approval::PermissionUpdate]) {
        self.shared.live().apply(updates);
    }

    /// The model the next request will use.
    pub fn model(&self) -> String {
        self.shared.live().model().to_owned()
    }

    /// The permission mode in force.
    pub fn permission_mode(&self) -> crate::permissions::PermissionMode {
        self.shared.live().mode()
    }
}

/// Counters of one turn.
#[derive(Default)]
struct TurnStats {
    num_turns: u32,
    api_time: Duration,
    denials: Vec<PermissionDenial>,
    stop_reason: Option<String>,
}

/// One conversation with the model.
pub struct Session {
    cfg: SessionConfig,
    model: Arc<dyn Model>,
    tools: Vec<Arc<dyn Tool>>,
    history: History,
    cost: Arc<Mutex<CostTracker>>,
    emitter: Emitter,
    shared: Arc<Shared>,
    processes: Arc<ProcessRegistry>,
    results_emitted: u32,
    system: Vec<Value>,
    /// Warnings to emit right after the next `system/init` (what resuming found and repaired).
    warnings: Vec<(String, Extra)>,
}

impl Session {
    /// A session with an empty history.
    pub fn new(
        cfg: SessionConfig,
        model: Arc<dyn Model>,
        tools: Vec<Arc<dyn Tool>>,
        emitter: Emitter,
    ) -> Self {
        let (turns_done, _) = watch::channel(0);
        let (turns_started, _) = watch::channel(0);
        let live = Mutex::new(crate::live::Live::new(&cfg));
        let mut s = Self {
            cfg,
            model,
            tools,
            history: History::new(),
            cost: Arc::new(Mutex::new(CostTracker::default())),
            emitter,
            shared: Arc::new(Shared {
                inner: Mutex::new(SharedInner::default()),
                turns_done,
                turns_started,
                live,
                tasks: std::sync::OnceLock::new(),
                agents: std::sync::OnceLock::new(),
            }),
            processes: Arc::new(ProcessRegistry::new()),
            results_emitted: 0,
            system: Vec::new(),
            warnings: Vec::new(),
        };
        s.system = s.build_system();
        s
    }

    /// Share a cost tracker (a subagent shares its parent's, so one budget binds them all).
    pub fn with_cost(mut self, cost: Arc<Mutex<CostTracker>>) -> Self {
        self.cost = cost;
        self
    }

    /// The session's background tasks: finished ones are announced to the model at its next
    /// call, and all are stopped at shutdown.
    pub fn with_tasks(self, tasks: Arc<crate::tasks::TaskManager>) -> Self {
        // Set once, when the session is built; a second call changes nothing.
        let _ = self.shared.tasks.set(tasks);
        self
    }

    /// The Task tool's shared state: `system/init` lists its agent types, and a host may add
    /// some through [`SessionHandle::register_agents`].
    pub fn with_agents(self, runtime: Arc<crate::agents::SubagentRuntime>) -> Self {
        let _ = self.shared.agents.set(runtime);
        self
    }

    fn costs(&self) -> std::sync::MutexGuard<'_, CostTracker> {
        self.cost.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Persist user content (a prompt, a hook's note) without showing it to the front end.
    pub(crate) fn record_user(&self, blocks: &[ContentBlock]) -> Result<(), EmitError> {
        self.emitter.record(&Frame::User(UserFrame {
            message: UserMessage {
                role: Role::User,
                content: MessageContent::Blocks(blocks.to_vec()),
                extra: Extra::new(),
            },
            parent_tool_use_id: self.emitter.parent_tool_use_id().map(str::to_owned),
            session_id: self.emitter.session_id().to_owned(),
            uuid: Some(new_uuid()),
            timestamp: Some(now_rfc3339()),
            tool_use_result: None,
            tool_result_meta: None,
            extra: Extra::new(),
        }))
    }

    /// The transcript's path as hook inputs give it (empty when no transcript is kept).
    pub(crate) fn transcript_path(&self) -> String {
        self.cfg
            .transcript_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// Tell the model about background tasks that ended since its last call.
    fn announce_finished_tasks(&mut self) {
        let Some(tasks) = self.shared.tasks.get() else {
            return;
        };
        let notes = tasks.take_notifications();
        if notes.is_empty() {
            return;
        }
        let blocks = notes.into_iter().map(ContentBlock::text).collect();
        if let Err(e) = self.history.push_user(blocks) {
            tracing::error!("could not tell the model about finished tasks: {e}");
        }
    }

    /// The text of the last assistant message in the history (a subagent's partial report).
    pub fn last_assistant_text(&self) -> String {
        self.history
            .messages()
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| {
                m.content
                    .blocks()
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// Start from an existing (already repaired) history, e.g. a resumed transcript.
    pub fn with_history(mut self, history: History) -> Self {
        self.history = history;
        self
    }

    /// Emit a `system/warning` frame with `message` and `fields` right after the next
    /// `system/init` (a resumed transcript's damaged lines and repairs, say).
    pub fn queue_warning(&mut self, message: impl Into<String>, fields: Extra) {
        self.warnings.push((message.into(), fields));
    }

    /// A handle for interrupting from elsewhere.
    pub fn handle(&self) -> SessionHandle {
        SessionHandle {
            shared: self.shared.clone(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// The conversation so far.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The emitter frames go through.
    pub fn emitter(&self) -> &Emitter {
        &self.emitter
    }

    /// Replace the system prompt (`None`: keel's default) and what is appended to it, for
    /// later requests (an SDK host sends these in `initialize`).
    pub fn set_system_prompt(&mut self, prompt: Option<String>, append: Option<String>) {
        self.cfg.system_prompt = prompt;
        self.cfg.append_system_prompt = append;
        self.system = self.build_system();
    }

    /// Take the changes a host made through a [`SessionHandle`] into the configuration.
    fn sync_live(&mut self) {
        self.shared.live().take_into(&mut self.cfg);
    }

    /// The tools as offered to the model.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_owned(),
                description: t.description().to_owned(),
                input_schema: t.input_schema(),
            })
            .collect()
    }

    fn build_system(&self) -> Vec<Value> {
        let mut text = match &self.cfg.system_prompt {
            Some(s) => s.clone(),
            None => {
                let date = chrono::Local::now().format("%Y-%m-%d").to_string();
                let specs = self.tool_specs();
                default_prompt(&PromptContext {
                    cwd: &self.cfg.cwd,
                    tools: &specs,
                    date: &date,
                    home: self.cfg.home.as_deref(),
                })
            }
        };
        if let Some(a) = &self.cfg.append_system_prompt {
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

    /// Stop everything this session started (end of session).
    pub async fn shutdown(&self) -> usize {
        if let Some(t) = self.shared.lock().turn.clone() {
            t.cancel(CancelReason::Shutdown);
        }
        if let Some(tasks) = self.shared.tasks.get() {
            for (id, status) in tasks.shutdown().await {
                tracing::info!(
                    "background task {id} stopped at the end of the session: {}",
                    status.describe()
                );
            }
        }
        let procs = self.processes.clone();
        let grace = self.cfg.tool_limits.kill_grace;
        tokio::task::spawn_blocking(move || procs.kill_all_blocking(grace))
            .await
            .unwrap_or(0)
    }

    /// Run one turn: `prompt` in, frames out, exactly one `result` frame at the end.
    pub async fn run_turn(&mut self, prompt: Vec<ContentBlock>) -> TurnEnd {
        self.run_turn_under(prompt, None).await
    }

    /// Run one turn whose cancel token is a child of `parent` (a foreground subagent's turn is
    /// a child of the parent's tool call). A subagent session emits no `init` and no `result`:
    /// its parent reports how it ended.
    pub async fn run_turn_under(
        &mut self,
        prompt: Vec<ContentBlock>,
        parent: Option<CancelToken>,
    ) -> TurnEnd {
        let started = Instant::now();
        let turn = parent.map(|p| p.child()).unwrap_or_default();
        {
            let mut g = self.shared.lock();
            g.turn = Some(turn.clone());
            g.calls.clear();
            g.killed = 0;
        }
        self.shared.turns_started.send_modify(|n| *n += 1);
        self.sync_live();
        let mut stats = TurnStats::default();
        let mut end = match self.turn_inner(prompt, &turn, &mut stats).await {
            Ok(end) => end,
            Err(e) => TurnEnd::Internal {
                message: e.to_string(),
            },
        };
        debug_assert!(
            self.history.open_calls().is_empty(),
            "a turn ended with open tool calls"
        );
        // The transcript is made durable before the result says how the turn went; when it
        // cannot be, that is how the turn went.
        if let Err(e) = self.emitter.sync() {
            tracing::error!("could not make the transcript durable: {e}");
            if !matches!(end, TurnEnd::Internal { .. }) {
                end = TurnEnd::Internal {
                    message: e.to_string(),
                };
            }
        }
        let result = self.result_frame(&end, &stats, started.elapsed());
        if self.cfg.role.is_main() {
            if let Err(e) = self.emitter.emit_final(Frame::Result(result)).await {
                tracing::error!("could not emit the result: {e}");
            }
        }
        if let Err(e) = self.emitter.sync() {
            tracing::error!("could not make the transcript durable: {e}");
        }
        self.results_emitted += 1;
        self.shared.lock().turn = None;
        self.shared.turns_done.send_modify(|n| *n += 1);
        end
    }

    async fn emit_init(&self) -> Result<(), EmitError> {
        let mut extra = Extra::new();
        extra.insert("keel_version".into(), json!(crate::KEEL_VERSION));
        let dirs: Vec<String> = self
            .cfg
            .additional_directories
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        extra.insert("additional_directories".into(), json!(dirs));
        extra.insert("capabilities".into(), json!(["interrupt_receipt_v1"]));
        let frame = InitFrame {
            cwd: self.cfg.cwd.display().to_string(),
            session_id: self.emitter.session_id().to_owned(),
            tools: self.tools.iter().map(|t| t.name().to_owned()).collect(),
            mcp_servers: Vec::new(),
            model: self.cfg.model.clone(),
            permission_mode: self.cfg.permissions.mode.as_str().to_owned(),
            slash_commands: Vec::new(),
            api_key_source: self.cfg.api_key_source.clone(),
            claude_code_version: crate::PROTOCOL_VERSION.to_owned(),
            output_style: "default".to_owned(),
            agents: self.handle().agent_names(),
            skills: Vec::new(),
            plugins: Vec::new(),
            uuid: new_uuid(),
            extra,
        };
        self.emitter
            // Sent even when it cannot be persisted, like the result: a run whose transcript
            // cannot be written still starts and ends visibly, with an error result.
            .emit_final(Frame::System(SystemFrame::Init(frame)))
            .await
    }

    async fn turn_inner(
        &mut self,
        mut prompt: Vec<ContentBlock>,
        turn: &CancelToken,
        stats: &mut TurnStats,
    ) -> Result<TurnEnd, EmitError> {
        if self.cfg.role.is_main() {
            self.emit_init().await?;
        }
        for (message, extra) in std::mem::take(&mut self.warnings) {
            let warning = keel_protocol::frames::WarningFrame {
                message,
                session_id: self.emitter.session_id().to_owned(),
                uuid: new_uuid(),
                extra,
            };
            self.emitter
                .emit(Frame::System(SystemFrame::Warning(warning)))
                .await?;
        }
        if let Some(end) = self.prompt_hooks(&mut prompt, turn).await {
            return Ok(end);
        }
        let mut stop_continuations = 0u32;
        // The prompt is persisted (for resume) but not echoed to the front end.
        self.record_user(&prompt)?;
        if let Err(e) = self.history.push_user(prompt) {
            return Ok(TurnEnd::Internal {
                message: format!("the conversation could not take the prompt: {e}"),
            });
        }
        loop {
            stats.num_turns += 1;
            if let Some(max) = self.cfg.max_turns {
                if stats.num_turns > max {
                    return Ok(TurnEnd::MaxTurns { limit: max });
                }
            }
            if turn.is_cancelled() {
                return Ok(TurnEnd::Interrupted {
                    phase: Phase::Streaming,
                    reason: turn.reason().unwrap_or(CancelReason::UserInterrupted),
                });
            }
            if let Some(limit) = self.cfg.max_budget_usd {
                // A subagent (or an earlier turn) may already have spent the shared budget:
                // no request is made past it.
                let spent = self.costs().total_usd();
                if spent >= limit {
                    return Ok(TurnEnd::Budget {
                        limit_usd: limit,
                        spent_usd: spent,
                    });
                }
            }
            self.sync_live();
            self.announce_finished_tasks();
            let mut req = ModelRequest {
                model: self.cfg.model.clone(),
                max_tokens: self.cfg.max_tokens,
                system: self.system.clone(),
                messages: self.history.messages().to_vec(),
                tools: self.tool_specs(),
                stream: true,
                metadata: None,
            };
            let mut cx = CallCx {
                model: self.model.as_ref(),
                emitter: &self.emitter,
                policy: &self.cfg.retry,
                include_partial: self.cfg.include_partial_messages,
                cancel: turn,
                fallback_model: self.cfg.fallback_model.as_deref(),
                api_time: &mut stats.api_time,
            };
            let reply = match call_with_retry(&mut cx, &mut req).await {
                Ok(r) => r,
                Err(CallFailure::Emit(e)) => return Err(e),
                Err(CallFailure::Api {
                    error,
                    attempts,
                    elapsed,
                    gave_up,
                }) => {
                    return Ok(TurnEnd::ApiFailed {
                        error,
                        attempts,
                        elapsed,
                        gave_up,
                    });
                }
                Err(CallFailure::Cancelled {
                    partial,
                    request_id,
                }) => {
                    if let Some(m) = partial {
                        self.costs().add(&m.model, &m.usage);
                        if let Some(pending) = self.accept_reply(m, request_id).await? {
                            let reason = turn.reason().unwrap_or(CancelReason::UserInterrupted);
                            self.close_unrun(
                                pending,
                                |c| rejected_text(&c.name, reason),
                                "rejected",
                            )
                            .await?;
                        }
                    }
                    return Ok(TurnEnd::Interrupted {
                        phase: Phase::Streaming,
                        reason: turn.reason().unwrap_or(CancelReason::UserInterrupted),
                    });
                }
            };
            if req.model != self.cfg.model {
                // The fallback model took over; keep using it for the rest of the session.
                self.cfg.model = req.model.clone();
                self.shared.live().note_model(&req.model);
            }
            self.costs().add(&reply.message.model, &reply.message.usage);
            stats.stop_reason = reply.message.stop_reason.clone();
            let final_text = text_of(&reply.message.content);
            let pending = self.accept_reply(reply.message, reply.request_id).await?;
            if let Some(limit) = self.cfg.max_budget_usd {
                let spent = self.costs().total_usd();
                if spent >= limit {
                    if let Some(pending) = pending {
                        self.close_unrun(
                            pending,
                            |c| format!("This {} call was not run: the session reached its cost budget (${limit}) with the reply that asked for it.", c.name),
                            "budget",
                        )
                        .await?;
                    }
                    return Ok(TurnEnd::Budget {
                        limit_usd: limit,
                        spent_usd: spent,
                    });
                }
            }
            let Some(mut pending) = pending else {
                if self
                    .stop_hooks(&final_text, &mut stop_continuations, turn)
                    .await?
                {
                    continue;
                }
                return Ok(TurnEnd::Completed { text: final_text });
            };
            let dcx = DispatchCx {
                tools: &self.tools,
                permissions: &self.cfg.permissions,
                emitter: &self.emitter,
                turn,
                cwd: &self.cfg.cwd,
                limits: &self.cfg.tool_limits,
                processes: &self.processes,
                shared: &self.shared,
                hooks: self.cfg.hooks.as_deref(),
                approver: self.cfg.approver.as_deref(),
                transcript_path: self.transcript_path(),
            };
            let dispatched = run_calls(&dcx, &mut pending).await;
            // Close the obligation before anything else, even if emitting failed.
            self.history.close(pending, |c| {
                rejected_text(&c.name, turn.reason().unwrap_or(CancelReason::Shutdown))
            });
            let dispatched = dispatched?;
            stats.denials.extend(dispatched.denials);
            self.emitter.sync()?;
            if let Some(reason) = dispatched.cancelled {
                return Ok(TurnEnd::Interrupted {
                    phase: Phase::Tools,
                    reason,
                });
            }
            if let Some((event, reason)) = dispatched.hook_stop {
                return Ok(TurnEnd::HookStopped {
                    event: event.as_str().to_owned(),
                    reason,
                });
            }
        }
    }

    /// Emit one `assistant` frame per content block and append the reply to the history.
    async fn accept_reply(
        &mut self,
        message: AssistantMessage,
        request_id: Option<String>,
    ) -> Result<Option<PendingResults>, EmitError> {
        for block in &message.content {
            if matches!(block, ContentBlock::Text(t) if t.text.is_empty()) {
                continue;
            }
            let mut m = message.clone();
            m.content = vec![block.clone()];
            m.stop_reason = None;
            m.stop_sequence = None;
            self.emitter
                .emit(Frame::Assistant(AssistantFrame {
                    message: m,
                    parent_tool_use_id: self.emitter.parent_tool_use_id().map(str::to_owned),
                    session_id: self.emitter.session_id().to_owned(),
                    uuid: new_uuid(),
                    timestamp: Some(now_rfc3339()),
                    request_id: request_id.clone(),
                    extra: Extra::new(),
                }))
                .await?;
        }
        self.history
            .push_assistant(message.content)
            .map_err(|e| EmitError::Persist(format!("internal: {e}")))
    }

    /// Close an obligation whose calls will not run, telling the model why (and the front end).
    async fn close_unrun(
        &mut self,
        pending: PendingResults,
        text: impl Fn(&ToolUseBlock) -> String,
        kind: &str,
    ) -> Result<(), EmitError> {
        let blocks = self.history.close(pending, text);
        for b in blocks {
            let id = match &b {
                ContentBlock::ToolResult(r) => r.tool_use_id.clone(),
                _ => continue,
            };
            self.emitter
                .emit(Frame::User(UserFrame {
                    message: UserMessage {
                        role: Role::User,
                        content: MessageContent::Blocks(vec![b]),
                        extra: Extra::new(),
                    },
                    parent_tool_use_id: self.emitter.parent_tool_use_id().map(str::to_owned),
                    session_id: self.emitter.session_id().to_owned(),
                    uuid: Some(new_uuid()),
                    timestamp: Some(now_rfc3339()),
                    tool_use_result: None,
                    tool_result_meta: Some(json!([{ "id": id, "non_execution_kind": kind }])),
                    extra: Extra::new(),
                }))
                .await?;
        }
        Ok(())
    }

    fn result_frame(&self, end: &TurnEnd, stats: &TurnStats, elapsed: Duration) -> ResultFrame {
        let mut extra = Extra::new();
        if let TurnEnd::ApiFailed { error, .. } = end {
            if let Some(t) = &error.error_type {
                extra.insert("api_error_type".into(), json!(t));
            }
        }
        let cost = self.costs();
        if !cost.unknown_models().is_empty() {
            extra.insert("unpriced_models".into(), json!(cost.unknown_models()));
        }
        extra.insert("result_index".into(), json!(self.results_emitted));
        ResultFrame {
            subtype: end.subtype(),
            is_error: end.is_error(),
            duration_ms: elapsed.as_millis() as u64,
            duration_api_ms: stats.api_time.as_millis() as u64,
            num_turns: stats.num_turns,
            result: Some(end.result_text()),
            errors: end.errors(),
            session_id: self.emitter.session_id().to_owned(),
            total_cost_usd: cost.total_usd(),
            usage: cost.usage_json(),
            model_usage: cost.model_usage_json(),
            permission_denials: stats.denials.clone(),
            terminal_reason: Some(end.terminal_reason()),
            api_error_status: Some(end.api_error_status()),
            stop_reason: Some(stats.stop_reason.clone()),
            uuid: new_uuid(),
            extra,
        }
    }
}

fn text_of(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
