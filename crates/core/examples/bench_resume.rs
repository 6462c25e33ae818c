//! Benchmark (not a test): the cost of transcripts.
//!
//! 1. Writes a 10,000-message session transcript (a realistic mix: prompts, replies with text
//!    and a tool call, tool results of 1-2 KB, init and result frames per turn) through the real
//!    writer, with an fsync at every turn boundary as a run does.
//! 2. Measures the latency of one record with `KEEL_FSYNC=turn` (write only) and
//!    `KEEL_FSYNC=message` (write + fsync).
//! 3. Resumes it several times (read + parse + rebuild + lock, as `--resume` does) and prints
//!    the median, split into its parts, and the peak RSS (VmHWM).
//!
//! `cargo run --release -p keel-core --example bench_resume [-- DIR]` (DIR: where to write,
//! default a temporary directory; pick the disk you care about, fsync cost depends on it).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keel_core::transcript::{
    read_file, rebuild_history, FsyncMode, OpenRequest, SessionHeader, Start, Store,
    TranscriptWriter,
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

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
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
    let keep = std::env::args().nth(1).map(PathBuf::from);
    let tmp = tempfile::tempdir_in(keep.as_deref().unwrap_or(&std::env::temp_dir()))
        .expect("a scratch directory");
    let home = tmp.path();
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

    let rss_before = status("VmRSS:");
    let (mut load, mut rebuilt, mut open) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RESUMES {
        let t0 = Instant::now();
        let mut loaded = read_file(&path).expect("read");
        let t1 = Instant::now();
        let r = rebuild_history(std::mem::take(&mut loaded.records), &sid);
        let t2 = Instant::now();
        assert_eq!(r.history.len(), MESSAGES);
        assert!(r.repairs.is_empty() && loaded.issues.is_empty());
        load.push(t1 - t0);
        rebuilt.push(t2 - t1);
        drop((loaded, r));

        let t0 = Instant::now();
        let opened = store
            .open(&OpenRequest {
                cwd,
                model: "claude-sonnet-4-5",
                fsync: FsyncMode::Turn,
                start: Start::Resume(sid.clone()),
                fork: false,
                session_id: None,
            })
            .expect("resume");
        open.push(t0.elapsed());
        assert_eq!(opened.history.len(), MESSAGES);
    }
    println!(
        "resume of {messages} messages (median of {RESUMES}): {} in all (--resume: lock, read, parse, rebuild); read+parse {}, rebuild {}",
        ms(median(open)),
        ms(median(load)),
        ms(median(rebuilt))
    );
    println!(
        "memory: VmRSS before resuming {rss_before}, peak (VmHWM) {}",
        status("VmHWM:")
    );
}
