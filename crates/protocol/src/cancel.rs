//! Why something was cancelled.

use serde::{Deserialize, Serialize};

/// The reason carried by every cancellation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// The user (SIGINT, an `interrupt` control request, the TUI) stopped the turn.
    UserInterrupted,
    /// A parallel call beside this one failed.
    SiblingError,
    /// A deadline expired.
    Timeout,
    /// keel itself is shutting down (SIGTERM, end of session).
    Shutdown,
}

impl CancelReason {
    /// The wire name (`user_interrupted`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::UserInterrupted => "user_interrupted",
            CancelReason::SiblingError => "sibling_error",
            CancelReason::Timeout => "timeout",
            CancelReason::Shutdown => "shutdown",
        }
    }
}
