//! OpenAI's two APIs — Responses and Chat Completions — behind keel's [`Model`] trait.
//!
//! The engine speaks one dialect: the Messages API's content blocks and stream events. These
//! adapters translate a [`ModelRequest`] into the other API's body, and the other API's stream
//! back into Messages API events (`message_start`, `content_block_*`, `message_delta`,
//! `message_stop`), so retries, cancellation, pairing, the transcript and the printers work the
//! same whatever the provider. What the other APIs get wrong in the wild is handled here and
//! nowhere else:
//! - tool-call ids are mapped both ways so each side only ever sees ids it accepts ([`ids`]);
//! - a streamed tool call is assembled by index, by id, or by position when a server sends no
//!   index, repeats index 0, or sends the name after the arguments ([`chat::Calls`]);
//! - whether the model called tools is decided from the calls received, never from
//!   `finish_reason`;
//! - an `is_error` tool result is sent as text that says the call failed.

pub(crate) mod chat;
pub mod ids;
pub(crate) mod responses;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use keel_protocol::content::AssistantMessage;
use keel_protocol::{ContentBlock, MessageContent, StreamEvent, ToolResultContent};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

use crate::anthropic::{
    endpoint, header_value, http_client, post, request_id, truncate, within, ClientConfig,
};
use crate::error::{ApiError, ApiErrorKind};
use crate::request::{ModelRequest, RequestMessage};
use crate::{BoxFuture, EventStream, Model, SseEvent};

/// OpenAI's API, used when `OPENAI_BASE_URL` is not set.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The line an error tool result starts with on the OpenAI APIs, which have no `is_error`.
pub const FAILED_CALL_MARK: &str = "[the tool call failed]";

/// The most tool calls keel accepts in one reply (a larger index is a broken stream).
pub(crate) const MAX_CALLS: usize = 1024;

/// Which of OpenAI's APIs a client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenAiApi {
    /// `POST {base}/responses`.
    Responses,
    /// `POST {base}/chat/completions`.
    Chat,
}

/// Choices that differ between servers speaking the same API.
#[derive(Clone, Debug)]
pub struct OpenAiOptions {
    /// The Chat Completions field that carries the output cap: `max_completion_tokens`
    /// (OpenAI's current name) or `max_tokens` (what older compatible servers know).
    pub chat_max_tokens_field: String,
}

impl Default for OpenAiOptions {
    fn default() -> Self {
        Self {
            chat_max_tokens_field: "max_completion_tokens".into(),
        }
    }
}

/// A client for one of OpenAI's APIs (or a server compatible with it).
#[derive(Clone, Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    cfg: ClientConfig,
    api: OpenAiApi,
    options: OpenAiOptions,
    url: String,
    last_body: std::sync::Arc<AtomicUsize>,
    cache: std::sync::Arc<std::sync::Mutex<ConvCache>>,
}

impl std::fmt::Debug for ConvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConvCache({} messages)", self.by_message.len())
    }
}

impl OpenAiClient {
    /// Build a client; `cfg.base_url` includes the version path (`https://api.openai.com/v1`)
    /// and `cfg.api_key` is sent as a bearer token.
    pub fn new(
        api: OpenAiApi,
        cfg: ClientConfig,
        options: OpenAiOptions,
    ) -> Result<Self, ApiError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &cfg.api_key {
            headers.insert(
                "authorization",
                header_value(&format!("Bearer {key}"), "the API key")?,
            );
        }
        let http = http_client(headers, &cfg)?;
        let path = match api {
            OpenAiApi::Responses => "/responses",
            OpenAiApi::Chat => "/chat/completions",
        };
        let url = endpoint(&cfg.base_url, path)?;
        if !matches!(
            options.chat_max_tokens_field.as_str(),
            "max_completion_tokens" | "max_tokens"
        ) {
            return Err(ApiError::new(
                ApiErrorKind::Config,
                format!(
                    "the output cap field must be max_completion_tokens or max_tokens, not {:?}",
                    options.chat_max_tokens_field
                ),
            ));
        }
        Ok(Self {
            http,
            cfg,
            api,
            options,
            url,
            last_body: Default::default(),
            cache: Default::default(),
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The request body for `req`, as bytes.
    ///
    /// Each history message is converted to this API's items once and its bytes reused while
    /// the history holds it (see [`Converted`]); only the head, the system prompt and the
    /// messages built for this request alone are converted at every request.
    pub fn body(&self, req: &ModelRequest, stream: bool) -> Result<Vec<u8>, ApiError> {
        let (head, list_key, first) = match self.api {
            OpenAiApi::Chat => (
                chat::head(req, stream, &self.options),
                "messages",
                chat::system_item(req),
            ),
            OpenAiApi::Responses => (responses::head(req, stream), "input", None),
        };
        let items = self.converted(req)?;
        let hint = self.last_body.load(Ordering::Relaxed);
        let mut buf = Vec::with_capacity(hint + hint / 8 + 4096);
        let encode = |e: serde_json::Error| {
            ApiError::new(
                ApiErrorKind::Config,
                format!("could not encode the request: {e}"),
            )
        };
        serde_json::to_writer(&mut buf, &head).map_err(encode)?;
        // The head is an object with a model: drop its `}` and append the list.
        buf.pop();
        buf.extend_from_slice(b",\"");
        buf.extend_from_slice(list_key.as_bytes());
        buf.extend_from_slice(b"\":[");
        let mut comma = false;
        if let Some(f) = first {
            serde_json::to_writer(&mut buf, &f).map_err(encode)?;
            comma = true;
        }
        for raw in items.iter().flat_map(|m| m.iter()) {
            if comma {
                buf.push(b',');
            }
            buf.extend_from_slice(raw.get().as_bytes());
            comma = true;
        }
        buf.extend_from_slice(b"]}");
        self.last_body.store(buf.len(), Ordering::Relaxed);
        Ok(buf)
    }

    /// This API's items for every message of `req`, from the cache where it can.
    fn converted(&self, req: &ModelRequest) -> Result<Vec<Items>, ApiError> {
        let convert = |m: &keel_protocol::ApiMessage| -> Result<Items, ApiError> {
            let values = match self.api {
                OpenAiApi::Chat => chat::items(m),
                OpenAiApi::Responses => responses::items(m),
            };
            values
                .iter()
                .map(|v| {
                    serde_json::value::to_raw_value(v).map_err(|e| {
                        ApiError::new(
                            ApiErrorKind::Config,
                            format!("could not encode the request: {e}"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Items::from)
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.generation += 1;
        let generation = cache.generation;
        let mut out = Vec::with_capacity(req.messages.len());
        for (i, m) in req.messages.iter().enumerate() {
            match m {
                RequestMessage::Owned(m) => out.push(convert(m)?),
                RequestMessage::Encoded(e) => {
                    let key = e.identity();
                    if let Some(c) = cache.by_message.get_mut(&key) {
                        c.used = generation;
                        out.push(c.items.clone());
                        continue;
                    }
                    let typed = e.decode().ok_or_else(|| {
                        ApiError::new(
                            ApiErrorKind::Config,
                            format!("message {i} of the history cannot be read back"),
                        )
                    })?;
                    let items = convert(&typed)?;
                    cache.by_message.insert(
                        key,
                        Converted {
                            _keep: e.clone(),
                            items: items.clone(),
                            used: generation,
                        },
                    );
                    out.push(items);
                }
            }
        }
        // Kept while one of the last few requests used them: a session's requests and its
        // subagents' interleave, and a history left behind (a compaction) is let go.
        cache
            .by_message
            .retain(|_, c| generation - c.used < CACHE_GENERATIONS);
        Ok(out)
    }
}

/// A history message's items, as this API's JSON, shared between requests.
type Items = std::sync::Arc<[Box<serde_json::value::RawValue>]>;

/// How many requests an unused conversion survives.
const CACHE_GENERATIONS: u64 = 16;

/// One history message, converted.
struct Converted {
    /// Holds the message, so its identity is not reused while this entry lives.
    _keep: crate::request::EncodedMessage,
    items: Items,
    used: u64,
}

/// Conversions of history messages, by the message's identity.
#[derive(Default)]
struct ConvCache {
    by_message: std::collections::HashMap<usize, Converted>,
    generation: u64,
}

impl Model for OpenAiClient {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> BoxFuture<'a, Result<EventStream, ApiError>> {
        Box::pin(async move {
            let body = self.body(req, true)?;
            let resp = post(&self.http, &self.url, body, self.cfg.idle_timeout).await?;
            let rid = request_id(resp.headers());
            let translate: Box<dyn Translate> = match self.api {
                OpenAiApi::Chat => Box::new(chat::Stream::new(&req.model)),
                OpenAiApi::Responses => Box::new(responses::Stream::new(&req.model)),
            };
            Ok(translated(
                resp.bytes_stream(),
                translate,
                self.cfg.idle_timeout,
                rid,
            ))
        })
    }

    fn complete<'a>(
        &'a self,
        req: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ApiError>> {
        Box::pin(async move {
            let fut = async {
                let body = self.body(req, false)?;
                let resp = post(&self.http, &self.url, body, self.cfg.idle_timeout).await?;
                let rid = request_id(resp.headers());
                let bytes =
                    crate::sse_body::read_whole(resp, crate::sse_body::MAX_REPLY_BYTES).await?;
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    ApiError::new(ApiErrorKind::Decode, format!("the reply is not JSON: {e}"))
                })?;
                let msg = match self.api {
                    OpenAiApi::Chat => chat::complete(&v, &req.model)?,
                    OpenAiApi::Responses => responses::complete(&v, &req.model)?,
                };
                Ok((msg, rid))
            };
            within(self.cfg.request_timeout, fut).await
        })
    }
}

/// What one API's stream becomes: Messages API events.
pub(crate) trait Translate: Send {
    /// One SSE event (`name` is empty when the server sent none). Returns whether the reply
    /// is complete.
    fn event(&mut self, name: &str, data: &str, out: &mut Out) -> Result<bool, ApiError>;
    /// The body ended cleanly; finish the reply if what came is a whole reply.
    fn eof(&mut self, out: &mut Out) -> Result<(), ApiError>;
}

/// Messages API events built from another API's stream, block by block.
#[derive(Default)]
pub(crate) struct Out {
    queue: VecDeque<SseEvent>,
    next_index: usize,
    text: Option<usize>,
    started: bool,
    finished: bool,
}

impl Out {
    fn push(&mut self, raw: Value) -> Result<(), ApiError> {
        let event: StreamEvent = serde_json::from_value(raw.clone()).map_err(|e| {
            ApiError::new(
                ApiErrorKind::Protocol,
                format!("keel built an event it cannot read ({e})"),
            )
        })?;
        self.queue.push_back(SseEvent { event, raw });
        Ok(())
    }

    /// `message_start`, once.
    pub(crate) fn start(&mut self, id: &str, model: &str) -> Result<(), ApiError> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        self.push(json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0}
        }}))
    }

    /// More text: a text block opens if none is open.
    pub(crate) fn text(&mut self, piece: &str) -> Result<(), ApiError> {
        if piece.is_empty() {
            return Ok(());
        }
        let index = match self.text {
            Some(i) => i,
            None => {
                let i = self.open(json!({"type": "text", "text": ""}))?;
                self.text = Some(i);
                i
            }
        };
        self.push(json!({"type": "content_block_delta", "index": index,
                         "delta": {"type": "text_delta", "text": piece}}))
    }

    /// Close the open text block, if any.
    pub(crate) fn close_text(&mut self) -> Result<(), ApiError> {
        if let Some(i) = self.text.take() {
            self.push(json!({"type": "content_block_stop", "index": i}))?;
        }
        Ok(())
    }

    fn open(&mut self, block: Value) -> Result<usize, ApiError> {
        let index = self.next_index;
        self.next_index += 1;
        self.push(json!({"type": "content_block_start", "index": index, "content_block": block}))?;
        Ok(index)
    }

    /// A whole thinking block.
    pub(crate) fn thinking(&mut self, thinking: &str, signature: &str) -> Result<(), ApiError> {
        self.close_text()?;
        let i = self.open(json!({"type": "thinking", "thinking": "", "signature": ""}))?;
        if !thinking.is_empty() {
            self.push(json!({"type": "content_block_delta", "index": i,
                             "delta": {"type": "thinking_delta", "thinking": thinking}}))?;
        }
        self.push(json!({"type": "content_block_delta", "index": i,
                         "delta": {"type": "signature_delta", "signature": signature}}))?;
        self.push(json!({"type": "content_block_stop", "index": i}))
    }

    /// A whole tool call; `arguments` is the JSON text the model wrote (checked by the engine).
    pub(crate) fn tool_use(
        &mut self,
        id: &str,
        name: &str,
        arguments: &str,
    ) -> Result<(), ApiError> {
        self.close_text()?;
        let i = self.open(json!({"type": "tool_use", "id": id, "name": name, "input": {}}))?;
        if !arguments.trim().is_empty() {
            self.push(json!({"type": "content_block_delta", "index": i,
                             "delta": {"type": "input_json_delta", "partial_json": arguments}}))?;
        }
        self.push(json!({"type": "content_block_stop", "index": i}))
    }

    /// `message_delta` with the stop reason and the usage, then `message_stop`.
    pub(crate) fn finish(&mut self, stop_reason: &str, usage: Value) -> Result<(), ApiError> {
        self.close_text()?;
        self.push(json!({"type": "message_delta",
                         "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                         "usage": usage}))?;
        self.push(json!({"type": "message_stop"}))?;
        self.finished = true;
        Ok(())
    }
}

/// Turn a provider's SSE body into Messages API events. Like the Messages API stream: nothing
/// runs ahead of the consumer, silence past `idle` is an error, and a body that ends before the
/// reply is complete yields [`ApiErrorKind::StreamDropped`].
pub(crate) fn translated<S, E>(
    bytes: S,
    translate: Box<dyn Translate>,
    idle: Duration,
    rid: Option<String>,
) -> EventStream
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    struct State<S> {
        // None once the reply is complete: what is left of the body is read in the background.
        events: Option<S>,
        translate: Box<dyn Translate>,
        out: Out,
        idle: Duration,
        rid: Option<String>,
        done: bool,
    }
    let state = State {
        events: Some(crate::sse_body::events(
            bytes,
            crate::sse_body::MAX_EVENT_BYTES,
        )),
        translate,
        out: Out::default(),
        idle,
        rid,
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.out.queue.pop_front() {
                return Some((Ok(ev), st));
            }
            if st.done || st.out.finished {
                return None;
            }
            let events = st.events.as_mut()?;
            let next = match tokio::time::timeout(st.idle, events.next()).await {
                Err(_) => Err(ApiError::new(
                    ApiErrorKind::StreamIdle,
                    format!("the stream sent nothing for {} ms", st.idle.as_millis()),
                )),
                Ok(None) => st.translate.eof(&mut st.out).and_then(|()| {
                    if st.out.finished {
                        Ok(())
                    } else {
                        Err(ApiError::new(
                            ApiErrorKind::StreamDropped,
                            "the stream ended before the reply was complete",
                        ))
                    }
                }),
                Ok(Some(Err(e))) => Err(crate::sse_body::fault(e)),
                Ok(Some(Ok(ev))) => {
                    if ev.data.is_empty() {
                        continue;
                    }
                    st.translate
                        .event(&ev.event, &ev.data, &mut st.out)
                        .map(|_| ())
                }
            };
            if let Err(mut e) = next {
                st.done = true;
                if e.request_id.is_none() {
                    e.request_id = st.rid.clone();
                }
                // Events from earlier input were delivered; the failing input's are not.
                st.out.queue.clear();
                return Some((Err(e), st));
            }
            // The reply is whole: the consumer stops at its message_stop and drops this
            // stream. The end of the body (a `[DONE]`, the chunked terminator) may still be on
            // its way, and a body dropped before its end costs its connection.
            if st.out.finished {
                if let Some(rest) = st.events.take() {
                    crate::sse_body::drain_in_background(rest);
                }
            }
        }
    }))
}

/// Parse one event's JSON data, or fail the stream naming what came.
pub(crate) fn parse_data(data: &str) -> Result<Value, ApiError> {
    serde_json::from_str(data).map_err(|e| {
        ApiError::new(
            ApiErrorKind::Protocol,
            format!(
                "the stream sent an event that is not JSON ({e}): {}",
                truncate(data, 200)
            ),
        )
    })
}

/// An error reported inside a stream (`{"error": {...}}`, an `error` event, a failed
/// response): its code (or type) and message.
pub(crate) fn stream_error(err: &Value, rid: Option<String>) -> ApiError {
    let text = |k: &str| err.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    ApiError {
        kind: ApiErrorKind::StreamError,
        status: None,
        error_type: text("code").or_else(|| text("type")).map(str::to_owned),
        message: text("message")
            .unwrap_or("the stream reported an error")
            .to_owned(),
        retry_after: None,
        request_id: rid,
    }
}

/// Usage in the Messages API's terms: OpenAI counts cached tokens inside the input tokens,
/// the Messages API beside them.
pub(crate) fn usage(input: u64, cached: u64, output: u64) -> Value {
    json!({
        "input_tokens": input.saturating_sub(cached),
        "cache_read_input_tokens": cached.min(input),
        "cache_creation_input_tokens": 0,
        "output_tokens": output,
    })
}

/// A count from the wire: a non-negative integer, else 0.
pub(crate) fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The reasoning effort that matches a thinking budget, when thinking was asked for
/// (`{"type": "enabled", "budget_tokens": N}`); OpenAI's models take an effort, not a budget.
pub(crate) fn reasoning_effort(req: &ModelRequest) -> Option<&'static str> {
    let t = req.thinking.as_ref()?;
    if t.get("type").and_then(Value::as_str) != Some("enabled") {
        return None;
    }
    Some(
        match t.get("budget_tokens").and_then(Value::as_u64).unwrap_or(0) {
            0..=4_095 => "low",
            4_096..=16_383 => "medium",
            _ => "high",
        },
    )
}

/// The system prompt as one text.
pub(crate) fn system_text(req: &ModelRequest) -> String {
    req.system
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The blocks of a message.
pub(crate) fn blocks(c: &MessageContent) -> Vec<ContentBlock> {
    match c {
        MessageContent::Text(t) => vec![ContentBlock::text(t.clone())],
        MessageContent::Blocks(b) => b.clone(),
    }
}

/// A user turn, taken apart the way both OpenAI APIs need it: the tool results (each sent on
/// its own, answering its call), then what the user said.
pub(crate) struct UserTurn {
    /// (the id to send, the result as text) per tool result, in order.
    pub results: Vec<(String, String)>,
    /// The text and images, in order.
    pub parts: Vec<UserPart>,
}

/// A piece of what the user said.
pub(crate) enum UserPart {
    Text(String),
    /// An image as a URL (`data:` for inline images).
    Image(String),
}

impl UserTurn {
    pub(crate) fn of(bs: &[ContentBlock]) -> Self {
        let mut turn = UserTurn {
            results: Vec::new(),
            parts: Vec::new(),
        };
        let mut images_dropped = 0;
        for b in bs {
            match b {
                ContentBlock::ToolResult(r) => {
                    let (text, images) = tool_result_text(&r.content, r.is_error == Some(true));
                    images_dropped += images;
                    turn.results.push((ids::outbound(&r.tool_use_id), text));
                }
                ContentBlock::Text(t) => turn.parts.push(UserPart::Text(t.text.clone())),
                ContentBlock::Image(i) => {
                    if let Some(url) = image_url(&i.source) {
                        turn.parts.push(UserPart::Image(url));
                    }
                }
                _ => {}
            }
        }
        if images_dropped > 0 {
            turn.parts.push(UserPart::Text(format!(
                "({images_dropped} image(s) from tool results were not sent: this API's tool results carry text only)"
            )));
        }
        turn
    }
}

/// What a tool result says, as text, and how many images it held; an error result says that
/// the call failed, since these APIs have no `is_error`.
fn tool_result_text(content: &ToolResultContent, is_error: bool) -> (String, usize) {
    let mut images = 0;
    let text = match content {
        ToolResultContent::Text(t) => t.clone(),
        ToolResultContent::Blocks(bs) => bs
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                ContentBlock::Image(_) => {
                    images += 1;
                    None
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    let text = if is_error {
        format!("{FAILED_CALL_MARK}\n{text}")
    } else {
        text
    };
    (text, images)
}

/// A `data:` URL for an image block with a base64 source (a `url` source as it is).
fn image_url(source: &Value) -> Option<String> {
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => Some(format!(
            "data:{};base64,{}",
            source.get("media_type")?.as_str()?,
            source.get("data")?.as_str()?
        )),
        Some("url") => source.get("url")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// keel's id for the `n`th call of a reply, which must have a name: the server's id mapped in,
/// or, when the server sent none, one derived from the reply's id (so it is unique).
pub(crate) fn call_id(
    name: &str,
    id: Option<&str>,
    reply_id: &str,
    n: usize,
) -> Result<String, ApiError> {
    if name.is_empty() {
        return Err(ApiError::new(
            ApiErrorKind::Protocol,
            format!("the reply's tool call {n} has no name"),
        ));
    }
    Ok(match id {
        Some(id) => ids::inbound(id),
        None => ids::inbound(&format!("call_{n}_{reply_id}")),
    })
}

/// The stop reason in the Messages API's terms. A reply that called tools stops for
/// `tool_use` whatever `finish_reason` said, unless it was cut at the output cap.
pub(crate) fn stop_reason(cut_at_cap: bool, filtered: bool, called_tools: bool) -> &'static str {
    if cut_at_cap {
        "max_tokens"
    } else if called_tools {
        "tool_use"
    } else if filtered {
        "refusal"
    } else {
        "end_turn"
    }
}

/// An assistant message built from complete blocks (the non-streaming fallback).
pub(crate) fn assistant(
    id: &str,
    model: &str,
    content: Vec<Value>,
    stop_reason: &str,
    usage: Value,
) -> Result<AssistantMessage, ApiError> {
    serde_json::from_value(json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
    }))
    .map_err(|e| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("the reply cannot be read as a message: {e}"),
        )
    })
}

/// A tool call's arguments as an input object, for the non-streaming fallback (the same
/// rule as the streamed path: invalid JSON reaches the tool, which refuses it clearly).
pub(crate) fn input_of(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments)
        .unwrap_or_else(|e| json!({"__invalid_json__": arguments, "__error__": e.to_string()}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::EncodedMessage;
    use keel_protocol::{ApiMessage, Role};

    fn client(api: OpenAiApi) -> OpenAiClient {
        let cfg = ClientConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
            ..ClientConfig::default()
        };
        OpenAiClient::new(api, cfg, OpenAiOptions::default()).unwrap()
    }

    fn request(history: &[EncodedMessage]) -> ModelRequest {
        ModelRequest {
            model: "gpt-test".into(),
            max_tokens: 10,
            system: vec![json!({"type": "text", "text": "sys"})],
            messages: history
                .iter()
                .cloned()
                .map(RequestMessage::Encoded)
                .collect(),
            tools: Default::default(),
            stream: true,
            metadata: None,
            thinking: None,
        }
    }

    fn message(role: Role, text: &str) -> EncodedMessage {
        EncodedMessage::new(&ApiMessage {
            role,
            content: MessageContent::Text(text.into()),
        })
    }

    #[test]
    fn history_is_converted_once_and_the_body_is_the_same_as_fresh() {
        for api in [OpenAiApi::Chat, OpenAiApi::Responses] {
            let warm = client(api);
            let mut history = vec![message(Role::User, "first")];
            for turn in 0..40 {
                let req = request(&history);
                let body = warm.body(&req, true).unwrap();
                assert_eq!(
                    body,
                    client(api).body(&req, true).unwrap(),
                    "{api:?} turn {turn}"
                );
                let v: Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(v["model"], "gpt-test");
                history.push(message(Role::Assistant, &format!("a{turn}")));
                history.push(message(Role::User, &format!("u{turn}")));
            }
            // Every message of the history is held once; a history left behind (a compaction,
            // another session) is let go after a few requests.
            assert_eq!(
                warm.cache.lock().unwrap().by_message.len(),
                history.len() - 2
            );
            let fresh = vec![message(Role::User, "after a compaction")];
            for _ in 0..CACHE_GENERATIONS {
                warm.body(&request(&fresh), true).unwrap();
            }
            assert_eq!(warm.cache.lock().unwrap().by_message.len(), 1);
        }
    }
}
