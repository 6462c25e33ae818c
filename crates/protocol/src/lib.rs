//! keel's shared vocabulary: pure data and serde, no I/O.
//!
//! - [`content`]: Messages API content blocks, messages and usage.
//! - [`sse`]: the Messages API streaming events.
//! - [`frames`]: the stream-json frames keel writes and reads (system, assistant, user, result,
//!   stream_event) and the control protocol envelopes.
//! - [`control`]: the control protocol's requests, typed by subtype.
//! - [`ends`]: how a run or turn ended (result subtypes, terminal reasons), and cancel reasons.
//! - [`json`]: helpers for JSON read from outside (how a value's type is named in errors).
//!
//! Reading is tolerant: unknown frame types, block types and fields are kept (`Other`, `extra`)
//! so that a round trip loses nothing and a newer peer never breaks an older keel.

pub mod cancel;
pub mod content;
pub mod control;
pub mod ends;
pub mod eventstream;
pub mod frames;
pub mod input;
pub mod json;
pub mod sse;
mod tagged;

pub use cancel::CancelReason;
pub use content::{
    ApiMessage, ContentBlock, MessageContent, Role, TextBlock, ThinkingBlock, ToolResultBlock,
    ToolResultContent, ToolUseBlock, Usage,
};
pub use ends::{ResultSubtype, TerminalReason};
pub use frames::*;
pub use sse::{Delta, StreamEvent};

/// The free-form JSON object used for fields keel does not model.
pub type Extra = serde_json::Map<String, serde_json::Value>;
