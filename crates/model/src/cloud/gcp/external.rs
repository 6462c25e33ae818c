//! Google credentials that stand on others: workload identity federation (`external_account`:
//! a subject token from a file or a URL, exchanged at the security token service named in the
//! file, then optionally for a service account's token) and impersonated service accounts
//! (`impersonated_service_account`: a source credential's token traded at the IAM Credentials
//! API's `generateAccessToken`). Every endpoint comes from the file, so each is checked: https,
//! or plain http to this machine only.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{
    config_error, form, parse_token, TokenSource, MAX_CREDENTIALS_FILE, MAX_TOKEN_BODY,
    MAX_TOKEN_LIFETIME, SCOPE, TOKEN_TIMEOUT,
};
use crate::anthropic::{body_text, error_parts, send_bounded};
use crate::error::{ApiError, ApiErrorKind};

/// The most headers a URL-sourced subject token's request may carry.
const MAX_SOURCE_HEADERS: usize = 32;
/// The most delegates an impersonation chain may name.
const MAX_DELEGATES: usize = 16;

/// How the subject token is written where it comes from.
#[derive(Debug)]
enum Format {
    /// The whole body, trimmed.
    Text,
    /// The string under this field of a JSON object.
    Json(String),
}

/// Where the subject token comes from. (Its `Debug` names headers without their values,
/// which may be secrets.)
enum Subject {
    /// A file the platform keeps fresh (a Kubernetes projected token, say).
    File(PathBuf, Format),
    /// A local endpoint that hands it out (a metadata service).
    Url {
        url: String,
        headers: Vec<(String, String)>,
        format: Format,
    },
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::File(p, format) => write!(f, "File({}, {format:?})", p.display()),
            Subject::Url {
                url,
                headers,
                format,
            } => {
                let names: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
                write!(f, "Url({url}, headers {names:?}, {format:?})")
            }
        }
    }
}

/// An `external_account` credential.
#[derive(Debug)]
pub struct External {
    /// The security token service's endpoint (`token_url`).
    pub(crate) sts_url: String,
    audience: String,
    subject_token_type: String,
    subject: Subject,
    /// `service_account_impersonation_url`, when the federated token is traded once more.
    impersonation_url: Option<String>,
    /// `workforce_pool_user_project`: the project billed for a workforce pool's exchange.
    user_project: Option<String>,
    origin: PathBuf,
}

/// An `impersonated_service_account` credential.
#[derive(Debug)]
pub struct Impersonated {
    /// The `generateAccessToken` URL of the target account.
    pub(crate) url: String,
    delegates: Vec<String>,
    source: TokenSource,
    origin: PathBuf,
}

/// Where an endpoint named in a credentials file may point: https, or http to loopback —
/// and, for a subject token's source, to a link-local metadata address (never off the
/// machine's link).
fn check_endpoint(url: &str, key: &str, path: &Path, link_local: bool) -> Result<(), ApiError> {
    let ok = crate::cloud::endpoint_ok(url, link_local);
    if ok {
        return Ok(());
    }
    Err(config_error(
        path,
        format!(
            "`{key}` {:?} is not an https:// URL (plain http only to this machine: a credential must not cross a network in clear)",
            crate::anthropic::truncate(url, 120)
        ),
    ))
}

fn text_field(v: &Value, k: &str, path: &Path) -> Result<String, ApiError> {
    v.get(k)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty() && s.len() <= 2048)
        .map(str::to_owned)
        .ok_or_else(|| config_error(path, format!("`{k}` is missing")))
}

impl External {
    /// An `external_account` file's contents.
    pub(crate) fn from_value(v: &Value, path: &Path) -> Result<Self, ApiError> {
        let sts_url = text_field(v, "token_url", path)?;
        check_endpoint(&sts_url, "token_url", path, false)?;
        let impersonation_url = match v.get("service_account_impersonation_url") {
            None | Some(Value::Null) => None,
            Some(_) => {
                let u = text_field(v, "service_account_impersonation_url", path)?;
                check_endpoint(&u, "service_account_impersonation_url", path, false)?;
                Some(u)
            }
        };
        let src = v
            .get("credential_source")
            .filter(|s| s.is_object())
            .ok_or_else(|| config_error(path, "`credential_source` is missing"))?;
        let format = match src.get("format") {
            None | Some(Value::Null) => Format::Text,
            Some(f) => match f.get("type").and_then(Value::as_str) {
                None | Some("text") => Format::Text,
                Some("json") => Format::Json(text_field(f, "subject_token_field_name", path)?),
                Some(other) => {
                    return Err(config_error(
                        path,
                        format!("credential_source.format.type {other:?} is not text or json"),
                    ))
                }
            },
        };
        let subject = if let Some(file) = src.get("file").and_then(Value::as_str) {
            Subject::File(PathBuf::from(file), format)
        } else if let Some(url) = src.get("url").and_then(Value::as_str) {
            check_endpoint(url, "credential_source.url", path, true)?;
            Subject::Url {
                url: url.to_owned(),
                headers: source_headers(src, path)?,
                format,
            }
        } else {
            let kind = if src.get("environment_id").is_some() {
                "AWS-sourced (environment_id)"
            } else if src.get("executable").is_some() {
                "executable-sourced"
            } else {
                "this"
            };
            return Err(config_error(
                path,
                format!("{kind} subject tokens are not read yet: keel reads credential_source.file and credential_source.url"),
            ));
        };
        Ok(Self {
            sts_url,
            audience: text_field(v, "audience", path)?,
            subject_token_type: text_field(v, "subject_token_type", path)?,
            subject,
            impersonation_url,
            user_project: v
                .get("workforce_pool_user_project")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty() && p.len() <= 128)
                .map(str::to_owned),
            origin: path.to_path_buf(),
        })
    }

    /// A federated (or impersonated) access token and its lifetime.
    pub(crate) async fn fetch(
        &self,
        http: &reqwest::Client,
    ) -> Result<(String, Duration), ApiError> {
        let subject = self.subject_token(http).await?;
        // A workforce pool names the project to bill, unless a service account is impersonated.
        let options = match (&self.user_project, &self.impersonation_url) {
            (Some(p), None) => json!({ "userProject": p }).to_string(),
            _ => String::new(),
        };
        let mut pairs = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("audience", self.audience.as_str()),
            ("scope", SCOPE),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("subject_token", subject.as_str()),
            ("subject_token_type", self.subject_token_type.as_str()),
        ];
        if !options.is_empty() {
            pairs.push(("options", options.as_str()));
        }
        let body = form(&pairs);
        let req = http
            .post(&self.sts_url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        let answer = ask(req, &self.sts_url, &self.origin).await?;
        let (token, lifetime) = parse_token(&answer)?;
        match &self.impersonation_url {
            None => Ok((token, lifetime)),
            Some(url) => generate_access_token(http, url, &token, &[], &self.origin).await,
        }
    }

    async fn subject_token(&self, http: &reqwest::Client) -> Result<String, ApiError> {
        let (raw, format, from) = match &self.subject {
            Subject::File(p, format) => (
                read_bounded(p, &self.origin)?,
                format,
                p.display().to_string(),
            ),
            Subject::Url {
                url,
                headers,
                format,
            } => {
                let mut req = http.get(url);
                for (k, v) in headers {
                    req = req.header(k.as_str(), v.as_str());
                }
                (ask(req, url, &self.origin).await?, format, url.clone())
            }
        };
        let bad = |what: &str| {
            config_error(
                &self.origin,
                format!("the subject token from {from} {what}"),
            )
        };
        let token = match format {
            Format::Text => String::from_utf8_lossy(&raw).trim().to_owned(),
            Format::Json(field) => serde_json::from_slice::<Value>(&raw)
                .ok()
                .and_then(|v| v.get(field).and_then(Value::as_str).map(str::to_owned))
                .ok_or_else(|| bad(&format!("has no string field {field:?}")))?,
        };
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("is empty or not a token"));
        }
        Ok(token)
    }
}

/// `credential_source.headers`: string values, a bounded number.
fn source_headers(src: &Value, path: &Path) -> Result<Vec<(String, String)>, ApiError> {
    let Some(h) = src.get("headers") else {
        return Ok(Vec::new());
    };
    let obj = h
        .as_object()
        .filter(|o| o.len() <= MAX_SOURCE_HEADERS)
        .ok_or_else(|| {
            config_error(
                path,
                format!("credential_source.headers is not an object of at most {MAX_SOURCE_HEADERS} headers"),
            )
        })?;
    obj.iter()
        .map(|(k, v)| {
            let v = v.as_str().filter(|v| v.len() <= 4096).ok_or_else(|| {
                config_error(
                    path,
                    format!("credential_source.headers.{k} is not a string"),
                )
            })?;
            let valid = reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_ok()
                && reqwest::header::HeaderValue::from_str(v).is_ok();
            if !valid {
                return Err(config_error(
                    path,
                    format!("credential_source.headers.{k} cannot be sent as an HTTP header"),
                ));
            }
            Ok((k.clone(), v.to_owned()))
        })
        .collect()
}

/// A file's bytes, if it is a regular file of bounded size.
fn read_bounded(p: &Path, origin: &Path) -> Result<Vec<u8>, ApiError> {
    let meta = std::fs::metadata(p).map_err(|e| {
        config_error(
            origin,
            format!("credential_source.file {}: {e}", p.display()),
        )
    })?;
    if !meta.is_file() || meta.len() > MAX_CREDENTIALS_FILE {
        return Err(config_error(
            origin,
            format!(
                "credential_source.file {} is not a regular file of at most {MAX_CREDENTIALS_FILE} bytes",
                p.display()
            ),
        ));
    }
    std::fs::read(p).map_err(|e| {
        config_error(
            origin,
            format!("credential_source.file {}: {e}", p.display()),
        )
    })
}

/// Send `req` and return its (bounded) successful body; a refusal is permanent, a server's
/// trouble transient, and both name the endpoint and the file.
async fn ask(req: reqwest::RequestBuilder, url: &str, origin: &Path) -> Result<Vec<u8>, ApiError> {
    let resp = send_bounded(req, TOKEN_TIMEOUT).await.map_err(|e| {
        ApiError::new(
            e.kind,
            format!("could not reach {url} (named in {}): {e}", origin.display()),
        )
    })?;
    let (status, _, body) = error_parts(resp).await;
    if !(200..300).contains(&status) {
        let transient = status >= 500 || status == 429;
        return Err(ApiError {
            status: transient.then_some(status),
            ..ApiError::new(
                if transient {
                    ApiErrorKind::Http
                } else {
                    ApiErrorKind::Config
                },
                format!(
                    "{url} refused the credentials in {} (HTTP {status}: {})",
                    origin.display(),
                    body_text(status, &body)
                ),
            )
        });
    }
    if body.len() > MAX_TOKEN_BODY {
        return Err(ApiError::new(
            ApiErrorKind::Decode,
            format!("the answer of {url} is larger than {MAX_TOKEN_BODY} bytes"),
        ));
    }
    Ok(body)
}

/// Trade `bearer` for a token of the service account at `url` (the IAM Credentials API's
/// `generateAccessToken`), asking for an hour.
async fn generate_access_token(
    http: &reqwest::Client,
    url: &str,
    bearer: &str,
    delegates: &[String],
    origin: &Path,
) -> Result<(String, Duration), ApiError> {
    let body = json!({"delegates": delegates, "scope": [SCOPE], "lifetime": "3600s"});
    let req = http
        .post(url)
        .header("content-type", "application/json")
        .bearer_auth(bearer)
        .body(body.to_string());
    let answer = ask(req, url, origin).await?;
    let bad = || {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("the answer of {url} has no usable accessToken"),
        )
    };
    let v: Value = serde_json::from_slice(&answer).map_err(|_| bad())?;
    let token = v
        .get("accessToken")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= 8192 && t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(bad)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = v
        .get("expireTime")
        .and_then(Value::as_str)
        .and_then(rfc3339_seconds)
        .map_or(3600, |at| at.saturating_sub(now))
        .min(MAX_TOKEN_LIFETIME);
    Ok((token.to_owned(), Duration::from_secs(secs)))
}

impl Impersonated {
    /// An `impersonated_service_account` file's contents; its source is an `authorized_user`
    /// or `service_account` credential.
    pub(crate) fn from_value(
        v: &Value,
        path: &Path,
        token_url: Option<String>,
    ) -> Result<Self, ApiError> {
        let url = text_field(v, "service_account_impersonation_url", path)?;
        check_endpoint(&url, "service_account_impersonation_url", path, false)?;
        let delegates = match v.get("delegates") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.len() <= MAX_DELEGATES => a
                .iter()
                .map(|d| {
                    d.as_str()
                        .filter(|s| !s.is_empty() && s.len() <= 256)
                        .map(str::to_owned)
                        .ok_or_else(|| config_error(path, "`delegates` holds a non-name"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(config_error(
                    path,
                    format!("`delegates` is not a list of at most {MAX_DELEGATES} names"),
                ))
            }
        };
        let src = v
            .get("source_credentials")
            .filter(|s| s.is_object())
            .ok_or_else(|| config_error(path, "`source_credentials` is missing"))?;
        let source = TokenSource::from_value(src, path, token_url, false)?;
        Ok(Self {
            url,
            delegates,
            source,
            origin: path.to_path_buf(),
        })
    }

    /// The service account's token, through a fresh token of the source.
    pub(crate) async fn fetch(
        &self,
        http: &reqwest::Client,
    ) -> Result<(String, Duration), ApiError> {
        let (source_token, _) = Box::pin(self.source.fetch()).await?;
        generate_access_token(
            http,
            &self.url,
            &source_token,
            &self.delegates,
            &self.origin,
        )
        .await
    }
}

/// Seconds since the Unix epoch of an RFC 3339 UTC time (`2025-01-02T03:04:05Z`, with or
/// without a fraction) — the form Google's APIs write; `None` for anything else.
fn rfc3339_seconds(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let time = time.split('.').next()?;
    let num = |p: &str| p.parse::<u64>().ok();
    let d: Vec<u64> = date.split('-').map(num).collect::<Option<_>>()?;
    let t: Vec<u64> = time.split(':').map(num).collect::<Option<_>>()?;
    let ([y, m, day], [hh, mm, ss]) = (d.as_slice(), t.as_slice()) else {
        return None;
    };
    if !(1970..=9999).contains(y) || !(1..=12).contains(m) || !(1..=31).contains(day) {
        return None;
    }
    if *hh > 23 || *mm > 59 || *ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), March-based years.
    let (y, m) = if *m <= 2 { (y - 1, m + 9) } else { (*y, m - 3) };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_are_read() {
        assert_eq!(rfc3339_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_seconds("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(
            rfc3339_seconds("2025-01-02T03:04:05.123456Z"),
            Some(1_735_787_045)
        );
        for bad in ["2025-01-02T03:04:05+01:00", "2025-13-01T00:00:00Z", "x", ""] {
            assert_eq!(rfc3339_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn endpoints_from_a_file_must_not_cross_a_network_in_clear() {
        let p = Path::new("adc.json");
        assert!(check_endpoint("https://sts.googleapis.com/v1/token", "k", p, false).is_ok());
        assert!(check_endpoint("http://127.0.0.1:9/token", "k", p, false).is_ok());
        assert!(check_endpoint("http://169.254.169.254/x", "k", p, false).is_err());
        assert!(check_endpoint("http://169.254.169.254/x", "k", p, true).is_ok());
        let e = check_endpoint(
            "http://evil.example.com/t",
            "credential_source.url",
            p,
            true,
        )
        .unwrap_err();
        assert!(e.message.contains("credential_source.url"), "{}", e.message);
        assert!(check_endpoint("file:///etc/passwd", "k", p, true).is_err());
    }
}
