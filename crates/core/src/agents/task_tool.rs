//! The `Task` tool (also called `Agent`): start a subagent in the foreground or background.
//!
//! A subagent is a child [`Session`] with its own history and transcript, the parent's retry
//! policy, a turn limit, and the parent's budget (one shared cost tracker). Its permissions are
//! the intersection of the parent's and its type's: the parent's deny rules and plan mode apply,
//! and it only gets the tools its type lists. A foreground subagent's turn is a child of the
//! parent's turn token, so interrupting the parent interrupts it; a background one runs under its
//! own task token. How it ended is typed: completed, failed{reason}, truncated{max_turns|budget},
//! killed{by}. keel never retries a failed subagent by itself: the parent agent decides.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use keel_model::Model;
use keel_protocol::frames::TaskFrame;
use keel_protocol::{CancelReason, ContentBlock, Extra, Frame, SystemFrame};
use keel_tools::{BoxFuture, CancelToken, Tool, ToolContext, ToolOutcome};
use serde_json::{json, Value};

use crate::agents::registry::{AgentDef, AgentRegistry};
use crate::config::{SessionConfig, SessionRole};
use crate::cost::CostTracker;
use crate::emit::{new_uuid, Emitter};
use crate::end::TurnEnd;
use crate::permissions::PermissionMode;
use crate::session::Session;
use crate::tasks::{TaskKind, TaskManager, TaskStatus};

/// Bounds on subagents.
#[derive(Clone, Debug)]
pub struct SubagentLimits {
    /// How deep subagents may nest (1: the main agent may start subagents, they may not).
    pub max_depth: u32,
    /// How many subagents may run at once (foreground and background together).
    pub max_concurrent: usize,
    /// Turn limit of a subagent whose type sets none.
    pub default_max_turns: Option<u32>,
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_concurrent: 4,
            default_max_turns: None,
        }
    }
}

/// What every Task call of a session shares.
pub struct SubagentRuntime {
    /// Agent types (a host may add some while the session runs).
    pub registry: std::sync::RwLock<AgentRegistry>,
    /// The model client.
    pub model: Arc<dyn Model>,
    /// The parent's configuration (permissions, retry policy, limits, cwd, model).
    pub parent: SessionConfig,
    /// The parent's emitter: subagent frames go to the same consumers, tagged with the Task call.
    pub emitter: Emitter,
    /// The session's background tasks.
    pub tasks: Arc<TaskManager>,
    /// The session's cost, shared so the budget binds across every agent.
    pub cost: Arc<Mutex<CostTracker>>,
    /// The tools subagents choose from (before their type's filter).
    pub tools: Vec<Arc<dyn Tool>>,
    /// Bounds.
    pub limits: SubagentLimits,
    /// Subagents running now.
    pub running: Arc<AtomicUsize>,
    /// Where subagent transcripts go (`<session dir>/subagents`), when transcripts are kept.
    pub transcript_dir: Option<PathBuf>,
    /// Opens a subagent's transcript: given its path, a persist hook and the history it holds.
    pub open_transcript: Option<Arc<OpenTranscript>>,
}

/// Opens (or creates) a subagent transcript at a path: returns the persist hook and the history
/// already in it (for resume).
pub type OpenTranscript = dyn Fn(
        &std::path::Path,
        &SessionConfig,
    ) -> Result<
        (
            Arc<dyn crate::emit::Persist>,
            Option<crate::history::History>,
        ),
        String,
    > + Send
    + Sync;

impl SubagentRuntime {
    /// The names of the agent types.
    pub fn agent_names(&self) -> Vec<String> {
        self.registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// Add agent types given as `{"name": {"description", "prompt", "tools", "model"}}` (the
    /// `--agents` shape, also what an SDK host sends in `initialize`). Returns their names.
    pub fn register_json(&self, json: &str) -> Result<Vec<String>, String> {
        let defs = crate::agents::registry::parse_agents_json(json)?;
        let names = defs.iter().map(|d| d.name.clone()).collect();
        let mut reg = self.registry.write().unwrap_or_else(|p| p.into_inner());
        for d in defs {
            reg.insert(d);
        }
        Ok(names)
    }
}

/// The `Task` tool of one agent level.
pub struct TaskTool {
    runtime: Arc<SubagentRuntime>,
    depth: u32,
}

impl TaskTool {
    /// The Task tool of the main agent (depth 0).
    pub fn new(runtime: Arc<SubagentRuntime>) -> Self {
        Self { runtime, depth: 0 }
    }
}

struct Input {
    description: String,
    prompt: String,
    subagent_type: String,
    background: bool,
    resume: Option<String>,
    model: Option<String>,
}

fn parse(input: &Value) -> Result<Input, String> {
    let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_owned);
    let need = |k: &str, what: &str| {
        s(k).filter(|v| !v.trim().is_empty())
            .ok_or_else(|| format!("Invalid input for Task: `{k}` is required ({what})."))
    };
    Ok(Input {
        description: s("description").unwrap_or_else(|| "subagent task".into()),
        prompt: need(
            "prompt",
            "the task for the subagent, complete and self-contained",
        )?,
        subagent_type: s("subagent_type").unwrap_or_else(|| "general-purpose".into()),
        background: input
            .get("run_in_background")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        resume: s("resume").filter(|r| !r.is_empty()),
        model: s("model").filter(|m| !m.is_empty()),
    })
}

impl Tool for TaskTool {
    fn name(&self) -> &'static str {
        "Task"
    }
    fn kind(&self) -> keel_tools::ToolKind {
        keel_tools::ToolKind::Task
    }
    fn description(&self) -> &'static str {
        "Delegate a task to a subagent that works on its own and reports back. Give it a complete, self-contained prompt: it sees nothing of this conversation. Pick subagent_type from the available agent types (general-purpose for anything; Explore and Plan are read-only). run_in_background starts it as a background task and returns its id at once. resume continues an earlier subagent by its agent id, with its history."
    }
    fn input_schema(&self) -> Value {
        let types = self.runtime.agent_names();
        json!({"type": "object", "properties": {
            "description": {"type": "string", "description": "A short (3-5 word) label for the task."},
            "prompt": {"type": "string", "description": "The task, complete and self-contained."},
            "subagent_type": {"type": "string", "description": format!("The agent type: one of {}.", types.join(", "))},
            "run_in_background": {"type": "boolean", "description": "Run as a background task; read the result later with TaskOutput."},
            "resume": {"type": "string", "description": "The agent id of an earlier subagent to continue."},
            "model": {"type": "string", "description": "A model for this subagent (default: the agent type's, else the session's)."}
        }, "required": ["description", "prompt", "subagent_type"]})
    }
    fn is_read_only(&self, _: &Value) -> bool {
        // A subagent's own calls are checked against the permissions it inherits.
        true
    }
    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let inp = match parse(&input) {
                Ok(i) => i,
                Err(e) => return ToolOutcome::failed(e),
            };
            let rt = &self.runtime;
            let found = rt
                .registry
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&inp.subagent_type)
                .cloned();
            let Some(def) = found else {
                return ToolOutcome::failed(format!(
                    "There is no agent type {:?}. The available types are: {}. Call Task again with one of them.",
                    inp.subagent_type,
                    rt.agent_names().join(", ")
                ));
            };
            if self.depth >= rt.limits.max_depth {
                return ToolOutcome::failed(format!(
                    "A subagent may not start subagents here (the nesting limit is {}; set KEEL_SUBAGENT_MAX_DEPTH to allow more). Do the work yourself with your own tools.",
                    rt.limits.max_depth
                ));
            }
            if rt.running.load(Ordering::SeqCst) >= rt.limits.max_concurrent {
                return ToolOutcome::failed(format!(
                    "No subagent was started: {} are already running, the most this session allows (KEEL_SUBAGENT_MAX_CONCURRENCY). Wait for one to finish (TaskOutput) or do the work yourself.",
                    rt.limits.max_concurrent
                ));
            }
            let agent_id = inp.resume.clone().unwrap_or_else(|| {
                format!("a{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
            });
            let child = match self.build_child(&def, &inp, &agent_id, &cx.tool_use_id) {
                Ok(c) => c,
                Err(e) => return ToolOutcome::failed(e),
            };
            if inp.background {
                let running = rt.running.clone();
                running.fetch_add(1, Ordering::SeqCst);
                let prompt = inp.prompt.clone();
                let id = rt
                    .tasks
                    .spawn(
                        TaskKind::Agent {
                            agent_type: def.name.clone(),
                        },
                        inp.description.clone(),
                        Some(agent_id.clone()),
                        move |token| async move {
                            let mut child = child;
                            let end = child
                                .run_turn_under(
                                    vec![ContentBlock::text(prompt)],
                                    Some(token.clone()),
                                )
                                .await;
                            child.shutdown().await;
                            running.fetch_sub(1, Ordering::SeqCst);
                            let (status, text) =
                                end_state(&end, &token, child.last_assistant_text());
                            (status, text)
                        },
                    )
                    .await;
                return ToolOutcome::Ok {
                    content: format!(
                        "Started background agent {id} ({}). It keeps working after this turn; you will be told when it ends. Read its report with TaskOutput(task_id: \"{id}\"); stop it with TaskStop(task_id: \"{id}\").",
                        def.name
                    ),
                    meta: Some(json!({"agent_id": id, "status": "running", "background": true})),
                };
            }
            self.run_foreground(child, &def, &inp, &agent_id, cx).await
        })
    }
}

impl TaskTool {
    fn build_child(
        &self,
        def: &AgentDef,
        inp: &Input,
        agent_id: &str,
        tool_use_id: &str,
    ) -> Result<Session, String> {
        let rt = &self.runtime;
        let mut cfg = rt.parent.clone();
        cfg.role = SessionRole::Subagent {
            agent_id: agent_id.to_owned(),
            agent_type: def.name.clone(),
        };
        cfg.model = inp
            .model
            .clone()
            .or_else(|| def.model.clone())
            .unwrap_or_else(|| rt.parent.model.clone());
        cfg.fallback_model = rt.parent.fallback_model.clone();
        if def.read_only || rt.parent.permissions.mode == PermissionMode::Plan {
            cfg.permissions.mode = PermissionMode::Plan;
        }
        cfg.max_turns = def
            .max_turns
            .or(rt.limits.default_max_turns)
            .or(rt.parent.max_turns);
        cfg.system_prompt = Some(format!(
            "{}\n\n# Environment\n- Working directory: {}\n- Date: {}\n- You are subagent {agent_id} (type {}).",
            def.prompt,
            rt.parent.cwd.display(),
            chrono::Local::now().format("%Y-%m-%d"),
            def.name
        ));
        cfg.append_system_prompt = None;
        let mut tools: Vec<Arc<dyn Tool>> = rt
            .tools
            .iter()
            .filter(|t| {
                def.tools
                    .as_ref()
                    .is_none_or(|list| list.iter().any(|n| n == t.name()))
            })
            .cloned()
            .collect();
        if def
            .tools
            .as_ref()
            .is_none_or(|l| l.iter().any(|n| n == "Task" || n == "Agent"))
        {
            tools.push(Arc::new(TaskTool {
                runtime: rt.clone(),
                depth: self.depth + 1,
            }));
        }
        let mut emitter = Emitter::new(rt.emitter.session_id().to_owned(), rt.emitter.sender())
            .with_parent(Some(tool_use_id.to_owned()));
        let mut history = None;
        match (&rt.transcript_dir, &rt.open_transcript) {
            (Some(dir), Some(open)) => {
                let path = dir.join(format!("agent-{agent_id}.jsonl"));
                if inp.resume.is_some() && !path.exists() {
                    return Err(format!(
                        "There is no transcript for agent {agent_id} (looked for {}), so it cannot be resumed. Start a fresh agent by calling Task without `resume`.",
                        path.display()
                    ));
                }
                let (persist, h) = open(&path, &cfg)?;
                emitter = emitter.with_persist(persist);
                history = h;
            }
            _ if inp.resume.is_some() => {
                return Err(format!("Agent {agent_id} cannot be resumed: this session keeps no transcripts. Start a fresh agent by calling Task without `resume`."));
            }
            _ => {}
        }
        let mut child =
            Session::new(cfg, rt.model.clone(), tools, emitter).with_cost(rt.cost.clone());
        if let Some(h) = history {
            child = child.with_history(h);
        }
        Ok(child)
    }

    async fn run_foreground(
        &self,
        mut child: Session,
        def: &AgentDef,
        inp: &Input,
        agent_id: &str,
        cx: ToolContext,
    ) -> ToolOutcome {
        let rt = &self.runtime;
        rt.running.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        self.frame(true, agent_id, def, inp, &cx.tool_use_id, None)
            .await;
        let end = child
            .run_turn_under(
                vec![ContentBlock::text(inp.prompt.clone())],
                Some(cx.cancel.clone()),
            )
            .await;
        child.shutdown().await;
        rt.running.fetch_sub(1, Ordering::SeqCst);
        let (status, text) = end_state(&end, &cx.cancel, child.last_assistant_text());
        self.frame(false, agent_id, def, inp, &cx.tool_use_id, Some(&status))
            .await;
        let resume_hint = format!(
            "(agent_id: {agent_id}; call Task with resume: \"{agent_id}\" to continue this agent)"
        );
        match &status {
            TaskStatus::Completed => ToolOutcome::Ok {
                content: format!("{text}\n\n{resume_hint}"),
                meta: Some(json!({"agent_id": agent_id, "status": "completed", "end_state": status.describe()})),
            },
            TaskStatus::Killed(_) if cx.cancel.is_cancelled() => ToolOutcome::Stopped {
                reason: cx.cancel.reason().unwrap_or(CancelReason::UserInterrupted),
                started: true,
                partial: format!("{text}\n{resume_hint}"),
                elapsed: started.elapsed(),
                processes_killed: 0,
            },
            _ => ToolOutcome::Failed {
                message: format!(
                    "The {} subagent {agent_id} did not finish: {}. {}\nIts last output:\n{}\n{resume_hint}",
                    def.name,
                    status.describe(),
                    explain(&status),
                    if text.is_empty() { "(none)" } else { &text }
                ),
                meta: Some(json!({"agent_id": agent_id, "status": status.as_str(), "end_state": status.describe()})),
            },
        }
    }

    async fn frame(
        &self,
        start: bool,
        agent_id: &str,
        def: &AgentDef,
        inp: &Input,
        tool_use_id: &str,
        status: Option<&TaskStatus>,
    ) {
        let mut extra = Extra::new();
        extra.insert("description".into(), json!(inp.description));
        extra.insert("task_type".into(), json!("agent"));
        extra.insert("subagent_type".into(), json!(def.name));
        extra.insert("tool_use_id".into(), json!(tool_use_id));
        if let Some(s) = status {
            extra.insert("status".into(), json!(s.as_str()));
            extra.insert("end_state".into(), json!(s.describe()));
            extra.insert(
                "summary".into(),
                json!(format!("{}: {}", inp.description, s.describe())),
            );
            // SDKs require the field: the agent's transcript holds its whole output.
            let file = self.runtime.transcript_dir.as_ref().map(|d| {
                d.join(format!("agent-{agent_id}.jsonl"))
                    .display()
                    .to_string()
            });
            extra.insert("output_file".into(), json!(file.unwrap_or_default()));
        }
        let f = TaskFrame {
            task_id: agent_id.to_owned(),
            session_id: self.runtime.emitter.session_id().to_owned(),
            uuid: new_uuid(),
            extra,
        };
        let frame = if start {
            SystemFrame::TaskStarted(f)
        } else {
            SystemFrame::TaskNotification(f)
        };
        let _ = self.runtime.emitter.emit(Frame::System(frame)).await;
    }
}

/// Map how the child's turn ended to a typed end state and the text to report.
fn end_state(end: &TurnEnd, token: &CancelToken, last_text: String) -> (TaskStatus, String) {
    let status = match end {
        TurnEnd::Completed { .. } => TaskStatus::Completed,
        TurnEnd::MaxTurns { .. } => TaskStatus::Truncated("max_turns".into()),
        TurnEnd::Budget { .. } => TaskStatus::Truncated("budget".into()),
        TurnEnd::Interrupted { reason, .. } => TaskStatus::Killed(
            match token.reason().unwrap_or(*reason) {
                CancelReason::UserInterrupted => "user",
                CancelReason::Shutdown => "system",
                CancelReason::SiblingError | CancelReason::Timeout => "parent",
            }
            .into(),
        ),
        TurnEnd::ApiFailed { .. } | TurnEnd::Internal { .. } | TurnEnd::HookStopped { .. } => {
            TaskStatus::Failed(end.result_text())
        }
    };
    let text = match end {
        TurnEnd::Completed { text } => text.clone(),
        _ => last_text,
    };
    (status, text)
}

fn explain(s: &TaskStatus) -> &'static str {
    match s {
        TaskStatus::Truncated(l) if l == "max_turns" => "It reached its turn limit before finishing; its work is partial.",
        TaskStatus::Truncated(_) => "The session's cost budget ran out before it finished; its work is partial.",
        TaskStatus::Failed(_) => "It failed; keel did not retry it. Decide whether to retry, resume it, or do the work another way.",
        TaskStatus::Killed(_) => "It was stopped before finishing; its work is partial.",
        TaskStatus::Running | TaskStatus::Completed => "",
    }
}
