//! A profile's `credential_process`: a command that prints credentials as JSON (`Version`
//! 1). It runs as a child of keel with no input, a time limit and a cap on what it may print,
//! and is killed when the limit passes or the request that wanted it is cancelled.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt as _;

use super::fetch::{checked, Timed};
use super::time::parse_rfc3339;
use crate::error::{ApiError, ApiErrorKind};

/// How long a credential process may run.
pub const PROCESS_TIMEOUT: Duration = Duration::from_secs(30);
/// The most a credential process may print on stdout.
const MAX_STDOUT: u64 = 64 * 1024;
/// The most of its stderr kept for an error message.
const MAX_STDERR: u64 = 4 * 1024;
/// The longest command line believed.
pub const MAX_COMMAND: usize = 4096;

/// One `credential_process`.
#[derive(Debug)]
pub struct Process {
    /// The profile it belongs to (for messages).
    pub profile: String,
    /// The command, run by the shell.
    pub command: String,
    /// How long it may run ([`PROCESS_TIMEOUT`]).
    pub timeout: Duration,
}

impl Process {
    /// For messages.
    pub fn describe(&self) -> String {
        format!(
            "the credential_process of the AWS profile {:?}",
            self.profile
        )
    }

    fn error(&self, what: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            ApiErrorKind::Config,
            format!(
                "{} ({}) {what}",
                self.describe(),
                crate::anthropic::truncate(&self.command, 200)
            ),
        )
    }

    /// Run the command and read its credentials.
    pub async fn fetch(&self) -> Result<Timed, ApiError> {
        #[cfg(unix)]
        let mut cmd = {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(&self.command);
            c
        };
        #[cfg(not(unix))]
        let mut cmd = {
            let mut c = tokio::process::Command::new("cmd");
            c.arg("/C").arg(&self.command);
            c
        };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A group of its own, so what the shell starts dies with it.
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| self.error(format!("could not start: {e}")))?;
        let mut group = Group(child.id());
        let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(self.error("could not be given pipes"));
        };
        let run = async {
            let read_out = async {
                let mut stdout = Vec::new();
                out.take(MAX_STDOUT + 1)
                    .read_to_end(&mut stdout)
                    .await
                    .map_err(|e| self.error(format!("could not be read: {e}")))?;
                if stdout.len() as u64 > MAX_STDOUT {
                    return Err(self.error(format!("printed more than {MAX_STDOUT} bytes")));
                }
                Ok(stdout)
            };
            let read_err = async {
                let mut stderr = Vec::new();
                // What does not fit is drained, so the process is never stuck writing it.
                let mut err = err;
                let _ = (&mut err).take(MAX_STDERR).read_to_end(&mut stderr).await;
                let _ = tokio::io::copy(&mut err, &mut tokio::io::sink()).await;
                Ok(stderr)
            };
            let (stdout, stderr) = tokio::try_join!(read_out, read_err)?;
            let status = child
                .wait()
                .await
                .map_err(|e| self.error(format!("could not be waited for: {e}")))?;
            Ok((status, stdout, stderr))
        };
        let (status, stdout, stderr) = match tokio::time::timeout(self.timeout, run).await {
            Ok(r) => r?,
            // `child` is dropped with `run`: kill_on_drop ends it.
            Err(_) => {
                return Err(self.error(format!(
                    "did not finish within {} s and was stopped",
                    self.timeout.as_secs()
                )))
            }
        };
        group.0 = None;
        if !status.success() {
            let said = String::from_utf8_lossy(&stderr);
            let said: String = said
                .trim()
                .chars()
                .filter(|c| !c.is_control() || *c == '\n')
                .collect();
            return Err(self.error(format!(
                "failed ({status}){}{}",
                if said.is_empty() { "" } else { ": " },
                crate::anthropic::truncate(&said, 1000)
            )));
        }
        self.parse(&stdout)
    }

    fn parse(&self, stdout: &[u8]) -> Result<Timed, ApiError> {
        let v: Value = serde_json::from_slice(stdout)
            .map_err(|e| self.error(format!("did not print JSON ({e})")))?;
        match v.get("Version").and_then(Value::as_u64) {
            Some(1) => {}
            other => {
                return Err(self.error(format!(
                    "printed JSON of Version {other:?}; keel reads Version 1"
                )))
            }
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        let creds = checked(
            s("AccessKeyId"),
            s("SecretAccessKey"),
            s("SessionToken"),
            &self.describe(),
        )?;
        let expires = match v.get("Expiration") {
            None | Some(Value::Null) => None,
            Some(e) => Some(e.as_str().and_then(parse_rfc3339).ok_or_else(|| {
                self.error(format!(
                    "printed an Expiration that is not an RFC 3339 time: {e}"
                ))
            })?),
        };
        Ok(Timed { creds, expires })
    }
}

/// Kills the process group of a credential process that did not finish (a time limit, a
/// cancelled request, an early error); disarmed once it has exited.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
