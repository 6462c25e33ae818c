//! File helpers shared by the file tools: temporary names, binary detection, numbered lines,
//! and running blocking work raced against the cancel token.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::{CancelReason, CancelToken, ToolContext, ToolOutcome};

/// How many bytes at the start of a file decide whether it is binary.
pub(crate) const SNIFF_BYTES: usize = 8 * 1024;

/// A fresh temporary name beside `target`, for writing a file that is then renamed over it.
pub(crate) fn temp_name(target: &Path, dir: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    dir.join(format!(
        ".{name}.keel-tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Whether the first bytes of a file look binary: a NUL byte, or mostly invalid UTF-8.
pub(crate) fn looks_binary(sample: &[u8]) -> bool {
    if sample.contains(&0) {
        return true;
    }
    let mut invalid = 0usize;
    let mut rest = sample;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(_) => break,
            Err(e) => match e.error_len() {
                Some(len) => {
                    invalid += len;
                    rest = &rest[e.valid_up_to() + len..];
                }
                // An incomplete sequence at the end of the sample: the sample cut it.
                None => break,
            },
        }
    }
    invalid * 10 > sample.len() * 3
}

/// One line in `cat -n` style: the number right-aligned in 6 columns, a tab, the text.
pub(crate) fn numbered(n: usize, text: &str) -> String {
    format!("{n:>6}\t{text}")
}

/// A byte count for people.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// A blocking job saw the cancel token and stopped before finishing.
#[derive(Debug)]
pub(crate) struct Cancelled;

/// Why [`off_worker`] has no result.
#[derive(Debug)]
pub(crate) enum NotDone {
    /// The token was cancelled first (the job may still be winding down).
    Cancelled,
    /// The job panicked.
    Panicked(String),
}

/// Run blocking `work` (file system calls, directory walks) on the blocking pool so it never
/// holds up an async worker, raced against `cancel`. `work` gets a clone of the token and
/// should check it between units of work (files, lines) so the thread stops soon after a
/// cancel. A job that has already finished wins over a cancel that comes at the same time.
pub(crate) async fn off_worker<T, F>(cancel: &CancelToken, work: F) -> Result<T, NotDone>
where
    T: Send + 'static,
    F: FnOnce(CancelToken) -> T + Send + 'static,
{
    let token = cancel.clone();
    let handle = tokio::task::spawn_blocking(move || work(token));
    tokio::select! {
        biased;
        res = handle => res.map_err(|e| NotDone::Panicked(e.to_string())),
        _ = cancel.cancelled() => Err(NotDone::Cancelled),
    }
}

/// A job's own failure (not a stop), for jobs run with [`run_blocking`].
pub(crate) fn job_failed(message: impl Into<String>) -> Result<ToolOutcome, Cancelled> {
    Ok(ToolOutcome::failed(message))
}

/// [`off_worker`] for a tool's whole job. A call whose token is already cancelled never starts
/// (`Stopped`, started: false); one cancelled while the job runs, or whose job gave up on the
/// token, is `Stopped` with started: true and no partial output.
pub(crate) async fn run_blocking<F>(cx: &ToolContext, work: F) -> ToolOutcome
where
    F: FnOnce(CancelToken) -> Result<ToolOutcome, Cancelled> + Send + 'static,
{
    let begun = Instant::now();
    if cx.cancel.is_cancelled() {
        return cx.stopped(false, String::new(), begun.elapsed(), 0);
    }
    // The deadline cancels the job's own token (so a walk stops between files); a job stuck
    // inside one system call is left to finish on its thread, unseen.
    let job = cx.cancel.child();
    let deadline = cx.limits.file_deadline;
    let timed_out = tokio::select! {
        biased;
        r = off_worker(&job, work) => Some(r),
        _ = tokio::time::sleep(deadline) => None,
    };
    match timed_out {
        None => {
            job.cancel(CancelReason::Timeout);
            ToolOutcome::failed(format!(
                "The file system did not answer within {} s (a hung network mount or a failing \
                 disk?), so the call was given up. Nothing was changed by keel after that point; \
                 check the path and retry, or narrow the search.",
                deadline.as_secs_f64()
            ))
        }
        Some(Ok(Ok(outcome))) => outcome,
        Some(Ok(Err(Cancelled)) | Err(NotDone::Cancelled)) => {
            cx.stopped(true, String::new(), begun.elapsed(), 0)
        }
        Some(Err(NotDone::Panicked(e))) => {
            ToolOutcome::failed(format!("Internal error in the tool: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[tokio::test]
    async fn a_file_job_that_never_answers_ends_at_the_deadline_with_an_error() {
        let mut cx = ToolContext::new(std::env::temp_dir(), CancelToken::new());
        let limits = std::sync::Arc::make_mut(&mut cx.limits);
        limits.file_deadline = std::time::Duration::from_millis(50);
        let begun = Instant::now();
        // A job stuck in the file system: it never looks at its token.
        let out = run_blocking(&cx, |_| {
            std::thread::sleep(std::time::Duration::from_millis(800));
            Ok(ToolOutcome::ok("late"))
        })
        .await;
        assert!(begun.elapsed() < std::time::Duration::from_millis(700));
        match out {
            ToolOutcome::Failed { message, .. } => {
                assert!(
                    message.contains("did not answer within 0.05 s"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn binary_detection() {
        assert!(!looks_binary(b"hello\nworld\n"));
        assert!(!looks_binary("héllo wörld".as_bytes()));
        assert!(looks_binary(b"abc\0def"));
        assert!(looks_binary(&[0xff, 0xfe, 0xfa, 0x80, 0x81, b'a']));
        // A UTF-8 sequence cut by the end of the sample is not counted.
        let mut s = b"abc".to_vec();
        s.extend_from_slice(&"é".as_bytes()[..1]);
        assert!(!looks_binary(&s));
        // A few Latin-1 bytes in text are fine.
        assert!(!looks_binary(
            b"caf\xe9 au lait, une tasse de caf\xe9 chaud"
        ));
    }

    #[test]
    fn a_replaced_file_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.sh");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        crate::files::replace_contents(&p, b"new", &CancelToken::new())
            .unwrap()
            .unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        // No temp files left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_replaced_symlink_stays_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        crate::files::replace_contents(&link, b"new", &CancelToken::new())
            .unwrap()
            .unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn cancelled_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        fs::write(&p, "old").unwrap();
        let cancel = CancelToken::new();
        cancel.cancel(crate::CancelReason::UserInterrupted);
        assert!(crate::files::replace_contents(&p, b"new", &cancel).is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_tilde_path_expands_to_the_sessions_home_not_the_processes() {
        let cx = ToolContext::new("/work", CancelToken::new())
            .with_home(Some(PathBuf::from("/session/home")));
        assert_eq!(cx.resolve("~/a.txt"), PathBuf::from("/session/home/a.txt"));
        assert_eq!(cx.resolve("~"), PathBuf::from("/session/home"));
        assert_eq!(cx.resolve("b.txt"), PathBuf::from("/work/b.txt"));
        // Without a home, `~` is an ordinary name under the working directory.
        let cx = cx.with_home(None);
        assert_eq!(cx.resolve("~/a.txt"), PathBuf::from("/work/~/a.txt"));
    }

    #[tokio::test]
    async fn job_that_gives_up_is_stopped() {
        let cx = ToolContext::new(".", CancelToken::new());
        let token = cx.cancel.clone();
        let out = run_blocking(&cx, move |_| {
            token.cancel(crate::CancelReason::SiblingError);
            Err(Cancelled)
        })
        .await;
        assert!(matches!(
            out,
            ToolOutcome::Stopped {
                reason: crate::CancelReason::SiblingError,
                started: true,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn blocking_work_is_stopped_by_cancel() {
        use crate::CancelReason;
        let cx = ToolContext::new(".", CancelToken::new());
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
        let token = cx.cancel.clone();
        let call = tokio::spawn(async move {
            run_blocking(&cx, move |cancel| {
                let _ = started_tx.send(());
                while !cancel.is_cancelled() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let _ = done_tx.send(());
                Ok(ToolOutcome::ok("finished"))
            })
            .await
        });
        started_rx.await.unwrap();
        token.cancel(CancelReason::UserInterrupted);
        let out = call.await.unwrap();
        assert!(matches!(
            out,
            ToolOutcome::Stopped {
                reason: CancelReason::UserInterrupted,
                started: true,
                ..
            }
        ));
        // The blocking thread noticed the token and stopped too.
        done_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap();
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(10), "10 bytes");
        assert_eq!(human_size(2048), "2.0 KB");
        assert_eq!(human_size(5 * 1024 * 1024), "5.0 MB");
    }
}
