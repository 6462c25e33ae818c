//! keel's one way to start a process: Bash commands, command hooks and MCP stdio servers all go
//! through [`Spawn`], so each of them is owned the same way.
//!
//! What a process started here gets, whoever asked for it:
//! - a supervisor of its own ([`crate::supervise`]) that leads a new session (so a fresh process
//!   group) and is a child subreaper: what the process daemonizes (`setsid`, a double fork)
//!   is re-parented to the supervisor, not to init, and stopped with the rest;
//! - death with keel: the supervisor's parent-death signal takes the whole tree down when keel
//!   ends, even by SIGKILL (through the launcher, which leaves with keel, when one runs);
//! - stdin from /dev/null or a pipe, stdout and stderr on pipes keel reads (how much of them it
//!   keeps is the caller's choice: Bash keeps head and tail, hooks a capped prefix, MCP lines);
//! - a [`Child`] handle: the exit status (from the supervisor's report), a stop (SIGTERM to the
//!   group, a grace, SIGKILL), and on drop a kill of the whole tree, escaped processes included.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::unix::pipe::{Receiver, Sender};

pub use crate::supervise::{ExitStatus, Report};

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// A string that must reach the kernel holds a NUL byte (it cannot be passed to exec).
    #[error("{0} holds a NUL byte")]
    Nul(&'static str),
    /// An environment variable to set has an empty name or one holding `=` (or a NUL byte).
    #[error("the environment variable name {name:?} is empty or holds '=' or a NUL byte")]
    EnvName {
        /// The name as it was given.
        name: String,
    },
    /// The program named without a `/` is no executable file in any directory of `PATH`.
    #[error("`{program}` was not found: no executable file of that name in PATH")]
    NotFound {
        /// The program as it was named.
        program: String,
    },
    /// The system refused: a pipe, the fork, the launcher, the sandbox or the exec itself.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A process to start (a builder; [`Spawn::spawn`] starts it).
#[derive(Clone, Debug)]
pub struct Spawn {
    program: OsString,
    args: Vec<OsString>,
    cwd: PathBuf,
    env_add: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    env_clear: bool,
    stdin_piped: bool,
    sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    launcher: bool,
}

impl Spawn {
    /// `program` with no arguments yet, in keel's working directory, with keel's environment,
    /// stdin from /dev/null, through the launcher when one is enabled.
    pub fn program(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: PathBuf::from("."),
            env_add: Vec::new(),
            env_remove: Vec::new(),
            env_clear: false,
            stdin_piped: false,
            sandbox: None,
            launcher: true,
        }
    }

    /// `<shell> -c <line>`.
    pub fn shell(shell: impl Into<OsString>, line: &str) -> Self {
        Self::program(shell).arg("-c").arg(line)
    }

    /// Add one argument.
    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Add arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The working directory (a relative program path with a `/` is taken relative to it).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = dir.into();
        self
    }

    /// Set (or replace) one environment variable.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        let key = key.into();
        self.env_add.retain(|(k, _)| *k != key);
        self.env_add.push((key, value.into()));
        self
    }

    /// Leave one of keel's environment variables out.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        let key = key.into();
        self.env_add.retain(|(k, _)| *k != key);
        self.env_remove.push(key);
        self
    }

    /// Start from an empty environment (only what [`env`](Self::env) sets).
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    /// Give the process a pipe as stdin ([`Child::take_stdin`]) instead of /dev/null.
    pub fn stdin_piped(mut self) -> Self {
        self.stdin_piped = true;
        self
    }

    /// Run it (and all it starts) in `sandbox`; a sandbox that cannot be entered is an error.
    pub fn sandbox(mut self, sandbox: Option<Arc<crate::sandbox::Sandbox>>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Fork the supervisor from this process even when a launcher is enabled.
    pub fn without_launcher(mut self) -> Self {
        self.launcher = false;
        self
    }

    /// Start it. Without a running launcher the supervisor is forked from this process: then
    /// call this from a tokio worker thread (or another long-lived thread), never from
    /// `spawn_blocking`, since the parent-death signal fires when the *thread* that forked
    /// exits. Needs a tokio runtime (the pipes are registered with it).
    pub fn spawn(&self) -> Result<Child, SpawnError> {
        let program = resolve(&self.program, &self.cwd, self.path_var().as_deref())?;
        let args = self.arg_strings(&program)?;
        let env = self.env_strings()?;
        let pipe = crate::supervise::ReportPipe::new()?;
        let devnull = std::fs::File::open("/dev/null")?;
        let pipe2 = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from);
        let stdin_pipe = match self.stdin_piped {
            true => Some(pipe2()?),
            false => None,
        };
        let (out_r, out_w) = pipe2()?;
        let (err_r, err_w) = pipe2()?;
        // keel's ends are made ready before anything starts: a failure here must not leave a
        // process running that nobody tracks.
        let stdout = Receiver::from_owned_fd(out_r)?;
        let stderr = Receiver::from_owned_fd(err_r)?;
        let report = Receiver::from_owned_fd(pipe.read)?;
        let (stdin, stdin_r) = match stdin_pipe {
            Some((r, w)) => (Some(Sender::from_owned_fd(w)?), Some(r)),
            None => (None, None),
        };
        let stdin_fd = stdin_r
            .as_ref()
            .map_or(devnull.as_raw_fd(), |r| r.as_raw_fd());
        let pid = if self.launcher {
            let request = crate::launcher::Request {
                args: &args,
                env: &env,
                cwd: &self.cwd,
                stdin: stdin_fd,
                stdout: out_w.as_raw_fd(),
                stderr: err_w.as_raw_fd(),
                report: pipe.write.as_raw_fd(),
                sandbox: self
                    .sandbox
                    .as_deref()
                    .map(crate::sandbox::Sandbox::confine),
            };
            crate::launcher::launch(&request).transpose()?
        } else {
            None
        };
        let pid = match pid {
            Some(pid) => pid,
            None => {
                let exec = crate::supervise::ShellExec::from_strings(args, env);
                let stdin = match stdin_r {
                    Some(r) => Stdio::from(r),
                    None => Stdio::null(),
                };
                let io = ForkIo {
                    stdin,
                    stdout: Stdio::from(out_w),
                    stderr: Stdio::from(err_w),
                };
                fork_supervisor(&program, &self.cwd, exec, io, &pipe.write, &devnull, self)?
            }
        };
        // keel's copies of the process's ends (kept until here, for the launcher's request) go
        // when this returns: the readers must see the process close them.
        Ok(Child {
            pid,
            stdin,
            stdout: Some(stdout),
            stderr: Some(stderr),
            report: Some(report),
            report_text: Vec::new(),
            ended: None,
            supervisor_exited: false,
            armed: true,
        })
    }

    /// The `PATH` a program named without a `/` is looked up in: the process's own.
    fn path_var(&self) -> Option<OsString> {
        if let Some((_, v)) = self.env_add.iter().find(|(k, _)| k == "PATH") {
            return Some(v.clone());
        }
        if self.env_clear || self.env_remove.iter().any(|k| k == "PATH") {
            return None;
        }
        std::env::var_os("PATH")
    }

    fn arg_strings(&self, program: &Path) -> Result<Vec<CString>, SpawnError> {
        let nul = || SpawnError::Nul("an argument");
        let mut out = Vec::with_capacity(self.args.len() + 1);
        out.push(CString::new(program.as_os_str().as_bytes()).map_err(|_| nul())?);
        for a in &self.args {
            out.push(CString::new(a.as_bytes()).map_err(|_| nul())?);
        }
        Ok(out)
    }

    /// keel's environment (unless cleared) less what is removed or replaced, then what is set.
    fn env_strings(&self) -> Result<Vec<CString>, SpawnError> {
        let nul = || SpawnError::Nul("the environment");
        let pair = |k: &OsStr, v: &OsStr| {
            let mut kv = Vec::with_capacity(k.len() + v.len() + 1);
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).map_err(|_| nul())
        };
        let mut env = Vec::new();
        if !self.env_clear {
            for (k, v) in std::env::vars_os() {
                let dropped =
                    self.env_remove.contains(&k) || self.env_add.iter().any(|(a, _)| *a == k);
                if !dropped {
                    env.push(pair(&k, &v)?);
                }
            }
        }
        for (k, v) in &self.env_add {
            if k.is_empty() || k.as_bytes().contains(&b'=') || k.as_bytes().contains(&0) {
                return Err(SpawnError::EnvName {
                    name: k.to_string_lossy().into_owned(),
                });
            }
            env.push(pair(k, v)?);
        }
        Ok(env)
    }
}

/// The stdio of a supervisor forked here.
struct ForkIo {
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
}

/// Fork the supervisor from this process; returns its pid. It is reaped in the background.
fn fork_supervisor(
    program: &Path,
    cwd: &Path,
    exec: crate::supervise::ShellExec,
    io: ForkIo,
    report: &std::os::fd::OwnedFd,
    devnull: &std::fs::File,
    spec: &Spawn,
) -> Result<i32, SpawnError> {
    // The process std forks becomes the supervisor and starts the program itself (it never
    // execs the program named here).
    let mut cmd = tokio::process::Command::new(program);
    cmd.current_dir(cwd)
        .stdin(io.stdin)
        .stdout(io.stdout)
        .stderr(io.stderr)
        .kill_on_drop(false);
    let keel = nix::unistd::Pid::this();
    let report = crate::supervise::raw(report);
    let null = devnull.as_raw_fd();
    let sandbox = spec.sandbox.clone();
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: `become_supervisor` makes raw system calls only, on fixed buffers and
    // on what `exec` prepared before the fork, and its errors are raw errnos (an io::Error from
    // an errno does not allocate).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            let confine = sandbox.as_deref().map(crate::sandbox::Sandbox::confine);
            crate::supervise::become_supervisor(keel, report, null, &exec, confine)
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the supervisor vanished as it started"))?;
    // The supervisor may stay while background jobs of its group run: reap it whenever it ends.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(pid as i32)
}

/// Where `program` is: as given when it holds a `/` (relative to `cwd`), else the first
/// executable file of that name in `path`.
fn resolve(program: &OsStr, cwd: &Path, path: Option<&OsStr>) -> Result<PathBuf, SpawnError> {
    let p = Path::new(program);
    if program.is_empty() {
        return Err(SpawnError::NotFound {
            program: String::new(),
        });
    }
    if program.as_bytes().contains(&b'/') {
        return Ok(if p.is_absolute() {
            p.to_owned()
        } else {
            cwd.join(p)
        });
    }
    for dir in std::env::split_paths(path.unwrap_or_default()) {
        let dir = if dir.is_absolute() {
            dir
        } else {
            cwd.join(dir)
        };
        let candidate = dir.join(p);
        let executable = candidate.is_file()
            && nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok();
        if executable {
            return Ok(candidate);
        }
    }
    Err(SpawnError::NotFound {
        program: program.to_string_lossy().into_owned(),
    })
}

/// A process started by [`Spawn`], with its supervisor. Dropping it kills the whole tree at
/// once (unless [`leave_running`](Self::leave_running) handed it to someone else).
#[derive(Debug)]
pub struct Child {
    pid: i32,
    stdin: Option<Sender>,
    stdout: Option<Receiver>,
    stderr: Option<Receiver>,
    report: Option<Receiver>,
    report_text: Vec<u8>,
    ended: Option<Report>,
    /// The report pipe reached its end: the supervisor has exited.
    supervisor_exited: bool,
    armed: bool,
}

impl Child {
    /// The supervisor's pid, which is also the id of the process group the process runs in.
    pub fn pgid(&self) -> i32 {
        self.pid
    }

    /// The write end of the process's stdin (with [`Spawn::stdin_piped`]; once).
    pub fn take_stdin(&mut self) -> Option<Sender> {
        self.stdin.take()
    }

    /// The read end of the process's stdout (once).
    pub fn take_stdout(&mut self) -> Option<Receiver> {
        self.stdout.take()
    }

    /// The read end of the process's stderr (once).
    pub fn take_stderr(&mut self) -> Option<Receiver> {
        self.stderr.take()
    }

    /// Wait until the process has ended, and say how (the supervisor's report; its status is
    /// `None` when the supervisor itself was killed). Cancel-safe: a wait cut short (a
    /// timeout) loses nothing, and after the end every call answers at once.
    pub async fn wait(&mut self) -> Report {
        use tokio::io::AsyncReadExt;
        if let Some(r) = &self.ended {
            return r.clone();
        }
        let mut buf = [0u8; 1024];
        while let Some(pipe) = self.report.as_mut() {
            match pipe.read(&mut buf).await {
                Ok(0) => {
                    self.report = None;
                    self.supervisor_exited = true;
                }
                Err(_) => self.report = None,
                Ok(n) => {
                    // Reports are a few short lines; a flood would be a bug, not a reason to
                    // grow.
                    if self.report_text.len() < 64 * 1024 {
                        self.report_text.extend_from_slice(&buf[..n]);
                    }
                    if Report::complete(&String::from_utf8_lossy(&self.report_text)) {
                        self.report = None;
                    }
                }
            }
        }
        let report = Report::parse(&String::from_utf8_lossy(&self.report_text));
        self.ended = Some(report.clone());
        report
    }

    /// How the process ended, if that is known already (no wait).
    pub fn ended(&self) -> Option<&Report> {
        self.ended.as_ref()
    }

    /// Stop it: SIGTERM to its group (the supervisor then stops what left the group), up to
    /// `grace` for the group to empty, then the supervisor kills everything it holds and the
    /// group. Returns how many processes were alive in the group, the supervisor included.
    pub async fn stop(&mut self, grace: Duration) -> usize {
        if self.nothing_left() {
            self.armed = false;
            return 0;
        }
        let n = crate::process::stop_group(self.pid, grace).await;
        self.armed = false;
        n
    }

    /// Kill the whole tree now, without waiting (what dropping the handle does).
    pub fn kill(&mut self) {
        if !self.armed || self.nothing_left() {
            self.armed = false;
            return;
        }
        self.armed = false;
        if self.supervisor_gone() {
            // The supervisor was killed before it could finish: its pid may be another
            // process's by now, so only its group (which keeps that id while any member
            // lives) is signalled, never the pid itself.
            crate::process::signal_group(self.pid, nix::sys::signal::Signal::SIGKILL);
        } else {
            crate::process::kill_supervised(self.pid);
        }
    }

    /// Whether the supervisor said nothing was left when the process ended (it stays while
    /// anything runs, and nothing it no longer holds can appear), reading a report that has
    /// come without waiting for one. Its pid may be another process's by then.
    fn nothing_left(&mut self) -> bool {
        self.supervisor_gone();
        self.ended
            .as_ref()
            .is_some_and(|r| r.running == Some(false))
    }

    /// Whether the supervisor has exited: its report pipe is at its end (only the supervisor
    /// holds the write end). Reads what is pending without blocking (the pipe is
    /// non-blocking) and keeps it for [`Child::wait`]; at the end, the report is parsed.
    fn supervisor_gone(&mut self) -> bool {
        let Some(pipe) = self.report.as_ref() else {
            return self.supervisor_exited;
        };
        let mut buf = [0u8; 1024];
        loop {
            match nix::unistd::read(pipe.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    self.report = None;
                    self.supervisor_exited = true;
                    let report = Report::parse(&String::from_utf8_lossy(&self.report_text));
                    self.ended.get_or_insert(report);
                    return true;
                }
                Ok(n) => {
                    if self.report_text.len() < 64 * 1024 {
                        self.report_text.extend_from_slice(&buf[..n]);
                    }
                    // A whole report ends the reading, as in `wait` (the supervisor may stay
                    // while background jobs run).
                    let text = String::from_utf8_lossy(&self.report_text);
                    if Report::complete(&text) {
                        self.ended = Some(Report::parse(&text));
                        self.report = None;
                        return false;
                    }
                }
                // Empty for now (the supervisor is alive), or unreadable: not known to be gone.
                Err(_) => return false,
            }
        }
    }

    /// Let the process's group keep running after this handle is dropped: whoever calls this
    /// takes over stopping it (Bash registers it with the session's
    /// [`ProcessRegistry`](crate::ProcessRegistry)). Its supervisor still ends it with keel.
    pub fn leave_running(&mut self) {
        self.armed = false;
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // No look in /proc first (a drop may happen on an async worker): a tree that is gone
        // already just makes the signal fail.
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Running (a zombie has ended: only its exit status is left).
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    }

    #[tokio::test]
    async fn a_program_is_found_on_path_and_talks_through_its_pipes() {
        let mut child = Spawn::program("cat")
            .cwd("/")
            .stdin_piped()
            .without_launcher()
            .spawn()
            .unwrap();
        let mut input = child.take_stdin().unwrap();
        let mut out = child.take_stdout().unwrap();
        input.write_all(b"through the supervisor").await.unwrap();
        drop(input);
        let mut got = String::new();
        out.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "through the supervisor");
        assert_eq!(child.wait().await.status, Some(ExitStatus::Code(0)));
    }

    #[tokio::test]
    async fn environment_is_set_removed_and_cleared_as_asked() {
        let run = |s: Spawn| async move {
            let mut child = s.without_launcher().spawn().unwrap();
            let mut out = child.take_stdout().unwrap();
            let mut got = String::new();
            out.read_to_string(&mut got).await.unwrap();
            child.wait().await;
            got
        };
        let got = run(Spawn::shell("/bin/sh", "echo \"$A|${HOME-unset}\"")
            .env("A", "set")
            .env_remove("HOME"))
        .await;
        assert_eq!(got, "set|unset\n");
        let got = run(Spawn::program("/usr/bin/env").env_clear().env("ONLY", "1")).await;
        assert_eq!(got, "ONLY=1\n");
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_that_names_it() {
        let e = Spawn::program("keel-no-such-program").spawn().unwrap_err();
        assert!(
            matches!(&e, SpawnError::NotFound { program } if program == "keel-no-such-program"),
            "{e}"
        );
        let e = Spawn::program("/nonexistent/x")
            .without_launcher()
            .spawn()
            .unwrap_err();
        assert!(matches!(e, SpawnError::Io(_)), "{e}");
        let e = Spawn::program("/bin/true")
            .env("A=B", "x")
            .spawn()
            .unwrap_err();
        assert!(
            matches!(&e, SpawnError::EnvName { name } if name == "A=B"),
            "{e}"
        );
        let e = Spawn::shell("/bin/sh", "echo \0").spawn().unwrap_err();
        assert!(matches!(e, SpawnError::Nul("an argument")), "{e}");
    }

    #[tokio::test]
    async fn a_handle_whose_supervisor_is_gone_knows_it_without_a_wait_and_signals_nothing() {
        let mut child = Spawn::shell("/bin/sh", "exit 3")
            .cwd("/")
            .without_launcher()
            .spawn()
            .unwrap();
        let pid = child.pgid();
        // The supervisor ends (and is reaped): its pid is free for another process.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while alive(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "the supervisor did not end"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // No `wait` was called: stopping reads the report that came, and sends nothing.
        assert_eq!(child.stop(Duration::from_secs(1)).await, 0);
        let ended = child.ended().expect("the report was read").clone();
        assert_eq!(ended.status, Some(ExitStatus::Code(3)));
        assert_eq!(ended.running, Some(false));
        assert_eq!(child.wait().await.status, Some(ExitStatus::Code(3)));
    }

    #[tokio::test]
    async fn dropping_the_handle_kills_a_daemonized_grandchild() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let line = format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 300' & wait; sleep 300",
            pidfile.display()
        );
        let child = Spawn::shell("/bin/sh", &line)
            .without_launcher()
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let pid = loop {
            if let Some(p) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                break p;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "no pid file");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        drop(child);
        let t0 = std::time::Instant::now();
        while alive(pid) {
            assert!(t0.elapsed() < Duration::from_secs(20), "{pid} survived");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
