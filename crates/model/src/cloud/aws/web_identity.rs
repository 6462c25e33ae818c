//! Web identity federation: the OIDC token in `AWS_WEB_IDENTITY_TOKEN_FILE` (EKS service
//! accounts, CI runners) traded at STS (`AssumeRoleWithWebIdentity`, no signature) for
//! temporary credentials of `AWS_ROLE_ARN`. STS answers XML; the few fields keel needs are
//! picked out by a small bounded extractor.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::super::sigv4::uri_encode;
use super::fetch::{checked, http_client, read_small, send_capped, status_error, Timed};
use super::time::parse_rfc3339;
use crate::error::{ApiError, ApiErrorKind};

/// A token file larger than this is not one (Kubernetes' are a few KiB).
const MAX_TOKEN_FILE: u64 = 64 * 1024;
/// An STS answer larger than this is not one.
const MAX_ANSWER: usize = 64 * 1024;
/// How long STS may take.
const STS_TIMEOUT: Duration = Duration::from_secs(20);

/// `AssumeRoleWithWebIdentity` for one role.
#[derive(Debug)]
pub struct WebIdentity {
    /// The token file, read again at every refresh (Kubernetes rotates it).
    pub token_file: PathBuf,
    /// The role to assume.
    pub role_arn: String,
    /// `AWS_ROLE_SESSION_NAME`, or one keel makes up.
    pub session_name: String,
    /// The STS endpoint (`https://sts.{region}.amazonaws.com`, or `AWS_ENDPOINT_URL_STS`).
    pub endpoint: String,
}

/// Whether `arn` looks like an IAM role ARN (checked before it goes into a request).
pub fn role_arn_ok(arn: &str) -> bool {
    arn.starts_with("arn:")
        && arn.len() <= 2048
        && arn.split(':').count() >= 6
        && arn.bytes().all(|b| b.is_ascii_graphic())
}

/// Whether `name` is a session name STS takes: 2 to 64 of `\w+=,.@-`.
pub fn session_name_ok(name: &str) -> bool {
    (2..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

/// A session name for keel's sessions: `keel-<seconds since 1970>`.
pub fn default_session_name() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("keel-{secs}")
}

impl WebIdentity {
    /// For messages.
    pub fn describe(&self) -> String {
        format!(
            "web identity (role {} with the token in {})",
            self.role_arn,
            self.token_file.display()
        )
    }

    /// Trade the token for credentials.
    pub async fn fetch(&self) -> Result<Timed, ApiError> {
        let token = read_small(
            &self.token_file,
            MAX_TOKEN_FILE,
            "the web identity token file",
        )?;
        let token = token.trim();
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ApiError::new(
                ApiErrorKind::Config,
                format!(
                    "the web identity token file {} does not hold a token",
                    self.token_file.display()
                ),
            ));
        }
        let form = [
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", self.role_arn.as_str()),
            ("RoleSessionName", self.session_name.as_str()),
            ("WebIdentityToken", token),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={}", uri_encode(v, false)))
        .collect::<Vec<_>>()
        .join("&");
        let http = http_client(Duration::from_secs(5))?;
        let origin = format!("STS at {}", self.endpoint);
        let req = http
            .post(&self.endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/xml")
            .body(form);
        let (status, body) = send_capped(req, STS_TIMEOUT, MAX_ANSWER, &origin).await?;
        let text = String::from_utf8_lossy(&body);
        if !(200..300).contains(&status) {
            let code = xml_field(&text, "Code").unwrap_or_default();
            let msg = xml_field(&text, "Message").unwrap_or_default();
            return Err(status_error(
                status,
                &origin,
                &format!("{code} {msg}"),
                &format!(
                    " (assuming {} with the token in {}: check AWS_ROLE_ARN, the role's trust policy, and that the token is current)",
                    self.role_arn,
                    self.token_file.display()
                ),
            ));
        }
        parse_answer(&text, &origin)
    }
}

/// The credentials of an `AssumeRole*` answer.
pub(crate) fn parse_answer(xml: &str, origin: &str) -> Result<Timed, ApiError> {
    let creds_xml = xml_element(xml, "Credentials").ok_or_else(|| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("{origin} answered without Credentials"),
        )
    })?;
    let f = |tag: &str| xml_field(creds_xml, tag);
    let creds = checked(
        f("AccessKeyId").as_deref(),
        f("SecretAccessKey").as_deref(),
        f("SessionToken").as_deref(),
        origin,
    )?;
    let expires = f("Expiration")
        .and_then(|e| parse_rfc3339(&e))
        .ok_or_else(|| {
            ApiError::new(
                ApiErrorKind::Decode,
                format!("{origin} answered without a valid Expiration"),
            )
        })?;
    Ok(Timed {
        creds,
        expires: Some(expires),
    })
}

/// The text of the first `<tag>…</tag>` in `xml` (no attributes on the tag, no nesting of
/// the same tag), with the five predefined entities and numeric references decoded.
pub fn xml_field(xml: &str, tag: &str) -> Option<String> {
    unescape(xml_element(xml, tag)?.trim())
}

/// The raw content of the first `<tag>…</tag>` (for an element holding others).
fn xml_element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&close)?;
    Some(&xml[start..start + len])
}

/// `&amp;` and friends decoded; `None` for an entity that is not one.
fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = rest[i..].find(';').filter(|e| *e <= 10)? + i;
        let ent = &rest[i + 1..end];
        let c = match ent {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let n = match ent.strip_prefix("#x").or_else(|| ent.strip_prefix("#X")) {
                    Some(h) => u32::from_str_radix(h, 16).ok()?,
                    None => ent.strip_prefix('#')?.parse().ok()?,
                };
                char::from_u32(n)?
            }
        };
        out.push(c);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_fields_are_picked_out_and_unescaped() {
        let xml = "<R><Credentials>\n <AccessKeyId>ASIA1</AccessKeyId><SessionToken>a&amp;b&#43;c&#x2F;</SessionToken></Credentials><Code>X</Code></R>";
        assert_eq!(xml_field(xml, "AccessKeyId").as_deref(), Some("ASIA1"));
        assert_eq!(xml_field(xml, "SessionToken").as_deref(), Some("a&b+c/"));
        assert_eq!(xml_field(xml, "Missing"), None);
        assert_eq!(xml_field("<A>unterminated", "A"), None);
        assert_eq!(xml_field("<A>&bogus;</A>", "A"), None);
        assert_eq!(xml_field("<A>&#xFFFFFFFF;</A>", "A"), None);
        assert_eq!(xml_field("<A>&amp</A>", "A"), None);
    }

    #[test]
    fn answers_without_usable_fields_are_refused() {
        let ok = "<Credentials><AccessKeyId>ASIAXYZ</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>";
        let t = parse_answer(ok, "STS").unwrap();
        assert_eq!(t.creds.session_token.as_deref(), Some("t"));
        for (bad, what) in [
            (ok.replace("2099-01-01T00:00:00Z", "soon"), "Expiration"),
            (ok.replace("ASIAXYZ", "AS IA"), "access key id"),
            (
                ok.replace("<SecretAccessKey>s<", "<SecretAccessKey><"),
                "secret",
            ),
            ("<Other/>".to_owned(), "Credentials"),
        ] {
            let e = parse_answer(&bad, "STS").unwrap_err();
            assert!(e.message.contains(what), "{what}: {e}");
        }
        assert!(role_arn_ok("arn:aws:iam::123456789012:role/ci"));
        assert!(!role_arn_ok("role/ci"));
        assert!(session_name_ok("keel-1700000000"));
        assert!(!session_name_ok("has space"));
    }
}
