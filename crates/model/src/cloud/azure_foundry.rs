//! Claude on Microsoft Foundry with a Microsoft Entra ID token: the Messages API (as the
//! Anthropic client sends it) with `Authorization: Bearer` from an [`EntraCredential`],
//! replaced once when Foundry refuses it. (With `ANTHROPIC_FOUNDRY_API_KEY`, Foundry is an
//! [`crate::AnthropicClient`] at the resource's URL.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use keel_protocol::content::AssistantMessage;
use reqwest::header::{HeaderMap, HeaderValue};

use super::azure::EntraCredential;
use crate::anthropic::{
    endpoint, error_from_parts, error_parts, header_str, header_value, http_client, read_message,
    send_bounded, sse_stream, within, ClientConfig,
};
use crate::error::{ApiError, ApiErrorKind};
use crate::request::ModelRequest;
use crate::{BoxFuture, EventStream, Model};

/// The Messages API version Foundry serves.
const API_VERSION: &str = "2023-06-01";

/// A Foundry client that authenticates with Entra ID tokens.
#[derive(Debug)]
pub struct FoundryEntraClient {
    http: reqwest::Client,
    cfg: ClientConfig,
    url: String,
    auth: Arc<EntraCredential>,
    last_body: AtomicUsize,
}

impl FoundryEntraClient {
    /// A client for the Foundry endpoint `cfg.base_url` (its `api_key` and `auth_token` are
    /// not sent: the token comes from `auth`).
    pub fn new(cfg: ClientConfig, auth: Arc<EntraCredential>) -> Result<Self, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        let http = http_client(headers, &cfg)?;
        let url = endpoint(&cfg.base_url, "/v1/messages")?;
        Ok(Self {
            http,
            cfg,
            url,
            auth,
            last_body: AtomicUsize::new(0),
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn send(&self, req: &ModelRequest, stream: bool) -> Result<reqwest::Response, ApiError> {
        let hint = self.last_body.load(Ordering::Relaxed);
        let mut buf = Vec::with_capacity(hint + hint / 8 + 4096);
        let encoded = if req.stream == stream {
            serde_json::to_writer(&mut buf, req)
        } else {
            let mut body = req.clone();
            body.stream = stream;
            serde_json::to_writer(&mut buf, &body)
        };
        encoded.map_err(|e| {
            ApiError::new(
                ApiErrorKind::Config,
                format!("could not encode the request: {e}"),
            )
        })?;
        self.last_body.store(buf.len(), Ordering::Relaxed);
        let body = bytes::Bytes::from(buf);
        // A token Foundry refuses (revoked, expired early) is replaced once.
        for attempt in 0..2 {
            let token = self.auth.token().await?;
            let rb = self
                .http
                .post(&self.url)
                .header("content-type", "application/json")
                .header(
                    "authorization",
                    header_value(&format!("Bearer {token}"), "the Entra ID token")?,
                )
                .body(body.clone());
            let resp = send_bounded(rb, self.cfg.idle_timeout).await?;
            if resp.status().is_success() {
                return Ok(resp);
            }
            if resp.status().as_u16() == 401 && attempt == 0 {
                self.auth.invalidate(&token).await;
                continue;
            }
            let (status, headers, body) = error_parts(resp).await;
            let mut e = error_from_parts(status, &headers, &body);
            if matches!(status, 401 | 403) {
                e.message = format!(
                    "{} (Foundry refused the Microsoft Entra ID token from the {}: the identity needs a role such as Cognitive Services User on the resource)",
                    e.message,
                    self.auth.describe().await
                );
            }
            return Err(e);
        }
        Err(ApiError::new(
            ApiErrorKind::Config,
            "Foundry refused a freshly fetched Entra ID token as well",
        ))
    }
}

impl Model for FoundryEntraClient {
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
