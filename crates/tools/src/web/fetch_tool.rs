//! The WebFetch tool: fetch a page, convert it, and answer the call's prompt from it with a
//! separate model request.

use std::sync::Arc;
use std::time::Instant;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::fetch::{
    effective_url, fetch, parse_url, rule_host, FetchCx, FetchLimits, Page, Resolver,
};
use super::{html, DigestRequest, HostPermit, WebError, WebHost, WebModelError};
use crate::{BoxFuture, ToolContext, ToolKind, ToolOutcome};

/// The longest URL accepted.
pub const MAX_URL_CHARS: usize = 2000;
/// The most characters of a page's text the reading model gets.
pub const DEFAULT_TEXT_CHARS: usize = 100_000;

const DESCRIPTION: &str = "Fetch a web page (http or https) and answer a question about it. \
The page is converted to markdown and read by a separate model request that answers `prompt` \
from it; you get that answer, not the raw page. http:// URLs are fetched over https. Local, \
private and link-local addresses are refused unless a permission rule names the host. Pages are \
limited in size and time, redirects are followed only to hosts the permission rules allow, and \
only HTML, text, markdown and JSON are read. Say in `prompt` exactly what you need from the page.";

/// WebFetch's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The URL to fetch (http or https).
    url: String,
    /// What to find out from the page.
    prompt: String,
}

/// The WebFetch tool.
pub struct WebFetchTool {
    host: Arc<dyn WebHost>,
    resolver: Arc<dyn Resolver>,
    limits: FetchLimits,
    text_chars: usize,
}

impl WebFetchTool {
    /// A WebFetch that asks `host` for permission and model requests, within `limits`.
    pub fn new(host: Arc<dyn WebHost>, limits: FetchLimits) -> Self {
        Self {
            host,
            resolver: Arc::new(super::SystemResolver),
            limits,
            text_chars: DEFAULT_TEXT_CHARS,
        }
    }

    /// Look host names up with `resolver` instead of the system's.
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }
}

fn check(inp: &Input) -> Result<(), ToolOutcome> {
    if inp.url.chars().count() > MAX_URL_CHARS {
        return Err(ToolOutcome::failed(format!(
            "Invalid input for WebFetch: `url` is longer than {MAX_URL_CHARS} characters."
        )));
    }
    if inp.prompt.trim().is_empty() {
        return Err(ToolOutcome::failed(
            "Invalid input for WebFetch: `prompt` is empty; say what to find out from the page.",
        ));
    }
    Ok(())
}

/// The first `max` characters of `text`, and whether it was cut.
fn cut(text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((i, _)) => (text[..i].to_owned(), true),
        None => (text, false),
    }
}

/// How long turning a fetched page into text may take.
const CONVERT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

impl crate::TypedTool for WebFetchTool {
    type Input = Input;
    const NAME: &'static str = "WebFetch";
    const KIND: crate::ToolKind = ToolKind::WebFetch;
    const DESCRIPTION: &'static str = DESCRIPTION;
    /// It changes nothing here, but what it sends (the URL) leaves the machine: it is
    /// decided by the WebFetch rules, never let through as a read.
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let started = Instant::now();
            if let Err(o) = check(&inp) {
                return o;
            }
            // The URL as it will be fetched (http upgraded where it will be): the permission
            // check judged this one too.
            let url = match parse_url(&inp.url) {
                Ok(u) => effective_url(&u),
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            // The call was allowed (by a rule, the mode or an approval): what the rules say
            // about the host only decides whether it may be a local address.
            let port = url.port_or_known_default().unwrap_or(443);
            let first = match self.host.permit(&rule_host(&url), port) {
                HostPermit::Refused { .. } | HostPermit::Ask { .. } => {
                    HostPermit::Allowed { named: false }
                }
                p => p,
            };
            let fcx = FetchCx {
                host: self.host.as_ref(),
                resolver: self.resolver.as_ref(),
                limits: &self.limits,
                cancel: &cx.cancel,
                gate: cx.web_gate.as_deref(),
            };
            let page = match fetch(&fcx, url, first).await {
                Ok(p) => p,
                Err(WebError::Cancelled) => {
                    return cx.stopped(true, String::new(), started.elapsed(), 0)
                }
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            self.answer(page, inp.prompt, &cx, started).await
        })
    }
}

impl WebFetchTool {
    /// Convert the page and have the reading model answer the prompt from it.
    async fn answer(
        &self,
        page: Page,
        prompt: String,
        cx: &ToolContext,
        started: Instant,
    ) -> ToolOutcome {
        let is_html = matches!(
            page.media_type.as_str(),
            "text/html" | "application/xhtml+xml"
        );
        let (text, flattened) = if is_html {
            // Bounded like the fetch: a page that takes longer to convert is a truthful error,
            // and an interrupt is never held up by it.
            let converted = tokio::select! {
                c = html::to_markdown(page.body) => c,
                _ = cx.cancel.cancelled() => {
                    return ToolOutcome::failed("WebFetch was interrupted while it read the page.".to_owned())
                }
                _ = tokio::time::sleep(CONVERT_LIMIT) => {
                    return ToolOutcome::failed(format!(
                        "WebFetch fetched {} but could not read it as text within {} s.",
                        page.url,
                        CONVERT_LIMIT.as_secs()
                    ))
                }
            };
            match converted {
                Ok(c) => (c.text, c.flattened),
                Err(e) => {
                    return ToolOutcome::failed(format!("WebFetch fetched {} but {e}.", page.url))
                }
            }
        } else {
            (page.body, false)
        };
        let (text, truncated) = cut(text, self.text_chars);
        let req = DigestRequest {
            url: page.url.to_string(),
            page: text,
            prompt,
            truncated,
        };
        let answer = match self.host.digest(req, &cx.cancel).await {
            Ok(a) => a,
            Err(WebModelError::Cancelled) => {
                return cx.stopped(true, String::new(), started.elapsed(), 0)
            }
            Err(e) => {
                return ToolOutcome::failed(format!(
                "WebFetch fetched {} ({} bytes) but the model request that reads it failed: {e}",
                page.url, page.bytes
            ))
            }
        };
        let mut notes = Vec::new();
        if !page.redirects.is_empty() {
            notes.push(format!(
                "(Fetched from {} after {} redirect(s).)",
                page.url,
                page.redirects.len()
            ));
        }
        if truncated {
            notes.push(format!(
                "(The page was longer than {} characters; only its start was read.)",
                self.text_chars
            ));
        }
        if flattened {
            notes.push(
                "(The page was nested too deeply to convert to markdown; only its text was read.)"
                    .to_owned(),
            );
        }
        let content = if notes.is_empty() {
            answer.clone()
        } else {
            format!("{}\n\n{answer}", notes.join("\n"))
        };
        ToolOutcome::Ok {
            content,
            meta: Some(json!({
                "bytes": page.bytes,
                "code": page.status,
                "codeText": reqwest::StatusCode::from_u16(page.status).ok().and_then(|s| s.canonical_reason()).unwrap_or(""),
                "result": answer,
                "durationMs": started.elapsed().as_millis() as u64,
                "url": page.url.to_string(),
            })),
        }
    }
}
