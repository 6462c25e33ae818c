//! Benchmark (not a test): the cost of transcripts.
//!
//! 1. Writes a 10,000-message session transcript in Claude Code's format (a realistic mix: prompts, replies with text
//!    and a tool call, tool results of 1-2 KB, init and result frames per turn) through the real
//!    writer, with an fsync at every turn boundary as a run does.
//! 2. Measures the latency of one record with `KEEL_FSYNC=turn` (write only) and
//!    `KEEL_FSYNC=message` (write + fsync).
//! 3. Resumes it in several fresh processes (this example re-run with `--probe`): lock, read,
//!    parse and rebuild as `--resume` does, then a prompt and the first request's body; prints
//!    medians with ranges and each process's peak RSS (VmHWM), and one JSON line.
//!
//! `cargo run --release -p keel-core --example bench_resume [-- DIR]` (DIR: where to write,
//! default a temporary directory; pick the disk you care about, fsync cost depends on it).

// A measurement, not product code: a failed unwrap stops the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keel_core::transcript::{
    FsyncMode, OpenRequest, SessionHeader, Start, Store, TranscriptWriter,
};
use keel_protocol::Frame;
use serde_json::json;

const MESSAGES: usize = 10_000;
const CALLS_PER_TURN: usize = 10;
const RESUMES: usize = 7;

/// A deterministic generator of filler text.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn text(&mut self, bytes: usize) -> String {
        const W: &[&str] = &[
            "src/", "main.rs", "fn", "let", "error:", "ok", "test", "result", "cargo", "build",
            "warning", "the", "value", "index", "line", "42", "module", "struct", "impl", "=>",
        ];
        let mut s = String::with_capacity(bytes + 16);
        while s.len() < bytes {
            s.push_str(W[(self.next() % W.len() as u64) as usize]);
            s.push(if self.next() & 7 == 0 { '\n' } else { ' ' });
        }
        s
    }
}

fn frame(v: serde_json::Value) -> Frame {
    serde_json::from_value(v).expect("a valid frame")
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Write the session; returns (messages, records, bytes, time).
fn write_session(path: &Path, sid: &str) -> (usize, usize, u64, Duration) {
    let header = SessionHeader::new(sid, Path::new("/bench"), "claude-sonnet-4-5");
    let w = TranscriptWriter::create_lazily(path.to_owned(), &header, &[], FsyncMode::Turn)
        .expect("writer");
    let mut words = Words(0x2545_f491_4f6c_dd1d);
    let (mut messages, mut records, mut call) = (0usize, 0usize, 0usize);
    let t0 = Instant::now();
    let append = |f: Frame, records: &mut usize| {
        w.append_frame(&f).expect("append");
        *records += 1;
    };
    while messages < MESSAGES {
        // A turn: init, the prompt, then replies with a tool call each, then a final text.
        append(
            frame(
                json!({"type":"system","subtype":"init","cwd":"/bench","session_id":sid,
                "tools":["Bash","Read"],"model":"claude-sonnet-4-5","permissionMode":"default",
                "uuid":uuid()}),
            ),
            &mut records,
        );
        append(
            frame(json!({"type":"user","message":{"role":"user","content":[
                {"type":"text","text":words.text(200)}]},"parent_tool_use_id":null,
                "session_id":sid,"uuid":uuid()})),
            &mut records,
        );
        messages += 1;
        for _ in 0..CALLS_PER_TURN {
            if messages + 2 > MESSAGES {
                break;
            }
            call += 1;
            let msg_id = format!("msg_{call}");
            let tool_id = format!("toolu_{call}");
            let asst = |content: serde_json::Value| {
                frame(
                    json!({"type":"assistant","message":{"id":msg_id,"type":"message",
                    "role":"assistant","model":"claude-sonnet-4-5","content":[content],
                    "stop_reason":null,"stop_sequence":null,
                    "usage":{"input_tokens":1200,"output_tokens":90}},
                    "parent_tool_use_id":null,"session_id":sid,"uuid":uuid(),
                    "request_id":format!("req_{call}")}),
                )
            };
            append(
                asst(json!({"type":"text","text":words.text(300)})),
                &mut records,
            );
            append(
                asst(json!({"type":"tool_use","id":tool_id,"name":"Bash",
                    "input":{"command":format!("cargo test -p crate{call} 2>&1 | tail -40"),
                    "description":"Run the tests"}})),
                &mut records,
            );
            let size = 1000 + (words.next() % 1000) as usize;
            let out = words.text(size);
            append(
                frame(json!({"type":"user","message":{"role":"user","content":[
                    {"type":"tool_result","tool_use_id":tool_id,"content":out,"is_error":false}]},
                    "parent_tool_use_id":null,"session_id":sid,"uuid":uuid(),
                    "tool_use_result":{"stdout":out,"stderr":"","interrupted":false},
                    "tool_result_meta":[{"id":tool_id,"permission_decision":{"decision":"accept"}}]})),
                &mut records,
            );
            messages += 2;
            w.sync_now().expect("sync"); // a turn boundary: after each batch of results
        }
        if messages < MESSAGES {
            call += 1;
            append(
                frame(
                    json!({"type":"assistant","message":{"id":format!("msg_{call}"),
                    "type":"message","role":"assistant","model":"claude-sonnet-4-5",
                    "content":[{"type":"text","text":words.text(400)}],"stop_reason":null,
                    "stop_sequence":null,"usage":{}},"parent_tool_use_id":null,
                    "session_id":sid,"uuid":uuid()}),
                ),
                &mut records,
            );
            messages += 1;
        }
        append(
            frame(
                json!({"type":"result","subtype":"success","is_error":false,"duration_ms":1,
                "duration_api_ms":1,"num_turns":CALLS_PER_TURN + 1,"result":"done",
                "session_id":sid,"total_cost_usd":0.01,"usage":{},"modelUsage":{},
                "permission_denials":[],"uuid":uuid()}),
            ),
            &mut records,
        );
        w.sync_now().expect("sync");
    }
    let took = t0.elapsed();
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    (messages, records, bytes, took)
}

/// Median and 99th percentile per record of appending `n` records of ~1.5 KB in `mode`.
fn record_latency(dir: &Path, mode: FsyncMode, n: usize) -> (Duration, Duration) {
    let sid = uuid();
    let path = dir.join(format!("latency-{}.jsonl", mode.as_str()));
    let header = SessionHeader::new(&sid, Path::new("/bench"), "m");
    let w = TranscriptWriter::create_lazily(path, &header, &[], mode).expect("writer");
    let mut words = Words(7);
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let f = frame(json!({"type":"user","message":{"role":"user","content":[
            {"type":"tool_result","tool_use_id":format!("t{i}"),"content":words.text(1500)}]},
            "parent_tool_use_id":null,"session_id":sid,"uuid":uuid()}));
        let t0 = Instant::now();
        w.append_frame(&f).expect("append");
        times.push(t0.elapsed());
    }
    times.sort();
    (times[n / 2], times[n * 99 / 100])
}

fn status(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .map(|l| l[field.len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "?".into())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--probe") {
        return probe(
            Path::new(&args[1]),
            &args[2],
            args.get(3).map(String::as_str) == Some("--whole"),
        );
    }
    let keep = args.first().map(PathBuf::from);
    let tmp = tempfile::tempdir_in(keep.as_deref().unwrap_or(&std::env::temp_dir()))
        .expect("a scratch directory");
    let home = tmp.path().to_owned();
    let _cleanup = if std::env::var_os("KEEL_BENCH_KEEP").is_some() {
        // To profile a resume: `bench_resume --probe HOME SESSION` on what is left.
        println!("keeping {} (KEEL_BENCH_KEEP)", home.display());
        let _ = tmp.keep();
        None
    } else {
        Some(tmp)
    };
    let home = home.as_path();
    let store = Store::new(home);
    let cwd = Path::new("/bench");
    let sid = uuid();
    let path = store.session_path(cwd, &sid);

    let (messages, records, bytes, took) = write_session(&path, &sid);
    println!(
        "wrote {messages} messages as {records} records, {:.1} MiB, in {} ({:.1} µs per record, fsync per turn)",
        bytes as f64 / 1048576.0,
        ms(took),
        took.as_secs_f64() * 1e6 / records as f64
    );

    for (mode, n) in [(FsyncMode::Turn, 2000), (FsyncMode::Message, 300)] {
        let (p50, p99) = record_latency(home, mode, n);
        println!(
            "KEEL_FSYNC={:<7} one 1.5 KB record: median {:.1} µs, p99 {:.1} µs ({n} records)",
            mode.as_str(),
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }

    // Each resume runs in a fresh process (this example re-run as a probe), so that its peak
    // memory is its own and not what writing the session left behind. First with the whole
    // transcript read (its checkpoint removed before each), then from the checkpoint a resume
    // leaves.
    let exe = std::env::current_exe().expect("the bench's own path");
    let probe = |whole: bool| -> Probe {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["--probe", &home.display().to_string(), &sid]);
        if whole {
            cmd.arg("--whole");
        }
        let out = cmd.output().expect("running the probe");
        assert!(
            out.status.success(),
            "the probe failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("the probe's report")
    };
    let mut json = serde_json::json!({"messages": messages, "transcript_bytes": bytes});
    for (whole, label, key) in [
        (true, "the whole transcript read", "whole"),
        (false, "from the checkpoint a resume left", "checkpoint"),
    ] {
        let mut runs: Vec<Probe> = (0..RESUMES).map(|_| probe(whole)).collect();
        let pick = |f: fn(&Probe) -> f64, runs: &mut Vec<Probe>| {
            runs.sort_by(|a, b| f(a).total_cmp(&f(b)));
            (
                f(&runs[0]),
                f(&runs[runs.len() / 2]),
                f(&runs[runs.len() - 1]),
            )
        };
        let (open_lo, open_med, open_hi) = pick(|p| p.open_ms, &mut runs);
        let (req_lo, req_med, req_hi) = pick(|p| p.first_request_ms, &mut runs);
        let (hwm_lo, hwm_med, hwm_hi) = pick(|p| p.peak_kb as f64, &mut runs);
        println!(
            "resume of {messages} messages, {label}; {RESUMES} fresh processes, median (min–max):\n  \
             --resume (lock, read, parse, rebuild): {open_med:.1} ms ({open_lo:.1}–{open_hi:.1})\n  \
             + first request body built: {req_med:.1} ms ({req_lo:.1}–{req_hi:.1})\n  \
             peak RSS (VmHWM): {:.1} MB ({:.1}–{:.1}); a process that only starts: {:.1} MB",
            hwm_med / 1024.0,
            hwm_lo / 1024.0,
            hwm_hi / 1024.0,
            runs[0].start_kb as f64 / 1024.0
        );
        json[key] = serde_json::json!({
            "resume_ms": open_med,
            "first_request_ms": req_med,
            "peak_rss_kb": hwm_med,
        });
    }
    println!("{json}");
}

/// What one probe measured.
#[derive(serde::Serialize, serde::Deserialize)]
struct Probe {
    open_ms: f64,
    first_request_ms: f64,
    peak_kb: u64,
    start_kb: u64,
}

fn kb(field: &str) -> u64 {
    status(field)
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or(0)
}

/// A resume as `keel --resume` does it, up to the first request's body, in this process.
/// `whole`: remove the transcript's checkpoint first.
fn probe(home: &Path, sid: &str, whole: bool) {
    let start_kb = kb("VmHWM:");
    let store = Store::new(home);
    if whole {
        let path = store.session_path(Path::new("/bench"), sid);
        let _ = std::fs::remove_file(keel_core::transcript::checkpoint::path_for(&path));
    }
    let t0 = Instant::now();
    let mut opened = store
        .open(&OpenRequest {
            cwd: Path::new("/bench"),
            model: "claude-sonnet-4-5",
            fsync: FsyncMode::Turn,
            start: Start::Resume(sid.to_owned()),
            fork: false,
            session_id: None,
        })
        .expect("resume");
    let open = t0.elapsed();
    assert_eq!(opened.history.len(), MESSAGES);
    opened
        .history
        .push_user(vec![keel_protocol::ContentBlock::text("go on")])
        .expect("a prompt");
    let req = keel_model::ModelRequest {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 1000,
        system: vec![json!({"type": "text", "text": "system"})],
        messages: opened.history.request_messages(),
        tools: Default::default(),
        stream: true,
        metadata: None,
        thinking: None,
    };
    let body = serde_json::to_vec(&req).expect("a request body");
    let first = t0.elapsed();
    assert!(body.len() > 1_000_000);
    // A resume that read the whole transcript saves a checkpoint beside it (in the
    // background); the next resume starts from there.
    keel_core::transcript::checkpoint::at_exit();
    let p = Probe {
        open_ms: open.as_secs_f64() * 1e3,
        first_request_ms: first.as_secs_f64() * 1e3,
        peak_kb: kb("VmHWM:"),
        start_kb,
    };
    println!("{}", serde_json::to_string(&p).expect("json"));
}
