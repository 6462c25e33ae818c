//! Subagents and background tasks, end to end: the scenario scripts the parent's and each
//! subagent's model turns, told apart by their first prompt.

use std::path::PathBuf;
use std::time::Duration;

use keel_model::openai::FAILED_CALL_MARK;
use serde_json::{json, Value};

use super::common::{eventually, per_provider, processes_matching, Harness, Provider, Stream};

// Subagents work the same on every provider.
per_provider!(
    a_foreground_subagent_runs_bash_and_its_answer_reaches_the_parent,
    a_subagent_that_hits_its_turn_limit_is_truncated_not_completed,
    an_overloaded_subagent_retries_like_the_main_loop,
);

const SIGINT: i32 = 2;

/// A step answered only to requests whose first user message contains `who`.
fn step(who: &str, mut step: Value) -> Value {
    step["match"] = json!({"first_user_contains": who});
    step
}

fn task(prompt: &str, extra: Value) -> Value {
    let mut input = json!({"description": "delegated work", "prompt": prompt, "subagent_type": "general-purpose"});
    input
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    json!({"name": "Task", "input": input, "id": "toolu_task"})
}

fn scenario(steps: Vec<Value>) -> String {
    json!({ "steps": steps }).to_string()
}

/// The tool_result the parent's n-th request carried for `id`, in the Messages API's shape
/// (the OpenAI APIs have no `is_error`: there keel's text says the call failed, read back here
/// as `is_error`).
fn result_for(h: &Harness, id: &str) -> Value {
    for r in h.requests().iter().rev() {
        for m in r.messages_view()["messages"].as_array().unwrap() {
            for mut b in m["content"].as_array().cloned().unwrap_or_default() {
                if b["tool_use_id"] == id {
                    if matches!(r.dialect.as_str(), "responses" | "chat") {
                        let failed = b["content"]
                            .as_str()
                            .and_then(|t| t.strip_prefix(FAILED_CALL_MARK))
                            .and_then(|t| t.strip_prefix('\n'))
                            .map(str::to_owned);
                        b["is_error"] = Value::Bool(failed.is_some());
                        if let Some(t) = failed {
                            b["content"] = Value::String(t);
                        }
                    }
                    return b;
                }
            }
        }
    }
    panic!("no tool_result for {id} in any request");
}

fn session_dir(h: &Harness, session_id: &str) -> PathBuf {
    let projects = h.keel_home().join("projects");
    let project = std::fs::read_dir(&projects)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    project.join(session_id)
}

#[tokio::test]
async fn bad_task_calls_get_clear_errors_and_the_parent_goes_on() {
    let h = Harness::from_json(&scenario(vec![
        json!({"kind": "tool_use", "calls": [
            {"name": "Task", "input": {"description": "d", "prompt": "p", "subagent_type": "Astronaut"}, "id": "toolu_unknown"},
            {"name": "Task", "input": {"description": "d", "prompt": "p", "subagent_type": "Explore"}, "id": "toolu_denied"},
            {"name": "Agent", "input": {"description": "d", "prompt": "p", "subagent_type": "general-purpose", "resume": "a000000000000"}, "id": "toolu_resume"}]}),
        json!({"kind": "text", "text": "carried on"}),
    ]))
    .await;
    let run = h
        .run_stream("PARENT", &["--disallowedTools", "Task(Explore)"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let unknown = result_for(&h, "toolu_unknown");
    let text = unknown["content"].as_str().unwrap();
    assert!(
        unknown["is_error"] == true
            && text.contains("Astronaut")
            && text.contains("general-purpose")
            && text.contains("Explore"),
        "{text}"
    );
    let denied = result_for(&h, "toolu_denied");
    let text = denied["content"].as_str().unwrap();
    assert!(
        denied["is_error"] == true
            && text.contains("Task(Explore)")
            && text.contains("command line"),
        "{text}"
    );
    let resume = result_for(&h, "toolu_resume");
    let text = resume["content"].as_str().unwrap();
    assert!(
        resume["is_error"] == true
            && text.contains("a000000000000")
            && text.contains("without `resume`"),
        "{text}"
    );
}

async fn a_foreground_subagent_runs_bash_and_its_answer_reaches_the_parent(p: Provider) {
    let h = Harness::for_provider(p, &scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [task("SUBTASK-ALPHA: count the files", json!({}))]})),
        step("SUBTASK-ALPHA", json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo from-the-child"}}]})),
        step("SUBTASK-ALPHA", json!({"kind": "text", "text": "child report: from-the-child"})),
        step("PARENT", json!({"kind": "text", "text": "parent done"})),
    ]))
    .await;
    let run = h.run_stream("PARENT prompt", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let r = result_for(&h, "toolu_task");
    let text = r["content"].as_str().unwrap();
    assert!(
        r["is_error"] != true
            && text.contains("child report: from-the-child")
            && text.contains("agent_id"),
        "{text}"
    );
    // The child's frames are attributed to the Task call.
    let child: Vec<&Value> = run
        .of("assistant")
        .into_iter()
        .filter(|f| f["parent_tool_use_id"] == "toolu_task")
        .collect();
    // Its tool call only: a subagent's text stays out of the stream unless the host asks
    // for it (`initialize.forwardSubagentText`); its answer reaches the parent's Task result.
    assert_eq!(child.len(), 1, "the child's tool_use");
    assert_eq!(child[0]["message"]["content"][0]["type"], "tool_use");
    assert_eq!(run.of("system/task_started").len(), 1);
    let done = run.of("system/task_notification");
    assert_eq!(
        (done.len(), done[0]["status"].as_str()),
        (1, Some("completed"))
    );
    assert_eq!(run.result()["num_turns"], 2, "the parent's turns only");
    // Its transcript exists and holds the prompt that started it.
    let agent_id = done[0]["task_id"].as_str().unwrap();
    let path = session_dir(&h, run.result()["session_id"].as_str().unwrap())
        .join("subagents")
        .join(format!("agent-{agent_id}.jsonl"));
    let transcript =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        transcript.contains("SUBTASK-ALPHA: count the files")
            && transcript.contains("from-the-child")
    );
}

async fn a_subagent_that_hits_its_turn_limit_is_truncated_not_completed(p: Provider) {
    let h = Harness::for_provider(p,
        &json!({"on_exhausted": "repeat_last", "steps": [
            step("PARENT", json!({"kind": "tool_use", "calls": [task("LOOPER: never stop", json!({}))]})),
            step("PARENT", json!({"kind": "text", "text": "noted"})),
            step("LOOPER", json!({"kind": "tool_use", "times": 5, "calls": [{"name": "Bash", "input": {"command": "echo again"}}]})),
        ]})
        .to_string(),
    )
    .await;
    let run = h
        .run_stream("PARENT", &[], &[("KEEL_SUBAGENT_MAX_TURNS", "2")])
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = result_for(&h, "toolu_task");
    let text = r["content"].as_str().unwrap();
    assert!(
        r["is_error"] == true
            && text.contains("truncated{max_turns}")
            && !text.contains("completed"),
        "{text}"
    );
    assert_eq!(run.of("system/task_notification")[0]["status"], "truncated");
}

async fn an_overloaded_subagent_retries_like_the_main_loop(p: Provider) {
    let h = Harness::for_provider(
        p,
        &scenario(vec![
            step(
                "PARENT",
                json!({"kind": "tool_use", "calls": [task("BUSY-CHILD", json!({}))]}),
            ),
            step("BUSY-CHILD", json!({"kind": "error", "status": 529})),
            step("BUSY-CHILD", json!({"kind": "text", "text": "made it"})),
            step("PARENT", json!({"kind": "text", "text": "ok"})),
        ]),
    )
    .await;
    let run = h.run_stream("PARENT", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let retries = run.of("system/api_retry");
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0]["parent_tool_use_id"], "toolu_task");
    assert!(result_for(&h, "toolu_task")["content"]
        .as_str()
        .unwrap()
        .contains("made it"));
}

#[tokio::test]
async fn interrupting_a_foreground_subagent_kills_its_command_and_pairs_everything() {
    let marker = "keel-test-marker-subagent-bash";
    let h = Harness::from_json(&scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [task("SLOW-CHILD", json!({}))]})),
        step("SLOW-CHILD", json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": format!("sleep 1000; : {marker}")}}]})),
    ]))
    .await;
    let mut live = h.live_stream("PARENT", &["--allowedTools", "Bash"], &[]);
    live.wait_for(Duration::from_secs(30), |f| {
        f["parent_tool_use_id"] == "toolu_task" && f["message"]["content"][0]["type"] == "tool_use"
    })
    .await;
    assert!(
        eventually(Duration::from_secs(20), || !processes_matching(marker)
            .is_empty())
        .await
    );
    live.signal(SIGINT);
    let run = live.finish(Duration::from_secs(20)).await;
    run.assert_end("error_during_execution", true, "aborted_tools", 130);
    assert!(
        processes_matching(marker).is_empty(),
        "the subagent's command survived"
    );
    // Both the child's Bash call and the parent's Task call got their results.
    let results: Vec<&Value> = run.tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    let task_result = results
        .iter()
        .find(|r| r["tool_use_id"] == "toolu_task")
        .unwrap();
    let text = task_result["content"].as_str().unwrap();
    assert!(
        text.contains("interrupted") && text.contains("wait for the user"),
        "{text}"
    );
    assert_eq!(
        run.of("system/task_notification")[0]["end_state"],
        "killed{by: user}"
    );
}

#[tokio::test]
async fn a_plan_mode_parent_cannot_write_through_a_subagent() {
    let h = Harness::from_json(&scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [task("WRITER: write the file", json!({}))]})),
        step("WRITER", json!({"kind": "tool_use", "calls": [{"name": "Write", "input": {"file_path": "sneaky.txt", "content": "x"}}]})),
        step("WRITER", json!({"kind": "text", "text": "I was not allowed."})),
        step("PARENT", json!({"kind": "text", "text": "plan ready"})),
    ]))
    .await;
    let run = h
        .run_stream(
            "PARENT",
            &["--permission-mode", "plan", "--allowedTools", "Write"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(!h.cwd().join("sneaky.txt").exists());
    let child_result = run
        .tool_results()
        .into_iter()
        .find(|r| r["tool_use_id"] != "toolu_task")
        .unwrap()
        .clone();
    assert!(
        child_result["is_error"] == true
            && child_result["content"]
                .as_str()
                .unwrap()
                .contains("plan mode"),
        "{child_result}"
    );
}

#[tokio::test]
async fn a_subagent_resumes_by_id_after_the_session_was_resumed() {
    let h = Harness::from_json(&scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [task("FIRST-ASK: remember the word kiwi", json!({}))]})),
        step("FIRST-ASK", json!({"kind": "text", "text": "I will remember kiwi."})),
        step("PARENT", json!({"kind": "text", "text": "done"})),
    ]))
    .await;
    let run1 = h.run_stream("PARENT", &[], &[]).await;
    run1.assert_end("success", false, "completed", 0);
    let session_id = run1.result()["session_id"].as_str().unwrap().to_owned();
    let agent_id = run1.of("system/task_notification")[0]["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A second model server scripts the resumed session, which names the agent id.
    let second = keel_mock::Scenario::from_json(&scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [{
            "name": "Task", "id": "toolu_task_again",
            "input": {"description": "ask again", "prompt": "SECOND-ASK: which word?", "subagent_type": "general-purpose", "resume": agent_id}}]})),
        step("FIRST-ASK", json!({"kind": "text", "text": "The word was kiwi."})),
        step("PARENT", json!({"kind": "text", "text": "resumed fine"})),
    ]))
    .unwrap();
    let mock2 = keel_mock::MockServer::start(second).await.unwrap();
    let url = mock2.base_url();
    let run2 = h
        .run_stream(
            "again",
            &["--resume", &session_id],
            &[("ANTHROPIC_BASE_URL", &url)],
        )
        .await;
    run2.assert_end("success", false, "completed", 0);
    let child_req = mock2
        .requests()
        .into_iter()
        .find(|r| r.body.to_string().contains("SECOND-ASK"))
        .expect("the resumed agent made a request");
    let body = child_req.body.to_string();
    assert!(
        body.contains("FIRST-ASK: remember the word kiwi")
            && body.contains("I will remember kiwi."),
        "the agent continued with its history: {body}"
    );
    assert!(keel_mock::validate_request(&child_req.body).is_ok());
}

/// The file whose creation lets the background agent of the test below finish.
const BG_AGENT_GATE: &str = "release-background-agent";

#[tokio::test]
async fn background_tasks_outlive_an_interrupt_and_are_reported() {
    let marker = "keel-test-marker-background-sleep";
    let h = Harness::from_json(&scenario(vec![
        step("TURN-ONE", json!({"kind": "tool_use", "calls": [
            task("BG-AGENT: look around", json!({"run_in_background": true})),
            {"name": "Bash", "input": {"command": format!("echo sleeper-started; sleep 1000; : {marker}"), "run_in_background": true}},
            {"name": "Bash", "input": {"command": "echo quick-output", "run_in_background": true}}]})),
        // The background agent is still working when the foreground turn is interrupted: its
        // command waits (bounded) until the test releases it after the interrupt.
        step("BG-AGENT", json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": format!("n=0; until [ -e {BG_AGENT_GATE} ] || [ $n -ge 1200 ]; do sleep 0.1; n=$((n+1)); done; echo gate-opened")}}]})),
        step("BG-AGENT", json!({"kind": "text", "text": "background agent report"})),
        step("TURN-ONE", json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "sleep 1000; : foreground-marker-bg-test"}}]})),
        step("TURN-ONE", json!({"kind": "tool_use", "calls": [
            {"name": "TaskOutput", "input": {"task_id": "shell_1", "block": true, "timeout": 500}, "id": "toolu_wait_sleeper"},
            {"name": "TaskOutput", "input": {"task_id": "shell_2", "block": true, "timeout": 30000}, "id": "toolu_wait_quick"}]})),
        step("TURN-ONE", json!({"kind": "tool_use", "calls": [{"name": "KillShell", "input": {"shell_id": "shell_1"}, "id": "toolu_kill"}]})),
        step("TURN-ONE", json!({"kind": "text", "text": "all checked"})),
    ]))
    .await;
    let mut st = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    st.user("TURN-ONE start the work").await;
    // The foreground command runs; interrupt the turn.
    assert!(
        eventually(Duration::from_secs(30), || !processes_matching(
            "foreground-marker-bg-test"
        )
        .is_empty())
        .await
    );
    assert!(
        eventually(Duration::from_secs(30), || !processes_matching(marker)
            .is_empty())
        .await,
        "the background shell runs"
    );
    st.control("req_1", json!({"subtype": "interrupt"})).await;
    st.result().await;
    assert!(
        processes_matching("foreground-marker-bg-test").is_empty(),
        "the foreground command was stopped"
    );
    assert!(
        !processes_matching(marker).is_empty(),
        "the interrupt did not stop the background shell"
    );
    let agent_done = |f: &Value| f["subtype"] == "task_notification" && f["task_type"] == "agent";
    assert!(
        !st.live.frames.iter().any(agent_done),
        "the agent was still working at the interrupt"
    );
    std::fs::write(h.cwd().join(BG_AGENT_GATE), "").unwrap();
    let done = st.wait(agent_done).await;
    assert_eq!(
        done["status"], "completed",
        "the interrupt did not stop the background agent: {done}"
    );
    // Next turn: the finished background work is announced, TaskOutput and KillShell behave.
    st.user("TURN-ONE continue").await;
    st.result().await;
    let run = st.finish().await;
    let results = run.of("result");
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["terminal_reason"], "aborted_tools");
    assert_eq!(results[1]["subtype"], "success");
    let sleeper = result_for(&h, "toolu_wait_sleeper");
    // TaskOutput waited its 500 ms on the running shell: the request carrying its result came
    // at least that long after the request that asked for it.
    let reqs = h.requests();
    let asked = reqs
        .iter()
        .position(|r| r.body.to_string().contains("toolu_wait_sleeper"))
        .unwrap();
    let waited = reqs[asked].elapsed_ms - reqs[asked - 1].elapsed_ms;
    assert!(waited >= 500.0, "TaskOutput returned after {waited} ms");
    let sleeper_text = sleeper["content"].as_str().unwrap();
    assert!(
        sleeper_text.contains("still running after waiting 500 ms")
            && sleeper_text.contains("sleeper-started"),
        "a running shell's output so far is shown: {sleeper}"
    );
    let quick = result_for(&h, "toolu_wait_quick");
    assert!(
        quick["content"].as_str().unwrap().contains("quick-output")
            && quick["content"].as_str().unwrap().contains("completed"),
        "{quick}"
    );
    let kill = result_for(&h, "toolu_kill");
    assert!(
        kill["content"].as_str().unwrap().contains("killed"),
        "{kill}"
    );
    assert!(
        eventually(Duration::from_secs(10), || processes_matching(marker)
            .is_empty())
        .await,
        "KillShell killed the sleeper"
    );
    // The background agent's completion reached the main conversation at its next turn.
    let second_turn = h
        .requests()
        .into_iter()
        .find(|r| r.body.to_string().contains("TURN-ONE continue"))
        .unwrap();
    let body = second_turn.body.to_string();
    assert!(
        body.contains("task-notification") && body.contains("completed"),
        "{body}"
    );
    let notes = run.of("system/task_notification");
    assert!(
        notes
            .iter()
            .any(|n| n["status"] == "completed" && n["task_type"] == "agent"),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n["task_id"] == "shell_1" && n["status"] == "killed"),
        "{notes:?}"
    );
}

#[tokio::test]
async fn ending_the_session_stops_background_tasks_and_reports_them_killed() {
    let marker = "keel-test-marker-left-running";
    let h = Harness::from_json(&scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": format!("sleep 1000; : {marker}"), "run_in_background": true}}]})),
        step("PARENT", json!({"kind": "text", "text": "started it and left"})),
    ]))
    .await;
    let run = h
        .run_stream("PARENT", &["--allowedTools", "Bash"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(
        processes_matching(marker).is_empty(),
        "the background shell was stopped at exit"
    );
    assert!(
        run.stderr.contains("shell_1") && run.stderr.contains("killed{by: system}"),
        "reported: {}",
        run.stderr
    );
    let session_id = run.result()["session_id"].as_str().unwrap().to_owned();
    let transcript =
        std::fs::read_to_string(session_dir(&h, &session_id).with_extension("jsonl")).unwrap();
    assert!(
        transcript.contains("task_notification") && transcript.contains("killed"),
        "recorded in the transcript"
    );
}

#[tokio::test]
async fn a_budget_spent_inside_a_subagent_stops_the_child_and_then_the_parent() {
    let h = Harness::from_json(&scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [task("SPENDER", json!({}))], "usage": {"input_tokens": 100, "output_tokens": 10}})),
        step("SPENDER", json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo costly"}}], "usage": {"input_tokens": 100000, "output_tokens": 10}})),
        step("PARENT", json!({"kind": "text", "text": "never asked"})),
    ]))
    .await;
    let run = h
        .run_stream(
            "PARENT",
            &["--max-budget-usd", "0.05", "--allowedTools", "Bash"],
            &[],
        )
        .await;
    run.assert_end("error_max_budget_usd", true, "budget_exhausted", 3);
    assert_eq!(
        run.of("system/task_notification")[0]["end_state"],
        "truncated{budget}"
    );
    let task_result = run
        .tool_results()
        .into_iter()
        .find(|r| r["tool_use_id"] == "toolu_task")
        .unwrap()
        .clone();
    assert!(
        task_result["is_error"] == true
            && task_result["content"]
                .as_str()
                .unwrap()
                .contains("truncated{budget}"),
        "{task_result}"
    );
    assert_eq!(h.requests().len(), 2, "no request after the budget ran out");
    assert!(
        run.result()["total_cost_usd"].as_f64().unwrap() >= 0.05,
        "the child's cost counts"
    );
}

#[tokio::test]
async fn a_task_type_denied_in_project_settings_names_the_file() {
    let h = Harness::from_json(&scenario(vec![
        json!({"kind": "tool_use", "calls": [{"name": "Task", "input": {"description": "d", "prompt": "p", "subagent_type": "Plan"}, "id": "toolu_denied"}]}),
        json!({"kind": "text", "text": "ok"}),
    ]))
    .await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        r#"{"permissions": {"deny": ["Agent(Plan)"]}}"#,
    )
    .unwrap();
    let run = h.run_stream("PARENT", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let text = result_for(&h, "toolu_denied")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("Task(Plan)") && text.contains(".claude/settings.json"),
        "{text}"
    );
    // A broken settings file is a clear error that names it.
    std::fs::write(h.cwd().join(".claude/settings.local.json"), "{ nope").unwrap();
    let bad = h.run_stream("PARENT", &[], &[]).await;
    assert_eq!(bad.code, 2);
    assert!(
        bad.stdout.is_empty() && bad.stderr.contains("settings.local.json"),
        "{}",
        bad.stderr
    );
}

#[tokio::test]
async fn an_interrupt_receipt_lists_background_tasks_and_stop_task_stops_one() {
    let marker = "keel-test-marker-stop-task";
    let h = Harness::from_json(&scenario(vec![
        step("HOST", json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": format!("sleep 1000; : {marker}"), "run_in_background": true}}]})),
        step("HOST", json!({"kind": "text", "text": "started"})),
    ]))
    .await;
    let mut st = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    st.user("HOST start it").await;
    st.result().await;
    // "Started" means the task was launched; its shell comes up moments later (the first
    // command of a session also starts keel's launcher).
    assert!(
        eventually(Duration::from_secs(10), || !processes_matching(marker)
            .is_empty())
        .await,
        "the background shell never ran"
    );
    let receipt = st.ask("req_int", json!({"subtype": "interrupt"})).await;
    assert_eq!(receipt["response"]["was_running"], false);
    assert_eq!(
        receipt["response"]["background_running"],
        json!(["shell_1"]),
        "{receipt}"
    );
    assert!(
        !processes_matching(marker).is_empty(),
        "an interrupt leaves background work running"
    );
    let stopped = st
        .ask(
            "req_stop",
            json!({"subtype": "stop_task", "task_id": "shell_1"}),
        )
        .await;
    assert_eq!(
        stopped["response"]["end_state"], "killed{by: user}",
        "{stopped}"
    );
    assert!(
        processes_matching(marker).is_empty(),
        "stop_task killed the command"
    );
    let bad = st
        .ask(
            "req_bad",
            json!({"subtype": "stop_task", "task_id": "nope"}),
        )
        .await;
    assert_eq!(bad["subtype"], "error");
    assert!(bad["error"].as_str().unwrap().contains("shell_1"), "{bad}");
    st.finish().await;
}

#[tokio::test]
async fn a_subagent_may_not_start_subagents_by_default() {
    let h = Harness::from_json(&scenario(vec![
        step("PARENT", json!({"kind": "tool_use", "calls": [task("NESTER: delegate further", json!({}))]})),
        step("NESTER", json!({"kind": "tool_use", "calls": [{"name": "Task", "id": "toolu_nested", "input": {"description": "d", "prompt": "GRANDCHILD", "subagent_type": "general-purpose"}}]})),
        step("NESTER", json!({"kind": "text", "text": "did it myself"})),
        step("PARENT", json!({"kind": "text", "text": "ok"})),
    ]))
    .await;
    let run = h.run_stream("PARENT", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let nested = run
        .tool_results()
        .into_iter()
        .find(|r| r["tool_use_id"] == "toolu_nested")
        .unwrap()
        .clone();
    let text = nested["content"].as_str().unwrap();
    assert!(
        nested["is_error"] == true
            && text.contains("nesting limit")
            && text.contains("KEEL_SUBAGENT_MAX_DEPTH"),
        "{text}"
    );
    assert!(
        !h.requests()
            .iter()
            .any(|r| r.body.to_string().contains("\"GRANDCHILD\"")
                && r.body["messages"][0].to_string().contains("GRANDCHILD")),
        "no grandchild ran"
    );
}

#[tokio::test]
async fn agent_types_sent_in_initialize_can_be_used() {
    let h = Harness::from_json(&scenario(vec![
        step("HOST", json!({"kind": "tool_use", "calls": [{"name": "Task", "id": "toolu_scout", "input": {"description": "d", "prompt": "SCOUT-TASK", "subagent_type": "scout"}}]})),
        step("SCOUT-TASK", json!({"kind": "text", "text": "scouted"})),
        step("HOST", json!({"kind": "text", "text": "ok"})),
    ]))
    .await;
    let mut st = Stream::start(&h, &[], &[]);
    let init = json!({"subtype": "initialize", "hooks": null,
        "agents": {"scout": {"description": "Looks around", "prompt": "You are the scout agent.", "tools": ["Read", "Glob"]}}});
    let resp = st.ask("req_init", init).await;
    let agents = resp["response"]["agents"].to_string();
    assert!(
        agents.contains("scout") && agents.contains("Explore"),
        "{resp}"
    );
    st.user("HOST go").await;
    let run = st.finish().await;
    assert_eq!(run.result()["subtype"], "success");
    let child = h
        .requests()
        .into_iter()
        .find(|r| r.body["messages"][0].to_string().contains("SCOUT-TASK"))
        .expect("the scout ran");
    assert!(child.body["system"]
        .to_string()
        .contains("You are the scout agent."));
    let tools: Vec<String> = child.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tools, ["Read", "Glob"]);
    assert!(run.of("system/init")[0]["agents"]
        .to_string()
        .contains("scout"));
}
