//! Normal replies: SSE event order and content, and non-streaming messages.

use keel_mock::{Call, Step, UsageOverride};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{names, post, read_sse, request, start};

/// The text of all `text_delta`s of block `index`.
fn text_of(events: &[super::Event], index: u64) -> String {
    events
        .iter()
        .filter(|e| e.name == "content_block_delta" && e.data["index"] == index)
        .filter_map(|e| e.data["delta"]["text"].as_str())
        .collect()
}

#[tokio::test]
async fn text_stream_has_the_real_event_order() {
    let server = start(vec![Step::text("Hello there, my good friend!")]).await;
    let resp = post(&server, &request(true)).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert!(resp.headers()["request-id"]
        .to_str()
        .unwrap()
        .starts_with("req_mock_"));
    let events = read_sse(resp).await.expect("clean stream");
    let n = names(&events);
    let deltas = n.iter().filter(|x| **x == "content_block_delta").count();
    assert!(deltas >= 2, "text comes in several deltas: {n:?}");
    let mut want = vec!["message_start", "ping", "content_block_start"];
    want.extend(std::iter::repeat_n("content_block_delta", deltas));
    want.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(n, want);

    let start = &events[0].data["message"];
    assert_eq!(
        start["model"], "claude-test",
        "the request's model is echoed"
    );
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert_eq!(start["usage"]["output_tokens"], 1);
    assert!(start["id"].as_str().unwrap().starts_with("msg_mock_"));
    assert_eq!(
        events[2].data["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(text_of(&events, 0), "Hello there, my good friend!");
    let delta = &events[events.len() - 2].data;
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "end_turn", "stop_sequence": null})
    );
    assert_eq!(delta["usage"]["output_tokens"], 28 / 4 + 1);
}

#[tokio::test]
async fn thinking_comes_before_text_with_a_signature() {
    let server = start(vec![Step::text_with_thinking(
        "Let me think it over.",
        "Answer.",
    )])
    .await;
    let events = read_sse(post(&server, &request(true)).await).await.unwrap();
    let starts: Vec<&Value> = events
        .iter()
        .filter(|e| e.name == "content_block_start")
        .map(|e| &e.data["content_block"])
        .collect();
    assert_eq!(
        starts,
        vec![
            &json!({"type": "thinking", "thinking": "", "signature": ""}),
            &json!({"type": "text", "text": ""})
        ]
    );
    let thinking: String = events
        .iter()
        .filter_map(|e| e.data["delta"]["thinking"].as_str())
        .collect();
    assert_eq!(thinking, "Let me think it over.");
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e.data["index"] == 0 && e.name == "content_block_delta")
        .map(|e| e.data["delta"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.last(), Some(&"signature_delta"));
    assert_eq!(text_of(&events, 1), "Answer.");
}

#[tokio::test]
async fn tool_use_stream_reassembles_the_input() {
    let input = json!({"command": "echo hi && ls -la /tmp", "timeout": 5000});
    let server = start(vec![Step::tool_use_with_text(
        "Running it.",
        vec![
            Call::new("Bash", input.clone()),
            Call::new("Read", json!({"file_path": "/etc/hosts"})).id("toolu_explicit"),
        ],
    )])
    .await;
    let events = read_sse(post(&server, &request(true)).await).await.unwrap();
    let starts: Vec<&Value> = events
        .iter()
        .filter(|e| e.name == "content_block_start")
        .map(|e| &e.data["content_block"])
        .collect();
    assert_eq!(starts[0]["type"], "text");
    assert_eq!(
        starts[1],
        &json!({"type": "tool_use", "id": "toolu_mock_1", "name": "Bash", "input": {}})
    );
    assert_eq!(starts[2]["id"], "toolu_explicit");
    let partial = |index: u64| -> Value {
        let text: String = events
            .iter()
            .filter(|e| e.name == "content_block_delta" && e.data["index"] == index)
            .map(|e| {
                assert_eq!(e.data["delta"]["type"], "input_json_delta");
                e.data["delta"]["partial_json"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        serde_json::from_str(&text).unwrap()
    };
    assert_eq!(partial(1), input);
    assert_eq!(partial(2), json!({"file_path": "/etc/hosts"}));
    let delta = events.iter().find(|e| e.name == "message_delta").unwrap();
    assert_eq!(delta.data["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn tool_ids_are_unique_across_requests() {
    let server = start(vec![Step::tool_use(vec![Call::new(
        "Bash",
        json!({"command": "a"}),
    )])
    .times(2)])
    .await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let v: Value = post(&server, &request(false)).await.json().await.unwrap();
        ids.push(v["content"][0]["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids, vec!["toolu_mock_1", "toolu_mock_2"]);
}

#[tokio::test]
async fn non_streaming_reply_is_one_message() {
    let server = start(vec![Step::text("Plain answer.")
        .stop_reason("max_tokens")
        .usage(UsageOverride {
            input_tokens: Some(1234),
            cache_read_input_tokens: Some(7),
            ..Default::default()
        })])
    .await;
    let resp = post(&server, &request(false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v,
        json!({
            "id": "msg_mock_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": "Plain answer."}],
            "stop_reason": "max_tokens",
            "stop_sequence": null,
            "usage": {
                "input_tokens": 1234,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 7,
                "output_tokens": 13 / 4 + 1
            }
        })
    );
}

#[tokio::test]
async fn default_input_tokens_count_each_block_and_model_can_be_fixed() {
    let scenario =
        keel_mock::Scenario::new(vec![Step::text("x"), Step::text("y")]).model("mock-model-1");
    let server = keel_mock::MockServer::start(scenario).await.unwrap();
    let body = request(false);
    // A token per four bytes of each block's JSON (tools, system, message blocks).
    let blocks: u64 = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match &m["content"] {
            Value::Array(b) => b
                .iter()
                .map(|b| (b.to_string().len() as u64).div_ceil(4))
                .sum(),
            other => (other.to_string().len() as u64).div_ceil(4),
        })
        .sum();
    let v: Value = post(&server, &body).await.json().await.unwrap();
    assert_eq!(v["usage"]["input_tokens"], blocks);
    assert_eq!(v["model"], "mock-model-1");
}

#[tokio::test]
async fn count_tokens_and_unknown_paths() {
    let server = start(vec![Step::text("x")]).await;
    let c = super::client();
    let resp = c
        .post(format!("{}/v1/messages/count_tokens", server.base_url()))
        .json(&request(false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert!(v["input_tokens"].as_u64().unwrap() > 0);

    let resp = c
        .get(format!("{}/api/hello", server.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "not_found_error");

    // Neither consumed the only step.
    let v: Value = post(&server, &request(false)).await.json().await.unwrap();
    assert_eq!(v["content"][0]["text"], "x");
    let recs = server.requests();
    assert_eq!(recs.len(), 3);
    assert_eq!(
        recs.iter().map(|r| r.step).collect::<Vec<_>>(),
        vec![None, None, Some(0)]
    );
}
