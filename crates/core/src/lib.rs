//! keel's engine: a [`Session`] owns one agent's conversation and runs turns against a shared,
//! live [`SessionContext`]; [`SessionBuilder`] is the only way to make one.
//!
//! A turn streams a reply from the model (with the retry policy of [`retry`]), runs the tools it
//! asks for (permissions in [`permissions`], dispatch and truthful cancellation in
//! [`dispatch`]), and loops until the model ends its turn or a limit, an error or an interrupt
//! ends it. The session emits typed [`Event`]s on one bounded channel; [`wire`] maps them to
//! the stream-json frames SDKs read. Every turn ends with exactly one `result`, derived from a
//! [`TurnEnd`] — the same value the front end maps to its exit code, so the two cannot
//! disagree — and a panic anywhere inside a turn becomes that honest result too.

// A type the API hands out must be nameable by its users (re-exported below).
#![warn(unnameable_types)]
pub(crate) mod agent_defs;
pub(crate) mod agents;
pub mod approval;
pub mod builder;
pub(crate) mod command_hooks;
pub mod context;
pub(crate) mod cost;
pub(crate) mod dispatch;
pub mod emit;
pub mod end;
pub(crate) mod env;
pub mod event;
pub mod extend;
mod fault;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod history;
pub(crate) mod hook_event;
pub mod hooks;
mod ids;
pub(crate) mod persist;
/// The session's MCP servers: keel-mcp's hub (it needs nothing of the engine).
pub use keel_mcp::hub as mcp;
pub(crate) mod output_style;
pub mod permissions;
pub(crate) mod prompt;
pub(crate) mod remote;
mod reply;
pub mod retry;
pub(crate) mod session;
pub(crate) mod session_id;
pub(crate) mod setting_sources;
pub(crate) mod structured;
pub(crate) mod task_types;
pub mod tasks;
pub mod transcript;
pub(crate) mod web;
pub mod wire;

/// Owning every process keel's sessions start, in the process that runs them.
pub mod os {
    pub use keel_tools::launcher::{
        enable as enable_launcher, serve_stdin as serve_launcher, stop as stop_launcher,
        LAUNCHER_ARG,
    };
    pub use keel_tools::process::{kill_orphans, own_descendants};
}

pub use agent_defs::{AgentsError, SubagentLimits};
pub use builder::{BuildError, Built, Env, SessionBuilder, SessionOptions, DEFAULT_MODEL};
pub use context::SessionContext;
pub use emit::Emitter;
pub use end::TurnEnd;
pub use event::{Emitted, Event};
pub use history::{History, HistoryError, PendingResults};
/// The bounded, type-checked reader of repository files (settings, agents, memory, commands).
pub use keel_tools::repofile;
pub use output_style::OutputStyle;
pub use session::{
    AgentScope, Failer, InterruptReceipt, Requested, Session, SessionHandle, SessionId, SessionRole,
};
pub use structured::{SchemaError, Structured};

/// The protocol version keel speaks, reported as `claude_code_version` in `system/init` (the
/// official SDKs read that field to check compatibility).
pub const PROTOCOL_VERSION: &str = "2.1.332";
/// keel's own version.
pub const KEEL_VERSION: &str = env!("CARGO_PKG_VERSION");
