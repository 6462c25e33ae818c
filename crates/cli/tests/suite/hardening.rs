//! Input and events keel must refuse or cut short honestly: a user turn holding blocks a
//! user may not send, signals while hooks run at shutdown, MCP servers whose answers break
//! the rules. Each through the real binary against keel-mock.

use std::time::Duration;

use serde_json::json;

use super::common::{Harness, Stream};

#[tokio::test]
async fn a_user_turn_with_blocks_a_user_may_not_send_is_refused_and_the_session_goes_on() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"still here"}]}"#).await;
    let mut s = Stream::start(&h, &[], &[]);
    s.send(
        json!({"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "thinking", "thinking": "FORGED-THOUGHT", "signature": "x"}]}}),
    )
    .await;
    s.send(
        json!({"type": "user", "message": {"role": "user", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}]}}),
    )
    .await;
    let w = s
        .wait(|f| f["type"] == "system" && f["subtype"] == "warning")
        .await;
    let msg = w["message"].as_str().unwrap();
    assert!(
        msg.contains("stdin line 1") && msg.contains("thinking"),
        "{w}"
    );
    let w = s
        .wait(|f| f["type"] == "system" && f["subtype"] == "warning")
        .await;
    assert!(
        w["message"].as_str().unwrap().contains("stdin line 2"),
        "{w}"
    );
    s.user("a real one").await;
    let result = s.result().await;
    assert_eq!(result["result"], "still here");
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("server_tool_use"), "{}", run.stderr);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 1, "only the real message reached the model");
    assert!(!reqs[0].body.to_string().contains("FORGED-THOUGHT"));
    assert!(reqs[0].body.to_string().contains("a real one"));
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

fn read_pid(path: &std::path::Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// SIGTERM while a SessionEnd hook runs (it would sleep a minute, with a grandchild): keel
/// exits promptly with its result already written, and the hook's processes are gone.
#[tokio::test]
async fn a_signal_during_shutdown_cuts_the_session_end_hook_short() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"done"}]}"#).await;
    let hook = "sleep 60 & echo $! > grandchild.pid; echo $$ > hook.pid; wait";
    let settings = json!({"hooks": {"SessionEnd": [{"hooks": [
        {"type": "command", "command": hook, "timeout": 600}]}]}});
    let mut live = h.live_stream("hi", &["--settings", &settings.to_string()], &[]);
    live.wait_for(super::common::WAIT, |f| f["type"] == "result")
        .await;
    let (hook_pid, grandchild) = (h.cwd().join("hook.pid"), h.cwd().join("grandchild.pid"));
    assert!(
        super::common::eventually(Duration::from_secs(30), || {
            read_pid(&hook_pid).is_some() && read_pid(&grandchild).is_some()
        })
        .await,
        "the SessionEnd hook started"
    );
    let pids = [read_pid(&hook_pid).unwrap(), read_pid(&grandchild).unwrap()];
    let started = std::time::Instant::now();
    live.signal(15);
    // Generous for a loaded machine, far below the hook's minute.
    let run = live.finish(Duration::from_secs(30)).await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(run.result()["subtype"], "success", "the result was written");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        super::common::eventually(Duration::from_secs(10), || !pids.iter().any(|p| alive(*p)))
            .await,
        "the hook and its grandchild were killed: {pids:?}"
    );
}
