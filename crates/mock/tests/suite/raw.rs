//! `raw` steps send exactly the events they list, bytes as written; error headers go out verbatim.

use std::time::Duration;

use keel_mock::{MockServer, RawEnd, RawEvent, Scenario, Step};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{client, post, request, start, PATIENCE};

async fn serve(scenario: &str) -> MockServer {
    MockServer::start(Scenario::from_json(scenario).expect("valid scenario"))
        .await
        .expect("start")
}

#[tokio::test]
async fn raw_events_reach_the_wire_byte_for_byte() {
    let server = serve(
        r#"{"steps":[{"kind":"raw","events":[
            {"event":"message_start","data":{"type":"message_start","message":{"usage":{"input_tokens":18446744073709551615}}}},
            {"event":"content_block_start","data_text":"{\"type\":\"content_block_start\",\"index\":1e10,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"},
            {"event":"ping","data":{"type":"ping","n":-9223372036854775808,"f":0.5,"z":null}},
            {"event":"broken","data_text":"{not json"},
            {"event":"float","data":1e10}
        ]}]}"#,
    )
    .await;
    let resp = post(&server, &request(true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    assert!(resp.headers().contains_key("request-id"));
    let body = resp.bytes().await.expect("the body ends cleanly");
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":18446744073709551615}}}\n\n",
            "event: content_block_start\n",
            "data: {\"type\":\"content_block_start\",\"index\":1e10,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: ping\n",
            "data: {\"type\":\"ping\",\"n\":-9223372036854775808,\"f\":0.5,\"z\":null}\n\n",
            "event: broken\n",
            "data: {not json\n\n",
            // A float goes through f64: that is what `data_text` is for.
            "event: float\n",
            "data: 10000000000.0\n\n",
        )
    );
    let rec = &server.requests()[0];
    assert_eq!((rec.step, rec.status), (Some(0), 200));
}

#[tokio::test]
async fn raw_status_and_headers_replace_the_defaults() {
    let server = start(vec![Step::raw(vec![RawEvent::json(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}),
    )])
    .raw_status(503)
    .header("Content-Type", "text/plain")
    .header("x-odd", "1e30  or\tso")])
    .await;
    let resp = post(&server, &request(true)).await;
    assert_eq!(resp.status(), 503);
    let types: Vec<_> = resp.headers().get_all("content-type").iter().collect();
    assert_eq!(types, vec!["text/plain"], "replaced, not added");
    assert_eq!(resp.headers()["x-odd"].as_bytes(), b"1e30  or\tso");
    let body = resp.bytes().await.unwrap();
    assert!(body.starts_with(b"event: error\ndata: {\"type\":\"error\""));
}

#[tokio::test]
async fn hang_keeps_the_stream_open_until_the_client_leaves() {
    let server = start(vec![Step::raw(vec![
        RawEvent::json("message_start", json!({"type": "message_start"})),
        RawEvent::text("ping", r#"{"type":"ping"}"#),
    ])
    .raw_end(RawEnd::Hang)
    .times(2)])
    .await;
    let want = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n\
                event: ping\ndata: {\"type\":\"ping\"}\n\n";
    let mut resp = post(&server, &request(true)).await;
    let mut seen = Vec::new();
    while seen.len() < want.len() {
        let chunk = tokio::time::timeout(PATIENCE, resp.chunk())
            .await
            .expect("every event is flushed before the hang")
            .expect("no transport error")
            .expect("the body does not end");
        seen.extend_from_slice(&chunk);
    }
    assert_eq!(std::str::from_utf8(&seen).unwrap(), want);
    // Nothing more comes, not even the end of the body. (A short wait can only miss a bug,
    // never invent one.)
    let more = tokio::time::timeout(Duration::from_millis(300), resp.chunk()).await;
    assert!(more.is_err(), "the hanging body sent something: {more:?}");
    assert_eq!(server.open_connections(), 1);
    drop(resp);
    assert!(
        server.wait_idle(PATIENCE).await,
        "the hanging stream outlived its client"
    );

    // A hanging stream also ends with the server.
    let mut resp = post(&server, &request(true)).await;
    resp.chunk().await.unwrap().expect("the first event");
    server.shutdown();
    let rest = tokio::time::timeout(PATIENCE, async {
        loop {
            match resp.chunk().await {
                Ok(Some(_)) => continue,
                other => return other.map(|_| ()),
            }
        }
    })
    .await
    .expect("the stream ends with the server");
    assert!(
        rest.is_err(),
        "an unfinished body is an error, not a clean end"
    );
}

#[tokio::test]
async fn raw_refuses_a_non_streaming_request() {
    let server = start(vec![Step::raw(vec![RawEvent::json("ping", json!({}))])]).await;
    let resp = post(&server, &request(false)).await;
    assert_eq!(resp.status(), 500);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "api_error");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("`raw` step, which only streams"), "{msg}");
}

#[tokio::test]
async fn error_headers_are_sent_verbatim() {
    let server = serve(
        r#"{"steps":[{"kind":"error","status":429,
            "headers":{"retry-after":"1e30","retry-after-ms":"-5","x-big":18446744073709551615,"x-text":"café"}}]}"#,
    )
    .await;
    let resp = client()
        .post(format!("{}/v1/messages", server.base_url()))
        .json(&request(false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let h = resp.headers();
    assert_eq!(h["retry-after"].as_bytes(), b"1e30");
    assert_eq!(h["retry-after-ms"].as_bytes(), b"-5");
    assert_eq!(h["x-big"].as_bytes(), b"18446744073709551615");
    assert_eq!(h["x-text"].as_bytes(), "café".as_bytes());
}
