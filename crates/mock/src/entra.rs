//! A stand-in for Microsoft Entra ID's token endpoint (`POST /{tenant}/oauth2/v2.0/token`),
//! so a Foundry client can be tested end to end: it checks the client-credentials form (a
//! secret or a federated assertion, Foundry's scope), hands out `keel-mock-entra-N` tokens,
//! and the Messages route then refuses a token of that shape it did not hand out.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use serde_json::{json, Value};

/// The scope a Foundry token is asked for.
pub const FOUNDRY_SCOPE: &str = "https://cognitiveservices.azure.com/.default";
/// The prefix of the tokens this server hands out.
pub const TOKEN_PREFIX: &str = "keel-mock-entra-";
/// A client secret this server refuses (`invalid_client`), to test a wrong secret.
pub const REFUSED_SECRET: &str = "keel-mock-wrong-secret";
/// The most tokens remembered; past it the oldest are forgotten (and then refused).
const MAX_ISSUED: usize = 4096;

/// The tokens handed out so far.
#[derive(Default)]
pub(crate) struct Issued {
    tokens: Mutex<(HashSet<String>, u64)>,
}

/// Whether `route` is a tenant's v2 token endpoint.
pub(crate) fn is_token_route(route: &str) -> bool {
    route
        .strip_prefix('/')
        .and_then(|r| r.strip_suffix("/oauth2/v2.0/token"))
        .is_some_and(|t| !t.is_empty() && !t.contains('/'))
}

fn form(raw: &[u8]) -> BTreeMap<String, String> {
    let decode = |s: &str| -> String {
        let b = s.replace('+', " ");
        let b = b.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
                (b'%', Some(v)) => {
                    out.push(v);
                    i += 3;
                }
                (c, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    String::from_utf8_lossy(raw)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

impl Issued {
    /// The token endpoint's answer to `raw` (a form body): status and JSON.
    pub(crate) fn answer(&self, method: &str, raw: &[u8]) -> (u16, Value) {
        let refuse = |status: u16, error: &str, why: &str| {
            (
                status,
                json!({"error": error, "error_description": format!("keel-mock: {why}")}),
            )
        };
        if method != "POST" {
            return refuse(405, "invalid_request", "the token endpoint takes POST");
        }
        let f = form(raw);
        let get = |k: &str| f.get(k).map(String::as_str).filter(|v| !v.is_empty());
        if get("grant_type") != Some("client_credentials") {
            return refuse(
                400,
                "unsupported_grant_type",
                "grant_type must be client_credentials",
            );
        }
        if get("client_id").is_none() {
            return refuse(400, "invalid_request", "client_id is required");
        }
        if get("scope") != Some(FOUNDRY_SCOPE) {
            return refuse(
                400,
                "invalid_scope",
                &format!("scope must be {FOUNDRY_SCOPE}"),
            );
        }
        let assertion = get("client_assertion_type")
            == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            && get("client_assertion").is_some();
        match get("client_secret") {
            Some(REFUSED_SECRET) => return refuse(401, "invalid_client", "invalid client secret"),
            None if !assertion => {
                return refuse(
                    400,
                    "invalid_request",
                    "client_secret or client_assertion is required",
                )
            }
            _ => {}
        }
        let mut t = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        t.1 += 1;
        let token = format!("{TOKEN_PREFIX}{}", t.1);
        if t.0.len() >= MAX_ISSUED {
            t.0.clear();
        }
        t.0.insert(token.clone());
        (
            200,
            json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}),
        )
    }

    /// A bearer token of this server's shape must be one it handed out.
    pub(crate) fn check_bearer(
        &self,
        headers: &BTreeMap<String, String>,
    ) -> Result<(), UnknownToken> {
        let Some(tok) = headers
            .get("authorization")
            .and_then(|a| a.strip_prefix("Bearer "))
            .filter(|t| t.starts_with(TOKEN_PREFIX))
        else {
            return Ok(());
        };
        let t = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if t.0.contains(tok) {
            Ok(())
        } else {
            Err(UnknownToken(tok.to_owned()))
        }
    }

    /// Forget every token handed out: the next request carrying one is refused with 401.
    pub(crate) fn revoke_all(&self) {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clear();
    }
}

/// A bearer token of this server's shape that it did not hand out (or has revoked): the 401
/// the mock answers names it.
#[derive(Debug, thiserror::Error)]
#[error(
    "authorization: the Entra ID token {0:?} was not issued by this keel-mock (or was revoked)"
)]
pub(crate) struct UnknownToken(String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_issued_for_a_good_form_and_checked_on_use() {
        let i = Issued::default();
        let good = format!(
            "grant_type=client_credentials&client_id=app&client_secret=s&scope={}",
            FOUNDRY_SCOPE.replace(':', "%3A").replace('/', "%2F")
        );
        let (status, v) = i.answer("POST", good.as_bytes());
        assert_eq!(status, 200, "{v}");
        let tok = v["access_token"].as_str().unwrap().to_owned();
        let mut h = BTreeMap::new();
        h.insert("authorization".to_owned(), format!("Bearer {tok}"));
        assert!(i.check_bearer(&h).is_ok());
        i.revoke_all();
        assert!(i.check_bearer(&h).is_err());
        let (status, _) = i.answer(
            "POST",
            b"grant_type=client_credentials&client_id=app&client_secret=s&scope=x",
        );
        assert_eq!(status, 400);
        let bad = good.replace(
            "client_secret=s",
            &format!("client_secret={REFUSED_SECRET}"),
        );
        assert_eq!(i.answer("POST", bad.as_bytes()).0, 401);
        assert!(is_token_route("/contoso/oauth2/v2.0/token"));
        assert!(!is_token_route("//oauth2/v2.0/token"));
    }
}
