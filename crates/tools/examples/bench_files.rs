//! Benchmark (not a test): the file tools on big inputs.
//!
//! 1. Generates a tree (default 20,000 files, ~300 MB, nested, with a `.gitignore`) and runs a
//!    full-tree Grep (content mode, a pattern that matches rarely) and a Glob on 1 thread and
//!    on every core, next to `rg` with the same thread counts when `rg` is installed.
//! 2. Generates a 50 MB and a 1 GB text file and Reads 1,000 lines at their start, middle and
//!    end: cold (a new agent, whose line index is empty) and warm (the same agent again).
//!
//! Prints the median of `--runs` runs (default 5) with the range, and the peak RSS of this
//! process. `cargo run --release -p keel-tools --example bench_files [-- --files N --runs N
//! --reads-only DIR]` (`--reads-only`: skip the tree, only the Reads)
//! (DIR: where to generate, default a temporary directory; the tree is kept between runs of the
//! benchmark when DIR is given).

// A measurement, not product code: a failed unwrap stops the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use keel_tools::glob::GlobTool;
use keel_tools::grep::GrepTool;
use keel_tools::read::ReadTool;
use keel_tools::{CancelToken, Tool, ToolContext, ToolLimits, ToolOutcome};
use serde_json::{json, Value};

fn main() {
    let mut files = 20_000usize;
    let mut runs = 5usize;
    let mut dir: Option<PathBuf> = None;
    let mut reads_only = false;
    let mut args = std::env::args().skip(1);
    let count = |flag: &str, v: Option<String>| -> usize {
        match v.as_deref().map(str::parse::<usize>) {
            Some(Ok(n)) if (1..=10_000_000).contains(&n) => n,
            _ => usage(&format!("{flag} takes a number from 1 to 10000000")),
        }
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--files" => files = count("--files", args.next()),
            "--runs" => runs = count("--runs", args.next()),
            "--reads-only" => reads_only = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            flag if flag.starts_with('-') => usage(&format!("unknown option {flag}")),
            _ if dir.is_some() => usage(&format!("one DIR only (got a second: {a})")),
            _ => dir = Some(PathBuf::from(a)),
        }
    }
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let root = match dir {
        Some(d) => {
            std::fs::create_dir_all(&d).expect("DIR can be created");
            d.canonicalize().expect("DIR resolves")
        }
        None => tmp.path().to_path_buf(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    if !reads_only {
        searches(&rt, &root, files, runs);
    }
    reads(&rt, &root, runs);
    println!("peak RSS of this process: {:.1} MB", peak_rss_mb());
}

/// Grep and Glob over a generated tree, next to `rg`.
fn searches(rt: &tokio::runtime::Runtime, root: &Path, files: usize, runs: usize) {
    let tree = root.join("tree");
    let t = Instant::now();
    let bytes = generate_tree(&tree, files);
    eprintln!(
        "tree: {files} files, {} MB ({:.1} s to generate)",
        bytes / 1_000_000,
        t.elapsed().as_secs_f64()
    );
    let cores = keel_tools::walk::default_threads();
    let rg = which("rg");
    println!(
        "{:<44} {:>12} {:>22}",
        "measurement", "median ms", "range ms"
    );
    for threads in [1, cores] {
        let grep = json!({"pattern": "needle_[0-9]+_rare", "output_mode": "content", "path": tree});
        let ms = time(runs, || run(rt, &GrepTool, grep.clone(), threads));
        report(&format!("Grep, full tree, {threads} thread(s)"), &ms);
        if let Some(rg) = &rg {
            let ms = time(runs, || {
                let out = Command::new(rg)
                    .args(["-n", "-j", &threads.to_string(), "needle_[0-9]+_rare"])
                    .arg(&tree)
                    .output()
                    .expect("rg runs");
                assert!(out.status.success() || out.status.code() == Some(1));
            });
            report(&format!("rg, full tree, -j{threads}"), &ms);
        }
        let glob = json!({"pattern": "**/*.rs", "path": tree});
        let ms = time(runs, || run(rt, &GlobTool, glob.clone(), threads));
        report(&format!("Glob **/*.rs, {threads} thread(s)"), &ms);
    }
    if rg.is_none() {
        println!("(rg is not installed: no side-by-side figures)");
    }
}

/// Reads of 1,000 lines at the start, middle and end of a 50 MB and a 1 GB file: cold (a new
/// agent each time, so its line index is empty) and warm (one agent that read the file before).
fn reads(rt: &tokio::runtime::Runtime, root: &Path, runs: usize) {
    println!(
        "{:<44} {:>12} {:>22}",
        "measurement", "median ms", "range ms"
    );
    for (size, name) in [(50_000_000u64, "50 MB"), (1_000_000_000, "1 GB")] {
        let big = root.join(format!("big-{}.log", size / 1_000_000));
        let t = Instant::now();
        let lines = generate_big(&big, size);
        eprintln!(
            "{name} file generated in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        for (offset, at) in [(1, "start"), (lines / 2, "middle"), (lines - 999, "end")] {
            let input = json!({"file_path": big, "offset": offset, "limit": 1000});
            let ms = time(runs, || run(rt, &ReadTool, input.clone(), 1));
            report(&format!("Read 1000 lines, {at} of {name}, cold"), &ms);
            let agent = ToolContext::new("/", CancelToken::new());
            read_in(rt, &agent, input.clone());
            let ms = time(runs, || read_in(rt, &agent, input.clone()));
            report(&format!("Read 1000 lines, {at} of {name}, warm"), &ms);
        }
    }
}

/// One Read by the agent `cx` (its line index kept between calls).
fn read_in(rt: &tokio::runtime::Runtime, cx: &ToolContext, input: Value) {
    match rt.block_on(ReadTool.call(input, cx.clone())) {
        ToolOutcome::Ok { .. } => {}
        other => panic!("{other:?}"),
    }
}

const USAGE: &str = "usage: bench_files [--files N] [--runs N] [--reads-only] [DIR]
  --files N     files in the generated tree (default 20000)
  --runs N      timed runs of each measurement (default 5)
  --reads-only  skip the tree (Grep, Glob): only the Reads of big files
  DIR           where to generate the tree and the big files (kept between runs; default a
                temporary directory, removed at the end)";

fn usage(problem: &str) -> ! {
    eprintln!("bench_files: {problem}\n{USAGE}");
    std::process::exit(2);
}

fn run(rt: &tokio::runtime::Runtime, tool: &dyn Tool, input: Value, threads: usize) {
    let limits = Arc::new(ToolLimits {
        search_threads: threads,
        ..ToolLimits::default()
    });
    let cx = ToolContext::new("/", CancelToken::new()).with_limits(limits);
    match rt.block_on(tool.call(input, cx)) {
        ToolOutcome::Ok { .. } => {}
        other => panic!("{other:?}"),
    }
}

fn time(runs: usize, mut f: impl FnMut()) -> Vec<f64> {
    f(); // warm the page cache
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    ms.sort_by(|a, b| a.total_cmp(b));
    ms
}

fn report(label: &str, ms: &[f64]) {
    let median = ms[ms.len() / 2];
    println!(
        "{label:<44} {median:>12.1} {:>22}",
        format!("{:.1}–{:.1}", ms[0], ms[ms.len() - 1])
    );
}

/// Source-like files in nested directories, a few with the rare pattern; an ignored directory.
fn generate_tree(root: &Path, files: usize) -> u64 {
    let marker = root.join(".generated");
    let mut total = 0u64;
    if marker.exists() {
        return std::fs::read_to_string(&marker)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
    }
    std::fs::create_dir_all(root).expect("the tree's directory");
    std::fs::write(root.join(".gitignore"), "target/\n").expect(".gitignore");
    let line = "    let value = compute(index, &mut state); // keep the tree realistic\n";
    for i in 0..files {
        let dir = root.join(format!("crate{}/src/mod{}", i % 40, (i / 40) % 25));
        std::fs::create_dir_all(&dir).expect("a directory");
        let ext = if i % 3 == 0 { "rs" } else { "txt" };
        let mut body = String::with_capacity(15_000);
        for l in 0..200 {
            if (i * 200 + l) % 99_991 == 0 {
                body.push_str(&format!("needle_{i}_rare\n"));
            } else {
                body.push_str(line);
            }
        }
        total += body.len() as u64;
        std::fs::write(dir.join(format!("file{i}.{ext}")), body).expect("a file");
    }
    let ignored = root.join("target/debug");
    std::fs::create_dir_all(&ignored).expect("target/");
    std::fs::write(ignored.join("big.txt"), "needle_0_rare\n".repeat(1000)).expect("ignored");
    std::fs::write(&marker, total.to_string()).expect("marker");
    total
}

/// A file of at least `size` bytes of equal lines; returns its number of lines.
fn generate_big(path: &Path, size: u64) -> usize {
    let line_len = big_line(0).len() as u64;
    if let Ok(m) = std::fs::metadata(path) {
        if m.len() >= size && m.len() % line_len == 0 {
            return (m.len() / line_len) as usize;
        }
    }
    let mut f =
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).expect("big file"));
    let mut written = 0u64;
    let mut n = 0u64;
    while written < size {
        let line = big_line(n);
        f.write_all(line.as_bytes()).expect("writing the big file");
        written += line.len() as u64;
        n += 1;
    }
    f.flush().expect("flushing the big file");
    n as usize
}

fn big_line(n: u64) -> String {
    format!("{n:>10} the quick brown fox jumps over the lazy dog, again and again\n")
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
