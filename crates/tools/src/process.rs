//! Process groups: every process keel starts ([`crate::spawn`]) gets its own session (and so
//! its own process group) and dies with keel. Stopping a command means SIGTERM to its whole
//! group, a grace period, then SIGKILL to the group — never a signal to ourselves.
//!
//! [`ProcessRegistry`] remembers groups a command left running in the background (a dev server
//! started with `&`), so the session can stop them when it ends.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// How often we look at /proc while waiting for a group to die.
const POLL: Duration = Duration::from_millis(10);
/// How long we wait for the kernel to finish off a group after SIGKILL.
const AFTER_KILL: Duration = Duration::from_secs(2);

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
/// Supervisors among them (their launcher gone, they came back to keel) are first told to kill
/// everything they hold, and given up to a second: a SIGKILL to a supervisor's group would take
/// the supervisor before it stopped what left the group (a daemon), orphaning exactly that.
/// Returns how many were signalled.
pub fn kill_orphans() -> usize {
    let supervisors: Vec<i32> = children_of_self()
        .into_iter()
        .filter(|&p| is_supervisor(p))
        .collect();
    for &p in &supervisors {
        let _ = nix::sys::signal::kill(Pid::from_raw(p), Signal::SIGUSR1);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline && supervisors.iter().any(|&p| running(p)) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut n = 0;
    for pid in children_of_self() {
        let p = Pid::from_raw(pid);
        if let Ok(g) = nix::unistd::getpgid(Some(p)) {
            if is_signallable(g.as_raw()) {
                let _ = killpg(g, Signal::SIGKILL);
            }
        }
        let _ = nix::sys::signal::kill(p, Signal::SIGKILL);
        n += 1;
    }
    n
}

/// The children of every thread of this process, from /proc.
fn children_of_self() -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    out
}

/// Whether `pid` is a command's supervisor: named so, and leading its own group.
fn is_supervisor(pid: i32) -> bool {
    let named = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim_end() == crate::supervise::NAME);
    named && nix::unistd::getpgid(Some(Pid::from_raw(pid))).is_ok_and(|g| g.as_raw() == pid)
}

/// Whether `pid` exists and has not ended (a zombie has).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
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
    if !after_kill.is_zero() {
        // A supervisor that did not finish the job in time: the group goes at once.
        for &g in &killed {
            if group_alive(g) {
                signal_group(g, Signal::SIGKILL);
            }
        }
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

/// The end of the grace: each live group's supervisor (its leader) is told to kill everything
/// it holds — processes that left the group included — and then its group and itself; a
/// SIGKILL to the group itself would take the supervisor first and orphan what left the group.
fn kill(live: &[i32]) -> Vec<i32> {
    live.iter()
        .copied()
        .filter(|&g| group_alive(g))
        .inspect(|&g| kill_supervised(g))
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
        let mut child = crate::spawn::Spawn::shell("/bin/sh", "sleep 1000")
            .cwd("/")
            .without_launcher()
            .spawn()
            .unwrap();
        let pgid = child.pgid();
        child.leave_running();
        let reg = ProcessRegistry::new();
        reg.register(pgid, "sleep 1000");
        assert_eq!(reg.live().len(), 1);
        // The supervisor, the shell, and the sleep if the shell forked it rather than exec'ing it.
        let n = reg.kill_all(Duration::from_millis(200)).await;
        assert!((2..=3).contains(&n), "{n}");
        assert_eq!(
            child.wait().await.status,
            Some(crate::spawn::ExitStatus::Signal(15))
        );
        assert!(!group_alive(pgid));
        assert!(reg.live().is_empty());
    }
}
