//! An Entra ID token from the signed-in Azure CLI: `az account get-access-token` run as a
//! child process with a time limit, its output read with a size bound, killed if keel stops
//! waiting.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use super::{parse_token, Failure, COGNITIVE_RESOURCE};
use crate::error::{ApiError, ApiErrorKind};

/// The CLI's answer (or its complaint) larger than this is not read further.
const MAX_OUTPUT: u64 = 64 * 1024;

/// `az` on `path` (a `PATH`-style list), if there is one: a regular file that may be run.
pub fn find_az(path: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("az"))
        .find(|p| is_program(p))
}

fn is_program(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        std::fs::metadata(p).is_ok_and(|m| m.is_file())
    }
}

/// Ask `program` for a Foundry token; the outcome says whether the chain may try another
/// source (the CLI missing or not signed in) or must stop.
pub(crate) async fn token(
    program: &Path,
    tenant: Option<&str>,
    limit: Duration,
) -> Result<(String, Duration), Failure> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args([
        "account",
        "get-access-token",
        "--output",
        "json",
        "--resource",
        COGNITIVE_RESOURCE,
    ]);
    if let Some(t) = tenant {
        cmd.args(["--tenant", t]);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group: `az` is a shell script that starts Python without exec, so
    // killing the child alone would leave the interpreter running.
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| Failure::unavailable(format!("could not run {}: {e}", program.display())))?;
    let _group = Group(child.id());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let run = async {
        let read_out = async {
            if let Some(s) = stdout {
                let _ = s.take(MAX_OUTPUT).read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr {
                let _ = s.take(MAX_OUTPUT).read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        child.wait().await
    };
    let status = match tokio::time::timeout(limit, run).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(Failure::unavailable(format!(
                "could not wait for {}: {e}",
                program.display()
            )))
        }
        // Dropping the group guard ends the child and whatever it started.
        Err(_) => {
            return Err(Failure::failed(ApiError::new(
                ApiErrorKind::Config,
                format!(
                    "`az account get-access-token` did not answer within {} s",
                    limit.as_secs()
                ),
            )))
        }
    };
    if !status.success() {
        let text = String::from_utf8_lossy(&err);
        let text = crate::anthropic::truncate(text.trim(), 300).to_owned();
        let m = format!("`az account get-access-token` failed ({status}): {text}");
        // Not signed in: the usual state of a machine where the CLI is merely installed.
        return Err(if text.contains("az login") {
            Failure::unavailable(m)
        } else {
            Failure::failed(ApiError::new(ApiErrorKind::Config, m))
        });
    }
    parse_token(&out, "accessToken", "`az account get-access-token`").map_err(Failure::failed)
}

/// The child's process group, killed when keel stops waiting for it (done, timed out, or the
/// turn was cancelled): every process keel started ends with it.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            // A group that is already gone answers ESRCH; nothing to do then.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
