//! The terminal as the session's approver: a call the rules leave open becomes a question in
//! the live area, and the engine waits for the answer (or drops the question when the turn is
//! interrupted meanwhile).

use futures_util::future::BoxFuture;
use keel_core::approval::{Approval, ApprovalRequest, Approver};
use tokio::sync::{mpsc, oneshot};

/// A question for the UI and where its answer goes.
pub type Question = (ApprovalRequest, oneshot::Sender<Approval>);

/// Asks the person at the terminal.
#[derive(Debug)]
pub struct TerminalApprover {
    tx: mpsc::Sender<Question>,
}

impl TerminalApprover {
    /// An approver whose questions go to `tx`.
    pub fn with_sender(tx: mpsc::Sender<Question>) -> Self {
        Self { tx }
    }
}

impl Approver for TerminalApprover {
    fn approve(&self, req: ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            if self.tx.send((req, reply)).await.is_err() {
                return Approval::Deny {
                    message: "The terminal is gone, so nobody could approve this call.".into(),
                    interrupt: true,
                };
            }
            // The UI answers, or drops the question when it closes: never allowed by default.
            answer.await.unwrap_or(Approval::Deny {
                message: "The question was closed without an answer.".into(),
                interrupt: true,
            })
        })
    }
}
