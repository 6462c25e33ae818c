//! Ready for a real model: prompt caching, stop reasons, thinking, images and compaction,
//! checked against keel-mock, which bills the prompt cache the way the API does.

use serde_json::{json, Value};

use super::common::{per_provider, Harness, Provider};

// The replies that end or bend a turn (cut off, refused, too long) mean the same on every
// provider.
per_provider!(
    a_tool_call_cut_off_by_max_tokens_is_never_run_and_the_loop_goes_on,
    replies_cut_off_again_and_again_end_honestly,
    a_text_reply_cut_off_is_continued_and_shown_whole,
    a_refusal_ends_with_its_own_reason_and_exit_code,
    a_prompt_too_long_answer_is_recovered_from_once,
    a_second_prompt_too_long_answer_ends_honestly,
);

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

    // The same from the project's settings file, as users keep it.
    let h = Harness::from_json(
        r#"{"on_exhausted": "loop", "steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo step"}}]},
            {"kind": "text", "text": "Done."}
        ]}"#,
    )
    .await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        r#"{"env": {"DISABLE_PROMPT_CACHING": "1"}}"#,
    )
    .unwrap();
    let run = h.run_stream("work", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    for r in h.requests() {
        assert_eq!(cache_marks(&r.body), 0, "request {}", r.seq);
    }
    // A project's settings cannot swap credentials or the model: only keel's tuning knobs
    // apply (the repository's files are not the user's word).
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        r#"{"env": {"ANTHROPIC_MODEL": "model-from-settings", "ANTHROPIC_AUTH_TOKEN": "stolen"}}"#,
    )
    .unwrap();
    let before = h.requests().len();
    let run = h.run_stream("work", &["--allowedTools", "Bash"], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    for r in &h.requests()[before..] {
        assert_ne!(r.body["model"], "model-from-settings");
        let auth = r.headers.get("authorization").cloned().unwrap_or_default();
        assert!(
            !auth.contains("stolen"),
            "the settings file's token was sent"
        );
    }
    // A settings `env` that is not an object is an error naming the file.
    std::fs::write(h.cwd().join(".claude/settings.json"), r#"{"env": ["x"]}"#).unwrap();
    let bad = h.run(&["-p", "x"], &[]).await;
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("settings.json") && bad.stderr.contains("env"),
        "{}",
        bad.stderr
    );
}

/// The text of the last user message of a request.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .to_string()
}

async fn a_tool_call_cut_off_by_max_tokens_is_never_run_and_the_loop_goes_on(p: Provider) {
    let h = Harness::for_provider(
        p,
        r#"{"steps": [
            {"kind": "tool_use", "stop_reason": "max_tokens",
             "calls": [{"name": "Bash", "input": {"command": "touch ran.txt"}}]},
            {"kind": "text", "text": "Understood, it did not run."}
        ]}"#,
    )
    .await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(!h.cwd().join("ran.txt").exists(), "the cut-off call ran");
    let results = run.tool_results();
    assert_eq!(results.len(), 1);
    let text = results[0]["content"].to_string();
    assert!(text.contains("cut off"), "{text}");
    assert_eq!(results[0]["is_error"], true);
    let user = run.of("user");
    assert_eq!(
        user[0]["tool_result_meta"][0]["non_execution_kind"],
        "cut-off"
    );
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    assert!(last_user_text(reqs[1].messages_view()).contains("was not run"));
    h.validate(&reqs[1]).unwrap();
}

async fn replies_cut_off_again_and_again_end_honestly(p: Provider) {
    let h = Harness::for_provider(
        p,
        r#"{"steps": [
            {"kind": "tool_use", "stop_reason": "max_tokens", "times": 4,
             "calls": [{"name": "Write", "input": {"file_path": "big.txt", "content": "..."}}]},
            {"kind": "text", "text": "never reached"}
        ]}"#,
    )
    .await;
    let run = h
        .run_stream("write it", &["--allowedTools", "Write"], &[])
        .await;
    run.assert_end(
        "error_during_execution",
        true,
        "malformed_tool_use_exhausted",
        1,
    );
    assert!(!h.cwd().join("big.txt").exists());
    assert_eq!(h.requests().len(), 4, "three retries, then the honest end");
    assert!(run.result()["result"]
        .as_str()
        .unwrap()
        .contains("cut off by the output limit"));
}

async fn a_text_reply_cut_off_is_continued_and_shown_whole(p: Provider) {
    let h = Harness::for_provider(
        p,
        r#"{"steps": [
            {"kind": "text", "text": "The first half,", "stop_reason": "max_tokens"},
            {"kind": "text", "text": " and the second half."}
        ]}"#,
    )
    .await;
    let run = h.run_stream("explain", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        run.result()["result"],
        "The first half, and the second half."
    );
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    assert!(last_user_text(reqs[1].messages_view()).contains("cut off by the output token limit"));
}

async fn a_refusal_ends_with_its_own_reason_and_exit_code(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"steps": [{"kind": "text", "text": "I can't help with that.", "stop_reason": "refusal"}]}"#,
    )
    .await;
    let run = h.run_stream("do something bad", &[], &[]).await;
    run.assert_end("error_during_execution", true, "refusal", 5);
    assert!(run.result()["result"]
        .as_str()
        .unwrap()
        .contains("I can't help with that."));
    assert!(run.stderr.contains("declined"), "{}", run.stderr);
}

#[tokio::test]
async fn a_paused_turn_is_resumed_with_the_paused_reply_sent_back() {
    let h = Harness::from_json(
        r#"{"steps": [
            {"kind": "text", "text": "Searching the web...", "stop_reason": "pause_turn"},
            {"kind": "text", "text": "Found it."}
        ]}"#,
    )
    .await;
    let run = h.run_stream("look it up", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.result()["result"], "Found it.");
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    let messages = reqs[1].body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(
        last["role"], "assistant",
        "the paused reply goes back as is"
    );
    assert!(last["content"].to_string().contains("Searching the web"));
}

#[tokio::test]
async fn thinking_blocks_go_back_signed_and_unchanged() {
    let h = Harness::from_json(
        r#"{"steps": [
            {"kind": "text", "text": "First.", "thinking": "Let me weigh this."},
            {"kind": "text", "text": "Second."}
        ]}"#,
    )
    .await;
    let run = h
        .run_stream("think", &["--max-thinking-tokens", "2048"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(h.requests()[0].body["thinking"]["budget_tokens"], 2048);
    // Shown in stream-json as a thinking block, with its signature.
    let shown: Vec<&Value> = run
        .frames
        .iter()
        .filter(|f| f["type"] == "assistant" && f["message"]["content"][0]["type"] == "thinking")
        .collect();
    assert_eq!(shown.len(), 1);
    let block = shown[0]["message"]["content"][0].clone();
    assert!(block["signature"].as_str().unwrap().starts_with("kmsig-"));

    // The next request (here after --resume) sends it back exactly: keel-mock checks the
    // signature against the text, as the API does.
    let id = run.frames[0]["session_id"].as_str().unwrap().to_owned();
    let again = h
        .run_stream(
            "more",
            &["--resume", &id, "--max-thinking-tokens", "2048"],
            &[],
        )
        .await;
    again.assert_end("success", false, "completed", 0);
    let sent = &h.requests()[1].body["messages"][1]["content"][0];
    assert_eq!(sent, &block, "the thinking block went back unchanged");

    // A changed thinking block is refused, like the API refuses it.
    let mut tampered = h.requests()[1].body.clone();
    tampered["messages"][1]["content"][0]["thinking"] = Value::from("Something else.");
    let err = keel_mock::validate_request(&tampered).unwrap_err();
    assert!(err.contains("signature"), "{err}");

    // A bad budget is a usage error naming the flag.
    let bad = h
        .run(&["-p", "x", "--max-thinking-tokens", "12"], &[])
        .await;
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("--max-thinking-tokens"),
        "{}",
        bad.stderr
    );
}

/// A step that answers keel's compaction request with a summary.
/// The 400 each API answers for a conversation past the context window (their own words).
fn too_long_error(p: Provider, times: u32) -> String {
    let (error_type, message) = match p {
        Provider::Anthropic | Provider::Bedrock | Provider::Vertex => (
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
        _ => (
            "context_length_exceeded",
            "This model's maximum context length is 400000 tokens. However, your messages resulted in 410000 tokens.",
        ),
    };
    json!({"kind": "error", "status": 400, "error_type": error_type, "message": message, "times": times})
        .to_string()
}

const SUMMARY_STEP: &str = r#"{"kind": "text", "text": "SUMMARY: the user asked for output; eight commands ran.", "match": {"last_user_contains": "has to be compacted"}}"#;

fn kinds_of(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match f["subtype"].as_str() {
            Some(s) if f["type"] == "system" => {
                format!("system/{s}:{}", f["status"].as_str().unwrap_or(""))
            }
            _ => f["type"].as_str().unwrap_or("").to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn a_session_that_outgrows_its_threshold_compacts_once_and_goes_on() {
    let scenario = format!(
        r#"{{"steps": [
            {SUMMARY_STEP},
            {{"kind": "tool_use", "calls": [{{"name": "Bash", "input": {{"command": "while [ ! -f go ]; do sleep 0.02; done; echo bg-finished > bg.out", "run_in_background": true}}}}]}},
            {{"kind": "tool_use", "calls": [{{"name": "Bash", "input": {{"command": "head -c 3000 /dev/zero | tr '\\0' a"}}}}], "times": 7}},
            {{"kind": "tool_use", "calls": [{{"name": "Bash", "input": {{"command": "touch go; while [ ! -f bg.out ]; do sleep 0.02; done; sleep 1"}}}}]}},
            {{"kind": "text", "text": "Finished."}},
            {{"kind": "text", "text": "Resumed fine."}}
        ]}}"#
    );
    let h = Harness::from_json(&scenario).await;
    // Above twice what keel's system prompt and tool schemas take (a compaction needs room).
    let env = [("KEEL_COMPACT_THRESHOLD_TOKENS", "8500")];
    let run = h
        .run_stream("print a lot", &["--allowedTools", "Bash"], &env)
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.result()["result"], "Finished.");

    // Compacted once, visibly, in order: compacting, the boundary, back to normal.
    let kinds = kinds_of(&run.frames);
    let at = |k: &str| {
        kinds
            .iter()
            .position(|x| x == k)
            .unwrap_or_else(|| panic!("no {k} in {kinds:?}"))
    };
    assert!(at("system/status:compacting") < at("system/compact_boundary:"));
    assert!(at("system/compact_boundary:") < at("system/status:"));
    let boundaries = run.of("system/compact_boundary");
    assert_eq!(boundaries.len(), 1, "{kinds:?}");
    let meta = &boundaries[0]["compact_metadata"];
    assert_eq!(meta["trigger"], "auto");
    assert!(
        meta["pre_tokens"].as_u64().unwrap() > meta["post_tokens"].as_u64().unwrap(),
        "{meta}"
    );
    assert!(meta["duration_ms"].is_u64());

    // The request after the compaction is well-formed and smaller than the one before it, and
    // carries the summary and the still-running background task.
    let reqs = h.requests();
    let compaction = reqs
        .iter()
        .position(|r| last_user_text(&r.body).contains("has to be compacted"))
        .expect("a compaction request");
    let before = reqs[compaction - 1].body.to_string().len();
    let after = &reqs[compaction + 1].body;
    keel_mock::validate_request(after).unwrap();
    assert!(
        after.to_string().len() < before,
        "{} >= {before}",
        after.to_string().len()
    );
    let first = after["messages"][0]["content"].to_string();
    assert!(
        first.contains("SUMMARY: the user asked for output"),
        "{first}"
    );
    assert!(first.contains("Background tasks still running"), "{first}");
    assert!(
        !after.to_string().contains(&"a".repeat(2900)),
        "the old outputs are gone"
    );

    // The background task started before the compaction is still announced after it.
    let last = &reqs.last().unwrap().body;
    assert!(
        last_user_text(last).contains("<task-notification>"),
        "the task's end reached the model: {}",
        last_user_text(last)
    );

    // --resume starts from the compacted conversation.
    let id = run.frames[0]["session_id"].as_str().unwrap().to_owned();
    let again = h.run_stream("and now?", &["--resume", &id], &env).await;
    again.assert_end("success", false, "completed", 0);
    let resumed = &h.requests().last().unwrap().body.clone();
    keel_mock::validate_request(resumed).unwrap();
    let sent = resumed["messages"].to_string();
    assert!(
        sent.contains("SUMMARY: the user asked for output"),
        "{sent}"
    );
    assert!(
        !sent.contains("print a lot"),
        "the compacted prompt came back: {sent}"
    );
}

async fn a_prompt_too_long_answer_is_recovered_from_once(p: Provider) {
    let too_long = too_long_error(p, 1);
    let scenario = format!(
        r#"{{"steps": [
            {SUMMARY_STEP},
            {too_long},
            {{"kind": "text", "text": "Recovered."}}
        ]}}"#
    );
    let h = Harness::for_provider(p, &scenario).await;
    let run = h.run_stream("a long story", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.result()["result"], "Recovered.");
    assert_eq!(run.of("system/compact_boundary").len(), 1);
}

async fn a_second_prompt_too_long_answer_ends_honestly(p: Provider) {
    let too_long_twice = too_long_error(p, 2);
    let scenario = format!(
        r#"{{"steps": [
            {SUMMARY_STEP},
            {too_long_twice}
        ]}}"#
    );
    let h = Harness::for_provider(p, &scenario).await;
    let run = h.run_stream("a long story", &[], &[]).await;
    run.assert_end("error_during_execution", true, "prompt_too_long", 1);
    assert!(run.result()["result"]
        .as_str()
        .unwrap()
        .contains("does not fit the model's context window"));
    assert_eq!(h.requests().len(), 3, "one compaction, one retry, no more");
}

#[tokio::test]
async fn compact_on_demand_and_an_interrupted_compaction_leaves_the_history_as_it_was() {
    let h = Harness::from_json(
        r#"{"steps": [
            {"kind": "text", "text": "SUMMARY: slow", "delay_ms": 30000, "match": {"last_user_contains": "has to be compacted"}},
            {"kind": "text", "text": "First answer."},
            {"kind": "text", "text": "Second answer."}
        ]}"#,
    )
    .await;
    let first = h.run_stream("remember the number 42", &[], &[]).await;
    first.assert_end("success", false, "completed", 0);
    let id = first.frames[0]["session_id"].as_str().unwrap().to_owned();

    // `/compact` (as the SDKs send slash commands), interrupted while the summary is written.
    let mut live = h.live_stream("/compact keep the number", &["--resume", &id], &[]);
    live.wait_for(std::time::Duration::from_secs(30), |f| {
        f["type"] == "system" && f["subtype"] == "status" && f["status"] == "compacting"
    })
    .await;
    // The compaction request is on its way (keel-mock holds it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !h
        .requests()
        .iter()
        .any(|r| last_user_text(&r.body).contains("has to be compacted"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction request"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let asked = h.requests().last().unwrap().body.clone();
    assert!(
        last_user_text(&asked).contains("keep the number"),
        "the instructions go along"
    );
    live.signal(2);
    let stopped = live.finish(std::time::Duration::from_secs(30)).await;
    stopped.assert_end("error_during_execution", true, "aborted_streaming", 130);
    assert!(stopped.of("system/compact_boundary").is_empty());

    // Nothing was lost: the next turn sends the whole conversation.
    let again = h
        .run_stream("what was the number?", &["--resume", &id], &[])
        .await;
    again.assert_end("success", false, "completed", 0);
    let sent = h.requests().last().unwrap().body["messages"].to_string();
    assert!(sent.contains("remember the number 42"), "{sent}");
    assert!(!sent.contains("SUMMARY"), "{sent}");
    assert!(!sent.contains("/compact"), "{sent}");
}

/// A real 1×1 PNG.
const PNG_1X1: &str = "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63600000000200013c2e5dc30000000049454e44ae426082";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test]
async fn an_image_file_is_read_as_an_image_and_one_past_the_limits_is_refused() {
    let h = Harness::from_json(
        r#"{"steps": [
            {"kind": "tool_use", "calls": [{"name": "Read", "input": {"file_path": "dot.png"}}, {"name": "Read", "input": {"file_path": "huge.png"}}]},
            {"kind": "text", "text": "A dot."}
        ]}"#,
    )
    .await;
    std::fs::write(h.cwd().join("dot.png"), unhex(PNG_1X1)).unwrap();
    // A header that says 9000×10 pixels: past the API's 8000-pixel side.
    let mut huge = unhex(PNG_1X1);
    huge[16..20].copy_from_slice(&9000u32.to_be_bytes());
    std::fs::write(h.cwd().join("huge.png"), huge).unwrap();
    let run = h.run_stream("what is in the pictures?", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    keel_mock::validate_request(&reqs[1].body).unwrap();
    let results = reqs[1].body["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    let dot = &results[0]["content"];
    assert_eq!(dot[0]["type"], "image", "{dot}");
    assert_eq!(dot[0]["source"]["media_type"], "image/png");
    assert!(dot[1]["text"].as_str().unwrap().contains("1×1"), "{dot}");
    let refused = &results[1];
    assert_eq!(refused["is_error"], true);
    assert!(
        refused["content"].as_str().unwrap().contains("8000 pixels"),
        "{refused}"
    );
    // The front end's detail describes the image without carrying it.
    // (The two reads run side by side: their results come in either order.)
    let detail = run
        .of("user")
        .iter()
        .map(|f| f["tool_use_result"].to_string())
        .find(|d| d.contains("\"image\""))
        .expect("the image read's detail");
    assert!(
        detail.contains("image/png") && !detail.contains("iVBOR"),
        "{detail}"
    );
}

#[tokio::test]
async fn an_image_in_a_stream_json_prompt_reaches_the_model() {
    use base64_free::encode;
    let h = Harness::from_json(r#"{"steps": [{"kind": "text", "text": "A dot."}]}"#).await;
    let mut s = super::common::Stream::start(&h, &[], &[]);
    s.send(json!({"type": "user", "session_id": "", "parent_tool_use_id": null,
        "message": {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encode(&unhex(PNG_1X1))}},
            {"type": "text", "text": "What is this?"}
        ]}}))
        .await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let body = &h.requests()[0].body;
    keel_mock::validate_request(body).unwrap();
    assert_eq!(body["messages"][0]["content"][0]["type"], "image");
}

/// Base64 without a dependency, for the test only.
mod base64_free {
    pub fn encode(bytes: &[u8]) -> String {
        const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in bytes.chunks(3) {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for i in 0..4 {
                if i <= c.len() {
                    out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
}

#[tokio::test]
async fn a_threshold_below_the_prompt_itself_never_makes_every_request_a_compaction() {
    let scenario = format!(
        r#"{{"steps": [
            {SUMMARY_STEP},
            {{"kind": "tool_use", "calls": [{{"name": "Bash", "input": {{"command": "echo hi"}}}}], "times": 4}},
            {{"kind": "text", "text": "Done."}}
        ]}}"#
    );
    let h = Harness::from_json(&scenario).await;
    // keel's own system prompt and tools are larger than this.
    let run = h
        .run_stream(
            "go",
            &["--allowedTools", "Bash"],
            &[("KEEL_COMPACT_THRESHOLD_TOKENS", "1000")],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(run.of("system/compact_boundary").is_empty());
    assert_eq!(h.requests().len(), 5, "no summary was asked for");
}

#[tokio::test]
async fn a_full_context_window_stop_is_continued_after_compacting() {
    let scenario = format!(
        r#"{{"steps": [
            {SUMMARY_STEP},
            {{"kind": "text", "text": "Part one", "stop_reason": "model_context_window_exceeded"}},
            {{"kind": "text", "text": ", part two."}}
        ]}}"#
    );
    let h = Harness::from_json(&scenario).await;
    let run = h.run_stream("write a long answer", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.result()["result"], "Part one, part two.");
    assert_eq!(
        run.of("system/compact_boundary").len(),
        1,
        "compacted before going on"
    );
    let reqs = h.requests();
    assert_eq!(reqs.len(), 3, "the reply, the summary, the continuation");
    keel_mock::validate_request(&reqs[2].body).unwrap();
}
