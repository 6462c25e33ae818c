//! A cancellation token that remembers why it was cancelled.

use std::sync::{Arc, OnceLock};

use keel_protocol::CancelReason;
use tokio_util::sync::CancellationToken;

/// A cancel token with a reason. Children are cancelled with their parent and report the
/// parent's reason unless they were cancelled first for a reason of their own.
#[derive(Clone, Debug, Default)]
pub struct CancelToken {
    inner: CancellationToken,
    reason: Arc<OnceLock<CancelReason>>,
    parent: Option<Box<CancelToken>>,
}

impl CancelToken {
    /// A fresh, uncancelled root token.
    pub fn new() -> Self {
        Self::default()
    }

    /// A child token: cancelled when `self` is, and cancellable on its own.
    pub fn child(&self) -> Self {
        Self {
            inner: self.inner.child_token(),
            reason: Arc::new(OnceLock::new()),
            parent: Some(Box::new(self.clone())),
        }
    }

    /// Cancel with a reason. The first reason wins; later calls change nothing.
    pub fn cancel(&self, reason: CancelReason) {
        let _ = self.reason.set(reason);
        self.inner.cancel();
    }

    /// Whether this token (or an ancestor) is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }

    /// Why this token was cancelled, if it was.
    pub fn reason(&self) -> Option<CancelReason> {
        if !self.inner.is_cancelled() {
            return None;
        }
        if let Some(r) = self.reason.get() {
            return Some(*r);
        }
        // Cancelled through an ancestor: the nearest ancestor that holds a reason tells why.
        let mut p = self.parent.as_deref();
        while let Some(t) = p {
            if let Some(r) = t.reason.get() {
                return Some(*r);
            }
            p = t.parent.as_deref();
        }
        Some(CancelReason::Shutdown)
    }

    /// Resolves when the token is cancelled.
    pub async fn cancelled(&self) {
        self.inner.cancelled().await
    }

    /// The plain tokio-util token, for APIs that only need "stop now".
    pub fn as_tokio(&self) -> &CancellationToken {
        &self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_reports_parent_reason() {
        let turn = CancelToken::new();
        let tool = turn.child();
        assert_eq!(tool.reason(), None);
        turn.cancel(CancelReason::UserInterrupted);
        assert!(tool.is_cancelled());
        assert_eq!(tool.reason(), Some(CancelReason::UserInterrupted));
    }

    #[test]
    fn own_reason_wins_and_parent_untouched() {
        let turn = CancelToken::new();
        let tool = turn.child();
        tool.cancel(CancelReason::SiblingError);
        turn.cancel(CancelReason::UserInterrupted);
        assert_eq!(tool.reason(), Some(CancelReason::SiblingError));
        assert_eq!(turn.reason(), Some(CancelReason::UserInterrupted));
    }
}
