//! keel's shared vocabulary: pure data and serde, no I/O.
//!
//! - [`content`]: Messages API content blocks and messages.
//! - [`sse`]: the Messages API streaming events.
//! - [`frames`]: the stream-json frames keel writes and reads (system, assistant, user, result,
//!   stream_event) and the control protocol.

pub mod cancel;

pub use cancel::CancelReason;
