//! How a run or a turn ended: the vocabulary of the `result` frame.

/// The `subtype` of a `result` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultSubtype {
    /// The model finished its answer.
    Success,
    /// The run failed: an API error, an interrupt, an internal error.
    ErrorDuringExecution,
    /// `--max-turns` was reached.
    ErrorMaxTurns,
    /// `--max-budget-usd` was reached.
    ErrorMaxBudgetUsd,
}

impl ResultSubtype {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultSubtype::Success => "success",
            ResultSubtype::ErrorDuringExecution => "error_during_execution",
            ResultSubtype::ErrorMaxTurns => "error_max_turns",
            ResultSubtype::ErrorMaxBudgetUsd => "error_max_budget_usd",
        }
    }
}

/// The `terminal_reason` of a `result` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminalReason {
    /// The model ended its turn.
    Completed,
    /// The API failed permanently or stayed unavailable.
    ApiError,
    /// The turn cap was reached.
    MaxTurns,
    /// The cost budget was reached.
    BudgetExhausted,
    /// Interrupted while the model was streaming.
    AbortedStreaming,
    /// Interrupted while tools ran.
    AbortedTools,
    /// A hook stopped the run.
    HookStopped,
    /// keel itself failed (an I/O error writing output or the transcript, a bug).
    ModelError,
    /// The turn could not be set up (bad input, a transcript that cannot be written).
    TurnSetupFailed,
}

impl TerminalReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminalReason::Completed => "completed",
            TerminalReason::ApiError => "api_error",
            TerminalReason::MaxTurns => "max_turns",
            TerminalReason::BudgetExhausted => "budget_exhausted",
            TerminalReason::AbortedStreaming => "aborted_streaming",
            TerminalReason::AbortedTools => "aborted_tools",
            TerminalReason::HookStopped => "hook_stopped",
            TerminalReason::ModelError => "model_error",
            TerminalReason::TurnSetupFailed => "turn_setup_failed",
        }
    }
}
