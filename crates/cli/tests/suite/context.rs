//! Ready for a real model: prompt caching, stop reasons, thinking, images and compaction,
//! checked against keel-mock, which bills the prompt cache the way the API does.

use serde_json::{json, Value};

use super::common::Harness;

/// A session of `turns` Bash turns, then a text answer.
fn bash_turns(turns: usize) -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo step"}}], "times": turns},
        {"kind": "text", "text": "Done."}
    ]})
    .to_string()
}

fn usage_of(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "assistant")
        .map(|f| f["message"]["usage"].clone())
        .collect()
}

fn cache_marks(body: &Value) -> usize {
    body.to_string().matches("\"cache_control\"").count()
}

#[tokio::test]
async fn a_50_turn_session_reads_nine_tenths_of_its_input_from_the_cache() {
    let h = Harness::from_json(&bash_turns(50)).await;
    let run = h.run_stream("work", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 51);
    for r in &reqs {
        let marks = cache_marks(&r.body);
        assert!(
            (1..=4).contains(&marks),
            "request {} has {marks} breakpoints",
            r.seq
        );
        keel_mock::validate_request(&r.body).unwrap();
    }
    // keel-mock's bill, request by request: after the first, nearly everything is read.
    let (mut read, mut all) = (0u64, 0u64);
    let mut seen = std::collections::HashSet::new();
    for u in usage_of(&run.frames).iter().skip(1) {
        // Each reply shows as one frame per block; count each reply once.
        if !seen.insert(u.to_string()) {
            continue;
        }
        let r = u["cache_read_input_tokens"].as_u64().unwrap();
        read += r;
        all += r
            + u["input_tokens"].as_u64().unwrap()
            + u["cache_creation_input_tokens"].as_u64().unwrap();
    }
    let fraction = read as f64 / all as f64;
    assert!(
        fraction >= 0.9,
        "only {:.1}% of input tokens after the first turn were cache reads",
        fraction * 100.0
    );
    // The result counts the cache at its own rates.
    let usage = &run.result()["usage"];
    assert!(
        usage["cache_read_input_tokens"].as_u64().unwrap() > 10_000,
        "{usage}"
    );
    assert!(
        usage["cache_creation_input_tokens"].as_u64().unwrap() > 0,
        "{usage}"
    );
    let model_usage = run.result()["modelUsage"].as_object().unwrap().clone();
    let m = model_usage.values().next().unwrap();
    assert!(m["cacheReadInputTokens"].as_u64().unwrap() > 10_000, "{m}");
    assert_eq!(m["contextWindow"], 200_000, "{m}");
}

#[tokio::test]
async fn with_caching_disabled_no_request_carries_a_breakpoint() {
    let h = Harness::from_json(&bash_turns(3)).await;
    let run = h
        .run_stream(
            "work",
            &["--allowedTools", "Bash"],
            &[("DISABLE_PROMPT_CACHING", "1")],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    for r in h.requests() {
        assert_eq!(cache_marks(&r.body), 0, "request {}", r.seq);
    }
    assert_eq!(run.result()["usage"]["cache_read_input_tokens"], 0);
}
