//! Google application-default credentials: an OAuth access token for Vertex AI from a
//! service-account key (a JWT signed with RS256, exchanged at the token endpoint), from the
//! gcloud user file (a refresh token exchanged there), or, on Google Cloud, from the instance's
//! metadata server; cached until shortly before it expires.

pub mod external;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use ring::signature::RsaKeyPair;
use serde_json::Value;

use crate::anthropic::{body_text, error_parts, send_bounded};
use crate::error::{ApiError, ApiErrorKind};

/// Google's token endpoint, for credentials that do not name their own.
pub const GOOGLE_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";
/// The scope Vertex AI needs.
pub(crate) const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// A credentials file larger than this is not one.
pub(crate) const MAX_CREDENTIALS_FILE: u64 = 64 * 1024;
/// A token endpoint's answer larger than this is not one.
pub(crate) const MAX_TOKEN_BODY: usize = 64 * 1024;
/// A token is refreshed this long before it expires (a request must not carry one that dies
/// on the way).
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// The longest token lifetime believed (Google's are an hour).
pub(crate) const MAX_TOKEN_LIFETIME: u64 = 24 * 3600;
/// How long the token endpoint may take.
pub(crate) const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the credentials came from and how to trade them for a token.
enum Grant {
    /// The gcloud user file: a refresh token.
    User {
        client_id: String,
        client_secret: String,
        refresh_token: String,
    },
    /// A service-account key: sign a JWT assertion.
    ServiceAccount { email: String, key: Arc<RsaKeyPair> },
    /// The metadata server of a Google Cloud machine (GCE, GKE, Cloud Run): ask it.
    Metadata,
    /// Workload identity federation: a subject token from elsewhere, exchanged at Google's
    /// security token service (and optionally for a service account's token).
    External(Box<external::External>),
    /// Another principal's credentials trading their token for a service account's.
    Impersonated(Box<external::Impersonated>),
}

/// The metadata server's name on Google Cloud (`GCE_METADATA_HOST` overrides it).
pub const METADATA_HOST: &str = "metadata.google.internal";

/// Whether this machine says it is a Google Cloud machine (its DMI product name), so that the
/// metadata server may be asked without a network probe. Linux only; false elsewhere.
pub fn on_google_cloud() -> bool {
    use std::io::Read as _;
    let mut name = String::new();
    std::fs::File::open("/sys/class/dmi/id/product_name")
        .and_then(|f| f.take(256).read_to_string(&mut name))
        .is_ok_and(|_| name.trim().starts_with("Google"))
}

/// Application-default credentials that hand out access tokens.
pub struct TokenSource {
    grant: Grant,
    token_url: String,
    /// Where the credentials came from, for messages (a file, or the metadata server).
    origin: String,
    http: reqwest::Client,
    cached: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.grant {
            Grant::User { .. } => "authorized_user",
            Grant::ServiceAccount { .. } => "service_account",
            Grant::Metadata => "metadata",
            Grant::External(_) => "external_account",
            Grant::Impersonated(_) => "impersonated_service_account",
        };
        write!(f, "TokenSource({kind} from {})", self.origin)
    }
}

pub(crate) fn config_error(path: &Path, what: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        ApiErrorKind::Config,
        format!("the Google credentials in {}: {what}", path.display()),
    )
}

/// The gcloud application-default credentials file under `home`.
pub fn gcloud_adc_path(home: &Path) -> PathBuf {
    home.join(".config/gcloud/application_default_credentials.json")
}

impl TokenSource {
    /// Credentials from a JSON file (`authorized_user` or `service_account`). `token_url`
    /// overrides the endpoint of `authorized_user` files (service-account keys carry theirs
    /// in `token_uri`).
    pub fn from_file(path: &Path, token_url: Option<String>) -> Result<Self, ApiError> {
        let meta = std::fs::metadata(path).map_err(|e| config_error(path, e))?;
        if !meta.is_file() || meta.len() > MAX_CREDENTIALS_FILE {
            return Err(config_error(
                path,
                format!("not a regular file of at most {MAX_CREDENTIALS_FILE} bytes"),
            ));
        }
        let text = std::fs::read(path).map_err(|e| config_error(path, e))?;
        let v: Value = serde_json::from_slice(&text)
            .map_err(|e| config_error(path, format!("not JSON ({e})")))?;
        Self::from_value(&v, path, token_url, true)
    }

    /// Credentials from the JSON `v` read from `path`; `outer` allows the kinds that wrap
    /// other credentials (an impersonated account's source may not wrap again).
    pub(crate) fn from_value(
        v: &Value,
        path: &Path,
        token_url: Option<String>,
        outer: bool,
    ) -> Result<Self, ApiError> {
        let field = |k: &str| -> Result<String, ApiError> {
            v.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
                .ok_or_else(|| config_error(path, format!("`{k}` is missing")))
        };
        let kind = field("type")?;
        let (grant, own_url) = match kind.as_str() {
            "authorized_user" => (
                Grant::User {
                    client_id: field("client_id")?,
                    client_secret: field("client_secret")?,
                    refresh_token: field("refresh_token")?,
                },
                None,
            ),
            "service_account" => {
                let key = parse_private_key(&field("private_key")?)
                    .map_err(|e| config_error(path, e))?;
                (
                    Grant::ServiceAccount {
                        email: field("client_email")?,
                        key: Arc::new(key),
                    },
                    field("token_uri").ok(),
                )
            }
            "external_account" if outer => {
                let ext = external::External::from_value(v, path)?;
                let url = ext.sts_url.clone();
                (Grant::External(Box::new(ext)), Some(url))
            }
            "impersonated_service_account" if outer => {
                let imp = external::Impersonated::from_value(v, path, token_url.clone())?;
                let url = imp.url.clone();
                (Grant::Impersonated(Box::new(imp)), Some(url))
            }
            other => {
                return Err(config_error(
                    path,
                    format!("credentials of type {other:?} are not supported here (keel reads authorized_user, service_account, external_account and impersonated_service_account)"),
                ))
            }
        };
        let token_url = own_url
            .or(token_url)
            .unwrap_or_else(|| GOOGLE_TOKEN_URL.to_owned());
        match reqwest::Url::parse(&token_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
            _ => {
                return Err(config_error(
                    path,
                    format!("the token endpoint {token_url:?} is not an http(s) URL"),
                ))
            }
        }
        let http = http_client().map_err(|e| config_error(path, e))?;
        Ok(Self {
            grant,
            token_url,
            origin: path.display().to_string(),
            http,
            cached: tokio::sync::Mutex::new(None),
        })
    }

    /// Tokens from the metadata server at `host` (`host` or `host:port`, as
    /// `GCE_METADATA_HOST` gives it): the default service account of the machine.
    pub fn metadata_server(host: &str) -> Result<Self, ApiError> {
        let ok = !host.is_empty()
            && host.len() <= 255
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
        if !ok {
            return Err(ApiError::new(
                ApiErrorKind::Config,
                format!("GCE_METADATA_HOST={host:?} is not a host name or host:port"),
            ));
        }
        let http = http_client().map_err(|e| ApiError::new(ApiErrorKind::Config, e.to_string()))?;
        Ok(Self {
            grant: Grant::Metadata,
            token_url: format!(
                "http://{host}/computeMetadata/v1/instance/service-accounts/default/token?scopes={SCOPE}"
            ),
            origin: format!("the metadata server at {host}"),
            http,
            cached: tokio::sync::Mutex::new(None),
        })
    }

    /// A valid access token: the cached one, or a fresh one from the token endpoint.
    pub async fn token(&self) -> Result<String, ApiError> {
        let mut cached = self.cached.lock().await;
        if let Some((tok, until)) = cached.as_ref() {
            if Instant::now() + REFRESH_MARGIN < *until {
                return Ok(tok.clone());
            }
        }
        let (tok, lifetime) = self.fetch().await?;
        *cached = Some((tok.clone(), Instant::now() + lifetime));
        Ok(tok)
    }

    /// Forget `stale` (the API refused it) so the next [`TokenSource::token`] fetches anew;
    /// a token another request already replaced is left alone.
    pub async fn invalidate(&self, stale: &str) {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|(t, _)| t == stale) {
            *cached = None;
        }
    }

    /// A fresh token, uncached (an impersonated account's source asks through this).
    pub(crate) async fn fetch(&self) -> Result<(String, Duration), ApiError> {
        match &self.grant {
            Grant::External(e) => return e.fetch(&self.http).await,
            Grant::Impersonated(i) => return i.fetch(&self.http).await,
            _ => {}
        }
        let req = match &self.grant {
            // The metadata server answers a GET that carries its header (and nothing else).
            Grant::Metadata => self
                .http
                .get(&self.token_url)
                .header("metadata-flavor", "Google"),
            _ => self
                .http
                .post(&self.token_url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(self.form()?),
        };
        let resp = send_bounded(req, TOKEN_TIMEOUT).await.map_err(|e| {
            ApiError::new(
                e.kind,
                format!(
                    "could not reach the Google token endpoint {}: {e}",
                    self.token_url
                ),
            )
        })?;
        let (status, _, body) = error_parts(resp).await;
        if !(200..300).contains(&status) {
            let kind = if status >= 500 || status == 429 {
                ApiErrorKind::Http
            } else {
                ApiErrorKind::Config
            };
            return Err(ApiError {
                status: (kind == ApiErrorKind::Http).then_some(status),
                ..ApiError::new(
                    kind,
                    format!(
                        "the Google token endpoint refused the credentials in {} (HTTP {status}: {}); run `gcloud auth application-default login` or fix GOOGLE_APPLICATION_CREDENTIALS",
                        self.origin,
                        body_text(status, &body)
                    ),
                )
            });
        }
        parse_token(&body[..body.len().min(MAX_TOKEN_BODY)])
    }

    /// The form that trades a refresh token or a signed assertion for an access token.
    fn form(&self) -> Result<String, ApiError> {
        Ok(match &self.grant {
            Grant::User {
                client_id,
                client_secret,
                refresh_token,
            } => form(&[
                ("grant_type", "refresh_token"),
                ("client_id", client_id),
                ("client_secret", client_secret),
                ("refresh_token", refresh_token),
            ]),
            Grant::ServiceAccount { email, key } => {
                let jwt = assertion(email, key, &self.token_url)?;
                form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &jwt),
                ])
            }
            Grant::Metadata | Grant::External(_) | Grant::Impersonated(_) => String::new(),
        })
    }
}

/// What keeps Google credentials from being used before any request is made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// The HTTP client for the token endpoint could not be built.
    #[error("could not start the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// `private_key` is not base64 between PEM armour lines.
    #[error("`private_key` is not PEM")]
    KeyNotPem,
    /// `private_key` decodes, but not to an RSA key ring accepts.
    #[error("`private_key` is not a usable RSA key ({0})")]
    KeyUnusable(ring::error::KeyRejected),
}

pub(crate) fn http_client() -> Result<reqwest::Client, SetupError> {
    reqwest::Client::builder()
        .tls_built_in_native_certs(false)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(SetupError::Client)
}

/// The access token and its lifetime from a token endpoint's JSON answer.
pub(crate) fn parse_token(body: &[u8]) -> Result<(String, Duration), ApiError> {
    let bad = |what: &str| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("the Google token endpoint's answer {what}"),
        )
    };
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("is not JSON"))?;
    let tok = v
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= 8192 && t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| bad("has no usable access_token"))?;
    let secs = v
        .get("expires_in")
        .and_then(Value::as_u64)
        .unwrap_or(3600)
        .min(MAX_TOKEN_LIFETIME);
    Ok((tok.to_owned(), Duration::from_secs(secs)))
}

/// A signed JWT asking for a Vertex token for the service account `email`.
fn assertion(email: &str, key: &RsaKeyPair, aud: &str) -> Result<String, ApiError> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let header = b64.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = serde_json::json!({
        "iss": email, "scope": SCOPE, "aud": aud, "iat": now, "exp": now + 3600,
    });
    let signing_input = format!("{header}.{}", b64.encode(claims.to_string()));
    let mut sig = vec![0u8; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut sig,
    )
    .map_err(|_| {
        ApiError::new(
            ApiErrorKind::Config,
            "could not sign the service-account assertion",
        )
    })?;
    Ok(format!("{signing_input}.{}", b64.encode(sig)))
}

/// An RSA key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`, what Google issues) or PKCS#1.
fn parse_private_key(pem: &str) -> Result<RsaKeyPair, SetupError> {
    let pkcs1 = pem.contains("BEGIN RSA PRIVATE KEY");
    let b64: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .map_err(|_| SetupError::KeyNotPem)?;
    let key = if pkcs1 {
        RsaKeyPair::from_der(&der)
    } else {
        RsaKeyPair::from_pkcs8(&der)
    };
    key.map_err(SetupError::KeyUnusable)
}

/// `application/x-www-form-urlencoded` of `pairs`.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", form_escape(k), form_escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn form_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_answers_are_range_checked() {
        let (t, d) = parse_token(br#"{"access_token":"ya29.x","expires_in":3599}"#).unwrap();
        assert_eq!((t.as_str(), d.as_secs()), ("ya29.x", 3599));
        let (_, d) = parse_token(br#"{"access_token":"a","expires_in":1e99}"#).unwrap();
        assert_eq!(
            d.as_secs(),
            3600,
            "a lifetime that is not an integer is ignored"
        );
        let (_, d) = parse_token(br#"{"access_token":"a","expires_in":99999999}"#).unwrap();
        assert_eq!(d.as_secs(), MAX_TOKEN_LIFETIME);
        for bad in [
            &b"{}"[..],
            br#"{"access_token":""}"#,
            br#"{"access_token":"a\nb"}"#,
            b"<html>",
        ] {
            assert!(
                parse_token(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn form_values_are_escaped() {
        assert_eq!(
            form(&[("a", "x y&z=1/"), ("b", "ok")]),
            "a=x%20y%26z%3D1%2F&b=ok"
        );
    }
}
