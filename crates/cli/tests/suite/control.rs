//! The stream-json input mode and the control protocol, spoken raw: every host → keel subtype
//! (success and error), keel → host requests (`can_use_tool`, `hook_callback`) with their
//! deadlines and withdrawals, state frames, bad input lines, and the SDK flags. The official
//! SDKs drive the same paths in tests/sdk-conformance.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::common::{eventually, kinds, processes_matching, Harness, Run, Stream, WAIT};

fn tool_result_texts(frames: &[Value]) -> Vec<(String, bool)> {
    frames
        .iter()
        .filter(|f| f["type"] == "user")
        .flat_map(|f| {
            f["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            (
                b["content"].as_str().unwrap_or_default().to_owned(),
                b["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

fn bash(command: &str) -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": command, "description": "test command", "timeout": 600000}}]},
        {"kind": "text", "text": "finished"}
    ]})
    .to_string()
}

#[tokio::test]
async fn initialize_answers_with_keel_fields_and_only_once() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    let r = s
        .ask(
            "req_1",
            json!({"subtype": "initialize", "hooks": {"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0"]}]}}),
        )
        .await;
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["pending_permission_requests"], json!([]));
    assert_eq!(r["pending_user_dialog_requests"], json!([]));
    let body = &r["response"];
    for k in [
        "commands",
        "agents",
        "models",
        "account",
        "output_style",
        "available_output_styles",
        "claude_code_version",
        "keel_version",
    ] {
        assert!(body.get(k).is_some(), "initialize lacks {k}: {body}");
    }
    assert_eq!(body["pid"], s.live.pid());
    assert_eq!(body["current_permission_mode"], "default");
    assert_eq!(body["hook_on_failure_supported"], true);
    assert_eq!(body["account"]["apiKeySource"], "ANTHROPIC_API_KEY");
    assert_eq!(body["models"][0]["resolvedModel"], "claude-sonnet-4-5");
    let again = s.ask("req_2", json!({"subtype": "initialize"})).await;
    assert_eq!(
        (again["subtype"].as_str(), again["error_code"].as_str()),
        (Some("error"), Some("already_initialized"))
    );
    let run = s.finish().await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(
        run.of("system/init").is_empty() && run.of("result").is_empty(),
        "nothing but control responses before the first user message: {:?}",
        kinds(&run.frames)
    );
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn set_permission_mode_answers_then_reports_status_and_refuses_bad_modes() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"ok"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    let ok = s
        .ask(
            "m1",
            json!({"subtype": "set_permission_mode", "mode": "acceptEdits"}),
        )
        .await;
    assert_eq!(ok["subtype"], "success");
    assert_eq!(ok["response"], json!({"mode": "acceptEdits"}));
    let status = s
        .wait(|f| f["type"] == "system" && f["subtype"] == "status")
        .await;
    assert_eq!(status["permissionMode"], "acceptEdits");
    assert!(status["status"].is_null());
    for (id, mode) in [("m2", "no-such-mode"), ("m3", "auto")] {
        let bad = s
            .ask(id, json!({"subtype": "set_permission_mode", "mode": mode}))
            .await;
        assert_eq!(bad["subtype"], "error");
        assert_eq!(bad["error_code"], "invalid_mode");
        assert!(
            bad["error"]
                .as_str()
                .unwrap()
                .starts_with("Cannot set permission mode"),
            "{bad}"
        );
    }
    s.user("hi").await;
    let init = s
        .wait(|f| f["type"] == "system" && f["subtype"] == "init")
        .await;
    assert_eq!(init["permissionMode"], "acceptEdits");
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0);
}

#[tokio::test]
async fn set_model_replays_and_the_next_request_uses_it() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    let mut s = Stream::start(&h, &["--model", "claude-start-model"], &[]);
    s.control(
        "s1",
        json!({"subtype": "set_model", "model": "claude-other-model"}),
    )
    .await;
    let replay = s.wait(|f| f["type"] == "user").await;
    assert_eq!(replay["isReplay"], true);
    assert!(replay["message"]["content"]
        .as_str()
        .unwrap()
        .contains("claude-other-model"));
    let r = s.response("s1").await;
    assert_eq!(r["response"], json!({"model": "claude-other-model"}));
    s.user("first").await;
    s.result().await;
    let r = s
        .ask("s2", json!({"subtype": "set_model", "model": null}))
        .await;
    assert_eq!(r["response"], json!({"model": "claude-start-model"}));
    s.user("second").await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0);
    let models: Vec<String> = h
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models, ["claude-other-model", "claude-start-model"]);
}

#[tokio::test]
async fn set_max_thinking_tokens_changes_the_next_requests_budget_and_null_restores_it() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    let mut s = Stream::start(&h, &["--max-thinking-tokens", "4096"], &[]);
    s.user("at the launch budget").await;
    s.result().await;
    let r = s
        .ask(
            "t1",
            json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": 2048}),
        )
        .await;
    assert_eq!(r["response"], json!({"max_thinking_tokens": 2048}));
    s.user("at 2048").await;
    s.result().await;
    let r = s
        .ask(
            "t2",
            json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": 0}),
        )
        .await;
    assert_eq!(r["response"], json!({"max_thinking_tokens": 0}));
    s.user("without thinking").await;
    s.result().await;
    // Out of range, a fraction, a display keel cannot honour: refused, and nothing changes.
    for (id, fields, code) in [
        ("t3", json!({"max_thinking_tokens": 100}), "invalid_request"),
        (
            "t4",
            json!({"max_thinking_tokens": 1_000_000}),
            "invalid_request",
        ),
        (
            "t5",
            json!({"max_thinking_tokens": 2048.5}),
            "invalid_request",
        ),
        ("t6", json!({"max_thinking_tokens": -1}), "invalid_request"),
        (
            "t7",
            json!({"max_thinking_tokens": 2048, "thinking_display": "omitted"}),
            "unsupported_request",
        ),
    ] {
        let mut req = fields;
        req["subtype"] = json!("set_max_thinking_tokens");
        let r = s.ask(id, req).await;
        assert_eq!(
            (r["subtype"].as_str(), r["error_code"].as_str()),
            (Some("error"), Some(code)),
            "{id}: {r}"
        );
    }
    s.user("still without thinking").await;
    s.result().await;
    let r = s
        .ask(
            "t8",
            json!({"subtype": "set_max_thinking_tokens", "max_thinking_tokens": null}),
        )
        .await;
    assert_eq!(r["response"], json!({"max_thinking_tokens": 4096}));
    s.user("back at the launch budget").await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0);
    let budgets: Vec<Value> = h
        .requests()
        .iter()
        .map(|r| r.body["thinking"]["budget_tokens"].clone())
        .collect();
    assert_eq!(
        budgets,
        [
            json!(4096),
            json!(2048),
            Value::Null,
            Value::Null,
            json!(4096)
        ]
    );
}

#[tokio::test]
async fn mcp_status_and_unknown_subtypes() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    let r = s.ask("x1", json!({"subtype": "mcp_status"})).await;
    assert_eq!(
        r,
        json!({"subtype": "success", "request_id": "x1", "response": {"mcpServers": []}})
    );
    let r = s.ask("x2", json!({"subtype": "no_such_subtype"})).await;
    assert_eq!(
        r,
        json!({"subtype": "error", "request_id": "x2",
               "error": "Unsupported control request subtype: no_such_subtype",
               "error_code": "unsupported_request"})
    );
    let run = s.finish().await;
    assert_eq!(run.code, 0);
}

#[tokio::test]
async fn malformed_requests_get_error_answers() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    let r = s
        .ask("e1", json!({"subtype": "set_model", "model": 42}))
        .await;
    assert_eq!(
        (r["subtype"].as_str(), r["error_code"].as_str()),
        (Some("error"), Some("invalid_request"))
    );
    let r = s
        .ask(
            "e2",
            hooks(
                "PreToolUse",
                json!({"matcher": "Bash", "hookCallbackIds": ["h"], "timeout": "soon"}),
            ),
        )
        .await;
    assert_eq!(r["error_code"], "invalid_request");
    assert!(
        r["error"].as_str().unwrap().contains("hooks.PreToolUse[0]"),
        "{r}"
    );
    // A failed initialize registered nothing and may be repeated.
    let r = s
        .ask("e3", json!({"subtype": "initialize", "hooks": null}))
        .await;
    assert_eq!(r["subtype"], "success");
    let run = s.finish().await;
    assert_eq!(run.code, 0);
}

#[tokio::test]
async fn bad_lines_are_reported_on_stderr_and_skipped() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"still here"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    s.send_raw("this is not json").await;
    s.send_raw(r#"{"type":"no_such_type"}"#).await;
    s.send_raw(r#"{"no":"type"}"#).await;
    s.send_raw(r#"{"type":"user","message":{"role":"user","content":""}}"#)
        .await;
    s.send_raw(r#"{"type":"keep_alive"}"#).await;
    s.send_raw(r#"{"type":"control_request","request_id":"bad1","request":{"no":"subtype"}}"#)
        .await;
    let r = s.response("bad1").await;
    assert_eq!(
        (r["subtype"].as_str(), r["error_code"].as_str()),
        (Some("error"), Some("invalid_request"))
    );
    s.user("and now a real one").await;
    let result = s.result().await;
    assert_eq!(result["result"], "still here");
    let run = s.finish().await;
    assert_eq!(run.code, 0);
    for needle in [
        "stdin line 1 is not JSON",
        "stdin line 2 has type \"no_such_type\"",
        "stdin line 3 has no \"type\"",
        "stdin line 4: the user message is empty",
    ] {
        assert!(
            run.stderr.contains(needle),
            "stderr lacks {needle:?}:\n{}",
            run.stderr
        );
    }
    assert!(
        !run.stderr.contains("line 5"),
        "keep_alive is silent:\n{}",
        run.stderr
    );
    assert_eq!(h.requests().len(), 1);
}

#[tokio::test]
async fn each_turn_has_init_and_one_result_and_queued_turns_finish_after_eof() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"one"},{"kind":"text","text":"two"}]}"#,
    )
    .await;
    let mut s = Stream::start(&h, &[], &[("CLAUDE_CODE_SDK_READS_SESSION_STATE", "1")]);
    s.user("first").await;
    s.send(
        json!({"type": "user", "session_id": "", "parent_tool_use_id": null,
                  "message": {"role": "user", "content": [{"type": "text", "text": "second"}]}}),
    )
    .await;
    // stdin closes at once, as the Python SDK does after a plain prompt.
    let run = s.finish().await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(
        kinds(&run.frames),
        [
            "system/session_state_changed",
            "system/init",
            "assistant",
            "result",
            "system/session_state_changed",
            "system/session_state_changed",
            "system/init",
            "assistant",
            "result",
            "system/session_state_changed",
        ]
    );
    let states: Vec<&str> = run
        .of("system/session_state_changed")
        .iter()
        .map(|f| {
            assert_eq!(f["sdk_host_only"], true);
            f["state"].as_str().unwrap()
        })
        .collect();
    assert_eq!(states, ["running", "idle", "running", "idle"]);
    let results = run.of("result");
    assert_eq!(
        (results[0]["result"].as_str(), results[1]["result"].as_str()),
        (Some("one"), Some("two"))
    );
    assert_eq!(results[0]["session_id"], results[1]["session_id"]);
    let second = &h.requests()[1].body["messages"];
    assert_eq!(second.as_array().unwrap().len(), 3, "{second}");
}

#[tokio::test]
async fn interrupt_when_idle_is_a_truthful_empty_receipt() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    let r = s.ask("i1", json!({"subtype": "interrupt"})).await;
    assert_eq!(r["subtype"], "success");
    assert_eq!(
        r["response"],
        json!({"still_queued": [], "was_running": false, "stopped": [], "never_started": [],
               "processes_killed": 0, "turn_ended": false, "background_running": []})
    );
    let run = s.finish().await;
    assert_eq!(run.code, 0);
}

#[tokio::test]
async fn an_interrupt_right_after_the_result_finds_nothing_running() {
    // The transcript's last sync after the result is slow (a busy disk): a client that read
    // the result and interrupts at once must hear that no turn was running.
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"done"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[("KEEL_TEST_FAULT", "slow_final_sync")]);
    s.user("go").await;
    let result = s.result().await;
    assert_eq!(result["subtype"], "success");
    let r = s.ask("i1", json!({"subtype": "interrupt"})).await;
    assert_eq!(r["response"]["was_running"], false, "{r}");
    assert_eq!(r["response"]["stopped"], json!([]), "{r}");
    let run = s.finish().await;
    assert_eq!(run.code, 0);
}

#[tokio::test]
async fn interrupt_stops_a_running_command_and_says_what_it_stopped() {
    let marker = "keel-control-interrupt-marker";
    let h = Harness::from_json(&bash(&format!("sleep 1000; : {marker}"))).await;
    let mut s = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    s.user("run it").await;
    let call = s
        .wait(|f| f["type"] == "assistant" && f["message"]["content"][0]["type"] == "tool_use")
        .await;
    let id = call["message"]["content"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        eventually(Duration::from_secs(30), || !processes_matching(marker)
            .is_empty())
        .await,
        "the command never started"
    );
    let r = s.ask("i1", json!({"subtype": "interrupt"})).await;
    let receipt = &r["response"];
    assert_eq!(receipt["was_running"], true, "{receipt}");
    assert_eq!(receipt["stopped"], json!([id]));
    assert_eq!(receipt["turn_ended"], true);
    assert_eq!(receipt["still_queued"], json!([]));
    let result = s.result().await;
    assert_eq!(result["terminal_reason"], "aborted_tools");
    assert!(
        eventually(Duration::from_secs(10), || processes_matching(marker)
            .is_empty())
        .await,
        "the command's process is gone"
    );
    let run = s.finish().await;
    assert_eq!(run.code, 130, "the last turn was interrupted");
    assert_eq!(h.requests().len(), 1, "no model call after the interrupt");
}

#[tokio::test]
async fn interrupt_during_a_stalled_model_reply_settles_promptly() {
    // Reference bug: an interrupt during an API call never settled. Here the reply stalls for
    // 10 minutes after message_start; the interrupt must end the turn and answer at once.
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"stall","phase":"after_message_start","ms":600000}]}"#,
    )
    .await;
    let mut s = Stream::start(&h, &[], &[]);
    s.user("say something").await;
    s.wait(|f| f["type"] == "system" && f["subtype"] == "init")
        .await;
    assert!(
        h.mock.wait_for_requests(1, Duration::from_secs(30)).await,
        "the request reached keel-mock"
    );
    let t0 = std::time::Instant::now();
    let r = s.ask("i1", json!({"subtype": "interrupt"})).await;
    assert_eq!(r["response"]["was_running"], true);
    assert_eq!(r["response"]["turn_ended"], true);
    let result = s.result().await;
    assert_eq!(result["terminal_reason"], "aborted_streaming");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let run = s.finish().await;
    assert_eq!(run.code, 130);
}

#[tokio::test]
async fn an_interrupt_racing_a_new_message_is_truthful_either_way() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"stall","phase":"after_message_start","ms":600000,"then":{"kind":"text","text":"late"}}]}"#,
    )
    .await;
    let mut s = Stream::start(&h, &[], &[]);
    // One write: the message and the interrupt arrive together, as at a host's startup.
    s.send_raw(concat!(
        r#"{"type":"user","session_id":"","parent_tool_use_id":null,"uuid":"u1","message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"control_request","request_id":"i1","request":{"subtype":"interrupt"}}"#
    ))
    .await;
    let r = s.response("i1").await["response"].clone();
    if r["was_running"] == true {
        assert_eq!(r["still_queued"], json!([]));
        let result = s.result().await;
        assert_eq!(result["terminal_reason"], "aborted_streaming");
    } else {
        // Not running yet: the receipt says the message is still queued, and it will run.
        assert_eq!(r["still_queued"], json!(["u1"]), "{r}");
        s.wait(|f| f["type"] == "system" && f["subtype"] == "init")
            .await;
        let r2 = s.ask("i2", json!({"subtype": "interrupt"})).await;
        assert_eq!(r2["response"]["turn_ended"], true);
    }
    let run = s.finish().await;
    assert_eq!(run.of("result").len(), 1);
}

#[tokio::test]
async fn can_use_tool_allow_can_replace_the_input_and_grant_a_rule() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch asked.txt", "description": "Create"}}]},
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch granted.txt"}}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    let mut s = Stream::start(
        &h,
        &["--permission-prompt-tool", "stdio"],
        &[("CLAUDE_CODE_SDK_READS_SESSION_STATE", "1")],
    );
    s.user("make files").await;
    let req = s.keel_request("can_use_tool").await;
    let id = req["request_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 36, "keel's request ids are UUIDs: {id}");
    let body = &req["request"];
    assert_eq!(body["tool_name"], "Bash");
    assert_eq!(body["display_name"], "Bash");
    assert_eq!(body["input"]["command"], "touch asked.txt");
    assert_eq!(body["description"], "Create");
    assert!(body["tool_use_id"].as_str().unwrap().starts_with("toolu_"));
    assert_eq!(
        body["permission_suggestions"][0]["rules"][0],
        json!({"toolName": "Bash", "ruleContent": "touch asked.txt"})
    );
    assert!(s
        .live
        .frames
        .iter()
        .any(|f| f["subtype"] == "session_state_changed" && f["state"] == "requires_action"));
    s.answer(
        &id,
        json!({"behavior": "allow", "updatedInput": {"command": "touch replaced.txt"},
               "updatedPermissions": [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "touch:*"}],
                                       "behavior": "allow", "destination": "session"}]}),
    )
    .await;
    let result = s.result().await;
    assert_eq!(result["subtype"], "success");
    let run = s.finish().await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(
        h.cwd().join("replaced.txt").exists(),
        "the host's input ran"
    );
    assert!(
        !h.cwd().join("asked.txt").exists(),
        "the model's input did not"
    );
    assert!(
        h.cwd().join("granted.txt").exists(),
        "the granted rule allowed the next call"
    );
    let asked = run
        .frames
        .iter()
        .filter(|f| f["type"] == "control_request")
        .count();
    assert_eq!(asked, 1, "the second call was not asked about");
    let metas: Vec<&Value> = run
        .of("user")
        .iter()
        .map(|f| &f["tool_result_meta"][0]["permission_decision"]["source"])
        .collect();
    assert_eq!(metas[0], "user_temporary");
    let states: Vec<&str> = run
        .of("system/session_state_changed")
        .iter()
        .map(|f| f["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["running", "requires_action", "running", "idle"]);
}

#[tokio::test]
async fn can_use_tool_deny_reaches_the_model_and_interrupt_ends_the_turn() {
    let h = Harness::from_json(&bash("touch nope.txt")).await;
    let mut s = Stream::start(&h, &["--permission-prompt-tool", "stdio"], &[]);
    s.user("make a file").await;
    let req = s.keel_request("can_use_tool").await;
    s.answer(
        req["request_id"].as_str().unwrap(),
        json!({"behavior": "deny", "message": "No files today.", "interrupt": true}),
    )
    .await;
    let result = s.result().await;
    assert_eq!(result["terminal_reason"], "aborted_tools");
    assert_eq!(result["permission_denials"][0]["tool_name"], "Bash");
    let run = s.finish().await;
    assert_eq!(run.code, 130);
    assert_eq!(
        tool_result_texts(&run.frames),
        [("No files today.".to_owned(), true)]
    );
    assert!(!h.cwd().join("nope.txt").exists());
    assert_eq!(h.requests().len(), 1, "interrupt: true ends the turn");
}

#[tokio::test]
async fn an_interrupt_withdraws_a_pending_permission_request() {
    let h = Harness::from_json(&bash("touch never.txt")).await;
    let mut s = Stream::start(&h, &["--permission-prompt-tool", "stdio"], &[]);
    s.user("make a file").await;
    let req = s.keel_request("can_use_tool").await;
    let id = req["request_id"].as_str().unwrap().to_owned();
    let r = s.ask("i1", json!({"subtype": "interrupt"})).await;
    assert_eq!(r["response"]["was_running"], true);
    let cancel = s.wait(|f| f["type"] == "control_cancel_request").await;
    assert_eq!(cancel["request_id"], id.as_str());
    let run = s.finish().await;
    assert_eq!(run.code, 130);
    let results = tool_result_texts(&run.frames);
    assert_eq!(results.len(), 1);
    assert!(results[0].0.contains("did not run"), "{results:?}");
    assert!(!h.cwd().join("never.txt").exists());
}

#[tokio::test]
async fn stdin_eof_fails_pending_requests_instead_of_hanging() {
    let h = Harness::from_json(&bash("touch never.txt")).await;
    let mut s = Stream::start(&h, &["--permission-prompt-tool", "stdio"], &[]);
    s.user("make a file").await;
    s.keel_request("can_use_tool").await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let results = tool_result_texts(&run.frames);
    assert!(
        results[0].1 && results[0].0.contains("closed keel's input"),
        "{results:?}"
    );
    assert_eq!(run.result()["result"], "finished");
}

fn hooks(event: &str, entry: Value) -> Value {
    json!({"subtype": "initialize", "hooks": {event: [entry]}})
}

#[tokio::test]
async fn a_pre_tool_use_hook_blocks_with_its_reason_and_sees_the_call() {
    let h = Harness::from_json(&bash("touch blocked.txt")).await;
    let mut s = Stream::start(
        &h,
        &["--allowedTools", "Bash", "--include-hook-events"],
        &[],
    );
    s.ask(
        "init",
        hooks(
            "PreToolUse",
            json!({"matcher": "Write|Bash", "hookCallbackIds": ["hook_0"]}),
        ),
    )
    .await;
    s.user("make a file").await;
    let req = s.keel_request("hook_callback").await;
    let body = &req["request"];
    assert_eq!(body["callback_id"], "hook_0");
    assert_eq!(body["input"]["hook_event_name"], "PreToolUse");
    assert_eq!(body["input"]["tool_name"], "Bash");
    assert_eq!(body["input"]["tool_input"]["command"], "touch blocked.txt");
    assert_eq!(body["tool_use_id"], body["input"]["tool_use_id"]);
    s.answer(
        req["request_id"].as_str().unwrap(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                      "permissionDecisionReason": "policy says no"}}),
    )
    .await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0);
    let results = tool_result_texts(&run.frames);
    assert!(
        results[0].1 && results[0].0.contains("policy says no"),
        "{results:?}"
    );
    assert!(!h.cwd().join("blocked.txt").exists());
    assert_eq!(run.of("system/hook_started").len(), 1);
    let resp = run.of("system/hook_response");
    assert_eq!(resp[0]["outcome"], "success");
}

#[tokio::test]
async fn an_unanswered_hook_times_out_per_its_failure_policy_and_is_withdrawn() {
    // Fail closed: the call is blocked once the 1 s deadline passes.
    let h = Harness::from_json(&bash("touch closed.txt")).await;
    let mut s = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    s.ask(
        "init",
        hooks(
            "PreToolUse",
            json!({"matcher": "Bash", "hookCallbackIds": ["hook_0"], "timeout": 1, "onFailure": "block"}),
        ),
    )
    .await;
    s.user("make a file").await;
    let req = s.keel_request("hook_callback").await;
    let cancel = s.wait(|f| f["type"] == "control_cancel_request").await;
    assert_eq!(cancel["request_id"], req["request_id"]);
    s.result().await;
    let run = s.finish().await;
    let results = tool_result_texts(&run.frames);
    assert!(
        results[0].1 && results[0].0.contains("did not answer within 1 s"),
        "{results:?}"
    );
    assert!(!h.cwd().join("closed.txt").exists());
    assert!(run.stderr.contains("block on failure"), "{}", run.stderr);

    // Fail open (the default): the call runs after the deadline.
    let h = Harness::from_json(&bash("touch open.txt")).await;
    let mut s = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    s.ask(
        "init",
        hooks(
            "PreToolUse",
            json!({"matcher": null, "hookCallbackIds": ["hook_0"], "timeout": 1}),
        ),
    )
    .await;
    s.user("make a file").await;
    s.keel_request("hook_callback").await;
    s.wait(|f| f["type"] == "control_cancel_request").await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0);
    assert!(
        h.cwd().join("open.txt").exists(),
        "fail-open lets the call run"
    );
}

#[tokio::test]
async fn a_user_prompt_submit_block_ends_the_turn_without_a_model_call() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    s.ask(
        "init",
        hooks("UserPromptSubmit", json!({"hookCallbackIds": ["hook_0"]})),
    )
    .await;
    s.user("something forbidden").await;
    let req = s.keel_request("hook_callback").await;
    assert_eq!(req["request"]["input"]["prompt"], "something forbidden");
    assert!(req["request"]["tool_use_id"].is_null());
    s.answer(
        req["request_id"].as_str().unwrap(),
        json!({"decision": "block", "reason": "not that"}),
    )
    .await;
    let r = s.result().await;
    assert_eq!(
        (
            r["subtype"].as_str(),
            r["is_error"].as_bool(),
            r["terminal_reason"].as_str(),
            r["num_turns"].as_u64()
        ),
        (Some("success"), Some(false), Some("completed"), Some(0))
    );
    assert!(r["result"].as_str().unwrap().contains("not that"));
    let run = s.finish().await;
    assert_eq!(
        run.code, 0,
        "a blocked prompt ends successfully, as in Claude Code"
    );
    assert!(h.requests().is_empty(), "the model was not called");
}

#[tokio::test]
async fn post_tool_use_notes_and_stop_hooks_reach_the_model() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo ran"}}]},
            {"kind":"text","text":"first stop"},
            {"kind":"text","text":"second stop"}]}"#,
    )
    .await;
    let mut s = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    s.send(json!({"type": "control_request", "request_id": "init", "request": {"subtype": "initialize", "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hookCallbackIds": ["post"]}],
        "Stop": [{"hookCallbackIds": ["stop"]}]}}}))
        .await;
    s.response("init").await;
    s.user("go").await;
    let post = s.keel_request("hook_callback").await;
    assert_eq!(post["request"]["callback_id"], "post");
    assert_eq!(post["request"]["input"]["tool_response"]["stdout"], "ran\n");
    s.answer(
        post["request_id"].as_str().unwrap(),
        json!({"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "the linter is happy"}}),
    )
    .await;
    let stop = s
        .wait(|f| f["type"] == "control_request" && f["request"]["callback_id"] == "stop")
        .await;
    assert_eq!(stop["request"]["input"]["stop_hook_active"], false);
    assert_eq!(
        stop["request"]["input"]["last_assistant_message"],
        "first stop"
    );
    s.answer(
        stop["request_id"].as_str().unwrap(),
        json!({"decision": "block", "reason": "also write the tests"}),
    )
    .await;
    let again = s
        .wait(|f| {
            f["type"] == "control_request"
                && f["request"]["callback_id"] == "stop"
                && f["request"]["input"]["stop_hook_active"] == true
        })
        .await;
    s.answer(again["request_id"].as_str().unwrap(), json!({}))
        .await;
    let r = s.result().await;
    assert_eq!(r["result"], "second stop");
    assert_eq!(r["num_turns"], 3);
    let run = s.finish().await;
    assert_eq!(run.code, 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 3);
    let second = reqs[1].body["messages"].to_string();
    assert!(second.contains("the linter is happy"), "{second}");
    let third = reqs[2].body["messages"].to_string();
    assert!(third.contains("also write the tests"), "{third}");
}

#[tokio::test]
async fn stream_json_input_needs_stream_json_output_and_no_prompt_argument() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let run = h.run(&["--input-format", "stream-json"], &[]).await;
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("requires --output-format=stream-json"),
        "{}",
        run.stderr
    );
    let run = h
        .run(
            &[
                "-p",
                "hi",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
            ],
            &[],
        )
        .await;
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
}

#[tokio::test]
async fn the_flags_the_sdks_pass_are_accepted() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"fine"}]}"#,
    )
    .await;
    // Everything the Python and TS SDKs pass for common options, in their spellings.
    let sdk_flags = [
        "--system-prompt",
        "",
        "--setting-sources=",
        "--tools=default",
        "--thinking=disabled",
        "--permission-prompt-tool=stdio",
        "--mcp-config",
        r#"{"mcpServers":{}}"#,
        "--strict-mcp-config",
        "--add-dir",
        "/tmp",
        "--include-hook-events",
        "--await-initialize",
        "--allow-dangerously-skip-permissions",
        "--max-turns=3",
        "--allowedTools=Read",
    ];
    let mut args = vec![
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
    ];
    args.extend_from_slice(&sdk_flags);
    let mut cmd = h.command(&args, &[]);
    cmd.stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"type\":\"user\",\"session_id\":\"\",\"message\":{\"role\":\"user\",\"content\":\"hi\"},\"parent_tool_use_id\":null}\n")
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let run = Run::new(
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert!(
        run.stderr.is_empty(),
        "honoured flags say nothing: {}",
        run.stderr
    );
    assert_eq!(run.result()["result"], "fine");
    assert_eq!(
        run.of("system/init")[0]["additional_directories"],
        json!(["/tmp"])
    );

    // Flags keel accepts but does not honour yet: one clear line each, never a failure.
    let unsupported = [
        "--effort",
        "high",
        "--betas",
        "x-beta",
        "--plugin-dir",
        "/tmp",
        "--settings",
        "{}",
        "--debug-file",
        "/dev/null",
    ];
    let mut args = vec!["-p", "hi", "--output-format", "stream-json", "--verbose"];
    args.extend_from_slice(&unsupported);
    let run = h.run(&args, &[]).await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let notices = run
        .stderr
        .lines()
        .filter(|l| l.contains("accepted but not supported yet"))
        .count();
    assert_eq!(notices, 4, "{}", run.stderr);

    let run = h.run(&["-p", "hi", "--no-such-flag"], &[]).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--no-such-flag"), "{}", run.stderr);
}
