//! The clouds' shapes of the same scenario: Google Vertex AI (the Messages API's events at a
//! `:streamRawPredict` URL, Google's error envelope) and Amazon Bedrock (the Messages API's
//! events wrapped in AWS event-stream frames, `x-amzn-errortype` errors, exception frames).
//! Each request is checked for what the real service requires (its `anthropic_version`, no
//! `model` in the body, the shape of the signature header).

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};

use crate::dialect::Dialect;

/// Vertex's `anthropic_version`.
pub const VERTEX_VERSION: &str = "vertex-2023-10-16";
/// Bedrock's `anthropic_version`.
pub const BEDROCK_VERSION: &str = "bedrock-2023-05-31";

pub(crate) use crate::dialect::route;

/// The request in the Messages API's shape: the body with the path's model and the stream
/// flag, without `anthropic_version`.
pub(crate) fn view(model: &str, body: &Value, stream: bool) -> Value {
    let mut v = body.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("anthropic_version");
        o.insert("model".into(), json!(model));
        o.insert("stream".into(), json!(stream));
    }
    v
}

/// What the cloud refuses before the Messages API's own checks: the wrong
/// `anthropic_version`, a `model` in the body, Bedrock's `stream` and `metadata` keys, a Vertex
/// `stream` flag that disagrees with the URL's verb.
pub(crate) fn validate(d: Dialect, route: &str, body: &Value) -> Result<(), String> {
    let want = if d == Dialect::Bedrock {
        BEDROCK_VERSION
    } else {
        VERTEX_VERSION
    };
    match body.get("anthropic_version") {
        Some(Value::String(v)) if v == want => {}
        Some(v) => return Err(format!("anthropic_version: expected {want:?}, found {v}")),
        None => return Err(format!("anthropic_version: field required ({want:?})")),
    }
    if body.get("model").is_some() {
        return Err(
            "model: extraneous key [model] is not permitted (the URL names the model)".into(),
        );
    }
    if d == Dialect::Bedrock {
        for k in ["stream", "metadata"] {
            if body.get(k).is_some() {
                return Err(format!("{k}: extraneous key [{k}] is not permitted"));
            }
        }
    } else {
        let wants_stream = route.ends_with(":streamRawPredict");
        let says = body.get("stream").and_then(Value::as_bool) == Some(true);
        if wants_stream != says {
            return Err(format!(
                "stream: {} is {} but the body says stream={says}",
                if wants_stream {
                    ":streamRawPredict"
                } else {
                    ":rawPredict"
                },
                if wants_stream {
                    "streaming"
                } else {
                    "not streaming"
                }
            ));
        }
    }
    Ok(())
}

/// Check the `authorization` header's shape: absent (a gateway that signs for the client),
/// `Bearer <token>`, or — for Bedrock — a SigV4 signature for the `bedrock` service whose
/// signed headers include `host` and `x-amz-date` (and `x-amz-security-token` when sent).
pub(crate) fn check_auth(
    d: Dialect,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(auth) = headers.get("authorization") else {
        return Ok(());
    };
    if let Some(tok) = auth.strip_prefix("Bearer ") {
        if tok.trim().is_empty() {
            return Err("authorization: the bearer token is empty".into());
        }
        return Ok(());
    }
    if d != Dialect::Bedrock {
        return Err("authorization: expected `Bearer <access token>`".into());
    }
    let rest = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or("authorization: expected `AWS4-HMAC-SHA256 ...` or `Bearer ...`")?;
    let mut cred = None;
    let mut signed = None;
    let mut sig = None;
    for part in rest.split(',').map(str::trim) {
        match part.split_once('=') {
            Some(("Credential", v)) => cred = Some(v),
            Some(("SignedHeaders", v)) => signed = Some(v),
            Some(("Signature", v)) => sig = Some(v),
            _ => return Err(format!("authorization: unexpected part {part:?}")),
        }
    }
    let (cred, signed, sig) = match (cred, signed, sig) {
        (Some(c), Some(h), Some(s)) => (c, h, s),
        _ => {
            return Err(
                "authorization: Credential, SignedHeaders and Signature are required".into(),
            )
        }
    };
    let scope: Vec<&str> = cred.split('/').collect();
    let date = headers
        .get("x-amz-date")
        .ok_or("x-amz-date: header required")?;
    match scope.as_slice() {
        [key, day, region, "bedrock", "aws4_request"]
            if !key.is_empty()
                && day.len() == 8
                && date.starts_with(day)
                && !region.is_empty() => {}
        _ => {
            return Err(format!(
                "authorization: Credential must be <key>/<yyyymmdd of x-amz-date>/<region>/bedrock/aws4_request, found {cred:?}"
            ))
        }
    }
    let signed: Vec<&str> = signed.split(';').collect();
    let mut needed = vec!["host", "x-amz-date"];
    if headers.contains_key("x-amz-security-token") {
        needed.push("x-amz-security-token");
    }
    for h in needed {
        if !signed.contains(&h) {
            return Err(format!("authorization: SignedHeaders must include {h}"));
        }
    }
    if sig.len() != 64
        || !sig
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err("authorization: Signature must be 64 lower-case hex digits".into());
    }
    Ok(())
}

/// Google's status name for an HTTP status.
fn google_status(status: u16) -> &'static str {
    match status {
        400 | 413 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

/// A Vertex error body: Google's envelope, except for an overload (529), which Vertex passes
/// on from the model in the Messages API's shape.
pub fn vertex_error_body(status: u16, error_type: &str, message: &str) -> Value {
    if status == 529 {
        return crate::reply::error_body(error_type, message, None);
    }
    json!({"error": {"code": status, "message": message, "status": google_status(status)}})
}

/// Bedrock's `x-amzn-errortype` for a scenario's Messages API error type (an AWS name given
/// in the scenario is kept).
pub fn bedrock_error_type(status: u16, error_type: &str) -> String {
    match error_type {
        "api_error" if status == 503 => "ServiceUnavailableException",
        "invalid_request_error" | "request_too_large" | "context_length_exceeded" => {
            "ValidationException"
        }
        "authentication_error" => "UnrecognizedClientException",
        "permission_error" => "AccessDeniedException",
        "not_found_error" => "ResourceNotFoundException",
        "rate_limit_error" => "ThrottlingException",
        "overloaded_error" => "ServiceUnavailableException",
        "api_error" => "InternalServerException",
        other => other,
    }
    .to_owned()
}

/// A Bedrock error body.
pub fn bedrock_error_body(message: &str) -> Value {
    json!({"message": message})
}

/// The exception frame a scenario's mid-stream error becomes on Bedrock: the model's own
/// errors arrive wrapped in `modelStreamErrorException` with the original status and body.
pub(crate) fn exception_frame(error_type: &str, message: &str) -> Bytes {
    let (name, payload) = match error_type {
        "overloaded_error" | "api_error" => {
            let original = crate::reply::error_body(error_type, message, None);
            let code = if error_type == "overloaded_error" {
                529
            } else {
                500
            };
            (
                "modelStreamErrorException".to_owned(),
                json!({"message": message, "originalStatusCode": code,
                       "originalMessage": original.to_string()}),
            )
        }
        other => {
            let aws = bedrock_error_type(0, other);
            let mut name = aws;
            if let Some(first) = name.get_mut(0..1) {
                first.make_ascii_lowercase();
            }
            (name, json!({"message": message}))
        }
    };
    frame(
        &[
            (":message-type", "exception"),
            (":exception-type", &name),
            (":content-type", "application/json"),
        ],
        payload.to_string().as_bytes(),
    )
}

/// Wrap one SSE event (`event: x\ndata: {...}\n\n`) as a Bedrock `chunk` frame.
pub(crate) fn chunk_of_sse(sse: &[u8]) -> Bytes {
    let text = String::from_utf8_lossy(sse);
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect::<Vec<_>>()
        .join("\n");
    chunk(data.as_bytes())
}

/// A `chunk` frame carrying `event` (an Anthropic stream event's JSON bytes).
pub(crate) fn chunk(event: &[u8]) -> Bytes {
    let b64 = base64::engine::general_purpose::STANDARD.encode(event);
    // Bedrock pads chunks with a `p` field of varying length; keel must ignore it.
    let payload = json!({"bytes": b64, "p": "abcdefghij"});
    frame(
        &[
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    )
}

/// One AWS event-stream message (the encoder keel's Bedrock decoder is tested against).
pub fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Bytes {
    Bytes::from(keel_protocol::eventstream::encode(headers, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_the_cloud_and_the_model() {
        let (d, m, s) = route(
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream",
        )
        .unwrap();
        assert_eq!(
            (d, m.as_str(), s),
            (
                Dialect::Bedrock,
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                Some(true)
            )
        );
        let (_, m, s) = route("/model/arn%3Aaws%2Fx/invoke").unwrap();
        assert_eq!((m.as_str(), s), ("arn:aws/x", Some(false)));
        let (d, m, _) = route(
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
        )
        .unwrap();
        assert_eq!(
            (d, m.as_str()),
            (Dialect::Vertex, "claude-sonnet-4-5@20250929")
        );
        assert!(route("/model/x/converse").is_none());
        assert!(route("/v1/projects/p/publishers/anthropic/models/m:predict").is_none());
    }

    #[test]
    fn sigv4_header_shape() {
        let mut h = std::collections::BTreeMap::new();
        h.insert("x-amz-date".to_owned(), "20250101T000000Z".to_owned());
        let good = format!(
            "AWS4-HMAC-SHA256 Credential=AKID/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature={}",
            "a".repeat(64)
        );
        h.insert("authorization".to_owned(), good.clone());
        assert_eq!(check_auth(Dialect::Bedrock, &h), Ok(()));
        for bad in [
            good.replace("bedrock", "s3"),
            good.replace("20250101/", "20240101/"),
            good.replace(&"a".repeat(64), "abc"),
            good.replace("host;", ""),
            "Basic x".to_owned(),
        ] {
            h.insert("authorization".to_owned(), bad.clone());
            assert!(check_auth(Dialect::Bedrock, &h).is_err(), "{bad}");
        }
        h.insert("authorization".to_owned(), good);
        h.insert("x-amz-security-token".to_owned(), "t".to_owned());
        assert!(
            check_auth(Dialect::Bedrock, &h).is_err(),
            "the session token must be signed"
        );
    }
}
