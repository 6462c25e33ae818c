//! Failure model II: truthful cancellation, owned process trees. Each test is named in
//! docs/failure-model.md, and runs once per provider (anthropic, openai, openai_chat).

use std::time::{Duration, Instant};

use keel_model::openai::FAILED_CALL_MARK;
use serde_json::Value;

use super::common::{
    eventually, group_members, per_provider, processes_matching, Harness, Live, Provider,
};

per_provider!(
    sigint_during_a_long_command_exits_130_and_kills_the_group,
    background_jobs_and_term_ignoring_commands_die_with_the_interrupt,
    a_grandchild_holding_stdout_cannot_hang_the_tool_and_is_reaped_at_exit,
    a_failing_parallel_bash_call_cancels_its_bash_sibling_but_not_reads,
    interrupt_while_tool_calls_stream_rejects_them_all,
    interrupt_during_a_retry_wait_ends_at_once,
    a_bash_timeout_is_reported_as_a_timeout_and_the_loop_goes_on,
    a_command_that_signals_its_own_group_cannot_take_keel_down,
);

const SIGINT: i32 = 2;

fn bash_step(command: &str) -> String {
    serde_json::json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": command, "timeout": 600000}}]},
        {"kind": "text", "text": "after"}
    ]})
    .to_string()
}

fn is_tool_use(f: &Value) -> bool {
    f["type"] == "assistant" && f["message"]["content"][0]["type"] == "tool_use"
}

/// Start keel on a one-Bash-call scenario, wait until the command's shell is running, and
/// return it with the command's process group (keel starts every command in its own, led by
/// the command's supervisor).
async fn running_command(h: &Harness, marker: &str) -> (Live, i32) {
    let mut live = h.live_stream("run it", &["--allowedTools", "Bash"], &[]);
    live.wait_for(Duration::from_secs(30), is_tool_use).await;
    let mut pid = 0;
    assert!(
        eventually(Duration::from_secs(20), || {
            pid = processes_matching(marker).into_iter().min().unwrap_or(0);
            pid != 0
        })
        .await,
        "the command never started"
    );
    (live, super::common::pgid_of(pid))
}

async fn sigint_during_a_long_command_exits_130_and_kills_the_group(p: Provider) {
    let marker = &format!("keel-test-marker-sigint-{}", p.name());
    let h = Harness::for_provider(p, &bash_step(&format!("sleep 1000; : {marker}"))).await;
    let (live, pgid) = running_command(&h, marker).await;
    assert!(!group_members(pgid).is_empty());
    live.signal(SIGINT);
    let t0 = Instant::now();
    let run = live.finish(Duration::from_secs(20)).await;
    // Only a hang fails this bound (the command would sleep 1000 s); promptness on a loaded
    // machine is not something a test can time.
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "keel took {:?} to exit after SIGINT",
        t0.elapsed()
    );
    run.assert_end("error_during_execution", true, "aborted_tools", 130);
    assert!(
        group_members(pgid).is_empty(),
        "processes of the command's group survived: {:?}",
        group_members(pgid)
    );
    let results = run.tool_results();
    assert_eq!(results.len(), 1, "the running call got its result");
    let text = results[0]["content"].as_str().unwrap();
    assert!(
        text.contains("interrupted")
            && text.contains("may already have changed")
            && text.contains("wait for the user"),
        "{text}"
    );
    assert_eq!(h.requests().len(), 1, "no model call after the interrupt");
}

async fn background_jobs_and_term_ignoring_commands_die_with_the_interrupt(p: Provider) {
    for (i, cmd) in [
        "sleep 1000 & sleep 1000",
        "bash -c 'trap \"\" TERM; sleep 1000'",
    ]
    .iter()
    .enumerate()
    {
        let marker = format!("keel-test-marker-tree-{i}-{}", p.name());
        let h = Harness::for_provider(p, &bash_step(&format!("{cmd}; : {marker}"))).await;
        let (live, pgid) = running_command(&h, &marker).await;
        // Wait for the whole tree (the sleeps) to exist before interrupting.
        assert!(eventually(Duration::from_secs(20), || group_members(pgid).len() >= 2).await);
        live.signal(SIGINT);
        let run = live.finish(Duration::from_secs(20)).await;
        run.assert_end("error_during_execution", true, "aborted_tools", 130);
        assert!(
            group_members(pgid).is_empty(),
            "{cmd}: survivors {:?}",
            group_members(pgid)
        );
    }
}

async fn a_grandchild_holding_stdout_cannot_hang_the_tool_and_is_reaped_at_exit(p: Provider) {
    let marker = &format!("keel-test-marker-grandchild-{}", p.name());
    let h = Harness::for_provider(
        p,
        &bash_step(&format!("(sleep 30; : {marker}) & echo started")),
    )
    .await;
    let t0 = Instant::now();
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t0.elapsed()
    );
    run.assert_end("success", false, "completed", 0);
    assert!(run.tool_results()[0]["content"]
        .as_str()
        .unwrap()
        .contains("started"));
    assert!(
        eventually(Duration::from_secs(20), || processes_matching(marker)
            .is_empty())
        .await,
        "keel left the background process behind"
    );
}

async fn a_failing_parallel_bash_call_cancels_its_bash_sibling_but_not_reads(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"steps":[
            {"kind":"tool_use","calls":[
                {"name":"Bash","input":{"command":"tail -f /dev/null"},"id":"toolu_long"},
                {"name":"Bash","input":{"command":"ls definitely-not-here-keel"},"id":"toolu_fails"},
                {"name":"Read","input":{"file_path":"notes.txt"},"id":"toolu_read"}]},
            {"kind":"text","text":"handled"}]}"#,
    )
    .await;
    std::fs::write(h.cwd().join("notes.txt"), "read me\n").unwrap();
    let run = h.run_stream("go", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    // In the Messages API's shape, whatever API carried it.
    let sent = h.requests()[1].messages_view().clone();
    let result = |id: &str| -> Value {
        sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .find(|b| b["tool_use_id"] == id)
            .unwrap()
    };
    // The OpenAI APIs have no is_error: keel's text says the call failed.
    let failed = |r: &Value| {
        r["is_error"] == true
            || (!p.speaks_messages()
                && r["content"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(FAILED_CALL_MARK)))
    };
    let long = result("toolu_long");
    let text = long["content"].as_str().unwrap();
    assert!(failed(&long), "{long}");
    assert!(
        text.contains("cancelled")
            && text.contains("toolu_fails")
            && text.contains("did not interrupt"),
        "{text}"
    );
    assert!(failed(&result("toolu_fails")));
    let read = result("toolu_read");
    assert!(
        !failed(&read) && read["content"].as_str().unwrap().contains("read me"),
        "{read}"
    );
    let meta: Vec<Value> = run
        .of("user")
        .iter()
        .filter_map(|f| f["tool_result_meta"][0].get("non_execution_kind").cloned())
        .collect();
    assert_eq!(meta, [Value::from("sibling-cancelled")]);
}

async fn interrupt_while_tool_calls_stream_rejects_them_all(p: Provider) {
    // Two complete tool calls stream, then the model goes silent: 12 events of the Messages
    // API, 14 of the Responses API. A Chat Completions call is complete only when the reply
    // is (its arguments may go on until the finish), so there the interrupt comes after 9
    // chunks and no call is kept: nothing ran, and nothing is paired with a result.
    let (after_events, kept) = match p {
        // Bedrock sends each Messages API event in a frame of its own; Vertex the events.
        Provider::Anthropic | Provider::Bedrock | Provider::Vertex => (12, 2),
        Provider::OpenAi => (14, 2),
        Provider::OpenAiChat => (9, 0),
    };
    let h = Harness::for_provider(
        p,
        &r#"{"steps":[{"kind":"stall","phase":"after_message_start","after_events":AFTER,"ms":60000,"then":
            {"kind":"tool_use","calls":[
                {"name":"Bash","input":{"command":"touch first.txt"}},
                {"name":"Bash","input":{"command":"touch second.txt"}}]}}]}"#
            .replace("AFTER", &after_events.to_string()),
    )
    .await;
    let mut live = h.live_stream(
        "go",
        &["--include-partial-messages", "--allowedTools", "Bash"],
        &[("KEEL_STREAM_IDLE_TIMEOUT_MS", "120000")],
    );
    live.wait_for(Duration::from_secs(30), |f| {
        f["type"] == "stream_event"
            && if kept == 2 {
                f["event"]["type"] == "content_block_stop" && f["event"]["index"] == 1
            } else {
                f["event"]["type"] == "message_start"
            }
    })
    .await;
    live.signal(SIGINT);
    let run = live.finish(Duration::from_secs(20)).await;
    run.assert_end("error_during_execution", true, "aborted_streaming", 130);
    assert!(
        !h.cwd().join("first.txt").exists() && !h.cwd().join("second.txt").exists(),
        "nothing streamed before the interrupt ran"
    );
    let calls = run
        .of("assistant")
        .into_iter()
        .filter(|f| is_tool_use(f))
        .count();
    assert_eq!(calls, kept, "the completed blocks are kept");
    let results = run.tool_results();
    assert_eq!(results.len(), kept, "every kept tool_use has its result");
    for r in results {
        let t = r["content"].as_str().unwrap();
        assert!(
            r["is_error"] == true && t.contains("did not run") && t.contains("wait for the user"),
            "{t}"
        );
    }
}

async fn interrupt_during_a_retry_wait_ends_at_once(p: Provider) {
    let h = Harness::for_provider(p, r#"{"steps":[{"kind":"error","status":429,"headers":{"retry-after":"600"}},{"kind":"text","text":"never"}]}"#).await;
    let mut live = h.live_stream("hi", &[], &[("KEEL_RETRY_BUDGET_MS", "3600000")]);
    live.wait_for(Duration::from_secs(30), |f| f["subtype"] == "api_retry")
        .await;
    live.signal(SIGINT);
    let t0 = Instant::now();
    let run = live.finish(Duration::from_secs(20)).await;
    // The retry would wait 600 s: 10 s catches a wait that the interrupt did not end.
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "keel took {:?} to exit after SIGINT in a retry wait",
        t0.elapsed()
    );
    run.assert_end("error_during_execution", true, "aborted_streaming", 130);
    assert_eq!(h.requests().len(), 1);
}

async fn a_bash_timeout_is_reported_as_a_timeout_and_the_loop_goes_on(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo partial-out; sleep 30","timeout":1000}}]},
            {"kind":"text","text":"I will try something faster."}]}"#,
    )
    .await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2, "the loop continued to the next model call");
    let r = run.tool_results()[0];
    let text = r["content"].as_str().unwrap();
    assert!(
        r["is_error"] == true && text.contains("timed out") && text.contains("partial-out"),
        "{text}"
    );
    assert!(
        !text.contains("wait for the user"),
        "a timeout does not tell the model to stop: {text}"
    );
}

async fn a_command_that_signals_its_own_group_cannot_take_keel_down(p: Provider) {
    let h = Harness::for_provider(p, &bash_step("kill -TERM 0; echo not-reached")).await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        h.requests().len(),
        2,
        "keel survived and went on to the next model call"
    );
    let r = run.tool_results()[0];
    assert_eq!(r["is_error"], true, "the command itself was killed: {r}");
}
