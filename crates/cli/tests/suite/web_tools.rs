//! WebFetch and WebSearch through the real binary: keel-mock plays the model (the main
//! conversation, WebFetch's reading request and WebSearch's server-tool request) and a small
//! HTTP server in this process plays the web, on loopback, recording every request it gets.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_mock::{Call, Match, Scenario, SearchHit, Step};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::common::{Harness, Provider};

const PAGE: &str =
    "<html><head><title>Keel test page</title><script>stealCookies()</script></head>\
<body><h1>Keel page</h1><p>The secret word is <b>marmalade</b>.</p></body></html>";

/// A tiny web server: each path answers one way; every request line is recorded.
struct Web {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Web {
    async fn start() -> Web {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, log.clone()));
            }
        });
        Web { port, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn rule(&self) -> String {
        format!("WebFetch(domain:127.0.0.1:{})", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(mut sock: TcpStream, log: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    log.lock().unwrap().push(line.clone());
    let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
    let reply = |status: &str, ctype: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    match path.as_str() {
        "/page" => {
            let _ = sock
                .write_all(reply("200 OK", "text/html; charset=utf-8", PAGE).as_bytes())
                .await;
        }
        "/moved" => {
            let _ = sock
                .write_all(b"HTTP/1.1 302 Found\r\nlocation: /page\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        }
        "/to-metadata" => {
            let _ = sock
                .write_all(b"HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/latest/meta-data/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        }
        "/image" => {
            let _ = sock
                .write_all(reply("200 OK", "image/png", "\u{89}PNG").as_bytes())
                .await;
        }
        "/endless" => {
            // No length, and no end: only keel's byte cap stops the read.
            let _ = sock
                .write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n",
                )
                .await;
            let chunk = vec![b'a'; 8192];
            while sock.write_all(&chunk).await.is_ok() {}
        }
        "/hang" => {
            // A start, then silence: only keel's time limit ends the call.
            let _ = sock
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 50000\r\nconnection: close\r\n\r\n<html><body>start")
                .await;
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        _ => {
            let _ = sock
                .write_all(reply("404 Not Found", "text/plain", "no").as_bytes())
                .await;
        }
    }
}

/// A WebFetch call of `url` asking for the page's secret word (shared with `websec`).
pub(super) fn fetch_call(url: &str) -> Call {
    Call::new(
        "WebFetch",
        json!({"url": url, "prompt": "What is the secret word?"}),
    )
}

/// The text of a tool result's `content` (a string or text blocks).
pub(super) fn text_of(v: &Value) -> String {
    match &v["content"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A page on a loopback server that a rule names is fetched, converted to markdown (scripts
/// dropped) and read by a separate request without tools; the main model gets that answer.
#[tokio::test(flavor = "multi_thread")]
async fn webfetch_allowed_by_an_exact_rule_reads_the_page_through_a_separate_request() {
    let web = Web::start().await;
    let h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![fetch_call(&web.url("/moved"))]),
        Step::text("The page says the secret word is marmalade.")
            .when(Match::new().system_contains("read one web page")),
        Step::text("done"),
    ]))
    .await;
    let run = h
        .run_stream("fetch it", &["--allowedTools", &web.rule()], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        web.seen(),
        vec!["GET /moved HTTP/1.1", "GET /page HTTP/1.1"]
    );
    let reqs = h.requests();
    assert_eq!(reqs.len(), 3, "main, reading request, main");
    let digest = &reqs[1].body;
    assert!(
        digest.get("tools").is_none(),
        "the reading request has no tools: {digest}"
    );
    let asked = digest["messages"][0].to_string();
    assert!(asked.contains("# Keel page"), "{asked}");
    assert!(asked.contains("**marmalade**"), "{asked}");
    assert!(asked.contains("What is the secret word?"), "{asked}");
    assert!(
        !asked.contains("stealCookies"),
        "scripts are dropped: {asked}"
    );
    // The main model gets the answer, never the raw page.
    let results = run.tool_results();
    assert_eq!(results.len(), 1);
    let got = text_of(results[0]);
    assert!(results[0]["is_error"] != true, "{got}");
    assert!(got.contains("the secret word is marmalade"), "{got}");
    assert!(got.contains("after 1 redirect"), "{got}");
    assert!(!got.contains("<h1>"), "{got}");
    let third = reqs[2].body["messages"].to_string();
    assert!(
        !third.contains("<h1>") && !third.contains("# Keel page"),
        "{third}"
    );
}

/// Loopback, private, metadata and local names are refused without a rule naming them, in
/// bypassPermissions and with a bare WebFetch rule too; nothing reaches the server.
#[tokio::test(flavor = "multi_thread")]
async fn webfetch_refuses_local_private_and_metadata_addresses_without_a_naming_rule() {
    let web = Web::start().await;
    let urls = [
        web.url("/page"),
        format!("http://localhost:{}/page", web.port),
        format!("http://[::ffff:127.0.0.1]:{}/page", web.port),
        "http://10.1.2.3/page".to_owned(),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ];
    for flags in [
        vec!["--permission-mode", "bypassPermissions"],
        vec!["--allowedTools", "WebFetch"],
    ] {
        let h = Harness::new(Scenario::new(vec![
            Step::tool_use(urls.iter().map(|u| fetch_call(u)).collect()),
            Step::text("ok"),
        ]))
        .await;
        let run = h.run_stream("fetch them", &flags, &[]).await;
        run.assert_end("success", false, "completed", 0);
        let results = run.tool_results();
        assert_eq!(results.len(), urls.len());
        for (r, url) in results.iter().zip(&urls) {
            assert_eq!(r["is_error"], true, "{url}: {r}");
            let t = text_of(r);
            assert!(t.contains("local or private"), "{url}: {t}");
            assert!(t.contains("WebFetch(domain:"), "{url}: {t}");
        }
        let denials = run.result()["permission_denials"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(denials.len(), urls.len(), "{denials:?}");
        assert!(denials.iter().all(|d| d["tool_name"] == "WebFetch"));
        assert_eq!(h.requests().len(), 2, "no reading request was made");
    }
    assert!(
        web.seen().is_empty(),
        "no request reached the server: {:?}",
        web.seen()
    );
}

/// Headless with no rule: a public URL is denied (nobody can approve), the denial names the
/// domain rule that would allow it, and nothing is fetched.
#[tokio::test(flavor = "multi_thread")]
async fn webfetch_without_a_rule_is_denied_headless_and_names_the_domain_rule() {
    let h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![fetch_call("https://docs.example.com/a")]),
        Step::text("ok"),
    ]))
    .await;
    let run = h.run_stream("fetch", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let r = run.tool_results()[0];
    assert_eq!(r["is_error"], true);
    assert!(
        text_of(r).contains("WebFetch(domain:docs.example.com)"),
        "{r}"
    );
    assert_eq!(
        run.result()["permission_denials"][0]["tool_name"],
        "WebFetch"
    );
}

/// A redirect from an allowed host to the metadata address is not followed.
#[tokio::test(flavor = "multi_thread")]
async fn webfetch_refuses_a_redirect_to_a_refused_address() {
    let web = Web::start().await;
    for flags in [
        vec!["--allowedTools", &*web.rule()]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>(),
        // Even where the mode allows every host, the address itself is refused.
        vec![
            "--allowedTools".into(),
            web.rule(),
            "--permission-mode".into(),
            "bypassPermissions".into(),
        ],
    ] {
        let h = Harness::new(Scenario::new(vec![
            Step::tool_use(vec![fetch_call(&web.url("/to-metadata"))]),
            Step::text("ok"),
        ]))
        .await;
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let run = h.run_stream("fetch", &flags, &[]).await;
        run.assert_end("success", false, "completed", 0);
        let r = run.tool_results()[0];
        assert_eq!(r["is_error"], true, "{r}");
        let t = text_of(r);
        assert!(t.contains("169.254.169.254"), "{t}");
        assert!(t.contains("redirect") || t.contains("metadata"), "{t}");
        assert_eq!(h.requests().len(), 2, "no reading request");
    }
    assert_eq!(
        web.seen().len(),
        2,
        "only the redirecting page: {:?}",
        web.seen()
    );
}

/// Size, time and type bounds end the call with an error that says which bound and where.
#[tokio::test(flavor = "multi_thread")]
async fn webfetch_bounds_size_time_and_type_truthfully() {
    let web = Web::start().await;
    let h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![
            fetch_call(&web.url("/endless")),
            fetch_call(&web.url("/hang")),
            fetch_call(&web.url("/image")),
        ]),
        Step::text("ok"),
    ]))
    .await;
    let started = std::time::Instant::now();
    let run = h
        .run_stream(
            "fetch",
            &["--allowedTools", &web.rule()],
            &[
                ("KEEL_WEBFETCH_MAX_BYTES", "65536"),
                ("KEEL_WEBFETCH_TIMEOUT_MS", "2000"),
            ],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let results = run.tool_results();
    assert_eq!(results.len(), 3);
    let size = text_of(results[0]);
    assert!(size.contains("65536-byte limit"), "{size}");
    let time = text_of(results[1]);
    assert!(
        time.contains("after 2.0 s") && time.contains("reading the page"),
        "{time}"
    );
    assert!(time.contains("bytes of the page had arrived"), "{time}");
    let kind = text_of(results[2]);
    assert!(kind.contains("image/png"), "{kind}");
    assert!(results.iter().all(|r| r["is_error"] == true));
    assert_eq!(
        h.requests().len(),
        2,
        "no reading request for a failed fetch"
    );
}

/// WebSearch hands the query to the provider's server-side search tool and returns what it
/// found, links first — on the Anthropic API and on Claude through Vertex AI alike.
#[tokio::test(flavor = "multi_thread")]
async fn websearch_runs_on_the_server_search_tool() {
    for provider in [Provider::Anthropic, Provider::Vertex] {
        websearch_on(provider).await;
    }
}

async fn websearch_on(provider: Provider) {
    let mut h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![Call::new(
            "WebSearch",
            json!({"query": "keel agent runtime", "allowed_domains": ["docs.rs"]}),
        )]),
        Step::web_search(
            "keel agent runtime",
            &[SearchHit::new("keel docs", "https://docs.rs/keel")],
            "keel is an agent runtime.",
        )
        .when(Match::new().has_tool("web_search")),
        Step::text("done"),
    ]))
    .await;
    h.provider = provider;
    let run = h
        .run_stream("search", &["--allowedTools", "WebSearch"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 3, "{provider:?}");
    assert_eq!(
        reqs[1].body["tools"],
        json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 8, "allowed_domains": ["docs.rs"]}])
    );
    assert!(reqs[1].body["messages"][0]
        .to_string()
        .contains("keel agent runtime"));
    let r = run.tool_results()[0];
    assert!(r["is_error"] != true, "{r}");
    let t = text_of(r);
    assert!(t.contains("1. keel docs — https://docs.rs/keel"), "{t}");
    assert!(t.contains("keel is an agent runtime."), "{t}");
    // Offered to the model like any other tool.
    assert!(reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "WebSearch"));
}

/// On a provider without a server-side search tool the call fails clearly, naming the
/// provider, and nothing is sent.
#[tokio::test(flavor = "multi_thread")]
async fn websearch_on_a_provider_without_search_is_a_clear_error() {
    let h = Harness::for_provider(
        Provider::OpenAi,
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "WebSearch", "input": {"query": "keel"}}]},
            {"kind": "text", "text": "ok"}
        ]})
        .to_string(),
    )
    .await;
    let run = h
        .run_stream("search", &["--allowedTools", "WebSearch"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = run.tool_results()[0];
    assert_eq!(r["is_error"], true);
    let t = text_of(r);
    assert!(t.contains("not available with the openai provider"), "{t}");
    assert_eq!(h.requests().len(), 2, "no search request");
}

/// A reply in which the provider ran its search tool goes back into the history whole: the
/// `server_tool_use` block with the input that streamed in, and the result block, through the
/// transcript and `--resume`.
#[tokio::test(flavor = "multi_thread")]
async fn server_tool_blocks_round_trip_in_history() {
    let h = Harness::new(Scenario::new(vec![
        Step::web_search(
            "rust html parser",
            &[SearchHit::new("html5ever", "https://docs.rs/html5ever")],
            "html5ever parses HTML.",
        ),
        Step::text("again"),
    ]))
    .await;
    let first = h.run_stream("search for me", &[], &[]).await;
    first.assert_end("success", false, "completed", 0);
    let session = first.result()["session_id"].as_str().unwrap().to_owned();
    let second = h.run_stream("and now?", &["--resume", &session], &[]).await;
    second.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    let sent = &reqs[1].body["messages"][1];
    assert_eq!(sent["role"], "assistant");
    let blocks = sent["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "server_tool_use");
    assert_eq!(blocks[0]["input"], json!({"query": "rust html parser"}));
    assert_eq!(blocks[1]["type"], "web_search_tool_result");
    assert_eq!(blocks[1]["content"][0]["url"], "https://docs.rs/html5ever");
    assert_eq!(blocks[2]["text"], "html5ever parses HTML.");
    h.validate(&reqs[1]).unwrap();
}

/// With a host that approves calls, WebFetch to a host no rule names is asked about, and the
/// suggested rule is that host only; a refusal is a denial the model is told about.
#[tokio::test(flavor = "multi_thread")]
async fn webfetch_asks_the_host_and_suggests_only_that_domain() {
    let h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![fetch_call("https://docs.example.com/guide")]),
        Step::text("ok"),
    ]))
    .await;
    let mut s = super::common::Stream::start(&h, &["--permission-prompt-tool", "stdio"], &[]);
    s.user("read the guide").await;
    let req = s.keel_request("can_use_tool").await;
    assert_eq!(req["request"]["tool_name"], "WebFetch");
    let suggestions = req["request"]["permission_suggestions"].to_string();
    assert!(
        suggestions.contains(r#""ruleContent":"domain:docs.example.com""#),
        "{suggestions}"
    );
    s.answer(
        req["request_id"].as_str().unwrap(),
        json!({"behavior": "deny", "message": "not that site"}),
    )
    .await;
    let result = s.result().await;
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["permission_denials"][0]["tool_name"], "WebFetch");
    let run = s.finish().await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(run.tool_results()[0].to_string().contains("not that site"));
}
