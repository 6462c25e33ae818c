//! Answering one HTTP request: read it, validate it, record it, pick a step, play the step.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{json, Value};

use crate::body::{CutConnection, Piece, ScriptBody};
use crate::openai::{self, Dialect};
use crate::record::{RecordedRequest, Recorder};
use crate::reply::{self, Counters, ReplyCtx};
use crate::scenario::{
    status_for_error_type, RawEnd, Scenario, StallPhase, Step, StepKind, DEFAULT_DROP_TEXT,
    DEFAULT_STALL_TEXT,
};
use crate::select::{Cursor, Pick};
use crate::validate::validate_request;

/// Largest request body accepted, like the real API's 32 MB limit.
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Text of the reply an `sse_error` step streams the start of when it has no `reply`.
const DEFAULT_SSE_ERROR_TEXT: &str = "keel-mock reply interrupted by an error event";

/// Everything the request handlers share.
pub(crate) struct Shared {
    /// The scenario being replayed; a test may replace it while the server runs (see
    /// [`crate::MockServer::replace_scenario`]). Locked after `cursor`, never before.
    pub(crate) scenario: Mutex<std::sync::Arc<Scenario>>,
    pub(crate) cursor: Mutex<Cursor>,
    pub(crate) recorder: Recorder,
    pub(crate) ids: Counters,
    pub(crate) cache: crate::cache::PromptCache,
    /// The Entra ID tokens handed out by the fake token endpoint.
    pub(crate) entra: crate::entra::Issued,
}

/// What to send, decided before anything is sent.
enum Plan {
    /// A response with this status, headers and body.
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: ScriptBody,
    },
    /// Close the connection without a response.
    Close,
}

/// A plan and how long to stay silent before carrying it out.
struct Answer {
    wait: Duration,
    plan: Plan,
}

/// The request facts a plan depends on.
struct Req<'a> {
    body: &'a Value,
    /// The body in the Messages API's shape (the body itself for that API).
    view: &'a Value,
    bytes: usize,
    stream: bool,
    request_id: String,
    dialect: Dialect,
    headers: &'a BTreeMap<String, String>,
    /// The body as received (the token endpoint's is a form).
    raw: &'a [u8],
}

/// Handle one request; `Err` makes hyper drop the connection without a response.
pub(crate) async fn handle(
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<Response<ScriptBody>, CutConnection> {
    let received_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let elapsed_ms = shared.recorder.elapsed_ms();
    let method = req.method().as_str().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    let route = req.uri().path().to_string();
    let headers = header_map(&req);
    let (raw, too_large) = read_body(req).await?;
    // Parsed once, then moved into the record: a long session's requests are large, and keel-mock
    // runs beside the agent it serves (copies of every body showed up in the agent's timings).
    let json: Option<Value> = serde_json::from_slice(&raw).ok();
    let is_json = json.is_some();
    let body = json.unwrap_or(Value::Null);
    let cloud = crate::cloud::route(&route);
    let stream = match &cloud {
        // Bedrock's path says whether it streams.
        Some((_, _, Some(s))) => *s,
        _ => body.get("stream").and_then(Value::as_bool) == Some(true),
    };
    let dialect = Dialect::of_route(&route).unwrap_or(Dialect::Messages);
    // The Messages API's own body is its view; the clouds' is it with the path's model.
    let view = match (&cloud, dialect) {
        (_, Dialect::Messages) => None,
        (Some((_, model, _)), _) => Some(crate::cloud::view(model, &body, stream)),
        (None, d) => Some(openai::view(d, &body)),
    };

    let answer = shared.recorder.record_with(move |seq| {
        let request_id = format!("req_mock_{}", seq + 1);
        let (step, validation_error, answer) = if too_large {
            let msg =
                format!("request body is larger than the {MAX_BODY_BYTES} bytes keel-mock accepts");
            (
                None,
                Some(msg.clone()),
                error_answer(dialect, 413, "request_too_large", &msg, &request_id),
            )
        } else {
            let r = Req {
                body: &body,
                view: view.as_ref().unwrap_or(&body),
                bytes: raw.len(),
                stream,
                request_id,
                dialect,
                headers: &headers,
                raw: &raw,
            };
            decide(shared, &method, &route, is_json, &r)
        };
        let status = match &answer.plan {
            Plan::Respond { status, .. } => *status,
            Plan::Close => 0,
        };
        let rec = RecordedRequest {
            seq,
            received_at_ms,
            elapsed_ms,
            method,
            path,
            headers,
            body,
            view: view.unwrap_or(Value::Null),
            dialect: dialect.name().to_string(),
            stream,
            step,
            status,
            validation_error,
        };
        (rec, answer)
    });

    carry_out(answer).await
}

/// The request's headers by lower-case name; a repeated header's values joined with ", ".
fn header_map(req: &Request<Incoming>) -> BTreeMap<String, String> {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in req.headers() {
        let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_string())
            .and_modify(|old| {
                old.push_str(", ");
                old.push_str(&v);
            })
            .or_insert(v);
    }
    headers
}

/// The whole body and whether it was over [`MAX_BODY_BYTES`] (then the bytes are empty).
async fn read_body(req: Request<Incoming>) -> Result<(Bytes, bool), CutConnection> {
    let collected = Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await;
    match collected {
        Ok(c) => Ok((c.to_bytes(), false)),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Ok((Bytes::new(), true)),
        // The client went away or sent a broken body: nothing to answer.
        Err(_) => Err(CutConnection),
    }
}

/// Stay silent for the answer's wait, then send its response or cut the connection.
async fn carry_out(answer: Answer) -> Result<Response<ScriptBody>, CutConnection> {
    if !answer.wait.is_zero() {
        // Dropped with the connection if the client leaves or the server shuts down.
        tokio::time::sleep(answer.wait).await;
    }
    match answer.plan {
        Plan::Close => Err(CutConnection),
        Plan::Respond {
            status,
            headers,
            body,
        } => {
            let mut res = Response::builder().status(status);
            for (name, value) in headers {
                res = res.header(name, value);
            }
            Ok(res
                .body(body)
                .unwrap_or_else(|_| Response::new(ScriptBody::empty())))
        }
    }
}

/// Route and decide; returns (step that answers, validation error, answer).
fn decide(
    shared: &Shared,
    method: &str,
    route: &str,
    is_json: bool,
    r: &Req<'_>,
) -> (Option<usize>, Option<String>, Answer) {
    let d = r.dialect;
    if crate::entra::is_token_route(route) {
        let (status, body) = shared.entra.answer(method, r.raw);
        let error = (status != 200).then(|| body["error_description"].to_string());
        return (None, error, json_answer(d, status, &body, &r.request_id));
    }
    let known = Dialect::of_route(route).is_some() || route == "/v1/messages/count_tokens";
    if !known || method != "POST" {
        let msg = format!(
            "keel-mock: nothing is served at {method} {route}; it answers POST /v1/messages, \
             POST /v1/messages/count_tokens, POST /v1/responses, POST /v1/chat/completions, \
             Vertex AI's …/publishers/anthropic/models/{{model}}:streamRawPredict, \
             Bedrock's /model/{{id}}/invoke-with-response-stream and Entra ID's \
             /{{tenant}}/oauth2/v2.0/token"
        );
        return (
            None,
            None,
            error_answer(d, 404, "not_found_error", &msg, &r.request_id),
        );
    }
    if !is_json {
        let msg = "the request body is not valid JSON".to_string();
        let a = error_answer(d, 400, "invalid_request_error", &msg, &r.request_id);
        return (None, Some(msg), a);
    }
    if route == "/v1/messages/count_tokens" {
        let body = json!({"input_tokens": (r.bytes as u64 + 2) / 4});
        return (None, None, json_answer(d, 200, &body, &r.request_id));
    }
    if let Err(e) = shared.entra.check_bearer(r.headers) {
        let msg = e.to_string();
        let a = error_answer(d, 401, "authentication_error", &msg, &r.request_id);
        return (None, Some(msg), a);
    }
    if let Err(msg) = crate::cloud::check_auth(d, r.headers) {
        let a = error_answer(d, 403, "permission_error", &msg, &r.request_id);
        return (None, Some(msg), a);
    }
    let valid = match d {
        Dialect::Messages => validate_request(r.body),
        Dialect::Responses => openai::validate_responses(r.body),
        Dialect::Chat => openai::validate_chat(r.body),
        Dialect::Vertex | Dialect::Bedrock => {
            crate::cloud::validate(d, route, r.body).and_then(|()| validate_request(r.view))
        }
    };
    if let Err(msg) = valid {
        let a = error_answer(d, 400, "invalid_request_error", &msg, &r.request_id);
        return (None, Some(msg), a);
    }
    let (scenario, pick) = {
        let mut cursor = shared.cursor.lock().unwrap_or_else(|p| p.into_inner());
        let scenario = shared
            .scenario
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let pick = cursor.pick(&scenario, r.view);
        (scenario, pick)
    };
    match pick {
        Pick::Step(i) => (
            Some(i),
            None,
            plan_step(shared, &scenario, &scenario.steps[i], r),
        ),
        Pick::Nothing(msg) => (
            None,
            None,
            error_answer(d, 400, "invalid_request_error", &msg, &r.request_id),
        ),
    }
}

/// Turn a step into an answer for this request.
fn plan_step(shared: &Shared, scenario: &Scenario, step: &Step, r: &Req<'_>) -> Answer {
    let model = scenario
        .model
        .clone()
        .or_else(|| r.view["model"].as_str().map(str::to_string))
        .unwrap_or_else(|| "keel-mock".to_string());
    let cache = matches!(step.kind, StepKind::Text { .. } | StepKind::ToolUse { .. })
        .then(|| shared.cache.bill(r.view, (r.bytes as u64 + 2) / 4));
    let ctx = ReplyCtx {
        model: &model,
        request_bytes: r.bytes,
        ids: &shared.ids,
        cache,
    };
    let wait = Duration::from_millis(step.delay_ms);
    let reply_of = |nested: Option<&Step>, default_text: &str| match nested {
        Some(n) => reply::build(n, Some(step), &ctx),
        None => reply::build(&Step::text(default_text), Some(step), &ctx),
    };
    let plan = match &step.kind {
        StepKind::Text { .. } | StepKind::ToolUse { .. } => {
            complete(reply::build(step, None, &ctx), r)
        }
        StepKind::Error {
            status,
            error_type,
            message,
            headers,
        } => error_plan(*status, error_type, message, headers, r),
        StepKind::Raw {
            status,
            headers,
            events,
            end,
        } => raw_plan(*status, headers, events, *end, r),
        StepKind::SseError {
            error_type,
            message,
            after_events,
            reply,
        } => {
            if r.stream {
                let reply = reply_of(reply.as_deref(), DEFAULT_SSE_ERROR_TEXT);
                sse_error_stream(&reply, error_type, message, *after_events, r)
            } else {
                let status = status_for_error_type(error_type);
                error_answer(r.dialect, status, error_type, message, &r.request_id).plan
            }
        }
        StepKind::Drop {
            after_events,
            reply,
        } => drop_plan(
            &reply_of(reply.as_deref(), DEFAULT_DROP_TEXT),
            *after_events,
            r,
        ),
        StepKind::Stall {
            phase: StallPhase::BeforeHeaders,
            ms,
            then,
            ..
        } => {
            let wait = wait + Duration::from_millis(*ms);
            let plan = match then {
                None => Plan::Close,
                Some(t) => match &t.kind {
                    StepKind::Error { .. } => plan_step(shared, scenario, t, r).plan,
                    _ => complete(reply::build(t, Some(step), &ctx), r),
                },
            };
            return Answer { wait, plan };
        }
        StepKind::Stall {
            phase: StallPhase::AfterMessageStart,
            ms,
            then,
            after_events,
        } => {
            let reply = reply_of(then.as_deref(), DEFAULT_STALL_TEXT);
            let pause = Duration::from_millis(*ms);
            if !r.stream {
                // No events to stall between: the whole message is simply late.
                return Answer {
                    wait: wait + pause,
                    plan: complete(reply, r),
                };
            }
            stalled_stream(&reply, pause, *after_events, r)
        }
    };
    Answer { wait, plan }
}

/// An `error` step: the dialect's error body with this status, plus the step's headers.
fn error_plan(
    status: u16,
    error_type: &str,
    message: &str,
    headers: &BTreeMap<String, String>,
    r: &Req<'_>,
) -> Plan {
    let mut a = error_answer(r.dialect, status, error_type, message, &r.request_id);
    if let Plan::Respond { headers: h, .. } = &mut a.plan {
        set_headers(h, headers);
    }
    a.plan
}

/// A `raw` step: its events verbatim when the request streams, else an error saying it must.
fn raw_plan(
    status: u16,
    headers: &BTreeMap<String, String>,
    events: &[crate::scenario::RawEvent],
    end: RawEnd,
    r: &Req<'_>,
) -> Plan {
    if !r.stream {
        let msg = "keel-mock: this request was answered by a `raw` step, which only \
                   streams; send \"stream\": true";
        return error_answer(r.dialect, 500, "api_error", msg, &r.request_id).plan;
    }
    let mut pieces: Vec<Piece> = events
        .iter()
        .map(|e| {
            let sse = reply::raw_event(e, r.dialect == Dialect::Chat);
            Piece::Data(match r.dialect {
                Dialect::Bedrock => crate::cloud::chunk_of_sse(&sse),
                _ => sse,
            })
        })
        .collect();
    if end == RawEnd::Hang {
        pieces.push(Piece::Hang);
    }
    let mut h = sse_headers(r);
    set_headers(&mut h, headers);
    Plan::Respond {
        status,
        headers: h,
        body: ScriptBody::script(pieces),
    }
}

/// An `sse_error` step on a stream: the reply's first events, then the dialect's error frame.
fn sse_error_stream(
    reply: &reply::Reply,
    error_type: &str,
    message: &str,
    after_events: usize,
    r: &Req<'_>,
) -> Plan {
    let mut pieces: Vec<Piece> = events_of(reply, r)
        .into_iter()
        .take(after_events)
        .map(Piece::Data)
        .collect();
    let err = match r.dialect {
        Dialect::Bedrock => crate::cloud::exception_frame(error_type, message),
        Dialect::Messages | Dialect::Vertex => {
            let err = reply::error_body(error_type, message, None);
            reply::sse_event("error", &err)
        }
        d => openai::stream_error(d, error_type, message),
    };
    pieces.push(Piece::Data(err));
    sse(pieces, r)
}

/// A `drop` step: the reply's first events (or half its JSON body), then the connection cut.
fn drop_plan(reply: &reply::Reply, after_events: usize, r: &Req<'_>) -> Plan {
    if r.stream {
        let mut pieces: Vec<Piece> = events_of(reply, r)
            .into_iter()
            .take(after_events)
            .map(Piece::Data)
            .collect();
        pieces.push(Piece::Cut);
        return sse(pieces, r);
    }
    let full = Bytes::from(json_of(reply, r).to_string());
    let half = full.slice(..full.len() / 2);
    Plan::Respond {
        status: 200,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("content-length".into(), full.len().to_string()),
            (request_id_header(r.dialect).into(), r.request_id.clone()),
        ],
        body: ScriptBody::script(vec![Piece::Data(half), Piece::Cut]),
    }
}

/// A stall after message_start: the reply's events with a pause before event `after_events`.
fn stalled_stream(reply: &reply::Reply, pause: Duration, after_events: usize, r: &Req<'_>) -> Plan {
    let mut pieces = Vec::new();
    for (i, event) in events_of(reply, r).into_iter().enumerate() {
        if i == after_events {
            pieces.push(Piece::Pause(pause));
        }
        pieces.push(Piece::Data(event));
    }
    sse(pieces, r)
}

/// The full reply: a stream of events or one JSON message.
fn complete(reply: reply::Reply, r: &Req<'_>) -> Plan {
    if r.stream {
        sse(
            events_of(&reply, r).into_iter().map(Piece::Data).collect(),
            r,
        )
    } else {
        json_answer(r.dialect, 200, &json_of(&reply, r), &r.request_id).plan
    }
}

/// The streamed events of a reply, in the request's dialect.
fn events_of(reply: &reply::Reply, r: &Req<'_>) -> Vec<Bytes> {
    match r.dialect {
        Dialect::Messages | Dialect::Vertex => reply.sse_events(),
        Dialect::Bedrock => reply
            .sse_events()
            .iter()
            .map(|e| crate::cloud::chunk_of_sse(e))
            .collect(),
        Dialect::Responses => openai::responses_events(reply),
        Dialect::Chat => {
            let usage = r.body["stream_options"]["include_usage"].as_bool() == Some(true);
            openai::chat_events(reply, usage)
        }
    }
}

/// A whole reply, in the request's dialect.
fn json_of(reply: &reply::Reply, r: &Req<'_>) -> Value {
    match r.dialect {
        Dialect::Messages | Dialect::Vertex | Dialect::Bedrock => reply.message_json(),
        Dialect::Responses => openai::responses_json(reply),
        Dialect::Chat => openai::chat_json(reply),
    }
}

/// The header that carries the request id: `request-id` (Messages API), `x-request-id` (OpenAI).
fn request_id_header(d: Dialect) -> &'static str {
    match d {
        Dialect::Messages | Dialect::Vertex => "request-id",
        Dialect::Bedrock => "x-amzn-requestid",
        Dialect::Responses | Dialect::Chat => "x-request-id",
    }
}

fn sse(pieces: Vec<Piece>, r: &Req<'_>) -> Plan {
    Plan::Respond {
        status: 200,
        headers: sse_headers(r),
        body: ScriptBody::script(pieces),
    }
}

fn sse_headers(r: &Req<'_>) -> Vec<(String, String)> {
    let content_type = match r.dialect {
        Dialect::Bedrock => "application/vnd.amazon.eventstream",
        _ => "text/event-stream; charset=utf-8",
    };
    vec![
        ("content-type".into(), content_type.into()),
        ("cache-control".into(), "no-cache".into()),
        (request_id_header(r.dialect).into(), r.request_id.clone()),
    ]
}

/// Put the scenario's headers in, each replacing a default header of the same name.
fn set_headers(into: &mut Vec<(String, String)>, headers: &BTreeMap<String, String>) {
    for (name, value) in headers {
        into.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        into.push((name.clone(), value.clone()));
    }
}

fn json_answer(d: Dialect, status: u16, body: &Value, request_id: &str) -> Answer {
    Answer {
        wait: Duration::ZERO,
        plan: Plan::Respond {
            status,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                (request_id_header(d).into(), request_id.to_string()),
            ],
            body: ScriptBody::full(body.to_string()),
        },
    }
}

fn error_answer(
    d: Dialect,
    status: u16,
    error_type: &str,
    message: &str,
    request_id: &str,
) -> Answer {
    let body = match d {
        Dialect::Messages => reply::error_body(error_type, message, Some(request_id)),
        Dialect::Vertex => crate::cloud::vertex_error_body(status, error_type, message),
        Dialect::Bedrock => crate::cloud::bedrock_error_body(message),
        Dialect::Responses | Dialect::Chat => openai::error_body(error_type, message),
    };
    let mut a = json_answer(d, status, &body, request_id);
    if let (Dialect::Bedrock, Plan::Respond { headers, .. }) = (d, &mut a.plan) {
        headers.push((
            "x-amzn-errortype".into(),
            crate::cloud::bedrock_error_type(status, error_type),
        ));
    }
    a
}
