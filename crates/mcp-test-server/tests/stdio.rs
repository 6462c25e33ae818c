//! A stdio MCP server through keel-mcp's client, against the test server in this crate: what
//! a user would see when a server answers, never starts, exits while starting, crashes or
//! hangs in a call, or floods its stderr; and that nothing it started outlives it.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use keel_mcp::server::{content_text, CallOutcome, Server, STDERR_TAIL_BYTES};
use keel_mcp::StdioSpec;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_keel-mcp-test-server");
/// Generous: start-up on a busy machine.
const START: Duration = Duration::from_secs(60);

fn spec(mode: &str) -> StdioSpec {
    StdioSpec {
        command: SERVER.into(),
        args: vec!["--mode".into(), mode.into()],
        env: vec![],
        cwd: None,
    }
}

fn alive(pid: i32) -> bool {
    // A zombie is not alive: it has stopped, only its exit status is left.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
                .unwrap_or(false)
        })
        .unwrap_or(false)
}

async fn gone(pid: i32) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn a_server_starts_lists_its_tools_answers_and_stops_with_its_group() {
    let mut s = Server::start_stdio("t", &spec("normal"), Path::new("/"), START)
        .await
        .expect("the server starts");
    let names: Vec<&str> = s.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["echo", "add"]);
    assert_eq!(s.tools()[0].description, "Answers with its text.");
    assert_eq!(
        s.tools()[0].input_schema["properties"]["text"]["type"],
        "string"
    );
    match s.call("echo", json!({"text": "hi"}), START).await {
        CallOutcome::Done { content, is_error } => {
            assert!(!is_error);
            assert_eq!(content_text(&content), "echo: hi");
        }
        other => panic!("{other:?}"),
    }
    match s.call("add", json!({"a": 2, "b": "x"}), START).await {
        CallOutcome::Done { content, is_error } => {
            assert!(is_error, "the tool's own error is an error result");
            assert!(content_text(&content).contains("must be numbers"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.call("echo", json!("not an object"), START).await,
        CallOutcome::Failed(m) if m.contains("JSON object")
    ));
    let pid = s.pgid().expect("a process group");
    s.stop().await;
    assert!(gone(pid).await, "the server outlived stop()");
}

#[tokio::test]
async fn a_server_that_never_starts_fails_within_the_bound_with_its_stderr() {
    let t0 = Instant::now();
    let e = Server::start_stdio(
        "slow",
        &spec("never-start"),
        Path::new("/"),
        Duration::from_secs(2),
    )
    .await
    .expect_err("it never answers initialize");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert!(
        e.reason.contains("did not finish starting within 2 s"),
        "{e}"
    );
    assert!(e.stderr_tail.contains("starting, slowly"), "{e}");
    assert!(e
        .to_string()
        .contains("its stderr ended with: test server: starting, slowly"));
}

#[tokio::test]
async fn a_server_that_exits_while_starting_says_how_and_why() {
    let e = Server::start_stdio("bad", &spec("exit-at-start"), Path::new("/"), START)
        .await
        .expect_err("it exits");
    assert!(
        e.reason.contains("exited while starting (exit status 3)"),
        "{e}"
    );
    assert!(e.stderr_tail.contains("fatal: no configuration"), "{e}");

    let missing = StdioSpec {
        command: "/nonexistent/mcp-server".into(),
        args: vec![],
        env: vec![],
        cwd: None,
    };
    let e = Server::start_stdio("gone", &missing, Path::new("/"), START)
        .await
        .expect_err("no such program");
    assert!(
        e.reason
            .starts_with("could not start `/nonexistent/mcp-server`"),
        "{e}"
    );
}

#[tokio::test]
async fn a_crash_in_a_call_is_reported_with_the_exit_status_and_stderr() {
    let mut s = Server::start_stdio("c", &spec("crash-on-call"), Path::new("/"), START)
        .await
        .expect("starts");
    match s.call("echo", json!({"text": "x"}), START).await {
        CallOutcome::Crashed {
            status,
            stderr_tail,
        } => {
            assert_eq!(status.as_deref(), Some("exit status 7"));
            assert!(stderr_tail.contains("crashing in the middle of a call"));
        }
        other => panic!("{other:?}"),
    }
    s.stop().await;
}

#[tokio::test]
async fn a_call_that_runs_out_of_time_is_cancelled_at_the_server() {
    let mut s = Server::start_stdio("h", &spec("hang-on-call"), Path::new("/"), START)
        .await
        .expect("starts");
    let out = s
        .call("echo", json!({"text": "x"}), Duration::from_secs(1))
        .await;
    assert_eq!(out, CallOutcome::TimedOut(Duration::from_secs(1)));
    // The server was told: it writes the notification it got to stderr.
    let t0 = Instant::now();
    while !s.stderr_tail().contains("test server: cancelled")
        && t0.elapsed() < Duration::from_secs(30)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        s.stderr_tail().contains("test server: cancelled"),
        "{}",
        s.stderr_tail()
    );
    s.stop().await;
}

#[tokio::test]
async fn a_flood_on_stderr_keeps_only_a_bounded_tail() {
    let mut s = Server::start_stdio("f", &spec("stderr-flood"), Path::new("/"), START)
        .await
        .expect("starts after its flood");
    let t0 = Instant::now();
    while !s.stderr_tail().contains("flood over") && t0.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tail = s.stderr_tail();
    assert!(
        tail.ends_with("test server: flood over\n"),
        "{}",
        &tail[tail.len() - 80..]
    );
    assert!(tail.len() <= STDERR_TAIL_BYTES);
    assert!(matches!(
        s.call("echo", json!({"text": "still here"}), START).await,
        CallOutcome::Done { .. }
    ));
    s.stop().await;
}

#[tokio::test]
async fn calls_to_one_server_run_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let mut spec = spec("slow-call");
    spec.args.extend([
        "--delay-ms".into(),
        "1000".into(),
        "--log".into(),
        log.display().to_string(),
    ]);
    let s = Server::start_stdio("t", &spec, Path::new("/"), START)
        .await
        .unwrap();
    let (a, b) = (s.caller(), s.caller());
    let (ra, rb) = tokio::join!(
        a.call("echo", json!({"text": "a"}), START),
        b.call("echo", json!({"text": "b"}), START)
    );
    for r in [ra, rb] {
        assert!(
            matches!(
                r,
                Ok(CallOutcome::Done {
                    is_error: false,
                    ..
                })
            ),
            "{r:?}"
        );
    }
    // Both calls had begun before either ended.
    let text = std::fs::read_to_string(&log).unwrap();
    let times = |what: &str| -> Vec<u128> {
        text.lines()
            .filter_map(|l| l.strip_prefix(what))
            .filter_map(|v| v.trim().parse().ok())
            .collect()
    };
    let (starts, ends) = (times("call-start "), times("call-end "));
    assert_eq!((starts.len(), ends.len()), (2, 2), "{text}");
    assert!(starts.iter().max() < ends.iter().min(), "{text}");
    s.stop().await;
}
