//! What building one request body costs, per provider, at a given history length: the
//! Messages API body (serialized from the encoded history), and each OpenAI API's body from a
//! client that has seen the history before (the conversions reused) and from a fresh one (the
//! whole history converted). A measurement, not a test.
//!
//! cargo run --release -p keel-model --example bench_body [-- TURNS...]

// A measurement, not product code: a failed unwrap stops the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use keel_model::{
    ClientConfig, EncodedMessage, ModelRequest, OpenAiApi, OpenAiClient, OpenAiOptions,
    RequestMessage,
};
use keel_protocol::{
    ApiMessage, ContentBlock, MessageContent, Role, ToolResultBlock, ToolResultContent,
    ToolUseBlock,
};
use serde_json::json;

fn history(turns: usize) -> Vec<EncodedMessage> {
    let mut h = vec![EncodedMessage::new(&ApiMessage {
        role: Role::User,
        content: MessageContent::Text("start".into()),
    })];
    for t in 0..turns {
        let id = format!("toolu_{t:024}");
        h.push(EncodedMessage::new(&ApiMessage {
            role: Role::Assistant,
            content: MessageContent::Blocks(vec![ContentBlock::ToolUse(ToolUseBlock {
                id: id.clone(),
                name: "Bash".into(),
                input: json!({"command": format!("ls -la src/module_{t}"), "description": "list"}),
                extra: Default::default(),
            })]),
        }));
        h.push(EncodedMessage::new(&ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: id,
                content: ToolResultContent::Text("x".repeat(400)),
                is_error: Some(false),
                extra: Default::default(),
            })]),
        }));
    }
    h
}

fn request(h: &[EncodedMessage]) -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        max_tokens: 1000,
        system: vec![json!({"type": "text", "text": "s".repeat(8000)})],
        messages: h.iter().cloned().map(RequestMessage::Encoded).collect(),
        tools: Default::default(),
        stream: true,
        metadata: None,
        thinking: None,
    }
}

fn client(api: OpenAiApi) -> OpenAiClient {
    let cfg = ClientConfig {
        base_url: "http://127.0.0.1:9/v1".into(),
        ..ClientConfig::default()
    };
    OpenAiClient::new(api, cfg, OpenAiOptions::default()).expect("client")
}

/// Median µs of `f` over `n` runs.
fn median(n: usize, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[n / 2]
}

fn main() {
    let turns: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let turns = if turns.is_empty() {
        vec![10, 100, 500, 1000]
    } else {
        turns
    };
    println!(
        "{:>6}  {:>10}  {:>12}  {:>12}  {:>12}  {:>12}",
        "turns", "messages", "chat warm", "chat fresh", "resp warm", "resp fresh"
    );
    for n in turns {
        let h = history(n);
        let req = request(&h);
        let mut anthropic = Vec::new();
        let messages = median(31, || {
            anthropic.clear();
            serde_json::to_writer(&mut anthropic, &req).expect("encode");
        });
        let mut row = vec![messages];
        for api in [OpenAiApi::Chat, OpenAiApi::Responses] {
            let warm = client(api);
            warm.body(&req, true).expect("body");
            row.push(median(31, || {
                warm.body(&req, true).expect("body");
            }));
            row.push(median(11, || {
                client(api).body(&req, true).expect("body");
            }));
        }
        println!(
            "{n:>6}  {:>8.0}µs  {:>10.0}µs  {:>10.0}µs  {:>10.0}µs  {:>10.0}µs",
            row[0], row[1], row[2], row[3], row[4]
        );
    }
}
