//! The `Task` tool (also called `Agent`): start a subagent in the foreground or background.
//!
//! A subagent is a child [`Session`] on the parent's [`SessionContext`] — the same live model,
//! mode, rules, hooks, approver, budget and tasks — with its own history, transcript and
//! [`AgentScope`]: read-only types are held to plan mode, it gets only the tools its type
//! lists, and it may have its own model and turn limit. A foreground subagent's turn is a child
//! of the parent's call token, so interrupting the parent interrupts it; a background one runs
//! under its own task token. How it ended is typed: completed, failed{reason},
//! truncated{max_turns|budget}, killed{by}. keel never retries a failed subagent by itself.

use std::sync::Arc;
use std::time::Instant;

use keel_protocol::{CancelReason, ContentBlock};
use keel_tools::{
    input_schema, BoxFuture, CancelToken, Tool, ToolContext, ToolKind, ToolOutcome, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent_defs::AgentDef;
use crate::context::{SessionContext, SubagentSlot};
use crate::emit::Emitter;
use crate::end::TurnEnd;
use crate::event::{Event, TaskEnd, TaskEvent};
use crate::history::History;
use crate::session::{AgentScope, Session, SessionRole};
use crate::tasks::{KilledBy, Limit, Movable, TaskKind, TaskStatus};

/// The `Task` tool of one agent level.
pub struct TaskTool {
    ctx: Arc<SessionContext>,
    /// The tools subagents choose from (before their type's filter).
    base_tools: Arc<[Arc<dyn Tool>]>,
    /// The main agent's emitter: subagent events go to the same consumers, tagged with the
    /// Task call.
    emitter: Emitter,
    depth: u32,
    /// The subagent this Task tool belongs to (`None`: the main agent's): the parent of the
    /// agents it starts, in their transcripts' metadata.
    owner: Option<String>,
}

impl TaskTool {
    /// The Task tool of the main agent (depth 0).
    pub(crate) fn new(
        ctx: Arc<SessionContext>,
        base_tools: Arc<[Arc<dyn Tool>]>,
        emitter: Emitter,
    ) -> Self {
        Self {
            ctx,
            base_tools,
            emitter,
            depth: 0,
            owner: None,
        }
    }
}

/// Task's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Input {
    /// A short (3-5 word) label for the task.
    description: String,
    /// The task, complete and self-contained.
    prompt: String,
    /// The agent type.
    subagent_type: String,
    /// Run as a background task; read the result later with TaskOutput.
    run_in_background: Option<bool>,
    /// The agent id of an earlier subagent to continue.
    resume: Option<String>,
    /// A model for this subagent (default: the agent type's, else the session's).
    model: Option<String>,
}

/// Why a subagent could not be started; the text is the Task call's error result.
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// The input does not fit the tool's schema.
    #[error(transparent)]
    Input(#[from] keel_tools::InputError),
    /// The prompt is empty.
    #[error("Invalid input for Task: `prompt` is required (the task for the subagent, complete and self-contained).")]
    NoPrompt,
    /// `resume` names an agent whose transcript is not there.
    #[error("There is no transcript for agent {id} (looked for {path}), so it cannot be resumed. Start a fresh agent by calling Task without `resume`.")]
    NoTranscript {
        /// The agent.
        id: String,
        /// Where its transcript would be.
        path: std::path::PathBuf,
    },
    /// The agent's transcript could not be opened.
    #[error("could not open the agent's transcript: {0}")]
    Transcript(String),
    /// `resume` in a session that keeps no transcripts.
    #[error("Agent {0} cannot be resumed: this session keeps no transcripts. Start a fresh agent by calling Task without `resume`.")]
    NotKept(String),
}

/// Task's own rules on an input that fits its schema: a prompt with words in it; an empty
/// `resume` or `model` counts as none.
fn check(mut i: Input) -> Result<Input, StartError> {
    if i.prompt.trim().is_empty() {
        return Err(StartError::NoPrompt);
    }
    i.resume = i.resume.filter(|r| !r.is_empty());
    i.model = i.model.filter(|m| !m.is_empty());
    Ok(i)
}

impl TypedTool for TaskTool {
    type Input = Input;
    const NAME: &'static str = "Task";
    const KIND: ToolKind = ToolKind::Task;
    const DESCRIPTION: &'static str = "Delegate a task to a subagent that works on its own and reports back. Give it a complete, self-contained prompt: it sees nothing of this conversation. Pick subagent_type from the available agent types (general-purpose for anything; Explore and Plan are read-only). run_in_background starts it as a background task and returns its id at once. resume continues an earlier subagent by its agent id, with its history.";
    // A subagent's own calls are checked against the session's live permissions.
    const READ_ONLY: bool = true;

    fn schema(&self) -> Value {
        let mut schema = input_schema::<Input>();
        // The agent types change while a session runs (a host may add some): list them now.
        let types = format!(
            "The agent type: one of {}.",
            self.ctx.agent_names().join(", ")
        );
        schema["properties"]["subagent_type"]["description"] = json!(types);
        schema
    }

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let inp = match check(inp) {
                Ok(i) => i,
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            let Some(def) = self.ctx.agent(&inp.subagent_type) else {
                return ToolOutcome::failed(format!(
                    "There is no agent type {:?}. The available types are: {}. Call Task again with one of them.",
                    inp.subagent_type,
                    self.ctx.agent_names().join(", ")
                ));
            };
            let limits = &self.ctx.limits().subagents;
            if self.depth >= limits.max_depth {
                return ToolOutcome::failed(format!(
                    "A subagent may not start subagents here (the nesting limit is {}; set KEEL_SUBAGENT_MAX_DEPTH to allow more). Do the work yourself with your own tools.",
                    limits.max_depth
                ));
            }
            let Some(slot) = self.ctx.subagent_slot() else {
                return ToolOutcome::failed(format!(
                    "No subagent was started: {} are already running, the most this session allows (KEEL_SUBAGENT_MAX_CONCURRENCY). Wait for one to finish (TaskOutput) or do the work yourself.",
                    limits.max_concurrent
                ));
            };
            let agent_id = inp.resume.clone().unwrap_or_else(|| {
                format!("a{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
            });
            let child = match self
                .build_child(&def, &inp, &agent_id, &cx.tool_use_id)
                .await
            {
                Ok(c) => c,
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            if inp.run_in_background.unwrap_or(false) {
                return self.run_background(child, slot, &def, &inp, agent_id).await;
            }
            self.run_foreground(child, slot, &def, &inp, &agent_id, cx)
                .await
        })
    }
}

impl TaskTool {
    async fn build_child(
        &self,
        def: &AgentDef,
        inp: &Input,
        agent_id: &str,
        tool_use_id: &str,
    ) -> Result<Session, StartError> {
        let ctx = &self.ctx;
        let scope = AgentScope {
            role: SessionRole::Subagent {
                agent_id: agent_id.to_owned(),
                agent_type: def.name.clone(),
            },
            plan_only: def.read_only,
            model: inp.model.clone().or_else(|| def.model.clone()),
            max_turns: def
                .max_turns
                .or(ctx.limits().subagents.default_max_turns)
                .or(ctx.limits().max_turns),
            system_prompt: Some(format!(
                "{}\n\n# Environment\n- Working directory: {}\n- Date: {}\n- You are subagent {agent_id} (type {}).",
                def.prompt,
                ctx.cwd().display(),
                chrono::Local::now().format("%Y-%m-%d"),
                def.name
            )),
            append_system_prompt: None,
            depth: self.depth + 1,
        };
        let mut tools: Vec<Arc<dyn Tool>> = self
            .base_tools
            .iter()
            .filter(|t| {
                def.tools
                    .as_ref()
                    .is_none_or(|list| list.iter().any(|n| t.kind().answers_to(t.name(), n)))
            })
            .cloned()
            .collect();
        let offers_task = def
            .tools
            .as_ref()
            .is_none_or(|l| l.iter().any(|n| ToolKind::Task.answers_to("Task", n)));
        if offers_task {
            tools.push(Arc::new(TaskTool {
                ctx: ctx.clone(),
                base_tools: self.base_tools.clone(),
                emitter: self.emitter.clone(),
                depth: self.depth + 1,
                owner: Some(agent_id.to_owned()),
            }));
        }
        let mut emitter = self.emitter.for_subagent(tool_use_id);
        let mut history = History::new();
        match ctx.agents.transcript_dir() {
            Some(dir) => {
                let path = dir.join(format!("agent-{agent_id}.jsonl"));
                let resuming = inp.resume.is_some();
                let (sid, cwd, model) = (ctx.session_id(), ctx.cwd().to_path_buf(), ctx.model());
                let id = agent_id.to_owned();
                let meta = super::transcript::AgentMeta {
                    agent_id: agent_id.to_owned(),
                    agent_type: def.name.clone(),
                    description: inp.description.clone(),
                    tool_use_id: tool_use_id.to_owned(),
                    parent_agent_id: self.owner.clone(),
                };
                let mirror = emitter.mirror().cloned();
                let opened = tokio::task::spawn_blocking(move || {
                    if resuming && !path.exists() {
                        return Err(StartError::NoTranscript { id, path });
                    }
                    super::transcript::open(&path, &sid, &cwd, &model, &meta, mirror)
                        .map_err(|e| StartError::Transcript(e.to_string()))
                })
                .await
                .map_err(|e| StartError::Transcript(e.to_string()))??;
                emitter = emitter.with_persist(opened.0);
                if let Some(h) = opened.1 {
                    history = h;
                }
            }
            None if inp.resume.is_some() => {
                return Err(StartError::NotKept(agent_id.to_owned()));
            }
            None => {}
        }
        let mut session = Session::new(ctx.clone(), scope, tools, emitter, history);
        session.limit_mcp_tools(def.tools.clone());
        Ok(session)
    }

    async fn run_background(
        &self,
        child: Session,
        slot: SubagentSlot,
        def: &AgentDef,
        inp: &Input,
        agent_id: String,
    ) -> ToolOutcome {
        let prompt = inp.prompt.clone();
        let spawned = self
            .ctx
            .tasks()
            .spawn(
                TaskKind::Agent {
                    agent_type: def.name.clone(),
                },
                inp.description.clone(),
                Some(agent_id),
                move |token| async move {
                    let _slot = slot; // held until the agent ends, however it ends
                    let mut child = child;
                    let end = child
                        .run_turn_under(vec![ContentBlock::text(prompt)], Some(token.clone()))
                        .await;
                    child.shutdown().await;
                    end_state(&end, &token, child.last_assistant_text())
                },
            )
            .await;
        match spawned {
            Ok(id) => ToolOutcome::Ok {
                content: format!(
                    "Started background agent {id} ({}). It keeps working after this turn; you will be told when it ends. Read its report with TaskOutput(task_id: \"{id}\"); stop it with TaskStop(task_id: \"{id}\").",
                    def.name
                ),
                meta: Some(json!({"agent_id": id, "status": "running", "background": true})),
            },
            Err(e) => ToolOutcome::failed(format!("The background agent was not started: {e}.")),
        }
    }

    async fn run_foreground(
        &self,
        mut child: Session,
        slot: SubagentSlot,
        def: &AgentDef,
        inp: &Input,
        agent_id: &str,
        cx: ToolContext,
    ) -> ToolOutcome {
        let started = Instant::now();
        self.announce(agent_id, def, inp, &cx.tool_use_id, None)
            .await;
        let prompt = vec![ContentBlock::text(inp.prompt.clone())];
        let (status, text) = if self.ctx.tasks().backgrounding() {
            // The user may move this agent to the background while it works: it runs under a
            // token of its own, and this call passes the turn's interrupt on.
            let own = self.ctx.tasks().child_token();
            let token = own.clone();
            let kind = TaskKind::Agent {
                agent_type: def.name.clone(),
            };
            let run = tokio::spawn(async move {
                let end = child.run_turn_under(prompt, Some(token.clone())).await;
                child.shutdown().await;
                end_state(&end, &token, child.last_assistant_text())
            });
            match self
                .ctx
                .tasks()
                .run_movable(&kind, &cx.tool_use_id, &cx.cancel, &own, None, run)
                .await
            {
                Movable::Done(Ok(r)) => {
                    drop(slot);
                    r
                }
                Movable::Done(Err(e)) => {
                    drop(slot);
                    (
                        TaskStatus::Failed(format!(
                            "its worker died ({})",
                            if e.is_panic() {
                                "it panicked"
                            } else {
                                "it was cancelled"
                            }
                        )),
                        String::new(),
                    )
                }
                Movable::Moved(run) => {
                    return self.moved(run, slot, def, inp, agent_id, own).await;
                }
            }
        } else {
            let end = child.run_turn_under(prompt, Some(cx.cancel.clone())).await;
            child.shutdown().await;
            drop(slot);
            end_state(&end, &cx.cancel, child.last_assistant_text())
        };
        self.announce(agent_id, def, inp, &cx.tool_use_id, Some(&status))
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

    /// The user moved a foreground agent to the background: it goes on as a task under the
    /// same id (and its slot), and the call answers at once.
    async fn moved(
        &self,
        run: tokio::task::JoinHandle<(TaskStatus, String)>,
        slot: SubagentSlot,
        def: &AgentDef,
        inp: &Input,
        agent_id: &str,
        own: CancelToken,
    ) -> ToolOutcome {
        let work = async move {
            let _slot = slot; // held until the agent ends, however it ends
            run.await
                .unwrap_or_else(|_| (TaskStatus::Failed("its worker died".into()), String::new()))
        };
        let kind = TaskKind::Agent {
            agent_type: def.name.clone(),
        };
        match self
            .ctx
            .tasks()
            .start(kind, inp.description.clone(), Some(agent_id.to_owned()), own.clone(), None, work)
            .await
        {
            Ok(id) => ToolOutcome::Ok {
                content: format!(
                    "The user moved this subagent to the background: it keeps working as background agent {id} ({}). You will be told when it ends; read its report with TaskOutput(task_id: \"{id}\"), stop it with TaskStop(task_id: \"{id}\"). Go on with the task meanwhile.",
                    def.name
                ),
                meta: Some(json!({"agent_id": id, "task_id": id, "status": "running", "background": true, "backgroundedByUser": true})),
            },
            Err(e) => {
                own.cancel(CancelReason::Shutdown);
                ToolOutcome::failed(format!(
                    "The subagent could not be moved to the background ({e}), so it was stopped."
                ))
            }
        }
    }

    /// A foreground agent's start (`status` none) or end, as a task event.
    async fn announce(
        &self,
        agent_id: &str,
        def: &AgentDef,
        inp: &Input,
        tool_use_id: &str,
        status: Option<&TaskStatus>,
    ) {
        let end = status.map(|s| TaskEnd {
            status: s.clone(),
            summary: format!("{}: {}", inp.description, s.describe()),
            // The agent's transcript holds its whole output.
            output_file: self
                .ctx
                .agents
                .transcript_dir()
                .map(|d| d.join(format!("agent-{agent_id}.jsonl"))),
        });
        let _ = self
            .emitter
            .emit(Event::Task(TaskEvent {
                task_id: agent_id.to_owned(),
                description: inp.description.clone(),
                kind: TaskKind::Agent {
                    agent_type: def.name.clone(),
                },
                tool_use_id: Some(tool_use_id.to_owned()),
                end,
            }))
            .await;
    }
}

/// Map how the child's turn ended to a typed end state and the text to report.
fn end_state(end: &TurnEnd, token: &CancelToken, last_text: String) -> (TaskStatus, String) {
    let status = match end {
        TurnEnd::Completed { .. } => TaskStatus::Completed,
        TurnEnd::MaxTurns { .. } => TaskStatus::Truncated(Limit::MaxTurns),
        TurnEnd::Budget { .. } => TaskStatus::Truncated(Limit::Budget),
        TurnEnd::Interrupted { reason, .. } => {
            TaskStatus::Killed(match token.reason().unwrap_or(*reason) {
                CancelReason::UserInterrupted => KilledBy::User,
                CancelReason::Shutdown => KilledBy::System,
                CancelReason::SiblingError | CancelReason::Timeout => KilledBy::Parent,
            })
        }
        TurnEnd::ApiFailed { .. }
        | TurnEnd::Internal { .. }
        | TurnEnd::HookStopped { .. }
        | TurnEnd::Refused { .. }
        | TurnEnd::CutOff { .. }
        | TurnEnd::PromptTooLong { .. }
        | TurnEnd::StructuredRetries { .. }
        | TurnEnd::StructuredMissing { .. }
        | TurnEnd::CapabilityMissing { .. }
        | TurnEnd::ResumeRejected { .. } => TaskStatus::Failed(end.result_text()),
    };
    let text = match end {
        TurnEnd::Completed { text } => text.clone(),
        _ => last_text,
    };
    (status, text)
}

fn explain(s: &TaskStatus) -> &'static str {
    match s {
        TaskStatus::Truncated(Limit::MaxTurns) => "It reached its turn limit before finishing; its work is partial.",
        TaskStatus::Truncated(Limit::Budget) => "The session's cost budget ran out before it finished; its work is partial.",
        TaskStatus::Failed(_) => "It failed; keel did not retry it. Decide whether to retry, resume it, or do the work another way.",
        TaskStatus::Killed(_) => "It was stopped before finishing; its work is partial.",
        TaskStatus::Running | TaskStatus::Completed => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_tools::parse_input;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_schema_comes_from_the_input_type() {
        assert_eq!(
            input_schema::<Input>()["required"],
            json!(["description", "prompt", "subagent_type"])
        );
        let parse = |v: Value| check(parse_input::<Input>("Task", &v)?);
        let e = parse(json!({"description": "d", "prompt": "  ", "subagent_type": "Plan"}))
            .err()
            .unwrap();
        assert!(matches!(e, StartError::NoPrompt), "{e}");
        let i = parse(
            json!({"description": "d", "prompt": "p", "subagent_type": "Plan",
            "run_in_background": "true", "resume": ""}),
        )
        .unwrap();
        assert_eq!((i.run_in_background, i.resume), (Some(true), None));
    }
}
