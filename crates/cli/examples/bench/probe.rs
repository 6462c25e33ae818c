//! CPU time and peak RSS of one run (a probe process reads getrusage of its child), and the cost of the shell child alone.

#[allow(unused_imports)]
use super::*;

/// Peak RSS and CPU time (user + system) of one keel run, its waited-for children included.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usage {
    pub(crate) rss_mb: f64,
    pub(crate) cpu_ms: f64,
}

/// What `/bin/bash -c true` (the Bash tool's child process) costs on this machine by itself,
/// spawned and reaped from Rust: median wall time and mean CPU time, in ms.
pub(crate) struct Shell {
    pub(crate) wall_ms: f64,
    pub(crate) cpu_ms: f64,
}

pub(crate) fn shell_spawn(n: usize) -> Result<Shell> {
    use nix::sys::resource::{getrusage, UsageWho};
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let cpu = || -> Result<f64> {
        let u = getrusage(UsageWho::RUSAGE_CHILDREN)?;
        let us = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
        Ok((us(u.user_time()) + us(u.system_time())) / 1000.0)
    };
    let before = cpu()?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        Command::new(shell)
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()?;
        v.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(Shell {
        wall_ms: median(&v),
        cpu_ms: (cpu()? - before) / n as f64,
    })
}

/// `bench --usage-probe FILE PROGRAM ARGS...`: run PROGRAM, then write to FILE the peak RSS (KB)
/// of the largest waited-for descendant and the CPU time (user, system; µs) of all of them. A
/// fresh process per run, so the figures are this run's alone.
pub(crate) fn usage_probe(args: &[String]) -> Result<()> {
    use nix::sys::resource::{getrusage, UsageWho};
    let [file, prog, rest @ ..] = args else {
        bail!("usage: bench --usage-probe FILE PROGRAM [ARGS...]");
    };
    let status = Command::new(prog).args(rest).status()?;
    let u = getrusage(UsageWho::RUSAGE_CHILDREN)?;
    let us = |t: nix::sys::time::TimeVal| t.tv_sec() * 1_000_000 + t.tv_usec();
    std::fs::write(
        file,
        format!(
            "{} {} {}\n",
            u.max_rss(),
            us(u.user_time()),
            us(u.system_time())
        ),
    )?;
    std::process::exit(status.code().unwrap_or(1));
}
