//! OAuth for MCP servers at a URL, as the MCP authorization specification (2025-06-18) lays
//! it out: a server answers 401 with `WWW-Authenticate: Bearer resource_metadata=…`; keel
//! reads the protected-resource metadata (RFC 9728), then the authorization server's metadata
//! (RFC 8414, or OpenID discovery), registers itself (RFC 7591) unless a client id is
//! configured, and runs the authorization-code flow with PKCE (S256) and a loopback redirect,
//! naming the server in `resource` (RFC 8707). Tokens are kept per server in one file under
//! keel's home, readable by the user alone, and refreshed with backoff.
//!
//! Only `keel mcp login` ever starts the browser flow ([`login`]). A session (`-p`, the SDK,
//! the TUI) uses a stored token ([`Auth`]), refreshes it when it has expired, and otherwise
//! reports the server as needing authentication, naming the command that fixes it. A token is
//! never written to a log or an error message.

mod discover;
mod flow;
mod store;

use std::path::PathBuf;
use std::time::Duration;

pub use discover::{check_url, parse_www_authenticate, BadUrl, BadUrlKind, Challenge, Metadata};
pub use flow::{login, pkce_challenge, Login, LoginOptions};
pub use store::{store_path, Stored, TokenStore};

use crate::clip::clip;

/// The largest metadata or registration document read from a server.
pub const MAX_DOC_BYTES: usize = 256 * 1024;
/// The longest token (access or refresh) keel accepts.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The longest lifetime an access token may claim (ten years), in seconds.
pub const MAX_EXPIRES_IN: u64 = 10 * 365 * 24 * 3600;
/// How long before its stated expiry a token is treated as expired (clocks drift).
const EXPIRY_SKEW: u64 = 30;
/// Refresh attempts on a transient failure (network, 5xx), and the wait before each retry.
const REFRESH_BACKOFF: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

/// What went wrong in authorization; each names the server and, where there is one, the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// No usable token: the user has to sign in.
    #[error(
        "MCP server {server} needs authentication{}: run `keel mcp login {server}`",
        why_note(why)
    )]
    NeedsLogin {
        /// The server.
        server: String,
        /// Why (empty: it never signed in).
        why: String,
    },
    /// A server's answer broke a rule (size, field, URL scheme, issuer).
    #[error("MCP server {server}: {what} at {url} {why}")]
    Invalid {
        /// The server.
        server: String,
        /// Which document or field.
        what: String,
        /// Where it came from.
        url: String,
        /// The rule it broke.
        why: String,
    },
    /// A request could not be made or was not answered in time.
    #[error("MCP server {server}: {what} at {url} failed: {why}")]
    Request {
        /// The server.
        server: String,
        /// What keel asked for.
        what: String,
        /// Where.
        url: String,
        /// What happened (timeout, connection refused, HTTP status).
        why: String,
    },
    /// The authorization server or the user refused.
    #[error("MCP server {server}: authorization was refused: {why}")]
    Refused {
        /// The server.
        server: String,
        /// What the authorization server said.
        why: String,
    },
    /// The token file could not be read or written.
    #[error("the MCP token file {path}: {why}")]
    Store {
        /// The file.
        path: String,
        /// What went wrong.
        why: String,
    },
    /// The flow itself failed (no callback in time, a listener that cannot bind, ...).
    #[error("MCP server {server}: {why}")]
    Flow {
        /// The server.
        server: String,
        /// What happened.
        why: String,
    },
}

fn why_note(why: &str) -> String {
    if why.is_empty() {
        String::new()
    } else {
        format!(" ({why})")
    }
}

impl OAuthError {
    /// Whether the fix is `keel mcp login`.
    pub fn needs_login(&self) -> bool {
        matches!(self, OAuthError::NeedsLogin { .. })
    }
}

/// Text from a server made safe to show: control characters replaced, length bounded.
pub(crate) fn shown(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    clip(clean.trim(), 300)
}

/// Seconds since the epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The HTTP client for authorization requests: bundled roots, no redirects (a metadata or
/// token answer must come from the URL asked), every request within `deadline`.
pub(crate) fn client(deadline: Duration) -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .tls_built_in_native_certs(false)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(deadline)
        .timeout(deadline)
        .build()
        .map_err(ClientError)
}

/// The HTTP client for authorization requests could not be built (TLS set-up).
#[derive(Debug, thiserror::Error)]
#[error("an HTTP client could not be made: {0}")]
pub struct ClientError(#[source] reqwest::Error);

/// The authorization of one server in a session: the stored token, refreshed when it has
/// expired or the server refused it. Shared by the transport's requests.
pub struct Auth {
    server: String,
    url: String,
    store: Option<TokenStore>,
    deadline: Duration,
    /// The token as last loaded or refreshed (`None` before first use).
    state: tokio::sync::Mutex<Option<Option<Stored>>>,
    /// Set once keel knows the user has to sign in: why.
    needs_login: std::sync::Mutex<Option<OAuthError>>,
    /// The access token last used, for requests made without waiting (closing a session).
    current: std::sync::Mutex<Option<String>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Auth")
            .field("server", &self.server)
            .finish()
    }
}

impl Auth {
    /// The authorization of server `server` at `url`, its tokens in `store` (none: no file
    /// can be found, so the server can only ask the user to sign in); each request to the
    /// authorization server waits at most `deadline`.
    pub fn new(server: &str, url: &str, store: Option<TokenStore>, deadline: Duration) -> Self {
        Self {
            server: server.to_owned(),
            url: url.to_owned(),
            store,
            deadline,
            state: tokio::sync::Mutex::new(None),
            needs_login: std::sync::Mutex::new(None),
            current: std::sync::Mutex::new(None),
        }
    }

    /// Why the user must sign in, once keel knows they must.
    pub fn needs_login(&self) -> Option<OAuthError> {
        self.needs_login
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn login_needed(&self, why: &str) -> OAuthError {
        let e = OAuthError::NeedsLogin {
            server: self.server.clone(),
            why: why.to_owned(),
        };
        *self.needs_login.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
        e
    }

    /// The access token last used (for a request that cannot wait, such as closing).
    pub fn current(&self) -> Option<String> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn remember(&self, token: Option<&str>) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = token.map(str::to_owned);
    }

    /// The access token to send (refreshed first when it has expired), or none when the
    /// user never signed in to this server (the server may not need it).
    pub async fn bearer(&self) -> Result<Option<String>, OAuthError> {
        let mut state = self.state.lock().await;
        if state.is_none() {
            // First use: read the file now, not when the session was built.
            let loaded = match &self.store {
                Some(s) => s.load(&self.server, &self.url)?,
                None => None,
            };
            *state = Some(loaded);
        }
        let Some(Some(stored)) = state.as_mut() else {
            return Ok(None);
        };
        if stored.expired(now_secs() + EXPIRY_SKEW) {
            if stored.refresh_token.is_none() {
                return Err(
                    self.login_needed("its access token expired and there is no refresh token")
                );
            }
            self.refresh(stored).await?;
        }
        let token = stored.access_token.clone();
        self.remember(Some(&token));
        Ok(Some(token))
    }

    /// The server refused `used` (401): a new token (refreshed), or the error that says the
    /// user must sign in.
    pub async fn refused(&self, used: Option<&str>) -> Result<String, OAuthError> {
        let mut state = self.state.lock().await;
        let Some(Some(stored)) = state.as_mut() else {
            return Err(self.login_needed(""));
        };
        if used != Some(stored.access_token.as_str()) {
            // Another request refreshed it meanwhile.
            return Ok(stored.access_token.clone());
        }
        if stored.refresh_token.is_none() {
            return Err(self.login_needed("the server refused its access token"));
        }
        self.refresh(stored).await?;
        let token = stored.access_token.clone();
        self.remember(Some(&token));
        Ok(token)
    }

    /// The server refused even a fresh token: the user must sign in again.
    pub fn refused_fresh(&self) -> OAuthError {
        self.login_needed("the server refused a freshly refreshed access token")
    }

    /// Refresh `stored` in place (and in the file), retrying transient failures with backoff;
    /// a refused refresh token is dropped from the file and the user must sign in again.
    async fn refresh(&self, stored: &mut Stored) -> Result<(), OAuthError> {
        let mut attempt = 0;
        loop {
            match flow::refresh(&self.server, stored, self.deadline).await {
                Ok(fresh) => {
                    *stored = fresh;
                    if let Some(s) = &self.store {
                        s.save(&self.server, stored)?;
                    }
                    return Ok(());
                }
                Err(flow::RefreshError::Refused(why)) => {
                    if let Some(s) = &self.store {
                        s.remove(&self.server)?;
                    }
                    return Err(self.login_needed(&format!("its refresh token was refused: {why}")));
                }
                Err(flow::RefreshError::Failed(e)) => {
                    let Some(wait) = REFRESH_BACKOFF.get(attempt) else {
                        return Err(e);
                    };
                    attempt += 1;
                    tokio::time::sleep(*wait).await;
                }
            }
        }
    }
}

/// keel's home for token files: `KEEL_HOME`, or `~/.keel` (relative paths from the working
/// directory), as the session builder finds it.
pub fn keel_home_from_env() -> Option<PathBuf> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let home = match nonempty("KEEL_HOME") {
        Some(h) => PathBuf::from(h),
        None => PathBuf::from(nonempty("HOME")?).join(".keel"),
    };
    if home.is_absolute() {
        Some(home)
    } else {
        std::env::current_dir().ok().map(|d| d.join(home))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A token endpoint answering with `answers` in turn (the last one repeated); its URL and
    /// the number of requests it got.
    async fn token_endpoint(answers: Vec<(u16, &'static str)>) -> (String, Arc<AtomicU32>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicU32::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                // The whole request (headers, then Content-Length bytes), then the answer.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                let i = counted.fetch_add(1, Ordering::SeqCst) as usize;
                let (status, body) = answers[i.min(answers.len() - 1)];
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
            }
        });
        (format!("http://127.0.0.1:{port}/token"), hits)
    }

    fn expired(token_endpoint: &str) -> Stored {
        Stored {
            server_url: "http://127.0.0.1:9/mcp".into(),
            resource: "http://127.0.0.1:9/mcp".into(),
            issuer: "http://127.0.0.1:9".into(),
            token_endpoint: token_endpoint.into(),
            client_id: "c1".into(),
            client_secret: None,
            access_token: "old".into(),
            refresh_token: Some("rt-1".into()),
            expires_at: Some(1),
            scope: None,
        }
    }

    #[tokio::test]
    async fn a_transient_refresh_failure_is_retried_with_backoff_and_a_refused_one_needs_login() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(store_path(dir.path()));
        let fresh = r#"{"access_token":"fresh","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-2"}"#;
        let (url, hits) = token_endpoint(vec![(503, "{}"), (502, "{}"), (200, fresh)]).await;
        store.save("s", &expired(&url)).unwrap();
        let auth = Auth::new(
            "s",
            "http://127.0.0.1:9/mcp",
            Some(store.clone()),
            Duration::from_secs(10),
        );
        assert_eq!(auth.bearer().await.unwrap().as_deref(), Some("fresh"));
        assert_eq!(
            hits.load(Ordering::SeqCst),
            3,
            "two retries, then the answer"
        );
        let kept = store.load("s", "http://127.0.0.1:9/mcp").unwrap().unwrap();
        assert_eq!(kept.access_token, "fresh");
        assert_eq!(kept.refresh_token.as_deref(), Some("rt-2"));

        // Always failing: three attempts, then the error (not a sign-in: it may pass).
        let (url, hits) = token_endpoint(vec![(503, "{}")]).await;
        store.save("s", &expired(&url)).unwrap();
        let auth = Auth::new(
            "s",
            "http://127.0.0.1:9/mcp",
            Some(store.clone()),
            Duration::from_secs(10),
        );
        let e = auth.bearer().await.unwrap_err();
        assert!(!e.needs_login() && e.to_string().contains("503"), "{e}");
        assert_eq!(hits.load(Ordering::SeqCst), 3);

        // Refused: at once, the entry dropped, and the user told to sign in.
        let (url, hits) = token_endpoint(vec![(400, r#"{"error":"invalid_grant"}"#)]).await;
        store.save("s", &expired(&url)).unwrap();
        let auth = Auth::new(
            "s",
            "http://127.0.0.1:9/mcp",
            Some(store.clone()),
            Duration::from_secs(10),
        );
        let e = auth.bearer().await.unwrap_err();
        assert!(
            e.needs_login() && e.to_string().contains("invalid_grant"),
            "{e}"
        );
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert!(store.load("s", "http://127.0.0.1:9/mcp").unwrap().is_none());
        assert!(auth.needs_login().is_some());
    }
}
