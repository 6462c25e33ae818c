//! What prompt caching saves: one fixed 50-turn session (a ~20 k-token system prompt and tools,
//! a Bash call each turn) run twice against keel-mock, which bills the prompt cache the way the
//! API does (cache writes 1.25×, reads 0.1× the input price) — once as keel runs it, once with
//! `DISABLE_PROMPT_CACHING=1`. Prints the session's cost both ways and the fraction of input
//! tokens read from the cache.
//!
//! ```text
//! cargo build --release -p keel-cli -p keel-mock
//! cargo run --release -p keel-cli --example cache_cost -- [--keel target/release/keel] [--turns 50]
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use keel_mock::{MockServer, Scenario};
use serde_json::{json, Value};

struct Outcome {
    cost: f64,
    input: u64,
    read: u64,
    write: u64,
}

fn run(
    rt: &tokio::runtime::Runtime,
    keel: &PathBuf,
    turns: usize,
    caching: bool,
) -> Result<Outcome> {
    let scenario = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo step"}}], "times": turns},
        {"kind": "text", "text": "Done."}
    ]});
    let mock = rt.block_on(MockServer::start(Scenario::from_json(
        &scenario.to_string(),
    )?))?;
    let home = tempfile::tempdir()?;
    let cwd = tempfile::tempdir()?;
    // A project's worth of instructions: ~20 k tokens with keel's own prompt and tools.
    let rules: String = (0..1000)
        .map(|i| format!("Rule {i}: keep the code tidy, tested and documented.\n"))
        .collect();
    let mut cmd = Command::new(keel);
    cmd.args([
        "-p",
        "work",
        "--output-format",
        "json",
        "--allowedTools",
        "Bash",
    ])
    .args(["--append-system-prompt", &rules])
    .current_dir(cwd.path())
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("HOME", home.path())
    .env("KEEL_HOME", home.path().join(".keel"))
    .env("ANTHROPIC_BASE_URL", mock.base_url())
    .env("ANTHROPIC_API_KEY", "bench")
    .env("ANTHROPIC_MODEL", "claude-sonnet-4-5")
    .stdin(Stdio::null())
    .stderr(Stdio::inherit());
    if !caching {
        cmd.env("DISABLE_PROMPT_CACHING", "1");
    }
    let out = cmd.output().context("running keel")?;
    mock.shutdown();
    if !out.status.success() {
        bail!("keel exited with {}", out.status);
    }
    let result: Value = serde_json::from_slice(&out.stdout).context("the json result")?;
    let u = &result["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Ok(Outcome {
        cost: result["total_cost_usd"].as_f64().unwrap_or(0.0),
        input: n("input_tokens"),
        read: n("cache_read_input_tokens"),
        write: n("cache_creation_input_tokens"),
    })
}

fn main() -> Result<()> {
    let mut keel = PathBuf::from("target/release/keel");
    let mut turns = 50usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keel" => keel = args.next().context("--keel needs a path")?.into(),
            "--turns" => turns = args.next().context("--turns needs a number")?.parse()?,
            other => bail!("unknown argument {other}"),
        }
    }
    let keel = keel
        .canonicalize()
        .with_context(|| format!("no keel binary at {} (build it first)", keel.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let on = run(&rt, &keel, turns, true)?;
    let off = run(&rt, &keel, turns, false)?;
    let all = on.input + on.read + on.write;
    println!("{turns}-turn session, claude-sonnet-4-5 prices, keel-mock's cache");
    println!(
        "  caching on : ${:.4}  (input {} · cache write {} · cache read {} tokens; {:.1}% of input read from cache)",
        on.cost,
        on.input,
        on.write,
        on.read,
        100.0 * on.read as f64 / all.max(1) as f64
    );
    println!(
        "  caching off: ${:.4}  (input {} tokens)",
        off.cost, off.input
    );
    println!(
        "  caching costs {:.1}% of the uncached session",
        100.0 * on.cost / off.cost.max(1e-12)
    );
    Ok(())
}
