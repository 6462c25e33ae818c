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

pub mod agent_defs;
pub mod agents;
pub mod approval;
pub mod builder;
pub mod command_hooks;
pub mod context;
pub mod cost;
pub(crate) mod dispatch;
pub mod emit;
pub mod end;
pub mod env;
pub mod event;
pub mod extend;
mod fault;
#[doc(hidden)]
pub mod fuzzing;
pub mod history;
pub mod hook_event;
pub mod hooks;
mod ids;
pub mod persist;
/// The session's MCP servers: keel-mcp's hub (it needs nothing of the engine).
pub use keel_mcp::hub as mcp;
pub mod output_style;
pub mod permissions;
pub mod prompt;
pub mod remote;
mod reply;
pub mod retry;
pub mod session;
pub mod structured;
pub mod task_types;
pub mod tasks;
pub mod transcript;
pub mod web;
pub mod wire;

/// Owning every process keel's sessions start, in the process that runs them.
pub mod os {
    pub use keel_tools::launcher::{
        enable as enable_launcher, serve_stdin as serve_launcher, stop as stop_launcher,
        LAUNCHER_ARG,
    };
    pub use keel_tools::process::{kill_orphans, own_descendants};
}

pub use builder::{BuildError, Built, Env, SessionBuilder, SessionOptions, DEFAULT_MODEL};
pub use context::SessionContext;
pub use emit::Emitter;
pub use end::TurnEnd;
pub use event::{Emitted, Event};
/// The bounded, type-checked reader of repository files (settings, agents, memory, commands).
pub use keel_tools::repofile;
pub use session::{AgentScope, InterruptReceipt, Session, SessionHandle, SessionRole};

/// The protocol version keel speaks, reported as `claude_code_version` in `system/init` (the
/// official SDKs read that field to check compatibility).
pub const PROTOCOL_VERSION: &str = "2.1.332";
/// keel's own version.
pub const KEEL_VERSION: &str = env!("CARGO_PKG_VERSION");
