//! Servers at a URL through keel-mcp's client, against the test server over HTTP: the
//! streamable transport (JSON and event-stream answers, a session id), the legacy SSE
//! transport, and what a user sees when a server needs a header, hangs, fails a call with an
//! HTTP error, or is not there.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use keel_mcp::server::{content_text, CallOutcome, Server};
use keel_mcp::UrlSpec;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_keel-mcp-test-server");
const START: Duration = Duration::from_secs(60);

/// The test server over HTTP; killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str]) -> HttpServer {
    let mut child = Command::new(SERVER)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the test server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("it prints its URL");
    HttpServer {
        child,
        url: line.trim().to_owned(),
    }
}

fn spec(url: &str, headers: &[(&str, &str)]) -> UrlSpec {
    UrlSpec {
        url: url.to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        oauth: Default::default(),
    }
}

async fn echo_works(s: &mut Server) {
    assert_eq!(s.tools()[0].name, "echo");
    match s.call("echo", json!({"text": "hi"}), START).await {
        CallOutcome::Done { content, is_error } => {
            assert!(!is_error);
            assert_eq!(content_text(&content), "echo over http: hi");
        }
        other => panic!("{other:?}"),
    }
}

/// Connect to the test server started with `args` (`sse`: the legacy transport), call its
/// tool, stop.
async fn round_trip(args: &[&str], sse: bool) {
    let srv = serve(args);
    let mut s = Server::start_url("w", &spec(&srv.url, &[]), sse, START, START)
        .await
        .expect("it connects");
    echo_works(&mut s).await;
    s.stop().await;
}

#[tokio::test]
async fn streamable_http_with_json_answers_and_a_session_id() {
    // The server refuses every request after initialize that lacks its session id.
    round_trip(&["--http", "--mode", "normal"], false).await;
}

#[tokio::test]
async fn streamable_http_with_event_stream_answers() {
    round_trip(&["--http", "--mode", "sse-replies"], false).await;
}

#[tokio::test]
async fn the_legacy_sse_transport() {
    round_trip(&["--sse"], true).await;
}

#[tokio::test]
async fn headers_are_sent_and_a_refusal_is_said() {
    let srv = serve(&["--http", "--require-header", "Authorization: Bearer t0k"]);
    let e = Server::start_url("w", &spec(&srv.url, &[]), false, START, START)
        .await
        .expect_err("refused without the header");
    assert!(
        e.reason.contains("HTTP 401") && e.reason.contains("missing credentials"),
        "{e}"
    );
    let mut s = Server::start_url(
        "w",
        &spec(&srv.url, &[("Authorization", "Bearer t0k")]),
        false,
        START,
        START,
    )
    .await
    .expect("it connects with the header");
    echo_works(&mut s).await;
}

#[tokio::test]
async fn a_hung_call_times_out_and_an_http_error_is_a_failed_call() {
    let srv = serve(&["--http", "--mode", "hang-on-call"]);
    let mut s = Server::start_url("w", &spec(&srv.url, &[]), false, START, START)
        .await
        .unwrap();
    assert!(matches!(
        s.call("echo", json!({"text": "x"}), Duration::from_millis(500))
            .await,
        CallOutcome::TimedOut(_)
    ));
    let srv = serve(&["--http", "--mode", "fail-calls"]);
    let mut s = Server::start_url("w", &spec(&srv.url, &[]), false, START, START)
        .await
        .unwrap();
    match s.call("echo", json!({"text": "x"}), START).await {
        CallOutcome::Failed(why) => assert!(
            why.contains("HTTP 500") && why.contains("the tool backend is down"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_is_not_there_fails_at_once() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let t0 = std::time::Instant::now();
    let e = Server::start_url("w", &spec(&url, &[]), false, START, START)
        .await
        .expect_err("nothing there");
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert!(e.reason.contains("could not be reached"), "{e}");
    let e = Server::start_url("w", &spec(&url, &[]), true, START, START)
        .await
        .expect_err("nothing there");
    assert!(e.reason.contains("could not be reached"), "{e}");
}

#[tokio::test]
async fn what_a_server_sends_on_its_own_is_heard_on_its_get_stream() {
    let srv = serve(&["--http", "--mode", "change-tools"]);
    let mut s = Server::start_url("w", &spec(&srv.url, &[]), false, START, START)
        .await
        .unwrap();
    assert_eq!(s.tools().len(), 1);
    assert!(!s.tools_changed());
    echo_works_loosely(&mut s).await;
    // The notification travels on the GET stream, apart from the call's answer: wait for it.
    let t0 = std::time::Instant::now();
    while !s.tools_changed() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "notifications/tools/list_changed never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let names: Vec<String> = s
        .relist(START)
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["echo", "late"]);
}

async fn echo_works_loosely(s: &mut Server) {
    assert!(matches!(
        s.call("echo", json!({"text": "x"}), START).await,
        CallOutcome::Done {
            is_error: false,
            ..
        }
    ));
}

#[tokio::test]
async fn headers_never_follow_a_redirect_to_another_origin() {
    // B accepts the credentials; A sends every request on to B, on another port.
    let b = serve(&["--http", "--require-header", "X-Key: s3cret"]);
    let a = serve(&["--http", "--redirect-to", &b.url]);
    let e = Server::start_url(
        "w",
        &spec(&a.url, &[("X-Key", "s3cret")]),
        false,
        START,
        START,
    )
    .await
    .expect_err("the redirect is not followed");
    assert!(e.reason.contains("307"), "{e}");
    // The same server named directly works: the refusal above is the redirect's.
    let mut s = Server::start_url(
        "w",
        &spec(&b.url, &[("X-Key", "s3cret")]),
        false,
        START,
        START,
    )
    .await
    .expect("it connects");
    echo_works(&mut s).await;
}
