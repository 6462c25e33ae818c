//! keel-mock: a scripted, fault-injecting Anthropic Messages API server on loopback.
//!
//! It replays a [`Scenario`] (text, tool calls, HTTP errors, stream errors, dropped connections,
//! stalls), validates each request the way the real API does, and records every request.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use keel_mock::{Call, MockServer, Scenario, Step};
//! let server = MockServer::start(Scenario::new(vec![
//!     Step::tool_use(vec![Call::new("Bash", serde_json::json!({"command": "echo hi"}))]),
//!     Step::text("done"),
//! ]))
//! .await?;
//! // point the client at server.base_url(), then inspect server.requests()
//! # Ok(()) }
//! ```

mod body;
pub mod cache;
pub mod cloud;
mod dialect;
pub mod entra;
mod handler;
pub mod openai;
mod record;
mod reply;
mod scenario;
mod select;
mod server;
mod validate;

pub use record::RecordedRequest;
pub use scenario::{
    default_error_message, default_error_type, status_for_error_type, Call, Match, OnExhausted,
    RawData, RawEnd, RawEvent, Scenario, ScenarioError, SearchHit, StallPhase, Step, StepKind,
    UsageOverride, DEFAULT_DROP_AFTER_EVENTS, DEFAULT_DROP_TEXT, DEFAULT_SSE_ERROR_AFTER_EVENTS,
    DEFAULT_STALL_AFTER_EVENTS, DEFAULT_STALL_TEXT, MAX_AFTER_EVENTS, MAX_MS, MAX_TIMES,
};
pub use server::{MockConfig, MockServer};
pub use validate::{signature, validate_request};
