//! Finding the authorization server of an MCP server: the `WWW-Authenticate` challenge, the
//! protected-resource metadata (RFC 9728) and the authorization server's metadata (RFC 8414,
//! or OpenID discovery). Every URL is checked: https, or http on a loopback address only
//! when what pointed to it was itself plain http (an https server's authorization is never
//! downgraded to plain http).

use futures_util::StreamExt;
use reqwest::Url;
use serde_json::Value;

use super::{shown, OAuthError, MAX_DOC_BYTES};

/// The longest URL keel follows.
const MAX_URL_BYTES: usize = 2048;

/// What a 401 said (`WWW-Authenticate: Bearer ...`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scope the server wants.
    pub scope: Option<String>,
}

/// Parse the parameters of a `Bearer` challenge (quoted strings or tokens).
pub fn parse_www_authenticate(header: &str) -> Challenge {
    let mut out = Challenge::default();
    let Some(at) = header.to_ascii_lowercase().find("bearer") else {
        return out;
    };
    let mut rest = &header[at + "bearer".len()..];
    loop {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().to_ascii_lowercase();
        rest = &rest[eq + 1..];
        let value;
        if let Some(q) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.char_indices();
            let mut end = q.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            value = v;
            rest = &q[end.min(q.len())..];
        } else {
            let end = rest.find([',', ' ']).unwrap_or(rest.len());
            value = rest[..end].to_owned();
            rest = &rest[end..];
        }
        match key.as_str() {
            "resource_metadata" => out.resource_metadata = Some(value),
            "scope" => out.scope = Some(value),
            _ => {}
        }
    }
    out
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

/// Why a URL met during authorization is not used: what named it (`what`), the URL as given
/// (shortened and cleaned for display) and the kind of problem.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}", self.problem())]
pub struct BadUrl {
    /// What named the URL (`token_endpoint`, `its "resource"`).
    pub what: String,
    /// The URL as given, cleaned of control characters and clipped.
    pub shown: String,
    /// What is wrong with it.
    pub kind: BadUrlKind,
}

/// What is wrong with a URL met during authorization.
#[derive(Debug)]
pub enum BadUrlKind {
    /// Longer than [`MAX_URL_BYTES`].
    TooLong,
    /// Not a URL at all.
    NotUrl(url::ParseError),
    /// It carries a user, a password or a fragment.
    Credentials,
    /// Plain http where what named it is https.
    Downgrade,
    /// Neither https nor http on a loopback address.
    NotHttps,
}

impl BadUrl {
    fn problem(&self) -> String {
        let shown = &self.shown;
        match &self.kind {
            BadUrlKind::TooLong => format!("is longer than {MAX_URL_BYTES} bytes"),
            BadUrlKind::NotUrl(e) => format!("{shown:?} is not a URL: {e}"),
            BadUrlKind::Credentials => format!("{shown:?} carries credentials or a fragment"),
            BadUrlKind::Downgrade => format!(
                "{shown:?} is plain http, but what named it is https (a downgrade is refused)"
            ),
            BadUrlKind::NotHttps => {
                format!("{shown:?} must be https (plain http only on a loopback address)")
            }
        }
    }
}

/// `raw` as a URL keel may use for `what`: at most 2 KiB, no credentials or fragment, https
/// — or plain http on a loopback address when `https_only` is false.
pub fn check_url(raw: &str, what: &str, https_only: bool) -> Result<Url, BadUrl> {
    let bad = |kind: BadUrlKind| BadUrl {
        what: what.to_owned(),
        shown: shown(raw),
        kind,
    };
    if raw.len() > MAX_URL_BYTES {
        return Err(bad(BadUrlKind::TooLong));
    }
    let url = Url::parse(raw).map_err(|e| bad(BadUrlKind::NotUrl(e)))?;
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(bad(BadUrlKind::Credentials));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) && !https_only => Ok(url),
        "http" if is_loopback(&url) => Err(bad(BadUrlKind::Downgrade)),
        _ => Err(bad(BadUrlKind::NotHttps)),
    }
}

/// What discovery found.
#[derive(Clone, Debug)]
pub struct Metadata {
    /// The protected resource (RFC 8707's `resource`).
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// Its authorization endpoint.
    pub authorization_endpoint: Url,
    /// Its token endpoint.
    pub token_endpoint: Url,
    /// Its registration endpoint, if it offers dynamic registration.
    pub registration_endpoint: Option<Url>,
    /// The scope to ask for (the challenge's, else the resource's `scopes_supported`).
    pub scope: Option<String>,
}

/// GET `url` as JSON (`what`, for messages): `Ok(None)` when it is not there (4xx), the
/// document when it is an object within [`MAX_DOC_BYTES`].
async fn get_doc(
    server: &str,
    client: &reqwest::Client,
    url: &Url,
    what: &str,
) -> Result<Option<serde_json::Map<String, Value>>, OAuthError> {
    let failed = |why: String| OAuthError::Request {
        server: server.to_owned(),
        what: what.to_owned(),
        url: url.to_string(),
        why,
    };
    let resp = client
        .get(url.clone())
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .map_err(|e| failed(request_error(e)))?;
    let status = resp.status();
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(failed(format!("HTTP {status}")));
    }
    let body = read_bounded(resp)
        .await
        .map_err(|why| failed(why.to_owned()))?;
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(o)) => Ok(Some(o)),
        _ => Err(OAuthError::Invalid {
            server: server.to_owned(),
            what: what.to_owned(),
            url: url.to_string(),
            why: "is not a JSON object".into(),
        }),
    }
}

/// What a failed request says, without the URL's query (reqwest's text includes the URL).
pub(crate) fn request_error(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "no answer in time".into()
    } else if e.is_connect() {
        "the connection failed".into()
    } else {
        shown(&e.without_url().to_string())
    }
}

/// A body of at most [`MAX_DOC_BYTES`].
pub(crate) async fn read_bounded(resp: reqwest::Response) -> Result<Vec<u8>, &'static str> {
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_DOC_BYTES as u64)
    {
        return Err("its answer is larger than 256 KiB");
    }
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| "its answer broke off")?;
        if body.len() + chunk.len() > MAX_DOC_BYTES {
            return Err("its answer is larger than 256 KiB");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `base` with `/.well-known/<name>` put before its path (RFC 8414 / RFC 9728's rule).
fn well_known(base: &Url, name: &str, path_first: bool) -> Option<Url> {
    let path = base.path().trim_end_matches('/');
    let joined = if path_first {
        format!("{path}/.well-known/{name}")
    } else {
        format!("/.well-known/{name}{path}")
    };
    let mut u = base.clone();
    u.set_path(&joined);
    u.set_query(None);
    Some(u)
}

fn string_field<'a>(doc: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    doc.get(key).and_then(Value::as_str)
}

/// Discover the authorization server of `server` at `mcp_url`, from its challenge.
pub async fn discover(
    server: &str,
    client: &reqwest::Client,
    mcp_url: &Url,
    challenge: &Challenge,
) -> Result<Metadata, OAuthError> {
    let https_only = mcp_url.scheme() == "https";
    let invalid = |what: &str, url: &Url, why: String| OAuthError::Invalid {
        server: server.to_owned(),
        what: what.to_owned(),
        url: url.to_string(),
        why,
    };
    // 1. The protected-resource metadata: where the challenge says, else the well-known URIs.
    let candidates: Vec<Url> = match &challenge.resource_metadata {
        Some(raw) => vec![check_url(raw, "resource_metadata", https_only)
            .map_err(|why| invalid("the 401's WWW-Authenticate", mcp_url, why.to_string()))?],
        None => {
            let mut v: Vec<Url> = well_known(mcp_url, "oauth-protected-resource", false)
                .into_iter()
                .collect();
            let mut root = mcp_url.clone();
            root.set_path("/.well-known/oauth-protected-resource");
            root.set_query(None);
            if !v.contains(&root) {
                v.push(root);
            }
            v
        }
    };
    let mut found = None;
    for url in &candidates {
        if let Some(doc) = get_doc(server, client, url, "the protected-resource metadata").await? {
            found = Some((url.clone(), doc));
            break;
        }
    }
    let Some((prm_url, prm)) = found else {
        return Err(OAuthError::Flow {
            server: server.to_owned(),
            why: format!(
                "it asked for authorization but publishes no protected-resource metadata (tried {})",
                candidates
                    .iter()
                    .map(Url::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    let what = "the protected-resource metadata";
    let resource = string_field(&prm, "resource")
        .ok_or_else(|| invalid(what, &prm_url, "has no \"resource\"".into()))?;
    let resource_url = check_url(resource, "its \"resource\"", https_only)
        .map_err(|why| invalid(what, &prm_url, why.to_string()))?;
    // The metadata must describe this server: same origin, and the server's URL within it.
    let within = mcp_url
        .as_str()
        .starts_with(resource_url.as_str().trim_end_matches('/'));
    if resource_url.origin() != mcp_url.origin() || !within {
        return Err(invalid(
            what,
            &prm_url,
            format!(
                "names resource {:?}, which is not {mcp_url}",
                shown(resource)
            ),
        ));
    }
    let issuer_raw = prm
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(what, &prm_url, "names no authorization_servers".into()))?;
    let issuer = check_url(issuer_raw, "its authorization server", https_only)
        .map_err(|why| invalid(what, &prm_url, why.to_string()))?;
    // A scope is sent back in the authorization URL: printable and bounded, or left out.
    let fits = |s: &String| {
        !s.is_empty() && s.len() <= 1024 && s.bytes().all(|b| (0x20..0x7f).contains(&b))
    };
    let scope = challenge.scope.clone().filter(fits).or_else(|| {
        let scopes: Vec<&str> = prm
            .get("scopes_supported")
            .and_then(Value::as_array)?
            .iter()
            .filter_map(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 256 && !s.contains(' '))
            .take(32)
            .collect();
        (!scopes.is_empty()).then(|| scopes.join(" "))
    });
    let mut meta = authorization_server(server, client, &issuer).await?;
    meta.resource = resource.to_owned();
    meta.scope = scope;
    Ok(meta)
}

/// The metadata of the authorization server `issuer`: RFC 8414's URI, then OpenID
/// discovery's two forms; its issuer must be the one asked for, its endpoints no weaker.
async fn authorization_server(
    server: &str,
    client: &reqwest::Client,
    issuer: &Url,
) -> Result<Metadata, OAuthError> {
    let has_path = !issuer.path().trim_matches('/').is_empty();
    let mut candidates: Vec<Url> = Vec::new();
    candidates.extend(well_known(issuer, "oauth-authorization-server", false));
    candidates.extend(well_known(issuer, "openid-configuration", false));
    if has_path {
        candidates.extend(well_known(issuer, "openid-configuration", true));
    }
    let what = "the authorization server's metadata";
    for url in &candidates {
        let Some(doc) = get_doc(server, client, url, what).await? else {
            continue;
        };
        let invalid = |why: String| OAuthError::Invalid {
            server: server.to_owned(),
            what: what.to_owned(),
            url: url.to_string(),
            why,
        };
        let stated = string_field(&doc, "issuer").unwrap_or("");
        if stated.trim_end_matches('/') != issuer.as_str().trim_end_matches('/') {
            return Err(invalid(format!(
                "says its issuer is {:?}, not {issuer}",
                shown(stated)
            )));
        }
        // An https issuer's endpoints must be https too.
        let https_only = issuer.scheme() == "https";
        let endpoint = |key: &str| -> Result<Option<Url>, OAuthError> {
            match string_field(&doc, key) {
                None => Ok(None),
                Some(raw) => check_url(raw, key, https_only)
                    .map(Some)
                    .map_err(|e| invalid(e.to_string())),
            }
        };
        let authorization_endpoint = endpoint("authorization_endpoint")?
            .ok_or_else(|| invalid("has no authorization_endpoint".into()))?;
        let token_endpoint =
            endpoint("token_endpoint")?.ok_or_else(|| invalid("has no token_endpoint".into()))?;
        let registration_endpoint = endpoint("registration_endpoint")?;
        if let Some(methods) = doc
            .get("code_challenge_methods_supported")
            .and_then(Value::as_array)
        {
            if !methods.iter().any(|m| m == "S256") {
                return Err(invalid(
                    "does not support PKCE with S256 (code_challenge_methods_supported)".into(),
                ));
            }
        }
        return Ok(Metadata {
            resource: String::new(),
            issuer: issuer.as_str().trim_end_matches('/').to_owned(),
            authorization_endpoint,
            token_endpoint,
            registration_endpoint,
            scope: None,
        });
    }
    Err(OAuthError::Flow {
        server: server.to_owned(),
        why: format!("the authorization server {issuer} publishes no metadata (RFC 8414 or OpenID discovery)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_parsed() {
        let c = parse_www_authenticate(
            r#"Bearer realm="x", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="read write""#,
        );
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scope.as_deref(), Some("read write"));
        let c = parse_www_authenticate("Bearer error=invalid_token, scope=mcp");
        assert_eq!(c.scope.as_deref(), Some("mcp"));
        assert_eq!(c.resource_metadata, None);
        assert_eq!(
            parse_www_authenticate("Basic realm=\"x\""),
            Challenge::default()
        );
    }

    #[test]
    fn urls_must_be_https_except_loopback_and_never_downgraded() {
        assert!(check_url("https://as.example/token", "t", true).is_ok());
        assert!(check_url("http://127.0.0.1:9/token", "t", false).is_ok());
        assert!(check_url("http://localhost:9/token", "t", false).is_ok());
        assert!(check_url("http://[::1]:9/token", "t", false).is_ok());
        let down = check_url("http://127.0.0.1:9/token", "t", true).unwrap_err();
        assert!(matches!(down.kind, BadUrlKind::Downgrade), "{down}");
        assert_eq!(
            down.to_string(),
            "t \"http://127.0.0.1:9/token\" is plain http, but what named it is https (a downgrade is refused)"
        );
        assert!(check_url("http://as.example/token", "t", false).is_err());
        assert!(check_url("http://169.254.169.254/", "t", false).is_err());
        assert!(check_url("https://u:p@as.example/", "t", true).is_err());
        assert!(check_url("https://as.example/#f", "t", true).is_err());
        assert!(check_url("file:///etc/passwd", "t", false).is_err());
        let long = format!("https://as.example/{}", "a".repeat(3000));
        assert!(check_url(&long, "t", true).is_err());
    }

    #[test]
    fn well_known_uris_go_before_the_path() {
        let u = Url::parse("https://as.example/tenant/1").unwrap();
        assert_eq!(
            well_known(&u, "oauth-authorization-server", false)
                .unwrap()
                .as_str(),
            "https://as.example/.well-known/oauth-authorization-server/tenant/1"
        );
        assert_eq!(
            well_known(&u, "openid-configuration", true)
                .unwrap()
                .as_str(),
            "https://as.example/tenant/1/.well-known/openid-configuration"
        );
        let root = Url::parse("https://as.example").unwrap();
        assert_eq!(
            well_known(&root, "oauth-authorization-server", false)
                .unwrap()
                .as_str(),
            "https://as.example/.well-known/oauth-authorization-server"
        );
    }
}
