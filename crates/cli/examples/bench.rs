//! keel's cost benchmark (a measurement, not a test).
//!
//! ```text
//! cargo build --release -p keel-cli
//! cargo run --release -p keel-cli --example bench -- [--keel PATH] [--runs N] [--turns N] [--env K=V]... [--json]
//! ```
//!
//! It runs the release `keel` binary against keel-mock (in this process, on loopback) and
//! reports medians over N runs of:
//!
//! - a one-turn text run: launch → first request received by the model server, launch → exit,
//!   and peak RSS;
//! - a session of `--turns` tool turns (the scripted model asks for Bash `true` each turn, then
//!   answers with text): keel's own time per tool turn, and peak RSS.
//!
//! Timing. "launch" is an `Instant` taken just before `spawn`; the first request's arrival is
//! keel-mock's `elapsed_ms` (microsecond resolution, measured from the server's start), moved
//! onto the same clock with an `Instant` taken right after the server started (so the figure
//! is an upper bound, off by at most the server's start-up, which is printed). The time the
//! model server itself spends answering is measured by replaying the same request bodies to a
//! fresh keel-mock with a minimal raw-socket HTTP client, so keel's own time per turn is
//! `(wall − launch-to-first-request − server time) / turns`.
//!
//! Peak RSS and CPU time come from a separate pass of N runs, each under this binary re-run as
//! a probe (`--usage-probe`) that waits for keel and reads `getrusage(RUSAGE_CHILDREN)`: a fresh
//! process per run, so the figures are that run's alone (`/usr/bin/time -f %M` reports the same
//! peak RSS; the probe also gives CPU time to the microsecond). Timing runs are never wrapped.
//! CPU time is the figure to trust on a busy machine: wall times there include waiting for a core.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use keel_mock::{MockServer, RecordedRequest, Scenario};
use serde_json::{json, Value};

const DEFAULT_RUNS: usize = 7;
const DEFAULT_TURNS: usize = 50;

/// Targets and the incumbents' figures (DESIGN, "What we are building").
const TARGET_TTFR_MS: f64 = 5.0;
const TARGET_TURN_MS: f64 = 3.0;
const TARGET_RSS_MB: f64 = 20.0;
const INCUMBENT_TTFR_MS: f64 = 350.0;
const INCUMBENT_TURN_MS: f64 = 75.0;
const INCUMBENT_RSS_MB: f64 = 200.0;

struct Opts {
    keel: PathBuf,
    /// Extra environment for keel (`--env K=V`), e.g. `KEEL_FSYNC=message`.
    env: Vec<(String, String)>,
    runs: usize,
    turns: usize,
    json_only: bool,
}

fn usage() -> String {
    format!(
        "usage: cargo run --release -p keel-cli --example bench -- [--keel PATH] [--runs N (default {DEFAULT_RUNS})] [--turns N (default {DEFAULT_TURNS})] [--env KEY=VALUE]... [--json]"
    )
}

fn parse_opts(args: &[String]) -> Result<Opts> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let mut o = Opts {
        keel: target.join("release/keel"),
        env: Vec::new(),
        runs: DEFAULT_RUNS,
        turns: DEFAULT_TURNS,
        json_only: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .with_context(|| format!("{a} needs a value\n{}", usage()))
        };
        match a.as_str() {
            "--keel" => o.keel = PathBuf::from(val()?),
            "--runs" => o.runs = val()?.parse().context("--runs takes a number")?,
            "--turns" => o.turns = val()?.parse().context("--turns takes a number")?,
            "--json" => o.json_only = true,
            "--env" => {
                let kv = val()?;
                let (k, v) = kv.split_once('=').context("--env takes KEY=VALUE")?;
                o.env.push((k.to_owned(), v.to_owned()));
            }
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{}", usage()),
        }
    }
    if o.runs == 0 || o.turns == 0 {
        bail!("--runs and --turns must be at least 1");
    }
    Ok(o)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--usage-probe") {
        return usage_probe(&args[1..]);
    }
    let o = parse_opts(&args)?;
    if !o.keel.is_file() {
        bail!(
            "no keel binary at {}.\nBuild it first: cargo build --release -p keel-cli (or pass --keel PATH)",
            o.keel.display()
        );
    }
    let keel = o.keel.canonicalize()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let b = Bench {
        rt: &rt,
        keel: &keel,
        me: std::env::current_exe()?,
        env: &o.env,
    };
    if !o.json_only {
        eprintln!(
            "keel bench: {} · {} runs per measurement",
            keel.display(),
            o.runs
        );
    }

    // Warm the page cache and the loopback path once; not counted.
    b.timed(&text_case())?;

    let text = text_case();
    let tools = tool_case(o.turns);
    let t1: Vec<Timed> = (0..o.runs).map(|_| b.timed(&text)).collect::<Result<_>>()?;
    let r1: Vec<Usage> = (0..o.runs).map(|_| b.usage(&text)).collect::<Result<_>>()?;
    let t2: Vec<Timed> = (0..o.runs)
        .map(|_| b.timed(&tools))
        .collect::<Result<_>>()?;
    let r2: Vec<Usage> = (0..o.runs)
        .map(|_| b.usage(&tools))
        .collect::<Result<_>>()?;
    let shell = shell_spawn(o.runs.max(20))?;

    let report = Report::new(&o, &t1, &r1, &t2, &r2, shell);
    if !o.json_only {
        report.print_table();
    }
    println!("{}", report.json());
    Ok(())
}

/// One measured scenario.
struct Case {
    name: &'static str,
    scenario: String,
    args: Vec<String>,
    /// Tool turns in the scenario (0 for the text run).
    turns: usize,
}

fn text_case() -> Case {
    let scenario = json!({"steps": [{"kind": "text", "text": "Hello from keel-mock."}]});
    Case {
        name: "text",
        scenario: scenario.to_string(),
        args: vec![],
        turns: 0,
    }
}

fn tool_case(turns: usize) -> Case {
    let scenario = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "true"}}], "times": turns},
        {"kind": "text", "text": "Ran `true` every turn."}
    ]});
    Case {
        name: "tools",
        scenario: scenario.to_string(),
        args: vec!["--allowedTools".into(), "Bash".into()],
        turns,
    }
}

/// The measurements of one timed run.
#[derive(Clone, Debug, Default)]
struct Timed {
    wall_ms: f64,
    ttfr_ms: f64,
    /// How much `ttfr_ms` may overstate (the server's start-up).
    ttfr_slack_ms: f64,
    /// The model server's own time answering every request (raw-socket replay).
    server_ms: f64,
    /// keel's `duration_api_ms` (waiting on the model, as keel sees it).
    api_ms: f64,
    /// Gaps between consecutive requests (ms).
    gaps_ms: Vec<f64>,
}

struct Bench<'a> {
    rt: &'a tokio::runtime::Runtime,
    keel: &'a Path,
    /// This binary, re-run as the usage probe.
    me: PathBuf,
    env: &'a [(String, String)],
}

impl Bench<'_> {
    fn start_mock(&self, case: &Case) -> Result<(MockServer, Instant, Instant)> {
        let scenario = Scenario::from_json(&case.scenario).context("bench scenario")?;
        let before = Instant::now();
        let mock = self.rt.block_on(MockServer::start(scenario))?;
        Ok((mock, before, Instant::now()))
    }

    fn command(&self, prefix: &[String], case: &Case, mock: &MockServer, dirs: &Dirs) -> Command {
        let (prog, pre) = match prefix.split_first() {
            Some((p, rest)) => (PathBuf::from(p), rest.to_vec()),
            None => (self.keel.to_path_buf(), vec![]),
        };
        let mut c = Command::new(prog);
        c.args(pre);
        if !prefix.is_empty() {
            c.arg(self.keel);
        }
        c.args(["-p", "bench", "--output-format", "stream-json", "--verbose"])
            .args(&case.args)
            .current_dir(dirs.cwd.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dirs.home.path())
            .env("KEEL_HOME", dirs.home.path().join(".keel"))
            .env("ANTHROPIC_BASE_URL", mock.base_url())
            .env("ANTHROPIC_API_KEY", "bench")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    fn timed(&self, case: &Case) -> Result<Timed> {
        let dirs = Dirs::new()?;
        let (mock, before, started) = self.start_mock(case)?;
        let mut cmd = self.command(&[], case, &mock, &dirs);
        let launch = Instant::now();
        let out = cmd.spawn()?.wait_with_output()?;
        let wall = launch.elapsed();
        let result = check_run(case, &out)?;
        let reqs = messages_requests(&mock);
        mock.shutdown();
        let first = reqs.first().context("keel sent no request")?;
        let offset_ms = (launch - started).as_secs_f64() * 1000.0;
        let gaps_ms = reqs
            .windows(2)
            .map(|w| w[1].elapsed_ms - w[0].elapsed_ms)
            .collect();
        let bodies: Vec<Value> = reqs.iter().map(|r| r.body.clone()).collect();
        Ok(Timed {
            wall_ms: wall.as_secs_f64() * 1000.0,
            ttfr_ms: first.elapsed_ms - offset_ms,
            ttfr_slack_ms: (started - before).as_secs_f64() * 1000.0,
            server_ms: self.replay(case, &bodies)?,
            api_ms: result["duration_api_ms"].as_f64().unwrap_or(0.0),
            gaps_ms,
        })
    }

    /// Peak RSS and CPU time of one run of keel, read by the usage probe.
    fn usage(&self, case: &Case) -> Result<Usage> {
        let dirs = Dirs::new()?;
        let (mock, _, _) = self.start_mock(case)?;
        let file = dirs.home.path().join("usage");
        let prefix = [
            self.me.display().to_string(),
            "--usage-probe".into(),
            file.display().to_string(),
        ];
        let out = self
            .command(&prefix, case, &mock, &dirs)
            .spawn()?
            .wait_with_output()?;
        mock.shutdown();
        check_run(case, &out)?;
        let text = std::fs::read_to_string(&file).context("reading the probe's figures")?;
        let n: Vec<f64> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [rss_kb, user_us, sys_us] = n[..] else {
            bail!("the usage probe wrote {text:?}");
        };
        Ok(Usage {
            rss_mb: rss_kb / 1024.0,
            cpu_ms: (user_us + sys_us) / 1000.0,
        })
    }

    /// Time the model server needs to answer `bodies`, replayed in order on one keep-alive
    /// connection by a client that does nothing but write bytes and read them back (ms).
    fn replay(&self, case: &Case, bodies: &[Value]) -> Result<f64> {
        let (mock, _, _) = self.start_mock(case)?;
        let total = replay_raw(mock.addr(), bodies);
        mock.shutdown();
        total
    }
}

/// A scratch working directory and home for one run.
struct Dirs {
    cwd: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Result<Self> {
        Ok(Dirs {
            cwd: tempfile::tempdir()?,
            home: tempfile::tempdir()?,
        })
    }
}

/// Fail loudly unless the run ended as the scenario says; returns the result frame.
fn check_run(case: &Case, out: &std::process::Output) -> Result<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    let want_turns = case.turns as u64 + 1;
    if !out.status.success()
        || last["subtype"] != "success"
        || last["num_turns"].as_u64() != Some(want_turns)
    {
        bail!(
            "keel did not complete the {} run as scripted (exit {:?}, expected {want_turns} turns)\nlast frame: {last}\nstderr: {stderr}",
            case.name,
            out.status.code()
        );
    }
    Ok(last)
}

fn messages_requests(mock: &MockServer) -> Vec<RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1/messages") && !r.path.contains("count_tokens"))
        .collect()
}

fn replay_raw(addr: SocketAddr, bodies: &[Value]) -> Result<f64> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    let mut total = 0.0;
    for b in bodies {
        let body = serde_json::to_vec(b)?;
        let head = format!(
            "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nx-api-key: bench\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let t = Instant::now();
        w.write_all(head.as_bytes())?;
        w.write_all(&body)?;
        let status = read_response(&mut r)?;
        total += t.elapsed().as_secs_f64() * 1000.0;
        if status != 200 {
            bail!("replay: keel-mock answered {status}");
        }
    }
    Ok(total)
}

/// Read one HTTP/1.1 response (content-length or chunked); returns the status.
fn read_response(r: &mut impl BufRead) -> Result<u16> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {line:?}"))?;
    let (mut chunked, mut len) = (false, 0usize);
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse()?;
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    if !chunked {
        let mut buf = vec![0; len];
        r.read_exact(&mut buf)?;
        return Ok(status);
    }
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .with_context(|| format!("bad chunk size {line:?}"))?;
        if size == 0 {
            // Trailers (none expected), then the blank line.
            loop {
                line.clear();
                r.read_line(&mut line)?;
                if line.trim().is_empty() {
                    return Ok(status);
                }
            }
        }
        let mut buf = vec![0; size + 2];
        r.read_exact(&mut buf)?;
    }
}

/// Peak RSS and CPU time (user + system) of one keel run, its waited-for children included.
#[derive(Clone, Copy, Debug)]
struct Usage {
    rss_mb: f64,
    cpu_ms: f64,
}

/// What `/bin/bash -c true` (the Bash tool's child process) costs on this machine by itself,
/// spawned and reaped from Rust: median wall time and mean CPU time, in ms.
struct Shell {
    wall_ms: f64,
    cpu_ms: f64,
}

fn shell_spawn(n: usize) -> Result<Shell> {
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
fn usage_probe(args: &[String]) -> Result<()> {
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

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// Medians (and ranges) of everything measured.
struct Report {
    runs: usize,
    turns: usize,
    text_wall: Vec<f64>,
    text_ttfr: Vec<f64>,
    ttfr_slack: f64,
    text_rss_mb: Vec<f64>,
    text_cpu: Vec<f64>,
    tools_wall: Vec<f64>,
    tools_ttfr: Vec<f64>,
    tools_server: Vec<f64>,
    tools_api: Vec<f64>,
    tools_cpu: Vec<f64>,
    turn_own: Vec<f64>,
    turn_issue: Vec<f64>,
    gap_first: f64,
    gap_last: f64,
    tools_rss_mb: Vec<f64>,
    shell: Shell,
}

impl Report {
    fn new(o: &Opts, t1: &[Timed], r1: &[Usage], t2: &[Timed], r2: &[Usage], shell: Shell) -> Self {
        let n = o.turns as f64;
        let col = |v: &[Timed], f: fn(&Timed) -> f64| v.iter().map(f).collect::<Vec<f64>>();
        let window = o.turns.clamp(1, 10);
        let gaps = |first: bool| {
            let per_run: Vec<f64> = t2
                .iter()
                .map(|t| {
                    // gaps_ms[i] is the time from request i to request i+1: tool turn i+1.
                    let g = &t.gaps_ms[..o.turns.min(t.gaps_ms.len())];
                    let part = if first {
                        &g[..window.min(g.len())]
                    } else {
                        &g[g.len().saturating_sub(window)..]
                    };
                    median(part)
                })
                .collect();
            median(&per_run)
        };
        Report {
            runs: o.runs,
            turns: o.turns,
            text_wall: col(t1, |t| t.wall_ms),
            text_ttfr: col(t1, |t| t.ttfr_ms),
            ttfr_slack: median(&col(t1, |t| t.ttfr_slack_ms)),
            text_rss_mb: r1.iter().map(|u| u.rss_mb).collect(),
            text_cpu: r1.iter().map(|u| u.cpu_ms).collect(),
            tools_wall: col(t2, |t| t.wall_ms),
            tools_ttfr: col(t2, |t| t.ttfr_ms),
            tools_server: col(t2, |t| t.server_ms),
            tools_api: col(t2, |t| t.api_ms),
            tools_cpu: r2.iter().map(|u| u.cpu_ms).collect(),
            turn_own: t2
                .iter()
                .map(|t| (t.wall_ms - t.ttfr_ms - t.server_ms) / n)
                .collect(),
            turn_issue: t2.iter().map(|t| (t.wall_ms - t.ttfr_ms) / n).collect(),
            gap_first: gaps(true),
            gap_last: gaps(false),
            tools_rss_mb: r2.iter().map(|u| u.rss_mb).collect(),
            shell,
        }
    }

    /// CPU time per tool turn (keel and its shell child): the session's CPU time minus a
    /// one-turn run's (start-up and exit), spread over the turns.
    fn cpu_per_turn(&self) -> f64 {
        (median(&self.tools_cpu) - median(&self.text_cpu)) / self.turns as f64
    }

    fn print_table(&self) {
        let row = |label: &str, v: &[f64], unit: &str, note: &str| {
            let (lo, hi) = min_max(v);
            println!(
                "  {label:<48} {:>8.2} {unit:<3} ({lo:.2}–{hi:.2})  {note}",
                median(v)
            );
        };
        let one = |label: &str, x: f64, unit: &str, note: &str| {
            println!("  {label:<48} {x:>8.2} {unit:<3} {note}");
        };
        let verdict = |ok: bool| if ok { "meets" } else { "MISSES" };
        let ttfr = median(&self.text_ttfr);
        let rss1 = median(&self.text_rss_mb);
        let own = median(&self.turn_own);
        let rss2 = median(&self.tools_rss_mb);
        println!("\nkeel bench — medians of {} runs (min–max)", self.runs);
        println!("\none-turn text run");
        row(
            "launch → first request at the model server",
            &self.text_ttfr,
            "ms",
            &format!(
                "{} target < {TARGET_TTFR_MS} ms; incumbent ~{INCUMBENT_TTFR_MS} ms (overstates by ≤ {:.2} ms)",
                verdict(ttfr < TARGET_TTFR_MS),
                self.ttfr_slack
            ),
        );
        row("launch → exit", &self.text_wall, "ms", "");
        row("CPU time (user + system)", &self.text_cpu, "ms", "");
        row(
            "peak RSS",
            &self.text_rss_mb,
            "MB",
            &format!(
                "{} target < {TARGET_RSS_MB} MB; incumbent ~{INCUMBENT_RSS_MB} MB",
                verdict(rss1 < TARGET_RSS_MB)
            ),
        );
        println!(
            "\n{}-turn tool session (Bash `true` each turn, then text)",
            self.turns
        );
        row("launch → exit", &self.tools_wall, "ms", "");
        row("launch → first request", &self.tools_ttfr, "ms", "");
        row(
            "model server answering, all requests (replayed)",
            &self.tools_server,
            "ms",
            "",
        );
        row(
            "keel's duration_api_ms (waiting on the model)",
            &self.tools_api,
            "ms",
            "",
        );
        row(
            "keel's own time per tool turn",
            &self.turn_own,
            "ms",
            &format!(
                "{} target < {TARGET_TURN_MS} ms; incumbent ~{INCUMBENT_TURN_MS} ms",
                verdict(own < TARGET_TURN_MS)
            ),
        );
        row(
            "(wall − launch→first request) / turns",
            &self.turn_issue,
            "ms",
            "the issue's definition",
        );
        one(
            "  the shell child alone (bash -c true from Rust)",
            self.shell.wall_ms,
            "ms",
            "included in both figures above",
        );
        one(
            "keel's own time per tool turn, shell excluded",
            own - self.shell.wall_ms,
            "ms",
            "",
        );
        one(
            "CPU time per tool turn (keel + shell)",
            self.cpu_per_turn(),
            "ms",
            &format!("of which the shell alone ~{:.2} ms", self.shell.cpu_ms),
        );
        println!(
            "  {:<48} {:>8.2} ms → {:.2} ms  request to request, median of the first vs the last 10 turns",
            "turn time, early → late (flatness)", self.gap_first, self.gap_last
        );
        row(
            "peak RSS",
            &self.tools_rss_mb,
            "MB",
            &format!(
                "{} target < {TARGET_RSS_MB} MB, flat",
                verdict(rss2 < TARGET_RSS_MB)
            ),
        );
        println!();
    }

    fn json(&self) -> String {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        let m = |v: &[f64]| r(median(v));
        json!({
            "bench": "keel",
            "runs": self.runs,
            "turns": self.turns,
            "text": {
                "ttfr_ms": m(&self.text_ttfr),
                "ttfr_max_overstatement_ms": r(self.ttfr_slack),
                "wall_ms": m(&self.text_wall),
                "cpu_ms": m(&self.text_cpu),
                "peak_rss_mb": m(&self.text_rss_mb),
            },
            "tools": {
                "wall_ms": m(&self.tools_wall),
                "ttfr_ms": m(&self.tools_ttfr),
                "server_ms": m(&self.tools_server),
                "duration_api_ms": m(&self.tools_api),
                "keel_ms_per_turn": m(&self.turn_own),
                "wall_minus_ttfr_ms_per_turn": m(&self.turn_issue),
                "shell_spawn_ms": r(self.shell.wall_ms),
                "keel_ms_per_turn_excl_shell": r(median(&self.turn_own) - self.shell.wall_ms),
                "cpu_ms": m(&self.tools_cpu),
                "cpu_ms_per_turn": r(self.cpu_per_turn()),
                "shell_cpu_ms": r(self.shell.cpu_ms),
                "turn_gap_first_ms": r(self.gap_first),
                "turn_gap_last_ms": r(self.gap_last),
                "peak_rss_mb": m(&self.tools_rss_mb),
            },
            "targets": {"ttfr_ms": TARGET_TTFR_MS, "keel_ms_per_turn": TARGET_TURN_MS, "peak_rss_mb": TARGET_RSS_MB},
        })
        .to_string()
    }
}
