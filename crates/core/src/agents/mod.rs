//! Subagents: agent types, the Task tool, and how a child session is run.

pub mod registry;
pub mod task_tool;
pub mod transcript;

pub use registry::{AgentDef, AgentRegistry, AgentSource};
pub use task_tool::{SubagentLimits, SubagentRuntime, TaskTool};

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use keel_model::Model;
use keel_tools::Tool;

use crate::config::SessionConfig;
use crate::cost::CostTracker;
use crate::emit::Emitter;
use crate::tasks::{BackgroundBash, TaskManager, TaskOutputTool, TaskStopTool};

/// Names of the tools [`equip`] adds, beside the built-in ones.
pub const AGENT_TOOLS: [&str; 4] = ["Task", "TaskOutput", "KillShell", "TaskStop"];

/// What a main session needs for subagents and background work.
pub struct Equipped {
    /// The tools to offer: the built-ins (Bash able to run in the background), plus the
    /// agent tools that `wanted` allows.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The background tasks (give them to the session with `with_tasks`).
    pub tasks: Arc<TaskManager>,
    /// The cost tracker shared by every agent of the session (give it with `with_cost`).
    pub cost: Arc<Mutex<CostTracker>>,
    /// What the Task tool shares (give it with `with_agents`, so a host can add agent types).
    pub runtime: Arc<SubagentRuntime>,
}

/// Equip a main session: `base` are its built-in tools; `wanted(name)` says whether an agent
/// tool is offered (a `--tools` list may leave them out). Subagent transcripts and task outputs
/// live beside the session's transcript, when there is one.
pub fn equip(
    base: Vec<Arc<dyn Tool>>,
    wanted: impl Fn(&str) -> bool,
    cfg: &SessionConfig,
    model: Arc<dyn Model>,
    emitter: &Emitter,
    registry: AgentRegistry,
    limits: SubagentLimits,
) -> Equipped {
    let session_dir: Option<PathBuf> = cfg.transcript_path.as_ref().map(|p| p.with_extension(""));
    let tasks = TaskManager::new(
        emitter.clone(),
        session_dir.as_ref().map(|d| d.join("tasks")),
    );
    let cost = Arc::new(Mutex::new(CostTracker::default()));
    let tools: Vec<Arc<dyn Tool>> = base
        .into_iter()
        .map(|t| -> Arc<dyn Tool> {
            if t.name() == "Bash" {
                Arc::new(BackgroundBash {
                    inner: t,
                    tasks: tasks.clone(),
                })
            } else {
                t
            }
        })
        .collect();
    let runtime = Arc::new(SubagentRuntime {
        registry: std::sync::RwLock::new(registry),
        model,
        parent: cfg.clone(),
        emitter: emitter.clone(),
        tasks: tasks.clone(),
        cost: cost.clone(),
        tools: tools.clone(),
        limits,
        running: Arc::new(AtomicUsize::new(0)),
        transcript_dir: session_dir.map(|d| d.join("subagents")),
        open_transcript: Some(Arc::new(transcript::open)),
    });
    let mut all = tools;
    if wanted("Task") {
        all.push(Arc::new(TaskTool::new(runtime.clone())));
    }
    if wanted("TaskOutput") {
        all.push(Arc::new(TaskOutputTool(tasks.clone())));
    }
    for kind in [
        keel_tools::ToolKind::KillShell,
        keel_tools::ToolKind::TaskStop,
    ] {
        let stop = TaskStopTool {
            tasks: tasks.clone(),
            kind,
        };
        if wanted(stop.name()) {
            all.push(Arc::new(stop));
        }
    }
    Equipped {
        tools: all,
        tasks,
        cost,
        runtime,
    }
}
