//! Every request is recorded, in memory and as JSON lines, before it is answered.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel_mock::{MockConfig, MockServer, RecordedRequest, Scenario, Step};
use pretty_assertions::assert_eq;

use super::{client, post, request, PATIENCE};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn records_in_memory_and_in_the_log_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let mut cfg = MockConfig::new(Scenario::new(vec![Step::text("a"), Step::error(500)]));
    cfg.log_path = Some(log.clone());
    let server = MockServer::start_with(cfg).await.unwrap();
    let before = now_ms();

    let resp = client()
        .post(format!("{}/v1/messages?beta=true", server.base_url()))
        .header("X-Api-Key", "secret-for-test")
        .header("anthropic-version", "2023-06-01")
        .json(&request(true))
        .send()
        .await
        .unwrap();
    // Recorded before the answer: visible as soon as the headers are.
    assert_eq!(server.requests().len(), 1);
    resp.bytes().await.unwrap();
    assert_eq!(post(&server, &request(false)).await.status(), 500);
    let after = now_ms();

    let recs = server.requests();
    assert_eq!(recs.len(), 2);
    let first = &recs[0];
    assert_eq!(first.seq, 0);
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/messages?beta=true");
    assert_eq!(first.headers["x-api-key"], "secret-for-test");
    assert_eq!(first.headers["anthropic-version"], "2023-06-01");
    assert!(first.headers.keys().all(|k| k == &k.to_ascii_lowercase()));
    assert_eq!(first.body, request(true));
    assert!(first.stream);
    assert_eq!((first.step, first.status), (Some(0), 200));
    assert!(before <= first.received_at_ms && first.received_at_ms <= after);
    assert!(first.elapsed_ms >= 0.0);
    let second = &recs[1];
    assert_eq!((second.seq, second.step, second.status), (1, Some(1), 500));
    assert!(!second.stream);
    assert!(second.received_at_ms >= first.received_at_ms);
    assert!(second.elapsed_ms >= first.elapsed_ms);

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<RecordedRequest> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one record"))
        .collect();
    assert_eq!(lines, recs);
}

#[tokio::test]
async fn wait_for_requests_is_event_driven() {
    let server = MockServer::start(Scenario::new(vec![Step::text("x").times(3)]))
        .await
        .unwrap();
    assert!(!server.wait_for_requests(1, Duration::from_millis(20)).await);
    let url = server.base_url();
    let task = tokio::spawn(async move {
        for _ in 0..3 {
            client()
                .post(format!("{url}/v1/messages"))
                .json(&request(false))
                .send()
                .await
                .unwrap();
        }
    });
    assert!(server.wait_for_requests(3, PATIENCE).await);
    task.await.unwrap();
    let seqs: Vec<usize> = server.requests().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2]);
}

#[tokio::test]
async fn an_oversized_request_head_is_refused_and_not_recorded() {
    let server = MockServer::start(Scenario::new(vec![Step::text("x")]))
        .await
        .unwrap();
    let huge = "a".repeat(512 * 1024);
    let r = client()
        .post(format!("{}/v1/messages", server.base_url()))
        .header("x-huge", huge)
        .json(&request(false))
        .send()
        .await;
    // The server may close before the client has finished writing, so the client sees
    // either the refusal or a broken connection; never an answer from a step.
    if let Ok(resp) = r {
        assert_eq!(resp.status(), 431);
    }
    assert!(server.requests().is_empty());
    assert_eq!(post(&server, &request(false)).await.status(), 200);
    assert_eq!(server.requests().len(), 1);
}
