//! Starting the CLI in its own process group, waiting for it, and stopping it.
//!
//! One task owns the `Child` and reaps it; signals go through that task, so a signal is only
//! ever sent to a process group whose leader has not been reaped yet (its id cannot have been
//! reused).

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::argv::render_command;
use crate::error::{Error, Result};

/// What to start.
pub(crate) struct Spec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    pub env_remove: Vec<String>,
    pub pipe_stdin: bool,
}

/// A started CLI.
pub(crate) struct Spawned {
    pub stdin: Option<ChildStdin>,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    pub pid: u32,
    pub command: String,
    /// `None` while running; the exit code once reaped (128 + N for signal N).
    pub exit: watch::Receiver<Option<i32>>,
    pub killer: Killer,
}

/// Sends signals to the CLI's process group (through the task that owns the child).
///
/// The request is a single slot, not a queue: the supervisor delivers the latest signal asked
/// for, so asking never waits and never grows. A SIGKILL is never replaced by a milder signal.
#[derive(Clone, Debug)]
pub(crate) struct Killer {
    tx: Arc<watch::Sender<Option<Signal>>>,
}

impl Killer {
    /// Signals the process group, unless the CLI has already been reaped.
    pub(crate) fn signal(&self, sig: Signal) {
        self.tx.send_if_modified(|wanted| {
            if *wanted == Some(Signal::SIGKILL) && sig != Signal::SIGKILL {
                return false;
            }
            *wanted = Some(sig);
            true
        });
    }
}

/// Kills the CLI's process group when dropped: the owner of a session holds it.
#[derive(Debug)]
pub(crate) struct ProcessGuard {
    killer: Killer,
}

impl ProcessGuard {
    pub(crate) fn new(killer: Killer) -> ProcessGuard {
        ProcessGuard { killer }
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        self.killer.signal(Signal::SIGKILL);
    }
}

/// How a close ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escalation {
    /// The CLI exited after its stdin was closed.
    None,
    /// It needed SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
}

/// The outcome of [`Client::close`](crate::Client::close).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closed {
    /// The exit code (128 + N for signal N); `None` if the CLI was still not reaped after SIGKILL.
    pub exit_code: Option<i32>,
    /// Which step ended it.
    pub escalation: Escalation,
}

/// Starts the CLI. A missing executable is [`Error::CliNotFound`]; any other failure
/// [`Error::Spawn`].
pub(crate) fn spawn(spec: Spec) -> Result<Spawned> {
    let command = render_command(&spec.program, &spec.args);
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(if spec.pipe_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own group: a stop (or a timeout) reaches everything it started, and a Ctrl-C
        // meant for the host's terminal does not.
        .process_group(0);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound && !spec.program.exists() {
            Error::CliNotFound {
                path: spec.program.clone(),
            }
        } else {
            Error::Spawn {
                command: command.clone(),
                source,
            }
        }
    })?;
    let pid = child.id().unwrap_or(0);
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(Error::Spawn {
            command,
            source: std::io::Error::other("the CLI's stdout or stderr pipe is missing"),
        });
    };
    let stdin = child.stdin.take();
    let (exit_tx, exit) = watch::channel(None);
    let (tx, rx) = watch::channel(None);
    tokio::spawn(supervise(child, pid, rx, exit_tx));
    Ok(Spawned {
        stdin,
        stdout,
        stderr,
        pid,
        command,
        exit,
        killer: Killer { tx: Arc::new(tx) },
    })
}

/// Owns the child: reaps it, and forwards signals to its group until then. When every
/// [`Killer`] is gone, the group is killed; when the CLI exits, what is left of its group too.
async fn supervise(
    mut child: Child,
    pid: u32,
    mut rx: watch::Receiver<Option<Signal>>,
    exit_tx: watch::Sender<Option<i32>>,
) {
    let group = Pid::from_raw(pid as i32);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            asked = rx.changed() => match asked {
                Ok(()) => {
                    let sig = *rx.borrow_and_update();
                    if let Some(sig) = sig {
                        let _ = killpg(group, sig);
                    }
                }
                Err(_) => {
                    let _ = killpg(group, Signal::SIGKILL);
                    break child.wait().await;
                }
            },
        }
    };
    // Whatever the CLI left running in its group is an orphan of this run: kill it now. The
    // leader was reaped a moment ago, so the group id cannot belong to anyone else yet (and
    // while members remain, the kernel does not reuse it).
    let _ = killpg(group, Signal::SIGKILL);
    let code = status.map(exit_code).unwrap_or(-1);
    let _ = exit_tx.send(Some(code));
}

fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Waits up to `limit` for the exit code.
pub(crate) async fn wait_exit(
    exit: &mut watch::Receiver<Option<i32>>,
    limit: Duration,
) -> Option<i32> {
    let waited = match tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await {
        Ok(Ok(v)) => *v,
        _ => None,
    };
    waited.or_else(|| *exit.borrow())
}

/// Completes once the CLI has been reaped.
pub(crate) async fn exited(exit: &mut watch::Receiver<Option<i32>>) {
    let _ = exit.wait_for(Option::is_some).await;
}

/// Waits for the exit code with no limit (the supervisor always reports one).
pub(crate) async fn exit_code_of(exit: &mut watch::Receiver<Option<i32>>) -> i32 {
    let waited = match exit.wait_for(Option::is_some).await {
        Ok(v) => *v,
        Err(_) => None,
    };
    waited.or_else(|| *exit.borrow()).unwrap_or(-1)
}

/// On Linux, the CLI gets SIGKILL when the thread that started it dies (the host crashed or was
/// killed), so it cannot outlive its owner. The SDK starts the CLI from the async task that
/// creates the session; with tokio that is a runtime worker thread, which lives as long as the
/// runtime.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use nix::errno::Errno;
    use nix::sys::prctl;
    use nix::unistd::getppid;

    // Read before the fork: in the child, getppid() must still be this process, or the parent
    // died between fork and prctl and the death signal would never come.
    let parent = nix::unistd::getpid();
    let in_child = move || -> std::io::Result<()> {
        prctl::set_pdeathsig(Signal::SIGKILL)?;
        if getppid() != parent {
            return Err(Errno::ESRCH.into());
        }
        Ok(())
    };
    // The death signal is a property of the child process itself: only code run between fork
    // and exec can set it, hence the one `pre_exec`.
    #[allow(unsafe_code)]
    // SAFETY: `in_child` runs in the forked child before exec. It only makes the prctl and
    // getppid system calls and reads errno (all async-signal-safe); it takes no locks and does
    // not allocate (an `io::Error` made from an errno is a plain integer).
    unsafe {
        cmd.pre_exec(in_child);
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_sigkill_is_never_replaced_by_a_milder_signal() {
        let (tx, rx) = watch::channel(None);
        let killer = Killer { tx: Arc::new(tx) };
        killer.signal(Signal::SIGTERM);
        assert_eq!(*rx.borrow(), Some(Signal::SIGTERM));
        killer.signal(Signal::SIGKILL);
        killer.signal(Signal::SIGTERM);
        assert_eq!(*rx.borrow(), Some(Signal::SIGKILL));
    }
}
