//! The error contract: one enum that says what really happened.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How much of stderr an error's message shows (the `stderr` field keeps the whole tail).
const STDERR_IN_MESSAGE: usize = 2000;

/// Everything that can go wrong while driving a CLI.
///
/// Errors that **end** a message stream: [`CliNotFound`](Error::CliNotFound),
/// [`Spawn`](Error::Spawn), [`InvalidOptions`](Error::InvalidOptions),
/// [`Process`](Error::Process) and [`Result`](Error::Result) (always the last item).
///
/// The enum stays small (the details of `Result` are boxed), so `Result<T, Error>` is cheap to
/// return.
/// Errors that are **items** of a stream, after which it goes on: [`JsonDecode`](Error::JsonDecode),
/// [`MessageParse`](Error::MessageParse), [`LineTooLong`](Error::LineTooLong).
/// Control requests fail with [`ControlTimeout`](Error::ControlTimeout),
/// [`ControlError`](Error::ControlError), [`Connection`](Error::Connection), or — when the CLI
/// exits while they are pending — at once with the same `Process`/`Result` error the stream ends with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CLI executable does not exist (an explicit path that is missing, or no `keel` on `PATH`).
    #[error("CLI not found: {} (set Options::cli_path, or put `keel` on PATH)", path.display())]
    CliNotFound {
        /// The path or name that was looked for.
        path: PathBuf,
    },

    /// The CLI exists but could not be started (not executable, a bad interpreter line, ...).
    #[error("could not start the CLI `{command}`: {source}")]
    Spawn {
        /// The full command line.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// Writing to the CLI failed: it has exited, or its stdin is closed.
    #[error("lost the connection to the CLI: {message}")]
    Connection {
        /// What failed, with the exit code when it is known.
        message: String,
    },

    /// The CLI exited with a non-zero code, and the last message was not an error `result`.
    #[error("{}", process_message(*exit_code, stderr))]
    Process {
        /// The exit code (128 + N when killed by signal N).
        exit_code: i32,
        /// The tail of the CLI's stderr (up to `Options::stderr_ring_bytes`), as written.
        stderr: String,
    },

    /// The CLI exited non-zero right after a `result` with `is_error: true`. Raised after that
    /// `result` message was yielded. The message is the result's own text (see [`ResultError`]).
    #[error("{0}")]
    Result(Box<ResultError>),

    /// A stdout line that starts with `{` is not valid JSON. The stream goes on.
    #[error(
        "the CLI wrote a line that is not valid JSON ({error}): {}",
        preview(line)
    )]
    JsonDecode {
        /// The line as written.
        line: String,
        /// The JSON parser's complaint.
        error: String,
    },

    /// A message of a known type is missing a required field or has a wrong one. The stream
    /// goes on. (Unknown types and unknown fields are never an error.)
    #[error("could not read a message from the CLI: {message}")]
    MessageParse {
        /// What was wrong.
        message: String,
        /// The message as JSON.
        raw: Value,
    },

    /// A stdout line longer than `Options::max_line_bytes`; it was skipped. The stream goes on.
    #[error("the CLI wrote a line of {len} bytes, over the limit of {limit} bytes (Options::max_line_bytes); the line was skipped")]
    LineTooLong {
        /// The line's length.
        len: usize,
        /// The limit in force.
        limit: usize,
    },

    /// A control request got no answer in time.
    #[error("control request timeout: {subtype} (no answer within {timeout:?})")]
    ControlTimeout {
        /// The request's subtype (`initialize`, `interrupt`, ...).
        subtype: String,
        /// The timeout in force.
        timeout: Duration,
    },

    /// The CLI answered a control request with an error.
    #[error("control request {subtype} failed: {error}")]
    ControlError {
        /// The request's subtype.
        subtype: String,
        /// The CLI's error text.
        error: String,
        /// The CLI's error code (`invalid_mode`, `unsupported_request`), when given.
        error_code: Option<String>,
    },

    /// The options cannot work together (callbacks with `PromptMode::Argv`, a missing cwd, ...).
    #[error("invalid options: {message}")]
    InvalidOptions {
        /// What is wrong.
        message: String,
    },
}

/// The details of [`Error::Result`]: the error `result` the CLI ended with, and its exit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultError {
    /// The result's `subtype` (`error_max_turns`, `error_max_budget_usd`; `success` for API errors).
    pub subtype: String,
    /// The result's `errors` (empty when absent).
    pub errors: Vec<String>,
    /// The result's `result` text.
    pub result: Option<String>,
    /// The result's `terminal_reason` (`max_turns`, `api_error`, ...).
    pub terminal_reason: Option<String>,
    /// The result's `api_error_status` (HTTP status of the API error), when set.
    pub api_error_status: Option<u16>,
    /// The result's `session_id`.
    pub session_id: String,
    /// The process exit code.
    pub exit_code: i32,
    /// The tail of the CLI's stderr.
    pub stderr: String,
}

impl ResultError {
    /// The result's own text: the `errors` joined with "; ", else the `result` text, else the
    /// subtype.
    pub fn message(&self) -> String {
        result_message(&self.errors, self.result.as_deref(), &self.subtype)
    }
}

impl std::fmt::Display for ResultError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl Error {
    /// The details of an [`Error::Result`].
    pub fn as_result_error(&self) -> Option<&ResultError> {
        match self {
            Error::Result(r) => Some(r),
            _ => None,
        }
    }

    /// The CLI's exit code, for the errors that carry one.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Error::Process { exit_code, .. } => Some(*exit_code),
            Error::Result(r) => Some(r.exit_code),
            _ => None,
        }
    }

    /// The tail of the CLI's stderr, for the errors that carry it.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            Error::Process { stderr, .. } => Some(stderr),
            Error::Result(r) => Some(&r.stderr),
            _ => None,
        }
    }

    /// Whether running the same thing again later may succeed: the API was unavailable
    /// (keel's exit code 4, an HTTP 429/5xx/529 result) or a control request timed out.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Process { exit_code, .. } => *exit_code == 4,
            Error::Result(r) => {
                r.exit_code == 4
                    || matches!(r.api_error_status, Some(s) if s == 429 || s == 529 || (500..600).contains(&s))
            }
            Error::ControlTimeout { .. } => true,
            Error::CliNotFound { .. }
            | Error::Spawn { .. }
            | Error::Connection { .. }
            | Error::JsonDecode { .. }
            | Error::MessageParse { .. }
            | Error::LineTooLong { .. }
            | Error::ControlError { .. }
            | Error::InvalidOptions { .. } => false,
        }
    }

    /// Whether this error ends the stream it appears in (the process is gone or never started).
    pub fn is_terminal(&self) -> bool {
        match self {
            Error::CliNotFound { .. }
            | Error::Spawn { .. }
            | Error::InvalidOptions { .. }
            | Error::Process { .. }
            | Error::Result(_)
            | Error::Connection { .. }
            | Error::ControlTimeout { .. }
            | Error::ControlError { .. } => true,
            Error::JsonDecode { .. } | Error::MessageParse { .. } | Error::LineTooLong { .. } => {
                false
            }
        }
    }
}

/// The text of an error result: the `errors` joined with "; ", else the `result` text, else the
/// subtype.
pub fn result_message(errors: &[String], result: Option<&str>, subtype: &str) -> String {
    let errors: Vec<&str> = errors
        .iter()
        .map(|e| e.trim())
        .filter(|e| !e.is_empty())
        .collect();
    if !errors.is_empty() {
        return errors.join("; ");
    }
    match result.map(str::trim) {
        Some(r) if !r.is_empty() => r.to_owned(),
        _ => subtype.to_owned(),
    }
}

fn process_message(exit_code: i32, stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        return format!("the CLI exited with code {exit_code} (stderr was empty)");
    }
    format!(
        "the CLI exited with code {exit_code}: {}",
        tail_chars(trimmed, STDERR_IN_MESSAGE)
    )
}

/// The last `max` characters of `s`, with a leading "…" when cut.
pub(crate) fn tail_chars(s: &str, max: usize) -> String {
    let count = s.chars().count();
    if count <= max {
        return s.to_owned();
    }
    let tail: String = s.chars().skip(count - max).collect();
    format!("…{tail}")
}

fn preview(line: &str) -> String {
    const MAX: usize = 200;
    if line.chars().count() <= MAX {
        return line.to_owned();
    }
    let head: String = line.chars().take(MAX).collect();
    format!("{head}… ({} bytes)", line.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_message_prefers_errors_then_result_then_subtype() {
        let errs = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(result_message(&errs, Some("r"), "s"), "a; b");
        assert_eq!(result_message(&[], Some("r"), "s"), "r");
        assert_eq!(result_message(&[], Some("  "), "s"), "s");
        assert_eq!(result_message(&[], None, "s"), "s");
        assert_eq!(result_message(&[" ".to_owned()], None, "s"), "s");
    }

    #[test]
    fn process_message_shows_stderr_tail() {
        let e = Error::Process {
            exit_code: 2,
            stderr: "boom\n".into(),
        };
        assert_eq!(e.to_string(), "the CLI exited with code 2: boom");
        let e = Error::Process {
            exit_code: 1,
            stderr: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "the CLI exited with code 1 (stderr was empty)"
        );
        let long = "x".repeat(5000);
        let e = Error::Process {
            exit_code: 1,
            stderr: long,
        };
        assert!(e.to_string().chars().count() < 2100);
    }

    #[test]
    fn retryable_follows_exit_code_and_status() {
        let r = |status, code| {
            Error::Result(Box::new(ResultError {
                subtype: "success".into(),
                errors: vec![],
                result: Some("API Error".into()),
                terminal_reason: Some("api_error".into()),
                api_error_status: status,
                session_id: String::new(),
                exit_code: code,
                stderr: String::new(),
            }))
        };
        assert!(r(Some(529), 1).is_retryable());
        assert!(r(None, 4).is_retryable());
        assert!(!r(Some(401), 1).is_retryable());
    }
}
