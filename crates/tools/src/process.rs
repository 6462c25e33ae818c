//! Process supervision: every command keel runs gets its own session (and so its own process
//! group), stdin from /dev/null, and dies with keel. Stopping a command means SIGTERM to its whole
//! group, a grace period, then SIGKILL to the group — never a signal to ourselves.
//!
//! [`ProcessRegistry`] remembers groups a command left running in the background (a dev server
//! started with `&`), so the session can stop them when it ends.

use std::io;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How often we look at /proc while waiting for a group to die.
const POLL: Duration = Duration::from_millis(10);
/// How long we wait for the kernel to finish off a group after SIGKILL.
const AFTER_KILL: Duration = Duration::from_secs(2);

/// A command running under its supervisor: the supervisor's pid (the group's id), the read
/// ends of the command's stdout and stderr, and of the pipe the supervisor reports on.
pub(crate) struct Spawned {
    pub pid: i32,
    pub stdout: tokio::net::unix::pipe::Receiver,
    pub stderr: tokio::net::unix::pipe::Receiver,
    pub report: std::os::fd::OwnedFd,
    /// The supervisor as keel's own child, to be reaped (`None`: the launcher started it, and
    /// the launcher's exit reaps it).
    pub child: Option<Child>,
}

/// Spawn `<shell> -c <command>` in `cwd` under a supervisor (see [`crate::supervise`]): a new
/// session and process group, stdin /dev/null, stdout and stderr piped, `KEEL=1` added to the
/// inherited environment. Nothing the command starts outlives keel, not even after keel is
/// SIGKILLed.
///
/// With a launcher enabled ([`crate::launcher::enable`]) the launcher forks the supervisor;
/// otherwise this process does. Then it must be called from a tokio worker thread (or any
/// long-lived thread), never from `spawn_blocking`: the supervisor's parent-death signal fires
/// when the *thread* that forked it exits, and blocking-pool threads exit when idle.
pub(crate) fn spawn_shell(
    shell: &Path,
    command: &str,
    cwd: &Path,
    sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
) -> io::Result<Spawned> {
    use std::os::fd::AsRawFd;
    let nul = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the command or the environment holds a NUL byte",
        )
    };
    let (args, env) =
        crate::supervise::shell_strings(shell, command, &[("KEEL", "1")]).ok_or_else(nul)?;
    let pipe = crate::supervise::ReportPipe::new()?;
    let devnull = std::fs::File::open("/dev/null")?;
    let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
    let (out_r, out_w) = nix::unistd::pipe2(cloexec)?;
    let (err_r, err_w) = nix::unistd::pipe2(cloexec)?;
    // Readers made before anything starts: a failure here must not leave a command running
    // that nobody tracks.
    let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(out_r)?;
    let stderr = tokio::net::unix::pipe::Receiver::from_owned_fd(err_r)?;
    let spawned = |pid: i32, child: Option<Child>, report: std::os::fd::OwnedFd| Spawned {
        pid,
        stdout,
        stderr,
        report,
        child,
    };
    let request = crate::launcher::Request {
        args: &args,
        env: &env,
        cwd,
        stdin: devnull.as_raw_fd(),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        report: pipe.write.as_raw_fd(),
        sandbox: sandbox.as_deref().map(crate::sandbox::Sandbox::confine),
    };
    if let Some(started) = crate::launcher::launch(&request) {
        let pid = started?;
        // keel's copies of the command's ends go: the reader must see the command close them.
        drop((out_w, err_w, pipe.write, devnull));
        return Ok(spawned(pid, None, pipe.read));
    }
    let exec = crate::supervise::ShellExec::from_strings(args, env);
    // The process std forks becomes the supervisor and starts the shell itself (it never execs
    // the program named here).
    let mut cmd = Command::new(shell);
    cmd.current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(err_w))
        .kill_on_drop(false);
    let keel = nix::unistd::Pid::this();
    let report = crate::supervise::raw(&pipe.write);
    let null = devnull.as_raw_fd();
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
    let child = cmd.spawn()?;
    // Only the supervisor writes reports: keel's copy of the write end must go, or the read end
    // would never see the supervisor close it.
    drop(pipe.write);
    drop(devnull);
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the supervisor vanished as it started"))?;
    Ok(spawned(pid as i32, Some(child), pipe.read))
}

/// Make keel a child subreaper: a process one of keel's commands (or anything else keel
/// started) orphans is re-parented to keel, not to init, so keel can still find and stop it.
/// Call it once, early, in the process that runs sessions (the `keel` binary does).
pub fn own_descendants() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_child_subreaper(true)?;
    Ok(())
}

/// SIGKILL every child of this process and the process group each leads (the last step before
/// keel exits: whatever is still a child of keel then was orphaned by something keel started).
/// Returns how many were signalled.
pub fn kill_orphans() -> usize {
    let mut n = 0;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for t in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        for pid in list
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let p = Pid::from_raw(pid);
            if let Ok(g) = nix::unistd::getpgid(Some(p)) {
                if is_signallable(g.as_raw()) {
                    let _ = killpg(g, Signal::SIGKILL);
                }
            }
            let _ = nix::sys::signal::kill(p, Signal::SIGKILL);
            n += 1;
        }
    }
    n
}

/// The live (not zombie) processes whose process group is `pgid`, from /proc.
/// `None` when /proc cannot be read.
pub fn group_members(pgid: i32) -> Option<Vec<i32>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ..." — comm may contain spaces and parens.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|s| s.parse::<i32>().ok());
        if pgrp == Some(pgid) && state != Some("Z") && state != Some("X") {
            out.push(pid);
        }
    }
    Some(out)
}

/// How many live processes are in group `pgid` (best effort).
pub fn group_size(pgid: i32) -> usize {
    match group_members(pgid) {
        Some(m) => m.len(),
        None => usize::from(group_alive(pgid)),
    }
}

/// Whether any live process is left in group `pgid`.
pub fn group_alive(pgid: i32) -> bool {
    // The common case, a group that is gone entirely, needs no scan of /proc.
    if is_signallable(pgid) && killpg(Pid::from_raw(pgid), None) == Err(nix::errno::Errno::ESRCH) {
        return false;
    }
    match group_members(pgid) {
        Some(m) => !m.is_empty(),
        None => is_signallable(pgid) && killpg(Pid::from_raw(pgid), None).is_ok(),
    }
}

/// A group we may signal: a real group that is not our own (and not "every process").
fn is_signallable(pgid: i32) -> bool {
    pgid > 1 && pgid != nix::unistd::getpgrp().as_raw() && pgid != std::process::id() as i32
}

/// Send `sig` to group `pgid`, refusing anything that could hit keel itself.
pub fn signal_group(pgid: i32, sig: Signal) -> bool {
    is_signallable(pgid) && killpg(Pid::from_raw(pgid), sig).is_ok()
}

/// Stop group `pgid`: SIGTERM, wait up to `grace` for it to empty, then SIGKILL.
/// Returns how many processes were alive in the group when it was stopped.
pub async fn stop_group(pgid: i32, grace: Duration) -> usize {
    stop_groups(&[pgid], grace).await
}

/// [`stop_group`] for several groups at once (one shared grace period), waiting (briefly) for
/// the killed groups to be gone.
///
/// Watching the groups means reading /proc every few milliseconds, so it is done on the blocking
/// pool. Dropping the future does not stop it: the groups are still killed.
pub async fn stop_groups(pgids: &[i32], grace: Duration) -> usize {
    let pgids = pgids.to_vec();
    let job = tokio::task::spawn_blocking(move || stop_and_wait(&pgids, grace, AFTER_KILL));
    // The job does not panic; were it to, there is no count to give.
    job.await.unwrap_or(0)
}

/// [`stop_groups`] for threads that may block (e.g. a `Drop` or a shutdown path without a
/// runtime). It does not wait for the killed groups to be gone.
pub fn stop_groups_blocking(pgids: &[i32], grace: Duration) -> usize {
    stop_and_wait(pgids, grace, Duration::ZERO)
}

/// SIGTERM, up to `grace` for the groups to empty, SIGKILL, then up to `after_kill` for the
/// kernel to finish them off. Blocks the thread.
fn stop_and_wait(pgids: &[i32], grace: Duration, after_kill: Duration) -> usize {
    let (count, live) = terminate(pgids);
    if live.is_empty() {
        return count;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && live.iter().any(|&g| group_alive(g)) {
        std::thread::sleep(POLL);
    }
    let killed = kill(&live);
    let deadline = Instant::now() + after_kill;
    while !killed.is_empty() && Instant::now() < deadline && killed.iter().any(|&g| group_alive(g))
    {
        std::thread::sleep(POLL);
    }
    count
}

/// Count the live members, then SIGTERM (and SIGCONT, so stopped processes see it) every live
/// group. Returns the count and the groups that were signalled.
fn terminate(pgids: &[i32]) -> (usize, Vec<i32>) {
    let mut count = 0;
    let mut live = Vec::new();
    for &g in pgids {
        if !is_signallable(g) {
            continue;
        }
        let n = group_size(g);
        if n == 0 {
            continue;
        }
        count += n;
        if signal_group(g, Signal::SIGTERM) {
            signal_group(g, Signal::SIGCONT);
            live.push(g);
        }
    }
    (count, live)
}

fn kill(live: &[i32]) -> Vec<i32> {
    live.iter()
        .copied()
        .filter(|&g| group_alive(g) && signal_group(g, Signal::SIGKILL))
        .collect()
}

/// A process group keel started that was still running when its command returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackedGroup {
    /// The process group id (the pid of the shell that led it).
    pub pgid: i32,
    /// The command that started it.
    pub command: String,
}

/// The process groups a session's commands left running. Session-scoped: share one `Arc` per
/// session. `kill_all` stops them (end of session, shutdown); dropping the registry SIGKILLs
/// whatever is still alive, since nobody could stop those processes afterwards.
#[derive(Debug, Default)]
pub struct ProcessRegistry {
    groups: Mutex<Vec<TrackedGroup>>,
}

impl ProcessRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remember group `pgid` (started by `command`) so it is stopped at the end of the session.
    /// Reads /proc (to forget dead groups): call it off the async workers.
    pub fn register(&self, pgid: i32, command: impl Into<String>) {
        if !is_signallable(pgid) {
            return;
        }
        let mut groups = self.lock();
        groups.retain(|g| g.pgid != pgid && group_alive(g.pgid));
        groups.push(TrackedGroup {
            pgid,
            command: command.into(),
        });
    }

    /// The tracked groups that are still alive (dead ones are forgotten). Reads /proc.
    pub fn live(&self) -> Vec<TrackedGroup> {
        let mut groups = self.lock();
        groups.retain(|g| group_alive(g.pgid));
        groups.clone()
    }

    /// Stop every tracked group still alive (SIGTERM, `grace`, SIGKILL). Returns how many
    /// processes were alive in them.
    pub async fn kill_all(&self, grace: Duration) -> usize {
        let pgids = self.take();
        stop_groups(&pgids, grace).await
    }

    /// [`kill_all`](Self::kill_all) for code that may block (no async runtime at hand).
    pub fn kill_all_blocking(&self, grace: Duration) -> usize {
        let pgids = self.take();
        stop_groups_blocking(&pgids, grace)
    }

    fn take(&self) -> Vec<i32> {
        let groups = std::mem::take(&mut *self.lock());
        groups.into_iter().map(|g| g.pgid).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<TrackedGroup>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for ProcessRegistry {
    fn drop(&mut self) {
        // Signalled without looking in /proc first (a drop may happen on an async worker): a
        // group that is already gone just makes the signal fail.
        for g in self.take() {
            kill_supervised(g);
        }
    }
}

/// Stop a supervised command's whole tree at once, without waiting: its supervisor (the group's
/// leader) SIGKILLs everything it holds, processes that left the group included. A group
/// without its supervisor is SIGKILLed directly.
pub(crate) fn kill_supervised(pgid: i32) {
    if !is_signallable(pgid) {
        return;
    }
    let leader = nix::sys::signal::kill(Pid::from_raw(pgid), Signal::SIGUSR1);
    if leader.is_err() {
        signal_group(pgid, Signal::SIGKILL);
    }
}

/// Kills a command's group if the future running it is dropped before it finished.
pub(crate) struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl GroupGuard {
    pub(crate) fn new(pgid: i32) -> Self {
        Self { pgid, armed: true }
    }

    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // No look in /proc first, as in the registry's drop.
        if self.armed {
            kill_supervised(self.pgid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_signals_ourselves() {
        assert!(!is_signallable(0));
        assert!(!is_signallable(1));
        assert!(!is_signallable(-5));
        assert!(!is_signallable(nix::unistd::getpgrp().as_raw()));
        assert!(!is_signallable(std::process::id() as i32));
    }

    #[test]
    fn our_own_group_is_visible() {
        let me = nix::unistd::getpgrp().as_raw();
        let members = group_members(me).expect("/proc readable");
        assert!(members.contains(&(std::process::id() as i32)) || members.is_empty());
    }

    #[tokio::test]
    async fn registry_kills_background_group() {
        let spawned =
            spawn_shell(Path::new("/bin/sh"), "sleep 1000", Path::new("/"), None).unwrap();
        let mut child = spawned
            .child
            .expect("no launcher in unit tests: keel forks");
        let pgid = spawned.pid;
        let reg = ProcessRegistry::new();
        reg.register(pgid, "sleep 1000");
        assert_eq!(reg.live().len(), 1);
        // The supervisor, the shell, and the sleep if the shell forked it rather than exec'ing it.
        let n = reg.kill_all(Duration::from_millis(200)).await;
        assert!((2..=3).contains(&n), "{n}");
        child.wait().await.unwrap();
        assert!(!group_alive(pgid));
        assert!(reg.live().is_empty());
    }
}
