//! Protocol parity with what the official SDKs send (issue 32): version, `origin`, offered
//! tools, subagent text, structured output, `/clear`, output styles, the stdin contract and
//! the capability account — through the binary against keel-mock.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::{Harness, Stream};

const TEXT: &str = r#"{"steps":[{"kind":"text","text":"unused"}]}"#;

#[tokio::test]
async fn dash_v_and_version_print_the_protocol_version_then_keels() {
    let h = Harness::from_json(TEXT).await;
    for flag in ["-v", "--version", "-V"] {
        let run = h.run(&[flag], &[]).await;
        assert_eq!(run.code, 0, "{flag}: {}", run.stderr);
        let line = run.stdout.trim_end();
        // What version checks parse: a leading X.Y.Z (the protocol keel speaks).
        let (proto, rest) = line.split_once(' ').expect("two parts");
        let parts: Vec<u32> = proto.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(parts.len(), 3, "{parts:?}: {line}");
        assert_eq!(proto, keel_core::PROTOCOL_VERSION, "{line}");
        assert_eq!(
            rest,
            format!("(keel {})", env!("CARGO_PKG_VERSION")),
            "{line}"
        );
    }
    assert!(
        h.requests().is_empty(),
        "printing the version calls no model"
    );
}

const TWO_TEXTS: &str = r#"{"steps":[{"kind":"text","text":"one"},{"kind":"text","text":"two"}]}"#;

#[tokio::test]
async fn a_user_lines_origin_is_echoed_on_that_turns_result_only() {
    let h = Harness::from_json(TWO_TEXTS).await;
    let mut s = Stream::start(&h, &[], &[]);
    s.send(
        json!({"type": "user", "session_id": "", "parent_tool_use_id": null,
                  "origin": {"kind": "human"},
                  "message": {"role": "user", "content": "Reply with exactly: one"}}),
    )
    .await;
    let first = s.result().await;
    assert_eq!(first["result"], "one");
    assert_eq!(first["origin"], json!({"kind": "human"}), "{first}");
    s.user("Reply with exactly: two").await;
    let second = s.result().await;
    assert_eq!(second["result"], "two");
    // A prompt without one: no origin (SDKs read it as null), not the previous turn's.
    assert!(second.get("origin").is_none(), "{second}");
    // An origin that is not an object is refused on stderr, and no turn runs for it.
    s.send(json!({"type": "user", "origin": "human",
                  "message": {"role": "user", "content": "three"}}))
        .await;
    let run = s.finish().await;
    assert!(
        run.stderr.contains("\"origin\" that is not an object"),
        "{}",
        run.stderr
    );
    assert_eq!(h.requests().len(), 2);
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn mcp_server(name: &str, tag: &str) -> (String, Value) {
    (
        name.to_owned(),
        json!({"command": super::common::mcp_test_server().display().to_string(),
               "args": ["--mode", "normal", "--tag", tag]}),
    )
}

#[tokio::test]
async fn a_tool_denied_by_name_or_by_mcp_server_is_not_offered_but_a_pattern_rule_keeps_it() {
    let h = Harness::from_json(TEXT).await;
    let tag = format!("keel-test-{}-withheld", std::process::id());
    let servers: serde_json::Map<String, Value> =
        [mcp_server("gone", &tag), mcp_server("kept", &tag)]
            .into_iter()
            .collect();
    let cfg = json!({"mcpServers": servers}).to_string();
    let run = h
        .run_stream(
            "hi",
            &[
                "--mcp-config",
                &cfg,
                "--disallowedTools",
                "Write,Bash(rm:*)",
                "--disallowedTools",
                "mcp__gone",
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let offered = tool_names(&h.requests()[0].body);
    assert!(!offered.iter().any(|t| t == "Write"), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t.starts_with("mcp__gone__")),
        "{offered:?}"
    );
    // A rule with a pattern denies some calls only: the tool is still offered.
    assert!(offered.iter().any(|t| t == "Bash"), "{offered:?}");
    assert!(offered.iter().any(|t| t == "Edit"), "{offered:?}");
    assert!(
        offered.iter().any(|t| t.starts_with("mcp__kept__")),
        "{offered:?}"
    );
    // system/init lists what the model is offered.
    let init = run.of("system/init")[0];
    let listed: Vec<&str> = init["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !listed.contains(&"Write") && listed.contains(&"Bash"),
        "{listed:?}"
    );
    assert!(
        !listed.iter().any(|t| t.starts_with("mcp__gone__")),
        "{listed:?}"
    );
}

const SUBAGENT_TEXT: &str = r#"{"steps":[
  {"match":{"first_user_contains":"MAIN"},"kind":"tool_use","calls":[{"name":"Task","id":"toolu_task","input":{"description":"greet","prompt":"SUB: say hi","subagent_type":"general-purpose"}}]},
  {"match":{"first_user_contains":"SUB"},"kind":"tool_use","text":"SUB-THINKS-ALOUD","calls":[{"name":"Bash","id":"toolu_sub","input":{"command":"echo sub-ran"}}]},
  {"match":{"first_user_contains":"SUB"},"kind":"text","text":"SUB-REPORT"},
  {"match":{"first_user_contains":"MAIN"},"kind":"text","text":"main done"}
]}"#;

/// Run the subagent scenario; `forward` is initialize's forwardSubagentText (None: absent).
async fn subagent_frames(forward: Option<bool>) -> Vec<Value> {
    let h = Harness::from_json(SUBAGENT_TEXT).await;
    let mut s = Stream::start(&h, &["--permission-mode", "bypassPermissions"], &[]);
    let mut init = json!({"subtype": "initialize", "hooks": null});
    if let Some(f) = forward {
        init["forwardSubagentText"] = json!(f);
    }
    let r = s.ask("init", init).await;
    assert_eq!(r["subtype"], "success", "{r}");
    s.user("MAIN").await;
    let result = s.result().await;
    assert_eq!(result["result"], "main done", "{result}");
    let run = s.finish().await;
    run.frames
}

fn child_assistant_blocks(frames: &[Value]) -> Vec<(String, String)> {
    frames
        .iter()
        .filter(|f| f["type"] == "assistant" && f["parent_tool_use_id"] == "toolu_task")
        .flat_map(|f| {
            f["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|b| {
            let kind = b["type"].as_str().unwrap_or("").to_owned();
            let what = b["text"]
                .as_str()
                .or(b["name"].as_str())
                .unwrap_or("")
                .to_owned();
            (kind, what)
        })
        .collect()
}

#[tokio::test]
async fn a_subagents_text_stays_out_of_the_stream_unless_the_host_asks_for_it() {
    for forward in [None, Some(false)] {
        let frames = subagent_frames(forward).await;
        // The child's tool call and its result reach the parent stream; its text does not.
        assert_eq!(
            child_assistant_blocks(&frames),
            [("tool_use".to_owned(), "Bash".to_owned())],
            "forward={forward:?}"
        );
        assert!(frames.iter().any(|f| f["type"] == "user"
            && f["parent_tool_use_id"] == "toolu_task"
            && f.to_string().contains("sub-ran")));
        // The parent's Task result still carries the child's report.
        assert!(frames.iter().any(|f| f["type"] == "user"
            && f["parent_tool_use_id"].is_null()
            && f.to_string().contains("SUB-REPORT")));
    }
    let frames = subagent_frames(Some(true)).await;
    assert_eq!(
        child_assistant_blocks(&frames),
        [
            ("text".to_owned(), "SUB-THINKS-ALOUD".to_owned()),
            ("tool_use".to_owned(), "Bash".to_owned()),
            ("text".to_owned(), "SUB-REPORT".to_owned())
        ]
    );
}

const COUNT_SCHEMA: &str = r#"{"type":"object","properties":{"file_count":{"type":"number"},"has_tests":{"type":"boolean"},"test_file_count":{"type":"number"}},"required":["file_count","has_tests"]}"#;

fn structured_call(id: &str, input: Value) -> Value {
    json!({"kind": "tool_use", "calls": [{"name": "StructuredOutput", "id": id, "input": input}]})
}

fn tool_results_in(body: &Value) -> Vec<(String, bool)> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (text, b["is_error"] == true)
        })
        .collect()
}

#[tokio::test]
async fn a_matching_structured_output_call_is_the_answer_and_ends_the_turn() {
    // After a tool call, as the SDKs' tests do; a nested object and an enum in the schema.
    let schema = r#"{"type":"object","properties":{"count":{"type":"integer"},"colour":{"enum":["red","blue"]},"owner":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},"required":["count","colour","owner"]}"#;
    let answer = json!({"count": 2, "colour": "blue", "owner": {"name": "ada"}});
    let steps = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "id": "toolu_ls", "input": {"command": "echo two files"}}]},
        structured_call("toolu_so", answer.clone()),
        {"kind": "text", "text": "never asked for"}
    ]});
    let h = Harness::from_json(&steps.to_string()).await;
    let run = h
        .run_stream(
            "count",
            &["--json-schema", schema, "--allowedTools", "Bash"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let result = run.result();
    assert_eq!(result["structured_output"], answer, "{result}");
    assert_eq!(result["result"], answer.to_string(), "compact JSON");
    assert_eq!(result["num_turns"], 2);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2, "no request after the accepted call");
    // The tool was offered with the caller's schema as its input schema.
    let so = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "StructuredOutput")
        .cloned()
        .expect("StructuredOutput offered");
    assert_eq!(
        so["input_schema"],
        serde_json::from_str::<Value>(schema).unwrap()
    );
    assert!(run.of("system/init")[0]["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("StructuredOutput")));
    // The call was answered (a tool_result the stream shows).
    assert!(run
        .tool_results()
        .iter()
        .any(|r| r.to_string().contains("toolu_so")));
}

#[tokio::test]
async fn refused_structured_output_calls_are_retried_then_end_with_a_typed_error() {
    let bad1 = json!({"file_count": "many", "has_tests": false});
    let bad2 = json!({"file_count": 3});
    let steps = json!({"steps": [
        structured_call("toolu_1", bad1),
        structured_call("toolu_2", bad2),
        structured_call("toolu_3", json!({"file_count": 3, "has_tests": true}))
    ]});
    let h = Harness::from_json(&steps.to_string()).await;
    let run = h
        .run_stream(
            "count",
            &["--json-schema", COUNT_SCHEMA],
            &[("MAX_STRUCTURED_OUTPUT_RETRIES", "2")],
        )
        .await;
    run.assert_end(
        "error_max_structured_output_retries",
        true,
        "structured_output_retry_exhausted",
        1,
    );
    let result = run.result();
    assert!(result.get("structured_output").is_none(), "{result}");
    let text = result["result"].as_str().unwrap();
    assert!(
        text.contains("--json-schema") && text.contains("has_tests"),
        "{text}"
    );
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2, "the third step was never asked for");
    // The model was told what was wrong with its first call.
    let told = tool_results_in(&reqs[1].body);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].1 && told[0].0.contains("/file_count"), "{told:?}");

    // With the default bound, the same model recovers on its third call.
    let h = Harness::from_json(&steps.to_string()).await;
    let run = h
        .run_stream("count", &["--json-schema", COUNT_SCHEMA], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        run.result()["structured_output"],
        json!({"file_count": 3, "has_tests": true})
    );
}

#[tokio::test]
async fn a_text_answer_is_never_a_structured_success() {
    let steps = r#"{"steps":[{"kind":"text","text":"about 3"},{"kind":"text","text":"still 3"}]}"#;
    let h = Harness::from_json(steps).await;
    let run = h
        .run_stream("count", &["--json-schema", COUNT_SCHEMA], &[])
        .await;
    run.assert_end(
        "error_during_execution",
        true,
        "structured_output_missing",
        1,
    );
    assert!(run.result()["result"]
        .as_str()
        .unwrap()
        .contains("--json-schema"));
    // One reminder, then the end.
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1]
        .body
        .to_string()
        .contains("StructuredOutput tool now"));
}

#[tokio::test]
async fn a_turn_that_ends_without_calling_the_model_is_not_a_structured_success_either() {
    // `/compact` on an empty conversation ends the turn at once, with no model call.
    let h = Harness::from_json(TEXT).await;
    let run = h
        .run_stream("/compact", &["--json-schema", COUNT_SCHEMA], &[])
        .await;
    run.assert_end(
        "error_during_execution",
        true,
        "structured_output_missing",
        1,
    );
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn a_schema_keel_cannot_use_is_a_usage_error_before_any_request() {
    let h = Harness::from_json(TEXT).await;
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        ("{not json", &[], "not JSON"),
        ("[1,2]", &[], "must be a JSON object"),
        (r#"{"type": 5}"#, &[], "not a valid JSON Schema"),
        (
            COUNT_SCHEMA,
            &[("MAX_STRUCTURED_OUTPUT_RETRIES", "0")],
            "MAX_STRUCTURED_OUTPUT_RETRIES",
        ),
        (
            COUNT_SCHEMA,
            &[("MAX_STRUCTURED_OUTPUT_RETRIES", "lots")],
            "MAX_STRUCTURED_OUTPUT_RETRIES",
        ),
    ];
    for (schema, env, needle) in cases {
        let run = h.run_stream("hi", &["--json-schema", schema], env).await;
        assert_eq!(run.code, 2, "{schema}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{schema}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
    assert!(h.requests().is_empty());
}

fn system_text(body: &Value) -> String {
    match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[tokio::test]
async fn the_output_style_setting_is_reported_in_init_and_asked_of_the_model() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"4"},{"kind":"text","text":"4"},{"kind":"text","text":"4"},{"kind":"text","text":"4"}]}"#,
    )
    .await;
    let claude = h.cwd().join(".claude");
    std::fs::create_dir_all(claude.join("output-styles")).unwrap();
    std::fs::write(
        claude.join("output-styles/terse.md"),
        "---\nname: local-test-style\ndescription: one line\n---\nANSWER-IN-ONE-LINE-PLEASE\n",
    )
    .unwrap();
    std::fs::write(
        claude.join("settings.local.json"),
        r#"{"outputStyle":"local-test-style"}"#,
    )
    .unwrap();
    let user = h.home.path().join(".claude");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        r#"{"outputStyle":"Explanatory"}"#,
    )
    .unwrap();

    // The SDKs pass --system-prompt "": the style is still asked for.
    let run = h.run_stream("2+2?", &["--system-prompt", ""], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.of("system/init")[0]["output_style"], "local-test-style");
    let sys = system_text(&h.requests()[0].body);
    assert!(sys.contains("ANSWER-IN-ONE-LINE-PLEASE"), "{sys}");

    // Without the local source, the user's built-in style applies.
    let run = h
        .run_stream("2+2?", &["--setting-sources", "user,project"], &[])
        .await;
    assert_eq!(run.of("system/init")[0]["output_style"], "Explanatory");
    assert!(system_text(&h.requests()[1].body).contains("Output style: Explanatory"));

    // Only the project: none set there, so the default (nothing added).
    let run = h
        .run_stream(
            "2+2?",
            &["--setting-sources", "project", "--system-prompt", ""],
            &[],
        )
        .await;
    assert_eq!(run.of("system/init")[0]["output_style"], "default");
    assert_eq!(system_text(&h.requests()[2].body), "");

    // An unknown name: a warning frame, and the default style.
    std::fs::write(
        claude.join("settings.json"),
        r#"{"outputStyle":"no-such-style"}"#,
    )
    .unwrap();
    let run = h
        .run_stream("2+2?", &["--setting-sources", "project"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.of("system/init")[0]["output_style"], "default");
    assert!(run
        .of("system/warning")
        .iter()
        .any(|w| w["message"].as_str().unwrap().contains("no-such-style")));
}

#[tokio::test]
async fn with_print_the_prompt_may_come_on_stdin_as_harnesses_pipe_it() {
    use tokio::io::AsyncWriteExt;
    let h = Harness::from_json(TEXT).await;
    let mut cmd = h.command(
        &["--verbose", "--output-format=stream-json", "--print"],
        &[],
    );
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("keel starts");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"PIPED-PROMPT: say hi\n").await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("keel finished")
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = h.requests()[0].body.to_string();
    assert!(body.contains("PIPED-PROMPT: say hi"), "{body}");
}

#[tokio::test]
async fn with_a_prompt_argument_an_open_stdin_is_not_waited_for() {
    let h = Harness::from_json(TEXT).await;
    let mut cmd = h.command(
        &["-p", "hi", "--output-format", "stream-json", "--verbose"],
        &[],
    );
    // stdin stays open (nobody writes or closes it) for the whole run.
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("keel starts");
    let _stdin = child.stdin.take();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("keel exited although stdin stayed open")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn after_the_last_result_keel_exits_promptly_and_leaves_no_process_behind() {
    let tag = format!("keel-test-{}-exit-bound", std::process::id());
    let sleeper = format!("sleep 3{}", std::process::id() % 1000);
    let steps = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "id": "toolu_bg",
            "input": {"command": sleeper, "run_in_background": true}}]},
        {"kind": "text", "text": "left it running"}
    ]});
    let h = Harness::from_json(&steps.to_string()).await;
    let cfg = json!({"mcpServers": {"t": {
        "command": super::common::mcp_test_server().display().to_string(),
        "args": ["--mode", "normal", "--tag", tag]}}})
    .to_string();
    // stream-json input with stdin held open: after its result keel waits for the next
    // message, with the background shell and the MCP server still running.
    let mut s = Stream::start(&h, &["--mcp-config", &cfg, "--allowedTools", "Bash"], &[]);
    s.user("start it").await;
    let result = s.result().await;
    assert_eq!(result["subtype"], "success", "{result}");
    let both_running = super::common::eventually(Duration::from_secs(10), || {
        !super::common::processes_matching(&tag).is_empty()
            && !super::common::processes_matching(&sleeper).is_empty()
    })
    .await;
    assert!(
        both_running,
        "the MCP server and the background shell were running"
    );
    // Closing stdin is the end of the session: a generous bound catches a hang on a loaded
    // machine; the time taken is printed.
    let closed = std::time::Instant::now();
    let run = s.finish().await;
    let took = closed.elapsed();
    eprintln!("keel exited {} ms after stdin closed", took.as_millis());
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let gone = super::common::eventually(Duration::from_secs(10), || {
        super::common::processes_matching(&tag).is_empty()
            && super::common::processes_matching(&sleeper).is_empty()
    })
    .await;
    assert!(gone, "a child of keel outlived it");

    // With -p: keel exits on its own after the result, the same children gone.
    let h = Harness::from_json(&steps.to_string()).await;
    let mut live = h.live_stream(
        "start it",
        &["--mcp-config", &cfg, "--allowedTools", "Bash"],
        &[],
    );
    live.wait_for(Duration::from_secs(60), |f| f["type"] == "result")
        .await;
    let at_result = std::time::Instant::now();
    let run = live.finish(Duration::from_secs(10)).await;
    eprintln!(
        "keel -p exited {} ms after its result",
        at_result.elapsed().as_millis()
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.tool_results().iter().all(|r| r["is_error"] != true),
        "{:?}",
        run.tool_results()
    );
    let gone = super::common::eventually(Duration::from_secs(10), || {
        super::common::processes_matching(&tag).is_empty()
            && super::common::processes_matching(&sleeper).is_empty()
    })
    .await;
    assert!(gone, "a child of keel outlived it");
}

fn missing_server() -> String {
    json!({"mcpServers": {"gone": {"command": "/nonexistent/keel-no-such-mcp-server"}}}).to_string()
}

#[tokio::test]
async fn a_failed_optional_mcp_server_is_accounted_for_and_the_run_still_succeeds() {
    let h = Harness::from_json(TEXT).await;
    let run = h
        .run_stream("hi", &["--mcp-config", &missing_server()], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    for frame in [run.of("system/init")[0], run.result()] {
        let account = &frame["keel_capabilities"];
        assert_eq!(account["mcp_servers"][0]["name"], "gone", "{account}");
        assert_eq!(account["mcp_servers"][0]["status"], "failed", "{account}");
        assert_eq!(account["sandbox"]["enabled"], false, "{account}");
        assert_eq!(account["output_style"], "default", "{account}");
        assert_eq!(
            account["structured_output"]["requested"], false,
            "{account}"
        );
    }
    assert_eq!(h.requests().len(), 1);
}

#[tokio::test]
async fn a_required_capability_that_is_missing_is_never_a_success() {
    // A --strict-mcp-config server that did not start: no model call, an error naming it.
    let h = Harness::from_json(TEXT).await;
    let run = h
        .run_stream(
            "hi",
            &["--mcp-config", &missing_server(), "--strict-mcp-config"],
            &[],
        )
        .await;
    run.assert_end("error_during_execution", true, "capability_missing", 1);
    let text = run.result()["result"].as_str().unwrap();
    assert!(
        text.contains("--strict-mcp-config") && text.contains("gone"),
        "{text}"
    );
    assert!(h.requests().is_empty(), "the model was not called");

    // Structured output asked for and given: the account says it was met.
    let steps = json!({"steps": [structured_call("toolu_so", json!({"file_count": 1, "has_tests": false}))]});
    let h = Harness::from_json(&steps.to_string()).await;
    let run = h
        .run_stream("count", &["--json-schema", COUNT_SCHEMA], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        run.result()["keel_capabilities"]["structured_output"],
        json!({"requested": true, "met": true})
    );
}
