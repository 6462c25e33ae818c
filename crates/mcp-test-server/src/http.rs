//! The test server over HTTP (`--http`: streamable HTTP; `--sse`: the legacy HTTP + SSE
//! transport), on 127.0.0.1 at a free port whose URL is the first line on stdout. JSON-RPC is
//! answered by hand (initialize, tools/list, tools/call of `echo`), so the tests see exactly
//! what goes over the wire. `--mode`:
//!
//! - `normal`: streamable HTTP answers in JSON; a session id is issued at `initialize` and
//!   required afterwards (400 without it);
//! - `sse-replies`: streamable HTTP answers as event streams;
//! - `hang-on-call`: a call is never answered;
//! - `fail-calls`: a call is answered with HTTP 500 and a text body;
//! - `change-tools`: a call adds a tool `late` and says so on the GET stream
//!   (`notifications/tools/list_changed`).
//!
//! Streamable HTTP serves a GET stream (server-sent events) for what the server sends on its
//! own.
//!
//! `--require-header "Name: value"`: every request must carry it (401 otherwise).
//! `--redirect-to URL`: every request is answered with a 307 to URL.
//! `--oauth`: `/mcp` needs an OAuth token this server issues itself (see `oauth.rs`).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::sync::mpsc;

type Body = BoxBody<Bytes, Infallible>;

/// `notifications/tools/list_changed` as an event.
const LIST_CHANGED: &str =
    "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";

struct State {
    mode: String,
    redirect: Option<String>,
    sse: bool,
    require: Option<(String, String)>,
    sessions: AtomicU64,
    /// `change-tools`: the tool `late` was added.
    grown: std::sync::atomic::AtomicBool,
    /// ... before the client's GET stream was open.
    unsaid: std::sync::atomic::AtomicBool,
    /// Legacy SSE: where replies go (the open event stream).
    stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// `--oauth`: the authorization side.
    oauth: Option<crate::oauth::OAuth>,
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).boxed())
        .unwrap_or_default()
}

/// The reply to one JSON-RPC message (None: a notification, or never answered).
async fn answer(state: &State, m: &Value) -> Option<Value> {
    let id = m.get("id")?.clone();
    let result = match m.get("method").and_then(Value::as_str).unwrap_or("") {
        "initialize" => json!({
            "protocolVersion": m.pointer("/params/protocolVersion").cloned().unwrap_or(json!("2025-06-18")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "keel-test-http", "version": "1.0.0"}}),
        "ping" => json!({}),
        "tools/list" => {
            let mut tools = vec![json!({
                "name": "echo", "description": "Answers with its text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                                "required": ["text"]}})];
            if state.grown.load(Ordering::SeqCst) {
                tools.push(json!({"name": "late", "description": "Came later.",
                                  "inputSchema": {"type": "object"}}));
            }
            json!({ "tools": tools })
        }
        "tools/call" if state.mode == "hang-on-call" => {
            std::future::pending::<()>().await;
            return None;
        }
        "tools/call" => {
            if state.mode == "change-tools" {
                state.grown.store(true, Ordering::SeqCst);
                let tx = state
                    .stream
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                match tx {
                    Some(tx) => {
                        let _ = tx.send(Bytes::from(LIST_CHANGED)).await;
                    }
                    // Said as soon as the client opens its stream.
                    None => state.unsaid.store(true, Ordering::SeqCst),
                }
            }
            let text = m
                .pointer("/params/arguments/text")
                .and_then(Value::as_str)
                .unwrap_or("");
            json!({"content": [{"type": "text", "text": format!("echo over http: {text}")}]})
        }
        other => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("no method {other}")}}))
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let req = match &state.oauth {
        Some(oauth) => match authorize(oauth, req).await {
            Ok(req) => req,
            Err(resp) => return Ok(resp),
        },
        None => req,
    };
    if let Some(to) = &state.redirect {
        let mut resp = full(StatusCode::TEMPORARY_REDIRECT, "text/plain", "moved");
        if let Ok(v) = to.parse() {
            resp.headers_mut().insert("location", v);
        }
        return Ok(resp);
    }
    if let Some((name, value)) = &state.require {
        if req
            .headers()
            .get(name.as_str())
            .and_then(|v| v.to_str().ok())
            != Some(value)
        {
            return Ok(full(
                StatusCode::UNAUTHORIZED,
                "text/plain",
                "missing credentials",
            ));
        }
    }
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if method == hyper::Method::GET {
        return Ok(open_stream(&state).await);
    }
    if method == hyper::Method::DELETE {
        return Ok(full(StatusCode::OK, "text/plain", ""));
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Ok(full(StatusCode::BAD_REQUEST, "text/plain", "bad body")),
    };
    let Ok(m) = serde_json::from_slice::<Value>(&body) else {
        return Ok(full(StatusCode::BAD_REQUEST, "text/plain", "not JSON"));
    };
    let is_initialize = m.get("method").and_then(Value::as_str) == Some("initialize");
    if state.sse {
        return Ok(legacy_post(&state, &path, m));
    }
    if !is_initialize && state.mode == "normal" && session.is_none() {
        return Ok(full(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "no mcp-session-id",
        ));
    }
    if m.get("method").and_then(Value::as_str) == Some("tools/call") && state.mode == "fail-calls" {
        return Ok(full(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "the tool backend is down",
        ));
    }
    let Some(reply) = answer(&state, &m).await else {
        return Ok(full(StatusCode::ACCEPTED, "text/plain", ""));
    };
    if let (Some(oauth), Some("tools/call")) =
        (&state.oauth, m.get("method").and_then(Value::as_str))
    {
        oauth.call_answered();
    }
    let mut resp = if state.mode == "sse-replies" {
        full(
            StatusCode::OK,
            "text/event-stream",
            format!(": keep-alive\n\nevent: message\ndata: {reply}\n\n"),
        )
    } else {
        full(StatusCode::OK, "application/json", reply.to_string())
    };
    if is_initialize {
        let n = state.sessions.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(v) = format!("s-{n}").parse() {
            resp.headers_mut().insert("mcp-session-id", v);
        }
    }
    Ok(resp)
}

/// A GET: the legacy transport's event stream (the endpoint first, then every reply), or the
/// streamable transport's (what the server sends on its own).
async fn open_stream(state: &State) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let first = if state.sse {
        "event: endpoint\ndata: /messages?session=1\n\n"
    } else {
        ": open\n\n"
    };
    let _ = tx.send(Bytes::from(first)).await;
    if state.unsaid.swap(false, Ordering::SeqCst) {
        let _ = tx.send(Bytes::from(LIST_CHANGED)).await;
    }
    *state.stream.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(StreamBody::new(stream).boxed())
        .unwrap_or_default()
}

/// A POST of the legacy (SSE) transport: accepted at once, answered on the event stream.
fn legacy_post(state: &Arc<State>, path: &str, m: Value) -> Response<Body> {
    if path != "/messages" {
        return full(StatusCode::NOT_FOUND, "text/plain", "no such endpoint");
    }
    let st = state.clone();
    tokio::spawn(async move {
        if let Some(reply) = answer(&st, &m).await {
            let tx = st.stream.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(tx) = tx {
                let _ = tx
                    .send(Bytes::from(format!("event: message\ndata: {reply}\n\n")))
                    .await;
            }
        }
    });
    full(StatusCode::ACCEPTED, "text/plain", "")
}

/// `--oauth`: the authorization server's answer, or a 401, or the request let through.
async fn authorize(
    oauth: &crate::oauth::OAuth,
    req: Request<Incoming>,
) -> Result<Request<Incoming>, Response<Body>> {
    let respond = |(status, kind, body, headers): crate::oauth::Answer| {
        let mut resp = full(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            kind,
            body,
        );
        for (k, v) in headers {
            if let Ok(v) = v.parse() {
                resp.headers_mut().insert(k, v);
            }
        }
        resp
    };
    let path = req.uri().path().to_owned();
    if path == "/mcp" {
        let auth = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        return match oauth.guard(auth) {
            Some(answer) => Err(respond(answer)),
            None => Ok(req),
        };
    }
    let method = req.method().as_str().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    Err(respond(
        oauth.route(&method, &path, &query, &body).unwrap_or((
            404,
            "text/plain",
            "not found".into(),
            Vec::new(),
        )),
    ))
}

/// Serve until killed; the URL is printed first. `oauth`: `(token lifetime in seconds,
/// whether the 401 names the metadata, what a tool call ends)`.
pub async fn serve(
    mode: String,
    sse: bool,
    require: Option<String>,
    redirect: Option<String>,
    oauth: Option<(u64, bool, Option<String>, Option<String>)>,
) {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("test server: cannot listen: {e}");
            std::process::exit(1);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    println!(
        "http://127.0.0.1:{port}/{}",
        if sse { "sse" } else { "mcp" }
    );
    let require = require.and_then(|h| {
        h.split_once(':')
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
    });
    let state = Arc::new(State {
        mode,
        redirect,
        sse,
        require,
        sessions: AtomicU64::new(0),
        grown: std::sync::atomic::AtomicBool::new(false),
        unsaid: std::sync::atomic::AtomicBool::new(false),
        stream: Mutex::new(None),
        oauth: oauth.map(|(ttl, hint, after, client)| {
            crate::oauth::OAuth::new(format!("http://127.0.0.1:{port}"), ttl, hint, after, client)
        }),
    });
    while let Ok((socket, _)) = listener.accept().await {
        let st = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(st.clone(), req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}
