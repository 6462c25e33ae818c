//! Subagents: agent types, the Task tool, and how a child session is run.

pub mod registry;
pub mod task_tool;

pub use registry::{AgentDef, AgentRegistry, AgentSource};
pub use task_tool::{SubagentLimits, SubagentRuntime, TaskTool};
