//! How a run or a turn ended: the vocabulary of the `result` frame.
//!
//! Both enums read any string: a value keel does not know (a newer peer's) is kept as `Other`
//! and written back unchanged, so a round trip never loses it.

macro_rules! string_enum {
    ($(#[$meta:meta])* $ty:ident { $($(#[$vmeta:meta])* $variant:ident => $wire:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $ty {
            $($(#[$vmeta])* $variant,)*
            /// A value keel does not know, kept verbatim.
            Other(String),
        }

        impl $ty {
            /// The wire name.
            pub fn as_str(&self) -> &str {
                match self {
                    $($ty::$variant => $wire,)*
                    $ty::Other(s) => s,
                }
            }

            /// The value for a wire name (unknown names become `Other`).
            pub fn from_wire(s: &str) -> Self {
                match s {
                    $($wire => $ty::$variant,)*
                    other => $ty::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
                Ok($ty::from_wire(&s))
            }
        }
    };
}

string_enum!(
    /// The `subtype` of a `result` frame.
    ResultSubtype {
        /// The model finished its answer.
        Success => "success",
        /// The run failed: an API error, an interrupt, an internal error.
        ErrorDuringExecution => "error_during_execution",
        /// `--max-turns` was reached.
        ErrorMaxTurns => "error_max_turns",
        /// `--max-budget-usd` was reached.
        ErrorMaxBudgetUsd => "error_max_budget_usd",
        /// `--json-schema`: the model's structured output kept failing the schema.
        ErrorMaxStructuredOutputRetries => "error_max_structured_output_retries",
    }
);

string_enum!(
    /// The `terminal_reason` of a `result` frame.
    TerminalReason {
        /// The model ended its turn.
        Completed => "completed",
        /// The API failed permanently or stayed unavailable.
        ApiError => "api_error",
        /// The turn cap was reached.
        MaxTurns => "max_turns",
        /// The cost budget was reached.
        BudgetExhausted => "budget_exhausted",
        /// Interrupted while the model was streaming.
        AbortedStreaming => "aborted_streaming",
        /// Interrupted while tools ran.
        AbortedTools => "aborted_tools",
        /// A hook stopped the run.
        HookStopped => "hook_stopped",
        /// keel itself failed (an I/O error writing output or the transcript, a bug).
        ModelError => "model_error",
        /// The model declined to answer (`stop_reason: "refusal"`).
        Refusal => "refusal",
        /// Replies kept being cut off by the output limit.
        MalformedToolUseExhausted => "malformed_tool_use_exhausted",
        /// The conversation did not fit the context window, even after compacting it.
        PromptTooLong => "prompt_too_long",
        /// The turn could not be set up (bad input, a transcript that cannot be written).
        TurnSetupFailed => "turn_setup_failed",
        /// `--json-schema`: every allowed structured-output call failed the schema.
        StructuredOutputRetryExhausted => "structured_output_retry_exhausted",
        /// `--json-schema`: the model ended its turn without giving the structured output
        /// (keel's own).
        StructuredOutputMissing => "structured_output_missing",
        /// A capability the run required is missing (keel's own).
        CapabilityMissing => "capability_missing",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_survive_a_round_trip() {
        let r: TerminalReason = serde_json::from_str("\"rapid_refill_breaker\"").unwrap();
        assert_eq!(r, TerminalReason::Other("rapid_refill_breaker".into()));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            "\"rapid_refill_breaker\""
        );
        let r: TerminalReason = serde_json::from_str("\"prompt_too_long\"").unwrap();
        assert_eq!(r, TerminalReason::PromptTooLong);
        let s: ResultSubtype = serde_json::from_str("\"error_max_turns\"").unwrap();
        assert_eq!(s, ResultSubtype::ErrorMaxTurns);
    }
}
