//! What every source of the AWS credential chain shares: timed credentials, the bounded HTTP
//! client and answer, the checks on what an answer holds, and small bounded file reads. A
//! leaf: the sources and the provider that calls them both use it.

use std::time::{Duration, SystemTime};

use super::super::sigv4::Credentials;
use crate::error::{ApiError, ApiErrorKind};

/// Credentials are refreshed when less than this is left of their life.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// No fetch (process, HTTP, files) may take longer than this, whatever its source does.
pub const FETCH_LIMIT: Duration = Duration::from_secs(60);

/// Credentials and when they stop working (`None`: they do not expire by themselves).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timed {
    /// The credentials.
    pub creds: Credentials,
    /// When they expire.
    pub expires: Option<SystemTime>,
}

/// The credentials in an answer, each field checked: an access key id of letters and
/// digits, a secret and token of printable characters, all of bounded length.
pub(crate) fn checked(
    id: Option<&str>,
    secret: Option<&str>,
    token: Option<&str>,
    origin: &str,
) -> Result<Credentials, ApiError> {
    let bad = |what: &str| {
        ApiError::new(
            ApiErrorKind::Decode,
            format!("{origin} answered without a usable {what}"),
        )
    };
    let printable = |s: &&str, max: usize| {
        !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_graphic())
    };
    let id = id
        .filter(|s| s.len() >= 4 && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_alphanumeric()))
        .ok_or_else(|| bad("access key id"))?;
    let secret = secret
        .filter(|s| printable(s, 256))
        .ok_or_else(|| bad("secret access key"))?;
    let session_token = match token {
        None | Some("") => None,
        Some(t) if printable(&t, 16 * 1024) => Some(t.to_owned()),
        Some(_) => return Err(bad("session token")),
    };
    Ok(Credentials {
        access_key_id: id.to_owned(),
        secret_access_key: secret.to_owned(),
        session_token,
    })
}

/// An HTTP client for a credential endpoint: bundled roots only, `connect` to connect.
pub(crate) fn http_client(connect: Duration) -> Result<reqwest::Client, ApiError> {
    reqwest::Client::builder()
        .tls_built_in_native_certs(false)
        .connect_timeout(connect)
        .no_proxy()
        .build()
        .map_err(|e| {
            ApiError::new(
                ApiErrorKind::Config,
                format!("could not start the HTTP client: {e}"),
            )
        })
}

/// Send `req` and read its status and body within `limit`, refusing a body over `max` bytes.
pub(crate) async fn send_capped(
    req: reqwest::RequestBuilder,
    limit: Duration,
    max: usize,
    origin: &str,
) -> Result<(u16, Vec<u8>), ApiError> {
    use futures_util::StreamExt as _;
    let fut = async {
        let resp = req.send().await.map_err(|e| {
            let mut err = crate::anthropic::transport_error(&e);
            err.message = format!("could not reach {origin}: {}", err.message);
            err
        })?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::new(
                    ApiErrorKind::ConnectionLost,
                    format!("{origin} broke off its answer: {e}"),
                )
            })?;
            if body.len() + chunk.len() > max {
                return Err(ApiError::new(
                    ApiErrorKind::Decode,
                    format!("{origin} answered with more than {max} bytes"),
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    };
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(ApiError::new(
            ApiErrorKind::Connect,
            format!("{origin} did not answer within {} ms", limit.as_millis()),
        )),
    }
}

/// The error for an HTTP failure status from a credential endpoint: 5xx and 429 passing
/// (worth another try), anything else a configuration problem described by `fix`.
pub(crate) fn status_error(status: u16, origin: &str, detail: &str, fix: &str) -> ApiError {
    let transient = status >= 500 || status == 429;
    let detail = crate::anthropic::truncate(detail.trim(), 300);
    let mut e = ApiError::new(
        if transient {
            ApiErrorKind::Http
        } else {
            ApiErrorKind::Config
        },
        format!("{origin} answered HTTP {status}: {detail}{fix}"),
    );
    if transient {
        e.status = Some(status);
    }
    e
}

/// Read a small file (a token) with a size bound and a regular-file check.
pub(crate) fn read_small(path: &std::path::Path, max: u64, what: &str) -> Result<String, ApiError> {
    let err = |m: String| {
        ApiError::new(
            ApiErrorKind::Config,
            format!("{what} {}: {m}", path.display()),
        )
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    if !meta.is_file() || meta.len() > max {
        return Err(err(format!("not a regular file of at most {max} bytes")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    if text.len() as u64 > max {
        return Err(err(format!("longer than {max} bytes")));
    }
    Ok(text)
}
