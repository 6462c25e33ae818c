//! keel's engine: a [`Session`] owns the conversation and runs turns.
//!
//! A turn streams a reply from the model (with the retry policy of [`retry`]), runs the tools it
//! asks for (permissions in [`permissions`], dispatch and truthful cancellation in
//! [`dispatch`]), and loops until the model ends its turn or a limit, an error or an interrupt
//! ends it. Every turn ends with exactly one `result` frame, derived from a [`TurnEnd`] — the
//! same value the front end maps to its exit code, so the two cannot disagree.

pub mod agents;
pub mod approval;
pub mod config;
pub mod cost;
pub mod dispatch;
pub mod emit;
pub mod end;
pub mod history;
pub mod hooks;
mod live;
pub mod permissions;
pub mod prompt;
mod reply;
pub mod retry;
pub mod session;
pub mod tasks;
pub mod transcript;

pub use config::SessionConfig;
pub use emit::Emitter;
pub use end::TurnEnd;
pub use session::{InterruptReceipt, Session, SessionHandle};

/// The protocol version keel speaks, reported as `claude_code_version` in `system/init` (the
/// official SDKs read that field to check compatibility).
pub const PROTOCOL_VERSION: &str = "2.1.330";
/// keel's own version.
pub const KEEL_VERSION: &str = env!("CARGO_PKG_VERSION");
