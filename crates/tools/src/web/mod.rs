//! WebFetch and WebSearch.
//!
//! WebFetch fetches a page itself, bounded and checked hop by hop ([`fetch`]), converts it to
//! markdown ([`html`]) and hands it, with the call's prompt, to a separate model request with
//! no tools: the answer to that request is the tool result, so the main conversation never
//! holds the raw page. WebSearch hands the query to the provider's server-side search tool.
//! Both need the engine for their model requests and the live permission rules: it lends
//! them through [`WebHost`].

pub mod addr;
pub mod fetch;
#[cfg(test)]
mod fetch_tests;
mod fetch_tool;
pub mod html;
mod search_tool;

use std::net::IpAddr;
use std::time::Duration;

pub use fetch::{canonical_rule_host, effective_url, FetchLimits, Resolver, SystemResolver};
pub use fetch_tool::WebFetchTool;
pub use search_tool::WebSearchTool;

use crate::{BoxFuture, CancelToken};

/// What the permission rules say about a host a fetch goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPermit {
    /// Allowed; `named` when an allow rule names this host exactly (only then may it be a
    /// loopback, private or link-local address, or a local name).
    Allowed {
        /// An allow rule names the host exactly.
        named: bool,
    },
    /// Refused: a deny rule, a hook or a command's `allowed-tools` stands in the way (why,
    /// in keel's words).
    Refused {
        /// Why, and how to allow it.
        why: String,
    },
    /// Nothing allows it but nothing refuses it either: someone would have to be asked, and
    /// nobody can be asked in the middle of a fetch.
    Ask {
        /// Why, and how to allow it.
        why: String,
    },
}

/// The decision a WebFetch call's first URL went through (PreToolUse hooks, the live rules, a
/// custom command's `allowed-tools`), made again for each further URL the call reaches: a
/// redirect's target, or the https upgrade when it changes the port. Lent by the engine for
/// one call through [`crate::ToolContext`].
pub trait HopGate: Send + Sync + std::fmt::Debug {
    /// What the decision says about fetching `url` in this call.
    fn judge<'a>(&'a self, url: &'a url::Url) -> BoxFuture<'a, HostPermit>;
}

/// A page and the question to answer from it, for the model request WebFetch makes.
#[derive(Clone, Debug)]
pub struct DigestRequest {
    /// The URL the page came from (after redirects).
    pub url: String,
    /// The page as markdown (already cut to the text cap).
    pub page: String,
    /// The call's prompt.
    pub prompt: String,
    /// Whether the page was cut to fit.
    pub truncated: bool,
}

/// A WebSearch call, checked.
#[derive(Clone, Debug)]
pub struct SearchRequest {
    /// The query.
    pub query: String,
    /// Only results from these domains.
    pub allowed_domains: Vec<String>,
    /// No results from these domains.
    pub blocked_domains: Vec<String>,
}

/// What a search found.
#[derive(Clone, Debug, Default)]
pub struct SearchAnswer {
    /// The results (title, URL).
    pub links: Vec<(String, String)>,
    /// The model's text around the results.
    pub text: String,
    /// Error codes the search tool reported instead of results.
    pub errors: Vec<String>,
    /// How many searches the provider ran.
    pub searches: u64,
}

/// Why a model request made for a web tool failed.
#[derive(Debug, thiserror::Error)]
pub enum WebModelError {
    /// The provider has no server-side search tool.
    #[error("{0}")]
    Unsupported(String),
    /// The request failed (after keel's retries).
    #[error("{0}")]
    Failed(String),
    /// The call was cancelled while the request ran.
    #[error("cancelled")]
    Cancelled,
}

/// What the web tools need from the engine.
pub trait WebHost: Send + Sync {
    /// What the live permission rules say about WebFetch reaching `host` on `port`.
    fn permit(&self, host: &str, port: u16) -> HostPermit;
    /// Answer `req.prompt` from `req.page` with a model request that has no tools.
    fn digest<'a>(
        &'a self,
        req: DigestRequest,
        cancel: &'a CancelToken,
    ) -> BoxFuture<'a, Result<String, WebModelError>>;
    /// Run a search through the provider's server-side search tool.
    fn search<'a>(
        &'a self,
        req: SearchRequest,
        cancel: &'a CancelToken,
    ) -> BoxFuture<'a, Result<SearchAnswer, WebModelError>>;
}

/// Why a fetch failed, naming the URL and what gave out.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The URL cannot be fetched as written.
    #[error("WebFetch cannot fetch {url:?}: {why}.")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The host's name is refused before any lookup.
    #[error("WebFetch refused {host}: {why}, and no permission rule names this host. Nothing was sent. To allow it, add the rule WebFetch(domain:{host}).")]
    HostRefused {
        /// The host.
        host: String,
        /// Why.
        why: String,
    },
    /// The host resolved to an address that is not public.
    #[error("WebFetch refused {host}: it resolves to {addr}, {why}, and no permission rule names this host. Nothing was sent. To allow it, add the rule WebFetch(domain:{host}).")]
    AddressRefused {
        /// The host.
        host: String,
        /// The address found.
        addr: IpAddr,
        /// What kind of address it is.
        why: String,
    },
    /// A redirect led to a host the rules do not allow.
    #[error(
        "WebFetch did not follow the redirect from {from} to {to}: {why}. Nothing was sent there."
    )]
    RedirectRefused {
        /// Where the redirect came from.
        from: String,
        /// Where it led.
        to: String,
        /// Why it was refused.
        why: String,
    },
    /// The https upgrade led to a port the decision does not allow.
    #[error("WebFetch did not fetch {to} (the https form of {from}, on another port): {why}. Nothing was sent there.")]
    UpgradeRefused {
        /// The URL as asked for.
        from: String,
        /// The upgraded URL.
        to: String,
        /// Why it was refused.
        why: String,
    },
    /// More redirects than allowed.
    #[error("WebFetch gave up on {url}: it redirected more than {max} times.")]
    TooManyRedirects {
        /// The URL first asked for.
        url: String,
        /// The limit.
        max: usize,
    },
    /// The host could not be looked up.
    #[error("WebFetch could not look up {host}: {why}.")]
    Lookup {
        /// The host.
        host: String,
        /// Why.
        why: String,
    },
    /// No connection, or no answer.
    #[error("WebFetch could not fetch {url}: {why}.")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The server answered with an error status.
    #[error("WebFetch got HTTP {status} {reason} from {url}.")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
        /// Its reason phrase.
        reason: String,
    },
    /// A type WebFetch does not read.
    #[error("WebFetch does not read {found} content ({url}): it reads HTML, plain text, markdown and JSON.")]
    ContentType {
        /// The URL.
        url: String,
        /// The media type found.
        found: String,
    },
    /// Larger than the byte cap.
    #[error("WebFetch stopped reading {url}: the page is larger than the {max}-byte limit (KEEL_WEBFETCH_MAX_BYTES){}.", declared.map(|n| format!("; the server declared {n} bytes, so none were read")).unwrap_or_default())]
    TooLarge {
        /// The URL.
        url: String,
        /// The cap.
        max: usize,
        /// The length the server declared, when it was refused on that alone.
        declared: Option<u64>,
    },
    /// The whole call took too long.
    #[error("WebFetch gave up on {url} after {:.1} s, the time limit (KEEL_WEBFETCH_TIMEOUT_MS), while {phase}; {bytes} bytes of the page had arrived.", limit.as_secs_f64())]
    Timeout {
        /// The URL.
        url: String,
        /// The limit.
        limit: Duration,
        /// Bytes read before it.
        bytes: usize,
        /// What was going on.
        phase: &'static str,
    },
    /// The body broke off.
    #[error("WebFetch lost the connection to {url} after {bytes} bytes of the page: {why}.")]
    Body {
        /// The URL.
        url: String,
        /// Bytes read.
        bytes: usize,
        /// Why.
        why: String,
    },
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
}
