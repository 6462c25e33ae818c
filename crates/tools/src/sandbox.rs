//! The OS sandbox for Bash (Linux): Landlock lets a command write only beneath the working
//! directory, the added directories and the temp directory (it may read everywhere), and a
//! network namespace of its own cuts it off the network unless the network is allowed.
//!
//! A network namespace does not cover Unix sockets bound to a path (`/var/run/docker.sock`,
//! an ssh-agent, a database): with the network off, a seccomp filter also refuses
//! `socket(AF_UNIX, …)` (and `io_uring_setup`, which could create one around the filter) with
//! `EACCES`. `socketpair` stays allowed: it connects to nothing outside. Abstract sockets are
//! per network namespace already. The filter is built for x86_64 and aarch64; elsewhere, or
//! on a kernel without seccomp filters, a sandbox with the network off is refused at start.
//!
//! The Landlock ruleset is built once, in keel, when the session starts; each command's
//! supervisor (a forked child that may only make async-signal-safe calls) enters the sandbox
//! with raw system calls on what was prepared, before it starts the shell, so the shell and
//! everything it starts inherit it. A kernel without Landlock makes enabling the sandbox an
//! error, never a silent no-op.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, ABI,
};
use nix::libc;

/// What the sandbox allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Directories a command may write beneath (the working directory, added directories,
    /// the temp directory, extra paths from the settings).
    pub writable: Vec<PathBuf>,
    /// Whether commands may reach the network.
    pub network: bool,
}

/// A sandbox ready to enter.
#[derive(Debug)]
pub struct Sandbox {
    policy: SandboxPolicy,
    ruleset: OwnedFd,
    /// `/proc/self/uid_map` and `gid_map` lines for an unprivileged network namespace
    /// (prepared here: the supervisor may not allocate).
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// The Landlock ABI version the kernel offers (0: none).
pub fn landlock_abi() -> i32 {
    // Debug builds can pretend the kernel has none, so the error path is tested everywhere.
    #[cfg(debug_assertions)]
    if std::env::var("KEEL_TEST_FAULT").as_deref() == Ok("no_landlock") {
        return 0;
    }
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented way to ask for the ABI version: no attribute, size 0, the
    // version flag; the call has no other effect.
    #[allow(unsafe_code)]
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

/// Why the sandbox cannot be had on this machine (enabling it is then an error at start).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel has no Landlock (too old, or not in the `lsm=` list).
    #[error("the sandbox needs Landlock, which this kernel does not offer ({0}); run without the sandbox, or on a kernel with Landlock enabled (5.13 or later, with landlock in the lsm= list)")]
    NoLandlock(#[source] std::io::Error),
    /// A step of building the Landlock ruleset failed.
    #[error("could not set up the sandbox: {what}: {source}")]
    Setup {
        /// The step, or the directory being added.
        what: String,
        /// What Landlock said.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Landlock built the ruleset but handed back no descriptor.
    #[error("could not set up the sandbox: Landlock gave no ruleset")]
    NoRuleset,
    /// The network is off on an architecture keel has no seccomp filter for.
    #[error("the sandbox with the network off closes Unix sockets with a seccomp filter keel has for x86_64 and aarch64 only; allow the network (--sandbox-network) or run without the sandbox")]
    SeccompArch,
    /// The network is off on a kernel without seccomp filters.
    #[error("the sandbox with the network off needs seccomp filters, which this kernel does not offer ({0})")]
    NoSeccomp(#[source] std::io::Error),
}

impl Sandbox {
    /// Prepare the sandbox, or say why it cannot be had on this machine.
    pub fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        let v = landlock_abi();
        if v < 1 {
            return Err(SandboxError::NoLandlock(std::io::Error::last_os_error()));
        }
        let abi = ABI::from(v);
        let all = AccessFs::from_all(abi);
        let read = AccessFs::from_read(abi);
        fn fail<E: std::error::Error + Send + Sync + 'static>(
            what: &str,
        ) -> impl FnOnce(E) -> SandboxError + '_ {
            move |e| SandboxError::Setup {
                what: what.to_owned(),
                source: Box::new(e),
            }
        }
        let mut rs = Ruleset::default()
            .handle_access(all)
            .map_err(fail("handled accesses"))?
            .create()
            .map_err(fail("ruleset"))?;
        let root = PathFd::new("/").map_err(fail("/"))?;
        rs = rs
            .add_rule(PathBeneath::new(root, read))
            .map_err(fail("read access"))?;
        // Devices such as /dev/null and the terminal are written by ordinary commands.
        let mut writable: Vec<PathBuf> = policy.writable.clone();
        writable.push(PathBuf::from("/dev"));
        for d in &writable {
            if !d.exists() {
                continue;
            }
            let shown = d.display().to_string();
            let fd = PathFd::new(d).map_err(fail(&shown))?;
            rs = rs
                .add_rule(PathBeneath::new(fd, all))
                .map_err(fail(&shown))?;
        }
        let fd: Option<OwnedFd> = rs.into();
        let ruleset = fd.ok_or(SandboxError::NoRuleset)?;
        if !policy.network {
            unix_sockets::available()?;
        }
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        Ok(Self {
            policy,
            ruleset,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        })
    }

    /// What it allows.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// Whether `p` may be written under the sandbox.
    pub fn may_write(&self, p: &Path) -> bool {
        self.policy.writable.iter().any(|d| p.starts_with(d)) || p.starts_with("/dev")
    }

    /// What entering the sandbox takes, borrowed: handed to the forked supervisor (or, through
    /// the launcher, rebuilt in another process from the same bytes and ruleset descriptor).
    pub(crate) fn confine(&self) -> Confine<'_> {
        Confine {
            network: self.policy.network,
            ruleset: self.ruleset.as_raw_fd(),
            uid_map: &self.uid_map,
            gid_map: &self.gid_map,
        }
    }
}

/// Everything entering a sandbox needs, prepared before the fork: whether the network stays,
/// the Landlock ruleset's descriptor, and the uid and gid maps for a user namespace.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Confine<'a> {
    pub network: bool,
    pub ruleset: std::os::fd::RawFd,
    pub uid_map: &'a [u8],
    pub gid_map: &'a [u8],
}

impl Confine<'_> {
    /// Enter the sandbox: this process and everything it starts. Called in the forked
    /// supervisor, so it makes raw system calls only, on buffers prepared before the fork.
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        use nix::sched::{unshare, CloneFlags};
        // Without the privilege for a network namespace, a user namespace gives it; the maps
        // keep this process's own uid and gid inside.
        if !self.network && unshare(CloneFlags::CLONE_NEWNET).is_err() {
            unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)?;
            let _ = write_proc(c"/proc/self/setgroups", b"deny");
            write_proc(c"/proc/self/uid_map", self.uid_map)?;
            write_proc(c"/proc/self/gid_map", self.gid_map)?;
        }
        // SAFETY: prctl and landlock_restrict_self are plain system calls on an fd this
        // process holds; neither allocates.
        #[allow(unsafe_code)]
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, self.ruleset, 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if !self.network {
            unix_sockets::refuse()?;
        }
        Ok(())
    }
}

/// The seccomp filter that closes Unix sockets to a sandboxed command with the network off.
mod unix_sockets {
    use nix::libc;

    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;

    // Classic BPF opcodes (linux/filter.h).
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    /// x32 system calls carry this bit; they get no second table to slip through.
    const X32_BIT: u32 = 0x4000_0000;

    const fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
        libc::sock_filter { code, jt, jf, k }
    }

    const DENY: u32 = libc::SECCOMP_RET_ERRNO | (libc::EACCES as u32 & libc::SECCOMP_RET_DATA);

    /// seccomp_data: nr at 0, arch at 4, args from 16 (the low half of args[0] on a
    /// little-endian machine).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    static FILTER: [libc::sock_filter; 12] = [
        /* 0 */ insn(LD_W_ABS, 0, 0, 4),
        /* 1 */ insn(JEQ_K, 1, 0, AUDIT_ARCH),
        /* 2 */ insn(RET_K, 0, 0, DENY),
        /* 3 */ insn(LD_W_ABS, 0, 0, 0),
        /* 4 */ insn(JGE_K, 6, 0, X32_BIT),
        /* 5 */ insn(JEQ_K, 2, 0, libc::SYS_socket as u32),
        /* 6 */ insn(JEQ_K, 4, 0, libc::SYS_io_uring_setup as u32),
        /* 7 */ insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        /* 8 */ insn(LD_W_ABS, 0, 0, 16),
        /* 9 */ insn(JEQ_K, 1, 0, libc::AF_UNIX as u32),
        /* 10 */ insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        /* 11 */ insn(RET_K, 0, 0, DENY),
    ];

    /// Whether this machine can have the filter; said at start, not at the first command.
    pub(super) fn available() -> Result<(), super::SandboxError> {
        if cfg!(not(any(target_arch = "x86_64", target_arch = "aarch64"))) {
            return Err(super::SandboxError::SeccompArch);
        }
        // SAFETY: PR_GET_SECCOMP only reads this process's seccomp mode.
        #[allow(unsafe_code)]
        let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
        if mode < 0 {
            return Err(super::SandboxError::NoSeccomp(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    /// Install the filter on this process (and so on all it starts). Async-signal-safe: one
    /// system call on a static program.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    pub(super) fn refuse() -> std::io::Result<()> {
        let prog = libc::sock_fprog {
            len: FILTER.len() as u16,
            filter: FILTER.as_ptr().cast_mut(),
        };
        // SAFETY: the program is static and well-formed; no_new_privs is already set, as an
        // unprivileged filter requires. The kernel copies the program.
        #[allow(unsafe_code)]
        let r = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub(super) fn refuse() -> std::io::Result<()> {
        Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
    }
}

/// Write `data` to a /proc file with raw calls (async-signal-safe).
fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and a buffer we own.
    #[allow(unsafe_code)]
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if n < 0 || n as usize != data.len() {
            return Err(err);
        }
    }
    Ok(())
}

/// The note added to a failed command's result when its error looks like the sandbox's.
pub fn stopped_note(sandbox: &Sandbox, stderr: &str, stdout: &str) -> Option<String> {
    let text = format!("{stderr}\n{stdout}");
    let fs = [
        "Permission denied",
        "Read-only file system",
        "Operation not permitted",
    ]
    .iter()
    .any(|m| text.contains(m));
    let net = !sandbox.policy.network
        && [
            "Network is unreachable",
            "Temporary failure in name resolution",
            "Could not resolve host",
            "Name or service not known",
            "Cannot assign requested address",
        ]
        .iter()
        .any(|m| text.contains(m));
    if !fs && !net {
        return None;
    }
    let dirs: Vec<String> = sandbox
        .policy
        .writable
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    let mut parts = Vec::new();
    if fs {
        parts.push(format!("it may write only beneath {}", dirs.join(", ")));
    }
    if net {
        parts.push("the network is off".to_owned());
    }
    Some(format!(
        "[keel's sandbox stopped part of this command: {}. Work within those limits, or ask the user to allow more (sandbox settings, --add-dir).]",
        parts.join("; ")
    ))
}
