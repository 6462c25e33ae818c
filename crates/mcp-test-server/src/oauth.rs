//! `--oauth`: the HTTP test server protects `/mcp` with OAuth and is its own authorization
//! server, on the same port:
//!
//! - `/mcp` without a valid bearer token: 401 with
//!   `WWW-Authenticate: Bearer resource_metadata="<base>/.well-known/oauth-protected-resource/mcp"`
//!   (with `--oauth-no-hint`, no `resource_metadata`: the client must find the well-known URI);
//! - `/.well-known/oauth-protected-resource[/mcp]`, `/.well-known/oauth-authorization-server`;
//! - `POST /register` (RFC 7591), `GET /authorize` (approves at once: a 302 to the redirect
//!   with the code and state; it checks the client, the redirect, S256 and `resource`),
//!   `POST /token` (the code, once, with the PKCE verifier checked against the challenge; or a
//!   refresh token; both with `resource`);
//! - `POST /admin/revoke`: every access and refresh token stops working;
//!   `GET /admin/stats`: counts of what happened, as JSON.
//!
//! `--token-ttl SECS`: how long an access token lives (default 3600). `--after-call
//! `--client ID=REDIRECT`: a client registered beforehand (for a configured client id). `--after-call
//! drop-access`: every answered tool call ends every access token (refresh tokens still work);
//! `--after-call revoke`: it ends every refresh token too.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

/// A code waiting to be exchanged.
struct Grant {
    client_id: String,
    challenge: String,
    redirect_uri: String,
}

#[derive(Default)]
struct Inner {
    /// client id -> its redirect URIs.
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Grant>,
    access: HashMap<String, Instant>,
    refresh: HashMap<String, String>,
    next: u64,
    stats: HashMap<&'static str, u64>,
}

impl Inner {
    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}-{}", self.next)
    }
}

/// The authorization side of the server.
pub struct OAuth {
    base: String,
    ttl: Duration,
    hint: bool,
    /// `--after-call`: what a tool call ends (`drop-access`, `revoke`).
    after_call: Option<String>,
    inner: Mutex<Inner>,
}

/// An answer: status, content type, body, extra headers.
pub type Answer = (u16, &'static str, String, Vec<(&'static str, String)>);

fn json_answer(status: u16, v: Value) -> Answer {
    (status, "application/json", v.to_string(), Vec::new())
}

fn form(text: &str) -> HashMap<String, String> {
    url::Url::parse(&format!("http://x/?{text}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

impl OAuth {
    /// The server at `base` (`http://127.0.0.1:PORT`).
    pub fn new(
        base: String,
        ttl_secs: u64,
        hint: bool,
        after_call: Option<String>,
        client: Option<String>,
    ) -> Self {
        let mut inner = Inner::default();
        if let Some((id, redirect)) = client.as_deref().and_then(|c| c.split_once('=')) {
            inner
                .clients
                .insert(id.to_owned(), vec![redirect.to_owned()]);
        }
        Self {
            base,
            ttl: Duration::from_secs(ttl_secs),
            hint,
            after_call,
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// A tool call was answered: end tokens as `--after-call` says.
    pub fn call_answered(&self) {
        let mut inner = self.lock();
        match self.after_call.as_deref() {
            Some("drop-access") => inner.access.clear(),
            Some("revoke") => {
                inner.access.clear();
                inner.refresh.clear();
            }
            _ => {}
        }
    }

    /// The 401 for `/mcp` when `authorization` is not a live token; `None`: let it through.
    pub fn guard(&self, authorization: Option<&str>) -> Option<Answer> {
        let token = authorization.and_then(|a| a.strip_prefix("Bearer "));
        let mut inner = self.lock();
        let live = token
            .and_then(|t| inner.access.get(t))
            .is_some_and(|exp| *exp > Instant::now());
        if live {
            return None;
        }
        inner.count("rejected");
        let challenge = if self.hint {
            format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"",
                self.base
            )
        } else {
            "Bearer realm=\"keel-test\"".to_owned()
        };
        Some((
            401,
            "text/plain",
            "sign in first".into(),
            vec![("www-authenticate", challenge)],
        ))
    }

    /// The answer to an authorization-side request, or `None` when `path` is not one.
    pub fn route(&self, method: &str, path: &str, query: &str, body: &str) -> Option<Answer> {
        let base = &self.base;
        Some(match (method, path) {
            (
                "GET",
                "/.well-known/oauth-protected-resource/mcp"
                | "/.well-known/oauth-protected-resource",
            ) => json_answer(
                200,
                json!({"resource": self.resource(), "authorization_servers": [base],
                       "scopes_supported": ["mcp"], "bearer_methods_supported": ["header"]}),
            ),
            ("GET", "/.well-known/oauth-authorization-server") => json_answer(
                200,
                json!({"issuer": base,
                       "authorization_endpoint": format!("{base}/authorize"),
                       "token_endpoint": format!("{base}/token"),
                       "registration_endpoint": format!("{base}/register"),
                       "response_types_supported": ["code"],
                       "grant_types_supported": ["authorization_code", "refresh_token"],
                       "code_challenge_methods_supported": ["S256"],
                       "token_endpoint_auth_methods_supported": ["none"]}),
            ),
            ("POST", "/register") => self.register(body),
            ("GET", "/authorize") => self.authorize(&form(query)),
            ("POST", "/token") => self.token(&form(body)),
            ("POST", "/admin/revoke") => {
                let mut inner = self.lock();
                inner.access.clear();
                inner.refresh.clear();
                json_answer(200, json!({"revoked": true}))
            }
            ("GET", "/admin/stats") => {
                let inner = self.lock();
                json_answer(200, json!(inner.stats))
            }
            _ => return None,
        })
    }

    fn register(&self, body: &str) -> Answer {
        let doc: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let uris: Vec<String> = doc["redirect_uris"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if uris.is_empty() || !uris.iter().all(|u| u.starts_with("http://127.0.0.1:")) {
            return json_answer(400, json!({"error": "invalid_redirect_uri"}));
        }
        let mut inner = self.lock();
        let id = inner.fresh("client");
        inner.clients.insert(id.clone(), uris.clone());
        inner.count("registrations");
        json_answer(
            201,
            json!({"client_id": id, "redirect_uris": uris, "token_endpoint_auth_method": "none"}),
        )
    }

    fn authorize(&self, q: &HashMap<String, String>) -> Answer {
        let get = |k: &str| q.get(k).cloned().unwrap_or_default();
        let mut inner = self.lock();
        let redirect = get("redirect_uri");
        let known = inner
            .clients
            .get(&get("client_id"))
            .is_some_and(|uris| uris.contains(&redirect));
        let why = if !known {
            "unknown client or redirect_uri"
        } else if get("response_type") != "code" {
            "response_type must be code"
        } else if get("code_challenge_method") != "S256" || get("code_challenge").len() != 43 {
            "PKCE with S256 is required"
        } else if get("resource") != self.resource() {
            "resource must name the MCP server"
        } else if get("state").is_empty() {
            "state is required"
        } else {
            ""
        };
        if !why.is_empty() {
            return (400, "text/plain", why.into(), Vec::new());
        }
        let code = inner.fresh("code");
        inner.codes.insert(
            code.clone(),
            Grant {
                client_id: get("client_id"),
                challenge: get("code_challenge"),
                redirect_uri: redirect.clone(),
            },
        );
        inner.count("authorizations");
        let mut to = url::Url::parse(&redirect).unwrap_or_else(|_| {
            url::Url::parse("http://127.0.0.1/").unwrap_or_else(|_| unreachable!())
        });
        to.query_pairs_mut()
            .append_pair("code", &code)
            .append_pair("state", &get("state"));
        (
            302,
            "text/plain",
            String::new(),
            vec![("location", to.to_string())],
        )
    }

    fn token(&self, f: &HashMap<String, String>) -> Answer {
        let get = |k: &str| f.get(k).cloned().unwrap_or_default();
        let refused = |e: &str| json_answer(400, json!({"error": e}));
        if get("resource") != self.resource() {
            return refused("invalid_target");
        }
        let mut inner = self.lock();
        match get("grant_type").as_str() {
            "authorization_code" => {
                let Some(grant) = inner.codes.remove(&get("code")) else {
                    return refused("invalid_grant");
                };
                let digest =
                    ring::digest::digest(&ring::digest::SHA256, get("code_verifier").as_bytes());
                if URL_SAFE_NO_PAD.encode(digest.as_ref()) != grant.challenge {
                    inner.count("pkce_failures");
                    return refused("invalid_grant");
                }
                if grant.client_id != get("client_id") || grant.redirect_uri != get("redirect_uri")
                {
                    return refused("invalid_grant");
                }
                inner.count("code_grants");
                self.issue(&mut inner, &grant.client_id)
            }
            "refresh_token" => {
                let Some(client) = inner.refresh.remove(&get("refresh_token")) else {
                    inner.count("refused_refreshes");
                    return refused("invalid_grant");
                };
                if client != get("client_id") {
                    return refused("invalid_grant");
                }
                inner.count("refreshes");
                self.issue(&mut inner, &client)
            }
            _ => refused("unsupported_grant_type"),
        }
    }

    fn issue(&self, inner: &mut Inner, client: &str) -> Answer {
        let access = inner.fresh("at");
        let refresh = inner.fresh("rt");
        inner
            .access
            .insert(access.clone(), Instant::now() + self.ttl);
        inner.refresh.insert(refresh.clone(), client.to_owned());
        json_answer(
            200,
            json!({"access_token": access, "token_type": "Bearer",
                   "expires_in": self.ttl.as_secs(), "refresh_token": refresh, "scope": "mcp"}),
        )
    }
}
