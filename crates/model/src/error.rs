//! API errors, and the one place that decides which are worth retrying.

use std::fmt;
use std::time::Duration;

/// What kind of failure an [`ApiError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// The API answered with an HTTP error status.
    Http,
    /// The connection could not be made (refused, DNS, TLS, connect timeout).
    Connect,
    /// The connection broke before the response was complete (reset, closed, cut mid-body).
    ConnectionLost,
    /// The stream ended before `message_stop`.
    StreamDropped,
    /// No bytes arrived for longer than the idle timeout.
    StreamIdle,
    /// The API sent an `error` event inside the stream.
    StreamError,
    /// The response could not be understood (a body that is not the API's JSON).
    Decode,
    /// The stream broke the protocol (an event that is not JSON, of the wrong shape, or with a
    /// value out of range): treated like a dropped stream, since a garbled stream is usually a
    /// passing fault between keel and the API.
    Protocol,
    /// keel could not build the request (no API key, a bad base URL).
    Config,
}

/// Whether an error is worth another attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// Retrying can help (overload, rate limit, server error, a broken or silent stream).
    Transient,
    /// Retrying cannot help (bad request, bad key, no access, not found, too large).
    Permanent,
}

/// A failed model request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// What kind of failure.
    pub kind: ApiErrorKind,
    /// The HTTP status, when the API answered with one.
    pub status: Option<u16>,
    /// The API's error type (`overloaded_error`, `rate_limit_error`, ...), when it sent one.
    pub error_type: Option<String>,
    /// What went wrong, for people.
    pub message: String,
    /// How long the API asked us to wait (`retry-after` / `retry-after-ms`).
    pub retry_after: Option<Duration>,
    /// The API's request id, when it sent one.
    pub request_id: Option<String>,
}

impl ApiError {
    /// An error of `kind` with a message and nothing else.
    pub fn new(kind: ApiErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            status: None,
            error_type: None,
            message: message.into(),
            retry_after: None,
            request_id: None,
        }
    }

    /// Transient or permanent. One exhaustive match: a new kind forces a decision here.
    pub fn class(&self) -> ErrorClass {
        use ErrorClass::*;
        match self.kind {
            ApiErrorKind::Http => match self.status {
                // OpenAI says "out of credit" with a 429: waiting does not bring credit back.
                Some(429) if self.error_type.as_deref() == Some("insufficient_quota") => Permanent,
                Some(408 | 409 | 429 | 500 | 502 | 503 | 504 | 529) => Transient,
                Some(400 | 401 | 403 | 404 | 413) => Permanent,
                // Other 5xx are server trouble; other 4xx are our request's fault.
                Some(s) if s >= 500 => Transient,
                Some(_) | None => Permanent,
            },
            ApiErrorKind::StreamError => match self.error_type.as_deref() {
                Some(
                    "overloaded_error"
                    | "api_error"
                    | "rate_limit_error"
                    | "timeout_error"
                    // OpenAI's names for the same troubles.
                    | "server_error"
                    | "server_is_overloaded"
                    | "rate_limit_exceeded"
                    // Bedrock's exception frames for passing trouble.
                    | "throttlingException"
                    | "modelStreamErrorException"
                    | "internalServerException"
                    | "serviceUnavailableException"
                    | "modelTimeoutException",
                )
                | None => Transient,
                Some(_) => Permanent,
            },
            ApiErrorKind::Connect
            | ApiErrorKind::ConnectionLost
            | ApiErrorKind::StreamDropped
            | ApiErrorKind::StreamIdle
            | ApiErrorKind::Protocol => Transient,
            ApiErrorKind::Decode | ApiErrorKind::Config => Permanent,
        }
    }

    /// Whether the error is worth another attempt.
    pub fn retryable(&self) -> bool {
        self.class() == ErrorClass::Transient
    }

    /// The `error` label of a `system/api_retry` frame.
    pub fn retry_label(&self) -> &'static str {
        match (self.status, self.error_type.as_deref()) {
            (Some(529), _) | (_, Some("overloaded_error" | "server_is_overloaded")) => "overloaded",
            (_, Some("insufficient_quota")) => "billing_error",
            (Some(429), _)
            | (_, Some("rate_limit_error" | "rate_limit_exceeded" | "throttlingException")) => {
                "rate_limit"
            }
            (Some(401), _) | (_, Some("authentication_error" | "invalid_api_key")) => {
                "authentication_failed"
            }
            (Some(s), _) if s >= 500 => "server_error",
            (_, Some("api_error" | "server_error")) => "server_error",
            _ => "unknown",
        }
    }

    /// Whether this is the API saying it is overloaded (the trigger for a fallback model).
    pub fn is_overloaded(&self) -> bool {
        self.status == Some(529)
            || matches!(
                self.error_type.as_deref(),
                Some("overloaded_error" | "server_is_overloaded")
            )
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.status, self.error_type.as_deref()) {
            (Some(s), Some(t)) => write!(f, "HTTP {s} {t}: {}", self.message),
            (Some(s), None) => write!(f, "HTTP {s}: {}", self.message),
            (None, Some(t)) => write!(f, "{t}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ApiError {}

/// The error a failed HTTP exchange is: a refused connection, a bad request built by keel, or
/// a connection lost mid-way, with every cause in the chain.
pub(crate) fn transport_error(e: &reqwest::Error) -> ApiError {
    let mut detail = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        src = s.source();
    }
    let kind = if e.is_connect() {
        ApiErrorKind::Connect
    } else if e.is_builder() {
        ApiErrorKind::Config
    } else {
        ApiErrorKind::ConnectionLost
    };
    ApiError::new(kind, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> ApiError {
        ApiError {
            status: Some(status),
            ..ApiError::new(ApiErrorKind::Http, "x")
        }
    }

    #[test]
    fn classification_table() {
        for s in [400, 401, 403, 404, 413, 422] {
            assert_eq!(http(s).class(), ErrorClass::Permanent, "{s}");
        }
        for s in [408, 409, 429, 500, 502, 503, 504, 529, 599] {
            assert_eq!(http(s).class(), ErrorClass::Transient, "{s}");
        }
        for k in [
            ApiErrorKind::Connect,
            ApiErrorKind::ConnectionLost,
            ApiErrorKind::StreamDropped,
            ApiErrorKind::StreamIdle,
        ] {
            assert!(ApiError::new(k, "x").retryable(), "{k:?}");
        }
        let sse = |t: &str| ApiError {
            error_type: Some(t.into()),
            ..ApiError::new(ApiErrorKind::StreamError, "x")
        };
        assert!(sse("overloaded_error").retryable());
        assert!(sse("api_error").retryable());
        assert!(!sse("invalid_request_error").retryable());
        assert!(!ApiError::new(ApiErrorKind::Config, "no key").retryable());
        // OpenAI: a 429 for an exhausted quota is permanent; its stream errors classify alike.
        let quota = ApiError {
            error_type: Some("insufficient_quota".into()),
            ..http(429)
        };
        assert!(!quota.retryable());
        assert_eq!(quota.retry_label(), "billing_error");
        assert!(sse("server_error").retryable());
        assert!(sse("rate_limit_exceeded").retryable());
        assert!(!sse("context_length_exceeded").retryable());
        // Bedrock's exception frames: throttling and the model's stream errors are passing,
        // a validation error is not.
        assert!(sse("throttlingException").retryable());
        assert!(sse("modelStreamErrorException").retryable());
        assert!(!sse("validationException").retryable());
    }

    #[test]
    fn retry_labels() {
        assert_eq!(http(529).retry_label(), "overloaded");
        assert_eq!(http(429).retry_label(), "rate_limit");
        assert_eq!(http(500).retry_label(), "server_error");
        assert_eq!(
            ApiError::new(ApiErrorKind::StreamDropped, "x").retry_label(),
            "unknown"
        );
    }
}
