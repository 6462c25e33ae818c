//! keel's memory while an MCP server floods its stderr (a measurement, not a test).
//!
//! ```text
//! cargo build --release -p keel-cli -p keel-mcp-test-server
//! cargo run --release -p keel-cli --example mcp_flood -- [--seconds N (default 30)] [--keel PATH] [--server PATH]
//! ```
//!
//! keel runs `-p` against keel-mock (in this process, on loopback); the model calls one tool
//! of an MCP server (keel's test server, mode `flood-on-call`) that writes to its stderr as fast
//! as it can for N seconds before answering. keel keeps only the last 8 KiB of a server's
//! stderr; this samples keel's resident memory (`VmRSS` in /proc) every 250 ms during the
//! flood and prints the first, the largest and the last sample, and how much keel read in that
//! time (`rchar` in /proc/PID/io: the flood is nearly all of it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use keel_mock::{MockServer, Scenario};
use serde_json::json;

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Bytes read so far by `pid` (`rchar` in /proc/PID/io): keel reads the server's stderr, so
/// this grows with the flood.
fn read_bytes(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find(|l| l.starts_with("rchar:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let mut keel = target.join("release/keel");
    let mut server = target.join("release/keel-mcp-test-server");
    let mut seconds: u64 = 30;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().context("a flag without its value");
        match a.as_str() {
            "--seconds" => seconds = val()?.parse().context("--seconds takes a number")?,
            "--keel" => keel = val()?.into(),
            "--server" => server = val()?.into(),
            other => bail!("unknown argument {other:?}; see the header of mcp_flood.rs"),
        }
    }
    for (what, p) in [("keel", &keel), ("keel-mcp-test-server", &server)] {
        if !p.is_file() {
            bail!(
                "{what} not found at {}; run cargo build --release -p keel-cli -p keel-mcp-test-server",
                p.display()
            );
        }
    }
    let runtime = tokio::runtime::Runtime::new()?;
    let scenario = Scenario::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "mcp__f__echo", "input": {"text": "x"}}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )?;
    let mock = runtime.block_on(MockServer::start(scenario))?;
    let home = tempfile::tempdir()?;
    let cfg = json!({"mcpServers": {"f": {
        "command": server.display().to_string(),
        "args": ["--mode", "flood-on-call", "--seconds", seconds.to_string()]
    }}})
    .to_string();
    let t0 = Instant::now();
    let mut child = Command::new(&keel)
        .args([
            "-p",
            "call the tool",
            "--mcp-config",
            &cfg,
            "--allowedTools",
            "mcp__f",
            "--output-format",
            "json",
        ])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("KEEL_HOME", home.path().join("keel"))
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("keel starts")?;
    let pid = child.id();
    let mut samples: Vec<(f64, u64, u64)> = Vec::new();
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("keel ended with {status}");
            }
            break;
        }
        if let (Some(rss), Some(read)) = (rss_kib(pid), read_bytes(pid)) {
            samples.push((t0.elapsed().as_secs_f64(), rss, read));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    // The flood: from the first sample after the call began (keel read more than 1 MiB) on.
    let flood: Vec<_> = samples
        .iter()
        .filter(|s| s.2 > (1 << 20))
        .copied()
        .collect();
    let (Some(first), Some(last)) = (flood.first(), flood.last()) else {
        bail!(
            "no sample was taken during the flood ({} samples)",
            samples.len()
        );
    };
    let max = flood.iter().map(|s| s.1).max().unwrap_or(0);
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "MCP server flooding stderr for {seconds} s: keel read {:.0} MiB in {:.1} s ({:.0} MiB/s)",
        (last.2 - first.2) as f64 / (1 << 20) as f64,
        last.0 - first.0,
        (last.2 - first.2) as f64 / (1 << 20) as f64 / (last.0 - first.0).max(0.001)
    );
    println!(
        "keel RSS: {:.1} MiB at the start of the flood, {:.1} MiB at most, {:.1} MiB at the end ({} samples)",
        mib(first.1),
        mib(max),
        mib(last.1),
        flood.len()
    );
    Ok(())
}
