//! keel's cost benchmark (a measurement, not a test).
//!
//! ```text
//! cargo build --release -p keel-cli
//! cargo run --release -p keel-cli --example bench -- [--keel PATH] [--runs N] [--turns N] [--env K=V]... [--json]
//! cargo run --release -p keel-cli --example bench -- --table   # the standing table (table.rs)
//! cargo run --release -p keel-cli --example bench -- --flat [--versus PATH]  # flatness (flat.rs)
//! crates/cli/examples/bench/run-all.sh                          # the table, Reads at offsets, resume
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
//!
//! The same session is then run N times more against a *lean* server (lean.rs), a process of
//! its own that reads each request whole but parses and keeps nothing, and logs its own time
//! per request. keel-mock parses every request into a JSON tree and keeps them all, which at
//! turn 500 is megabytes per request on the same cores as keel; its memory traffic shows up in
//! keel's own CPU time, and the lean runs are the figures for keel's per-turn cost and its
//! flatness (a real API runs on another machine).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use keel_mock::{MockServer, RecordedRequest, Scenario};
use serde_json::{json, Value};

mod flat;
mod lean;
mod probe;
mod replay;
mod report;
mod run;
mod table;

use probe::*;
use replay::*;
use report::*;
use run::*;

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
    tool: TurnTool,
    json_only: bool,
    /// `--table`: the standing benchmark table (table.rs) instead of one session's figures.
    table: bool,
    /// `--flat`: only the flatness runs (flat.rs).
    flat: bool,
    /// `--versus PATH`: with `--flat`, a second keel binary, run alternately with the first.
    versus: Option<PathBuf>,
    /// Whether `--turns` was given (`--flat` defaults to 200 turns).
    turns_given: bool,
}

fn usage() -> String {
    format!(
        "usage: cargo run --release -p keel-cli --example bench -- [--keel PATH] [--runs N (default {DEFAULT_RUNS})] [--turns N (default {DEFAULT_TURNS})] [--tool bash|read (default bash)] [--env KEY=VALUE]... [--json] [--table] [--flat [--versus PATH]]"
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
        tool: TurnTool::Bash,
        json_only: false,
        table: false,
        flat: false,
        versus: None,
        turns_given: false,
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
            "--turns" => {
                o.turns = val()?.parse().context("--turns takes a number")?;
                o.turns_given = true;
            }
            "--flat" => o.flat = true,
            "--versus" => o.versus = Some(PathBuf::from(val()?)),
            "--json" => o.json_only = true,
            "--table" => o.table = true,
            "--tool" => o.tool = TurnTool::from_arg(val()?).context(usage())?,
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
    if o.flat && !o.turns_given {
        o.turns = flat::FLAT_TURNS;
    }
    if o.versus.is_some() && !o.flat {
        bail!("--versus goes with --flat");
    }
    if o.runs == 0 || o.turns == 0 {
        bail!("--runs and --turns must be at least 1");
    }
    Ok(o)
}

/// How much of the code order the build script gives the linker this binary has: its names
/// carry hashes that change with the compiler, and a stale list silently packs nothing (the
/// one-turn RSS then doubles).
fn code_order(keel: &std::path::Path) -> String {
    let list = concat!(env!("CARGO_MANIFEST_DIR"), "/order/keel.order");
    let Ok(listed) = std::fs::read_to_string(list) else {
        return format!("code order: {list} is missing");
    };
    let out = match std::process::Command::new("nm").arg(keel).output() {
        Ok(o) if o.status.success() => o.stdout,
        _ => return "code order: not checked (`nm` could not read the binary)".into(),
    };
    let names: std::collections::HashSet<&[u8]> = out
        .split(|&b| b == b'\n')
        .filter_map(|l| l.rsplit(|&b| b == b' ').next())
        .collect();
    let listed: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    let found = listed
        .iter()
        .filter(|n| names.contains(n.as_bytes()))
        .count();
    format!(
        "code order: {found} of the {} functions in order/keel.order are in this binary{}",
        listed.len(),
        if found * 10 < listed.len() * 9 {
            " — remake the list (crates/cli/order/make.sh)"
        } else {
            ""
        }
    )
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--usage-probe") {
        return usage_probe(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("--lean-server") {
        return lean::lean_server_main(&args[1..]);
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
        eprintln!("{}", code_order(&keel));
    }

    if o.table {
        return table::run_table(&b, o.runs);
    }
    if o.flat {
        let versus = match &o.versus {
            Some(p) if !p.is_file() => bail!("--versus: no keel binary at {}", p.display()),
            Some(p) => Some(p.canonicalize()?),
            None => None,
        };
        return flat::run_flat(&b, versus.as_deref(), o.runs, o.turns);
    }
    // Warm the page cache and the loopback path once; not counted.
    b.timed(&text_case())?;

    let text = text_case();
    let tools = tool_case(o.turns, o.tool);
    let t1: Vec<Timed> = (0..o.runs).map(|_| b.timed(&text)).collect::<Result<_>>()?;
    let r1: Vec<Usage> = (0..o.runs).map(|_| b.usage(&text)).collect::<Result<_>>()?;
    let t2: Vec<Timed> = (0..o.runs)
        .map(|_| b.timed(&tools))
        .collect::<Result<_>>()?;
    let r2: Vec<Usage> = (0..o.runs)
        .map(|_| b.usage(&tools))
        .collect::<Result<_>>()?;
    let lean: Vec<LeanRun> = (0..o.runs)
        .map(|_| b.lean(&tools, o.tool))
        .collect::<Result<_>>()?;
    let shell = shell_spawn(o.runs.max(20))?;

    let mut report = Report::new(&o, &t1, &r1, &t2, &r2, shell);
    let marks: Vec<Vec<(usize, f64)>> = lean.iter().map(|l| l.marks.clone()).collect();
    report.lean_blocks = lean_blocks(o.turns, &marks);
    // The whole run over its tool turns (the text turn and start-up are a few ms of it).
    report.lean_turn_ms = lean.iter().map(|l| l.wall_ms / o.turns as f64).collect();
    report.lean_own_ms = lean
        .iter()
        .map(|l| l.own_ms.iter().sum::<f64>() / l.own_ms.len().max(1) as f64)
        .collect();
    if !o.json_only {
        report.print_table();
    }
    println!("{}", report.json());
    Ok(())
}
