//! Input and events keel must refuse or cut short honestly: a user turn holding blocks a
//! user may not send, signals while hooks run at shutdown, MCP servers whose answers break
//! the rules. Each through the real binary against keel-mock.

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
