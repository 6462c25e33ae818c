//! The supervisor that holds each command's process tree, so that nothing a command started can
//! outlive keel — not even when keel itself is killed with SIGKILL.
//!
//! [`Spawn`](crate::spawn::Spawn) has a child forked — by keel's launcher ([`crate::launcher`]) when there is
//! one, else by keel — that leads a new session (and so a fresh process group), becomes a
//! *child subreaper*, and starts the shell with `posix_spawn`; the child stays behind as the
//! supervisor, never execs, and runs [`supervise`]. Because it is a subreaper, every process
//! the command leaves behind is re-parented to it rather than to init — daemons that called
//! `setsid` or double-forked included. It then:
//! - when the shell exits: stops every process that left the group (TERM, a short grace, KILL),
//!   reports the shell's exit status and what it stopped on a pipe keel reads, and stays while
//!   background jobs of the group run, stopping any process that escapes the group later;
//! - on SIGTERM (keel stopping the command): stops the escaped processes (the group itself gets
//!   keel's own signals);
//! - when its parent dies (keel, or the launcher, which leaves with keel: the parent-death
//!   signal, SIGUSR1) — or keel asks it to with SIGUSR1, when
//!   it must drop a command without waiting: SIGKILLs every process it holds and the whole
//!   group, itself last.
//!
//! Forked from keel, the supervisor is a fork of a multi-threaded process that never execs, so
//! it may only make async-signal-safe calls: raw system calls through `nix`, fixed-size buffers, no allocation.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use nix::sys::signal::{kill, killpg, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgid, getpgrp, getppid, Pid};

/// The supervisor's process name (`ps`, /proc/<pid>/comm): how keel knows one at exit.
pub(crate) const NAME: &str = "keel-supervisor";
/// How long escaped processes get between SIGTERM and SIGKILL. Shorter than keel's own grace
/// for the group, so the supervisor is done before keel escalates.
const ESCAPED_GRACE: Duration = Duration::from_millis(250);
/// The signal the supervisor receives when keel dies.
const KEEL_DIED: Signal = Signal::SIGUSR1;
/// How long a supervisor whose shell left processes behind waits for them to settle (leave the
/// group or not) before it reports.
const SETTLE: Duration = Duration::from_millis(100);
/// How often a supervisor whose shell has ended looks for processes that left the group.
const RESCAN: Duration = Duration::from_millis(100);
/// The most escaped processes one report names (the count is always exact).
const MAX_NAMED: usize = 16;

/// The pipe the supervisor reports on: its write end (kept by the supervisor only) and keel's
/// read end.
pub struct ReportPipe {
    pub read: OwnedFd,
    pub write: OwnedFd,
}

impl ReportPipe {
    /// A pipe whose ends close on exec: the shell never holds the report open.
    pub(crate) fn new() -> std::io::Result<Self> {
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        Ok(Self { read, write })
    }
}

/// What the supervisor said about one command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The shell's exit code, or the signal that killed it (`None`: no status came, the
    /// supervisor itself was killed).
    pub status: Option<ExitStatus>,
    /// Processes that had left the command's group and were stopped: (pid, name).
    pub stopped: Vec<(i32, String)>,
    /// How many were stopped (may be more than `stopped` names).
    pub stopped_count: usize,
    /// Whether processes of the command's own group were still running when the shell ended
    /// (background jobs): the supervisor holds every one of them as a child, so it knows
    /// without anyone scanning /proc. `None`: not reported (the supervisor was killed).
    pub running: Option<bool>,
}

/// How the shell ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl Report {
    /// Parse the supervisor's lines: `stopped <pid> <name>`, `stopped-count <n>`,
    /// `running <n>`, then `exit <code>` or `signal <n>`.
    pub(crate) fn parse(text: &str) -> Self {
        let mut r = Report::default();
        for line in text.lines() {
            let mut parts = line.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("stopped"), Some(pid), name) => {
                    if let Ok(pid) = pid.parse() {
                        r.stopped.push((pid, name.unwrap_or("?").to_owned()));
                    }
                }
                (Some("stopped-count"), Some(n), _) => r.stopped_count += n.parse().unwrap_or(0),
                (Some("running"), Some(n), _) => r.running = n.parse::<u64>().ok().map(|n| n > 0),
                (Some("exit"), Some(c), _) => r.status = c.parse().ok().map(ExitStatus::Code),
                (Some("signal"), Some(s), _) => r.status = s.parse().ok().map(ExitStatus::Signal),
                _ => {}
            }
        }
        r
    }

    /// Whether the shell's end was reported (the rest comes before it).
    pub(crate) fn complete(text: &str) -> bool {
        text.lines()
            .any(|l| l.starts_with("exit ") || l.starts_with("signal "))
    }
}

/// What the supervisor needs to start the shell, prepared in keel before the fork (the forked
/// child may not allocate): C strings and the null-terminated pointer arrays over them.
pub(crate) struct ShellExec {
    _strings: Vec<std::ffi::CString>,
    path: *const nix::libc::c_char,
    argv: Vec<*mut nix::libc::c_char>,
    envp: Vec<*mut nix::libc::c_char>,
}

// SAFETY: the pointers point into `_strings`, which the struct owns and never changes; nothing
// writes through them.
#[allow(unsafe_code)]
unsafe impl Send for ShellExec {}
#[allow(unsafe_code)]
unsafe impl Sync for ShellExec {}

impl ShellExec {
    /// Over `args` (the first is also the program's path) and `env` (`KEY=value` strings).
    pub(crate) fn from_strings(args: Vec<std::ffi::CString>, env: Vec<std::ffi::CString>) -> Self {
        let n_args = args.len();
        let mut strings = args;
        strings.extend(env);
        let ptr = |c: &std::ffi::CString| c.as_ptr() as *mut nix::libc::c_char;
        let mut argv: Vec<_> = strings[..n_args].iter().map(ptr).collect();
        argv.push(std::ptr::null_mut());
        let mut envp: Vec<_> = strings[n_args..].iter().map(ptr).collect();
        envp.push(std::ptr::null_mut());
        Self {
            path: argv[0],
            _strings: strings,
            argv,
            envp,
        }
    }
}

/// In the forked child, before exec: become the supervisor of a new session, start the shell
/// in it and supervise it. Never returns on success: this process never execs (the shell is
/// started with `posix_spawn`, which shares this process's memory until the shell execs).
/// `parent` is the process whose death ends everything (the forking process).
///
/// Must only make async-signal-safe calls (see the module doc).
pub(crate) fn become_supervisor(
    parent: Pid,
    report: RawFd,
    devnull: RawFd,
    shell: &ShellExec,
    sandbox: Option<crate::sandbox::Confine<'_>>,
) -> std::io::Result<()> {
    // Named for what it is (keel's name would mislead `ps`, and keel finds its supervisors by
    // it at exit); one prctl, async-signal-safe.
    let _ = nix::sys::prctl::set_name(c"keel-supervisor");
    let (pid, watched) = start(shell, sandbox)?;
    supervise(parent, pid, report, devnull, &watched)
}

/// The first half of [`become_supervisor`]: lead a new session, become a subreaper, enter the
/// sandbox and start the shell. Returns the shell's pid and the signals [`supervise`] waits
/// for (blocked from here on).
pub(crate) fn start(
    shell: &ShellExec,
    sandbox: Option<crate::sandbox::Confine<'_>>,
) -> std::io::Result<(Pid, SigSet)> {
    nix::unistd::setsid()?;
    nix::sys::prctl::set_child_subreaper(true)?;
    // The supervisor enters the sandbox itself, so the shell and all it starts inherit it;
    // if it cannot, the command does not start (the error reaches keel's spawn).
    if let Some(sb) = sandbox {
        sb.enter()?;
    }
    let mut watched = SigSet::empty();
    for s in [Signal::SIGCHLD, Signal::SIGTERM, KEEL_DIED] {
        watched.add(s);
    }
    // Blocked before the shell starts, so no SIGCHLD is lost; the shell starts with none blocked.
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&watched), None)?;
    let pid = spawn(shell)?;
    // The shell has started with SIGPIPE at its default; the supervisor itself ignores it. Its
    // writes to the report pipe fail once keel is gone (killed, its end closed), and SIGPIPE's
    // default would end the supervisor there — in the middle of stopping what the command
    // left behind, which would then outlive keel. A failed write is simply not reported.
    // SAFETY: setting a disposition to "ignore" installs no handler; async-signal-safe.
    #[allow(unsafe_code)]
    let _ =
        unsafe { nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn) };
    Ok((pid, watched))
}

/// Start the shell (stdio, working directory and session are this process's).
fn spawn(shell: &ShellExec) -> std::io::Result<Pid> {
    use nix::libc;
    // SAFETY: glibc's posix_spawn with attributes and no file actions does not allocate; the
    // attribute object lives on this stack and is destroyed before returning; argv and envp are
    // null-terminated arrays of valid C strings owned by `shell`.
    #[allow(unsafe_code)]
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        let rc = libc::posix_spawnattr_init(&mut attr);
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::posix_spawnattr_setsigmask(&mut attr, &none);
        libc::posix_spawnattr_setflags(&mut attr, libc::POSIX_SPAWN_SETSIGMASK as libc::c_short);
        let mut pid: libc::pid_t = 0;
        let rc = libc::posix_spawn(
            &mut pid,
            shell.path,
            std::ptr::null(),
            &attr,
            shell.argv.as_ptr(),
            shell.envp.as_ptr(),
        );
        libc::posix_spawnattr_destroy(&mut attr);
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(Pid::from_raw(pid))
    }
}

/// The supervisor's life. Never returns. `parent` (keel, or its launcher) is the process whose
/// death ends everything.
pub(crate) fn supervise(
    parent: Pid,
    shell: Pid,
    report: RawFd,
    devnull: RawFd,
    watched: &SigSet,
) -> ! {
    // stdin/stdout/stderr are the command's pipes: let them go, so keel sees the end of the
    // output when the command's own processes close it.
    for fd in 0..3 {
        let _ = nix::unistd::dup2(devnull, fd);
    }
    close_other_fds(report);
    let me = getpgrp();
    let ok = nix::sys::prctl::set_pdeathsig(KEEL_DIED).is_ok();
    if !ok || getppid() != parent {
        // keel died before it could be watched: take everything down now.
        kill_all(me);
        exit(1);
    }
    let mut shell_done = false;
    loop {
        // Once the shell is gone, look again now and then: a background job may leave the
        // group at any time (a late `setsid`), and no signal says so.
        let wait = if shell_done { Some(RESCAN) } else { None };
        match wait_signal(watched, wait) {
            Some(s) if s == KEEL_DIED => {
                kill_all(me);
                exit(1);
            }
            Some(Signal::SIGTERM) => {
                stop_escaped(me, report, false);
            }
            _ => {}
        }
        // Reap whatever ended; note the shell's status.
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == shell => {
                    shell_done = true;
                    settle(me);
                    stop_escaped(me, report, true);
                    report_running(report);
                    write_kv(report, b"exit ", code as i64, b"");
                }
                Ok(WaitStatus::Signaled(pid, s, _)) if pid == shell => {
                    shell_done = true;
                    settle(me);
                    stop_escaped(me, report, true);
                    report_running(report);
                    write_kv(report, b"signal ", s as i64, b"");
                }
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) => continue,
                Err(nix::errno::Errno::EINTR) => continue,
                // No child left: the command and everything it left behind are gone (the shell
                // may have been reaped while escaped processes were stopped, its status lost:
                // keel then reads the end of the report without one).
                Err(_) => exit(0),
            }
        }
        if shell_done {
            // Anything that escapes the group after the shell ended is stopped on sight.
            stop_escaped(me, report, false);
        }
    }
}

/// Stop the processes this supervisor holds that left its group (TERM, a grace, KILL), and with
/// `report`, say which on the report pipe.
fn stop_escaped(me: Pid, report: RawFd, say: bool) {
    let mut buf = [0u8; 8192];
    let mut groups = [0i32; 256];
    let mut n_groups = 0usize;
    let mut count = 0usize;
    for pid in children(&mut buf) {
        let Ok(g) = getpgid(Some(Pid::from_raw(pid))) else {
            continue;
        };
        if g == me {
            continue; // a background job of the command's own group: keel tracks the group
        }
        count += 1;
        if say && count <= MAX_NAMED {
            let mut name = [0u8; 32];
            let len = comm(pid, &mut name);
            write_kv(report, b"stopped ", pid as i64, &name[..len]);
        }
        if n_groups < groups.len() && !groups[..n_groups].contains(&g.as_raw()) {
            groups[n_groups] = g.as_raw();
            n_groups += 1;
        }
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    for &g in &groups[..n_groups] {
        if g > 1 && g != me.as_raw() {
            let _ = killpg(Pid::from_raw(g), Signal::SIGTERM);
            let _ = killpg(Pid::from_raw(g), Signal::SIGCONT);
        }
    }
    if count == 0 {
        if say {
            write_kv(report, b"stopped-count ", 0, b"");
        }
        return;
    }
    // Give them the grace, reaping as they go, then make sure.
    let step = Duration::from_millis(10);
    let mut waited = Duration::ZERO;
    while waited < ESCAPED_GRACE && escaped_left(me, &mut buf) {
        std::thread::sleep(step);
        waited += step;
        while let Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) =
            waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG))
        {}
    }
    for &g in &groups[..n_groups] {
        if g > 1 && g != me.as_raw() {
            let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
        }
    }
    for pid in children(&mut buf) {
        if getpgid(Some(Pid::from_raw(pid))).is_ok_and(|g| g != me) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    if say {
        write_kv(report, b"stopped-count ", count as i64, b"");
    }
}

/// Say how many processes the command left running in its group. Every one of them is a child
/// of this supervisor by now (a subreaper inherits the orphans of its descendants, and the
/// escaped ones were stopped), so its children are the exact answer.
fn report_running(report: RawFd) {
    let mut buf = [0u8; 8192];
    let n = children(&mut buf).count();
    write_kv(report, b"running ", n as i64, b"");
}

/// The shell ended with processes of its group still running: give a daemon being born (a
/// `nohup setsid cmd &` that has not called `setsid` yet) a moment to leave the group, so the
/// report can name it. Costs nothing when the shell left nothing behind.
fn settle(me: Pid) {
    let mut buf = [0u8; 8192];
    let mut waited = Duration::ZERO;
    while waited < SETTLE && children(&mut buf).next().is_some() && !escaped_left(me, &mut buf) {
        std::thread::sleep(Duration::from_millis(10));
        waited += Duration::from_millis(10);
    }
}

fn escaped_left(me: Pid, buf: &mut [u8; 8192]) -> bool {
    children(buf).any(|pid| getpgid(Some(Pid::from_raw(pid))).is_ok_and(|g| g != me))
}

/// keel is gone: SIGKILL every process held and the groups they lead, until none is left, then
/// the command's own group — this supervisor with it, so that comes last.
fn kill_all(me: Pid) {
    let mut buf = [0u8; 8192];
    for _ in 0..64 {
        let mut any = false;
        for pid in children(&mut buf) {
            any = true;
            if let Ok(g) = getpgid(Some(Pid::from_raw(pid))) {
                if g != me && g.as_raw() > 1 {
                    let _ = killpg(g, Signal::SIGKILL);
                }
            }
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        while let Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) =
            waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG))
        {}
        if !any {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = killpg(me, Signal::SIGKILL);
}

/// Wait for one of `watched` (blocked), at most `timeout` when given. `None`: timed out.
fn wait_signal(watched: &SigSet, timeout: Option<Duration>) -> Option<Signal> {
    let Some(t) = timeout else {
        return Some(watched.wait().unwrap_or(Signal::SIGCHLD));
    };
    let ts = nix::libc::timespec {
        tv_sec: t.as_secs() as nix::libc::time_t,
        tv_nsec: t.subsec_nanos() as nix::libc::c_long,
    };
    // SAFETY: sigtimedwait only reads the set and the timeout; a null info pointer is allowed.
    #[allow(unsafe_code)]
    let n = unsafe { nix::libc::sigtimedwait(watched.as_ref(), std::ptr::null_mut(), &ts) };
    Signal::try_from(n).ok()
}

/// This process's children, from `/proc/thread-self/children` (the supervisor has one thread).
fn children(buf: &mut [u8; 8192]) -> impl Iterator<Item = i32> + '_ {
    let len = read_file(b"/proc/thread-self/children", buf);
    buf[..len]
        .split(|b| *b == b' ' || *b == b'\n')
        .filter_map(parse_i32)
}

/// The command name of `pid` (at most 15 bytes, as the kernel keeps it).
fn comm(pid: i32, out: &mut [u8; 32]) -> usize {
    let mut path = [0u8; 40];
    let mut n = 0;
    for b in b"/proc/" {
        path[n] = *b;
        n += 1;
    }
    n += write_i64(&mut path[n..], pid as i64);
    for b in b"/comm" {
        path[n] = *b;
        n += 1;
    }
    let mut tmp = [0u8; 8192];
    let len = read_file(&path[..n], &mut tmp).min(out.len());
    let len = tmp[..len].iter().position(|b| *b == b'\n').unwrap_or(len);
    out[..len].copy_from_slice(&tmp[..len]);
    len
}

fn read_file(path: &[u8], buf: &mut [u8]) -> usize {
    let Ok(fd) = nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        return 0;
    };
    let mut len = 0;
    while len < buf.len() {
        match nix::unistd::read(fd, &mut buf[len..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    let _ = nix::unistd::close(fd);
    len
}

fn parse_i32(s: &[u8]) -> Option<i32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: i64 = 0;
    for b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(b - b'0');
    }
    i32::try_from(v).ok()
}

/// Write `n` in decimal at the start of `out`; returns the length.
fn write_i64(out: &mut [u8], n: i64) -> usize {
    let mut digits = [0u8; 20];
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    if neg {
        out[0] = b'-';
        len = 1;
    }
    for d in &digits[i..] {
        out[len] = *d;
        len += 1;
    }
    len
}

/// One report line: `key`, a number, optionally ` rest`, newline.
fn write_kv(fd: RawFd, key: &[u8], n: i64, rest: &[u8]) {
    let mut line = [0u8; 96];
    let mut len = key.len().min(32);
    line[..len].copy_from_slice(&key[..len]);
    len += write_i64(&mut line[len..], n);
    if !rest.is_empty() {
        line[len] = b' ';
        len += 1;
        let r = rest.len().min(line.len() - len - 1);
        line[len..len + r].copy_from_slice(&rest[..r]);
        len += r;
    }
    line[len] = b'\n';
    len += 1;
    // SAFETY: `fd` is the report pipe's write end, open for the supervisor's whole life.
    #[allow(unsafe_code)]
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let _ = nix::unistd::write(fd, &line[..len]);
}

/// Close every descriptor but stdio and `keep` (the fork inherited keel's, among them the pipe
/// the spawning thread waits on until exec: it must see this process let go of it).
pub(crate) fn close_other_fds(keep: RawFd) {
    // SAFETY: close_range only closes descriptors; keel's copies stay open in keel.
    #[allow(unsafe_code)]
    let ranged = unsafe {
        let a = if keep > 3 {
            nix::libc::syscall(nix::libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32)
        } else {
            0
        };
        let b = nix::libc::syscall(
            nix::libc::SYS_close_range,
            (keep + 1) as u32,
            u32::MAX,
            0u32,
        );
        a == 0 && b == 0
    };
    if !ranged {
        for fd in 3..4096 {
            if fd != keep {
                let _ = nix::unistd::close(fd);
            }
        }
    }
}

pub(crate) fn exit(code: i32) -> ! {
    // SAFETY: `_exit` ends the process at once, without running anything of keel's (atexit
    // handlers, destructors) in this forked copy.
    #[allow(unsafe_code)]
    unsafe {
        nix::libc::_exit(code)
    }
}

/// The raw descriptor of the report pipe's write end, for the pre-exec closure.
pub(crate) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_parse() {
        let r = Report::parse("stopped 12 sleep\nstopped 13 my daemon\nstopped-count 3\nexit 2\n");
        assert_eq!(r.status, Some(ExitStatus::Code(2)));
        assert_eq!(
            r.stopped,
            vec![(12, "sleep".into()), (13, "my daemon".into())]
        );
        assert_eq!(r.stopped_count, 3);
        assert!(Report::complete("stopped-count 0\nsignal 9\n"));
        assert!(!Report::complete("stopped-count 0\n"));
    }

    #[test]
    fn numbers_format_without_allocating() {
        let mut b = [0u8; 24];
        let n = write_i64(&mut b, -1234);
        assert_eq!(&b[..n], b"-1234");
        assert_eq!(parse_i32(b"4242"), Some(4242));
        assert_eq!(parse_i32(b"42x"), None);
    }
}
