//! MCP servers reached at a URL, as rmcp transports: **streamable HTTP** (`"type": "http"`:
//! each message is POSTed; the reply comes back as JSON or as a stream of server-sent events)
//! and the legacy **HTTP + SSE** transport (`"type": "sse"`: one long GET stream carries every
//! message from the server, the first event names the URL to POST to).
//!
//! Everything is bounded: each POST by the message deadline, one message or event by
//! [`MAX_MESSAGE_BYTES`] (a bigger one is dropped and its request failed, never buffered
//! whole), and a request whose POST fails gets a JSON-RPC error that names the server, the URL
//! and the HTTP status or the network error, so the call it carried ends at once with that
//! reason. Notifications are POSTed in order, each before the next message, so
//! `notifications/initialized` reaches the server before the first request.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use crate::config::UrlSpec;

/// The largest message (a JSON body, or one event's data) read from a server.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Messages from the server waiting for rmcp to take them.
const INCOMING: usize = 256;
/// Messages waiting to be POSTed.
const OUTGOING: usize = 1024;

/// Room for a field's name and separator on a line, beside its value.
const FIELD_SLACK: usize = 64;

/// Server-sent events, parsed from a byte stream: `event` and `data` fields, one event per
/// blank line; an event whose data outgrows the cap is skipped whole (and counted).
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: String,
    data: Vec<u8>,
    /// The current event is over the cap: its data is being skipped.
    skipping: bool,
    /// Events skipped for size.
    pub oversized: u64,
    cap: usize,
}

/// One server-sent event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// Its `event` field (empty: `message`).
    pub event: String,
    /// Its data, lines joined with `\n`.
    pub data: String,
}

impl SseParser {
    /// A parser that keeps events of at most `cap` bytes of data.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            ..Self::default()
        }
    }

    /// Feed bytes; the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                // A line longer than the cap (and a field name) can only belong to an
                // oversized event: its bytes are not kept.
                if self.line.len() <= self.cap + FIELD_SLACK {
                    self.line.push(b);
                }
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if !self.skipping && (!self.data.is_empty() || !self.event.is_empty()) {
                    let mut data = std::mem::take(&mut self.data);
                    if data.last() == Some(&b'\n') {
                        data.pop();
                    }
                    out.push(SseEvent {
                        event: std::mem::take(&mut self.event),
                        data: String::from_utf8_lossy(&data).into_owned(),
                    });
                }
                self.data.clear();
                self.event.clear();
                self.skipping = false;
                continue;
            }
            if line.len() > self.cap + FIELD_SLACK && !self.skipping {
                self.skipping = true;
                self.oversized += 1;
                self.data = Vec::new();
                continue;
            }
            let (field, value) = match line.iter().position(|&c| c == b':') {
                Some(0) => continue, // a comment
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (&line[..], &b""[..]),
            };
            match field {
                b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
                b"data" if !self.skipping => {
                    if self.data.len() + value.len() + 1 > self.cap {
                        self.skipping = true;
                        self.oversized += 1;
                        self.data = Vec::new();
                    } else {
                        self.data.extend_from_slice(value);
                        self.data.push(b'\n');
                    }
                }
                _ => {}
            }
        }
        out
    }
}

/// Why a URL transport could not be set up, or why one message to the server failed. The
/// text follows "MCP server NAME at URL: " in the JSON-RPC error the waiting request gets.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// A configured header name is not a valid HTTP header name.
    #[error("header {0:?} is not a valid header name")]
    HeaderName(String),
    /// A configured header's value is not a valid HTTP header value.
    #[error("the value of header {0:?} is not a valid header value")]
    HeaderValue(String),
    /// The HTTP client could not be built (TLS set-up).
    #[error("an HTTP client could not be made: {0}")]
    Client(#[source] reqwest::Error),
    /// The configured URL does not parse.
    #[error("bad URL: {0}")]
    Url(#[source] url::ParseError),
    /// No answer within the message deadline.
    #[error("no answer within {:.1} s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The connection could not be made or broke before an answer.
    #[error("could not be reached: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// No access token could be had (sign-in needed, refresh refused).
    #[error(transparent)]
    Auth(#[from] crate::oauth::OAuthError),
    /// An answer over [`MAX_MESSAGE_BYTES`].
    #[error("its answer is larger than {} MiB", MAX_MESSAGE_BYTES >> 20)]
    TooLarge,
    /// The answer's body broke off.
    #[error("its answer broke off: {0}")]
    BrokeOff(#[source] reqwest::Error),
    /// The server answered with an HTTP error (`body`: the start of what it said).
    #[error("HTTP {status}{}", snippet(body))]
    Status {
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// The body, or its start.
        body: Vec<u8>,
    },
    /// The answer is not JSON.
    #[error("its answer is not JSON ({source}){}", snippet(body))]
    NotJson {
        /// What the parser said.
        source: serde_json::Error,
        /// The body, or its start.
        body: Vec<u8>,
    },
    /// The answer's event stream ended before the answer.
    #[error("its event stream ended without an answer")]
    NoAnswerInStream,
    /// The answer held no reply to the request.
    #[error("its answer did not answer the request")]
    Unanswered,
    /// Legacy SSE: the event stream's GET was refused.
    #[error("its event stream answered HTTP {status}{}", snippet(body))]
    StreamStatus {
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// The body, or its start.
        body: Vec<u8>,
    },
    /// Legacy SSE: the `endpoint` event is not a URL.
    #[error("it named an endpoint that is not a URL: {0}")]
    BadEndpoint(#[source] url::ParseError),
    /// Legacy SSE: the event stream is over.
    #[error("its event stream ended")]
    StreamEnded,
    /// Legacy SSE: no `endpoint` event within the deadline.
    #[error("it did not name an endpoint to post to in time")]
    NoEndpoint,
}

/// What both transports share: the client, the headers, where replies go.
#[derive(Clone)]
struct Link {
    server: String,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
    incoming: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    deadline: Duration,
    /// OAuth (streamable HTTP without a configured `Authorization` header).
    auth: Option<Arc<crate::oauth::Auth>>,
}

impl Link {
    fn new(
        server: &str,
        spec: &UrlSpec,
        deadline: Duration,
        incoming: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    ) -> Result<Self, UrlError> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in &spec.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| UrlError::HeaderName(k.clone()))?;
            let value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|_| UrlError::HeaderValue(k.clone()))?;
            headers.insert(name, value);
        }
        // A redirect is followed only within the same origin: the headers (often
        // credentials) never go to a host the configuration did not name.
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let first = attempt.previous().first().cloned();
            let same = first.is_some_and(|f| f.origin() == attempt.url().origin());
            if attempt.previous().len() > 5 {
                attempt.error("too many redirects")
            } else if same {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let client = reqwest::Client::builder()
            // The bundled roots, as for the model API (see keel-model's client).
            .tls_built_in_native_certs(false)
            .redirect(redirects)
            .connect_timeout(Duration::from_secs(30).min(deadline))
            .build()
            .map_err(UrlError::Client)?;
        Ok(Self {
            server: server.to_owned(),
            client,
            headers,
            incoming,
            deadline,
            auth: None,
        })
    }

    /// The request `req` with the access token, if the server has one; an error when the
    /// token cannot be had (the user must sign in, or the refresh failed).
    async fn authorized(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(reqwest::RequestBuilder, Option<String>), crate::oauth::OAuthError> {
        let Some(auth) = &self.auth else {
            return Ok((req, None));
        };
        match auth.bearer().await? {
            Some(t) => Ok((req.bearer_auth(&t), Some(t))),
            None => Ok((req, None)),
        }
    }

    /// Hand one message from the server to rmcp; false when it is not one.
    async fn deliver(&self, value: Value) -> bool {
        match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
            Ok(m) => self.incoming.send(m).await.is_ok(),
            Err(_) => false,
        }
    }

    /// Fail the request `id` with `why`.
    async fn fail(&self, id: &Value, url: &str, why: &(dyn std::fmt::Display + Sync)) {
        let reply = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603,
            "message": format!("MCP server {} at {url}: {why}", self.server)}});
        self.deliver(reply).await;
    }

    /// Read a body of at most [`MAX_MESSAGE_BYTES`].
    async fn body(resp: reqwest::Response) -> Result<Vec<u8>, UrlError> {
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_MESSAGE_BYTES as u64)
        {
            return Err(UrlError::TooLarge);
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(UrlError::BrokeOff)?;
            if body.len() + chunk.len() > MAX_MESSAGE_BYTES {
                return Err(UrlError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// Where the legacy transport POSTs, once its event stream names it, or why it never will.
type Endpoint = Result<String, Arc<UrlError>>;

/// `: ` and the start of a body, or nothing when it is empty.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

/// The id of a request (a message with a method and an id), if it is one.
fn request_id(m: &Value) -> Option<Value> {
    match (m.get("method"), m.get("id")) {
        (Some(_), Some(id)) if !id.is_null() => Some(id.clone()),
        _ => None,
    }
}

/// A message rmcp wants sent, for the writer.
struct Outgoing(Value);

/// Queue `item` for the writer now, in rmcp's order (rmcp calls `send` in the order of its
/// messages and may poll the futures it gets back in any order).
fn enqueue(
    queue: &mpsc::Sender<Outgoing>,
    item: &TxJsonRpcMessage<RoleClient>,
) -> Result<(), std::io::Error> {
    let m = serde_json::to_value(item).map_err(std::io::Error::other)?;
    queue
        .try_send(Outgoing(m))
        .map_err(|_| std::io::Error::other("too many MCP messages are waiting to be sent"))
}

// ---- streamable HTTP ----

/// The session id a streamable HTTP server gave, shared by the writer and `close`.
type Session = Arc<Mutex<Option<String>>>;

/// The transport to one server at a URL: messages rmcp sends go to a writer task in order,
/// messages from the server come back on `rx`.
pub struct UrlTransport {
    queue: mpsc::Sender<Outgoing>,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    /// Tasks that read from the server (the event streams), stopped when it closes.
    readers: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    /// Streamable HTTP: the session to end (`DELETE`) when it closes.
    farewell: Option<(Link, String, Session)>,
}

impl UrlTransport {
    /// Streamable HTTP to server `server` at `spec`; each POST waits at most `deadline`.
    pub fn streamable(server: &str, spec: &UrlSpec, deadline: Duration) -> Result<Self, UrlError> {
        Self::streamable_with(server, spec, deadline, None)
    }

    /// [`UrlTransport::streamable`], authorized by `auth` (OAuth) when it is given.
    pub fn streamable_with(
        server: &str,
        spec: &UrlSpec,
        deadline: Duration,
        auth: Option<Arc<crate::oauth::Auth>>,
    ) -> Result<Self, UrlError> {
        let (tx, rx) = mpsc::channel(INCOMING);
        let mut link = Link::new(server, spec, deadline, tx)?;
        link.auth = auth;
        let (queue, mut out) = mpsc::channel::<Outgoing>(OUTGOING);
        let session: Arc<Mutex<Option<String>>> = Arc::default();
        let protocol: Arc<Mutex<Option<String>>> = Arc::default();
        let url = spec.url.clone();
        let (l, s, u) = (link.clone(), session.clone(), url.clone());
        let readers: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let lst = readers.clone();
        tokio::spawn(async move {
            while let Some(Outgoing(m)) = out.recv().await {
                let post = post(l.clone(), u.clone(), s.clone(), protocol.clone(), m.clone());
                if request_id(&m).is_some() {
                    tokio::spawn(post);
                    continue;
                }
                post.await;
                // Once the session is set up, listen for what the server sends on its own
                // (a changed tool list, say).
                if m.get("method").and_then(Value::as_str) == Some("notifications/initialized") {
                    let task =
                        tokio::spawn(listen(l.clone(), u.clone(), s.clone(), protocol.clone()));
                    lst.lock().unwrap_or_else(|p| p.into_inner()).push(task);
                }
            }
        });
        Ok(Self {
            queue,
            rx,
            readers,
            farewell: Some((link, url, session)),
        })
    }
}

/// The server's own stream (a GET): the messages it sends outside any answer. A server that
/// offers none (405, or any other refusal) is left alone; one that ends it is not asked again.
async fn listen(
    link: Link,
    url: String,
    session: Arc<Mutex<Option<String>>>,
    protocol: Arc<Mutex<Option<String>>>,
) {
    let mut req = link
        .client
        .get(&url)
        .headers(link.headers.clone())
        .header(reqwest::header::ACCEPT, "text/event-stream");
    if let Some(s) = session.lock().unwrap_or_else(|p| p.into_inner()).clone() {
        req = req.header("mcp-session-id", s);
    }
    if let Some(v) = protocol.lock().unwrap_or_else(|p| p.into_inner()).clone() {
        req = req.header("mcp-protocol-version", v);
    }
    let Ok((req, _)) = link.authorized(req).await else {
        return;
    };
    let Ok(resp) = req.send().await else { return };
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if !resp.status().is_success() || !is_sse {
        return;
    }
    let mut parser = SseParser::new(MAX_MESSAGE_BYTES);
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        for ev in parser.push(&chunk) {
            if !(ev.event.is_empty() || ev.event == "message") {
                continue;
            }
            if let Ok(m) = serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&ev.data) {
                if link.incoming.send(m).await.is_err() {
                    return; // the connection is closed
                }
            }
        }
    }
}

/// Send the request `make` builds, with the server's access token; once more with a
/// refreshed token when the server refuses the first (401). What went wrong, as said to rmcp.
async fn send_authorized(
    link: &Link,
    make: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, UrlError> {
    let sent = |req: reqwest::RequestBuilder| async move {
        match req.send().await {
            Ok(r) => Ok(r),
            Err(e) if e.is_timeout() => Err(UrlError::Timeout(link.deadline)),
            Err(e) => Err(UrlError::Unreachable(e)),
        }
    };
    let (req, used) = link.authorized(make()).await?;
    let resp = sent(req).await?;
    let Some(auth) = &link.auth else {
        return Ok(resp);
    };
    if resp.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(resp);
    }
    // A 401 without a token of keel's and without a Bearer challenge is not OAuth (a missing
    // API key, say): it is reported as the HTTP failure it is, not as a sign-in to do.
    let bearer = resp
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.trim_start().to_ascii_lowercase().starts_with("bearer"));
    if used.is_none() && !bearer {
        return Ok(resp);
    }
    // Refused: a refreshed token, once; or the user must sign in.
    let token = auth.refused(used.as_deref()).await?;
    let resp = sent(make().bearer_auth(token)).await?;
    if resp.status() == reqwest::StatusCode::UNAUTHORIZED {
        return Err(auth.refused_fresh().into());
    }
    Ok(resp)
}

/// POST one message and hand what comes back to rmcp.
async fn post(
    link: Link,
    url: String,
    session: Arc<Mutex<Option<String>>>,
    protocol: Arc<Mutex<Option<String>>>,
    message: Value,
) {
    let id = request_id(&message);
    let outcome = exchange(&link, &url, &session, &protocol, &message, id.as_ref()).await;
    // A request that got no answer is failed to rmcp; a notification's failure has no one to tell.
    if let (Err(why), Some(id)) = (outcome, id) {
        link.fail(&id, &url, &why).await;
    }
}

/// POST `message` and deliver what comes back; `Err` says why the request `id` (when it is
/// one) got no answer.
async fn exchange(
    link: &Link,
    url: &str,
    session: &Mutex<Option<String>>,
    protocol: &Mutex<Option<String>>,
    message: &Value,
    id: Option<&Value>,
) -> Result<(), UrlError> {
    let is_initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
    let request = || post_request(link, url, session, protocol, message);
    let resp = send_authorized(link, request).await?;
    let status = resp.status();
    if let Some(s) = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        if s.len() <= 1024 {
            *session.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.to_owned());
        }
    }
    if !status.is_success() {
        let body = Link::body(resp).await.unwrap_or_default();
        return Err(UrlError::Status { status, body });
    }
    if status == reqwest::StatusCode::ACCEPTED || id.is_none() {
        return Ok(()); // a notification or a reply of keel's, accepted
    }
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    // Whether `v` answers this request; the answer to initialize also fixes the protocol.
    let note = |v: &Value| {
        if is_initialize {
            if let Some(p) = v.pointer("/result/protocolVersion").and_then(Value::as_str) {
                *protocol.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.to_owned());
            }
        }
        v.get("id") == id
    };
    if is_sse {
        answer_from_stream(link, resp, &note).await
    } else {
        answer_from_body(link, resp, &note).await
    }
}

/// The POST of `message` to `url`, with the session and protocol version the server gave.
fn post_request(
    link: &Link,
    url: &str,
    session: &Mutex<Option<String>>,
    protocol: &Mutex<Option<String>>,
    message: &Value,
) -> reqwest::RequestBuilder {
    let mut req = link
        .client
        .post(url)
        .headers(link.headers.clone())
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/event-stream",
        )
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .timeout(link.deadline)
        .body(message.to_string());
    if let Some(s) = session.lock().unwrap_or_else(|p| p.into_inner()).clone() {
        req = req.header("mcp-session-id", s);
    }
    if let Some(v) = protocol.lock().unwrap_or_else(|p| p.into_inner()).clone() {
        req = req.header("mcp-protocol-version", v);
    }
    req
}

/// Deliver the messages of an event-stream reply until one answers the request (`note`).
async fn answer_from_stream(
    link: &Link,
    resp: reqwest::Response,
    note: &(impl Fn(&Value) -> bool + Sync),
) -> Result<(), UrlError> {
    let mut parser = SseParser::new(MAX_MESSAGE_BYTES);
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { break };
        for ev in parser.push(&chunk) {
            if !(ev.event.is_empty() || ev.event == "message") {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
                continue;
            };
            let answered = note(&v);
            link.deliver(v).await;
            if answered {
                return Ok(());
            }
        }
    }
    Err(if parser.oversized > 0 {
        UrlError::TooLarge
    } else {
        UrlError::NoAnswerInStream
    })
}

/// Deliver the message (or batch) of a JSON reply; `Err` when none answers the request.
async fn answer_from_body(
    link: &Link,
    resp: reqwest::Response,
    note: &(impl Fn(&Value) -> bool + Sync),
) -> Result<(), UrlError> {
    let body = Link::body(resp).await?;
    let values = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(a)) => a,
        Ok(v) => vec![v],
        Err(source) => return Err(UrlError::NotJson { source, body }),
    };
    let mut answered = false;
    for v in values {
        answered |= note(&v);
        link.deliver(v).await;
    }
    if answered {
        Ok(())
    } else {
        Err(UrlError::Unanswered)
    }
}

impl Transport<RoleClient> for UrlTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(enqueue(&self.queue, &item))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.rx.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.rx.close();
        for t in self
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
        // Tell the server the session is over (bounded; a server may not support it).
        let farewell = self.farewell.as_ref().and_then(|(link, url, session)| {
            let s = session.lock().unwrap_or_else(|p| p.into_inner()).take()?;
            let mut req = link
                .client
                .delete(url)
                .headers(link.headers.clone())
                .header("mcp-session-id", s)
                .timeout(Duration::from_secs(2));
            if let Some(t) = link.auth.as_ref().and_then(|a| a.current()) {
                req = req.bearer_auth(t);
            }
            Some(req)
        });
        async move {
            if let Some(req) = farewell {
                let _ = req.send().await;
            }
            Ok(())
        }
    }
}

// ---- legacy HTTP + SSE ----

impl UrlTransport {
    /// The legacy HTTP + SSE transport: open the event stream of server `server` at `spec`;
    /// messages are POSTed to the endpoint it names, each within `deadline`.
    pub fn legacy_sse(server: &str, spec: &UrlSpec, deadline: Duration) -> Result<Self, UrlError> {
        let (tx, rx) = mpsc::channel(INCOMING);
        let link = Link::new(server, spec, deadline, tx)?;
        let base = reqwest::Url::parse(&spec.url).map_err(UrlError::Url)?;
        // Shared: every message waiting for the endpoint is failed with the same reason.
        let (endpoint_tx, endpoint_rx) = watch::channel::<Option<Endpoint>>(None);
        let reader = tokio::spawn(read_legacy_stream(
            link.clone(),
            spec.url.clone(),
            base,
            endpoint_tx,
        ));
        let (queue, out) = mpsc::channel::<Outgoing>(OUTGOING);
        tokio::spawn(write_legacy(link, spec.url.clone(), endpoint_rx, out));
        Ok(Self {
            queue,
            rx,
            readers: Arc::new(Mutex::new(vec![reader])),
            farewell: None,
        })
    }
}

/// Read the legacy event stream at `url`: publish the endpoint it names (or why there is none)
/// and deliver its messages.
async fn read_legacy_stream(
    l: Link,
    url: String,
    base: reqwest::Url,
    endpoint_tx: watch::Sender<Option<Endpoint>>,
) {
    let resp = l
        .client
        .get(&url)
        .headers(l.headers.clone())
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .send()
        .await;
    let resp = match resp {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            let status = r.status();
            let body = Link::body(r).await.unwrap_or_default();
            let _ = endpoint_tx.send(Some(Err(Arc::new(UrlError::StreamStatus { status, body }))));
            return;
        }
        Err(e) => {
            let _ = endpoint_tx.send(Some(Err(Arc::new(UrlError::Unreachable(e)))));
            return;
        }
    };
    let mut parser = SseParser::new(MAX_MESSAGE_BYTES);
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        for ev in parser.push(&chunk) {
            if ev.event == "endpoint" {
                let post = base
                    .join(ev.data.trim())
                    .map(|u| u.to_string())
                    .map_err(|e| Arc::new(UrlError::BadEndpoint(e)));
                let _ = endpoint_tx.send(Some(post));
            } else if ev.event.is_empty() || ev.event == "message" {
                if let Ok(v) = serde_json::from_str::<Value>(&ev.data) {
                    l.deliver(v).await;
                }
            }
        }
    }
    let _ = endpoint_tx.send(Some(Err(Arc::new(UrlError::StreamEnded))));
    // The stream is over: rmcp's receive ends when this sender goes.
}

/// POST each queued message to the endpoint the stream named (waiting up to the deadline for
/// it); a request that cannot go is failed naming `stream_url` or the endpoint.
async fn write_legacy(
    link: Link,
    stream_url: String,
    mut endpoint_rx: watch::Receiver<Option<Endpoint>>,
    mut out: mpsc::Receiver<Outgoing>,
) {
    while let Some(Outgoing(m)) = out.recv().await {
        let id = request_id(&m);
        let target = match legacy_endpoint(&link, &mut endpoint_rx).await {
            Ok(t) => t,
            Err(why) => {
                if let Some(id) = id {
                    link.fail(&id, &stream_url, &why).await;
                }
                continue;
            }
        };
        let sent = link
            .client
            .post(&target)
            .headers(link.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(link.deadline)
            .body(m.to_string())
            .send()
            .await;
        let why = match sent {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(UrlError::Status {
                status: r.status(),
                body: Vec::new(),
            }),
            Err(e) => Some(UrlError::Unreachable(e)),
        };
        if let (Some(why), Some(id)) = (why, id) {
            link.fail(&id, &target, &why).await;
        }
    }
}

/// The endpoint the legacy stream named, waiting up to the link's deadline for it.
async fn legacy_endpoint(
    link: &Link,
    endpoint_rx: &mut watch::Receiver<Option<Endpoint>>,
) -> Endpoint {
    let endpoint = tokio::time::timeout(link.deadline, async {
        endpoint_rx
            .wait_for(|e| e.is_some())
            .await
            .map(|e| e.clone().unwrap_or(Err(Arc::new(UrlError::StreamEnded))))
    })
    .await;
    match endpoint {
        Ok(Ok(e)) => e,
        Ok(Err(_)) => Err(Arc::new(UrlError::StreamEnded)),
        Err(_) => Err(Arc::new(UrlError::NoEndpoint)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_parsed_across_chunks_and_oversized_ones_skipped() {
        let mut p = SseParser::new(16);
        assert!(p.push(b"event: endpoint\ndata: /mes").is_empty());
        let evs = p.push(b"sages?s=1\n\n: comment\ndata: {\"a\":1}\r\n\r\n");
        assert_eq!(
            evs,
            vec![
                SseEvent {
                    event: "endpoint".into(),
                    data: "/messages?s=1".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "{\"a\":1}".into()
                }
            ]
        );
        let evs = p.push(b"data: 0123456789abcdefXYZ\n\ndata: ok\n\n");
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data, "ok");
        assert_eq!(p.oversized, 1);
    }
}
