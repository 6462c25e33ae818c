//! Faults: HTTP errors, errors inside a stream, cut connections, stalls, shutdown.

use std::time::{Duration, Instant};

use keel_mock::{Scenario, Step};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{client, names, post, read_sse, request, start, PATIENCE};

#[tokio::test]
async fn error_step_sends_status_headers_and_body() {
    let server = start(vec![
        Step::error(529).header("retry-after", "2"),
        Step::error_with(429, "rate_limit_error", "slow down").header("retry-after-ms", "1500"),
        Step::text("ok"),
    ])
    .await;
    let resp = post(&server, &request(true)).await;
    assert_eq!(resp.status(), 529);
    assert_eq!(resp.headers()["retry-after"], "2");
    let request_id = resp.headers()["request-id"].to_str().unwrap().to_string();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
               "request_id": request_id})
    );
    let resp = post(&server, &request(false)).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after-ms"], "1500");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["message"], "slow down");
    assert_eq!(post(&server, &request(false)).await.status(), 200);
}

#[tokio::test]
async fn error_type_defaults_from_status() {
    let s = Scenario::from_json(
        r#"{"steps":[{"kind":"error","status":401},{"kind":"error","status":503}]}"#,
    )
    .unwrap();
    let server = keel_mock::MockServer::start(s).await.unwrap();
    for (status, kind) in [(401, "authentication_error"), (503, "api_error")] {
        let resp = post(&server, &request(false)).await;
        assert_eq!(resp.status(), status);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["type"], kind);
    }
}

#[tokio::test]
async fn sse_error_sends_an_error_event_after_message_start() {
    let server = start(vec![
        Step::sse_error("overloaded_error", "Overloaded").times(2)
    ])
    .await;
    let resp = post(&server, &request(true)).await;
    assert_eq!(resp.status(), 200);
    let events = read_sse(resp)
        .await
        .expect("the stream itself ends cleanly");
    assert_eq!(names(&events), vec!["message_start", "error"]);
    assert_eq!(
        events[1].data,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    // A non-streaming request gets the HTTP error that goes with the type.
    assert_eq!(post(&server, &request(false)).await.status(), 529);
}

#[tokio::test]
async fn drop_cuts_the_stream_before_message_stop() {
    let server = start(vec![Step::drop_after(4), Step::drop_after(0)]).await;
    let resp = post(&server, &request(true)).await;
    assert_eq!(resp.status(), 200);
    let seen = read_sse(resp)
        .await
        .expect_err("the client must see a broken stream");
    // The events before the cut are flushed first, so the client gets exactly those.
    assert_eq!(
        names(&seen),
        vec![
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta"
        ]
    );

    // Cut right after the headers: still an error, never a clean end.
    let resp = post(&server, &request(true)).await;
    assert!(read_sse(resp).await.is_err());
    let recs = server.requests();
    assert_eq!(recs[0].status, 200);
    assert_eq!(recs[0].step, Some(0));
}

#[tokio::test]
async fn drop_on_a_non_streaming_request_sends_half_the_body() {
    let server = start(vec![Step::drop_after(4)]).await;
    let resp = post(&server, &request(false)).await;
    assert_eq!(resp.status(), 200);
    let declared: usize = resp.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(declared > 0);
    assert!(
        resp.bytes().await.is_err(),
        "an incomplete body is an error"
    );
}

#[tokio::test]
async fn stall_before_headers_then_reply() {
    let server = start(vec![Step::stall_before_headers(
        150,
        Some(Step::text("late")),
    )])
    .await;
    let t = Instant::now();
    let v: Value = post(&server, &request(false)).await.json().await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(150));
    assert_eq!(v["content"][0]["text"], "late");
}

#[tokio::test]
async fn stall_before_headers_without_reply_closes_the_connection() {
    let server = start(vec![Step::stall_before_headers(50, None)]).await;
    let r = client()
        .post(format!("{}/v1/messages", server.base_url()))
        .json(&request(true))
        .send()
        .await;
    assert!(r.is_err(), "no response at all: {r:?}");
    assert_eq!(server.requests()[0].status, 0);
}

#[tokio::test]
async fn client_leaving_during_a_stall_ends_the_handler() {
    let server = start(vec![
        Step::stall_before_headers(600_000, None),
        Step::stall_after_message_start(600_000, None),
    ])
    .await;
    // Before headers: the client gives up.
    let r = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
        .post(format!("{}/v1/messages", server.base_url()))
        .json(&request(true))
        .send()
        .await;
    assert!(r.is_err());
    assert!(
        server.wait_idle(PATIENCE).await,
        "the stalled handler outlived its client"
    );

    // After message_start: read up to the ping, then hang up.
    let mut resp = post(&server, &request(true)).await;
    let mut seen = String::new();
    while !seen.contains("event: ping") {
        let chunk = tokio::time::timeout(PATIENCE, resp.chunk())
            .await
            .expect("message_start and ping come before the stall")
            .unwrap()
            .expect("stream still open");
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(seen.contains("event: message_start"));
    assert!(!seen.contains("content_block_start"));
    drop(resp);
    assert!(
        server.wait_idle(PATIENCE).await,
        "the stalled stream outlived its client"
    );
}

#[tokio::test]
async fn stall_after_message_start_then_finishes() {
    let server = start(vec![Step::stall_after_message_start(
        150,
        Some(Step::text("after the pause")),
    )])
    .await;
    let t = Instant::now();
    let events = read_sse(post(&server, &request(true)).await).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(150));
    let n = names(&events);
    assert_eq!(&n[..3], &["message_start", "ping", "content_block_start"]);
    assert_eq!(n.last(), Some(&"message_stop"));
    let text: String = events
        .iter()
        .filter_map(|e| e.data["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "after the pause");
}

#[tokio::test]
async fn delay_ms_delays_the_answer() {
    let server = start(vec![Step::text("slow").delay_ms(120)]).await;
    let t = Instant::now();
    assert_eq!(post(&server, &request(false)).await.status(), 200);
    assert!(t.elapsed() >= Duration::from_millis(120));
}

#[tokio::test]
async fn shutdown_ends_stalled_requests_and_stops_listening() {
    let server = start(vec![Step::stall_before_headers(600_000, None)]).await;
    let url = format!("{}/v1/messages", server.base_url());
    let pending = tokio::spawn({
        let url = url.clone();
        async move { client().post(url).json(&request(true)).send().await }
    });
    assert!(server.wait_for_requests(1, PATIENCE).await);
    server.shutdown();
    let r = tokio::time::timeout(PATIENCE, pending)
        .await
        .expect("the stalled request ends with the server")
        .unwrap();
    assert!(r.is_err());
    let again = tokio::time::timeout(PATIENCE, client().post(url).json(&request(true)).send())
        .await
        .expect("no hang after shutdown");
    assert!(again.is_err());
}
