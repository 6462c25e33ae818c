//! Benchmark (not a test): what the permission decision costs per Bash call.
//!
//! Runs what the engine does for each Bash call: judge the line once with the session's roots
//! (`PermissionConfig::judge_call`), take the batching verdict from that judgement, and decide
//! on it (`PermissionConfig::decide_judged`), for a mix of command lines a model sends
//! (read-only ones, ones a rule allows, ones that must be asked about, lines with words bash
//! expands) under a rule set like a user's, many times each. Prints the median per call in µs
//! for each line and over the whole mix, and one JSON line.
//!
//! `cargo run --release -p keel-core --example bench_bash_decision`

// A measurement, not product code: a failed unwrap stops the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use keel_core::permissions::{PermissionConfig, PermissionMode, Rule, RuleSource};
use keel_tools::ToolKind;
use serde_json::json;

const LINES: &[&str] = &[
    "git status",
    "ls -la src",
    "cargo test 2>&1 | tail -20",
    "grep -rn 'fn main' src | head -5",
    "find . -name '*.rs' -type f",
    "git log --oneline -10 && git diff HEAD~1 -- src/",
    "X=src; ls \"$X\" && sort -- \"$X\"/a.txt",
    "rm -rf build",
    "git -C /tmp/other log -p",
    "for f in a b c; do echo $f >> out.txt; done",
];

const ROUNDS: usize = 7;
const CALLS: usize = 300;

fn main() {
    let dir = std::env::temp_dir().join(format!("keel-bench-bash-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).expect("scratch directory");
    let mut perms = PermissionConfig::new(PermissionMode::Default, &dir);
    for r in ["Bash(cargo test:*)", "Bash(git log:*)", "Bash(npm run *)"] {
        perms
            .allow
            .push(Rule::parse(r, RuleSource::Flag).expect("rule"));
    }
    for r in ["Bash(rm -rf /:*)", "Read(./.env)", "Bash(git push:*)"] {
        perms
            .deny
            .push(Rule::parse(r, RuleSource::Flag).expect("rule"));
    }
    let mut per_line = Vec::new();
    let mut all = Vec::new();
    for line in LINES {
        let input = json!({ "command": line });
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            let t = Instant::now();
            for _ in 0..CALLS {
                let j = perms.judge_call(ToolKind::Bash, &input);
                let read_only = j.as_ref().is_some_and(|j| j.read_only());
                std::hint::black_box(perms.decide_judged(
                    "Bash",
                    ToolKind::Bash,
                    &input,
                    read_only,
                    j.as_ref(),
                ));
            }
            rounds.push(t.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        }
        rounds.sort_by(f64::total_cmp);
        let median = rounds[ROUNDS / 2];
        println!("{median:>9.1} µs  {line}");
        all.push(median);
        per_line.push(json!({ "line": line, "us": median }));
    }
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    println!("{mean:>9.1} µs  mean over the mix");
    println!(
        "{}",
        json!({ "bench": "bash_decision", "mean_us": mean, "lines": per_line })
    );
    let _ = std::fs::remove_dir_all(&dir);
}
