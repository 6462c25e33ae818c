//! The fuzz targets' corpora (fuzz/corpus/<target>/), replayed on stable Rust: every seed,
//! and a bounded number of deterministic mutations of each, must go through its target
//! without a panic. The real fuzzing (cargo fuzz, nightly) runs in .ci/run when the machine
//! has the tools; this keeps every seed a regression test everywhere.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the {target} corpus at {} is missing: {e}", dir.display()))
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect();
    out.sort();
    assert!(!out.is_empty(), "the {target} corpus is empty");
    out
}

/// A small xorshift generator: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: &[&[u8]] = &[
    b"\"",
    b"'",
    b"\\",
    b"$(",
    b"`",
    b"\n",
    b"\r",
    b"\0",
    b"{",
    b"}",
    b"[",
    b"]",
    b"*",
    b"&",
    b"|",
    b";",
    b"$'",
    b"<<",
    b">",
    b"..",
    b"~",
    b"\xff",
    b"99999999999999999999",
    b"-1",
    b"null",
    b"true",
    b"{}",
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            1 => {
                let i = rng.below(v.len() + 1);
                let ins = INTERESTING[rng.below(INTERESTING.len())];
                v.splice(i..i, ins.iter().copied());
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                let j = (i + rng.below(16)).min(v.len());
                v.drain(i..j);
            }
            3 if !v.is_empty() => {
                let n = rng.below(v.len());
                v.truncate(n);
            }
            _ if !v.is_empty() => {
                let i = rng.below(v.len());
                let j = (i + rng.below(32)).min(v.len());
                let chunk = v[i..j].to_vec();
                let k = rng.below(v.len() + 1);
                v.splice(k..k, chunk);
            }
            _ => {}
        }
    }
    v
}

/// Run every seed, then `budget` mutations spread over the seeds.
fn replay(target: &str, run: fn(&[u8]), budget: usize) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    let seeds = corpus(target);
    let per_seed = (budget / seeds.len()).max(1);
    for seed in seeds {
        run(&seed);
        for _ in 0..per_seed {
            run(&mutate(&mut rng, &seed));
        }
    }
}

#[test]
fn shell_corpus() {
    replay("shell", keel_core::fuzzing::shell, 1500);
}

#[test]
fn sse_corpus() {
    replay("sse", keel_core::fuzzing::sse, 4000);
}

#[test]
fn openai_sse_corpus() {
    replay("openai_sse", keel_core::fuzzing::openai_sse, 4000);
}

#[test]
fn bedrock_eventstream_corpus() {
    replay(
        "bedrock_eventstream",
        keel_core::fuzzing::bedrock_eventstream,
        4000,
    );
}

#[test]
fn stream_json_corpus() {
    fn run(data: &[u8]) {
        for line in String::from_utf8_lossy(data).lines() {
            let _ = keel_protocol::input::parse_input_line(line);
        }
    }
    replay("stream_json", run, 6000);
}

#[test]
fn transcript_corpus() {
    replay("transcript", keel_core::fuzzing::transcript, 3000);
}

#[test]
fn settings_corpus() {
    replay("settings", keel_core::fuzzing::settings, 4000);
}
