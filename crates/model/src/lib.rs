//! Talking to model APIs.
//!
//! [`Model`] is what the engine calls: send one request, get a stream of SSE events (or, as a
//! last resort after streaming kept failing, one complete reply). [`AnthropicClient`] speaks the
//! Messages API; [`OpenAiClient`] speaks OpenAI's Responses and Chat Completions APIs and
//! translates them to the Messages API's events; [`Router`] picks one per model. There is deliberately no retry loop here: the engine wraps every provider in
//! the same retry policy so they all behave, and report, alike. Every failure is an
//! [`ApiError`] that knows whether it is worth retrying.

mod anthropic;
pub mod cloud;
mod error;
#[cfg(test)]
mod keep_alive_tests;
pub mod openai;
mod provider;
mod request;
mod sse_body;

use std::pin::Pin;

use futures_util::Stream;
use keel_protocol::content::AssistantMessage;
use keel_protocol::StreamEvent;
use serde_json::Value;

pub use anthropic::{AnthropicClient, ClientConfig, DEFAULT_BASE_URL, MAX_RETRY_AFTER};
pub use cloud::{BedrockAuth, BedrockClient, BedrockConfig, VertexClient, VertexConfig};
pub use error::{ApiError, ApiErrorKind, ErrorClass};
pub use openai::{OpenAiApi, OpenAiClient, OpenAiOptions, OPENAI_DEFAULT_BASE_URL};
pub use provider::{Provider, ProviderChoice, Router};
pub use request::{
    estimate_tokens, message_tokens, EncodedMessage, ModelRequest, RequestMessage, ToolSpec,
    MAX_CACHE_BREAKPOINTS, MIN_CACHEABLE_TOKENS,
};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// One event of a streamed reply: the typed event and the raw JSON the API sent (forwarded as
/// `stream_event` frames with `--include-partial-messages`).
#[derive(Clone, Debug)]
pub struct SseEvent {
    /// The typed event.
    pub event: StreamEvent,
    /// The event exactly as received.
    pub raw: Value,
}

/// A streamed reply. Ends with `Ok(MessageStop)`, or with an error; a stream that ends without
/// `message_stop` yields [`ApiErrorKind::StreamDropped`] as its last item.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<SseEvent, ApiError>> + Send>>;

/// A model API.
pub trait Model: Send + Sync {
    /// Send a streaming request; resolves once the response headers arrived.
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> BoxFuture<'a, Result<EventStream, ApiError>>;
    /// Send a non-streaming request and wait for the whole reply.
    fn complete<'a>(
        &'a self,
        req: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ApiError>>;
}

/// Entry points for the fuzz targets (not a stable API).
#[doc(hidden)]
pub mod fuzzing {
    use std::time::Duration;

    /// The typed events keel reads from an SSE body `data`, delivered in two chunks split at
    /// `split` (so events cut across reads are exercised too).
    pub fn sse_events(data: &[u8], split: usize) -> crate::EventStream {
        let split = split.min(data.len());
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = vec![
            Ok(bytes::Bytes::copy_from_slice(&data[..split])),
            Ok(bytes::Bytes::copy_from_slice(&data[split..])),
        ];
        crate::anthropic::sse_events(
            futures_util::stream::iter(chunks),
            Duration::from_secs(5),
            None,
        )
    }

    /// The events keel reads from a Bedrock event-stream body `data`, delivered in two chunks
    /// split at `split`.
    pub fn bedrock_events(data: &[u8], split: usize) -> crate::EventStream {
        let split = split.min(data.len());
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = vec![
            Ok(bytes::Bytes::copy_from_slice(&data[..split])),
            Ok(bytes::Bytes::copy_from_slice(&data[split..])),
        ];
        crate::cloud::bedrock::event_stream(
            futures_util::stream::iter(chunks),
            Duration::from_secs(5),
            None,
        )
    }

    /// The Messages API events keel makes of an OpenAI API's SSE body `data` (split in two
    /// chunks at `split`), for a request to `model`.
    pub fn openai_events(
        api: crate::OpenAiApi,
        model: &str,
        data: &[u8],
        split: usize,
    ) -> crate::EventStream {
        let split = split.min(data.len());
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = vec![
            Ok(bytes::Bytes::copy_from_slice(&data[..split])),
            Ok(bytes::Bytes::copy_from_slice(&data[split..])),
        ];
        let translate: Box<dyn crate::openai::Translate> = match api {
            crate::OpenAiApi::Chat => Box::new(crate::openai::chat::Stream::new(model)),
            crate::OpenAiApi::Responses => Box::new(crate::openai::responses::Stream::new(model)),
        };
        crate::openai::translated(
            futures_util::stream::iter(chunks),
            translate,
            Duration::from_secs(5),
            None,
        )
    }
}
