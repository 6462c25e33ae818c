//! The launcher: a small process that forks each command's supervisor on keel's behalf.
//!
//! Forking keel itself for every command costs in proportion to keel's memory: the kernel copies
//! the page tables of every mapped page, write-protects them all, and keel then takes a page
//! fault on the first write to each page afterwards. In a long session that was ~0.6 ms of keel's
//! CPU per Bash call, and it grew with the conversation. The launcher is a fresh process (a
//! program started with [`LAUNCHER_ARG`], the socket to keel as its stdin), started with
//! `posix_spawn` when the first command needs it; it stays as small as it started, so a fork of
//! it costs the same at turn 1,000 as at turn 1, and keel pays one message each way.
//!
//! What a command gets is what [`spawn_shell`](crate::process) gives it either way: its own
//! session and process group under a supervisor, stdin from /dev/null, stdout and stderr on
//! keel's pipes, keel's environment as it is when the command starts (sent with the request),
//! the sandbox. Process ownership holds through the extra link: the launcher leaves as soon as
//! keel's end of the socket closes (keel exited or was SIGKILLed: the kernel closes it), and each
//! supervisor, whose parent is the launcher, takes its command's processes down when the
//! launcher dies. The launcher ignores the signals a terminal or a process group sends, so
//! Ctrl+C reaches keel, not it; it reaps its supervisors, so their CPU time (and their
//! commands') is counted to keel once keel reaps the launcher at exit ([`stop`]).
//!
//! Without a launcher (a program that never called [`enable`], or one whose launcher could not
//! start or died), commands are forked from the calling process as before.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::signal::{signal, SigHandler, Signal};
use nix::sys::socket::{
    recvmsg, sendmsg, setsockopt, socketpair, sockopt, AddressFamily, ControlMessage,
    ControlMessageOwned, MsgFlags, SockFlag, SockType,
};
use nix::unistd::Pid;

use crate::sandbox::Confine;
use crate::supervise::{self, ShellExec};

/// Marks a request (and its format's version).
const MAGIC: u32 = 0x6b65_6c31; // "kel1"
/// The request carries a sandbox (and its ruleset descriptor).
const FLAG_SANDBOX: u32 = 1;
/// The sandbox keeps the network.
const FLAG_NETWORK: u32 = 2;
/// The largest request the launcher reads (arguments and environment together; Linux itself
/// refuses more than a few megabytes of them at exec).
const MAX_PAYLOAD: u64 = 64 << 20;
/// How long keel waits for the launcher to say whether a command started.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);
/// Descriptors a request carries: the payload, stdin, stdout, stderr, the report pipe and,
/// with a sandbox, its ruleset.
const MAX_FDS: usize = 6;

/// The argument that makes a program serve as the launcher ([`serve_stdin`]).
pub const LAUNCHER_ARG: &str = "__keel-launcher";

/// The signals the launcher ignores (a terminal's or a process group's are for keel); every
/// other one it leaves at its default, so these are the only ones a supervisor resets.
const LAUNCHER_IGNORES: [Signal; 10] = [
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGHUP,
    Signal::SIGTERM,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGPIPE,
];

/// Set every signal that may be changed, real-time ones included, to its default: what keel's
/// own parent ignored (`nohup`, a service manager) is not passed on to commands. Handlers do
/// not survive the exec that started the launcher, so only "ignore" is undone here.
fn default_all_signals() {
    use nix::libc;
    // SAFETY: reading and resetting dispositions installs no handler; `sa` is a plain struct.
    #[allow(unsafe_code)]
    unsafe {
        for sig in 1..=libc::SIGRTMAX() {
            let internal = sig > libc::SIGSYS && sig < libc::SIGRTMIN();
            if sig == libc::SIGKILL || sig == libc::SIGSTOP || internal {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut sa) == 0
                && sa.sa_sigaction != libc::SIG_DFL
            {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// The launcher as keel sees it.
enum State {
    /// No program to start one with: fork each command here.
    Off,
    /// Start one (running this program with [`LAUNCHER_ARG`]) when a command needs it.
    Ready(std::path::PathBuf),
    /// Running: keel's end of the socket, and the process.
    Running(OwnedFd, std::process::Child),
    /// It could not start, or stopped answering: fork each command here from now on.
    Failed,
}

static LAUNCHER: Mutex<State> = Mutex::new(State::Off);

/// Let commands go through a launcher: `program`, run with [`LAUNCHER_ARG`], must call
/// [`serve_stdin`] (the `keel` binary is its own launcher). Nothing starts until a command
/// needs it.
pub fn enable(program: std::path::PathBuf) {
    let mut st = LAUNCHER.lock().unwrap_or_else(|p| p.into_inner());
    if matches!(*st, State::Off) {
        *st = State::Ready(program);
    }
}

/// Whether commands go through a running launcher now.
pub fn running() -> bool {
    matches!(
        *LAUNCHER.lock().unwrap_or_else(|p| p.into_inner()),
        State::Running(..)
    )
}

/// Close the launcher's socket and wait (up to a second) for it to leave, so that its CPU time
/// and its commands' is counted to this process. Commands are forked here afterwards.
pub fn stop() {
    let_go(
        &mut LAUNCHER.lock().unwrap_or_else(|p| p.into_inner()),
        Duration::from_secs(1),
    );
}

/// Be done with the launcher: close its socket (it leaves when it sees that), give it `grace`
/// to do so, then kill it, and reap it either way. What it started goes with it. Commands are
/// forked here from then on.
fn let_go(st: &mut State, grace: Duration) {
    if let State::Running(sock, mut child) = std::mem::replace(st, State::Failed) {
        drop(sock);
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            match child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                _ => return,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Start the launcher from `program`. Its stdin is its end of the socket; its stdout and
/// stderr go nowhere (a reader of keel's output must not wait for the launcher).
fn start_launcher(program: &std::path::Path) -> io::Result<(OwnedFd, std::process::Child)> {
    use std::process::Stdio;
    let (keel_end, launcher_end) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new(program)
        .arg0("keel")
        .arg(LAUNCHER_ARG)
        .stdin(Stdio::from(launcher_end))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = nix::sys::time::TimeVal::new(ANSWER_DEADLINE.as_secs() as i64, 0);
    setsockopt(&keel_end, sockopt::ReceiveTimeout, &deadline)?;
    Ok((keel_end, child))
}

/// One command for the launcher to start: the descriptors keel made for it, and its strings.
pub(crate) struct Request<'a> {
    pub args: &'a [std::ffi::CString],
    pub env: &'a [std::ffi::CString],
    pub cwd: &'a std::path::Path,
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
    pub report: RawFd,
    pub sandbox: Option<Confine<'a>>,
}

/// Have the launcher start `req`. `None`: there is no launcher (any more), start it here.
/// `Some(Ok(pid))`: the supervisor's pid (its process group's id). `Some(Err)`: the command
/// did not start, and why.
pub(crate) fn launch(req: &Request<'_>) -> Option<io::Result<i32>> {
    let mut st = LAUNCHER.lock().unwrap_or_else(|p| p.into_inner());
    if let State::Ready(program) = &*st {
        *st = match start_launcher(program) {
            Ok((sock, child)) => State::Running(sock, child),
            Err(e) => {
                tracing::warn!(
                    "could not start the command launcher ({e}); keel forks each command itself"
                );
                State::Failed
            }
        };
    }
    let State::Running(sock, _) = &*st else {
        return None;
    };
    let payload = match payload(req) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let mut flags = 0;
    let mut fds = vec![
        payload.as_raw_fd(),
        req.stdin,
        req.stdout,
        req.stderr,
        req.report,
    ];
    if let Some(sb) = &req.sandbox {
        flags |= FLAG_SANDBOX;
        if sb.network {
            flags |= FLAG_NETWORK;
        }
        fds.push(sb.ruleset);
    }
    let mut head = [0u8; 16];
    for (i, v) in [MAGIC, flags, req.args.len() as u32, req.env.len() as u32]
        .into_iter()
        .enumerate()
    {
        head[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
    // A signal to this thread (SIGCHLD, SIGWINCH) interrupts a socket call that has a timeout
    // even under SA_RESTART: both calls are tried again, never taken for the launcher's end.
    let sent = loop {
        match sendmsg::<()>(
            sock.as_raw_fd(),
            &[io::IoSlice::new(&head)],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other,
        }
    };
    if let Err(e) = sent {
        // Nothing reached the launcher: it is gone. Start this command (and the next) here.
        tracing::warn!(
            "the command launcher is gone ({e}); keel forks each command itself from now on"
        );
        let_go(&mut st, Duration::ZERO);
        return None;
    }
    let mut answer = [0u8; 4];
    let got = loop {
        match nix::sys::socket::recv(sock.as_raw_fd(), &mut answer, MsgFlags::empty()) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other,
        }
    };
    match got {
        Ok(4) => {
            let v = i32::from_le_bytes(answer);
            Some(if v > 0 {
                Ok(v)
            } else {
                Err(io::Error::from_raw_os_error(-v))
            })
        }
        other => {
            // The request went out but no answer came: whether the command started is not
            // known, so it is reported as not started, and the launcher is killed (a command
            // it did start goes with it).
            let_go(&mut st, Duration::ZERO);
            let why = match other {
                Ok(_) => "it closed its end".to_owned(),
                Err(e) => e.to_string(),
            };
            Some(Err(io::Error::other(format!(
                "the command launcher did not answer ({why})"
            ))))
        }
    }
}

/// The request's strings, NUL-terminated one after the other in a memory file: the working
/// directory, the arguments, the environment, and with a sandbox its uid and gid maps.
fn payload(req: &Request<'_>) -> io::Result<std::fs::File> {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor is owned at once.
    #[allow(unsafe_code)]
    let file = unsafe {
        let fd = nix::libc::memfd_create(c"keel-command".as_ptr(), nix::libc::MFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        std::fs::File::from_raw_fd(fd)
    };
    let cwd = req.cwd.as_os_str().as_bytes();
    if cwd.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the working directory holds a NUL byte",
        ));
    }
    let mut buf = Vec::with_capacity(4096);
    buf.extend_from_slice(cwd);
    buf.push(0);
    for s in req.args.iter().chain(req.env) {
        buf.extend_from_slice(s.as_bytes_with_nul());
    }
    if let Some(sb) = &req.sandbox {
        for m in [sb.uid_map, sb.gid_map] {
            if m.contains(&0) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a sandbox map holds a NUL byte",
                ));
            }
            buf.extend_from_slice(m);
            buf.push(0);
        }
    }
    (&file).write_all(&buf)?;
    Ok(file)
}

/// Serve as the launcher, on the socket that is this process's stdin (how keel starts it:
/// `program __keel-launcher`). Never returns: answers requests until keel's end closes.
pub fn serve_stdin() -> ! {
    // Run by hand (stdin a terminal or a file), there is nobody to serve: say so and leave.
    let is_socket = nix::sys::stat::fstat(0)
        .map(|st| st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFSOCK)
        .unwrap_or(false);
    if !is_socket {
        eprintln!(
            "keel: {LAUNCHER_ARG} is how keel starts its command launcher; it is not for use by hand"
        );
        supervise::exit(2);
    }
    // A copy that closes on exec: no shell may hold the launcher's socket.
    let sock = match nix::fcntl::fcntl(0, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3)) {
        // SAFETY: `fcntl` just made this descriptor; nothing else owns it.
        #[allow(unsafe_code)]
        Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
        Err(_) => supervise::exit(1),
    };
    let _ = nix::sys::prctl::set_name(c"keel-launcher");
    // Every signal as a fresh process has it, once here rather than in each supervisor; then
    // a terminal's or a process group's signals are for keel.
    default_all_signals();
    for s in LAUNCHER_IGNORES {
        // SAFETY: setting a disposition to "ignore" installs no handler.
        #[allow(unsafe_code)]
        let _ = unsafe { signal(s, SigHandler::SigIgn) };
    }
    // Hold nothing of keel's: not the socket as stdin, not any file.
    if let Ok(null) = std::fs::File::open("/dev/null") {
        for fd in 0..3 {
            let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
        }
    }
    supervise::close_other_fds(sock.as_raw_fd());
    // Supervisors that end are reaped here (so their time is counted), woken by SIGCHLD.
    let mut chld = nix::sys::signal::SigSet::empty();
    chld.add(Signal::SIGCHLD);
    let _ = chld.thread_block();
    let sfd = nix::sys::signalfd::SignalFd::with_flags(
        &chld,
        nix::sys::signalfd::SfdFlags::SFD_CLOEXEC | nix::sys::signalfd::SfdFlags::SFD_NONBLOCK,
    );
    loop {
        if let Ok(sfd) = &sfd {
            use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
            use std::os::fd::AsFd;
            let mut fds = [
                PollFd::new(sock.as_fd(), PollFlags::POLLIN),
                PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => supervise::exit(1),
            }
            let woke = fds[1].revents().is_some_and(|r| !r.is_empty());
            let asked = fds[0].revents().is_some_and(|r| !r.is_empty());
            if woke {
                while let Ok(Some(_)) = sfd.read_signal() {}
                reap();
            }
            if !asked {
                continue;
            }
        }
        if sfd.is_err() {
            // No SIGCHLD wake-ups: reap what has ended at every request instead.
            reap();
        }
        let answer = match receive(&sock) {
            Received::Request(req) => match start_one(&req) {
                Ok(pid) => pid.as_raw(),
                Err(e) => -e.raw_os_error().unwrap_or(nix::libc::EIO),
            },
            Received::Bad(errno) => -errno,
            Received::Closed => {
                reap();
                supervise::exit(0)
            }
        };
        if nix::sys::socket::send(
            sock.as_raw_fd(),
            &answer.to_le_bytes(),
            MsgFlags::MSG_NOSIGNAL,
        )
        .is_err()
        {
            reap();
            supervise::exit(0);
        }
    }
}

/// Reap every supervisor that has ended.
fn reap() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return,
            Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
            Err(_) => return,
        }
    }
}

/// A request as the launcher received it.
struct Incoming {
    cwd: std::ffi::CString,
    /// The shell's arguments and environment, ready for `posix_spawn`.
    exec: ShellExec,
    /// stdin, stdout, stderr, report.
    stdio: [OwnedFd; 4],
    /// With a sandbox: whether it keeps the network, its ruleset, the uid and gid maps.
    sandbox: Option<(bool, OwnedFd, Vec<u8>, Vec<u8>)>,
}

enum Received {
    Request(Incoming),
    /// A request the launcher could not read (the errno to answer with).
    Bad(i32),
    /// keel closed its end.
    Closed,
}

fn receive(sock: &OwnedFd) -> Received {
    let mut head = [0u8; 16];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let (n, fds, truncated) = loop {
        let mut iov = [io::IoSliceMut::new(&mut head)];
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => {
                let mut fds = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(r) = c {
                            fds.extend(r);
                        }
                    }
                }
                let truncated = msg
                    .flags
                    .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC);
                break (msg.bytes, fds, truncated);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return Received::Closed,
        }
    };
    // SAFETY: each descriptor arrived in this message and is owned by nothing else yet.
    #[allow(unsafe_code)]
    let mut owned: Vec<OwnedFd> = fds
        .into_iter()
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    if n == 0 && owned.is_empty() {
        return Received::Closed;
    }
    let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
    if truncated || n != head.len() || word(0) != MAGIC {
        return Received::Bad(nix::libc::EPROTO);
    }
    let (flags, n_args, n_env) = (word(4), word(8) as usize, word(12) as usize);
    let want = 5 + usize::from(flags & FLAG_SANDBOX != 0);
    if owned.len() != want || n_args == 0 {
        return Received::Bad(nix::libc::EPROTO);
    }
    let ruleset = (flags & FLAG_SANDBOX != 0).then(|| owned.pop()).flatten();
    let mut it = owned.into_iter();
    let (Some(payload), Some(i), Some(o), Some(e), Some(r)) =
        (it.next(), it.next(), it.next(), it.next(), it.next())
    else {
        return Received::Bad(nix::libc::EPROTO);
    };
    let Some(mut strings) = read_strings(payload) else {
        return Received::Bad(nix::libc::EPROTO);
    };
    let maps = usize::from(ruleset.is_some()) * 2;
    if strings.len() != 1 + n_args + n_env + maps {
        return Received::Bad(nix::libc::EPROTO);
    }
    let tail = strings.split_off(1 + n_args + n_env);
    let env = strings.split_off(1 + n_args);
    let args = strings.split_off(1);
    let Some(cwd) = strings.pop() else {
        return Received::Bad(nix::libc::EPROTO);
    };
    let sandbox = ruleset.map(|rs| {
        let mut maps = tail.into_iter().map(|c| c.into_bytes());
        let uid = maps.next().unwrap_or_default();
        let gid = maps.next().unwrap_or_default();
        (flags & FLAG_NETWORK != 0, rs, uid, gid)
    });
    Received::Request(Incoming {
        cwd,
        exec: ShellExec::from_strings(args, env),
        stdio: [i, o, e, r],
        sandbox,
    })
}

/// The NUL-terminated strings of a payload file.
fn read_strings(payload: OwnedFd) -> Option<Vec<std::ffi::CString>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::from(payload);
    let len = file.metadata().ok()?.len();
    if len == 0 || len > MAX_PAYLOAD {
        return None;
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, 0).ok()?;
    if buf.last() != Some(&0) {
        return None;
    }
    buf.pop();
    buf.split(|&b| b == 0)
        .map(|s| std::ffi::CString::new(s).ok())
        .collect()
}

/// Fork the supervisor of one command. Returns its pid once it has started the shell, or why
/// it could not.
fn start_one(req: &Incoming) -> io::Result<Pid> {
    let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let confine = req.sandbox.as_ref().map(|(network, rs, uid, gid)| Confine {
        network: *network,
        ruleset: rs.as_raw_fd(),
        uid_map: uid,
        gid_map: gid,
    });
    let launcher = Pid::this();
    // SAFETY: the launcher has one thread, so the child may run any code; it runs only
    // system calls and then never returns.
    #[allow(unsafe_code)]
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => {
            drop(ready_r);
            let errno = match child(req, confine, launcher) {
                Ok((shell, watched)) => {
                    let _ = nix::unistd::write(&ready_w, &0i32.to_le_bytes());
                    drop(ready_w);
                    let [stdin, _, _, report] = &req.stdio;
                    // The supervisor lets go of the process's pipes by putting /dev/null in
                    // their place; stdin is /dev/null itself unless the process has a pipe.
                    let null = nix::fcntl::open(
                        c"/dev/null",
                        nix::fcntl::OFlag::O_RDWR,
                        nix::sys::stat::Mode::empty(),
                    )
                    .unwrap_or(stdin.as_raw_fd());
                    supervise::supervise(launcher, shell, report.as_raw_fd(), null, &watched)
                }
                Err(e) => e.raw_os_error().unwrap_or(nix::libc::EIO),
            };
            let _ = nix::unistd::write(&ready_w, &errno.to_le_bytes());
            supervise::exit(127)
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(ready_w);
            let mut word = [0u8; 4];
            let mut got = 0;
            while got < 4 {
                match nix::unistd::read(ready_r.as_raw_fd(), &mut word[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            match (got, i32::from_le_bytes(word)) {
                (4, 0) => Ok(child),
                (4, errno) => Err(io::Error::from_raw_os_error(errno)),
                _ => Err(io::Error::other(
                    "the command's supervisor died as it started",
                )),
            }
        }
    }
}

/// In the forked supervisor: signals as a fresh process has them, the command's stdio, its
/// working directory, then the supervisor's start (session, sandbox, shell).
fn child(
    req: &Incoming,
    confine: Option<Confine<'_>>,
    launcher: Pid,
) -> io::Result<(Pid, nix::sys::signal::SigSet)> {
    // The launcher set every other signal to its default when it started (and installs no
    // handler), so the few it ignores are all there is to undo: ~10 calls, not one per signal.
    for s in LAUNCHER_IGNORES {
        // SAFETY: restoring the default disposition installs no handler.
        #[allow(unsafe_code)]
        let _ = unsafe { signal(s, SigHandler::SigDfl) };
    }
    nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    )?;
    // Named for what it is in `ps` (the launcher's name would mislead).
    let _ = nix::sys::prctl::set_name(c"keel-supervisor");
    if nix::unistd::getppid() != launcher {
        return Err(io::Error::other("the launcher went away"));
    }
    let [stdin, stdout, stderr, _] = &req.stdio;
    for (fd, to) in [(stdin, 0), (stdout, 1), (stderr, 2)] {
        nix::unistd::dup2(fd.as_raw_fd(), to)?;
    }
    nix::unistd::chdir(req.cwd.as_c_str())?;
    supervise::start(&req.exec, confine)
}
