//! IAM Identity Center (SSO): the access token `aws sso login` cached under
//! `~/.aws/sso/cache/<sha1 of the session name or start URL>.json`, traded at the SSO portal
//! (`GetRoleCredentials`) for the profile's account and role. An `sso-session`'s token is
//! refreshed with its refresh token (and the cache updated) as the AWS CLI does; keel does
//! not log in: when no token can be had, the error says which login to run.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::super::sigv4::{hex, uri_encode};
use super::fetch::{
    checked, http_client, read_small, send_capped, status_error, Timed, REFRESH_MARGIN,
};
use super::time::{format_rfc3339, parse_rfc3339};
use crate::error::{ApiError, ApiErrorKind};

/// A cache file larger than this is not one.
const MAX_CACHE_FILE: u64 = 64 * 1024;
/// A portal answer larger than this is not one.
const MAX_ANSWER: usize = 64 * 1024;
/// How long the portal may take.
const PORTAL_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest role credentials lifetime believed (the portal's maximum is 12 hours).
const MAX_LIFETIME: Duration = Duration::from_secs(36 * 3600);

/// One SSO profile's role.
#[derive(Debug)]
pub struct Sso {
    /// The profile (for the `aws sso login` hint).
    pub profile: String,
    /// The `sso_session` the profile names, if it uses one (else the legacy form).
    pub session: Option<String>,
    /// `sso_start_url`.
    pub start_url: String,
    /// `sso_account_id`.
    pub account_id: String,
    /// `sso_role_name`.
    pub role_name: String,
    /// `~/.aws/sso/cache`.
    pub cache_dir: PathBuf,
    /// The portal (`https://portal.sso.{sso_region}.amazonaws.com` or `AWS_ENDPOINT_URL_SSO`).
    pub endpoint: String,
    /// The OIDC service that refreshes an sso-session's token
    /// (`https://oidc.{sso_region}.amazonaws.com` or `AWS_ENDPOINT_URL_SSO_OIDC`).
    pub oidc_endpoint: String,
}

/// Whether a token from the cache or an answer is one: printable and bounded.
fn token_ok(t: &str) -> bool {
    !t.is_empty() && t.len() <= 16 * 1024 && t.bytes().all(|b| b.is_ascii_graphic())
}

/// Whether `id` is an AWS account id (12 digits).
pub fn account_id_ok(id: &str) -> bool {
    id.len() == 12 && id.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `name` is a role name IAM allows (1 to 64 of `\w+=,.@-`).
pub fn role_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

impl Sso {
    /// For messages.
    pub fn describe(&self) -> String {
        format!(
            "SSO (profile {:?}, account {}, role {})",
            self.profile, self.account_id, self.role_name
        )
    }

    fn login_hint(&self) -> String {
        match &self.session {
            Some(s) => format!(
                "run `aws sso login --sso-session {s}` (or `--profile {}`)",
                self.profile
            ),
            None => format!("run `aws sso login --profile {}`", self.profile),
        }
    }

    /// The cache file `aws sso login` wrote for this session or start URL.
    pub fn cache_file(&self) -> PathBuf {
        let key = self.session.as_deref().unwrap_or(&self.start_url);
        let sum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, key.as_bytes());
        self.cache_dir.join(format!("{}.json", hex(sum.as_ref())))
    }

    /// The cached access token, if it is still good.
    async fn token(&self) -> Result<String, ApiError> {
        let path = self.cache_file();
        let expired =
            |m: String| ApiError::new(ApiErrorKind::Config, format!("{m}: {}", self.login_hint()));
        if !path.exists() {
            return Err(expired(format!(
                "no SSO token is cached for the AWS profile {:?} ({} is missing)",
                self.profile,
                path.display()
            )));
        }
        let text = read_small(&path, MAX_CACHE_FILE, "the SSO token cache")?;
        let mut v: Value = serde_json::from_str(&text).map_err(|_| {
            expired(format!(
                "the SSO token cache {} is not JSON",
                path.display()
            ))
        })?;
        let token = v
            .get("accessToken")
            .and_then(Value::as_str)
            .filter(|t| token_ok(t))
            .map(str::to_owned)
            .ok_or_else(|| {
                expired(format!(
                    "the SSO token cache {} has no usable accessToken",
                    path.display()
                ))
            })?;
        let until = v
            .get("expiresAt")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339)
            .ok_or_else(|| {
                expired(format!(
                    "the SSO token cache {} has no valid expiresAt",
                    path.display()
                ))
            })?;
        let now = SystemTime::now();
        if now + REFRESH_MARGIN < until {
            return Ok(token);
        }
        // An sso-session's token can be refreshed as the AWS CLI does; a failure falls back
        // to the current token while it lasts.
        let refreshed = match &self.session {
            Some(_) => self.refresh(&mut v).await,
            None => Ok(None),
        };
        match refreshed {
            Ok(Some(t)) => {
                self.write_cache(&path, &v);
                Ok(t)
            }
            _ if now < until => Ok(token),
            Ok(None) => Err(expired(format!(
                "the SSO token for the AWS profile {:?} expired at {}",
                self.profile,
                format_rfc3339(until)
            ))),
            Err(e) => Err(expired(format!(
                "the SSO token for the AWS profile {:?} expired at {} and could not be refreshed ({})",
                self.profile,
                format_rfc3339(until),
                e.message
            ))),
        }
    }

    /// A new access token from the OIDC service for the cache entry `v` (updated in place),
    /// if it holds a refresh token and a client registration that has not expired.
    async fn refresh(&self, v: &mut Value) -> Result<Option<String>, ApiError> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|t| token_ok(t));
        let (Some(refresh), Some(id), Some(secret)) =
            (s("refreshToken"), s("clientId"), s("clientSecret"))
        else {
            return Ok(None);
        };
        let registration_over = v
            .get("registrationExpiresAt")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339)
            .is_some_and(|t| t <= SystemTime::now());
        if registration_over {
            return Ok(None);
        }
        let body = serde_json::json!({
            "grantType": "refresh_token", "clientId": id, "clientSecret": secret, "refreshToken": refresh,
        });
        let origin = format!("the SSO OIDC service at {}", self.oidc_endpoint);
        let req = http_client(Duration::from_secs(5))?
            .post(format!(
                "{}/token",
                self.oidc_endpoint.trim_end_matches('/')
            ))
            .header("content-type", "application/json")
            .body(body.to_string());
        let (status, answer) = send_capped(req, PORTAL_TIMEOUT, MAX_ANSWER, &origin).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(
                status,
                &origin,
                &String::from_utf8_lossy(&answer),
                "",
            ));
        }
        let a: Value = serde_json::from_slice(&answer).map_err(|_| {
            ApiError::new(
                ApiErrorKind::Decode,
                format!("{origin} answered without JSON"),
            )
        })?;
        let token = a
            .get("accessToken")
            .and_then(Value::as_str)
            .filter(|t| token_ok(t));
        let secs = a
            .get("expiresIn")
            .and_then(Value::as_u64)
            .filter(|s| (1..=MAX_LIFETIME.as_secs()).contains(s));
        let (Some(token), Some(secs)) = (token, secs) else {
            return Err(ApiError::new(
                ApiErrorKind::Decode,
                format!("{origin} answered without a usable accessToken and expiresIn"),
            ));
        };
        let token = token.to_owned();
        v["accessToken"] = Value::from(token.clone());
        v["expiresAt"] = Value::from(format_rfc3339(
            SystemTime::now() + Duration::from_secs(secs),
        ));
        if let Some(r) = a
            .get("refreshToken")
            .and_then(Value::as_str)
            .filter(|t| token_ok(t))
        {
            v["refreshToken"] = Value::from(r);
        }
        Ok(Some(token))
    }

    /// Save a refreshed cache entry (owner-only, replaced in one rename) so the AWS tools and
    /// the next run use it; a failure to save costs only a refresh later.
    fn write_cache(&self, path: &std::path::Path, v: &Value) {
        let tmp = path.with_extension("json.keel-tmp");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let ok = opts
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, v.to_string().as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if ok.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Role credentials from the portal.
    pub async fn fetch(&self) -> Result<Timed, ApiError> {
        let token = self.token().await?;
        let url = format!(
            "{}/federation/credentials?account_id={}&role_name={}",
            self.endpoint.trim_end_matches('/'),
            uri_encode(&self.account_id, false),
            uri_encode(&self.role_name, false)
        );
        let origin = format!("the SSO portal at {}", self.endpoint);
        let req = http_client(Duration::from_secs(5))?
            .get(&url)
            .header("x-amz-sso_bearer_token", token)
            .header("accept", "application/json");
        let (status, body) = send_capped(req, PORTAL_TIMEOUT, MAX_ANSWER, &origin).await?;
        if !(200..300).contains(&status) {
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let msg = v
                .get("message")
                .or_else(|| v.get("Message"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let fix = if status == 401 || status == 403 {
                format!(
                    " (the cached SSO token was refused or the role is not yours: {})",
                    self.login_hint()
                )
            } else {
                String::new()
            };
            return Err(status_error(status, &origin, msg, &fix));
        }
        parse_role_credentials(&body, &origin)
    }
}

/// The `roleCredentials` of a `GetRoleCredentials` answer (expiration in milliseconds).
fn parse_role_credentials(body: &[u8], origin: &str) -> Result<Timed, ApiError> {
    let bad = |what: &str| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("{origin} answered without {what}"),
        )
    };
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("JSON"))?;
    let rc = v
        .get("roleCredentials")
        .ok_or_else(|| bad("roleCredentials"))?;
    let s = |k: &str| rc.get(k).and_then(Value::as_str);
    let creds = checked(
        s("accessKeyId"),
        s("secretAccessKey"),
        s("sessionToken"),
        origin,
    )?;
    let ms = rc
        .get("expiration")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("a valid expiration"))?;
    let expires = UNIX_EPOCH
        .checked_add(Duration::from_millis(ms))
        .filter(|t| *t <= SystemTime::now() + MAX_LIFETIME)
        .ok_or_else(|| bad("a plausible expiration"))?;
    Ok(Timed {
        creds,
        expires: Some(expires),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_file_is_named_by_the_sha1_of_the_session_or_start_url() {
        let mut s = Sso {
            profile: "dev".into(),
            session: Some("my-sso".into()),
            start_url: "https://d-123.awsapps.com/start".into(),
            account_id: "123456789012".into(),
            role_name: "Dev".into(),
            cache_dir: PathBuf::from("/c"),
            endpoint: String::new(),
            oidc_endpoint: String::new(),
        };
        // sha1("my-sso")
        assert_eq!(
            s.cache_file(),
            PathBuf::from("/c/0ad374308c5a4e22f723adf10145eafad7c4031c.json")
        );
        s.session = None;
        assert_eq!(
            s.cache_file().file_name().unwrap().len(),
            40 + ".json".len()
        );
        assert!(account_id_ok("123456789012") && !account_id_ok("12345"));
        assert!(role_name_ok("AdministratorAccess") && !role_name_ok("a/b"));
    }

    #[test]
    fn role_credentials_are_checked() {
        let far = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 3_600_000;
        let ok = format!(
            r#"{{"roleCredentials":{{"accessKeyId":"ASIA1","secretAccessKey":"s","sessionToken":"t","expiration":{far}}}}}"#
        );
        assert!(parse_role_credentials(ok.as_bytes(), "p").is_ok());
        let e = parse_role_credentials(br#"{"roleCredentials":{"accessKeyId":"ASIA1","secretAccessKey":"s","expiration":99999999999999}}"#, "p").unwrap_err();
        assert!(e.message.contains("plausible expiration"), "{e}");
        let e = parse_role_credentials(b"[]", "p").unwrap_err();
        assert!(e.message.contains("roleCredentials"), "{e}");
    }
}
