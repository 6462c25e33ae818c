//! The Anthropic Messages API client (streaming SSE and non-streaming).

use std::time::Duration;

use eventsource_stream::EventStreamError;
use futures_util::StreamExt;
use keel_protocol::content::AssistantMessage;
use keel_protocol::sse::ErrorEvent;
use keel_protocol::StreamEvent;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

pub(crate) use crate::error::transport_error;
use crate::error::{ApiError, ApiErrorKind};
use crate::request::ModelRequest;
use crate::sse_body;
use crate::{BoxFuture, EventStream, Model, SseEvent};

/// The public API, used when `ANTHROPIC_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
/// Error bodies are read up to this size; the rest is not needed to explain the error.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How to reach the API.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Base URL without the `/v1/messages` path.
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: Option<String>,
    /// Sent as `Authorization: Bearer` (for gateways that want it).
    pub auth_token: Option<String>,
    /// How long a TCP/TLS connect may take.
    pub connect_timeout: Duration,
    /// How long the stream (or the wait for response headers) may stay silent.
    pub idle_timeout: Duration,
    /// How long a non-streaming request may take in all.
    pub request_timeout: Duration,
    /// Sent as `user-agent`.
    pub user_agent: String,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            auth_token: None,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(45),
            request_timeout: Duration::from_secs(600),
            user_agent: concat!("keel/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

/// A Messages API client.
#[derive(Clone, Debug)]
pub struct AnthropicClient {
    http: reqwest::Client,
    cfg: ClientConfig,
    url: String,
    /// The size of the last request body (the next is about as large).
    last_body: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl AnthropicClient {
    /// Build a client. Fails if the base URL is not an http(s) URL, a header value is invalid,
    /// or the TLS stack cannot start.
    pub fn new(cfg: ClientConfig) -> Result<Self, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        if let Some(key) = &cfg.api_key {
            headers.insert("x-api-key", header_value(key, "the API key")?);
        }
        if let Some(tok) = &cfg.auth_token {
            headers.insert(
                "authorization",
                header_value(&format!("Bearer {tok}"), "the auth token")?,
            );
        }
        let http = http_client(headers, &cfg)?;
        let url = endpoint(&cfg.base_url, "/v1/messages")?;
        Ok(Self {
            http,
            cfg,
            url,
            last_body: Default::default(),
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn send(&self, req: &ModelRequest, stream: bool) -> Result<reqwest::Response, ApiError> {
        // Serialized as it is (its history is mostly bytes encoded once); only the rare
        // non-streaming fallback needs a copy with the other `stream`.
        // Sized from the last request (a conversation only grows), so the body is written
        // once instead of being copied at every doubling.
        let hint = self.last_body.load(std::sync::atomic::Ordering::Relaxed);
        let mut buf = Vec::with_capacity(hint + hint / 8 + 4096);
        let encoded = if req.stream == stream {
            serde_json::to_writer(&mut buf, req)
        } else {
            let mut body = req.clone();
            body.stream = stream;
            serde_json::to_writer(&mut buf, &body)
        };
        self.last_body
            .store(buf.len(), std::sync::atomic::Ordering::Relaxed);
        let encoded = encoded.map(|()| buf);
        let json = encoded.map_err(|e| {
            ApiError::new(
                ApiErrorKind::Config,
                format!("could not encode the request: {e}"),
            )
        })?;
        post(&self.http, &self.url, json, self.cfg.idle_timeout).await
    }
}

impl Model for AnthropicClient {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> BoxFuture<'a, Result<EventStream, ApiError>> {
        Box::pin(async move {
            let resp = self.send(req, true).await?;
            let request_id = header_str(resp.headers(), "request-id");
            Ok(sse_stream(resp, self.cfg.idle_timeout, request_id))
        })
    }

    fn complete<'a>(
        &'a self,
        req: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ApiError>> {
        Box::pin(async move {
            let fut = async {
                let resp = self.send(req, false).await?;
                let request_id = header_str(resp.headers(), "request-id");
                Ok((read_message(resp).await?, request_id))
            };
            within(self.cfg.request_timeout, fut).await
        })
    }
}

/// A header value from configuration, or a configuration error naming `what`.
pub(crate) fn header_value(v: &str, what: &str) -> Result<HeaderValue, ApiError> {
    HeaderValue::from_str(v).map_err(|_| {
        ApiError::new(
            ApiErrorKind::Config,
            format!("{what} contains characters that cannot be sent in an HTTP header"),
        )
    })
}

/// The HTTP client every provider uses: default headers, user agent, connect timeout.
pub(crate) fn http_client(
    headers: HeaderMap,
    cfg: &ClientConfig,
) -> Result<reqwest::Client, ApiError> {
    reqwest::Client::builder()
        // The bundled roots only: the system's store is parsed at every start when enabled
        // (a dependency turns that on), ~5 ms before the first request.
        .tls_built_in_native_certs(false)
        .default_headers(headers)
        .user_agent(cfg.user_agent.clone())
        .connect_timeout(cfg.connect_timeout)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| {
            ApiError::new(
                ApiErrorKind::Config,
                format!("could not start the HTTP client: {e}"),
            )
        })
}

/// `base` + `path`, checked now rather than at the first request: a bad URL is a
/// configuration error.
pub(crate) fn endpoint(base: &str, path: &str) -> Result<String, ApiError> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    match reqwest::Url::parse(&url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(url),
        Ok(u) => Err(ApiError::new(
            ApiErrorKind::Config,
            format!(
                "the base URL must be an http:// or https:// URL with a host, not a {}: URL",
                u.scheme()
            ),
        )),
        Err(e) => Err(ApiError::new(
            ApiErrorKind::Config,
            format!("the base URL is not a URL ({e})"),
        )),
    }
}

/// POST a JSON body; a success status returns the response, anything else the API's error.
/// A server that accepts the connection and then says nothing must not hang us: the wait for
/// the response headers is bounded by the idle timeout too.
pub(crate) async fn post(
    http: &reqwest::Client,
    url: &str,
    json: Vec<u8>,
    idle: Duration,
) -> Result<reqwest::Response, ApiError> {
    let send = http
        .post(url)
        .header("content-type", "application/json")
        .body(json);
    let resp = send_bounded(send, idle).await?;
    if resp.status().is_success() {
        return Ok(resp);
    }
    Err(http_error(resp).await)
}

/// Send a request, waiting for its response headers no longer than `idle`; any status is
/// returned (the caller reads its own error shape).
pub(crate) async fn send_bounded(
    req: reqwest::RequestBuilder,
    idle: Duration,
) -> Result<reqwest::Response, ApiError> {
    match tokio::time::timeout(idle, req.send()).await {
        Err(_) => Err(ApiError::new(
            ApiErrorKind::StreamIdle,
            format!("no response headers within {} ms", idle.as_millis()),
        )),
        Ok(Err(e)) => Err(transport_error(&e)),
        Ok(Ok(r)) => Ok(r),
    }
}

/// A whole request bounded by `limit` (the non-streaming fallback).
pub(crate) async fn within<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(ApiError::new(
            ApiErrorKind::StreamIdle,
            format!("no complete reply within {} s", limit.as_secs()),
        )),
    }
}

pub(crate) fn header_str(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// Turn a streaming HTTP response into typed events, watching for silence and early ends.
///
/// A plain unfold over the response: nothing runs ahead of the consumer, so memory is bounded
/// by one event, and dropping the stream drops (and so closes) the response.
pub(crate) fn sse_stream(
    resp: reqwest::Response,
    idle: Duration,
    request_id: Option<String>,
) -> EventStream {
    sse_events(resp.bytes_stream(), idle, request_id)
}

/// Typed events from any stream of body bytes (an HTTP response; the fuzz target's input).
pub(crate) fn sse_events<S, E>(bytes: S, idle: Duration, request_id: Option<String>) -> EventStream
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    struct State<S> {
        // None once the stream has ended (an error, the end, or message_stop).
        events: Option<S>,
        idle: Duration,
        request_id: Option<String>,
    }
    let state = State {
        events: Some(sse_body::events(bytes, sse_body::MAX_EVENT_BYTES)),
        idle,
        request_id,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        let events = st.events.as_mut()?;
        let item = next_event(events, st.idle, &st.request_id).await;
        // After an error, a message_stop or the end, nothing more is read by the consumer.
        match &item {
            Ok(ev) if !matches!(ev.event, StreamEvent::MessageStop(_)) => {}
            Ok(_) => {
                if let Some(rest) = st.events.take() {
                    sse_body::drain_in_background(rest);
                }
            }
            Err(_) => st.events = None,
        }
        Some((item, st))
    });
    Box::pin(stream)
}

/// The next typed event, or the error that ends the stream.
async fn next_event<S, E>(
    events: &mut S,
    idle: Duration,
    request_id: &Option<String>,
) -> Result<SseEvent, ApiError>
where
    S: futures_util::Stream<
            Item = Result<eventsource_stream::Event, EventStreamError<sse_body::BodyError<E>>>,
        > + Unpin,
    E: std::fmt::Display,
{
    loop {
        let next = tokio::time::timeout(idle, events.next())
            .await
            .map_err(|_| {
                ApiError::new(
                    ApiErrorKind::StreamIdle,
                    format!("the stream sent nothing for {} ms", idle.as_millis()),
                )
            })?;
        let ev = match next {
            None => {
                return Err(ApiError::new(
                    ApiErrorKind::StreamDropped,
                    "the stream ended before message_stop",
                ))
            }
            Some(Err(e)) => return Err(sse_body::fault(e)),
            Some(Ok(ev)) => ev,
        };
        if ev.data.is_empty() {
            continue;
        }
        return event_of(&ev.data, request_id);
    }
}

/// The typed event of one event's JSON `data`; an `error` event is the error it reports.
pub(crate) fn event_of(data: &str, request_id: &Option<String>) -> Result<SseEvent, ApiError> {
    let raw: Value = serde_json::from_str(data).map_err(|e| {
        ApiError::new(
            ApiErrorKind::Protocol,
            format!(
                "the stream sent an event that is not JSON ({e}): {}",
                truncate(data, 200)
            ),
        )
    })?;
    let event: StreamEvent = serde_json::from_value(raw.clone()).map_err(|e| {
        ApiError::new(
            ApiErrorKind::Protocol,
            format!(
                "the stream sent an event keel cannot read ({e}): {}",
                truncate(data, 200)
            ),
        )
    })?;
    if let StreamEvent::Error(ErrorEvent { error }) = &event {
        return Err(ApiError {
            kind: ApiErrorKind::StreamError,
            status: None,
            error_type: Some(error.kind.clone()),
            message: error.message.clone(),
            retry_after: None,
            request_id: request_id.clone(),
        });
    }
    Ok(SseEvent { event, raw })
}

pub(crate) fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The body of a non-streaming answer as one Messages API message (every provider that speaks
/// the Messages API answers its non-streaming call this way).
pub(crate) async fn read_message(resp: reqwest::Response) -> Result<AssistantMessage, ApiError> {
    let bytes = sse_body::read_whole(resp, sse_body::MAX_REPLY_BYTES).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("the reply is not a Messages API message: {e}"),
        )
    })
}

/// The request id a provider sent (`request-id`, or `x-request-id` as OpenAI names it).
pub(crate) fn request_id(h: &HeaderMap) -> Option<String> {
    header_str(h, "request-id").or_else(|| header_str(h, "x-request-id"))
}

/// The error's type and message from an error body: `{"error": {"type", "message"}}` (the
/// Messages API) or `{"error": {"type", "code", "message"}}` (OpenAI, whose `code` is the more
/// precise of the two and wins).
pub(crate) fn error_fields(body: &[u8]) -> Option<(Option<String>, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error")?.as_object()?;
    let text = |k: &str| e.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let message = text("message")?.to_owned();
    let kind = text("code").or_else(|| text("type")).map(str::to_owned);
    Some((kind, message))
}

pub(crate) async fn http_error(resp: reqwest::Response) -> ApiError {
    let (status, headers, body) = error_parts(resp).await;
    error_from_parts(status, &headers, &body)
}

/// The status, headers and (bounded) body of an error response.
pub(crate) async fn error_parts(resp: reqwest::Response) -> (u16, HeaderMap, Vec<u8>) {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ERROR_BODY {
            break;
        }
    }
    (status, headers, body)
}

/// The error an error response says, read as the Messages API (or OpenAI) writes it.
pub(crate) fn error_from_parts(status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
    let (error_type, message) = match error_fields(body) {
        Some(fields) => fields,
        None => (None, body_text(status, body)),
    };
    ApiError {
        kind: ApiErrorKind::Http,
        status: Some(status),
        error_type,
        message,
        retry_after: retry_after(headers),
        request_id: request_id(headers),
    }
}

/// An error body that is not JSON, trimmed for a message (or the status's reason phrase).
pub(crate) fn body_text(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = truncate(text.trim(), 300).to_owned();
    if text.is_empty() {
        reason_phrase(status).to_owned()
    } else {
        text
    }
}

fn reason_phrase(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("error")
}

/// The longest wait a `retry-after` header can ask for; anything longer (`1e30`) is read as
/// this, which is past every retry budget, so keel gives up instead of waiting.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// `retry-after-ms` (milliseconds) wins over `retry-after` (seconds, possibly fractional).
/// Values from the wire are range-checked: negative or not-a-number is ignored, huge is capped.
pub(crate) fn retry_after(h: &HeaderMap) -> Option<Duration> {
    let secs = |v: f64| -> Option<Duration> {
        if !(v.is_finite() || v == f64::INFINITY) || v < 0.0 {
            return None;
        }
        Some(Duration::try_from_secs_f64(v).map_or(MAX_RETRY_AFTER, |d| d.min(MAX_RETRY_AFTER)))
    };
    if let Some(ms) = header_str(h, "retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if let Some(d) = secs(ms / 1000.0) {
            return Some(d);
        }
    }
    let v = header_str(h, "retry-after").and_then(|v| v.trim().parse::<f64>().ok())?;
    secs(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        h.insert("retry-after-ms", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        for huge in ["1e30", "inf", "18446744073709551616"] {
            let mut h = HeaderMap::new();
            h.insert("retry-after", huge.parse().unwrap());
            assert_eq!(retry_after(&h), Some(MAX_RETRY_AFTER), "{huge}");
        }
        for junk in ["-1", "NaN", "soon"] {
            let mut h = HeaderMap::new();
            h.insert("retry-after", junk.parse().unwrap());
            assert_eq!(retry_after(&h), None, "{junk}");
        }
    }
}
