//! Credentials from the machine keel runs on: the ECS / EKS container credentials endpoint
//! (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` / `_FULL_URI`, with an authorization token), and
//! the EC2 instance metadata service (IMDSv2: a session token first, then the role's keys).

use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::fetch::{checked, http_client, read_small, send_capped, status_error, Timed};
use super::time::parse_rfc3339;
use crate::error::{ApiError, ApiErrorKind};

/// Where ECS serves `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
pub const ECS_ENDPOINT: &str = "http://169.254.170.2";
/// The instance metadata service.
pub const IMDS_ENDPOINT: &str = "http://169.254.169.254";
/// An answer larger than this is not one.
const MAX_ANSWER: usize = 64 * 1024;
/// A container authorization token file larger than this is not one.
const MAX_TOKEN_FILE: u64 = 16 * 1024;
/// Link-local services answer at once or not at all: a laptop must not wait for them.
const CONNECT: Duration = Duration::from_secs(1);
/// How long each metadata request may take.
const REQUEST: Duration = Duration::from_secs(5);
/// How long the IMDSv2 session token lives (the service's maximum).
const IMDS_TOKEN_TTL: &str = "21600";

/// The container credentials endpoint.
#[derive(Debug)]
pub struct Container {
    /// The whole URL to GET.
    pub url: String,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
    pub token: Option<String>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`, read at every fetch (EKS rotates it); wins
    /// over `token`.
    pub token_file: Option<PathBuf>,
}

/// Whether `url` may serve container credentials: https anywhere, plain http only to a
/// loopback address or the ECS / EKS link-local endpoints (a credential request must not be
/// sent in the clear to wherever a variable points).
pub fn full_uri_allowed(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    match url.scheme() {
        "https" => true,
        "http" => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            match host.parse::<IpAddr>() {
                Ok(IpAddr::V4(ip)) => {
                    ip.is_loopback()
                        || [[169, 254, 170, 2], [169, 254, 170, 23]].contains(&ip.octets())
                }
                Ok(IpAddr::V6(ip)) => {
                    ip.is_loopback() || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)
                }
                Err(_) => host.eq_ignore_ascii_case("localhost"),
            }
        }
        _ => false,
    }
}

/// Whether a token may go into a header: printable, bounded.
fn header_safe(t: &str) -> bool {
    !t.is_empty() && t.len() <= 16 * 1024 && t.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
}

/// The credentials of a container or IMDS answer (`AccessKeyId`, `SecretAccessKey`,
/// `Token`, `Expiration`).
fn parse_metadata(body: &[u8], origin: &str) -> Result<Timed, ApiError> {
    let bad = |what: &str| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("{origin} answered without {what}"),
        )
    };
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("JSON"))?;
    if let Some(code) = v.get("Code").and_then(Value::as_str) {
        if code != "Success" {
            let msg = v.get("Message").and_then(Value::as_str).unwrap_or_default();
            return Err(ApiError::new(
                ApiErrorKind::Config,
                format!(
                    "{origin} said {}: {}",
                    crate::anthropic::truncate(code, 100),
                    crate::anthropic::truncate(msg, 300)
                ),
            ));
        }
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let creds = checked(s("AccessKeyId"), s("SecretAccessKey"), s("Token"), origin)?;
    let expires = match s("Expiration") {
        None => None,
        Some(e) => Some(parse_rfc3339(e).ok_or_else(|| bad("a valid Expiration"))?),
    };
    Ok(Timed { creds, expires })
}

impl Container {
    /// For messages.
    pub fn describe(&self) -> String {
        format!("the container credentials endpoint {}", self.url)
    }

    /// The role's credentials from the endpoint.
    pub async fn fetch(&self) -> Result<Timed, ApiError> {
        let token = match (&self.token_file, &self.token) {
            (Some(f), _) => Some(
                read_small(f, MAX_TOKEN_FILE, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")?
                    .trim()
                    .to_owned(),
            ),
            (None, t) => t.clone(),
        };
        let origin = self.describe();
        let mut req = http_client(CONNECT)?
            .get(&self.url)
            .header("accept", "application/json");
        if let Some(t) = token {
            if !header_safe(&t) {
                return Err(ApiError::new(
                    ApiErrorKind::Config,
                    "the container authorization token (AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]) is empty or holds characters a header cannot carry",
                ));
            }
            req = req.header("authorization", t);
        }
        let (status, body) = send_capped(req, REQUEST, MAX_ANSWER, &origin).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(
                status,
                &origin,
                &String::from_utf8_lossy(&body),
                " (check AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI and the authorization token)",
            ));
        }
        parse_metadata(&body, &origin)
    }
}

/// The EC2 instance metadata service, IMDSv2 only.
#[derive(Debug)]
pub struct Imds {
    /// `AWS_EC2_METADATA_SERVICE_ENDPOINT` or [`IMDS_ENDPOINT`].
    pub endpoint: String,
}

/// Whether this machine says it is an EC2 instance (DMI vendor, or a Xen `ec2` uuid), so the
/// metadata service is asked only there, with no network probe anywhere else. Linux only.
pub fn on_ec2() -> bool {
    use std::io::Read as _;
    let read = |p: &str| {
        let mut s = String::new();
        std::fs::File::open(p)
            .and_then(|f| f.take(256).read_to_string(&mut s))
            .map(|_| s)
            .unwrap_or_default()
    };
    [
        "/sys/class/dmi/id/sys_vendor",
        "/sys/class/dmi/id/board_vendor",
        "/sys/class/dmi/id/bios_vendor",
    ]
    .iter()
    .any(|p| read(p).trim().starts_with("Amazon"))
        || read("/sys/hypervisor/uuid")
            .trim()
            .to_ascii_lowercase()
            .starts_with("ec2")
}

impl Imds {
    /// For messages.
    pub fn describe(&self) -> String {
        format!("the EC2 instance metadata service at {}", self.endpoint)
    }

    /// A session token, the role's name, then its credentials.
    pub async fn fetch(&self) -> Result<Timed, ApiError> {
        let base = self.endpoint.trim_end_matches('/');
        let origin = self.describe();
        let http = http_client(CONNECT)?;
        let req = http
            .put(format!("{base}/latest/api/token"))
            .header("x-aws-ec2-metadata-token-ttl-seconds", IMDS_TOKEN_TTL);
        let (status, token) = send_capped(req, REQUEST, 1024, &origin).await?;
        let fix = " (the instance may have no IAM role, or IMDSv2 may be off; set AWS_EC2_METADATA_DISABLED=true to skip it)";
        if status != 200 {
            return Err(status_error(
                status,
                &origin,
                "for an IMDSv2 session token",
                fix,
            ));
        }
        let token = String::from_utf8(token)
            .ok()
            .filter(|t| header_safe(t.trim()))
            .ok_or_else(|| {
                ApiError::new(
                    ApiErrorKind::Decode,
                    format!("{origin} gave a session token that is not one"),
                )
            })?;
        let token = token.trim();
        let path = format!("{base}/latest/meta-data/iam/security-credentials/");
        let req = http.get(&path).header("x-aws-ec2-metadata-token", token);
        let (status, roles) = send_capped(req, REQUEST, 4096, &origin).await?;
        if status != 200 {
            return Err(status_error(
                status,
                &origin,
                "for the instance's role",
                fix,
            ));
        }
        let roles = String::from_utf8_lossy(&roles);
        let role = roles
            .lines()
            .next()
            .map(str::trim)
            .filter(|r| super::sso::role_name_ok(r))
            .ok_or_else(|| {
                ApiError::new(
                    ApiErrorKind::Config,
                    format!("{origin} names no IAM role for this instance{fix}"),
                )
            })?;
        let req = http
            .get(format!("{path}{role}"))
            .header("x-aws-ec2-metadata-token", token);
        let (status, body) = send_capped(req, REQUEST, MAX_ANSWER, &origin).await?;
        if status != 200 {
            return Err(status_error(
                status,
                &origin,
                &format!("for the credentials of role {role}"),
                fix,
            ));
        }
        parse_metadata(&body, &origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_uris_are_allowed_only_to_loopback_and_the_container_hosts_in_the_clear() {
        let ok = |u: &str| full_uri_allowed(&reqwest::Url::parse(u).unwrap());
        assert!(ok("http://127.0.0.1:8080/creds"));
        assert!(ok("http://localhost/creds"));
        assert!(ok("http://[::1]:9/creds"));
        assert!(ok("http://169.254.170.23/v1/credentials"));
        assert!(ok("http://169.254.170.2/creds"));
        assert!(ok("http://[fd00:ec2::23]/v1/credentials"));
        assert!(ok("https://creds.example.com/x"));
        assert!(!ok("http://creds.example.com/x"));
        assert!(!ok("http://10.0.0.1/x"));
        assert!(!ok("http://169.254.169.254/x"));
        assert!(!ok("http://[fd00:ec2::24]/x"));
        assert!(!ok("file:///etc/passwd"));
    }

    #[test]
    fn metadata_answers_are_checked() {
        let e = parse_metadata(
            br#"{"Code":"AssumeRoleUnauthorizedAccess","Message":"no"}"#,
            "IMDS",
        )
        .unwrap_err();
        assert!(e.message.contains("AssumeRoleUnauthorizedAccess"), "{e}");
        let e = parse_metadata(
            br#"{"AccessKeyId":"ASIA1","SecretAccessKey":"s","Expiration":"tomorrow"}"#,
            "IMDS",
        )
        .unwrap_err();
        assert!(e.message.contains("Expiration"), "{e}");
        let t = parse_metadata(br#"{"AccessKeyId":"ASIA1","SecretAccessKey":"s","Token":"t","Expiration":"2099-01-01T00:00:00Z"}"#, "IMDS").unwrap();
        assert_eq!(t.creds.session_token.as_deref(), Some("t"));
    }
}
