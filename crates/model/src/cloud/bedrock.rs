//! Claude on Amazon Bedrock: the Messages API body (Bedrock's `anthropic_version`, no `model`
//! or `stream`) posted to `/model/{id}/invoke-with-response-stream`, signed with SigV4 (or a
//! Bedrock API key); the answer is AWS event-stream frames whose `chunk` payloads carry the
//! Messages API's events, and whose exception frames are the stream's errors.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use futures_util::StreamExt;
use keel_protocol::content::AssistantMessage;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::aws::CredentialsProvider;
use super::eventstream::{Decoder, Message};
use super::sigv4::{self, Credentials};
use super::{check_model_id, CloudBody};
use crate::anthropic::{
    body_text, error_fields, error_parts, event_of, header_str, header_value, http_client,
    retry_after, send_bounded, truncate, within, ClientConfig,
};
use crate::error::{ApiError, ApiErrorKind};
use crate::request::ModelRequest;
use crate::{BoxFuture, EventStream, Model, SseEvent};

/// The `anthropic_version` Bedrock wants in the body.
pub const BEDROCK_VERSION: &str = "bedrock-2023-05-31";

/// How requests to Bedrock are authenticated.
#[derive(Clone, Debug)]
pub enum BedrockAuth {
    /// A Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`), sent as `Authorization: Bearer`.
    Bearer(String),
    /// SigV4 with the credentials of a provider (refreshed before they expire, and once
    /// when Bedrock refuses them).
    SigV4(Arc<CredentialsProvider>),
    /// Nothing (`CLAUDE_CODE_SKIP_BEDROCK_AUTH`: a gateway signs for us).
    None,
}

/// How to reach Claude on Bedrock.
#[derive(Clone, Debug)]
pub struct BedrockConfig {
    /// Timeouts and user agent; `base_url` is `https://bedrock-runtime.{region}.amazonaws.com`
    /// when empty.
    pub client: ClientConfig,
    /// The AWS region (`AWS_REGION`).
    pub region: String,
    /// How to authenticate.
    pub auth: BedrockAuth,
}

/// A Bedrock client.
#[derive(Debug)]
pub struct BedrockClient {
    http: reqwest::Client,
    cfg: BedrockConfig,
    last_body: std::sync::atomic::AtomicUsize,
}

impl BedrockClient {
    /// Build a client; a region that is not an AWS region name or a base URL that is not
    /// http(s) is a configuration error.
    pub fn new(mut cfg: BedrockConfig) -> Result<Self, ApiError> {
        if !super::aws::region_ok(&cfg.region) {
            return Err(ApiError::new(
                ApiErrorKind::Config,
                format!("{:?} is not an AWS region (like us-east-1)", cfg.region),
            ));
        }
        if cfg.client.base_url.trim().is_empty() {
            cfg.client.base_url = format!("https://bedrock-runtime.{}.amazonaws.com", cfg.region);
        }
        crate::anthropic::endpoint(&cfg.client.base_url, "/model/")?;
        let http = http_client(HeaderMap::new(), &cfg.client)?;
        Ok(Self {
            http,
            cfg,
            last_body: Default::default(),
        })
    }

    /// The URL of `model`'s streaming (or plain) invocation: the id's `:` raw, a `/` (in an
    /// inference-profile ARN) percent-encoded.
    pub fn url(&self, model: &str, stream: bool) -> Result<reqwest::Url, ApiError> {
        check_model_id(model, &[':', '/'], "Amazon Bedrock")?;
        if model.chars().all(|c| c == '.') {
            return Err(ApiError::new(
                ApiErrorKind::Config,
                format!("the model id {model:?} cannot be sent to Amazon Bedrock"),
            ));
        }
        let verb = if stream {
            "invoke-with-response-stream"
        } else {
            "invoke"
        };
        let url = format!(
            "{}/model/{}/{verb}",
            self.cfg.client.base_url.trim_end_matches('/'),
            model.replace('/', "%2F")
        );
        reqwest::Url::parse(&url)
            .map_err(|e| ApiError::new(ApiErrorKind::Config, format!("{url}: {e}")))
    }

    fn request(
        &self,
        url: &reqwest::Url,
        body: &bytes::Bytes,
        stream: bool,
        creds: Option<&Credentials>,
    ) -> Result<reqwest::RequestBuilder, ApiError> {
        let accept = if stream {
            "application/vnd.amazon.eventstream"
        } else {
            "application/json"
        };
        let mut rb = self
            .http
            .post(url.clone())
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.clone());
        match &self.cfg.auth {
            BedrockAuth::None => {}
            BedrockAuth::Bearer(t) => {
                rb = rb.header(
                    "authorization",
                    header_value(&format!("Bearer {t}"), "AWS_BEARER_TOKEN_BEDROCK")?,
                );
            }
            BedrockAuth::SigV4(_) => {
                let Some(creds) = creds else {
                    return Err(ApiError::new(
                        ApiErrorKind::Config,
                        "the AWS credentials could not be loaded",
                    ));
                };
                let host = match url.port() {
                    Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
                    None => url.host_str().unwrap_or_default().to_owned(),
                };
                let date = sigv4::amz_date(SystemTime::now());
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("host", host.as_str()),
                    ("x-amz-date", date.as_str()),
                ];
                if let Some(t) = &creds.session_token {
                    headers.push(("x-amz-security-token", t.as_str()));
                }
                let sig = sigv4::sign(
                    &sigv4::Request {
                        method: "POST",
                        path: url.path(),
                        query: url.query().unwrap_or(""),
                        headers: &headers,
                        payload: body,
                    },
                    creds,
                    &date,
                    &self.cfg.region,
                    "bedrock",
                );
                rb = rb
                    .header("x-amz-date", header_value(&date, "the signing date")?)
                    .header(
                        "authorization",
                        header_value(&sig.authorization, "the AWS access key id")?,
                    );
                if let Some(t) = &creds.session_token {
                    rb = rb.header(
                        "x-amz-security-token",
                        header_value(t, "AWS_SESSION_TOKEN")?,
                    );
                }
            }
        }
        Ok(rb)
    }

    async fn send(&self, req: &ModelRequest, stream: bool) -> Result<reqwest::Response, ApiError> {
        let url = self.url(&req.model, stream)?;
        let hint = self.last_body.load(std::sync::atomic::Ordering::Relaxed);
        let body = CloudBody::new(req, BEDROCK_VERSION, None, false).encode(hint)?;
        self.last_body
            .store(body.len(), std::sync::atomic::Ordering::Relaxed);
        let body = bytes::Bytes::from(body);
        let mut refreshed = false;
        loop {
            let used = match &self.cfg.auth {
                BedrockAuth::SigV4(p) => Some(p.credentials().await.map_err(|e| ApiError {
                    message: format!("the AWS credentials could not be loaded: {}", e.message),
                    ..e
                })?),
                _ => None,
            };
            let rb = self.request(&url, &body, stream, used.as_ref())?;
            let resp = send_bounded(rb, self.cfg.client.idle_timeout).await?;
            if resp.status().is_success() {
                return Ok(resp);
            }
            let (status, headers, bytes) = error_parts(resp).await;
            let e = bedrock_error(status, &headers, &bytes, &self.cfg.region, &req.model);
            // Refused credentials: fetch fresh ones, once, and try again if they differ.
            let refused = matches!(
                e.error_type.as_deref(),
                Some("ExpiredTokenException" | "UnrecognizedClientException")
            );
            if let (true, false, Some(c), BedrockAuth::SigV4(p)) =
                (refused, refreshed, used, &self.cfg.auth)
            {
                refreshed = true;
                p.invalidate(&c);
                if p.credentials().await.is_ok_and(|fresh| fresh != c) {
                    continue;
                }
            }
            return Err(e);
        }
    }
}

/// The error a Bedrock error response says: `x-amzn-errortype` and the body's `message`,
/// with what to fix for the errors people can fix.
pub fn bedrock_error(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    region: &str,
    model: &str,
) -> ApiError {
    let error_type = header_str(headers, "x-amzn-errortype")
        .map(|t| t.split(':').next().unwrap_or_default().trim().to_owned())
        .filter(|t| !t.is_empty());
    let v: Option<Value> = serde_json::from_slice(body).ok();
    let message = v
        .as_ref()
        .and_then(|v| v.get("message").or_else(|| v.get("Message")))
        .and_then(Value::as_str)
        .map(|m| truncate(m, 1000).to_owned())
        .or_else(|| error_fields(body).map(|(_, m)| m))
        .unwrap_or_else(|| body_text(status, body));
    let hint = match error_type.as_deref() {
        Some("AccessDeniedException") => Some(format!(
            "model access not enabled, or the credentials may not use it: enable {model:?} under Model access in the Bedrock console for {region}, and allow bedrock:InvokeModelWithResponseStream"
        )),
        Some("UnrecognizedClientException" | "InvalidSignatureException" | "IncompleteSignatureException") => Some(
            "the AWS credentials were refused: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE".to_owned(),
        ),
        Some("ExpiredTokenException") => Some(
            "the AWS credentials have expired and their source gave no fresh ones: refresh them there (for SSO, `aws sso login`; for exported keys, export them again)".to_owned(),
        ),
        Some("ResourceNotFoundException") => Some(format!(
            "{model:?} is not offered in {region}: check the model id (Bedrock ids look like us.anthropic.claude-sonnet-4-5-20250929-v1:0) and AWS_REGION"
        )),
        Some("ValidationException") if message.contains("model identifier") => Some(format!(
            "check the model id and that it is offered in {region} (AWS_REGION)"
        )),
        _ => None,
    };
    ApiError {
        kind: ApiErrorKind::Http,
        status: Some(status),
        error_type,
        message: match hint {
            Some(h) => format!("{message} ({h})"),
            None => message,
        },
        retry_after: retry_after(headers),
        request_id: header_str(headers, "x-amzn-requestid"),
    }
}

struct State<S> {
    bytes: S,
    dec: Decoder,
    idle: Duration,
    request_id: Option<String>,
    done: bool,
}

/// The events of an event-stream body (a response; the fuzz target's input).
pub(crate) fn event_stream<S, E>(
    bytes: S,
    idle: Duration,
    request_id: Option<String>,
) -> EventStream
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let state = State {
        bytes,
        dec: Decoder::default(),
        idle,
        request_id,
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let item = next_event(&mut st).await;
        // After an error, a message_stop or the end, nothing more is read.
        st.done = !matches!(&item, Ok(ev) if !matches!(ev.event, keel_protocol::StreamEvent::MessageStop(_)));
        Some((item, st))
    }))
}

async fn next_event<S, E>(st: &mut State<S>) -> Result<SseEvent, ApiError>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    loop {
        if let Some(m) = st.dec.next_message()? {
            match event_of_message(&m, &st.request_id)? {
                Some(ev) => return Ok(ev),
                None => continue,
            }
        }
        let next = tokio::time::timeout(st.idle, st.bytes.next())
            .await
            .map_err(|_| {
                ApiError::new(
                    ApiErrorKind::StreamIdle,
                    format!("the stream sent nothing for {} ms", st.idle.as_millis()),
                )
            })?;
        match next {
            None => {
                return Err(ApiError::new(
                    ApiErrorKind::StreamDropped,
                    if st.dec.has_partial() {
                        "the stream ended inside an event-stream message, before message_stop"
                    } else {
                        "the stream ended before message_stop"
                    },
                ))
            }
            Some(Err(e)) => {
                return Err(ApiError::new(
                    ApiErrorKind::ConnectionLost,
                    format!("the stream broke: {e}"),
                ))
            }
            Some(Ok(b)) => st.dec.push(&b),
        }
    }
}

/// The Messages API event a frame carries (`None` for frames keel has no use for), or the
/// error an exception frame reports.
fn event_of_message(
    m: &Message,
    request_id: &Option<String>,
) -> Result<Option<SseEvent>, ApiError> {
    match m.header(":message-type") {
        Some("event") if m.header(":event-type") == Some("chunk") => {
            let v: Value = serde_json::from_slice(&m.payload).map_err(|_| {
                ApiError::new(
                    ApiErrorKind::Protocol,
                    "a Bedrock chunk whose payload is not JSON",
                )
            })?;
            let b64 = v.get("bytes").and_then(Value::as_str).ok_or_else(|| {
                ApiError::new(ApiErrorKind::Protocol, "a Bedrock chunk without `bytes`")
            })?;
            let data = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .ok()
                .and_then(|d| String::from_utf8(d).ok())
                .ok_or_else(|| {
                    ApiError::new(
                        ApiErrorKind::Protocol,
                        "a Bedrock chunk whose `bytes` is not base64 UTF-8",
                    )
                })?;
            event_of(&data, request_id).map(Some)
        }
        Some("event") => Ok(None),
        Some("exception") => Err(exception(m, request_id)),
        Some("error") => Err(ApiError {
            kind: ApiErrorKind::StreamError,
            status: None,
            error_type: m.header(":error-code").map(str::to_owned),
            message: m
                .header(":error-message")
                .unwrap_or("the stream reported an error")
                .to_owned(),
            retry_after: None,
            request_id: request_id.clone(),
        }),
        other => Err(ApiError::new(
            ApiErrorKind::Protocol,
            format!("an event-stream message of type {other:?}"),
        )),
    }
}

/// The error of an exception frame. The model's own errors come wrapped in
/// `modelStreamErrorException` with the original body, whose type is kept so they classify
/// (and trigger a fallback) exactly like the Messages API's `error` events.
fn exception(m: &Message, request_id: &Option<String>) -> ApiError {
    let name = m
        .header(":exception-type")
        .unwrap_or("exception")
        .to_owned();
    let v: Value = serde_json::from_slice(&m.payload).unwrap_or(Value::Null);
    let message = v
        .get("message")
        .or_else(|| v.get("Message"))
        .and_then(Value::as_str)
        .map(|s| truncate(s, 1000).to_owned())
        .unwrap_or_else(|| name.clone());
    let original = v
        .get("originalMessage")
        .and_then(Value::as_str)
        .and_then(|o| error_fields(o.as_bytes()))
        .and_then(|(t, _)| t);
    ApiError {
        kind: ApiErrorKind::StreamError,
        status: None,
        error_type: Some(original.unwrap_or(name)),
        message,
        retry_after: None,
        request_id: request_id.clone(),
    }
}

impl Model for BedrockClient {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> BoxFuture<'a, Result<EventStream, ApiError>> {
        Box::pin(async move {
            let resp = self.send(req, true).await?;
            let request_id = header_str(resp.headers(), "x-amzn-requestid");
            Ok(event_stream(
                resp.bytes_stream(),
                self.cfg.client.idle_timeout,
                request_id,
            ))
        })
    }

    fn complete<'a>(
        &'a self,
        req: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ApiError>> {
        Box::pin(async move {
            let fut = async {
                let resp = self.send(req, false).await?;
                let request_id = header_str(resp.headers(), "x-amzn-requestid");
                Ok((crate::anthropic::read_message(resp).await?, request_id))
            };
            within(self.cfg.client.request_timeout, fut).await
        })
    }
}
