//! Shared helpers: a minimal request, an SSE reader, a client.

mod binary;
mod faults;
mod raw;
mod recording;
mod scenario_files;
mod selection;
mod streaming;
mod validation;

use std::time::Duration;

use keel_mock::{MockServer, Scenario, Step};
use serde_json::{json, Value};

/// Generous bound for things that should happen at once; only reached when a test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().expect("client")
}

/// The smallest request the validator accepts.
pub fn request(stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}]
    })
}

/// A request whose only user message says `text`.
pub fn request_saying(text: &str, stream: bool) -> Value {
    let mut r = request(stream);
    r["messages"][0]["content"] = json!(text);
    r
}

pub async fn start(steps: Vec<Step>) -> MockServer {
    MockServer::start(Scenario::new(steps))
        .await
        .expect("start")
}

pub async fn post(server: &MockServer, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}/v1/messages?beta=true", server.base_url()))
        .json(body)
        .send()
        .await
        .expect("send")
}

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub struct Event {
    pub name: String,
    pub data: Value,
}

/// Read an SSE body to its end. `Err` carries the events read before the transport failed.
pub async fn read_sse(mut resp: reqwest::Response) -> Result<Vec<Event>, Vec<Event>> {
    let mut buf: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(_) => {
                parse_into(&mut buf, &mut events);
                return Err(events);
            }
        };
        buf.extend_from_slice(&chunk);
        parse_into(&mut buf, &mut events);
    }
    parse_into(&mut buf, &mut events);
    assert!(
        buf.is_empty(),
        "a partial event was left: {:?}",
        String::from_utf8_lossy(&buf)
    );
    Ok(events)
}

fn parse_into(buf: &mut Vec<u8>, events: &mut Vec<Event>) {
    while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
        let raw: Vec<u8> = buf.drain(..end + 2).collect();
        let text = String::from_utf8(raw).expect("utf-8 event");
        let mut name = String::new();
        let mut data = String::new();
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                name = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
        let data: Value = serde_json::from_str(&data).expect("event data is JSON");
        assert_eq!(
            data["type"],
            name.as_str(),
            "event name and data type agree"
        );
        events.push(Event { name, data });
    }
}

pub fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.name.as_str()).collect()
}
