//! The signals that stop a run, read the same way by every front end.

use keel_protocol::CancelReason;

/// Wait for the next stopping signal: SIGINT is the user (`user_interrupted`); SIGTERM (keel
/// asked to shut down) and SIGHUP (the terminal or the ssh connection went away) are
/// `shutdown`. `None` if the handlers cannot be installed.
pub async fn next() -> Option<CancelReason> {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return None;
    };
    Some(tokio::select! {
        _ = int.recv() => CancelReason::UserInterrupted,
        _ = term.recv() => CancelReason::Shutdown,
        _ = hup.recv() => CancelReason::Shutdown,
    })
}

/// The stopping signals, listened to from the moment this is made (so one that arrives while
/// the session shuts down is not lost between two listeners).
pub struct Stops {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Stops {
    /// Listen for SIGINT, SIGTERM and SIGHUP; `None` if the handlers cannot be installed.
    pub fn install() -> Option<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(Self {
            int: signal(SignalKind::interrupt()).ok()?,
            term: signal(SignalKind::terminate()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
    }

    /// The next stopping signal.
    pub async fn next(&mut self) -> CancelReason {
        tokio::select! {
            _ = self.int.recv() => CancelReason::UserInterrupted,
            _ = self.term.recv() => CancelReason::Shutdown,
            _ = self.hup.recv() => CancelReason::Shutdown,
        }
    }
}

/// Shut `session` down; a stopping signal meanwhile cuts its hooks short (their process
/// groups are killed) instead of being ignored until a SessionEnd hook's own deadline, up
/// to an hour. Returns how many leftover process groups were stopped.
pub async fn shutdown(session: &keel_core::Session, stops: Option<Stops>) -> usize {
    let stop = async move {
        match stops {
            Some(mut s) => {
                let why = s.next().await;
                tracing::warn!("a signal during shutdown ({why:?}) cut the hooks short");
            }
            None => std::future::pending().await,
        }
    };
    session.shutdown_until(stop).await
}
