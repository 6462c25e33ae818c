//! A profile that assumes a role (`role_arn`) with the credentials of another profile
//! (`source_profile`) or of the machine (`credential_source`): STS `AssumeRole`, signed with
//! SigV4 by the source's credentials, fetched again at every refresh.

use std::time::{Duration, SystemTime};

use super::Source;
use crate::cloud::aws::fetch::{http_client, send_capped, status_error, Timed};
use crate::cloud::aws::web_identity::{parse_answer, xml_field};
use crate::cloud::sigv4::{self, uri_encode};
use crate::error::ApiError;

/// An STS answer larger than this is not one.
const MAX_ANSWER: usize = 64 * 1024;
/// How long STS may take.
const STS_TIMEOUT: Duration = Duration::from_secs(20);

/// `AssumeRole` for one profile.
#[derive(Debug)]
pub struct AssumeRole {
    /// The profile (for messages).
    pub profile: String,
    /// The role to assume.
    pub role_arn: String,
    /// `role_session_name`, or one keel makes up.
    pub session_name: String,
    /// `external_id`, when the role's trust policy asks for one.
    pub external_id: Option<String>,
    /// `duration_seconds` (900 to 43200), else STS's default of an hour.
    pub duration: Option<u32>,
    /// Where the signing credentials come from.
    pub source: Box<Source>,
    /// The STS endpoint.
    pub endpoint: String,
    /// The region STS is signed for.
    pub region: String,
}

/// Whether an external id is one STS takes: 2 to 1224 of `\w+=,.@:/-`.
pub fn external_id_ok(id: &str) -> bool {
    (2..=1224).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@:/-".contains(&b))
}

impl AssumeRole {
    /// For messages.
    pub fn describe(&self) -> String {
        format!(
            "the AWS profile {:?} (role {} assumed with {})",
            self.profile,
            self.role_arn,
            self.source.describe()
        )
    }

    /// The source's credentials, then `AssumeRole` signed with them.
    pub async fn fetch(&self) -> Result<Timed, ApiError> {
        let signing = Box::pin(self.source.fetch()).await?.creds;
        let mut form = vec![
            ("Action", "AssumeRole".to_owned()),
            ("Version", "2011-06-15".to_owned()),
            ("RoleArn", self.role_arn.clone()),
            ("RoleSessionName", self.session_name.clone()),
        ];
        if let Some(x) = &self.external_id {
            form.push(("ExternalId", x.clone()));
        }
        if let Some(d) = self.duration {
            form.push(("DurationSeconds", d.to_string()));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", uri_encode(v, false)))
            .collect::<Vec<_>>()
            .join("&");
        let url = reqwest::Url::parse(&self.endpoint).map_err(|e| {
            crate::cloud::aws::profile::config_error(format!(
                "the STS endpoint {}: {e}",
                self.endpoint
            ))
        })?;
        let host = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_owned(),
        };
        let date = sigv4::amz_date(SystemTime::now());
        let content_type = "application/x-www-form-urlencoded";
        let mut headers = vec![
            ("content-type", content_type),
            ("host", host.as_str()),
            ("x-amz-date", date.as_str()),
        ];
        if let Some(t) = &signing.session_token {
            headers.push(("x-amz-security-token", t.as_str()));
        }
        let sig = sigv4::sign(
            &sigv4::Request {
                method: "POST",
                path: url.path(),
                query: url.query().unwrap_or(""),
                headers: &headers,
                payload: body.as_bytes(),
            },
            &signing,
            &date,
            &self.region,
            "sts",
        );
        let mut req = http_client(Duration::from_secs(5))?
            .post(url)
            .header("content-type", content_type)
            .header("x-amz-date", &date)
            .header("authorization", &sig.authorization)
            .body(body);
        if let Some(t) = &signing.session_token {
            req = req.header("x-amz-security-token", t);
        }
        let origin = format!("STS at {}", self.endpoint);
        let (status, answer) = send_capped(req, STS_TIMEOUT, MAX_ANSWER, &origin).await?;
        let text = String::from_utf8_lossy(&answer);
        if !(200..300).contains(&status) {
            let code = xml_field(&text, "Code").unwrap_or_default();
            let msg = xml_field(&text, "Message").unwrap_or_default();
            return Err(status_error(
                status,
                &origin,
                &format!("{code} {msg}"),
                &format!(
                    " (assuming {} for the AWS profile {:?}: check role_arn, the role's trust policy and the source credentials)",
                    self.role_arn, self.profile
                ),
            ));
        }
        parse_answer(&text, &origin)
    }
}
