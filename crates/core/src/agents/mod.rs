//! Subagents: agent types, the Task tool, and how a child session is run.

pub mod task_tool;
pub mod transcript;

pub use crate::agent_defs::AgentRegistry;
pub use task_tool::TaskTool;

use std::sync::Arc;

use keel_tools::{Tool, ToolKind};

use crate::context::SessionContext;
use crate::emit::Emitter;
use crate::tasks::{BackgroundBash, TaskOutputTool, TaskStopTool};

/// The tools keel adds for subagents and background work, beside the built-in ones.
pub const AGENT_TOOLS: [ToolKind; 4] = [
    ToolKind::Task,
    ToolKind::TaskOutput,
    ToolKind::KillShell,
    ToolKind::TaskStop,
];

/// The name a model calls an agent tool by.
pub fn agent_tool_name(kind: ToolKind) -> &'static str {
    match kind {
        ToolKind::Task => "Task",
        ToolKind::TaskOutput => "TaskOutput",
        ToolKind::KillShell => "KillShell",
        _ => "TaskStop",
    }
}

/// The main agent's tools: `base` (the built-ins, with Bash able to run in the background),
/// plus the agent tools `wanted` allows. Subagents choose from the same set.
pub(crate) fn session_tools(
    base: Vec<Arc<dyn Tool>>,
    wanted: impl Fn(ToolKind) -> bool,
    ctx: &Arc<SessionContext>,
    emitter: &Emitter,
) -> Vec<Arc<dyn Tool>> {
    let tasks = ctx.tasks().clone();
    let mut tools: Vec<Arc<dyn Tool>> = base
        .into_iter()
        .map(|t| -> Arc<dyn Tool> {
            if t.kind() == ToolKind::Bash {
                Arc::new(BackgroundBash {
                    inner: t,
                    tasks: tasks.clone(),
                })
            } else {
                t
            }
        })
        .collect();
    // Subagents choose from the built-ins: the background tasks belong to the main agent.
    let subagent_base: Arc<[Arc<dyn Tool>]> = tools.clone().into();
    if wanted(ToolKind::Task) {
        tools.push(Arc::new(TaskTool::new(
            ctx.clone(),
            subagent_base,
            emitter.clone(),
        )));
    }
    if wanted(ToolKind::TaskOutput) {
        tools.push(Arc::new(TaskOutputTool(tasks.clone())));
    }
    for kind in [ToolKind::KillShell, ToolKind::TaskStop] {
        if wanted(kind) {
            tools.push(Arc::new(TaskStopTool {
                tasks: tasks.clone(),
                kind,
            }));
        }
    }
    tools
}
