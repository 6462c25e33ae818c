//! Every hook event from the settings files, through the keel binary against keel-mock: what
//! each hook is told, what its answer changes (context, blocks, permission answers, the model
//! sent back to work), the bounds (the Stop loop, deadlines) and regular-expression matchers.
//! Each hook is a small shell command that logs its input to a file in the temp project.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::common::{Harness, Run, Stream};

/// Write the project settings file with these hooks.
fn settings(dir: &Path, hooks: Value) {
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    std::fs::write(
        dir.join(".claude/settings.json"),
        json!({ "hooks": hooks }).to_string(),
    )
    .unwrap();
}

/// One matcher group running `command`.
fn group(matcher: Option<&str>, command: &str) -> Value {
    let mut g = json!({"hooks": [{"type": "command", "command": command}]});
    if let Some(m) = matcher {
        g["matcher"] = json!(m);
    }
    g
}

/// A command that appends its input (one JSON line) to `log.<name>.jsonl`, then runs `then`.
fn logging(name: &str, then: &str) -> String {
    format!("cat >> log.{name}.jsonl; echo >> log.{name}.jsonl; {then}")
}

/// The inputs a logging hook received.
fn logged(dir: &Path, name: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("log.{name}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn run(h: &Harness, extra: &[&str]) -> Run {
    let mut args = vec!["-p", "go", "--output-format", "stream-json", "--verbose"];
    args.extend_from_slice(extra);
    tokio::time::timeout(Duration::from_secs(120), h.run(&args, &[]))
        .await
        .expect("keel ends")
}

/// The text of a recorded request's messages, for "did the model see X".
fn body(h: &Harness, i: usize) -> String {
    h.requests()[i].body["messages"].to_string()
}

fn context_json(event: &str, text: &str) -> String {
    let out = json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}});
    format!("echo '{out}'")
}

#[tokio::test]
async fn session_start_and_prompt_hooks_add_context_to_the_first_request() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"hello"}]}"#).await;
    settings(
        h.cwd(),
        json!({
            "SessionStart": [group(None, &logging("SessionStart", "echo 'branch main, 3 open issues'"))],
            "UserPromptSubmit": [group(None, &logging("UserPromptSubmit", &context_json("UserPromptSubmit", "the user is on call")))],
        }),
    );
    let r = run(&h, &[]).await;
    r.assert_end("success", false, "completed", 0);
    let first = body(&h, 0);
    assert!(first.contains("branch main, 3 open issues"), "{first}");
    assert!(first.contains("the user is on call"), "{first}");
    let start = logged(h.cwd(), "SessionStart");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["source"], "startup");
    assert_eq!(start[0]["hook_event_name"], "SessionStart");
    let prompt = logged(h.cwd(), "UserPromptSubmit");
    assert_eq!(prompt.len(), 1);
    assert_eq!(prompt[0]["prompt"], "go");
}

#[tokio::test]
async fn a_blocked_prompt_never_reaches_the_model_and_the_run_still_succeeds() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    settings(
        h.cwd(),
        json!({"UserPromptSubmit": [group(None, "cat > /dev/null; echo 'prompts may not name the vault' >&2; exit 2")]}),
    );
    let r = run(&h, &[]).await;
    r.assert_end("success", false, "completed", 0);
    assert!(h.requests().is_empty(), "the model was not called");
    let result = r.result()["result"].as_str().unwrap_or_default().to_owned();
    assert!(
        result.contains("prompts may not name the vault"),
        "{result}"
    );
    let warnings = r.of("system/warning");
    assert!(
        warnings
            .iter()
            .any(|w| w["blocked"] == true && w["hook_event"] == "UserPromptSubmit"),
        "an informational frame says the prompt was blocked: {warnings:?}"
    );
}

#[tokio::test]
async fn a_failing_prompt_guard_blocks_unless_it_opts_out() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    settings(
        h.cwd(),
        json!({"UserPromptSubmit": [group(None, "exit 1")]}),
    );
    let r = run(&h, &[]).await;
    assert!(h.requests().is_empty(), "a broken guard fails closed");
    assert!(r.result()["result"]
        .as_str()
        .unwrap_or_default()
        .contains("fails closed"));

    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"answered"}]}"#).await;
    let mut g = group(None, "exit 1");
    g["hooks"][0]["onFailure"] = json!("allow");
    settings(h.cwd(), json!({"UserPromptSubmit": [g]}));
    let r = run(&h, &[]).await;
    r.assert_end("success", false, "completed", 0);
    assert_eq!(
        h.requests().len(),
        1,
        "the opted-out hook's failure does not block"
    );
    assert!(r.stderr.contains("exited with code 1"), "{}", r.stderr);
}

#[tokio::test]
async fn stop_hooks_send_the_model_back_with_their_reason_and_the_loop_is_bounded() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"finished"}], "on_exhausted": "repeat_last"}"#,
    )
    .await;
    settings(
        h.cwd(),
        json!({"Stop": [group(None, &logging("Stop", "echo 'the tests are not green yet' >&2; exit 2"))]}),
    );
    let r = run(&h, &[]).await;
    r.assert_end("success", false, "completed", 0);
    // The first answer, then one more per continuation: 8 continuations at most.
    assert_eq!(h.requests().len(), 9, "the Stop loop is bounded at 8");
    assert!(body(&h, 1).contains("the tests are not green yet"));
    let stops = logged(h.cwd(), "Stop");
    assert_eq!(stops.len(), 8);
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[0]["last_assistant_message"], "finished");
    assert!(stops[1..].iter().all(|s| s["stop_hook_active"] == true));
    assert!(
        r.of("system/warning").iter().any(|w| w["message"]
            .as_str()
            .unwrap_or_default()
            .contains("8 times")),
        "the bound is visible"
    );
}

#[tokio::test]
async fn permission_request_hooks_answer_only_what_would_be_asked() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [
                {"name": "Bash", "input": {"command": "touch made.txt"}},
                {"name": "Bash", "input": {"command": "rm victim.txt"}},
                {"name": "Write", "input": {"file_path": "w.txt", "content": "x"}}
            ]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    std::fs::write(h.cwd().join("victim.txt"), "keep").unwrap();
    let allow = json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}});
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "no writes from hooks land"}}});
    let script = format!(
        "input=$(cat); printf '%s\\n' \"$input\" >> log.PermissionRequest.jsonl; case \"$input\" in *'\"tool_name\":\"Write\"'*) echo '{deny}';; *) echo '{allow}';; esac"
    );
    settings(
        h.cwd(),
        json!({"PermissionRequest": [group(Some("Bash|Write"), &script)]}),
    );
    let r = run(&h, &["--disallowedTools", "Bash(rm:*)"]).await;
    r.assert_end("success", false, "completed", 0);
    assert!(
        h.cwd().join("made.txt").exists(),
        "the hook answered the question yes"
    );
    assert!(
        h.cwd().join("victim.txt").exists(),
        "a deny rule is never asked, so no hook can allow it"
    );
    assert!(!h.cwd().join("w.txt").exists(), "the hook said no");
    let results = r.tool_results();
    assert_eq!(results[0]["is_error"], false, "{}", results[0]);
    assert!(results[2]["content"]
        .to_string()
        .contains("no writes from hooks land"));
    let asked: Vec<String> = logged(h.cwd(), "PermissionRequest")
        .iter()
        .map(|i| i["tool_input"].to_string())
        .collect();
    assert_eq!(asked.len(), 2, "only the two open questions: {asked:?}");
    assert!(!asked.iter().any(|i| i.contains("rm victim")));
}

#[tokio::test]
async fn a_failed_call_fires_post_tool_use_failure_and_matchers_are_regular_expressions() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [
                {"name": "Bash", "input": {"command": "echo broken >&2; exit 3"}},
                {"name": "Bash", "input": {"command": "echo fine"}}
            ]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    settings(
        h.cwd(),
        json!({
            "PostToolUseFailure": [group(Some("^Ba.h$"), &logging("PostToolUseFailure", &context_json("PostToolUseFailure", "the failure was noted")))],
            "PostToolUse": [group(Some("Bash"), &logging("PostToolUse", "true"))],
            "PreToolUse": [
                group(Some("^Read$"), &logging("PreRead", "true")),
                group(Some("B.*|Write"), &logging("PreB", "true")),
            ],
        }),
    );
    let r = run(&h, &["--allowedTools", "Bash"]).await;
    r.assert_end("success", false, "completed", 0);
    let failures = logged(h.cwd(), "PostToolUseFailure");
    assert_eq!(failures.len(), 1, "only the failed call");
    assert_eq!(failures[0]["tool_name"], "Bash");
    assert!(failures[0]["error"]
        .as_str()
        .unwrap_or_default()
        .contains("broken"));
    assert_eq!(failures[0]["is_interrupt"], false);
    let posts = logged(h.cwd(), "PostToolUse");
    assert_eq!(posts.len(), 1, "only the call that worked");
    assert_eq!(posts[0]["tool_input"]["command"], "echo fine");
    let results = r.tool_results();
    assert!(results[0]["content"]
        .to_string()
        .contains("the failure was noted"));
    assert!(logged(h.cwd(), "PreRead").is_empty(), "^Read$ is not Bash");
    assert_eq!(logged(h.cwd(), "PreB").len(), 2, "B.* covers Bash");
}

#[tokio::test]
async fn a_bad_regular_expression_is_refused_naming_the_file() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    settings(
        h.cwd(),
        json!({"PreToolUse": [group(Some("Bash("), "true")]}),
    );
    let r = run(&h, &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("settings.json") && r.stderr.contains("hooks.PreToolUse[0].matcher"),
        "{}",
        r.stderr
    );
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn subagent_start_and_stop_hooks_see_the_agent_and_prompt_hooks_only_the_user() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [
                {"name": "Task", "input": {"description": "d", "prompt": "SUB look around", "subagent_type": "general-purpose"}}
            ]},
            {"kind": "text", "text": "sub done"},
            {"kind": "text", "text": "all done"}
        ]})
        .to_string(),
    )
    .await;
    settings(
        h.cwd(),
        json!({
            "SubagentStart": [group(Some("general-purpose"), &logging("SubagentStart", &context_json("SubagentStart", "subagents must not push")))],
            "SubagentStop": [group(None, &logging("SubagentStop", "true"))],
            "Stop": [group(None, &logging("Stop", "true"))],
            "UserPromptSubmit": [group(None, &logging("UserPromptSubmit", "true"))],
        }),
    );
    let r = run(&h, &["--permission-mode", "bypassPermissions"]).await;
    r.assert_end("success", false, "completed", 0);
    let sub_first = body(&h, 1);
    assert!(sub_first.contains("SUB look around"), "{sub_first}");
    assert!(sub_first.contains("subagents must not push"), "{sub_first}");
    let started = logged(h.cwd(), "SubagentStart");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["agent_type"], "general-purpose");
    assert!(started[0]["agent_id"].is_string());
    let stopped = logged(h.cwd(), "SubagentStop");
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0]["agent_id"], started[0]["agent_id"]);
    assert_eq!(stopped[0]["last_assistant_message"], "sub done");
    assert_eq!(logged(h.cwd(), "Stop").len(), 1, "Stop is the main agent's");
    assert_eq!(
        logged(h.cwd(), "UserPromptSubmit").len(),
        1,
        "a subagent's prompt is not the user's"
    );
}

#[tokio::test]
async fn session_end_runs_in_print_mode_and_a_hanging_one_is_killed_at_its_deadline() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"hello"}]}"#).await;
    let mut g = group(None, "cat > end.json; echo $$ > end.pid; exec sleep 600");
    g["hooks"][0]["timeout"] = json!(2);
    settings(h.cwd(), json!({"SessionEnd": [g]}));
    let started = std::time::Instant::now();
    let r = run(&h, &[]).await;
    r.assert_end("success", false, "completed", 0);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the deadline held"
    );
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(h.cwd().join("end.json")).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "SessionEnd");
    assert_eq!(input["reason"], "other");
    let pid: i32 = std::fs::read_to_string(h.cwd().join("end.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        super::common::eventually(Duration::from_secs(10), || !Path::new(&format!(
            "/proc/{pid}"
        ))
        .exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z ")))
        .await,
        "the hung SessionEnd hook was killed"
    );
    assert!(
        r.stderr.contains("SessionEnd"),
        "the failure is visible: {}",
        r.stderr
    );
}

#[tokio::test]
async fn pre_compact_runs_before_the_summary_and_session_start_compact_after() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"text","text":"first answer"},
            {"kind":"text","text":"SUMMARY of the talk"},
            {"kind":"text","text":"second answer"}
        ]}"#,
    )
    .await;
    settings(
        h.cwd(),
        json!({
            "PreCompact": [group(Some("manual"), &logging("PreCompact", &format!("echo PreCompact >> order.log; {}", context_json("PreCompact", "keep the deploy steps"))))],
            "SessionStart": [
                group(Some("startup"), "cat > /dev/null; echo SessionStart:startup >> order.log"),
                group(Some("^compact$"), &format!("cat > /dev/null; echo SessionStart:compact >> order.log; {}", context_json("SessionStart", "re-read CONTRIBUTING"))),
            ],
        }),
    );
    let mut s = Stream::start(&h, &[], &[]);
    s.user("hi").await;
    s.result().await;
    s.user("/compact").await;
    let compacted = s.result().await;
    assert_eq!(compacted["subtype"], "success", "{compacted}");
    s.user("again").await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let order = std::fs::read_to_string(h.cwd().join("order.log")).unwrap();
    assert_eq!(
        order.lines().collect::<Vec<_>>(),
        ["SessionStart:startup", "PreCompact", "SessionStart:compact"]
    );
    let pre = logged(h.cwd(), "PreCompact");
    assert_eq!(pre[0]["trigger"], "manual");
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("keep the deploy steps"),
        "PreCompact's context reached the summary request"
    );
    assert!(
        body(&h, 2).contains("re-read CONTRIBUTING"),
        "SessionStart (compact) context follows the summary"
    );
}

#[tokio::test]
async fn session_start_frames_come_before_init_and_the_rest_with_include_hook_events() {
    let scenario = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo hi"}}]},
        {"kind": "text", "text": "done"}
    ]})
    .to_string();
    let hooks = json!({
        "SessionStart": [group(None, "cat > /dev/null; echo 'start context'")],
        "PreToolUse": [group(Some("Bash"), "cat > /dev/null; exit 0")],
        "PostToolUse": [group(Some("Bash"), "cat > /dev/null; echo 'the linter crashed' >&2; exit 1")],
    });
    for include in [false, true] {
        let h = Harness::from_json(&scenario).await;
        settings(h.cwd(), hooks.clone());
        let mut extra = vec!["--allowedTools", "Bash"];
        if include {
            extra.push("--include-hook-events");
        }
        let r = run(&h, &extra).await;
        r.assert_end("success", false, "completed", 0);
        let kinds = super::common::kinds(&r.frames);
        let init = kinds.iter().position(|k| k == "system/init").unwrap();
        let started = r.of("system/hook_started");
        let responses = r.of("system/hook_response");
        assert_eq!(
            &kinds[..2],
            ["system/hook_started", "system/hook_response"],
            "{kinds:?}"
        );
        assert!(init > 1, "SessionStart's frames precede init: {kinds:?}");
        assert_eq!(started[0]["hook_event"], "SessionStart");
        assert_eq!(responses[0]["stdout"], "start context\n");
        assert_eq!(responses[0]["outcome"], "success");
        assert_eq!(responses[0]["hook_id"], started[0]["hook_id"]);
        if !include {
            assert_eq!(started.len(), 1, "only SessionStart without the flag");
            continue;
        }
        let events: Vec<&str> = responses
            .iter()
            .map(|f| f["hook_event"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(events, ["SessionStart", "PreToolUse", "PostToolUse"]);
        assert_eq!(responses[1]["exit_code"], 0);
        let failed = responses[2];
        assert_eq!(failed["outcome"], "error");
        assert_eq!(failed["exit_code"], 1);
        assert!(failed["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("the linter crashed"));
        assert!(
            r.stderr.contains("the linter crashed"),
            "the failure is on stderr too: {}",
            r.stderr
        );
        assert_eq!(failed["hook_name"], "PostToolUse:Bash");
    }
}

#[tokio::test]
async fn notification_hooks_hear_a_permission_prompt_and_permission_request_can_spare_it() {
    let scenario = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch asked.txt"}}]},
        {"kind": "text", "text": "done"}
    ]})
    .to_string();
    // Without a PermissionRequest hook the host is asked, and Notification hooks hear it.
    let h = Harness::from_json(&scenario).await;
    settings(
        h.cwd(),
        json!({
            "Notification": [group(Some("permission_prompt"), &logging("Notification", "true"))],
            "PermissionRequest": [group(Some("Write"), &logging("PermissionRequest", "true"))],
        }),
    );
    let mut s = Stream::start(&h, &["--permission-prompt-tool", "stdio"], &[]);
    s.user("make a file").await;
    let req = s.keel_request("can_use_tool").await;
    assert!(
        super::common::eventually(Duration::from_secs(20), || {
            !logged(h.cwd(), "Notification").is_empty()
        })
        .await,
        "the Notification hook ran while keel waited"
    );
    let note = &logged(h.cwd(), "Notification")[0];
    assert_eq!(note["notification_type"], "permission_prompt");
    assert!(note["message"]
        .as_str()
        .unwrap_or_default()
        .contains("Bash"));
    s.answer(
        req["request_id"].as_str().unwrap(),
        json!({"behavior": "deny", "message": "not now"}),
    )
    .await;
    s.result().await;
    s.finish().await;
    assert!(
        logged(h.cwd(), "PermissionRequest").is_empty(),
        "its matcher names another tool"
    );

    // A PermissionRequest hook that answers spares the host the question.
    let h = Harness::from_json(&scenario).await;
    let allow = json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}});
    settings(
        h.cwd(),
        json!({"PermissionRequest": [group(Some("Bash"), &format!("cat > /dev/null; echo '{allow}'"))]}),
    );
    let mut s = Stream::start(&h, &["--permission-prompt-tool", "stdio"], &[]);
    s.user("make a file").await;
    let result = s.result().await;
    assert_eq!(result["subtype"], "success");
    let run = s.finish().await;
    assert!(h.cwd().join("asked.txt").exists());
    assert!(
        !run.frames
            .iter()
            .any(|f| f["type"] == "control_request" && f["request"]["subtype"] == "can_use_tool"),
        "the host was not asked"
    );
}

#[tokio::test]
async fn a_permission_request_hook_cannot_allow_what_dont_ask_or_plan_mode_denies() {
    for mode in ["dontAsk", "plan"] {
        let h = Harness::from_json(
            &json!({"steps": [
                {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch made.txt"}}]},
                {"kind": "text", "text": "done"}
            ]})
            .to_string(),
        )
        .await;
        let allow = json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}});
        settings(
            h.cwd(),
            json!({"PermissionRequest": [group(None, &logging("PermissionRequest", &format!("echo '{allow}'")))]}),
        );
        let r = run(&h, &["--permission-mode", mode]).await;
        r.assert_end("success", false, "completed", 0);
        assert!(
            !h.cwd().join("made.txt").exists(),
            "{mode} denies, no hook widens it"
        );
        assert!(
            logged(h.cwd(), "PermissionRequest").is_empty(),
            "{mode}: nothing is asked, so the hook is not consulted"
        );
        assert_eq!(r.tool_results()[0]["is_error"], true);
    }
}

#[tokio::test]
async fn session_end_runs_when_an_sdk_session_closes_its_input() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"hello"}]}"#).await;
    settings(
        h.cwd(),
        json!({"SessionEnd": [group(Some("other"), "cat > end.json")]}),
    );
    let mut s = Stream::start(&h, &[], &[]);
    s.user("hi").await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(h.cwd().join("end.json")).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "SessionEnd");
    assert_eq!(input["reason"], "other");
}

#[tokio::test]
async fn a_resumed_session_starts_with_source_resume() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"first"},{"kind":"text","text":"second"}]}"#,
    )
    .await;
    settings(
        h.cwd(),
        json!({"SessionStart": [group(None, &logging("SessionStart", "true"))]}),
    );
    let first = run(&h, &[]).await;
    first.assert_end("success", false, "completed", 0);
    let id = first.result()["session_id"].as_str().unwrap().to_owned();
    let again = run(&h, &["--resume", &id]).await;
    again.assert_end("success", false, "completed", 0);
    let sources: Vec<Value> = logged(h.cwd(), "SessionStart")
        .iter()
        .map(|i| i["source"].clone())
        .collect();
    assert_eq!(sources, [json!("startup"), json!("resume")]);
}
