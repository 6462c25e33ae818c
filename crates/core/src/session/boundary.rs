//! The boundary around a turn: whatever panics inside it becomes the honest internal-error
//! result (docs/failure-model.md), never a process that dies without one.
//!
//! After a panic the turn's token is cancelled (so the tool calls it spawned stop and their
//! process groups die), and calls whose obligation was lost with the panicking future get
//! synthetic results, so the history stays well-formed and the session can go on or resume.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use keel_protocol::{CancelReason, ContentBlock};
use keel_tools::CancelToken;

use super::turn::TurnStats;
use super::Session;
use crate::end::TurnEnd;
use crate::event::NonExecution;

impl Session {
    /// Run the turn inside the panic boundary.
    pub(super) async fn guarded_turn(
        &mut self,
        prompt: Vec<ContentBlock>,
        turn: &CancelToken,
        stats: &mut TurnStats,
    ) -> TurnEnd {
        let run = AssertUnwindSafe(self.turn_inner(prompt, turn, stats))
            .catch_unwind()
            .await;
        match run {
            Ok(Ok(end)) => end,
            Ok(Err(e)) => TurnEnd::Internal {
                message: e.to_string(),
            },
            Err(payload) => {
                let what = crate::dispatch::panic_message(payload.as_ref());
                tracing::debug!("a turn panicked: {what}");
                turn.cancel(CancelReason::Shutdown);
                self.repair_after_panic().await;
                TurnEnd::Internal {
                    message: format!(
                        "an internal error stopped the turn (a panic: {what}). This is a keel bug; please report it with the session id. The conversation was saved and can be resumed."
                    ),
                }
            }
        }
    }

    /// Give every call left open by the panic a result, in the history and the transcript.
    async fn repair_after_panic(&mut self) {
        let blocks = self.history.close_orphaned(|c| {
            format!(
                "keel failed internally while handling this {} call, so its result was lost. It may have run; check before repeating it.",
                c.name
            )
        });
        // A call whose real result was already recorded keeps it in the transcript (a resume
        // reads that one); only the others are recorded as lost.
        let lost: Vec<ContentBlock> = blocks
            .into_iter()
            .filter(|b| match b {
                ContentBlock::ToolResult(r) => !self.turn_state.is_done(&r.tool_use_id),
                _ => false,
            })
            .collect();
        if let Err(e) = self.emit_unrun(lost, NonExecution::Interrupted).await {
            tracing::error!("could not record the repaired calls: {e}");
        }
    }
}
