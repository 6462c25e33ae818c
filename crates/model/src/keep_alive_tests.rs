//! A reply whose chunked body ends in a packet after its last event must not cost the
//! connection: keel reads the end of the body after handing message_stop on, so the connection
//! goes back to the pool and the next request reuses it. For every streaming wire format that
//! ends with a terminator the consumer does not wait for (the Messages API's message_stop, the
//! Chat Completions API's `[DONE]`, the Responses API's response.completed).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use keel_protocol::{ApiMessage, MessageContent, Role, StreamEvent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::anthropic::AnthropicClient;
use crate::openai::{OpenAiApi, OpenAiClient, OpenAiOptions};
use crate::request::{ModelRequest, RequestMessage};
use crate::{ClientConfig, Model};

const MESSAGES_EVENTS: &[(&str, &str)] = &[
    (
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}"#,
    ),
    (
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
    ),
    (
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    ),
    (
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}"#,
    ),
    ("message_stop", r#"{"type":"message_stop"}"#),
];

const CHAT_EVENTS: &[(&str, &str)] = &[
    (
        "",
        r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}"#,
    ),
    (
        "",
        r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ),
    (
        "",
        r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    ),
    ("", "[DONE]"),
];

const RESPONSES_EVENTS: &[(&str, &str)] = &[
    (
        "response.created",
        r#"{"type":"response.created","response":{"id":"r1","model":"m"}}"#,
    ),
    (
        "response.output_text.delta",
        r#"{"type":"response.output_text.delta","delta":"hi"}"#,
    ),
    (
        "response.completed",
        r#"{"type":"response.completed","response":{"id":"r1","model":"m","status":"completed","usage":{"input_tokens":1,"output_tokens":1}}}"#,
    ),
];

/// The events as an SSE body (an event without a name is sent as `data:` alone).
fn sse(events: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out
}

/// Read one request (headers and a content-length body) from `sock`; false at end of stream.
async fn read_request(sock: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the request body was cut");
                buf.extend_from_slice(&chunk[..n]);
            }
            return true;
        }
        let n = sock.read(&mut chunk).await.unwrap();
        if n == 0 {
            return false;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        max_tokens: 10,
        system: vec![],
        messages: vec![RequestMessage::Owned(ApiMessage {
            role: Role::User,
            content: MessageContent::Text("hi".into()),
        })],
        tools: Arc::new(vec![]),
        stream: true,
        metadata: None,
        thinking: None,
    }
}

/// A raw server that sends `body` as a chunked reply whose terminator comes only once the
/// client has read up to message_stop and let go of the reply; the second request must come
/// over the same connection. `client` is built for the server's URL.
async fn the_connection_is_reused(body_sse: String, client: impl FnOnce(String) -> Box<dyn Model>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
    let (verdict_tx, verdict_rx) = oneshot::channel::<Result<(), String>>();
    let (again_tx, again_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        assert!(read_request(&mut sock).await);
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let body = format!("{:x}\r\n{body_sse}\r\n", body_sse.len());
        sock.write_all(format!("{head}{body}").as_bytes())
            .await
            .unwrap();
        // The end of the chunked body only once the client has had message_stop and let go
        // of the reply: it comes in a packet of its own, as it may from a real server.
        dropped_rx.await.unwrap();
        sock.write_all(b"0\r\n\r\n").await.unwrap();
        // A client that dropped the unfinished body has closed the connection already.
        let mut one = [0u8; 1];
        let verdict = match tokio::time::timeout(Duration::from_secs(2), sock.peek(&mut one)).await
        {
            Ok(Ok(0)) => Err("the client closed the connection".to_owned()),
            Ok(Ok(_)) => Err("the client sent more before being asked to".to_owned()),
            Ok(Err(e)) => Err(format!("the connection broke: {e}")),
            Err(_) => Ok(()),
        };
        let _ = verdict_tx.send(verdict);
        again_rx.await.unwrap();
        // The second request must come over the same connection, not a new one.
        tokio::select! {
            got = read_request(&mut sock) => assert!(got, "the client closed the kept-alive connection"),
            _ = listener.accept() => panic!("the client opened a second connection"),
            _ = tokio::time::sleep(Duration::from_secs(30)) => panic!("no second request within 30 s"),
        }
        let body = format!("{:x}\r\n{body_sse}\r\n0\r\n\r\n", body_sse.len());
        sock.write_all(format!("{head}{body}").as_bytes())
            .await
            .unwrap();
    });

    let client = client(url);
    let req = request();
    let mut events = client.stream(&req).await.unwrap();
    loop {
        let ev = events.next().await.expect("a message_stop").unwrap();
        if matches!(ev.event, StreamEvent::MessageStop(_)) {
            break;
        }
    }
    drop(events);
    dropped_tx.send(()).unwrap();
    verdict_rx.await.unwrap().unwrap();
    again_tx.send(()).unwrap();
    let mut events = client.stream(&req).await.unwrap();
    let mut stopped = false;
    while let Some(ev) = events.next().await {
        if matches!(ev.unwrap().event, StreamEvent::MessageStop(_)) {
            stopped = true;
            break;
        }
    }
    assert!(stopped, "the second reply ended without its message_stop");
}

fn config(url: String) -> ClientConfig {
    ClientConfig {
        base_url: url,
        api_key: Some("k".into()),
        ..ClientConfig::default()
    }
}

#[tokio::test]
async fn the_connection_is_reused_when_the_body_ends_after_message_stop() {
    the_connection_is_reused(sse(MESSAGES_EVENTS), |url| {
        Box::new(AnthropicClient::new(config(url)).unwrap())
    })
    .await;
}

#[tokio::test]
async fn the_connection_is_reused_when_a_chat_completions_body_ends_after_done() {
    the_connection_is_reused(sse(CHAT_EVENTS), |url| {
        Box::new(OpenAiClient::new(OpenAiApi::Chat, config(url), OpenAiOptions::default()).unwrap())
    })
    .await;
}

#[tokio::test]
async fn the_connection_is_reused_when_a_responses_body_ends_after_completed() {
    the_connection_is_reused(sse(RESPONSES_EVENTS), |url| {
        Box::new(
            OpenAiClient::new(OpenAiApi::Responses, config(url), OpenAiOptions::default()).unwrap(),
        )
    })
    .await;
}
