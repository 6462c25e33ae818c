//! MCP servers that need OAuth, through the `keel` binary: `keel mcp login` against the test
//! server's own authorization server (discovery, registration, PKCE checked by the server, the
//! loopback redirect driven by the test as a browser would), the token reused by later runs,
//! refreshed when it expires, `needs-auth` (and never a browser) without one, a revoked
//! refresh token, and a server that never answers.

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use super::common::{mcp_test_server, Harness, Run, Stream};

/// The test server over HTTP with `--oauth` plus `args`; its URL (…/mcp). Killed on drop.
struct OAuthServer(std::process::Child, String);

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl OAuthServer {
    fn start(args: &[&str]) -> Self {
        let mut child = std::process::Command::new(mcp_test_server())
            .args(["--http", "--oauth"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the test server starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        OAuthServer(child, line.trim().to_owned())
    }

    fn base(&self) -> String {
        self.1.trim_end_matches("/mcp").to_owned()
    }

    /// What the authorization server counted.
    fn stats(&self) -> Value {
        let (status, _, body) = http("GET", &format!("{}/admin/stats", self.base()));
        assert_eq!(status, 200);
        serde_json::from_str(&body).unwrap()
    }

    fn count(&self, what: &str) -> u64 {
        self.stats()[what].as_u64().unwrap_or(0)
    }
}

/// One HTTP/1.1 request, as a browser would make it: status, `Location`, body.
fn http(method: &str, url: &str) -> (u16, Option<String>, String) {
    let u = reqwest::Url::parse(url).unwrap();
    let mut s =
        std::net::TcpStream::connect((u.host_str().unwrap(), u.port_or_known_default().unwrap()))
            .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let target = match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_owned(),
    };
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        u.host_str().unwrap()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let location = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or(l.strip_prefix("Location: "))
        })
        .map(str::to_owned);
    (status, location, body.to_owned())
}

/// A `BROWSER` that records being run, and the file it writes.
fn browser_spy(h: &Harness) -> (String, std::path::PathBuf) {
    let marker = h.home.path().join("browser-was-run");
    let script = h.home.path().join("browser.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\n", marker.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (script.display().to_string(), marker)
}

async fn add_server(h: &Harness, url: &str) {
    let run = h
        .run(&["mcp", "add", "--transport", "http", "w", url], &[])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// `keel mcp login w`, the test playing the browser: it opens the printed URL (the test
/// authorization server approves at once and redirects) and follows the redirect to keel's
/// loopback callback, first with `forged_state` if given. keel's output and exit code.
async fn login(h: &Harness, env: &[(&str, &str)], forged_state: bool) -> Run {
    let mut child = h
        .command(&["mcp", "login", "w"], env)
        .spawn()
        .expect("keel starts");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            printed.push(l.clone());
            if l.trim().starts_with("http") {
                return l.trim().to_owned();
            }
        }
        panic!("keel printed no URL: {printed:?}");
    })
    .await
    .expect("keel printed the URL in time");
    let (status, location, body) = tokio::task::spawn_blocking(move || http("GET", &url))
        .await
        .unwrap();
    assert_eq!(status, 302, "the authorization server refused: {body}");
    let mut callback = location.expect("a redirect");
    if forged_state {
        let forged = reqwest::Url::parse(&callback).unwrap();
        let mut f = forged;
        f.query_pairs_mut()
            .clear()
            .append_pair("code", "code-forged")
            .append_pair("state", "not-the-state");
        callback = f.to_string();
    }
    let (status, _, _) = tokio::task::spawn_blocking(move || http("GET", &callback))
        .await
        .unwrap();
    assert_eq!(status, if forged_state { 400 } else { 200 });
    let mut rest = String::new();
    while let Ok(Some(l)) = lines.next_line().await {
        rest.push_str(&l);
        rest.push('\n');
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("keel mcp login finished in time")
        .unwrap();
    Run::new(
        out.status.code().unwrap_or(-1),
        printed.join("\n") + "\n" + &rest,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn init(run: &Run) -> Value {
    run.frames
        .iter()
        .find(|f| f["type"] == "system" && f["subtype"] == "init")
        .cloned()
        .expect("an init frame")
}

fn token_file(h: &Harness) -> std::path::PathBuf {
    h.keel_home().join("mcp-oauth.json")
}

fn stored(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

const CALL_TWICE: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"mcp__w__echo","input":{"text":"hi"}}]},
    {"kind":"text","text":"done"},
    {"kind":"tool_use","calls":[{"name":"mcp__w__echo","input":{"text":"again"}}]},
    {"kind":"text","text":"done again"}]}"#;

fn assert_called(run: &Run, text: &str) {
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        init(run)["mcp_servers"],
        json!([{"name": "w", "status": "connected"}]),
        "{}",
        run.stderr
    );
    let results = run.tool_results();
    assert!(
        results[0]
            .to_string()
            .contains(&format!("echo over http: {text}")),
        "{}",
        results[0]
    );
}

#[tokio::test]
async fn login_once_and_later_runs_reuse_the_token_without_signing_in_again() {
    let srv = OAuthServer::start(&[]);
    let h = Harness::from_json(CALL_TWICE).await;
    add_server(&h, &srv.1).await;
    let (browser, marker) = browser_spy(&h);
    let env = [("BROWSER", browser.as_str()), ("DISPLAY", ":0")];
    let out = login(&h, &env, false).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("Signed in to MCP server w"),
        "{}",
        out.stdout
    );
    // Not at a terminal: no browser was started, the URL was printed instead.
    assert!(!marker.exists(), "a browser was started");
    // Registered dynamically, authorized once, the code exchanged with its PKCE verifier.
    assert_eq!(srv.count("registrations"), 1);
    assert_eq!(srv.count("authorizations"), 1);
    assert_eq!(srv.count("code_grants"), 1);
    assert_eq!(srv.count("pkce_failures"), 0);
    // Kept for the user alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(token_file(&h))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let entry = &stored(&token_file(&h))["servers"]["w"];
    assert_eq!(entry["server_url"], srv.1.as_str());
    assert_eq!(entry["resource"], srv.1.as_str());
    let access = entry["access_token"].as_str().unwrap().to_owned();

    for text in ["hi", "again"] {
        let run = h
            .run_stream("call", &["--allowedTools", "mcp__w"], &env)
            .await;
        assert_called(&run, text);
        // The token is never shown.
        assert!(!run.stdout.contains(&access) && !run.stderr.contains(&access));
    }
    // Two sessions, no new sign-in and no refresh: the stored token was used as it was.
    assert_eq!(srv.count("authorizations"), 1);
    assert_eq!(srv.count("refreshes"), 0);
    assert!(!marker.exists(), "a browser was started");

    // Signing out forgets it: the next run needs authentication again.
    let out = h.run(&["mcp", "logout", "w"], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Signed out"), "{}", out.stdout);
    assert!(stored(&token_file(&h))["servers"].get("w").is_none());
    let list = h.run(&["mcp", "list"], &[]).await;
    assert!(
        list.stdout.contains("needs-auth") && list.stdout.contains("keel mcp login w"),
        "{}",
        list.stdout
    );
}

#[tokio::test]
async fn without_a_token_a_p_run_says_needs_auth_names_the_fix_and_opens_no_browser() {
    let srv = OAuthServer::start(&[]);
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"fine"}]}"#).await;
    add_server(&h, &srv.1).await;
    let (browser, marker) = browser_spy(&h);
    let run = h
        .run_stream("hello", &[], &[("BROWSER", &browser), ("DISPLAY", ":0")])
        .await;
    // The run itself is fine and says so; the server is listed as needing authentication.
    run.assert_end("success", false, "completed", 0);
    let servers = &init(&run)["mcp_servers"];
    assert_eq!(servers[0]["name"], "w", "{servers}");
    assert_eq!(servers[0]["status"], "needs-auth", "{servers}");
    let why = servers[0]["error"].as_str().unwrap();
    assert!(why.contains("keel mcp login w"), "{why}");
    // Said as it happens too, in a warning frame.
    assert!(
        run.frames.iter().any(|f| f["type"] == "system"
            && f["subtype"] == "warning"
            && f["message"]
                .as_str()
                .is_some_and(|m| m.contains("keel mcp login w"))),
        "no warning names the fix"
    );
    // No browser, and no flow started behind the user's back.
    assert!(!marker.exists(), "a browser was started in -p");
    assert_eq!(srv.count("registrations"), 0);
    assert_eq!(srv.count("authorizations"), 0);
    // The model was not offered tools it cannot call.
    let req = &h.requests()[0];
    assert!(
        !req.body.to_string().contains("mcp__w__echo"),
        "the model was offered the server's tools"
    );
    // A run that requires every server is not a success without this one.
    let requests = h.requests().len();
    let cfg = json!({"mcpServers": {"w": {"type": "http", "url": srv.1}}}).to_string();
    let strict = h
        .run_stream("hello", &["--mcp-config", &cfg, "--strict-mcp-config"], &[])
        .await;
    strict.assert_end("error_during_execution", true, "capability_missing", 1);
    let text = strict.result()["result"].as_str().unwrap();
    assert!(text.contains("keel mcp login w"), "{text}");
    assert_eq!(h.requests().len(), requests, "the model was called");
}

#[tokio::test]
async fn an_expired_token_is_refreshed_silently_and_a_revoked_one_needs_login() {
    // Tokens that live one second: every later start finds its token expired.
    let srv = OAuthServer::start(&["--token-ttl", "1"]);
    let h = Harness::from_json(CALL_TWICE).await;
    add_server(&h, &srv.1).await;
    let out = login(&h, &[], false).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let before = stored(&token_file(&h))["servers"]["w"]["refresh_token"].clone();
    let run = h
        .run_stream("call", &["--allowedTools", "mcp__w"], &[])
        .await;
    assert_called(&run, "hi");
    assert!(srv.count("refreshes") >= 1, "{}", srv.stats());
    assert_eq!(srv.count("authorizations"), 1, "signed in again");
    // The rotated refresh token was kept.
    let after = stored(&token_file(&h))["servers"]["w"]["refresh_token"].clone();
    assert_ne!(before, after);

    // The authorization server revokes everything: the next run says so, truthfully.
    let (status, _, _) = http("POST", &format!("{}/admin/revoke", srv.base()));
    assert_eq!(status, 200);
    let run = h.run_stream("hello", &[], &[]).await;
    let servers = &init(&run)["mcp_servers"];
    assert_eq!(servers[0]["status"], "needs-auth", "{servers}");
    let why = servers[0]["error"].as_str().unwrap();
    assert!(
        why.contains("refresh token was refused") && why.contains("keel mcp login w"),
        "{why}"
    );
    assert!(srv.count("refused_refreshes") >= 1);
    // The dead tokens are gone from the file.
    assert!(stored(&token_file(&h))["servers"].get("w").is_none());
}

#[tokio::test]
async fn discovery_falls_back_to_the_well_known_uri_and_a_forged_redirect_is_refused() {
    // The 401 names no metadata: keel finds it at the well-known URI.
    let srv = OAuthServer::start(&["--oauth-no-hint"]);
    let h = Harness::from_json(CALL_TWICE).await;
    add_server(&h, &srv.1).await;
    // A redirect with another state is refused, and nothing is stored.
    let out = login(&h, &[], true).await;
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("state did not match"), "{}", out.stderr);
    assert!(!token_file(&h).exists() || stored(&token_file(&h))["servers"].get("w").is_none());
    let out = login(&h, &[], false).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let run = h
        .run_stream("call", &["--allowedTools", "mcp__w"], &[])
        .await;
    assert_called(&run, "hi");
}

/// A server that answers 401 pointing at metadata on a listener that never answers.
fn pointing_at_a_silent_server() -> (String, std::net::TcpListener) {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let front = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = front.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in front.incoming() {
            let Ok(mut c) = conn else { break };
            let mut buf = [0u8; 8192];
            let _ = c.read(&mut buf);
            let _ = write!(
                c,
                "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer resource_metadata=\"http://127.0.0.1:{silent_port}/.well-known/oauth-protected-resource\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (format!("http://127.0.0.1:{port}/mcp"), silent)
}

#[tokio::test]
async fn a_metadata_server_that_never_answers_ends_the_login_in_bounded_time() {
    let (url, _silent) = pointing_at_a_silent_server();
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"fine"}]}"#).await;
    add_server(&h, &url).await;
    let began = Instant::now();
    let out = h
        .run(&["mcp", "login", "w"], &[("MCP_TIMEOUT", "1500")])
        .await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("protected-resource metadata")
            && out.stderr.contains("no answer in time"),
        "{}",
        out.stderr
    );
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "{:?}",
        began.elapsed()
    );
    // A -p run does not go looking: it reports needs-auth at once.
    let run = h.run_stream("hello", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(init(&run)["mcp_servers"][0]["status"], "needs-auth");
}

const CALL_THEN_CALL: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"mcp__w__echo","input":{"text":"one"}}]},
    {"kind":"tool_use","calls":[{"name":"mcp__w__echo","input":{"text":"two"}}]},
    {"kind":"text","text":"done"}]}"#;

#[tokio::test]
async fn a_token_refused_during_a_session_is_refreshed_once_or_the_call_names_the_fix() {
    // The server ends the access token after each call: the next call's 401 is answered by a
    // silent refresh, and the call goes through.
    let srv = OAuthServer::start(&["--after-call", "drop-access"]);
    let h = Harness::from_json(CALL_THEN_CALL).await;
    add_server(&h, &srv.1).await;
    assert_eq!(login(&h, &[], false).await.code, 0);
    let run = h
        .run_stream("call", &["--allowedTools", "mcp__w"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let results = run.tool_results();
    assert!(
        results[1].to_string().contains("echo over http: two"),
        "{}",
        results[1]
    );
    assert_eq!(srv.count("refreshes"), 1, "{}", srv.stats());
    assert_eq!(srv.count("authorizations"), 1);

    // The server revokes everything after the first call: the second call fails, naming the fix.
    let srv = OAuthServer::start(&["--after-call", "revoke"]);
    let h = Harness::from_json(CALL_THEN_CALL).await;
    add_server(&h, &srv.1).await;
    assert_eq!(login(&h, &[], false).await.code, 0);
    let run = h
        .run_stream("call", &["--allowedTools", "mcp__w"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let results = run.tool_results();
    assert!(
        results[0].to_string().contains("echo over http: one"),
        "{}",
        results[0]
    );
    let second = results[1].to_string();
    assert!(
        second.contains("keel mcp login w") && second.contains("refresh token was refused"),
        "{second}"
    );
    assert_eq!(results[1]["is_error"], true, "{second}");
}

#[tokio::test]
async fn a_configured_client_id_and_callback_port_are_used_instead_of_registering() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = format!("keel-pre=http://127.0.0.1:{port}/callback");
    let srv = OAuthServer::start(&["--client", &client]);
    let h = Harness::from_json(CALL_TWICE).await;
    let entry = json!({"type": "http", "url": srv.1,
        "oauth": {"clientId": "keel-pre", "callbackPort": port}})
    .to_string();
    let run = h.run(&["mcp", "add-json", "w", &entry], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = login(&h, &[], false).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(srv.count("registrations"), 0, "keel registered anyway");
    assert_eq!(srv.count("code_grants"), 1);
    assert_eq!(
        stored(&token_file(&h))["servers"]["w"]["client_id"],
        "keel-pre"
    );
    let run = h
        .run_stream("call", &["--allowedTools", "mcp__w"], &[])
        .await;
    assert_called(&run, "hi");
    // A port that is not one is refused, naming the field.
    let bad = json!({"type": "http", "url": srv.1, "oauth": {"callbackPort": 70000}}).to_string();
    let run = h.run(&["mcp", "add-json", "v", &bad], &[]).await;
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("oauth.callbackPort"), "{}", run.stderr);
}

#[tokio::test]
async fn an_sdk_session_sees_needs_auth_and_a_reconnect_after_login_connects() {
    // What the SDKs drive: stream-json in and out, control requests.
    let srv = OAuthServer::start(&[]);
    let h = Harness::from_json(
        r#"{"steps":[
        {"kind":"tool_use","calls":[{"name":"mcp__w__echo","input":{"text":"after login"}}]},
        {"kind":"text","text":"done"}]}"#,
    )
    .await;
    add_server(&h, &srv.1).await;
    let (browser, marker) = browser_spy(&h);
    let env = [("BROWSER", browser.as_str()), ("DISPLAY", ":0")];
    let mut s = Stream::start(&h, &["--allowedTools", "mcp__w"], &env);
    let status = s.ask("s1", json!({"subtype": "mcp_status"})).await;
    let servers = &status["response"]["mcpServers"];
    assert_eq!(servers[0]["status"], "needs-auth", "{servers}");
    assert!(
        servers[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("keel mcp login w")),
        "{servers}"
    );
    // The user signs in elsewhere; the host reconnects the server; its tools work.
    assert_eq!(login(&h, &[], false).await.code, 0);
    let again = s
        .ask("re", json!({"subtype": "mcp_reconnect", "serverName": "w"}))
        .await;
    assert_eq!(again["subtype"], "success", "{again}");
    let status = s.ask("s2", json!({"subtype": "mcp_status"})).await;
    assert_eq!(
        status["response"]["mcpServers"],
        json!([{"name": "w", "status": "connected"}])
    );
    s.user("call it").await;
    s.result().await;
    let run = s.finish().await;
    assert!(
        run.tool_results()[0]
            .to_string()
            .contains("echo over http: after login"),
        "{:?}",
        run.tool_results()
    );
    assert!(!marker.exists(), "a session started a browser");
    assert_eq!(srv.count("authorizations"), 1);
}
