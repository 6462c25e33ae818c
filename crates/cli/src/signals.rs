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
