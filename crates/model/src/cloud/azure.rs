//! Microsoft Entra ID access tokens for Foundry, from a chain in the spirit of Azure's default
//! one: a service principal's client secret or a workload-identity federated token (each
//! chosen alone when configured), else the machine's managed identity and the Azure CLI, tried
//! in that order at the first request; the first that gives a token is kept. Tokens are cached
//! until shortly before they expire and replaced once when Foundry refuses one.

pub mod cli;

use super::gcp::form;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::anthropic::{body_text, error_parts, send_bounded};
use crate::error::{ApiError, ApiErrorKind};

/// The scope Foundry's tokens are asked for (OAuth 2.0 v2 endpoints).
pub const COGNITIVE_SCOPE: &str = "https://cognitiveservices.azure.com/.default";
/// The same audience as a resource (managed identity and the Azure CLI).
pub const COGNITIVE_RESOURCE: &str = "https://cognitiveservices.azure.com";
/// The public cloud's authority (`AZURE_AUTHORITY_HOST` overrides it).
pub const PUBLIC_AUTHORITY: &str = "https://login.microsoftonline.com";
/// The instance metadata service's token endpoint on an Azure machine.
pub const IMDS_TOKEN_URL: &str = "http://169.254.169.254/metadata/identity/oauth2/token";
/// The asset tag every Azure virtual machine reports in its DMI chassis data.
const AZURE_ASSET_TAG: &str = "7783-7084-3265-9085-8269-3286-77";
/// A token endpoint's or the CLI's answer larger than this is not one.
const MAX_ANSWER: usize = 64 * 1024;
/// A federated token file larger than this is not one.
const MAX_ASSERTION_FILE: u64 = 64 * 1024;
/// How long a token endpoint may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the instance metadata service may take to answer: it is local to the machine,
/// so a silent one means there is none and the chain moves on.
const IMDS_TIMEOUT: Duration = Duration::from_secs(2);
/// How long `az account get-access-token` may run.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest token lifetime believed.
const MAX_TOKEN_LIFETIME: u64 = 24 * 3600;
/// A token is replaced this long before it expires (or at half its life, if shorter).
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// One place a token can come from. (Its `Debug` leaves the secrets out.)
#[derive(Clone)]
pub enum EntraSource {
    /// A service principal's secret (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`,
    /// `AZURE_CLIENT_SECRET`), traded at `token_url` with the client-credentials grant.
    ClientSecret {
        /// `{authority}/{tenant}/oauth2/v2.0/token`.
        token_url: String,
        /// The application (client) id.
        client_id: String,
        /// The secret.
        secret: String,
    },
    /// Workload identity: the federated token in `token_file` (re-read at each exchange, it
    /// rotates) is the client assertion.
    WorkloadIdentity {
        /// `{authority}/{tenant}/oauth2/v2.0/token`.
        token_url: String,
        /// The application (client) id.
        client_id: String,
        /// `AZURE_FEDERATED_TOKEN_FILE`.
        token_file: PathBuf,
    },
    /// The managed identity of App Service, Functions or Container Apps: `IDENTITY_ENDPOINT`
    /// with the secret `IDENTITY_HEADER`.
    AppService {
        /// `IDENTITY_ENDPOINT`.
        endpoint: String,
        /// `IDENTITY_HEADER`, sent as `x-identity-header`.
        header: String,
        /// A user-assigned identity's client id (`AZURE_CLIENT_ID`).
        client_id: Option<String>,
    },
    /// The managed identity of an Azure machine, from its instance metadata service.
    Imds {
        /// The token endpoint ([`IMDS_TOKEN_URL`]).
        url: String,
        /// A user-assigned identity's client id (`AZURE_CLIENT_ID`).
        client_id: Option<String>,
    },
    /// The signed-in Azure CLI: `az account get-access-token` as a bounded child process.
    AzureCli {
        /// The `az` program found on `PATH`.
        program: PathBuf,
        /// `AZURE_TENANT_ID`, passed as `--tenant`.
        tenant: Option<String>,
        /// How long the child may run.
        timeout: Duration,
    },
}

impl std::fmt::Debug for EntraSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntraSource::ClientSecret {
                token_url,
                client_id,
                ..
            } => write!(f, "ClientSecret({client_id} at {token_url})"),
            EntraSource::WorkloadIdentity {
                token_url,
                client_id,
                token_file,
            } => write!(
                f,
                "WorkloadIdentity({client_id} at {token_url}, {})",
                token_file.display()
            ),
            EntraSource::AppService { endpoint, .. } => write!(f, "AppService({endpoint})"),
            EntraSource::Imds { url, .. } => write!(f, "Imds({url})"),
            EntraSource::AzureCli { program, .. } => {
                write!(f, "AzureCli({})", program.display())
            }
        }
    }
}

impl EntraSource {
    /// A short name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            EntraSource::ClientSecret { .. } => "client secret (AZURE_CLIENT_SECRET)",
            EntraSource::WorkloadIdentity { .. } => {
                "workload identity (AZURE_FEDERATED_TOKEN_FILE)"
            }
            EntraSource::AppService { .. } => "managed identity (IDENTITY_ENDPOINT)",
            EntraSource::Imds { .. } => "managed identity (instance metadata service)",
            EntraSource::AzureCli { .. } => "Azure CLI (az account get-access-token)",
        }
    }
}

/// `{authority}/{tenant}/oauth2/v2.0/token`, refusing an authority a secret should not be sent
/// to in clear (http anywhere but loopback) and a tenant that would change the path.
pub fn token_url(authority: &str, tenant: &str) -> Result<String, ApiError> {
    check_tenant(tenant)?;
    let authority = authority.trim_end_matches('/');
    check_url(authority, "AZURE_AUTHORITY_HOST")?;
    Ok(format!("{authority}/{tenant}/oauth2/v2.0/token"))
}

/// A tenant id (a GUID) or domain: letters, digits, `-` and `.`, not starting with `-` (it
/// goes into a URL path and onto the Azure CLI's command line).
pub fn check_tenant(tenant: &str) -> Result<(), ApiError> {
    let ok = !tenant.is_empty()
        && tenant.len() <= 128
        && !tenant.starts_with(['-', '.'])
        && tenant
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if ok {
        return Ok(());
    }
    Err(ApiError::new(
        ApiErrorKind::Config,
        format!(
            "AZURE_TENANT_ID={:?} is not a tenant id or domain",
            crate::anthropic::truncate(tenant, 80)
        ),
    ))
}

/// An https URL, or http to a loopback host (a test's fake endpoint); `var` names where it
/// came from.
pub fn check_url(url: &str, var: &str) -> Result<(), ApiError> {
    let ok = super::endpoint_ok(url, false);
    if ok {
        return Ok(());
    }
    Err(ApiError::new(
        ApiErrorKind::Config,
        format!(
            "{var}={:?} is not an https:// URL (plain http is accepted for loopback only: credentials must not cross a network in clear)",
            crate::anthropic::truncate(url, 120)
        ),
    ))
}

/// An instance-metadata endpoint: http(s) to a loopback or link-local address, or https
/// (no secret is sent to it, but the token it hands out is trusted).
pub fn check_metadata_url(url: &str) -> Result<(), ApiError> {
    let ok = super::endpoint_ok(url, true);
    if ok {
        return Ok(());
    }
    Err(ApiError::new(
        ApiErrorKind::Config,
        format!(
            "{:?} is not a metadata endpoint (http to a loopback or link-local address, or https)",
            crate::anthropic::truncate(url, 120)
        ),
    ))
}

/// Whether this machine says it is an Azure virtual machine (its DMI chassis asset tag), so
/// that the instance metadata service is worth asking. Linux only; false elsewhere.
pub fn on_azure() -> bool {
    use std::io::Read as _;
    let mut tag = String::new();
    std::fs::File::open("/sys/class/dmi/id/chassis_asset_tag")
        .and_then(|f| f.take(256).read_to_string(&mut tag))
        .is_ok_and(|_| tag.trim() == AZURE_ASSET_TAG)
}

/// The cached token and when to replace it.
struct Cached {
    token: String,
    refresh_at: Instant,
}

/// Which source answered, and its token.
#[derive(Default)]
struct State {
    /// The index of the source that gave a token; later ones are not tried again.
    chosen: Option<usize>,
    cached: Option<Cached>,
}

/// A chain of Entra ID sources handing out access tokens for Foundry.
pub struct EntraCredential {
    sources: Vec<EntraSource>,
    http: reqwest::Client,
    state: tokio::sync::Mutex<State>,
}

impl std::fmt::Debug for EntraCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.sources.iter().map(EntraSource::name).collect();
        write!(f, "EntraCredential({})", names.join(", "))
    }
}

/// Why a source gave no token.
pub(crate) struct Failure {
    /// Worth trying the next source (nothing answers here) rather than stopping.
    unavailable: bool,
    error: ApiError,
}

impl Failure {
    /// Nothing answers at this source: the chain may try the next.
    pub(crate) fn unavailable(m: String) -> Self {
        Self {
            unavailable: true,
            error: ApiError::new(ApiErrorKind::Config, m),
        }
    }

    /// The source answered and refused: the chain stops with `error`.
    pub(crate) fn failed(error: ApiError) -> Self {
        Self {
            unavailable: false,
            error,
        }
    }
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Self {
            unavailable: false,
            error,
        }
    }
}

impl EntraCredential {
    /// A chain of `sources`, tried in order; an empty chain is a configuration error.
    pub fn new(sources: Vec<EntraSource>) -> Result<Self, ApiError> {
        if sources.is_empty() {
            return Err(ApiError::new(
                ApiErrorKind::Config,
                "no Microsoft Entra ID credential source is configured",
            ));
        }
        let http = reqwest::Client::builder()
            .tls_built_in_native_certs(false)
            .connect_timeout(Duration::from_secs(10))
            // Endpoints come from the environment; a redirect must not carry a secret away.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                ApiError::new(
                    ApiErrorKind::Config,
                    format!("could not start the HTTP client: {e}"),
                )
            })?;
        Ok(Self {
            sources,
            http,
            state: tokio::sync::Mutex::new(State::default()),
        })
    }

    /// The sources of the chain, in order.
    pub fn sources(&self) -> &[EntraSource] {
        &self.sources
    }

    /// A valid access token: the cached one, or a fresh one from the chain.
    pub async fn token(&self) -> Result<String, ApiError> {
        let mut state = self.state.lock().await;
        if let Some(c) = &state.cached {
            if Instant::now() < c.refresh_at {
                return Ok(c.token.clone());
            }
        }
        let order: Vec<usize> = match state.chosen {
            Some(i) => vec![i],
            None => (0..self.sources.len()).collect(),
        };
        let mut tried = Vec::new();
        for i in order {
            match self.fetch(&self.sources[i]).await {
                Ok((token, lifetime)) => {
                    let margin = REFRESH_MARGIN.min(lifetime / 2);
                    state.chosen = Some(i);
                    state.cached = Some(Cached {
                        token: token.clone(),
                        refresh_at: Instant::now() + lifetime.saturating_sub(margin),
                    });
                    return Ok(token);
                }
                Err(f) if f.unavailable && state.chosen.is_none() => {
                    tried.push(format!("{}: {}", self.sources[i].name(), f.error.message));
                }
                Err(f) => return Err(f.error),
            }
        }
        Err(ApiError::new(
            ApiErrorKind::Config,
            format!(
                "no Microsoft Entra ID token for Foundry: {}; set ANTHROPIC_FOUNDRY_API_KEY, or AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET, or run `az login`",
                tried.join("; ")
            ),
        ))
    }

    /// The source that gave the last token, or the chain's names before one did.
    pub async fn describe(&self) -> String {
        let state = self.state.lock().await;
        match state.chosen.and_then(|i| self.sources.get(i)) {
            Some(s) => s.name().to_owned(),
            None => self
                .sources
                .iter()
                .map(EntraSource::name)
                .collect::<Vec<_>>()
                .join(", then "),
        }
    }

    /// Forget `stale` (Foundry refused it) so the next [`EntraCredential::token`] fetches
    /// anew; a token another request already replaced is left alone.
    pub async fn invalidate(&self, stale: &str) {
        let mut state = self.state.lock().await;
        if state.cached.as_ref().is_some_and(|c| c.token == stale) {
            state.cached = None;
        }
    }

    async fn fetch(&self, src: &EntraSource) -> Result<(String, Duration), Failure> {
        match src {
            EntraSource::ClientSecret {
                token_url,
                client_id,
                secret,
            } => {
                let body = form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_secret", secret),
                    ("scope", COGNITIVE_SCOPE),
                ]);
                let req = self.form_post(token_url, body);
                Ok(self.exchange(req, token_url, src, TOKEN_TIMEOUT).await?)
            }
            EntraSource::WorkloadIdentity {
                token_url,
                client_id,
                token_file,
            } => {
                let assertion = read_assertion(token_file)?;
                let body = form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    (
                        "client_assertion_type",
                        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    ),
                    ("client_assertion", &assertion),
                    ("scope", COGNITIVE_SCOPE),
                ]);
                let req = self.form_post(token_url, body);
                Ok(self.exchange(req, token_url, src, TOKEN_TIMEOUT).await?)
            }
            EntraSource::AppService {
                endpoint,
                header,
                client_id,
            } => {
                let mut q = vec![
                    ("api-version", "2019-08-01"),
                    ("resource", COGNITIVE_RESOURCE),
                ];
                if let Some(c) = client_id {
                    q.push(("client_id", c));
                }
                let req = self
                    .http
                    .get(format!("{endpoint}?{}", form(&q)))
                    .header("x-identity-header", header);
                self.managed(req, endpoint, src).await
            }
            EntraSource::Imds { url, client_id } => {
                let mut q = vec![
                    ("api-version", "2018-02-01"),
                    ("resource", COGNITIVE_RESOURCE),
                ];
                if let Some(c) = client_id {
                    q.push(("client_id", c));
                }
                let req = self
                    .http
                    .get(format!("{url}?{}", form(&q)))
                    .header("metadata", "true");
                self.managed(req, url, src).await
            }
            EntraSource::AzureCli {
                program,
                tenant,
                timeout,
            } => cli::token(program, tenant.as_deref(), *timeout).await,
        }
    }

    fn form_post(&self, url: &str, body: String) -> reqwest::RequestBuilder {
        self.http
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
    }

    /// A managed-identity endpoint: one that cannot be reached, or says this machine has no
    /// identity (400), leaves the chain to its next source.
    async fn managed(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
        src: &EntraSource,
    ) -> Result<(String, Duration), Failure> {
        let limit = if matches!(src, EntraSource::Imds { .. }) {
            IMDS_TIMEOUT
        } else {
            TOKEN_TIMEOUT
        };
        match self.exchange(req, url, src, limit).await {
            Err(f) if matches!(f.error.status, None | Some(400)) => Err(Failure {
                unavailable: true,
                error: f.error,
            }),
            other => other,
        }
    }

    /// Send a token request and read its answer; the message names the source.
    async fn exchange(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
        src: &EntraSource,
        limit: Duration,
    ) -> Result<(String, Duration), Failure> {
        // Unreachable is final for a configured endpoint (the transport's kind says whether
        // a retry may help); `managed` lets the chain move on instead.
        let resp = send_bounded(req, limit).await.map_err(|e| Failure {
            unavailable: false,
            error: ApiError::new(e.kind, format!("could not reach {url}: {}", e.message)),
        })?;
        let (status, _, body) = error_parts(resp).await;
        if !(200..300).contains(&status) {
            let transient = status >= 500 || status == 429;
            return Err(Failure {
                unavailable: false,
                error: ApiError {
                    status: Some(status),
                    ..ApiError::new(
                        if transient {
                            ApiErrorKind::Http
                        } else {
                            ApiErrorKind::Config
                        },
                        format!(
                            "Microsoft Entra ID refused the {} at {url} (HTTP {status}: {})",
                            src.name(),
                            entra_error(status, &body)
                        ),
                    )
                },
            });
        }
        if body.len() > MAX_ANSWER {
            return Err(ApiError::new(
                ApiErrorKind::Decode,
                format!("the token answer of {url} is larger than {MAX_ANSWER} bytes"),
            )
            .into());
        }
        Ok(parse_token(&body, "access_token", url)?)
    }
}

/// The federated token, read with a size bound and a regular-file check each time (the
/// platform rotates it).
fn read_assertion(path: &std::path::Path) -> Result<String, ApiError> {
    let bad = |m: String| {
        ApiError::new(
            ApiErrorKind::Config,
            format!("AZURE_FEDERATED_TOKEN_FILE={}: {m}", path.display()),
        )
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() || meta.len() > MAX_ASSERTION_FILE {
        return Err(bad(format!(
            "not a regular file of at most {MAX_ASSERTION_FILE} bytes"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad("does not hold a token".into()));
    }
    Ok(t.to_owned())
}

/// Entra's error (`error_description`, else `error`) or the body's text.
fn entra_error(status: u16, body: &[u8]) -> String {
    let v: Option<Value> = serde_json::from_slice(body).ok();
    let field = |k: &str| {
        v.as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .map(|s| crate::anthropic::truncate(s, 300).to_owned())
    };
    field("error_description")
        .or_else(|| field("error"))
        .or_else(|| field("message"))
        .unwrap_or_else(|| body_text(status, body))
}

/// An integer that Azure may send as a number or as a string of digits.
fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The token under `key` and its lifetime: `expires_in` seconds, else `expires_on` (Unix
/// seconds), else five minutes (keel would rather ask again than send a dead token).
pub(crate) fn parse_token(
    body: &[u8],
    key: &str,
    from: &str,
) -> Result<(String, Duration), ApiError> {
    let bad = |what: &str| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("the token answer of {from} {what}"),
        )
    };
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("is not JSON"))?;
    let tok = v
        .get(key)
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= 16384 && t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| bad(&format!("has no usable {key}")))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = number(v.get("expires_in"))
        .or_else(|| number(v.get("expires_on")).map(|at| at.saturating_sub(now)))
        .unwrap_or(300)
        .min(MAX_TOKEN_LIFETIME);
    Ok((tok.to_owned(), Duration::from_secs(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_answers_take_either_lifetime_and_are_range_checked() {
        let (t, d) = parse_token(
            br#"{"access_token":"a","expires_in":"3599"}"#,
            "access_token",
            "x",
        )
        .unwrap();
        assert_eq!((t.as_str(), d.as_secs()), ("a", 3599));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let body = format!(r#"{{"access_token":"a","expires_on":"{}"}}"#, now + 1000);
        let (_, d) = parse_token(body.as_bytes(), "access_token", "x").unwrap();
        assert!((990..=1000).contains(&d.as_secs()), "{d:?}");
        let (_, d) = parse_token(
            br#"{"access_token":"a","expires_in":99999999}"#,
            "access_token",
            "x",
        )
        .unwrap();
        assert_eq!(d.as_secs(), MAX_TOKEN_LIFETIME);
        for bad in [&b"{}"[..], br#"{"access_token":"a b"}"#, b"<html>"] {
            assert!(parse_token(bad, "access_token", "x").is_err());
        }
    }

    #[test]
    fn debug_output_leaves_secrets_out() {
        let s = EntraSource::ClientSecret {
            token_url: "https://login.microsoftonline.com/t/oauth2/v2.0/token".into(),
            client_id: "app".into(),
            secret: "hunter2-secret".into(),
        };
        let h = EntraSource::AppService {
            endpoint: "http://127.0.0.1:4141/msi/token".into(),
            header: "identity-header-secret".into(),
            client_id: None,
        };
        let text = format!("{s:?} {h:?}");
        assert!(
            !text.contains("hunter2") && !text.contains("header-secret"),
            "{text}"
        );
        assert!(text.contains("app"), "{text}");
    }

    #[test]
    fn authorities_in_clear_are_refused_except_on_loopback() {
        assert_eq!(
            token_url(
                "https://login.microsoftonline.com/",
                "contoso.onmicrosoft.com"
            )
            .unwrap(),
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
        );
        assert!(token_url("http://127.0.0.1:8080", "t").is_ok());
        assert!(token_url("http://localhost:8080", "t").is_ok());
        let e = token_url("http://login.example.com", "t").unwrap_err();
        assert!(e.message.contains("AZURE_AUTHORITY_HOST"), "{}", e.message);
        for bad in ["../evil", "--help", ""] {
            let e = token_url(PUBLIC_AUTHORITY, bad).unwrap_err();
            assert!(e.message.contains("AZURE_TENANT_ID"), "{}", e.message);
        }
    }
}
