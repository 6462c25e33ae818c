//! Claude through the clouds: Amazon Bedrock ([`BedrockClient`]) and Google Vertex AI
//! ([`VertexClient`]). Both take the Messages API's body (with the model in the URL instead)
//! and give back the Messages API's events, so the engine drives them like any provider.
//! (Microsoft Foundry is the Messages API itself at an Azure URL: an [`crate::AnthropicClient`]
//! with a key, an [`azure_foundry::FoundryEntraClient`] with Microsoft Entra ID tokens.)

pub mod aws;
pub mod azure;
pub mod azure_foundry;
pub mod bedrock;
pub mod eventstream;
pub mod gcp;
pub mod sigv4;
pub mod vertex;

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::error::{ApiError, ApiErrorKind};
use crate::request::{ModelRequest, RequestMessage, ToolSpec};

pub use bedrock::{BedrockAuth, BedrockClient, BedrockConfig};
pub use vertex::{VertexClient, VertexConfig};

/// The longest model id keel sends in a URL.
const MAX_MODEL_ID: usize = 256;

/// The Messages API body without `model` (the cloud names the model in the URL), with the
/// cloud's `anthropic_version`.
#[derive(Serialize)]
pub(crate) struct CloudBody<'a> {
    anthropic_version: &'static str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    system: &'a [Value],
    messages: &'a [RequestMessage],
    #[serde(skip_serializing_if = "<[ToolSpec]>::is_empty")]
    tools: &'a [ToolSpec],
    /// Vertex reads `stream` from the body; Bedrock refuses it (the path says).
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    /// Bedrock refuses `metadata`; Vertex takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a Value>,
}

impl<'a> CloudBody<'a> {
    /// The body of `req` for a cloud speaking `version`.
    pub(crate) fn new(
        req: &'a ModelRequest,
        version: &'static str,
        stream: Option<bool>,
        metadata: bool,
    ) -> Self {
        let tools: &Arc<Vec<ToolSpec>> = &req.tools;
        Self {
            anthropic_version: version,
            max_tokens: req.max_tokens,
            system: &req.system,
            messages: &req.messages,
            tools: tools.as_slice(),
            stream,
            metadata: req.metadata.as_ref().filter(|_| metadata),
            thinking: req.thinking.as_ref(),
        }
    }

    /// The JSON bytes, sized from `hint` (the last body's size).
    pub(crate) fn encode(&self, hint: usize) -> Result<Vec<u8>, ApiError> {
        let mut buf = Vec::with_capacity(hint + hint / 8 + 4096);
        serde_json::to_writer(&mut buf, self).map_err(|e| {
            ApiError::new(
                ApiErrorKind::Config,
                format!("could not encode the request: {e}"),
            )
        })?;
        Ok(buf)
    }
}

/// A model id that goes into a URL path: non-empty, bounded, and without characters that
/// would change the path (`/`, `?`, `#`, `%`, spaces); `extra` lists what the cloud's ids may
/// carry beyond letters, digits and `-._`.
pub(crate) fn check_model_id(model: &str, extra: &[char], cloud: &str) -> Result<(), ApiError> {
    let ok = !model.is_empty()
        && model.len() <= MAX_MODEL_ID
        && model
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c) || extra.contains(&c));
    if ok {
        return Ok(());
    }
    Err(ApiError::new(
        ApiErrorKind::Config,
        format!(
            "the model id {:?} cannot be sent to {cloud}: ids there are at most {MAX_MODEL_ID} letters, digits and {}",
            crate::anthropic::truncate(model, 80),
            ["-", ".", "_"]
                .iter()
                .map(|s| s.to_string())
                .chain(extra.iter().map(|c| c.to_string()))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    ))
}

/// Whether a credential endpoint may be called at `url`: https to any host, or plain http only
/// to this machine (loopback, `localhost`) — and, with `link_local`, to a link-local metadata
/// address, which never leaves the machine's link. A token or secret must not cross a
/// network in clear.
pub(crate) fn endpoint_ok(url: &str, link_local: bool) -> bool {
    match reqwest::Url::parse(url) {
        Ok(u) if u.scheme() == "https" && u.has_host() => true,
        Ok(u) if u.scheme() == "http" => {
            let host = u.host_str().unwrap_or("");
            host == "localhost"
                || host
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| match ip {
                        std::net::IpAddr::V4(v4) => {
                            v4.is_loopback() || (link_local && v4.is_link_local())
                        }
                        std::net::IpAddr::V6(v6) => v6.is_loopback(),
                    })
        }
        _ => false,
    }
}
