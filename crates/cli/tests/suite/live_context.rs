//! What a host decides binds every agent of the session at its next decision: hooks, rules
//! sent in `initialize`, mode changes and rules granted with an approval reach a subagent that
//! is already running, because subagents read the session's live context, not a copy.

use serde_json::{json, Value};

use super::common::{Harness, Stream};

/// A step answered only to requests whose first user message contains `who`.
fn step(who: &str, mut step: Value) -> Value {
    step["match"] = json!({"first_user_contains": who});
    step
}

/// The main agent delegates to a subagent, which makes `calls` one after the other, then both
/// finish.
fn delegating(calls: &[Value]) -> String {
    let mut steps = vec![step(
        "MAIN",
        json!({"kind": "tool_use", "calls": [{"name": "Task", "id": "toolu_task", "input": {
            "description": "delegated", "prompt": "SUB: do the work", "subagent_type": "general-purpose"}}]}),
    )];
    for (i, c) in calls.iter().enumerate() {
        let mut c = c.clone();
        c["id"] = json!(format!("toolu_sub_{i}"));
        steps.push(step("SUB", json!({"kind": "tool_use", "calls": [c]})));
    }
    steps.push(step("SUB", json!({"kind": "text", "text": "sub finished"})));
    steps.push(step(
        "MAIN",
        json!({"kind": "text", "text": "main finished"}),
    ));
    json!({ "steps": steps }).to_string()
}

fn bash(command: &str) -> Value {
    json!({"name": "Bash", "input": {"command": command}})
}

/// The tool_result the subagent's model was given for `id`.
fn sub_result(h: &Harness, id: &str) -> Value {
    for r in h.requests().iter().rev() {
        for m in r.body["messages"].as_array().unwrap() {
            for b in m["content"].as_array().cloned().unwrap_or_default() {
                if b["tool_use_id"] == id {
                    return b;
                }
            }
        }
    }
    panic!("no request carried a tool_result for {id}");
}

fn text(result: &Value) -> String {
    match &result["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn a_hosts_pre_tool_use_hook_is_asked_about_a_subagents_call_and_its_block_holds() {
    let h = Harness::from_json(&delegating(&[bash("touch made_by_sub.txt")])).await;
    let mut st = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    let init = st
        .ask(
            "init",
            json!({"subtype": "initialize", "hooks": {"PreToolUse": [
                {"matcher": "Bash", "hookCallbackIds": ["guard"]}]}}),
        )
        .await;
    assert_eq!(init["subtype"], "success", "{init}");
    st.user("MAIN go").await;
    let asked = st.keel_request("hook_callback").await;
    let req = &asked["request"];
    assert_eq!(req["callback_id"], "guard");
    assert_eq!(req["input"]["tool_name"], "Bash");
    assert_eq!(
        req["tool_use_id"], "toolu_sub_0",
        "the hook is asked about the subagent's own call"
    );
    st.answer(
        asked["request_id"].as_str().unwrap(),
        json!({"decision": "block", "reason": "no files from subagents"}),
    )
    .await;
    let result = st.result().await;
    assert_eq!(result["subtype"], "success", "{result}");
    let r = sub_result(&h, "toolu_sub_0");
    assert_eq!(r["is_error"], true, "{r}");
    assert!(text(&r).contains("no files from subagents"), "{r}");
    assert!(
        !h.cwd().join("made_by_sub.txt").exists(),
        "the subagent's blocked command did not run"
    );
    st.finish().await;
}

#[tokio::test]
async fn disallowed_tools_sent_in_initialize_bind_inside_a_subagent() {
    let h = Harness::from_json(&delegating(&[bash("touch made_by_sub.txt")])).await;
    let mut st = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    let init = st
        .ask(
            "init",
            json!({"subtype": "initialize", "disallowedTools": ["Bash(touch:*)"]}),
        )
        .await;
    assert_eq!(init["subtype"], "success", "{init}");
    st.user("MAIN go").await;
    st.result().await;
    let r = sub_result(&h, "toolu_sub_0");
    assert_eq!(r["is_error"], true, "{r}");
    assert!(text(&r).contains("Bash(touch:*)"), "names the rule: {r}");
    assert!(!h.cwd().join("made_by_sub.txt").exists());
    st.finish().await;
}

#[tokio::test]
async fn a_mode_change_binds_a_running_subagent_at_its_next_decision() {
    let wait_for_go = "touch started; while [ ! -f go ]; do sleep 0.02; done";
    let h = Harness::from_json(&delegating(&[
        bash(wait_for_go),
        bash("touch made_after_plan.txt"),
    ]))
    .await;
    let mut st = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    st.user("MAIN go").await;
    // The subagent's first command is running: switch the session to plan mode, then let it
    // finish. The subagent's next call is decided under plan mode.
    st.wait(|f| {
        f["type"] == "assistant"
            && f["parent_tool_use_id"] == "toolu_task"
            && f["message"]["content"][0]["input"]["command"] == wait_for_go
    })
    .await;
    // Shown is not yet allowed: wait until the command is really running.
    let started = h.cwd().join("started");
    assert!(
        super::common::eventually(std::time::Duration::from_secs(30), || started.exists()).await,
        "the subagent's first command never started"
    );
    let r = st
        .ask(
            "mode",
            json!({"subtype": "set_permission_mode", "mode": "plan"}),
        )
        .await;
    assert_eq!(r["subtype"], "success", "{r}");
    std::fs::write(h.cwd().join("go"), "").unwrap();
    st.result().await;
    let first = sub_result(&h, "toolu_sub_0");
    assert_eq!(first["is_error"], false, "the first call ran: {first}");
    let second = sub_result(&h, "toolu_sub_1");
    assert_eq!(second["is_error"], true, "{second}");
    assert!(text(&second).contains("plan mode"), "{second}");
    assert!(!h.cwd().join("made_after_plan.txt").exists());
    st.finish().await;
}

#[tokio::test]
async fn a_rule_granted_with_an_approval_binds_a_running_subagent() {
    let h = Harness::from_json(&delegating(&[
        bash("touch first.txt"),
        bash("rm first.txt"),
    ]))
    .await;
    let mut st = Stream::start(&h, &["--permission-prompt-tool", "stdio"], &[]);
    st.user("MAIN go").await;
    let asked = st.keel_request("can_use_tool").await;
    assert_eq!(asked["request"]["input"]["command"], "touch first.txt");
    st.answer(
        asked["request_id"].as_str().unwrap(),
        json!({"behavior": "allow", "updatedInput": {"command": "touch first.txt"},
               "updatedPermissions": [{"type": "addRules", "behavior": "deny",
                   "rules": [{"toolName": "Bash", "ruleContent": "rm:*"}], "destination": "session"}]}),
    )
    .await;
    st.result().await;
    let second = sub_result(&h, "toolu_sub_1");
    assert_eq!(second["is_error"], true, "{second}");
    assert!(
        text(&second).contains("Bash(rm:*)") && text(&second).contains("granted earlier"),
        "{second}"
    );
    assert!(
        h.cwd().join("first.txt").exists(),
        "the denied rm did not run"
    );
    let run = st.finish().await;
    let asks = run
        .frames
        .iter()
        .filter(|f| f["type"] == "control_request" && f["request"]["subtype"] == "can_use_tool")
        .count();
    assert_eq!(
        asks, 1,
        "the session rule decided the second call without asking"
    );
}
