//! Claude on Google Vertex AI: the Messages API body (without `model`, with Vertex's
//! `anthropic_version`) posted to the model's `:streamRawPredict` URL with an OAuth token;
//! the answer is the Messages API's SSE stream, the errors Google's envelope.

use std::sync::Arc;

use keel_protocol::content::AssistantMessage;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::gcp::TokenSource;
use super::{check_model_id, CloudBody};
use crate::anthropic::{
    error_fields, error_parts, header_value, http_client, request_id, retry_after, send_bounded,
    sse_stream, within, ClientConfig,
};
use crate::error::{ApiError, ApiErrorKind};
use crate::request::ModelRequest;
use crate::{BoxFuture, EventStream, Model};

/// The `anthropic_version` Vertex wants in the body.
pub const VERTEX_VERSION: &str = "vertex-2023-10-16";

/// How to reach Claude on Vertex AI.
#[derive(Clone, Debug)]
pub struct VertexConfig {
    /// Timeouts and user agent; `base_url` is the API root with its version
    /// (`https://{region}-aiplatform.googleapis.com/v1` when empty).
    pub client: ClientConfig,
    /// The Google Cloud project (`ANTHROPIC_VERTEX_PROJECT_ID`).
    pub project: String,
    /// The region (`CLOUD_ML_REGION`).
    pub region: String,
    /// Where tokens come from; `None` sends no `authorization` (`CLAUDE_CODE_SKIP_VERTEX_AUTH`).
    pub auth: Option<Arc<TokenSource>>,
}

/// The default API root of `region`.
pub fn default_base_url(region: &str) -> String {
    if region == "global" {
        "https://aiplatform.googleapis.com/v1".to_owned()
    } else {
        format!("https://{region}-aiplatform.googleapis.com/v1")
    }
}

/// A Vertex AI client.
#[derive(Debug)]
pub struct VertexClient {
    http: reqwest::Client,
    cfg: VertexConfig,
    /// `{base}/projects/{project}/locations/{region}/publishers/anthropic/models/`.
    prefix: String,
    last_body: std::sync::atomic::AtomicUsize,
}

fn check_name(v: &str, what: &str, extra: &str) -> Result<(), ApiError> {
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || extra.contains(c));
    if ok {
        return Ok(());
    }
    Err(ApiError::new(
        ApiErrorKind::Config,
        format!("{what} {v:?} is not a Google Cloud {what} (lower-case letters, digits and -)"),
    ))
}

impl VertexClient {
    /// Build a client; a project or region that is not a Google name, or a base URL that is
    /// not http(s), is a configuration error.
    pub fn new(mut cfg: VertexConfig) -> Result<Self, ApiError> {
        check_name(&cfg.project, "project", ".:")?;
        check_name(&cfg.region, "region", "")?;
        if cfg.client.base_url.trim().is_empty() {
            cfg.client.base_url = default_base_url(&cfg.region);
        }
        let prefix = crate::anthropic::endpoint(
            &cfg.client.base_url,
            &format!(
                "/projects/{}/locations/{}/publishers/anthropic/models/",
                cfg.project, cfg.region
            ),
        )?;
        let http = http_client(HeaderMap::new(), &cfg.client)?;
        Ok(Self {
            http,
            cfg,
            prefix,
            last_body: Default::default(),
        })
    }

    /// The URL a request for `model` goes to.
    pub fn url(&self, model: &str, stream: bool) -> Result<String, ApiError> {
        check_model_id(model, &['@'], "Vertex AI")?;
        let verb = if stream {
            "streamRawPredict"
        } else {
            "rawPredict"
        };
        Ok(format!("{}{model}:{verb}", self.prefix))
    }

    async fn send(&self, req: &ModelRequest, stream: bool) -> Result<reqwest::Response, ApiError> {
        let url = self.url(&req.model, stream)?;
        let hint = self.last_body.load(std::sync::atomic::Ordering::Relaxed);
        let body = CloudBody::new(req, VERTEX_VERSION, Some(stream), true).encode(hint)?;
        self.last_body
            .store(body.len(), std::sync::atomic::Ordering::Relaxed);
        let body = bytes::Bytes::from(body);
        // A token the API refuses (revoked, expired early) is replaced once.
        for attempt in 0..2 {
            let mut rb = self
                .http
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone());
            let mut token = None;
            if let Some(auth) = &self.cfg.auth {
                let t = auth.token().await?;
                rb = rb.header(
                    "authorization",
                    header_value(&format!("Bearer {t}"), "the Google access token")?,
                );
                token = Some(t);
            }
            let resp = send_bounded(rb, self.cfg.client.idle_timeout).await?;
            let status = resp.status().as_u16();
            if resp.status().is_success() {
                return Ok(resp);
            }
            if let (401, Some(auth), Some(t), 0) = (status, &self.cfg.auth, &token, attempt) {
                auth.invalidate(t).await;
                continue;
            }
            let (status, headers, body) = error_parts(resp).await;
            return Err(google_error(status, &headers, &body, &self.cfg, &req.model));
        }
        Err(ApiError::new(
            ApiErrorKind::Config,
            "Vertex AI refused a freshly fetched token as well",
        ))
    }
}

/// The error a Vertex error response says: Google's envelope
/// (`{"error": {"code", "status", "message"}}`, sometimes in a one-element list) or, for
/// errors the model itself raised, the Messages API's. 403 and 404 name what to fix.
pub fn google_error(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    cfg: &VertexConfig,
    model: &str,
) -> ApiError {
    let v: Option<Value> = serde_json::from_slice(body).ok();
    let env = v.as_ref().map(|v| match v {
        Value::Array(a) => a.first().unwrap_or(v),
        _ => v,
    });
    let google = env
        .and_then(|v| v.get("error"))
        .and_then(|e| Some((e.get("status")?.as_str()?, e.get("message")?.as_str()?)));
    let (error_type, mut message) = match (google, error_fields(body)) {
        (Some((s, m)), _) => (Some(s.to_owned()), m.to_owned()),
        (None, Some(f)) => f,
        (None, None) => (None, crate::anthropic::body_text(status, body)),
    };
    let hint = match status {
        401 => Some("the Google credentials were refused: run `gcloud auth application-default login` or check GOOGLE_APPLICATION_CREDENTIALS".to_owned()),
        403 => Some(format!(
            "check that the Vertex AI API is enabled in project {:?}, that these credentials may call it, and that the model is enabled for the project in Model Garden",
            cfg.project
        )),
        404 => Some(format!(
            "the model {model:?} is not served in region {:?} of project {:?}: check the model id (Vertex ids look like claude-sonnet-4-5@20250929) and CLOUD_ML_REGION",
            cfg.region, cfg.project
        )),
        _ => None,
    };
    if let Some(h) = hint {
        message = format!("{message} ({h})");
    }
    ApiError {
        kind: ApiErrorKind::Http,
        status: Some(status),
        error_type,
        message,
        retry_after: retry_after(headers),
        request_id: request_id(headers),
    }
}

impl Model for VertexClient {
    fn stream<'a>(&'a self, req: &'a ModelRequest) -> BoxFuture<'a, Result<EventStream, ApiError>> {
        Box::pin(async move {
            let resp = self.send(req, true).await?;
            let request_id = request_id(resp.headers());
            Ok(sse_stream(resp, self.cfg.client.idle_timeout, request_id))
        })
    }

    fn complete<'a>(
        &'a self,
        req: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ApiError>> {
        Box::pin(async move {
            let fut = async {
                let resp = self.send(req, false).await?;
                let request_id = request_id(resp.headers());
                Ok((crate::anthropic::read_message(resp).await?, request_id))
            };
            within(self.cfg.client.request_timeout, fut).await
        })
    }
}
