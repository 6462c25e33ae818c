//! The browser flow (`keel mcp login`) and the token requests: dynamic registration, PKCE
//! (S256) with a loopback redirect whose `state` is checked, the code exchange and the
//! refresh, each with `resource` (RFC 8707). Every answer is range-checked before it is kept.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use reqwest::Url;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::discover::{discover, parse_www_authenticate, read_bounded, request_error};
use super::{now_secs, shown, OAuthError, Stored, TokenStore, MAX_EXPIRES_IN, MAX_TOKEN_BYTES};

/// The largest callback request read from the browser.
const MAX_CALLBACK_BYTES: usize = 16 * 1024;

/// How `keel mcp login` runs.
#[derive(Clone, Debug)]
pub struct LoginOptions {
    /// Each request to a server waits at most this.
    pub request_deadline: Duration,
    /// How long the user has to finish in the browser.
    pub browser_deadline: Duration,
    /// The loopback port of the redirect (0: any free one).
    pub callback_port: u16,
    /// A client id to use instead of registering.
    pub client_id: Option<String>,
}

/// A started login: the URL for the browser, and the rest of the flow.
pub struct Login {
    /// The authorization URL to open.
    pub url: String,
    finish: std::pin::Pin<Box<dyn std::future::Future<Output = Result<Stored, OAuthError>> + Send>>,
}

impl Login {
    /// Wait for the browser's redirect, exchange the code and store the tokens.
    pub async fn finish(self) -> Result<Stored, OAuthError> {
        self.finish.await
    }
}

/// The system's random source failed (a PKCE verifier or state cannot be made).
#[derive(Debug, thiserror::Error)]
#[error("the system's random source failed")]
struct RandomFailed;

/// A random URL-safe string of `bytes` random bytes.
fn random(bytes: usize) -> Result<String, RandomFailed> {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| RandomFailed)?;
    Ok(URL_SAFE_NO_PAD.encode(buf))
}

/// PKCE's S256 challenge of `verifier` (RFC 7636 §4.2).
pub fn pkce_challenge(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// Start the login of `server` at `url`: ask the server (without a token) for its challenge,
/// discover, register, and listen on the loopback redirect. `Ok(None)`: it needs no
/// authorization.
pub async fn login(
    server: &str,
    url: &str,
    store: TokenStore,
    opts: LoginOptions,
) -> Result<Option<Login>, OAuthError> {
    let flow = |why: String| OAuthError::Flow {
        server: server.to_owned(),
        why,
    };
    let client = super::client(opts.request_deadline).map_err(|e| flow(e.to_string()))?;
    let mcp_url =
        super::check_url(url, "the server's URL", false).map_err(|e| flow(e.to_string()))?;
    let Some(challenge) = probe(server, &client, &mcp_url).await? else {
        return Ok(None);
    };
    let meta = discover(server, &client, &mcp_url, &challenge).await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.callback_port))
        .await
        .map_err(|e| {
            flow(format!(
                "the loopback redirect cannot listen on 127.0.0.1:{}: {e}",
                opts.callback_port
            ))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| flow(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let (client_id, client_secret) = match opts.client_id.clone() {
        Some(id) => (id, None),
        None => register(server, &client, &meta, &redirect_uri).await?,
    };
    let verifier = random(32).map_err(|e| flow(e.to_string()))?;
    let state = random(16).map_err(|e| flow(e.to_string()))?;
    let mut auth_url = meta.authorization_endpoint.clone();
    {
        let mut q = auth_url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("code_challenge", &pkce_challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &meta.resource);
        if let Some(scope) = &meta.scope {
            q.append_pair("scope", scope);
        }
    }
    let (server_name, url_owned) = (server.to_owned(), url.to_owned());
    let finish = async move {
        let code = callback(&server_name, listener, &state, opts.browser_deadline).await?;
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", client_id.clone()),
            ("code_verifier", verifier),
            ("resource", meta.resource.clone()),
        ];
        let base = Stored {
            server_url: url_owned,
            resource: meta.resource.clone(),
            issuer: meta.issuer.clone(),
            token_endpoint: meta.token_endpoint.to_string(),
            client_id,
            client_secret,
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            scope: meta.scope.clone(),
        };
        let stored = token_request(&server_name, &client, &base, form)
            .await
            .map_err(|e| e.into_error(&server_name))?;
        store.save(&server_name, &stored)?;
        Ok(stored)
    };
    Ok(Some(Login {
        url: auth_url.to_string(),
        finish: Box::pin(finish),
    }))
}

/// Ask the server, without a token, whether it needs one: its challenge, or `None` when it
/// answers (or refuses for another reason than authorization).
async fn probe(
    server: &str,
    client: &reqwest::Client,
    url: &Url,
) -> Result<Option<super::Challenge>, OAuthError> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "keel", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = client
        .post(url.clone())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .map_err(|e| OAuthError::Request {
            server: server.to_owned(),
            what: "the first request".into(),
            url: url.to_string(),
            why: request_error(e),
        })?;
    if resp.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    let header = resp
        .headers()
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.to_ascii_lowercase().contains("bearer"))
        .unwrap_or("");
    Ok(Some(parse_www_authenticate(header)))
}

/// Register keel as a public client (RFC 7591): its client id (and secret, if given).
async fn register(
    server: &str,
    client: &reqwest::Client,
    meta: &super::Metadata,
    redirect_uri: &str,
) -> Result<(String, Option<String>), OAuthError> {
    let Some(endpoint) = &meta.registration_endpoint else {
        return Err(OAuthError::Flow {
            server: server.to_owned(),
            why: format!(
                "its authorization server {} offers no dynamic client registration; configure a client id (\"oauth\": {{\"clientId\": ...}} in the server's entry)",
                meta.issuer
            ),
        });
    };
    let body = json!({
        "client_name": "keel",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let failed = |why: String| OAuthError::Request {
        server: server.to_owned(),
        what: "client registration".into(),
        url: endpoint.to_string(),
        why,
    };
    let resp = client
        .post(endpoint.clone())
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| failed(request_error(e)))?;
    let status = resp.status();
    let bytes = read_bounded(resp).await.map_err(|w| failed(w.to_owned()))?;
    if !status.is_success() {
        return Err(failed(format!(
            "HTTP {status}: {}",
            shown(&String::from_utf8_lossy(&bytes))
        )));
    }
    let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let id = doc
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|s| printable(s, 1024))
        .ok_or_else(|| {
            failed("its answer has no valid client_id (1 to 1024 printable characters)".into())
        })?;
    let secret = doc
        .get("client_secret")
        .and_then(Value::as_str)
        .filter(|s| printable(s, 1024))
        .map(str::to_owned);
    Ok((id.to_owned(), secret))
}

fn printable(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| (0x21..0x7f).contains(&b))
}

/// Wait on `listener` for the browser's redirect to `/callback` with `state`; the code.
async fn callback(
    server: &str,
    listener: tokio::net::TcpListener,
    state: &str,
    deadline: Duration,
) -> Result<String, OAuthError> {
    let flow = |why: String| OAuthError::Flow {
        server: server.to_owned(),
        why,
    };
    let waited = tokio::time::timeout(deadline, async {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let Ok(Ok(line)) =
                tokio::time::timeout(Duration::from_secs(10), request_line(&mut sock)).await
            else {
                continue;
            };
            let outcome = answer_callback(&line, state);
            let (status, text) = match &outcome {
                Some(Ok(_)) => ("200 OK", "keel is signed in. You can close this tab."),
                Some(Err(_)) => ("400 Bad Request", "keel could not sign in; see the terminal."),
                None => ("404 Not Found", "Not the callback."),
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = sock.write_all(reply.as_bytes()).await;
            let _ = sock.shutdown().await;
            if let Some(o) = outcome {
                return o;
            }
        }
    })
    .await;
    match waited {
        Ok(Ok(code)) => Ok(code),
        Ok(Err(e)) => Err(e.into_error(server)),
        Err(_) => Err(flow(format!(
            "the browser did not come back to the loopback redirect within {} s",
            deadline.as_secs()
        ))),
    }
}

/// The first line of an HTTP request, read within [`MAX_CALLBACK_BYTES`].
async fn request_line(sock: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_CALLBACK_BYTES {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf);
    Ok(text.lines().next().unwrap_or("").to_owned())
}

/// How a redirect ended for the flow.
enum CallbackError {
    Refused(String),
    BadState,
}

impl CallbackError {
    fn into_error(self, server: &str) -> OAuthError {
        match self {
            CallbackError::Refused(why) => OAuthError::Refused {
                server: server.to_owned(),
                why,
            },
            CallbackError::BadState => OAuthError::Flow {
                server: server.to_owned(),
                why: "the redirect's state did not match (a forged or stale redirect); nothing was stored".into(),
            },
        }
    }
}

/// The code from the request line `GET /callback?...` with the right `state`; `None`: not the
/// callback.
fn answer_callback(line: &str, state: &str) -> Option<Result<String, CallbackError>> {
    let target = line.strip_prefix("GET ")?.split(' ').next()?;
    let url = Url::parse(&format!("http://127.0.0.1{target}")).ok()?;
    if url.path() != "/callback" {
        return None;
    }
    let get = |k: &str| {
        url.query_pairs()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.into_owned())
    };
    if get("state").as_deref() != Some(state) {
        return Some(Err(CallbackError::BadState));
    }
    if let Some(err) = get("error") {
        let desc = get("error_description").unwrap_or_default();
        return Some(Err(CallbackError::Refused(shown(&format!("{err} {desc}")))));
    }
    match get("code") {
        Some(c) if printable(&c, 4096) => Some(Ok(c)),
        _ => Some(Err(CallbackError::Refused(
            "the redirect carried no valid code".into(),
        ))),
    }
}

/// How a token request failed.
pub(crate) enum RefreshError {
    /// The authorization server refused the grant (revoked, expired): sign in again.
    Refused(String),
    /// Anything else (network, 5xx, a malformed answer): may pass.
    Failed(OAuthError),
}

impl RefreshError {
    fn into_error(self, server: &str) -> OAuthError {
        match self {
            RefreshError::Failed(e) => e,
            RefreshError::Refused(why) => OAuthError::Refused {
                server: server.to_owned(),
                why,
            },
        }
    }
}

/// Refresh `stored`'s access token: the new entry.
pub(crate) async fn refresh(
    server: &str,
    stored: &Stored,
    deadline: Duration,
) -> Result<Stored, RefreshError> {
    let client = super::client(deadline).map_err(|why| {
        RefreshError::Failed(OAuthError::Flow {
            server: server.to_owned(),
            why: why.to_string(),
        })
    })?;
    let Some(rt) = stored.refresh_token.clone() else {
        return Err(RefreshError::Refused("there is no refresh token".into()));
    };
    let form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", rt),
        ("client_id", stored.client_id.clone()),
        ("resource", stored.resource.clone()),
    ];
    token_request(server, &client, stored, form).await
}

/// POST `form` to `base`'s token endpoint: `base` with the new tokens.
async fn token_request(
    server: &str,
    client: &reqwest::Client,
    base: &Stored,
    mut form: Vec<(&str, String)>,
) -> Result<Stored, RefreshError> {
    let failed = |why: String| {
        RefreshError::Failed(OAuthError::Request {
            server: server.to_owned(),
            what: "the token request".into(),
            url: base.token_endpoint.clone(),
            why,
        })
    };
    if let Some(secret) = &base.client_secret {
        form.push(("client_secret", secret.clone()));
    }
    let resp = client
        .post(&base.token_endpoint)
        .header("accept", "application/json")
        .form(&form)
        .send()
        .await
        .map_err(|e| failed(request_error(e)))?;
    let status = resp.status();
    let bytes = read_bounded(resp).await.map_err(|w| failed(w.to_owned()))?;
    let doc: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if status == reqwest::StatusCode::BAD_REQUEST || status == reqwest::StatusCode::UNAUTHORIZED {
        let err = doc
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("refused");
        let desc = doc
            .get("error_description")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(RefreshError::Refused(shown(&format!("{err} {desc}"))));
    }
    if !status.is_success() {
        return Err(failed(format!("HTTP {status}")));
    }
    tokens_from(&doc, base).map_err(|why| failed(format!("its answer {why}")))
}

/// What is wrong with a token endpoint's answer (the text follows "its answer ").
#[derive(Debug, thiserror::Error)]
enum BadTokens {
    /// No access token, or one that is empty, too long or not printable.
    #[error("has no valid access_token (1 to 16 KiB of printable characters)")]
    AccessToken,
    /// A token type other than Bearer (shown cleaned and clipped).
    #[error("has token_type {0:?}, not Bearer")]
    TokenType(String),
    /// A lifetime out of range (the JSON value as given).
    #[error("has expires_in {0}, not 1 to {MAX_EXPIRES_IN} seconds")]
    ExpiresIn(Value),
    /// A refresh token that is empty, too long or not printable.
    #[error("has a refresh_token that is empty, too long or not printable")]
    RefreshToken,
}

/// `base` with the tokens of a token response, every field checked.
fn tokens_from(doc: &Value, base: &Stored) -> Result<Stored, BadTokens> {
    let token = |k: &str| doc.get(k).and_then(Value::as_str);
    let access = token("access_token")
        .filter(|t| printable(t, MAX_TOKEN_BYTES))
        .ok_or(BadTokens::AccessToken)?;
    let kind = token("token_type").unwrap_or("");
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(BadTokens::TokenType(shown(kind)));
    }
    let expires_at = match doc.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(s) if (1..=MAX_EXPIRES_IN).contains(&s) => Some(now_secs() + s),
            _ => return Err(BadTokens::ExpiresIn(v.clone())),
        },
    };
    let refresh = match token("refresh_token") {
        Some(t) if printable(t, MAX_TOKEN_BYTES) => Some(t.to_owned()),
        Some(_) => return Err(BadTokens::RefreshToken),
        // None issued: a refresh keeps the old one (RFC 6749 §6).
        None => base.refresh_token.clone(),
    };
    let scope = token("scope")
        .filter(|s| s.len() <= 4096)
        .map(str::to_owned)
        .or_else(|| base.scope.clone());
    Ok(Stored {
        access_token: access.to_owned(),
        refresh_token: refresh,
        expires_at,
        scope,
        ..base.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_s256_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let v = random(32).unwrap();
        assert_eq!(v.len(), 43);
        assert_ne!(v, random(32).unwrap());
    }

    #[test]
    fn the_callback_needs_the_state() {
        let ok = answer_callback("GET /callback?code=abc&state=s1 HTTP/1.1", "s1");
        assert!(matches!(ok, Some(Ok(c)) if c == "abc"));
        let forged = answer_callback("GET /callback?code=abc&state=s2 HTTP/1.1", "s1");
        assert!(matches!(forged, Some(Err(CallbackError::BadState))));
        let denied = answer_callback("GET /callback?error=access_denied&state=s1 HTTP/1.1", "s1");
        assert!(
            matches!(denied, Some(Err(CallbackError::Refused(w))) if w.contains("access_denied"))
        );
        assert!(answer_callback("GET /favicon.ico HTTP/1.1", "s1").is_none());
    }

    #[test]
    fn token_answers_are_range_checked() {
        let base = Stored {
            server_url: "u".into(),
            resource: "r".into(),
            issuer: "i".into(),
            token_endpoint: "t".into(),
            client_id: "c".into(),
            client_secret: None,
            access_token: String::new(),
            refresh_token: Some("old".into()),
            expires_at: None,
            scope: None,
        };
        let ok = tokens_from(
            &json!({"access_token": "a", "token_type": "bearer", "expires_in": 60}),
            &base,
        )
        .unwrap();
        assert_eq!(ok.refresh_token.as_deref(), Some("old"));
        assert!(ok.expires_at.unwrap() > now_secs());
        for bad in [
            json!({"access_token": "", "token_type": "Bearer"}),
            json!({"access_token": "a", "token_type": "mac"}),
            json!({"access_token": "a", "token_type": "Bearer", "expires_in": -1}),
            json!({"access_token": "a", "token_type": "Bearer", "expires_in": 0}),
            json!({"access_token": "a", "token_type": "Bearer", "expires_in": 1e12}),
            json!({"access_token": "a\nb", "token_type": "Bearer"}),
            json!({"access_token": "x".repeat(MAX_TOKEN_BYTES + 1), "token_type": "Bearer"}),
        ] {
            assert!(tokens_from(&bad, &base).is_err(), "{bad}");
        }
    }
}
