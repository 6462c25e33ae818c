//! The boundary around a turn: values from the wire that are out of range, and a panic inside
//! the turn loop itself, each end in exactly one honest `result` and a documented exit code —
//! never a crash (exit 101) without one.

use serde_json::{json, Value};

use super::common::{Harness, Run};

/// The events of a reply that is garbled at `content_block_start` (`start` sent verbatim).
fn garbled(start: &str) -> Value {
    json!({"kind": "raw", "events": [
        {"event": "message_start", "data": {"type": "message_start", "message": {
            "id": "msg_garbled", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}},
        {"event": "content_block_start", "data_text": start},
        {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 0}},
        {"event": "message_delta", "data": {"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 2}}},
        {"event": "message_stop", "data": {"type": "message_stop"}}
    ]})
}

fn exactly_one_result(run: &Run) -> &Value {
    let results = run.of("result");
    assert_eq!(results.len(), 1, "frames: {:?}", run.frames);
    assert_ne!(run.code, 101, "keel crashed: {}", run.stderr);
    results[0]
}

#[tokio::test]
async fn a_retry_after_of_1e30_ends_at_once_with_the_honest_api_error() {
    let h = Harness::from_json(
        &json!({"steps": [{"kind": "error", "status": 529, "headers": {"retry-after": "1e30"}}]})
            .to_string(),
    )
    .await;
    let started = std::time::Instant::now();
    let run = h.run_stream("hello", &[], &[]).await;
    let r = exactly_one_result(&run);
    run.assert_end("error_during_execution", true, "api_error", 4);
    let text = r["result"].as_str().unwrap();
    assert!(
        text.contains("retry-after") && text.contains("retry budget"),
        "says why it did not wait: {text}"
    );
    assert!(
        run.of("system/api_retry").is_empty(),
        "no wait was announced"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "keel did not wait for the server's absurd retry-after"
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[tokio::test]
async fn block_indexes_out_of_range_are_retried_like_a_dropped_stream() {
    let huge = r#"{"type":"content_block_start","index":18446744073709551615,"content_block":{"type":"text","text":""}}"#;
    let float =
        r#"{"type":"content_block_start","index":1e10,"content_block":{"type":"text","text":""}}"#;
    let big = r#"{"type":"content_block_start","index":10000000000,"content_block":{"type":"text","text":""}}"#;
    let h = Harness::from_json(
        &json!({"steps": [garbled(huge), garbled(float), garbled(big),
            {"kind": "text", "text": "recovered"}]})
        .to_string(),
    )
    .await;
    let run = h.run_stream("hello", &[], &[]).await;
    let r = exactly_one_result(&run);
    run.assert_end("success", false, "completed", 0);
    assert_eq!(r["result"], "recovered");
    assert_eq!(
        run.of("system/api_retry").len(),
        3,
        "each garbled stream was retried, visibly"
    );
    assert_eq!(h.requests().len(), 4);
}

#[tokio::test]
async fn a_stream_that_stays_garbled_ends_honestly_naming_the_broken_index() {
    let huge = r#"{"type":"content_block_start","index":18446744073709551615,"content_block":{"type":"text","text":""}}"#;
    let h = Harness::from_json(
        &json!({"on_exhausted": "repeat_last", "steps": [garbled(huge)]}).to_string(),
    )
    .await;
    let run = h
        .run_stream("hello", &[], &[("KEEL_MAX_RETRIES", "1")])
        .await;
    let r = exactly_one_result(&run);
    run.assert_end("error_during_execution", true, "api_error", 4);
    let text = r["result"].as_str().unwrap();
    assert!(
        text.contains("content block index 18446744073709551615"),
        "{text}"
    );
}

#[tokio::test]
async fn a_panic_inside_the_turn_loop_ends_in_one_result_and_the_session_resumes() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo hi"}}]},
            {"kind": "text", "text": "after the resume"}
        ]})
        .to_string(),
    )
    .await;
    let run = h
        .run_stream(
            "go",
            &["--allowedTools", "Bash"],
            &[("KEEL_TEST_FAULT", "before_dispatch")],
        )
        .await;
    let r = exactly_one_result(&run);
    run.assert_end("error_during_execution", true, "model_error", 1);
    let text = r["result"].as_str().unwrap();
    assert!(
        text.contains("panic") && text.contains("keel bug"),
        "{text}"
    );
    assert_eq!(
        run.stderr.lines().count(),
        1,
        "one stderr line, not a panic report: {}",
        run.stderr
    );
    // The call whose obligation died with the panic got a result, so the conversation is
    // well-formed: a resume sends a request keel-mock's validator accepts.
    let session = r["session_id"].as_str().unwrap();
    let again = h.run_stream("carry on", &["--resume", session], &[]).await;
    again.assert_end("success", false, "completed", 0);
    let last = h.requests().last().unwrap().body.clone();
    assert!(
        last.to_string().contains("keel failed internally"),
        "the model is told what happened to the call: {last}"
    );
}
