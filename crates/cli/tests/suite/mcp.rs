//! MCP servers in a `keel -p` run: stdio servers from --mcp-config and the project's
//! .mcp.json, started before the first request, their tools offered and called; what fails is
//! listed as failed and the run goes on; project servers need the user's approval.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::common::{eventually, mcp_test_server, processes_matching, Harness, Live, Run, Stream};

fn config(name: &str, mode: &str) -> String {
    tagged(name, mode, "")
}

/// A config whose server carries `tag` on its command line (the server ignores it), to find
/// its process.
fn tagged(name: &str, mode: &str, tag: &str) -> String {
    json!({"mcpServers": {name: {
        "command": mcp_test_server().display().to_string(),
        "args": ["--mode", mode, "--tag", tag]
    }}})
    .to_string()
}

/// `keel -p PROMPT` with the servers of `cfg` and the allow rule `allow`, which must succeed.
async fn allowed(h: &Harness, prompt: &str, cfg: &str, allow: &str, env: &[(&str, &str)]) -> Run {
    let run = h
        .run_stream(prompt, &["--mcp-config", cfg, "--allowedTools", allow], env)
        .await;
    run.assert_end("success", false, "completed", 0);
    run
}

/// A run with `var=value` stops with an error that names both.
async fn refused_env(h: &Harness, cfg: &str, var: &str, value: &str) {
    let bad = h
        .run_stream("hello", &["--mcp-config", cfg], &[(var, value)])
        .await;
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains(&format!("{var}={value:?}")),
        "{}",
        bad.stderr
    );
}

fn init(frames: &[Value]) -> Value {
    frames
        .iter()
        .find(|f| f["type"] == "system" && f["subtype"] == "init")
        .cloned()
        .expect("an init frame")
}

const CALL_ECHO: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"mcp__t__echo","input":{"text":"hi"}}]},
    {"kind":"text","text":"done"}]}"#;

#[tokio::test]
async fn a_stdio_server_from_mcp_config_is_started_listed_and_called() {
    let h = Harness::from_json(CALL_ECHO).await;
    let tag = format!("keel-test-{}", std::process::id()) + "-started-listed-called";
    let cfg = tagged("t", "normal", &tag);
    let run = allowed(&h, "use the tool", &cfg, "mcp__t__echo", &[]).await;
    let init = init(&run.frames);
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "t", "status": "connected"}])
    );
    let tools: Vec<&str> = init["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"mcp__t__echo") && tools.contains(&"mcp__t__add"),
        "{tools:?}"
    );
    // The model got the server's schema, and the server's answer.
    let reqs = h.requests();
    let offered = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__t__echo")
        .cloned()
        .expect("the tool was offered");
    assert_eq!(offered["input_schema"]["required"], json!(["text"]));
    assert_eq!(offered["description"], "Answers with its text.");
    let results = run.tool_results();
    assert_eq!(results.len(), 1);
    assert!(
        results[0]["content"].to_string().contains("echo: hi"),
        "{}",
        results[0]
    );
    assert!(reqs[1].body.to_string().contains("echo: hi"));
    // The server did not outlive the run.
    assert!(
        eventually(Duration::from_secs(30), || processes_matching(&tag)
            .is_empty())
        .await,
        "the MCP server outlived keel: {:?}",
        processes_matching(&tag)
    );
}

#[tokio::test]
async fn a_server_that_does_not_start_is_failed_within_mcp_timeout_and_the_run_goes_on() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"fine without it"}]}"#).await;
    let cfg = config("slow", "never-start");
    let t0 = Instant::now();
    let run = h
        .run_stream("hello", &["--mcp-config", &cfg], &[("MCP_TIMEOUT", "1500")])
        .await;
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        init(&run.frames)["mcp_servers"],
        json!([{"name": "slow", "status": "failed",
                "error": "it did not finish starting within 1.5 s (MCP_TIMEOUT); its stderr ended with: test server: starting, slowly"}])
    );
    // A bad MCP_TIMEOUT is a clear error, not a silent default.
    refused_env(&h, &cfg, "MCP_TIMEOUT", "soon").await;
}

#[tokio::test]
async fn a_call_without_permission_is_denied_headless() {
    let h = Harness::from_json(CALL_ECHO).await;
    let cfg = config("t", "normal");
    let run = h
        .run_stream("use the tool", &["--mcp-config", &cfg], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let denials = &run.result()["permission_denials"];
    assert_eq!(denials[0]["tool_name"], "mcp__t__echo", "{denials}");
    assert!(!h.requests()[1].body.to_string().contains("echo: hi"));
}

#[tokio::test]
async fn project_servers_start_only_when_the_user_approves_them() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    std::fs::write(h.cwd().join(".mcp.json"), config("proj", "normal")).unwrap();
    let run = h.run_stream("hello", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let servers = &init(&run.frames)["mcp_servers"];
    assert_eq!(servers[0]["status"], "failed", "{servers}");
    assert!(
        servers[0]["error"]
            .as_str()
            .unwrap()
            .contains("not started: the project configures it"),
        "{servers}"
    );
    // The project cannot approve itself.
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        json!({"enableAllProjectMcpServers": true}).to_string(),
    )
    .unwrap();
    let run = h.run_stream("hello", &[], &[]).await;
    assert_eq!(init(&run.frames)["mcp_servers"][0]["status"], "failed");
    // The user can.
    std::fs::create_dir_all(h.home.path().join(".claude")).unwrap();
    std::fs::write(
        h.home.path().join(".claude/settings.json"),
        json!({"enabledMcpjsonServers": ["proj"]}).to_string(),
    )
    .unwrap();
    let run = h.run_stream("hello", &[], &[]).await;
    assert_eq!(
        init(&run.frames)["mcp_servers"],
        json!([{"name": "proj", "status": "connected"}])
    );
}

#[tokio::test]
async fn rules_that_name_a_server_allow_and_deny_its_tools() {
    let h = Harness::from_json(CALL_ECHO).await;
    let cfg = config("t", "normal");
    // A whole-server allow rule lets the call run.
    let run = allowed(&h, "use it", &cfg, "mcp__t", &[]).await;
    assert!(run.tool_results()[0]["content"]
        .to_string()
        .contains("echo: hi"));
    // A whole-server deny rule stops it, even in bypassPermissions mode.
    let h = Harness::from_json(CALL_ECHO).await;
    let run = h
        .run_stream(
            "use it",
            &[
                "--mcp-config",
                &cfg,
                "--permission-mode",
                "bypassPermissions",
                "--disallowedTools",
                "mcp__t",
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        run.result()["permission_denials"][0]["tool_name"],
        "mcp__t__echo"
    );
    assert!(!h.requests()[1].body.to_string().contains("echo: hi"));
}

const CALL_HANG: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"mcp__h__echo","input":{"text":"x"}}]},
    {"kind":"text","text":"after"}]}"#;

#[tokio::test]
async fn a_call_that_outlives_mcp_tool_timeout_is_reported_as_timed_out_and_the_run_goes_on() {
    let h = Harness::from_json(CALL_HANG).await;
    let cfg = config("h", "hang-on-call");
    let run = allowed(
        &h,
        "call it",
        &cfg,
        "mcp__h",
        &[("MCP_TOOL_TIMEOUT", "1000")],
    )
    .await;
    let result = run.tool_results()[0].to_string();
    assert!(
        result.contains("got no answer within 1.0 s (MCP_TOOL_TIMEOUT"),
        "{result}"
    );
    assert!(h.requests()[1]
        .body
        .to_string()
        .contains("MCP_TOOL_TIMEOUT"));
}

/// keel running with the MCP server `h` of `cfg`, once the model's call to it is out.
async fn calling(h: &Harness, cfg: &str) -> Live {
    let mut live = h.live_stream(
        "call it",
        &["--mcp-config", cfg, "--allowedTools", "mcp__h"],
        &[],
    );
    live.wait_for(Duration::from_secs(60), |f| {
        f["type"] == "assistant" && f["message"]["content"][0]["type"] == "tool_use"
    })
    .await;
    live
}

#[tokio::test]
async fn an_interrupt_during_an_mcp_call_ends_the_run_truthfully() {
    let h = Harness::from_json(CALL_HANG).await;
    let tag = format!("keel-test-{}-interrupt", std::process::id());
    let cfg = tagged("h", "hang-on-call", &tag);
    let live = calling(&h, &cfg).await;
    live.signal(2); // SIGINT
    let run = live.finish(Duration::from_secs(30)).await;
    run.assert_end("error_during_execution", true, "aborted_tools", 130);
    // Interrupted while running, or (had the signal come first) rejected before it ran: either
    // way the result says which, never that the call succeeded or failed on its own.
    let result = run.tool_results()[0].to_string();
    assert!(
        result.contains("The user interrupted this mcp__h__echo call")
            || result.contains("call started, so it did not run"),
        "{result}"
    );
    assert!(
        eventually(Duration::from_secs(30), || processes_matching(&tag)
            .is_empty())
        .await,
        "the MCP server outlived keel"
    );
}

// ---- Servers an SDK host runs (`type: sdk`), reached over the control protocol ----

const SDK_CONFIG: &str = r#"{"mcpServers":{"calc":{"type":"sdk","name":"calc"}}}"#;

/// How the fake host's server answers `tools/call`.
#[derive(Clone, Copy)]
enum HostCall {
    /// Adds `a` and `b`.
    Add,
    /// A JSON-RPC error, as an SDK host answers a handler that raised.
    Raise,
    /// Never answers.
    Silent,
}

/// Play the SDK host for server `calc` until the run's result: answer each `mcp_message` as
/// an in-process MCP server would. Returns the result frame and the methods it was sent.
async fn serve_sdk(s: &mut Stream, call: HostCall) -> (Value, Vec<String>) {
    let mut methods = Vec::new();
    loop {
        let f = s
            .wait(|f| {
                f["type"] == "result"
                    || (f["type"] == "control_request" && f["request"]["subtype"] == "mcp_message")
            })
            .await;
        if f["type"] == "result" {
            return (f, methods);
        }
        let id = f["request_id"].as_str().unwrap().to_owned();
        assert_eq!(f["request"]["server_name"], "calc");
        let m = &f["request"]["message"];
        let method = m["method"].as_str().unwrap_or("").to_owned();
        methods.push(method.clone());
        let reply = match method.as_str() {
            "initialize" => json!({"jsonrpc": "2.0", "id": m["id"], "result": {
                "protocolVersion": m["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "calc", "version": "1.0.0"}}}),
            "tools/list" => json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{
                "name": "add", "description": "Adds two numbers.",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                "required": ["a", "b"]}}]}}),
            "tools/call" => match call {
                HostCall::Add => {
                    let sum = m["params"]["arguments"]["a"].as_f64().unwrap()
                        + m["params"]["arguments"]["b"].as_f64().unwrap();
                    json!({"jsonrpc": "2.0", "id": m["id"], "result": {
                        "content": [{"type": "text", "text": format!("the sum is {sum}")}]}})
                }
                HostCall::Raise => json!({"jsonrpc": "2.0", "id": m["id"],
                    "error": {"code": -32603, "message": "division by zero in the host"}}),
                HostCall::Silent => continue,
            },
            // Notifications get the SDKs' empty acknowledgement.
            _ => json!({"jsonrpc": "2.0", "result": {}}),
        };
        s.answer(&id, json!({"mcp_response": reply})).await;
    }
}

/// keel in stream-json mode with the SDK server `calc`, its tools allowed.
fn sdk_stream(h: &Harness, env: &[(&str, &str)]) -> Stream {
    Stream::start(
        h,
        &["--mcp-config", SDK_CONFIG, "--allowedTools", "mcp__calc"],
        env,
    )
}

const CALL_ADD: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"mcp__calc__add","input":{"a":2,"b":3}}]},
    {"kind":"text","text":"done"}]}"#;

#[tokio::test]
async fn an_sdk_hosts_server_is_reached_over_the_control_protocol() {
    let h = Harness::from_json(CALL_ADD).await;
    let mut s = sdk_stream(&h, &[]);
    s.user("add 2 and 3").await;
    let (result, methods) = serve_sdk(&mut s, HostCall::Add).await;
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    let run = s.finish().await;
    let init = init(&run.frames);
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "calc", "status": "connected"}])
    );
    assert!(init["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("mcp__calc__add")));
    let reqs = h.requests();
    let offered = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__calc__add")
        .cloned()
        .expect("the host's tool was offered");
    assert_eq!(offered["input_schema"]["required"], json!(["a", "b"]));
    assert!(
        reqs[1].body.to_string().contains("the sum is 5"),
        "{}",
        reqs[1].body
    );
}

#[tokio::test]
async fn a_host_tool_that_raises_gives_the_model_an_error_result() {
    let h = Harness::from_json(CALL_ADD).await;
    let mut s = sdk_stream(&h, &[]);
    s.user("add").await;
    let (result, _) = serve_sdk(&mut s, HostCall::Raise).await;
    assert_eq!(result["subtype"], "success", "{result}");
    let run = s.finish().await;
    let r = run.tool_results()[0].clone();
    assert_eq!(r["is_error"], true, "{r}");
    assert!(
        r.to_string().contains("division by zero in the host"),
        "{r}"
    );
    assert!(h.requests()[1]
        .body
        .to_string()
        .contains("division by zero in the host"));
}

#[tokio::test]
async fn a_host_that_never_answers_a_call_hits_the_deadline() {
    let h = Harness::from_json(CALL_ADD).await;
    let mut s = sdk_stream(&h, &[("MCP_TOOL_TIMEOUT", "1500")]);
    s.user("add").await;
    let (result, _) = serve_sdk(&mut s, HostCall::Silent).await;
    assert_eq!(result["subtype"], "success", "{result}");
    let run = s.finish().await;
    let r = run.tool_results()[0].to_string();
    assert!(
        r.contains("got no answer within 1.5 s (MCP_TOOL_TIMEOUT"),
        "{r}"
    );
    // The host was told the call is withdrawn: the MCP cancellation went to it.
    assert!(
        run.frames.iter().any(|f| f["type"] == "control_request"
            && f["request"]["message"]["method"] == "notifications/cancelled"),
        "no notifications/cancelled reached the host"
    );
}

#[tokio::test]
async fn an_sdk_server_without_a_host_is_failed_and_says_why() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"fine"}]}"#).await;
    let run = h
        .run_stream("hello", &["--mcp-config", SDK_CONFIG], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let servers = &init(&run.frames)["mcp_servers"];
    assert_eq!(servers[0]["status"], "failed", "{servers}");
    assert!(
        servers[0]["error"]
            .as_str()
            .unwrap()
            .contains("needs --input-format stream-json"),
        "{servers}"
    );
}

// ---- The failure model of stdio servers ----

/// A config for the test server in `mode` with extra arguments.
fn with_args(name: &str, mode: &str, extra: &[&str]) -> String {
    let mut args = vec!["--mode".to_owned(), mode.to_owned()];
    args.extend(extra.iter().map(|s| s.to_string()));
    json!({"mcpServers": {name: {
        "command": mcp_test_server().display().to_string(),
        "args": args
    }}})
    .to_string()
}

fn warnings(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["type"] == "system" && f["subtype"] == "warning")
        .filter_map(|f| f["message"].as_str().map(str::to_owned))
        .collect()
}

const CALL_ECHO_TWICE: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"mcp__t__echo","input":{"text":"one"}}]},
    {"kind":"tool_use","calls":[{"name":"mcp__t__echo","input":{"text":"two"}}]},
    {"kind":"text","text":"done"}]}"#;

#[tokio::test]
async fn a_server_that_crashes_mid_call_is_restarted_once_and_says_so() {
    let h = Harness::from_json(CALL_ECHO_TWICE).await;
    let state = h.cwd().join("crashed-once");
    let tag = format!("keel-test-{}-crash-once", std::process::id());
    let cfg = with_args(
        "t",
        "crash-once",
        &["--state", &state.display().to_string(), "--tag", &tag],
    );
    let run = allowed(&h, "call", &cfg, "mcp__t", &[]).await;
    let results = run.tool_results();
    let first = results[0].to_string();
    assert_eq!(results[0]["is_error"], true, "{first}");
    assert!(
        first.contains("The MCP server t stopped during the call (exit status 7)")
            && first.contains("crashing in the middle of a call"),
        "{first}"
    );
    // Restarted: the second call is answered by the new process.
    assert!(
        results[1].to_string().contains("echo: two"),
        "{}",
        results[1]
    );
    let w = warnings(&run.frames);
    assert!(
        w.iter()
            .any(|m| m == "MCP server t stopped during a call (exit status 7) and was restarted"),
        "{w:?}"
    );
    assert!(
        eventually(Duration::from_secs(30), || processes_matching(&tag)
            .is_empty())
        .await,
        "a server process outlived keel: {:?}",
        processes_matching(&tag)
    );
}

#[tokio::test]
async fn a_server_that_crashes_again_is_failed_and_its_tools_withdrawn() {
    let h = Harness::from_json(CALL_ECHO_TWICE).await;
    let cfg = config("t", "crash-on-call");
    let run = allowed(&h, "call", &cfg, "mcp__t", &[]).await;
    let results = run.tool_results();
    assert!(results[1]
        .to_string()
        .contains("stopped during the call (exit status 7)"));
    let w = warnings(&run.frames);
    assert!(
        w.iter().any(|m| m.contains(
            "MCP server t stopped again during a call (exit status 7); it is not restarted again"
        )),
        "{w:?}"
    );
    // The model is no longer offered what cannot be called.
    let reqs = h.requests();
    let offered = |i: usize| reqs[i].body["tools"].to_string().contains("mcp__t__echo");
    assert!(offered(0) && offered(1) && !offered(2));
}

#[tokio::test]
async fn stray_stdout_is_dropped_and_reported_once() {
    let h = Harness::from_json(CALL_ECHO_TWICE).await;
    let cfg = config("t", "garbage-stdout");
    let run = allowed(&h, "call", &cfg, "mcp__t", &[]).await;
    assert!(run.tool_results()[1].to_string().contains("echo: two"));
    let w: Vec<String> = warnings(&run.frames)
        .into_iter()
        .filter(|m| m.contains("stdout"))
        .collect();
    assert_eq!(
        w,
        ["MCP server t wrote 3 line(s) to stdout that are not MCP messages; they were dropped (the first began: \"Starting the server...\")"]
    );
}

#[tokio::test]
async fn a_servers_grandchild_dies_with_the_session() {
    let h = Harness::from_json(CALL_ECHO).await;
    let pid_file = h.cwd().join("grandchild.pid");
    let cfg = with_args(
        "t",
        "grandchild",
        &["--pid-file", &pid_file.display().to_string()],
    );
    allowed(&h, "call", &cfg, "mcp__t", &[]).await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the server started its grandchild")
        .trim()
        .parse()
        .unwrap();
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                !s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    };
    assert!(
        eventually(Duration::from_secs(30), || !alive()).await,
        "the server's grandchild (pid {pid}) outlived keel"
    );
}

#[tokio::test]
async fn a_server_that_changes_its_tools_is_listed_again() {
    let h = Harness::from_json(CALL_ECHO_TWICE).await;
    let cfg = config("t", "change-tools");
    let run = allowed(&h, "call", &cfg, "mcp__t", &[]).await;
    let reqs = h.requests();
    let offers_late = |i: usize| reqs[i].body["tools"].to_string().contains("mcp__t__late");
    assert!(!offers_late(0));
    assert!(offers_late(2), "the new tool was never offered");
    assert!(warnings(&run.frames)
        .iter()
        .any(|m| m == "MCP server t changed its tools"));
}

#[tokio::test]
async fn long_output_is_capped_and_images_reach_the_model() {
    let h = Harness::from_json(CALL_ECHO).await;
    let cfg = config("t", "rich");
    allowed(
        &h,
        "call",
        &cfg,
        "mcp__t",
        &[("MAX_MCP_OUTPUT_TOKENS", "1000")],
    )
    .await;
    let sent = &h.requests()[1].body["messages"];
    let result = sent
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .expect("the result went to the model");
    let blocks = result["content"].as_array().expect("content blocks");
    assert_eq!(blocks[0]["type"], "image", "{result}");
    assert_eq!(blocks[0]["source"]["media_type"], "image/png");
    let text = blocks[1]["text"].as_str().unwrap();
    // 1000 tokens: about 4,000 bytes of the 200,000, with a marker naming the whole.
    assert!(text.len() < 6_000, "{} bytes", text.len());
    assert!(
        text.starts_with("rrrr") && text.trim_end().ends_with("rrrr"),
        "{text}"
    );
    refused_env(&h, &cfg, "MAX_MCP_OUTPUT_TOKENS", "lots").await;
}

#[tokio::test]
async fn a_host_can_disable_enable_and_reconnect_a_server() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"one"},{"kind":"text","text":"two"}]}"#,
    )
    .await;
    let tag = format!("keel-test-{}-toggle", std::process::id());
    let cfg = tagged("t", "normal", &tag);
    let mut s = Stream::start(&h, &["--mcp-config", &cfg], &[]);
    // keel's own command line holds the tag too.
    let keel = s.live.child.id().map(|p| p as i32);
    let servers = || -> Vec<i32> {
        processes_matching(&tag)
            .into_iter()
            .filter(|p| Some(*p) != keel)
            .collect()
    };
    let status = s.ask("s1", json!({"subtype": "mcp_status"})).await;
    assert_eq!(
        status["response"]["mcpServers"],
        json!([{"name": "t", "status": "connected"}])
    );
    let pids = servers();
    assert_eq!(pids.len(), 1, "{pids:?}");
    let off = s
        .ask(
            "off",
            json!({"subtype": "mcp_toggle", "serverName": "t", "enabled": false}),
        )
        .await;
    assert_eq!(off["subtype"], "success", "{off}");
    assert!(
        eventually(Duration::from_secs(30), || servers().is_empty()).await,
        "a disabled server keeps running"
    );
    let status = s.ask("s2", json!({"subtype": "mcp_status"})).await;
    assert_eq!(
        status["response"]["mcpServers"],
        json!([{"name": "t", "status": "disabled"}])
    );
    s.user("hello").await;
    s.result().await;
    assert!(!h.requests()[0].body["tools"]
        .to_string()
        .contains("mcp__t__echo"));
    let on = s
        .ask(
            "on",
            json!({"subtype": "mcp_toggle", "serverName": "t", "enabled": true}),
        )
        .await;
    assert_eq!(on["subtype"], "success", "{on}");
    let again = s
        .ask("re", json!({"subtype": "mcp_reconnect", "serverName": "t"}))
        .await;
    assert_eq!(again["subtype"], "success", "{again}");
    let now = servers();
    assert_eq!(
        now.len(),
        1,
        "one server process after a reconnect: {now:?}"
    );
    assert_ne!(now, pids, "a reconnect starts a new process");
    s.user("again").await;
    s.result().await;
    assert!(h.requests()[1].body["tools"]
        .to_string()
        .contains("mcp__t__echo"));
    let unknown = s
        .ask(
            "x",
            json!({"subtype": "mcp_reconnect", "serverName": "nope"}),
        )
        .await;
    assert_eq!(unknown["subtype"], "error");
    assert!(
        unknown["error"].as_str().unwrap().contains("\"nope\""),
        "{unknown}"
    );
    s.finish().await;
}

// ---- `keel mcp`: the management commands ----

#[tokio::test]
async fn mcp_add_then_list_then_a_run_that_calls_the_tool() {
    let h = Harness::from_json(CALL_ECHO).await;
    let server = mcp_test_server().display().to_string();
    let add = h
        .run(&["mcp", "add", "t", "--", &server, "--mode", "normal"], &[])
        .await;
    assert_eq!(add.code, 0, "{}", add.stderr);
    assert!(
        add.stdout
            .contains("Added stdio MCP server t to the local scope"),
        "{}",
        add.stdout
    );
    // Written where the local scope lives: the user's state file, under this project.
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(h.home.path().join(".claude.json")).unwrap())
            .unwrap();
    let dir = h.cwd().display().to_string();
    assert_eq!(
        state["projects"][&dir]["mcpServers"]["t"]["command"],
        json!(server)
    );
    let list = h.run(&["mcp", "list"], &[]).await;
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.contains("t: ") && list.stdout.contains("[local] - connected, 2 tool(s)"),
        "{}",
        list.stdout
    );
    let run = h
        .run_stream("use the tool", &["--allowedTools", "mcp__t"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(run.tool_results()[0].to_string().contains("echo: hi"));
    // A second server of the same name is refused; remove takes it away.
    let again = h.run(&["mcp", "add", "t", "--", "x"], &[]).await;
    assert_ne!(again.code, 0);
    assert!(
        again.stderr.contains("already a server \"t\""),
        "{}",
        again.stderr
    );
    let rm = h.run(&["mcp", "remove", "t"], &[]).await;
    assert_eq!(rm.code, 0, "{}", rm.stderr);
    let list = h.run(&["mcp", "list", "--json"], &[]).await;
    assert_eq!(list.stdout.trim(), "[]");
}

#[tokio::test]
async fn mcp_add_checks_what_it_writes_and_never_clobbers_a_file_it_cannot_read() {
    let h = Harness::from_json(CALL_ECHO).await;
    let project = h
        .run(&["mcp", "add", "-s", "project", "p", "--", "srv"], &[])
        .await;
    assert_eq!(project.code, 0, "{}", project.stderr);
    assert!(h.cwd().join(".mcp.json").is_file());
    // A project server is not started until the user approves it, not even by `list`.
    let list = h.run(&["mcp", "get", "p"], &[]).await;
    assert!(
        list.stdout.contains("enabledMcpjsonServers"),
        "{}",
        list.stdout
    );
    for (args, says) in [
        (
            vec!["mcp", "add", "bad name", "--", "x"],
            "not a server name",
        ),
        (
            vec!["mcp", "add", "-t", "http", "w", "ftp://x"],
            "not an http:// or https:// URL",
        ),
        (
            vec!["mcp", "add", "-e", "1X=2", "e", "--", "x"],
            "is not KEY=VALUE",
        ),
        (
            vec!["mcp", "add", "-s", "galaxy", "g", "--", "x"],
            "not one of local, project, user",
        ),
        (
            vec!["mcp", "add-json", "j", r#"{"command": 3}"#],
            "field \"command\"",
        ),
    ] {
        let r = h.run(&args, &[]).await;
        assert_ne!(r.code, 0, "{args:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
    let state = h.home.path().join(".claude.json");
    std::fs::write(&state, "{ not json").unwrap();
    let r = h.run(&["mcp", "add", "t", "--", "x"], &[]).await;
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("is not valid JSON"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "{ not json");
}

/// Twenty `keel mcp add` at once in one HOME: every one of them lands in `~/.claude.json`,
/// which stays whole JSON with what was already in it (the shared settings writer's lock and
/// atomic replace; the old writer lost updates to each other).
#[tokio::test]
async fn twenty_mcp_adds_at_once_in_one_home_lose_none() {
    let h = Harness::from_json(CALL_ECHO).await;
    let state = h.home.path().join(".claude.json");
    std::fs::write(&state, "{\"numStartups\": 7, \"projects\": {}}\n").unwrap();
    let names: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
    let hr = &h;
    let runs = names.iter().map(|n| async move {
        hr.run(&["mcp", "add", "-s", "user", n, "--", "srv"], &[])
            .await
    });
    for r in futures_util::future::join_all(runs).await {
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let root: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(
        root["numStartups"],
        json!(7),
        "a key keel does not know is kept"
    );
    for n in &names {
        assert_eq!(
            root["mcpServers"][n]["command"],
            json!("srv"),
            "{n} was lost"
        );
    }
}

// ---- Servers at a URL ----

/// The test server over HTTP (`--http` or `--sse` plus `args`), its URL; killed on drop.
struct UrlServer(std::process::Child, String);

impl Drop for UrlServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn url_server(args: &[&str]) -> UrlServer {
    use std::io::BufRead;
    let mut child = std::process::Command::new(mcp_test_server())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the test server starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    UrlServer(child, line.trim().to_owned())
}

const CALL_WEB_ECHO: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"mcp__w__echo","input":{"text":"hi"}}]},
    {"kind":"text","text":"done"}]}"#;

#[tokio::test]
async fn http_and_sse_servers_are_called_with_their_headers_expanded() {
    for (flag, kind) in [("--http", "http"), ("--sse", "sse")] {
        let srv = url_server(&[flag, "--require-header", "Authorization: Bearer t0k"]);
        let h = Harness::from_json(CALL_WEB_ECHO).await;
        let cfg = json!({"mcpServers": {"w": {"type": kind, "url": srv.1,
            "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}}})
        .to_string();
        let run = h
            .run_stream(
                "call",
                &["--mcp-config", &cfg, "--allowedTools", "mcp__w"],
                &[("WEB_TOKEN", "t0k")],
            )
            .await;
        run.assert_end("success", false, "completed", 0);
        assert_eq!(
            init(&run.frames)["mcp_servers"],
            json!([{"name": "w", "status": "connected"}]),
            "{kind}"
        );
        assert!(
            run.tool_results()[0]
                .to_string()
                .contains("echo over http: hi"),
            "{kind}: {}",
            run.tool_results()[0]
        );
        // With the wrong token the server is failed, saying why, and the run goes on.
        let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"fine"}]}"#).await;
        let run = h
            .run_stream("hello", &["--mcp-config", &cfg], &[("WEB_TOKEN", "nope")])
            .await;
        run.assert_end("success", false, "completed", 0);
        let servers = init(&run.frames)["mcp_servers"].clone();
        assert_eq!(servers[0]["status"], "failed", "{kind}: {servers}");
        assert!(
            servers[0]["error"].as_str().unwrap().contains("401"),
            "{kind}: {servers}"
        );
    }
}

#[tokio::test]
async fn a_servers_resources_are_listed_and_read() {
    let h = Harness::from_json(
        r#"{"steps":[
        {"kind":"tool_use","calls":[{"name":"ListMcpResourcesTool","input":{}}]},
        {"kind":"tool_use","calls":[{"name":"ReadMcpResourceTool","input":{"server":"t","uri":"keel://notes/hello"}}]},
        {"kind":"tool_use","calls":[{"name":"ReadMcpResourceTool","input":{"server":"t","uri":"keel://nope"}}]},
        {"kind":"text","text":"done"}]}"#,
    )
    .await;
    let cfg = config("t", "normal");
    let run = h
        .run_stream(
            "read",
            &[
                "--mcp-config",
                &cfg,
                "--allowedTools",
                "ListMcpResourcesTool,ReadMcpResourceTool",
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = run.tool_results();
    let listed = r[0]["content"].as_str().unwrap_or_default().to_owned();
    assert!(
        listed.contains("keel://notes/hello") && listed.contains("\"server\": \"t\""),
        "{listed}"
    );
    assert_eq!(r[1]["is_error"], false, "{}", r[1]);
    assert!(
        r[1].to_string().contains("hello from a resource"),
        "{}",
        r[1]
    );
    assert_eq!(r[2]["is_error"], true);
    assert!(r[2].to_string().contains("keel://nope"), "{}", r[2]);
    // Offered only while a connected server has resources.
    let plain = Harness::from_json(r#"{"steps":[{"kind":"text","text":"fine"}]}"#).await;
    let run = plain.run_stream("hi", &[], &[]).await;
    assert!(!init(&run.frames)["tools"]
        .to_string()
        .contains("ListMcpResourcesTool"));
}

#[tokio::test]
async fn a_server_dies_with_keel_even_when_keel_is_killed() {
    let h = Harness::from_json(CALL_HANG).await;
    let tag = format!("keel-test-{}-sigkill", std::process::id());
    // A server that would outlive its closed stdin: only keel's death signal stops it.
    let cfg = with_args("h", "hang-on-call", &["--tag", &tag, "--linger"]);
    let live = calling(&h, &cfg).await;
    let keel = live.child.id().map(|p| p as i32);
    let servers = || -> Vec<i32> {
        processes_matching(&tag)
            .into_iter()
            .filter(|p| Some(*p) != keel)
            .collect()
    };
    assert_eq!(servers().len(), 1, "the server runs: {:?}", servers());
    live.signal(9); // SIGKILL: keel gets no chance to stop anything
    let _ = live.finish(Duration::from_secs(30)).await;
    assert!(
        eventually(Duration::from_secs(30), || servers().is_empty()).await,
        "the MCP server outlived a killed keel: {:?}",
        servers()
    );
}

#[tokio::test]
async fn slow_servers_start_side_by_side() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"fine"}]}"#).await;
    let server = mcp_test_server().display().to_string();
    let logs: Vec<_> = ["a", "b"]
        .iter()
        .map(|n| h.cwd().join(format!("{n}.log")))
        .collect();
    let entry = |log: &std::path::Path| {
        json!({"command": server, "args": ["--mode", "slow-start", "--delay-ms", "1500",
                                           "--log", log.display().to_string()]})
    };
    let cfg = json!({"mcpServers": {"a": entry(&logs[0]), "b": entry(&logs[1])}}).to_string();
    let run = h
        .run_stream(
            "hello",
            &["--mcp-config", &cfg],
            &[("MCP_TIMEOUT", "60000")],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        init(&run.frames)["mcp_servers"],
        json!([{"name": "a", "status": "connected"}, {"name": "b", "status": "connected"}])
    );
    // Each was still starting when the other began: they started side by side, not in turn.
    let span = |p: &std::path::Path| -> (u128, u128) {
        let text = std::fs::read_to_string(p).unwrap();
        let at = |what: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(what))
                .and_then(|v| v.trim().parse().ok())
                .unwrap()
        };
        (at("start "), at("ready "))
    };
    let (a, b) = (span(&logs[0]), span(&logs[1]));
    assert!(a.0 < b.1 && b.0 < a.1, "a {a:?}, b {b:?}");
}
