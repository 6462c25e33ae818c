//! How a turn ended. Everything about the `result` frame and the exit code derives from here.

use std::time::Duration;

use keel_model::{ApiError, ErrorClass};
use keel_protocol::{CancelReason, ResultSubtype, TerminalReason};

/// Where a turn was when it was interrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting on, or reading, the model's reply.
    Streaming,
    /// Running tools.
    Tools,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnEnd {
    /// The model ended its turn.
    Completed {
        /// The text of the final reply.
        text: String,
    },
    /// The API failed permanently, or stayed unavailable through every retry.
    ApiFailed {
        /// The last error.
        error: ApiError,
        /// Requests made in all.
        attempts: u32,
        /// Time spent from the first request to giving up.
        elapsed: Duration,
        /// Why retrying stopped (empty for a permanent error).
        gave_up: String,
    },
    /// `--max-turns` was reached.
    MaxTurns {
        /// The cap.
        limit: u32,
    },
    /// `--max-budget-usd` was reached.
    Budget {
        /// The budget.
        limit_usd: f64,
        /// What was spent.
        spent_usd: f64,
    },
    /// The turn was interrupted.
    Interrupted {
        /// Where it was.
        phase: Phase,
        /// Why.
        reason: CancelReason,
    },
    /// A hook ended the turn: a UserPromptSubmit hook blocked the prompt (the model was not
    /// called), or a hook answered `continue: false`.
    HookStopped {
        /// The hook event (`UserPromptSubmit`, `PreToolUse`, ...).
        event: String,
        /// The hook's reason.
        reason: String,
    },
    /// The model declined to answer (`stop_reason: "refusal"`); its text is shown.
    Refused {
        /// What the model said.
        text: String,
    },
    /// Replies kept being cut off by the output limit (`max_tokens`), so the turn stopped.
    CutOff {
        /// The text the model got out.
        text: String,
        /// How many replies in a row were cut off.
        times: u32,
    },
    /// The conversation does not fit the model's context window, even after compacting.
    PromptTooLong {
        /// What the API or keel said.
        detail: String,
    },
    /// keel itself failed (writing output or the transcript, a bug).
    Internal {
        /// What failed, for people.
        message: String,
    },
    /// Structured output was asked for and every allowed call failed the schema.
    StructuredRetries {
        /// Refused calls.
        attempts: u32,
        /// The last refused call's violations.
        errors: Vec<String>,
    },
    /// A capability the run required is missing (a `--strict-mcp-config` server that did
    /// not start); the model was not called.
    CapabilityMissing {
        /// What is missing, naming the capability.
        what: String,
    },
    /// Structured output was asked for and the model ended its turn without giving it, even
    /// after being reminded.
    StructuredMissing {
        /// What the model wrote instead.
        text: String,
    },
    /// A truncating fork (`--resume-session-at`, `--resume-drops-turn`) was refused before
    /// anything ran; the source session was not touched.
    ResumeRejected {
        /// Why, starting `Resume rejected by --…:`.
        reason: String,
    },
}

impl TurnEnd {
    /// The result's `subtype`.
    pub fn subtype(&self) -> ResultSubtype {
        match self {
            TurnEnd::Completed { .. } => ResultSubtype::Success,
            TurnEnd::MaxTurns { .. } => ResultSubtype::ErrorMaxTurns,
            TurnEnd::StructuredRetries { .. } => ResultSubtype::ErrorMaxStructuredOutputRetries,
            TurnEnd::Budget { .. } => ResultSubtype::ErrorMaxBudgetUsd,
            TurnEnd::ApiFailed { .. }
            | TurnEnd::Interrupted { .. }
            | TurnEnd::HookStopped { .. }
            | TurnEnd::Refused { .. }
            | TurnEnd::CutOff { .. }
            | TurnEnd::PromptTooLong { .. }
            | TurnEnd::Internal { .. }
            | TurnEnd::StructuredMissing { .. }
            | TurnEnd::CapabilityMissing { .. }
            | TurnEnd::ResumeRejected { .. } => ResultSubtype::ErrorDuringExecution,
        }
    }

    /// The result's `is_error`.
    pub fn is_error(&self) -> bool {
        !matches!(self, TurnEnd::Completed { .. })
    }

    /// The result's `terminal_reason`.
    pub fn terminal_reason(&self) -> TerminalReason {
        match self {
            TurnEnd::Completed { .. } => TerminalReason::Completed,
            TurnEnd::ApiFailed { .. } => TerminalReason::ApiError,
            TurnEnd::MaxTurns { .. } => TerminalReason::MaxTurns,
            TurnEnd::Budget { .. } => TerminalReason::BudgetExhausted,
            TurnEnd::Interrupted {
                phase: Phase::Streaming,
                ..
            } => TerminalReason::AbortedStreaming,
            TurnEnd::Interrupted {
                phase: Phase::Tools,
                ..
            } => TerminalReason::AbortedTools,
            TurnEnd::HookStopped { .. } => TerminalReason::HookStopped,
            TurnEnd::Refused { .. } => TerminalReason::Refusal,
            TurnEnd::CutOff { .. } => TerminalReason::MalformedToolUseExhausted,
            TurnEnd::PromptTooLong { .. } => TerminalReason::PromptTooLong,
            TurnEnd::Internal { .. } => TerminalReason::ModelError,
            TurnEnd::StructuredRetries { .. } => TerminalReason::StructuredOutputRetryExhausted,
            TurnEnd::StructuredMissing { .. } => TerminalReason::StructuredOutputMissing,
            TurnEnd::CapabilityMissing { .. } => TerminalReason::CapabilityMissing,
            TurnEnd::ResumeRejected { .. } => TerminalReason::TurnSetupFailed,
        }
    }

    /// The process exit code of a headless run that ended this way (DESIGN §7).
    pub fn exit_code(&self) -> i32 {
        match self {
            TurnEnd::Completed { .. } => 0,
            TurnEnd::ApiFailed { error, .. } => match error.class() {
                ErrorClass::Permanent => 1,
                ErrorClass::Transient => 4,
            },
            TurnEnd::MaxTurns { .. } | TurnEnd::Budget { .. } => 3,
            TurnEnd::Interrupted { .. } => 130,
            TurnEnd::HookStopped { .. } => 1,
            TurnEnd::Refused { .. } => 5,
            TurnEnd::CutOff { .. } | TurnEnd::PromptTooLong { .. } => 1,
            TurnEnd::Internal { .. } => 1,
            TurnEnd::StructuredRetries { .. }
            | TurnEnd::StructuredMissing { .. }
            | TurnEnd::CapabilityMissing { .. }
            | TurnEnd::ResumeRejected { .. } => 1,
        }
    }

    /// The API error that ended the turn, if one did.
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            TurnEnd::ApiFailed { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The HTTP status of the API error that ended the turn.
    pub fn api_error_status(&self) -> Option<u16> {
        match self {
            TurnEnd::ApiFailed { error, .. } => error.status,
            _ => None,
        }
    }

    /// The result's `errors` list.
    pub fn errors(&self) -> Option<Vec<String>> {
        match self {
            TurnEnd::Completed { .. } => None,
            TurnEnd::MaxTurns { limit } => {
                Some(vec![format!("Reached maximum number of turns ({limit})")])
            }
            TurnEnd::Budget { limit_usd, .. } => {
                Some(vec![format!("Reached maximum budget (${limit_usd})")])
            }
            other => Some(vec![other.result_text()]),
        }
    }

    /// The result's `result` text: the final answer, or what went wrong and what to do.
    pub fn result_text(&self) -> String {
        match self {
            TurnEnd::Completed { text } => text.clone(),
            TurnEnd::ApiFailed { error, attempts, elapsed, gave_up } => api_failure_text(error, *attempts, *elapsed, gave_up),
            TurnEnd::MaxTurns { limit } => format!(
                "Stopped: the run reached its turn limit ({limit}) before the model finished. Raise --max-turns or resume the session to continue."
            ),
            TurnEnd::Budget { limit_usd, spent_usd } => format!(
                "Stopped: the run spent ${spent_usd:.4}, reaching its budget of ${limit_usd}. Raise --max-budget-usd or resume the session to continue."
            ),
            TurnEnd::Interrupted { phase, reason } => {
                let during = match phase {
                    Phase::Streaming => "while the model was replying",
                    Phase::Tools => "while tools were running",
                };
                let who = match reason {
                    CancelReason::UserInterrupted => "Interrupted by the user",
                    CancelReason::Shutdown => "Stopped because keel was asked to shut down",
                    CancelReason::Timeout => "Stopped by a deadline",
                    CancelReason::SiblingError => "Stopped because a parallel call failed",
                };
                format!("{who} {during}. Every started tool call was stopped and recorded; the session can be resumed.")
            }
            TurnEnd::HookStopped { event, reason } if event == "UserPromptSubmit" => format!(
                "A UserPromptSubmit hook blocked the prompt, so the model was not called: {reason}"
            ),
            TurnEnd::HookStopped { event, reason } => {
                format!("A {event} hook stopped the turn: {reason}")
            }
            TurnEnd::Refused { text } if text.trim().is_empty() => {
                "The model declined to answer this request (stop reason: refusal).".to_owned()
            }
            TurnEnd::Refused { text } => {
                format!("The model declined to answer (stop reason: refusal): {text}")
            }
            TurnEnd::CutOff { text, times } => format!(
                "Stopped: {times} replies in a row were cut off by the output limit (max_tokens) before the model could finish; what it wrote so far: {text}"
            ),
            TurnEnd::PromptTooLong { detail } => format!(
                "Stopped: the conversation does not fit the model's context window even after compacting it ({detail}). Start a new session, or resume this one with a shorter prompt."
            ),
            TurnEnd::Internal { message } => format!("keel failed: {message}"),
            TurnEnd::StructuredRetries { attempts, errors } => format!(
                "Structured output (--json-schema) was not met: the model's {attempts} StructuredOutput calls all failed the schema; the last one: {}",
                errors.join("; ")
            ),
            TurnEnd::CapabilityMissing { what } => format!(
                "Stopped before calling the model: a capability this run requires is missing: {what}"
            ),
            TurnEnd::StructuredMissing { text } => format!(
                "Structured output (--json-schema) was not met: the model ended its turn without calling StructuredOutput, even after a reminder. Its reply: {text}"
            ),
            TurnEnd::ResumeRejected { reason } => reason.clone(),
        }
    }
}

fn api_failure_text(error: &ApiError, attempts: u32, elapsed: Duration, gave_up: &str) -> String {
    let what = match (error.status, error.error_type.as_deref()) {
        (Some(s), Some(t)) => format!("the model API answered HTTP {s} ({t}): {}", error.message),
        (Some(s), None) => format!("the model API answered HTTP {s}: {}", error.message),
        (None, _) => format!("the connection to the model API failed: {}", error.message),
    };
    let hint = match error.status {
        Some(401) => "Check the API key (ANTHROPIC_API_KEY; OPENAI_API_KEY for the OpenAI providers): the key was refused.",
        Some(403) => "The key has no access to this model or resource; check the key's permissions and --model.",
        Some(404) => "Check --model and the base URL (ANTHROPIC_BASE_URL; OPENAI_BASE_URL for the OpenAI providers): the API does not know this model or path.",
        Some(413) => "The request is too large; shorten the prompt or start a new session.",
        Some(400) => "The request was rejected as malformed; this is likely a keel bug — please report it with the session id.",
        Some(429) => "You are rate limited; wait a while, or raise KEEL_RETRY_BUDGET_MS so keel waits longer.",
        Some(529) | Some(503) => "The API is overloaded; try again later, or pass --fallback-model.",
        _ if error.retryable() => "The API stayed unavailable; try again later, and check the base URL (ANTHROPIC_BASE_URL or OPENAI_BASE_URL) and your network.",
        _ => "This error is not temporary; retrying will not help.",
    };
    if error.retryable() {
        format!(
            "API Error: {what}. Gave up after {attempts} attempt{} over {:.1} s ({gave_up}). {hint}",
            if attempts == 1 { "" } else { "s" },
            elapsed.as_secs_f64()
        )
    } else {
        format!("API Error: {what}. Not retried: this error is permanent. {hint}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_model::ApiErrorKind;

    fn http(status: u16) -> ApiError {
        ApiError {
            status: Some(status),
            ..ApiError::new(ApiErrorKind::Http, "nope")
        }
    }

    #[test]
    fn fields_and_exit_codes_agree() {
        let cases = [
            (
                TurnEnd::Completed { text: "hi".into() },
                "success",
                false,
                "completed",
                0,
            ),
            (
                TurnEnd::Refused { text: "no".into() },
                "error_during_execution",
                true,
                "refusal",
                5,
            ),
            (
                TurnEnd::CutOff {
                    text: "half".into(),
                    times: 3,
                },
                "error_during_execution",
                true,
                "malformed_tool_use_exhausted",
                1,
            ),
            (
                TurnEnd::PromptTooLong { detail: "x".into() },
                "error_during_execution",
                true,
                "prompt_too_long",
                1,
            ),
            (
                TurnEnd::ApiFailed {
                    error: http(401),
                    attempts: 1,
                    elapsed: Duration::ZERO,
                    gave_up: String::new(),
                },
                "error_during_execution",
                true,
                "api_error",
                1,
            ),
            (
                TurnEnd::ApiFailed {
                    error: http(529),
                    attempts: 2,
                    elapsed: Duration::ZERO,
                    gave_up: "x".into(),
                },
                "error_during_execution",
                true,
                "api_error",
                4,
            ),
            (
                TurnEnd::MaxTurns { limit: 1 },
                "error_max_turns",
                true,
                "max_turns",
                3,
            ),
            (
                TurnEnd::Budget {
                    limit_usd: 0.01,
                    spent_usd: 0.02,
                },
                "error_max_budget_usd",
                true,
                "budget_exhausted",
                3,
            ),
            (
                TurnEnd::Interrupted {
                    phase: Phase::Tools,
                    reason: CancelReason::UserInterrupted,
                },
                "error_during_execution",
                true,
                "aborted_tools",
                130,
            ),
            (
                TurnEnd::Interrupted {
                    phase: Phase::Streaming,
                    reason: CancelReason::UserInterrupted,
                },
                "error_during_execution",
                true,
                "aborted_streaming",
                130,
            ),
            (
                TurnEnd::HookStopped {
                    event: "UserPromptSubmit".into(),
                    reason: "no".into(),
                },
                "error_during_execution",
                true,
                "hook_stopped",
                1,
            ),
            (
                TurnEnd::Internal {
                    message: "disk".into(),
                },
                "error_during_execution",
                true,
                "model_error",
                1,
            ),
            (
                TurnEnd::ResumeRejected {
                    reason: "Resume rejected by --resume-drops-turn: x".into(),
                },
                "error_during_execution",
                true,
                "turn_setup_failed",
                1,
            ),
        ];
        for (end, subtype, is_error, reason, code) in cases {
            assert_eq!(end.subtype().as_str(), subtype, "{end:?}");
            assert_eq!(end.is_error(), is_error, "{end:?}");
            assert_eq!(end.terminal_reason().as_str(), reason, "{end:?}");
            assert_eq!(end.exit_code(), code, "{end:?}");
        }
    }

    #[test]
    fn limit_messages() {
        assert_eq!(
            TurnEnd::MaxTurns { limit: 1 }.errors().unwrap(),
            vec!["Reached maximum number of turns (1)"]
        );
        let t = TurnEnd::ApiFailed {
            error: http(529),
            attempts: 2,
            elapsed: Duration::from_millis(1500),
            gave_up: "retry cap 1 reached".into(),
        }
        .result_text();
        assert!(
            t.contains("529") && t.contains("2 attempts") && t.contains("1.5 s"),
            "{t}"
        );
    }
}
