//! The interactive UI's cost (a measurement, not a test).
//!
//! ```text
//! cargo build --release -p keel-cli
//! cargo run --release -p keel-cli --example bench_tui -- [--keel PATH] [--runs N] [--messages N] [--json]
//! ```
//!
//! It runs the release `keel` binary in a pseudo-terminal (drawn on a vt100 emulator in this
//! process) against keel-mock on loopback, and reports:
//!
//! - launch → first drawn frame: from just before `spawn` to the moment the terminal has
//!   received the status line (the last row of the first frame), over `--runs` launches;
//! - keystroke → echo: from writing one character to the terminal until the screen shows it in
//!   the input box, for 60 keystrokes;
//! - a 10,000-line bracketed paste → its placeholder on screen, 5 times;
//! - peak RSS (`VmHWM` from /proc) after every 100 messages of scrollback, up to `--messages`
//!   (each prompt and each reply is one message), to show whether memory stays flat.
//!
//! Waits poll the emulator every 100 µs, so the figures include up to that much.

// A measurement, not product code: a failed unwrap stops the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/suite/pty.rs"]
mod pty;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use keel_mock::{MockServer, Scenario};
use portable_pty::CommandBuilder;
use serde_json::json;

struct Opts {
    keel: PathBuf,
    runs: usize,
    messages: usize,
    json_only: bool,
}

fn parse() -> Result<Opts> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let mut o = Opts {
        keel: target.join("release/keel"),
        runs: 7,
        messages: 500,
        json_only: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let val = |i: usize| {
            args.get(i + 1)
                .with_context(|| format!("{} needs a value", args[i]))
        };
        match args[i].as_str() {
            "--keel" => o.keel = PathBuf::from(val(i)?),
            "--runs" => o.runs = val(i)?.parse().context("--runs takes a number")?,
            "--messages" => {
                o.messages = val(i)?.parse().context("--messages takes a number")?
            }
            "--json" => {
                o.json_only = true;
                i += 1;
                continue;
            }
            other => bail!("unknown argument {other}; usage: bench_tui [--keel PATH] [--runs N] [--messages N] [--json]"),
        }
        i += 2;
    }
    if o.runs == 0 || o.messages < 2 {
        bail!("--runs must be at least 1 and --messages at least 2");
    }
    if !o.keel.exists() {
        bail!(
            "{} does not exist: build it with `cargo build --release -p keel-cli`",
            o.keel.display()
        );
    }
    Ok(o)
}

fn command(o: &Opts, mock: &MockServer, dir: &std::path::Path) -> CommandBuilder {
    let mut cmd = CommandBuilder::new(&o.keel);
    cmd.cwd(dir);
    cmd.env_clear();
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd.env("HOME", dir);
    cmd.env("KEEL_HOME", dir.join("keel"));
    cmd.env("ANTHROPIC_BASE_URL", mock.base_url());
    cmd.env("ANTHROPIC_API_KEY", "sk-bench");
    cmd.env("TERM", "xterm-256color");
    cmd
}

/// Poll the screen until `pred` holds; the time it took. Fails after 60 s.
fn wait(t: &pty::Tty, pred: impl Fn(&str) -> bool) -> Result<Duration> {
    let start = Instant::now();
    loop {
        if pred(&t.screen()) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > Duration::from_secs(60) {
            bail!("the screen never changed as expected:\n{}", t.screen());
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn kb(field: &str, pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let o = parse()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let scenario = Scenario::from_json(
        &json!({"steps": [{"kind": "text", "text": "An answer of a few lines:\n- one point\n- another point\nThat is all."}], "on_exhausted": "loop"})
            .to_string(),
    )?;
    let mock = rt.block_on(MockServer::start(scenario))?;
    let dir = tempfile::tempdir()?;

    // Launch → first frame.
    let mut first = Vec::new();
    for _ in 0..o.runs {
        let t0 = Instant::now();
        let mut t = pty::Tty::spawn(command(&o, &mock, dir.path()), 30, 100);
        wait(&t, |s| s.contains("shift+tab mode"))?;
        first.push(t0.elapsed().as_secs_f64() * 1000.0);
        t.send("\x03\x03");
        let _ = t.child.wait();
    }

    let mut t = pty::Tty::spawn(command(&o, &mock, dir.path()), 30, 100);
    wait(&t, |s| s.contains("shift+tab mode"))?;
    let pid = t.child.process_id().context("keel's pid")?;

    // Keystroke → echo.
    let mut echo = Vec::new();
    let mut typed = String::from("> ");
    for i in 0..60 {
        let c = (b'a' + (i % 26) as u8) as char;
        typed.push(c);
        let t0 = Instant::now();
        t.send(&c.to_string());
        wait(&t, |s| s.contains(&typed))?;
        echo.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    t.send("\x15"); // Ctrl+U: clear the line

    // A 10,000-line bracketed paste → its placeholder on screen.
    let body: String = (0..10_000).map(|i| format!("pasted line {i}\n")).collect();
    let mut paste = Vec::new();
    for n in 1..=5 {
        let t0 = Instant::now();
        t.send(&format!("\x1b[200~{body}\x1b[201~"));
        let label = format!("[Pasted text #{n} +10000 lines]");
        wait(&t, |s| s.contains(&label))?;
        paste.push(t0.elapsed().as_secs_f64() * 1000.0);
        t.send("\x15");
    }
    paste.sort_by(f64::total_cmp);

    // Peak RSS as the scrollback grows.
    let mut rss = Vec::new();
    let prompts = o.messages / 2;
    for i in 1..=prompts {
        let before = mock.requests().len();
        t.send(&format!("prompt {i}\r"));
        let start = Instant::now();
        while mock.requests().len() <= before {
            if start.elapsed() > Duration::from_secs(60) {
                bail!("prompt {i} never reached the model");
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        wait(&t, |s| {
            !s.contains("esc to interrupt") && s.contains("That is all.")
        })?;
        if (i * 2) % 100 == 0 || i == prompts {
            rss.push((
                i * 2,
                kb("VmHWM:", pid).unwrap_or(0),
                kb("VmRSS:", pid).unwrap_or(0),
            ));
        }
    }
    t.send("\x03\x03");
    let _ = t.child.wait();

    first.sort_by(f64::total_cmp);
    echo.sort_by(f64::total_cmp);
    let (f_med, e_med) = (median(&mut first), median(&mut echo));
    let (f_min, f_max) = (first[0], first[first.len() - 1]);
    let e_max = echo[echo.len() - 1];
    let e_p95 = echo[(echo.len() * 95 / 100).min(echo.len() - 1)];
    if !o.json_only {
        println!(
            "keel interactive UI, {} (pseudo-terminal, vt100)",
            o.keel.display()
        );
        println!("launch → first frame:  median {f_med:.1} ms  (range {f_min:.1}–{f_max:.1}, {} runs)  target ≤ 20 ms", o.runs);
        println!("keystroke → echo:      median {e_med:.2} ms  p95 {e_p95:.2} ms  max {e_max:.2} ms  (60 keys)  target ≤ 5 ms");
        println!(
            "10,000-line paste → placeholder: median {:.1} ms  (range {:.1}–{:.1}, 5 pastes)",
            paste[paste.len() / 2],
            paste[0],
            paste[paste.len() - 1]
        );
        println!("scrollback messages    peak RSS    RSS now");
        for (m, hwm, now) in &rss {
            println!(
                "{m:>19}    {:>6.1} MB   {:>6.1} MB",
                *hwm as f64 / 1024.0,
                *now as f64 / 1024.0
            );
        }
        println!("target: peak RSS ≤ 30 MB and flat");
    }
    let out = json!({
        "first_frame_ms": {"median": f_med, "min": f_min, "max": f_max, "runs": o.runs},
        "echo_ms": {"median": e_med, "p95": e_p95, "max": e_max, "keys": echo.len()},
        "paste_10k_lines_ms": {"median": paste[paste.len() / 2], "min": paste[0], "max": paste[paste.len() - 1]},
        "rss_kb": rss.iter().map(|(m, hwm, now)| json!({"messages": m, "peak": hwm, "now": now})).collect::<Vec<_>>(),
    });
    println!("{out}");
    Ok(())
}
