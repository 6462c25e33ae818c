//! A reply whose chunked body ends in a packet after its message_stop must not cost the
//! connection: keel reads the end of the body after handing message_stop on, so the connection
//! goes back to the pool and the next request reuses it.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use keel_protocol::{ApiMessage, MessageContent, Role, StreamEvent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::AnthropicClient;
use crate::request::{ModelRequest, RequestMessage};
use crate::{ClientConfig, Model};

const EVENTS: &[(&str, &str)] = &[
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

#[tokio::test]
async fn the_connection_is_reused_when_the_body_ends_after_message_stop() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
    let (verdict_tx, verdict_rx) = oneshot::channel::<Result<(), String>>();
    let (again_tx, again_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        assert!(read_request(&mut sock).await);
        let mut sse = String::new();
        for (name, data) in EVENTS {
            sse.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let body = format!("{:x}\r\n{sse}\r\n", sse.len());
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
        let body = format!("{:x}\r\n{sse}\r\n0\r\n\r\n", sse.len());
        sock.write_all(format!("{head}{body}").as_bytes())
            .await
            .unwrap();
    });

    let client = AnthropicClient::new(ClientConfig {
        base_url: url,
        api_key: Some("k".into()),
        ..ClientConfig::default()
    })
    .unwrap();
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
    while let Some(ev) = events.next().await {
        if matches!(ev.unwrap().event, StreamEvent::MessageStop(_)) {
            break;
        }
    }
}
