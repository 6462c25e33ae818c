//! One bounded, checked fetch: every hop's host is resolved by keel, every address checked,
//! the connection made to exactly the addresses checked (no second lookup a rebinding DNS
//! server could answer differently), redirects followed by hand and checked again, and the
//! body read in chunks that stop at the byte cap or the deadline.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use url::{Host, Url};

use super::addr::{non_public, refused_name};
use super::{HopGate, HostPermit, WebError, WebHost};
use crate::{BoxFuture, CancelToken};

/// Bounds on one WebFetch call.
#[derive(Clone, Debug)]
pub struct FetchLimits {
    /// The whole call: lookups, connections, redirects and the body together.
    pub total: Duration,
    /// The most bytes of body read; the read stops there.
    pub max_bytes: usize,
    /// The most redirects followed.
    pub max_redirects: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            total: Duration::from_secs(60),
            max_bytes: 10 * 1024 * 1024,
            max_redirects: 10,
        }
    }
}

/// Looks host names up (the system's resolver; tests give their own).
pub trait Resolver: Send + Sync {
    /// The addresses of `host`.
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>>;
}

/// The system's resolver, through tokio.
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// A page as fetched.
#[derive(Debug)]
pub struct Page {
    /// Where it was in the end (after redirects).
    pub url: Url,
    /// The HTTP status.
    pub status: u16,
    /// The media type, lower case, without parameters.
    pub media_type: String,
    /// The body, decoded to text.
    pub body: String,
    /// How many bytes the body had.
    pub bytes: usize,
    /// The redirects followed, in order.
    pub redirects: Vec<String>,
}

/// What one fetch needs from its surroundings.
pub struct FetchCx<'a> {
    /// The permission rules, for the hosts redirects lead to.
    pub host: &'a dyn WebHost,
    /// The resolver.
    pub resolver: &'a dyn Resolver,
    /// The bounds.
    pub limits: &'a FetchLimits,
    /// The call's cancel token.
    pub cancel: &'a CancelToken,
    /// The decision the call's first URL went through, for every further URL (redirects, an
    /// upgrade that changes the port). `None`: only the rules of `host` judge them.
    pub gate: Option<&'a dyn HopGate>,
}

/// The media types WebFetch reads.
pub fn readable_type(media: &str) -> bool {
    matches!(
        media,
        "text/html"
            | "application/xhtml+xml"
            | "text/plain"
            | "text/markdown"
            | "text/x-markdown"
            | "application/json"
    ) || media.ends_with("+json")
}

/// Parse a URL the model gave: http or https, a host, no credentials.
pub fn parse_url(raw: &str) -> Result<Url, WebError> {
    let url = Url::parse(raw.trim()).map_err(|e| WebError::BadUrl {
        url: raw.to_owned(),
        why: e.to_string(),
    })?;
    check_url(&url)?;
    Ok(url)
}

fn check_url(url: &Url) -> Result<(), WebError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(WebError::BadUrl {
            url: url.to_string(),
            why: format!(
                "the scheme is {:?}; WebFetch fetches http and https URLs only",
                url.scheme()
            ),
        });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(WebError::BadUrl {
            url: url.to_string(),
            why: "it carries a user name or password, which WebFetch never sends".into(),
        });
    }
    if url.host().is_none() {
        return Err(WebError::BadUrl {
            url: url.to_string(),
            why: "it has no host".into(),
        });
    }
    Ok(())
}

/// The host as rules name it, in one spelling per host: a name in lower case without a
/// trailing dot, an IPv4 address in dotted decimal (the url crate already reads decimal, octal
/// and hex forms such as `134744072` or `0x8.8.8.8` as the address they mean), an IPv6 address
/// without brackets — and an IPv6 address that carries an IPv4 one (`::ffff:8.8.8.8`) as that
/// IPv4 address, so a rule on `8.8.8.8` reaches every spelling of it.
pub fn rule_host(url: &Url) -> String {
    match url.host() {
        Some(Host::Domain(d)) => canonical_name(d),
        Some(Host::Ipv4(a)) => a.to_string(),
        Some(Host::Ipv6(a)) => canonical_v6(a),
        None => String::new(),
    }
}

/// A host name in its rule spelling: lower case, no trailing dot, and an IPv4 address in
/// dotted decimal if that is what it is once the dot is gone.
fn canonical_name(d: &str) -> String {
    let name = d.trim_end_matches('.').to_ascii_lowercase();
    match name.parse::<Ipv4Addr>() {
        Ok(a) => a.to_string(),
        Err(_) => name,
    }
}

/// An IPv6 address in its rule spelling: the IPv4 address it carries when it is IPv4-mapped
/// (`::ffff:a.b.c.d`) or IPv4-compatible (`::a.b.c.d`, but not `::` or `::1`, which are
/// IPv6's own unspecified and loopback addresses); otherwise its usual text.
pub fn canonical_v6(a: Ipv6Addr) -> String {
    if let Some(v4) = a.to_ipv4_mapped() {
        return v4.to_string();
    }
    let s = a.segments();
    if s[..6] == [0; 6] && s[6] != 0 {
        let [_, _, _, _, _, _, hi, lo] = s;
        return Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)).to_string();
    }
    a.to_string()
}

/// A host as a rule writes it (`example.com`, `8.8.8.8`, `::ffff:8.8.8.8`, `0x8.8.8.8`), in
/// the spelling [`rule_host`] gives a URL's host; `None` when it is no host a URL could have.
pub fn canonical_rule_host(host: &str) -> Option<String> {
    let bracketed = if host.contains(':') {
        format!("[{}]", host.trim_start_matches('[').trim_end_matches(']'))
    } else {
        host.to_owned()
    };
    let url = Url::parse(&format!("http://{bracketed}/")).ok()?;
    let h = rule_host(&url);
    (!h.is_empty()).then_some(h)
}

/// The URL WebFetch really fetches for `url`: plain http to a host that is not local is
/// upgraded to https before anything is sent (an explicit port stays, the default port 80
/// becomes 443). Permission is decided on this URL, so a rule for port 80 never opens 443.
/// Only a local host a rule names may stay on plain http (see [`keeps_http`]).
pub fn effective_url(url: &Url) -> Url {
    let mut u = url.clone();
    if u.scheme() == "http" && !local_host(&u) {
        let _ = u.set_scheme("https");
    }
    u
}

/// Whether the URL's host is local before any lookup: an address that is not public, or a
/// local name (`localhost`, a name without a dot).
pub fn local_host(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(a)) => non_public(IpAddr::V4(a)).is_some(),
        Some(Host::Ipv6(a)) => non_public(IpAddr::V6(a)).is_some(),
        Some(Host::Domain(_)) => refused_name(&rule_host(url)).is_some(),
        None => false,
    }
}

/// Fetch `url` (already [`effective_url`]), following up to `limits.max_redirects` redirects,
/// each judged again. `first` is what the permission check said about the first host.
pub async fn fetch(cx: &FetchCx<'_>, mut url: Url, first: HostPermit) -> Result<Page, WebError> {
    let deadline = Instant::now() + cx.limits.total;
    let mut permit = first;
    let mut redirects = Vec::new();
    loop {
        let host = rule_host(&url);
        let named = matches!(permit, HostPermit::Allowed { named: true });
        let addrs = checked_addrs(cx, &url, &host, named, deadline).await?;
        // Plain http stays plain only towards a private host a rule names: a local test or
        // development server rarely has a certificate; anything else is upgraded. An upgrade
        // that changes the port is a URL of its own, judged like a redirect.
        if url.scheme() == "http" && !keeps_http(named, &addrs) {
            let before = url.clone();
            let _ = url.set_scheme("https");
            if before.port_or_known_default() != url.port_or_known_default() {
                permit = judge_hop(cx, &before, &url, permit, Hop::Upgrade).await?;
            }
        }
        let resp = send(cx, &url, &addrs, deadline).await?;
        let status = resp.status();
        if status.is_redirection() {
            let Some(next) = location(&resp, &url)? else {
                return Err(WebError::Status {
                    url: url.to_string(),
                    status: status.as_u16(),
                    reason: "a redirect without a usable Location".into(),
                });
            };
            if redirects.len() >= cx.limits.max_redirects {
                return Err(WebError::TooManyRedirects {
                    url: redirects
                        .first()
                        .cloned()
                        .unwrap_or_else(|| url.to_string()),
                    max: cx.limits.max_redirects,
                });
            }
            let next = effective_url(&next);
            permit = judge_hop(cx, &url, &next, permit, Hop::Redirect).await?;
            redirects.push(next.to_string());
            url = next;
            continue;
        }
        if !status.is_success() {
            return Err(WebError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                reason: status.canonical_reason().unwrap_or("").to_owned(),
            });
        }
        return read_page(cx, resp, url, redirects, deadline).await;
    }
}

/// Whether a plain http URL stays plain: only towards a host a rule names whose every address
/// is local.
pub(crate) fn keeps_http(named: bool, addrs: &[IpAddr]) -> bool {
    named && !addrs.is_empty() && addrs.iter().all(|a| non_public(*a).is_some())
}

/// How a fetch reached a further URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hop {
    /// The server redirected.
    Redirect,
    /// keel upgraded plain http to https, on another port.
    Upgrade,
}

/// The permission for a further URL the fetch reaches: it goes through the decision the first
/// URL went through (the call's gate: hooks, rules, a command's narrowing), or the rules as
/// they stand when there is no gate. A denial always stops the fetch; a decision that would
/// have to ask someone (nobody can be asked mid-call) keeps the permission only for the same
/// host and port, which the first decision already covered.
async fn judge_hop(
    cx: &FetchCx<'_>,
    from: &Url,
    to: &Url,
    permit: HostPermit,
    hop: Hop,
) -> Result<HostPermit, WebError> {
    let same = rule_host(from) == rule_host(to)
        && from.port_or_known_default() == to.port_or_known_default();
    let port = to.port_or_known_default().unwrap_or(443);
    let now = match cx.gate {
        Some(g) => {
            tokio::select! {
                p = g.judge(to) => p,
                _ = cx.cancel.cancelled() => return Err(WebError::Cancelled),
            }
        }
        None => cx.host.permit(&rule_host(to), port),
    };
    let why = match now {
        p @ HostPermit::Allowed { .. } => return Ok(p),
        HostPermit::Ask { .. } if same => return Ok(permit),
        HostPermit::Ask { why } | HostPermit::Refused { why } => why,
    };
    Err(match hop {
        Hop::Redirect => WebError::RedirectRefused {
            from: from.to_string(),
            to: to.to_string(),
            why,
        },
        Hop::Upgrade => WebError::UpgradeRefused {
            from: from.to_string(),
            to: to.to_string(),
            why,
        },
    })
}

/// The addresses of the URL's host, every one checked: a non-public address (or a local
/// name) is refused unless a rule names the host.
async fn checked_addrs(
    cx: &FetchCx<'_>,
    url: &Url,
    host: &str,
    named: bool,
    deadline: Instant,
) -> Result<Vec<IpAddr>, WebError> {
    let addrs = match url.host() {
        Some(Host::Ipv4(a)) => vec![IpAddr::V4(a)],
        Some(Host::Ipv6(a)) => vec![IpAddr::V6(a)],
        _ => {
            if let (Some(why), false) = (refused_name(host), named) {
                return Err(WebError::HostRefused {
                    host: host.to_owned(),
                    why: why.to_owned(),
                });
            }
            let lookup = cx.resolver.lookup(host);
            let found = tokio::select! {
                r = lookup => r,
                _ = cx.cancel.cancelled() => return Err(WebError::Cancelled),
                _ = tokio::time::sleep_until(deadline.into()) => return Err(WebError::Timeout {
                    url: url.to_string(), limit: cx.limits.total, bytes: 0, phase: "looking up the host",
                }),
            };
            let found = found.map_err(|e| WebError::Lookup {
                host: host.to_owned(),
                why: e.to_string(),
            })?;
            if found.is_empty() {
                return Err(WebError::Lookup {
                    host: host.to_owned(),
                    why: "no address".into(),
                });
            }
            found
        }
    };
    if !named {
        if let Some((addr, why)) = addrs.iter().find_map(|a| non_public(*a).map(|w| (a, w))) {
            return Err(WebError::AddressRefused {
                host: host.to_owned(),
                addr: *addr,
                why: why.to_owned(),
            });
        }
    }
    Ok(addrs)
}

/// One request, to exactly `addrs`, with no redirect following and no proxy (a proxy would
/// look the name up again).
async fn send(
    cx: &FetchCx<'_>,
    url: &Url,
    addrs: &[IpAddr],
    deadline: Instant,
) -> Result<reqwest::Response, WebError> {
    let port = url.port_or_known_default().unwrap_or(443);
    let sockets: Vec<SocketAddr> = addrs.iter().map(|a| SocketAddr::new(*a, port)).collect();
    let remaining = deadline.saturating_duration_since(Instant::now());
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(remaining.min(Duration::from_secs(15)))
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION"), " (WebFetch)"));
    let mut builder = builder;
    if matches!(url.host(), Some(Host::Domain(_))) {
        // Every name this client asks for gets the addresses checked above: the client serves
        // this one hop, so no spelling of the host can slip past to a lookup of its own.
        builder = builder.dns_resolver(Arc::new(Pinned(sockets)));
    }
    let client = builder.build().map_err(|e| WebError::Connect {
        url: url.to_string(),
        why: e.to_string(),
    })?;
    let req = client.get(url.clone()).header(
        ACCEPT,
        HeaderValue::from_static(
            "text/markdown, text/html;q=0.9, text/plain;q=0.8, application/json;q=0.7",
        ),
    );
    tokio::select! {
        r = req.send() => r.map_err(|e| WebError::Connect { url: url.to_string(), why: error_chain(&e) }),
        _ = cx.cancel.cancelled() => Err(WebError::Cancelled),
        _ = tokio::time::sleep_until(deadline.into()) => Err(WebError::Timeout {
            url: url.to_string(), limit: cx.limits.total, bytes: 0,
            phase: "connecting or waiting for the server to answer",
        }),
    }
}

/// A resolver that answers every name with the addresses keel checked.
struct Pinned(Vec<SocketAddr>);

impl reqwest::dns::Resolve for Pinned {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let addrs = self.0.clone();
        Box::pin(async move { Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs) })
    }
}

/// Where a redirect leads, resolved against the URL it came from and checked like the first.
fn location(resp: &reqwest::Response, from: &Url) -> Result<Option<Url>, WebError> {
    let Some(loc) = resp.headers().get(LOCATION).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    let next = from.join(loc).map_err(|e| WebError::BadUrl {
        url: loc.to_owned(),
        why: format!("the redirect from {from} leads there, which is not a URL: {e}"),
    })?;
    check_url(&next)?;
    Ok(Some(next))
}

/// Read the body: refuse an unreadable type before reading, stop at the byte cap and the
/// deadline, decode to text.
async fn read_page(
    cx: &FetchCx<'_>,
    mut resp: reqwest::Response,
    url: Url,
    redirects: Vec<String>,
    deadline: Instant,
) -> Result<Page, WebError> {
    let ctype = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let media = ctype.split(';').next().unwrap_or("").trim().to_owned();
    if !readable_type(&media) {
        return Err(WebError::ContentType {
            url: url.to_string(),
            found: if media.is_empty() {
                "none".into()
            } else {
                media
            },
        });
    }
    let max = cx.limits.max_bytes;
    let declared = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > max as u64) {
        return Err(WebError::TooLarge {
            url: url.to_string(),
            max,
            declared: Some(n),
        });
    }
    let mut body: Vec<u8> = Vec::new();
    loop {
        let chunk = tokio::select! {
            c = resp.chunk() => c.map_err(|e| WebError::Body { url: url.to_string(), bytes: body.len(), why: error_chain(&e) })?,
            _ = cx.cancel.cancelled() => return Err(WebError::Cancelled),
            _ = tokio::time::sleep_until(deadline.into()) => return Err(WebError::Timeout {
                url: url.to_string(), limit: cx.limits.total, bytes: body.len(), phase: "reading the page",
            }),
        };
        let Some(chunk) = chunk else { break };
        if body.len() + chunk.len() > max {
            return Err(WebError::TooLarge {
                url: url.to_string(),
                max,
                declared: None,
            });
        }
        body.extend_from_slice(&chunk);
    }
    let bytes = body.len();
    Ok(Page {
        url,
        status: resp.status().as_u16(),
        media_type: media,
        body: decode(body, &ctype),
        bytes,
        redirects,
    })
}

/// The body as text: UTF-8 (invalid sequences replaced), or Latin-1 / Windows-1252 byte for
/// byte when the content type says so.
fn decode(body: Vec<u8>, ctype: &str) -> String {
    let latin = ["iso-8859-1", "latin1", "windows-1252", "us-ascii"]
        .iter()
        .any(|c| ctype.contains(&format!("charset={c}")));
    if latin {
        return body.iter().map(|b| char::from(*b)).collect();
    }
    match String::from_utf8(body) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// An error with its causes, for messages that say what really failed (a refused connection,
/// a certificate).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        src = cause.source();
    }
    s
}
