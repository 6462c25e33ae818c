//! keel-sdk: drive keel — or any CLI that speaks Claude Code's headless stream-json protocol,
//! `claude` included — from Rust.
//!
//! Three ways in:
//! - [`query()`]: one prompt, a `Stream` of typed [`Message`]s.
//! - [`Client`]: a multi-turn session with [`interrupt`](Client::interrupt),
//!   [`set_model`](Client::set_model), [`set_permission_mode`](Client::set_permission_mode), a
//!   permission callback and hook callbacks.
//! - [`execute_prompt`] / [`execute_streaming`]: for scripts and tools that just run a prompt and
//!   want a verdict ([`PromptResult`]) or events that explain failures ([`ExecEvent`]).
//!
//! # The error contract
//!
//! One enum, [`Error`], says what really happened. A non-zero exit right after a `result` with
//! `is_error: true` is [`Error::Result`] (its message is the result's own text, e.g.
//! "Reached maximum number of turns (1)"), raised after that result was yielded; any other
//! non-zero exit is [`Error::Process`] with the real stderr tail. Unknown message types and
//! fields are passed through ([`Frame::Other`](keel_protocol::Frame::Other), `extra`), never an
//! error. See the crate README for the full table.
//!
//! # Processes
//!
//! The CLI runs in its own process group with stdout read line by line (no small line cap) and
//! stderr kept in a bounded ring. It dies with its owner: dropping a stream or client kills the
//! group, and on Linux the CLI also gets SIGKILL if the host process dies.
//!
//! Every queue is bounded: stdout is read as fast as messages are taken, so a consumer that
//! stops reading holds the CLI back. While a control request waits for its answer the reader
//! reads ahead (bounded) so that the answer still gets through.

mod argv;
mod callbacks;
mod client;
mod error;
mod executor;
mod lines;
mod message;
mod options;
mod process;
mod query;
mod session;
mod stderr;
mod tracker;

pub use argv::DEFAULT_CLI;
pub use callbacks::{
    can_use_tool, hook_callback, CallbackResult, CanUseTool, HookCallback, HookInput, HookMatcher,
    PermissionResult, StderrCallback, ToolPermissionRequest,
};
pub use client::{Client, ClientHandle, ResponseStream};
pub use error::{result_message, Error, Result, ResultError};
pub use executor::{execute_prompt, execute_streaming, ExecEvent, ExecStream, PromptResult};
pub use message::Message;
pub use options::{
    Options, PromptMode, DEFAULT_CLOSE_GRACE, DEFAULT_CONTROL_TIMEOUT, DEFAULT_MAX_LINE_BYTES,
    DEFAULT_STDERR_RING_BYTES,
};
pub use process::{Closed, Escalation};
pub use query::{query, MessageStream};

/// The protocol types messages are made of, re-exported.
pub use keel_protocol as protocol;
