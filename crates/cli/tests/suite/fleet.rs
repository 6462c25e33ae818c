//! Fleet-friendly behaviour: stdout as a liveness signal (`KEEL_HEARTBEAT_MS`). See
//! docs/sdk-protocol.md; retries spread for fleets are proved in `keel_core::retry`.

use serde_json::json;

use super::common::{kinds, Harness};

fn long_command() -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "sleep 2"}}]},
        {"kind": "text", "text": "done"}
    ]})
    .to_string()
}

#[tokio::test]
async fn heartbeats_say_what_runs_while_stdout_would_be_silent() {
    let h = Harness::from_json(&long_command()).await;
    let run = h
        .run_stream(
            "wait",
            &["--allowedTools", "Bash"],
            &[("KEEL_HEARTBEAT_MS", "200")],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let order = kinds(&run.frames);
    let call = order.iter().position(|k| k == "assistant").unwrap();
    let answered = order.iter().position(|k| k == "user").unwrap();
    let beats: Vec<usize> = (call..answered)
        .filter(|i| order[*i] == "system/heartbeat")
        .collect();
    assert!(
        beats.len() >= 2,
        "a 2 s command with a 200 ms heartbeat: {order:?}"
    );
    let sid = run.result()["session_id"].clone();
    for i in &beats {
        let b = &run.frames[*i];
        assert_eq!(b["running"], json!(["Bash"]), "{b}");
        assert!(b["silent_ms"].as_u64().unwrap() >= 200, "{b}");
        assert_eq!(b["session_id"], sid);
    }
    // Only during the turn: none after the result.
    let last = order.len() - 1;
    assert_eq!(order[last], "result");
}

#[tokio::test]
async fn no_heartbeat_unless_asked_and_a_bad_interval_is_a_usage_error() {
    let h = Harness::from_json(&long_command()).await;
    let run = h.run_stream("wait", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(!kinds(&run.frames).iter().any(|k| k == "system/heartbeat"));
    for bad in ["5", "soon", "99999999999"] {
        let run = h
            .run_stream("wait", &[], &[("KEEL_HEARTBEAT_MS", bad)])
            .await;
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(run.stderr.contains("KEEL_HEARTBEAT_MS"), "{}", run.stderr);
        assert!(run.stdout.is_empty());
    }
}
