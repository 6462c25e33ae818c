//! The OpenAI adapters against streams in the shapes servers really send (and get wrong):
//! each stream must become the right tool calls, and the next request built from them must
//! pass keel-mock's validator for that API.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures_util::StreamExt;
use keel_model::fuzzing::openai_events;
use keel_model::openai::ids;
use keel_model::{
    ApiErrorKind, ClientConfig, EncodedMessage, ModelRequest, OpenAiApi, OpenAiClient,
    OpenAiOptions, RequestMessage, ToolSpec,
};
use keel_protocol::{ApiMessage, ContentBlock, MessageContent, Role, ToolResultBlock};
use serde_json::{json, Value};

/// A reply, assembled from the Messages API events the adapter made.
#[derive(Debug, Default)]
struct Assembled {
    blocks: Vec<Value>,
    stop_reason: Option<String>,
    usage: Value,
}

impl Assembled {
    fn calls(&self) -> Vec<(String, String, Value)> {
        self.blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| {
                (
                    b["id"].as_str().unwrap().to_owned(),
                    b["name"].as_str().unwrap().to_owned(),
                    b["input"].clone(),
                )
            })
            .collect()
    }

    fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect()
    }
}

async fn run(api: OpenAiApi, body: &str) -> Result<Assembled, keel_model::ApiError> {
    // Split mid-body too, so events cut across reads are exercised.
    let mut stream = openai_events(api, "gpt-test", body.as_bytes(), body.len() / 2);
    let mut a = Assembled::default();
    let mut json_parts: Vec<String> = Vec::new();
    while let Some(ev) = stream.next().await {
        let raw = ev?.raw;
        match raw["type"].as_str().unwrap() {
            "content_block_start" => {
                let i = raw["index"].as_u64().unwrap() as usize;
                assert_eq!(i, a.blocks.len(), "blocks are numbered in order");
                a.blocks.push(raw["content_block"].clone());
                json_parts.push(String::new());
            }
            "content_block_delta" => {
                let i = raw["index"].as_u64().unwrap() as usize;
                let d = &raw["delta"];
                match d["type"].as_str().unwrap() {
                    "text_delta" => {
                        let t = a.blocks[i]["text"].as_str().unwrap().to_owned();
                        a.blocks[i]["text"] = json!(t + d["text"].as_str().unwrap());
                    }
                    "input_json_delta" => {
                        json_parts[i].push_str(d["partial_json"].as_str().unwrap())
                    }
                    "thinking_delta" => a.blocks[i]["thinking"] = d["thinking"].clone(),
                    "signature_delta" => a.blocks[i]["signature"] = d["signature"].clone(),
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                let i = raw["index"].as_u64().unwrap() as usize;
                if a.blocks[i]["type"] == "tool_use" && !json_parts[i].is_empty() {
                    a.blocks[i]["input"] = serde_json::from_str(&json_parts[i]).unwrap();
                }
            }
            "message_delta" => {
                a.stop_reason = raw["delta"]["stop_reason"].as_str().map(str::to_owned);
                a.usage = raw["usage"].clone();
            }
            _ => {}
        }
    }
    Ok(a)
}

fn chat_sse(chunks: &[Value]) -> String {
    let mut s = String::new();
    for c in chunks {
        s.push_str(&format!("data: {c}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    s
}

fn delta(d: Value) -> Value {
    json!({"id": "chatcmpl-1", "model": "gpt-test",
           "choices": [{"index": 0, "delta": d, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage_chunk() -> Value {
    json!({"id": "chatcmpl-1", "choices": [],
           "usage": {"prompt_tokens": 100, "completion_tokens": 7,
                     "prompt_tokens_details": {"cached_tokens": 40}}})
}

fn calls_piece(p: Value) -> Value {
    delta(json!({"tool_calls": [p]}))
}

/// The body an adapter sends for `req` (a client for a server never contacted).
fn body_of(api: OpenAiApi, req: &ModelRequest) -> Value {
    let client = OpenAiClient::new(
        api,
        ClientConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
            ..ClientConfig::default()
        },
        OpenAiOptions::default(),
    )
    .unwrap();
    serde_json::from_slice(&client.body(req, true).unwrap()).unwrap()
}

/// The request after the reply `a`: the history, the reply, and a result for every call
/// (the first one failed) — then the body the adapter would send, checked by keel-mock.
fn follow_up(api: OpenAiApi, a: &Assembled) -> Value {
    let blocks: Vec<ContentBlock> = a
        .blocks
        .iter()
        .map(|b| serde_json::from_value(b.clone()).unwrap())
        .collect();
    let results: Vec<ContentBlock> = a
        .calls()
        .iter()
        .enumerate()
        .map(|(n, (id, _, _))| {
            ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: id.clone(),
                content: keel_protocol::ToolResultContent::Text(format!("result {n}")),
                is_error: Some(n == 0),
                extra: Default::default(),
            })
        })
        .collect();
    let history = [
        ApiMessage {
            role: Role::User,
            content: MessageContent::Text("do it".into()),
        },
        ApiMessage {
            role: Role::Assistant,
            content: MessageContent::Blocks(blocks),
        },
        ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(results),
        },
    ];
    let req = ModelRequest {
        model: "gpt-test".into(),
        max_tokens: 1000,
        system: vec![json!({"type": "text", "text": "be brief"})],
        messages: history
            .iter()
            .map(|m| RequestMessage::Encoded(EncodedMessage::new(m)))
            .collect(),
        tools: Arc::new(
            ["Bash", "Read", "A", "B"]
                .iter()
                .map(|n| ToolSpec {
                    name: (*n).into(),
                    description: "t".into(),
                    input_schema: json!({"type": "object"}),
                    server: None,
                })
                .collect(),
        ),
        stream: true,
        metadata: None,
        thinking: None,
    };
    let body = body_of(api, &req);
    let checked = match api {
        OpenAiApi::Chat => keel_mock::openai::validate_chat(&body),
        OpenAiApi::Responses => keel_mock::openai::validate_responses(&body),
    };
    assert_eq!(checked, Ok(()), "keel-mock refuses {body:#}");
    body
}

#[tokio::test]
async fn chat_arguments_before_the_name_still_make_the_call() {
    let body = chat_sse(&[
        calls_piece(json!({"index": 0, "function": {"arguments": "{\"command\":"}})),
        calls_piece(
            json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "Bash"}}),
        ),
        calls_piece(json!({"index": 0, "function": {"arguments": "\"ls\"}"}})),
        finish("tool_calls"),
        usage_chunk(),
    ]);
    let a = run(OpenAiApi::Chat, &body).await.unwrap();
    assert_eq!(
        a.calls(),
        [("call_1".into(), "Bash".into(), json!({"command": "ls"}))]
    );
    assert_eq!(a.stop_reason.as_deref(), Some("tool_use"));
    // Cached tokens are inside OpenAI's prompt count, beside it in the Messages API's.
    assert_eq!(
        (
            &a.usage["input_tokens"],
            &a.usage["cache_read_input_tokens"],
            &a.usage["output_tokens"]
        ),
        (&json!(60), &json!(40), &json!(7))
    );
    let next = follow_up(OpenAiApi::Chat, &a);
    let tool = &next["messages"][3];
    assert_eq!(tool["role"], "tool");
    assert!(
        tool["content"].as_str().unwrap().contains("failed"),
        "an is_error result says the call failed: {tool}"
    );
}

#[tokio::test]
async fn chat_calls_without_an_index_are_told_apart_by_id() {
    let body = chat_sse(&[
        delta(json!({"content": "reading"})),
        calls_piece(json!({"id": "call_a", "function": {"name": "Read", "arguments": ""}})),
        calls_piece(json!({"function": {"arguments": "{\"file_path\":\"/a\"}"}})),
        calls_piece(
            json!({"id": "call_b", "function": {"name": "Read", "arguments": "{\"file_path\":"}}),
        ),
        calls_piece(json!({"function": {"arguments": "\"/b\"}"}})),
        finish("tool_calls"),
    ]);
    let a = run(OpenAiApi::Chat, &body).await.unwrap();
    assert_eq!(a.text(), "reading");
    assert_eq!(
        a.calls(),
        [
            ("call_a".into(), "Read".into(), json!({"file_path": "/a"})),
            ("call_b".into(), "Read".into(), json!({"file_path": "/b"})),
        ]
    );
    follow_up(OpenAiApi::Chat, &a);
}

#[tokio::test]
async fn chat_calls_that_all_say_index_0_stay_separate() {
    let body = chat_sse(&[
        calls_piece(json!({"index": 0, "id": "c1", "function": {"name": "A", "arguments": "{}"}})),
        calls_piece(
            json!({"index": 0, "id": "c2", "function": {"name": "B", "arguments": "{\"x\":"}}),
        ),
        calls_piece(json!({"index": 0, "function": {"arguments": "1}"}})),
        finish("tool_calls"),
    ]);
    let a = run(OpenAiApi::Chat, &body).await.unwrap();
    assert_eq!(
        a.calls(),
        [
            ("c1".into(), "A".into(), json!({})),
            ("c2".into(), "B".into(), json!({"x": 1})),
        ]
    );
    follow_up(OpenAiApi::Chat, &a);
}

#[tokio::test]
async fn chat_finish_reason_stop_with_calls_is_still_tool_use() {
    let body = chat_sse(&[
        calls_piece(
            json!({"index": 0, "id": "c1", "function": {"name": "Bash", "arguments": "{\"command\":\"true\"}"}}),
        ),
        finish("stop"),
    ]);
    let a = run(OpenAiApi::Chat, &body).await.unwrap();
    assert_eq!(a.calls().len(), 1);
    assert_eq!(a.stop_reason.as_deref(), Some("tool_use"));
    // A refusal is shown, and the reply stops as refused whatever finish_reason said.
    let body = chat_sse(&[
        delta(json!({"refusal": "I can't help with that."})),
        finish("stop"),
    ]);
    let a = run(OpenAiApi::Chat, &body).await.unwrap();
    assert_eq!(
        (a.text().as_str(), a.stop_reason.as_deref()),
        ("I can't help with that.", Some("refusal"))
    );
    let events = [
        json!({"type": "response.created", "response": {"id": "r", "model": "m"}}),
        json!({"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "delta": "No."}),
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "usage": {}}}),
    ];
    let a = run(OpenAiApi::Responses, &responses_sse(&events))
        .await
        .unwrap();
    assert_eq!(
        (a.text().as_str(), a.stop_reason.as_deref()),
        ("No.", Some("refusal"))
    );
    // And a plain reply cut at the cap says so.
    let body = chat_sse(&[delta(json!({"content": "abc"})), finish("length")]);
    let a = run(OpenAiApi::Chat, &body).await.unwrap();
    assert_eq!(a.stop_reason.as_deref(), Some("max_tokens"));
}

#[tokio::test]
async fn ids_the_other_api_rejects_are_mapped_both_ways() {
    let weird = "call:1/with spaces";
    let body = chat_sse(&[
        calls_piece(
            json!({"index": 0, "id": weird, "function": {"name": "Bash", "arguments": "{}"}}),
        ),
        finish("tool_calls"),
    ]);
    let a = run(OpenAiApi::Chat, &body).await.unwrap();
    let keel_id = &a.calls()[0].0;
    assert!(
        keel_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "keel's id fits the Messages API: {keel_id}"
    );
    let next = follow_up(OpenAiApi::Chat, &a);
    assert_eq!(next["messages"][2]["tool_calls"][0]["id"], weird);
    assert_eq!(next["messages"][3]["tool_call_id"], weird);

    // A Messages API id (longer than Chat Completions allows) goes out shortened, the same
    // way in the call and in its result.
    let long = "toolu_01A09q90qw90lq917835lq9abcdefghijklmnop";
    let a = Assembled {
        blocks: vec![json!({"type": "tool_use", "id": long, "name": "Bash", "input": {}})],
        ..Assembled::default()
    };
    let next = follow_up(OpenAiApi::Chat, &a);
    let sent = next["messages"][2]["tool_calls"][0]["id"].as_str().unwrap();
    assert!(sent.len() <= ids::MAX_OPENAI_ID, "{sent}");
    assert_eq!(next["messages"][3]["tool_call_id"], sent);
}

#[tokio::test]
async fn sixteen_parallel_calls_interleaved_are_assembled_in_order() {
    let mut chunks = Vec::new();
    for k in 0..16 {
        chunks.push(calls_piece(json!({"index": k, "id": format!("call_{k}"),
            "function": {"name": "Bash", "arguments": ""}})));
    }
    for part in ["{\"command\":", "\"echo ", "N\"}"] {
        for k in 0..16 {
            let p = part.replace('N', &k.to_string());
            chunks.push(calls_piece(
                json!({"index": k, "function": {"arguments": p}}),
            ));
        }
    }
    chunks.push(finish("tool_calls"));
    let a = run(OpenAiApi::Chat, &chat_sse(&chunks)).await.unwrap();
    let calls = a.calls();
    assert_eq!(calls.len(), 16);
    for (k, (id, _, input)) in calls.iter().enumerate() {
        assert_eq!(id, &format!("call_{k}"));
        assert_eq!(input["command"], format!("echo {k}"));
    }
    follow_up(OpenAiApi::Chat, &a);

    // The same sixteen on the Responses API, arguments interleaved by output index.
    let mut events = vec![
        json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-test"}}),
    ];
    for k in 0..16 {
        events.push(json!({"type": "response.output_item.added", "output_index": k,
            "item": {"id": format!("fc_{k}"), "type": "function_call", "call_id": format!("call_{k}"),
                     "name": "Bash", "arguments": ""}}));
    }
    for part in ["{\"command\":", "\"echo ", "N\"}"] {
        for k in 0..16 {
            events.push(json!({"type": "response.function_call_arguments.delta",
                "item_id": format!("fc_{k}"), "output_index": k, "delta": part.replace('N', &k.to_string())}));
        }
    }
    for k in 0..16 {
        events.push(json!({"type": "response.output_item.done", "output_index": k,
            "item": {"id": format!("fc_{k}"), "type": "function_call", "call_id": format!("call_{k}"),
                     "name": "Bash", "arguments": format!("{{\"command\":\"echo {k}\"}}")}}));
    }
    events.push(
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
        "usage": {"input_tokens": 10, "output_tokens": 5}}}),
    );
    let a = run(OpenAiApi::Responses, &responses_sse(&events))
        .await
        .unwrap();
    assert_eq!(a.calls().len(), 16);
    assert_eq!(a.calls()[15].2, json!({"command": "echo 15"}));
    assert_eq!(a.stop_reason.as_deref(), Some("tool_use"));
    follow_up(OpenAiApi::Responses, &a);
}

fn responses_sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

#[tokio::test]
async fn reasoning_is_carried_to_the_next_request_without_its_id() {
    let summary = "look before leaping";
    let enc = keel_mock::signature(summary);
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-test"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning",
            "summary": [{"type": "summary_text", "text": summary}], "encrypted_content": enc}}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "fc_1",
            "type": "function_call", "call_id": "call_1", "name": "Bash", "arguments": ""}}),
        // The name-less arguments delta is matched to its call by item id.
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{}"}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "fc_1",
            "type": "function_call", "call_id": "call_1", "name": "Bash", "arguments": "{}"}}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
            "usage": {"input_tokens": 10, "output_tokens": 5}}}),
    ];
    let a = run(OpenAiApi::Responses, &responses_sse(&events))
        .await
        .unwrap();
    assert_eq!(a.blocks[0]["type"], "thinking");
    assert_eq!(a.blocks[0]["thinking"], summary);
    let next = follow_up(OpenAiApi::Responses, &a);
    let input = next["input"].as_array().unwrap();
    let r = input.iter().find(|i| i["type"] == "reasoning").unwrap();
    assert_eq!(r["encrypted_content"], enc);
    assert!(
        r.get("id").is_none(),
        "no id: the API did not store the item"
    );
    assert_eq!(next["store"], false);
}

#[tokio::test]
async fn broken_streams_fail_with_the_right_class() {
    // A call that never gets a name.
    let body = chat_sse(&[
        calls_piece(json!({"index": 0, "id": "c1", "function": {"arguments": "{}"}})),
        finish("tool_calls"),
    ]);
    let e = run(OpenAiApi::Chat, &body).await.unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::Protocol, "{e}");
    assert!(e.retryable());
    // A body that ends before the reply did.
    let e = run(
        OpenAiApi::Chat,
        &format!("data: {}\n\n", delta(json!({"content": "par"}))),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::StreamDropped);
    let created = json!({"type": "response.created", "response": {"id": "r", "model": "m"}});
    let e = run(
        OpenAiApi::Responses,
        &responses_sse(std::slice::from_ref(&created)),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::StreamDropped);
    // Errors inside the stream keep the provider's code, classified.
    let e = run(
        OpenAiApi::Chat,
        "data: {\"error\":{\"message\":\"busy\",\"type\":\"server_error\",\"code\":null}}\n\n",
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.kind, e.error_type.as_deref()),
        (ApiErrorKind::StreamError, Some("server_error"))
    );
    assert!(e.retryable());
    let failed = json!({"type": "response.failed", "response": {"id": "r",
        "error": {"code": "invalid_prompt", "message": "no"}}});
    let e = run(OpenAiApi::Responses, &responses_sse(&[created, failed]))
        .await
        .unwrap_err();
    assert_eq!(e.error_type.as_deref(), Some("invalid_prompt"));
    assert!(!e.retryable());
    // A tool call index past the limit is a broken stream, not an allocation.
    let body = chat_sse(&[calls_piece(
        json!({"index": 1_000_000_000u64, "id": "c", "function": {"name": "A"}}),
    )]);
    assert_eq!(
        run(OpenAiApi::Chat, &body).await.unwrap_err().kind,
        ApiErrorKind::Protocol
    );
}

#[test]
fn a_thinking_budget_becomes_a_reasoning_effort() {
    let req = |thinking: Option<Value>| ModelRequest {
        model: "gpt-test".into(),
        max_tokens: 100,
        system: vec![],
        messages: vec![RequestMessage::Owned(ApiMessage {
            role: Role::User,
            content: MessageContent::Text("hi".into()),
        })],
        tools: Default::default(),
        stream: true,
        metadata: None,
        thinking,
    };
    let body = body_of;
    let on = req(Some(json!({"type": "enabled", "budget_tokens": 8000})));
    assert_eq!(
        body(OpenAiApi::Responses, &on)["reasoning"]["effort"],
        "medium"
    );
    assert_eq!(body(OpenAiApi::Chat, &on)["reasoning_effort"], "medium");
    let off = req(None);
    assert!(body(OpenAiApi::Responses, &off).get("reasoning").is_none());
    assert!(body(OpenAiApi::Chat, &off)
        .get("reasoning_effort")
        .is_none());
    assert_eq!(body(OpenAiApi::Chat, &off)["max_completion_tokens"], 100);
    assert_eq!(
        body(OpenAiApi::Chat, &off)["stream_options"]["include_usage"],
        true
    );
}
