//! Failure model I: API errors, retries, limits — one honest result for every run.
//! Each test here is named in docs/failure-model.md, and runs once per provider (anthropic,
//! openai, openai_chat): keel-mock plays the same faults in each API's shape.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{per_provider, Harness, Provider};

per_provider!(
    overloaded_forever_with_one_retry_ends_honestly_with_exit_4,
    server_error_once_then_ok_succeeds,
    dropped_stream_is_retried_and_its_partial_text_is_never_final,
    rate_limit_retry_after_is_honoured,
    permanent_errors_fail_at_once_with_exit_1,
    stall_after_message_start_is_noticed_and_retried,
    a_stall_that_never_ends_ends_the_run_in_bounded_time,
    the_retry_budget_stops_retries_before_the_attempt_cap,
    max_budget_stops_before_running_the_reply_that_crossed_it,
    an_unknown_model_is_priced_at_the_highest_rate_so_the_budget_binds,
    fallback_model_takes_over_after_repeated_overload,
    connection_refused_is_transient_and_ends_with_exit_4,
    after_a_limit_the_resumed_session_sends_a_well_formed_request,
);

fn assistant_texts(run: &super::common::Run) -> Vec<String> {
    run.of("assistant")
        .iter()
        .flat_map(|f| {
            f["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

async fn overloaded_forever_with_one_retry_ends_honestly_with_exit_4(p: Provider) {
    let h = Harness::for_provider(
        p,
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"error","status":529}]}"#,
    )
    .await;
    let t0 = Instant::now();
    let run = h.run_stream("hi", &[], &[("KEEL_MAX_RETRIES", "1")]).await;
    assert!(t0.elapsed() < Duration::from_secs(30), "bounded time");
    run.assert_end("error_during_execution", true, "api_error", 4);
    assert_eq!(h.requests().len(), 2, "one try and one retry");
    let retries = run.of("system/api_retry");
    assert_eq!(retries.len(), 1);
    let r0 = retries[0];
    assert_eq!(
        (
            r0["attempt"].as_u64(),
            r0["max_retries"].as_u64(),
            r0["error_status"].as_u64()
        ),
        (Some(1), Some(1), Some(529))
    );
    assert_eq!(r0["error"], "overloaded");
    assert!(r0["retry_delay_ms"].as_u64().unwrap() >= 500);
    let r = run.result();
    assert_eq!(r["api_error_status"], 529);
    assert_eq!(r["api_error_type"], p.error_type("overloaded_error"));
    let text = r["result"].as_str().unwrap();
    assert!(
        text.contains("529") && text.contains("2 attempts"),
        "{text}"
    );
    assert!(
        run.stderr.contains("529") && run.stderr.lines().count() == 1,
        "one clear stderr line: {}",
        run.stderr
    );
}

async fn server_error_once_then_ok_succeeds(p: Provider) {
    let h = Harness::for_provider(
        p,
        r#"{"steps":[{"kind":"error","status":500},{"kind":"text","text":"recovered"}]}"#,
    )
    .await;
    let run = h.run_stream("hi", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.of("system/api_retry")[0]["error"], "server_error");
    assert_eq!(run.result()["result"], "recovered");
    assert_eq!(h.requests().len(), 2);
}

async fn dropped_stream_is_retried_and_its_partial_text_is_never_final(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"steps":[
            {"kind":"drop","after_events":5,"reply":{"kind":"text","text":"PARTIAL-DRAFT that must never be shown as final"}},
            {"kind":"text","text":"the real answer"}]}"#,
    )
    .await;
    let run = h
        .run_stream("hi", &["--include-partial-messages"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let retry = &run.of("system/api_retry")[0];
    assert_eq!(
        (retry["error_status"].clone(), retry["error"].as_str()),
        (Value::Null, Some("unknown"))
    );
    assert_eq!(assistant_texts(&run), ["the real answer"]);
    assert_eq!(run.result()["result"], "the real answer");
    // The partial text did stream (so the test is meaningful), but only as stream events.
    assert!(
        run.of("stream_event")
            .iter()
            .any(|e| e.to_string().contains("PARTIAL")),
        "the dropped attempt streamed something"
    );
    let second = &h.requests()[1];
    assert!(
        !second.body.to_string().contains("PARTIAL"),
        "the partial reply is not in the history"
    );
}

async fn rate_limit_retry_after_is_honoured(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"steps":[{"kind":"error","status":429,"headers":{"retry-after":"2"}},{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    let run = h.run_stream("hi", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].elapsed_ms - reqs[0].elapsed_ms;
    assert!(gap >= 2000.0, "second request {gap} ms after the first");
    let retry = &run.of("system/api_retry")[0];
    assert_eq!(retry["error"], "rate_limit");
    assert!(retry["retry_delay_ms"].as_u64().unwrap() >= 2000);
}

async fn permanent_errors_fail_at_once_with_exit_1(p: Provider) {
    let key_var = match p {
        Provider::Anthropic => "ANTHROPIC_API_KEY",
        // The clouds' adapters name their own credentials.
        Provider::Bedrock => "AWS_ACCESS_KEY_ID",
        Provider::Vertex => "GOOGLE_APPLICATION_CREDENTIALS",
        Provider::OpenAi | Provider::OpenAiChat => "OPENAI_API_KEY",
    };
    for (status, needle) in [(401, key_var), (400, "400")] {
        let h = Harness::for_provider(p, &format!(r#"{{"on_exhausted":"repeat_last","steps":[{{"kind":"error","status":{status},"message":"nope {status}"}}]}}"#)).await;
        let run = h.run_stream("hi", &[], &[]).await;
        run.assert_end("error_during_execution", true, "api_error", 1);
        assert_eq!(h.requests().len(), 1, "{status}: exactly one request");
        assert!(run.of("system/api_retry").is_empty(), "{status}: no retry");
        let r = run.result();
        assert_eq!(r["api_error_status"], status);
        let text = r["result"].as_str().unwrap();
        assert!(
            text.contains(needle) && text.contains(&format!("nope {status}")),
            "{status}: {text}"
        );
        assert!(text.contains("permanent"), "{text}");
    }
}

async fn stall_after_message_start_is_noticed_and_retried(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"steps":[
            {"kind":"stall","phase":"after_message_start","ms":60000,"then":{"kind":"text","text":"too late"}},
            {"kind":"text","text":"fresh answer"}]}"#,
    )
    .await;
    let t0 = Instant::now();
    let run = h
        .run_stream("hi", &[], &[("KEEL_STREAM_IDLE_TIMEOUT_MS", "1000")])
        .await;
    assert!(t0.elapsed() < Duration::from_secs(30));
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.result()["result"], "fresh answer");
    assert_eq!(run.of("system/api_retry").len(), 1);
}

async fn a_stall_that_never_ends_ends_the_run_in_bounded_time(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"stall","phase":"after_message_start","ms":600000}]}"#,
    )
    .await;
    let t0 = Instant::now();
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("KEEL_STREAM_IDLE_TIMEOUT_MS", "1000"),
                ("KEEL_MAX_RETRIES", "1"),
                ("KEEL_RETRY_BUDGET_MS", "3000"),
            ],
        )
        .await;
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "ended after {:?}",
        t0.elapsed()
    );
    run.assert_end("error_during_execution", true, "api_error", 4);
    let reqs = h.requests();
    assert_eq!(
        reqs.len(),
        3,
        "two streaming attempts and one last non-streaming one"
    );
    assert_eq!(
        (reqs[0].stream, reqs[1].stream, reqs[2].stream),
        (true, true, false)
    );
    let text = run.result()["result"].as_str().unwrap();
    assert!(text.contains("non-streaming"), "{text}");
}

async fn the_retry_budget_stops_retries_before_the_attempt_cap(p: Provider) {
    let h = Harness::for_provider(
        p,
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"error","status":503}]}"#,
    )
    .await;
    let run = h
        .run_stream(
            "hi",
            &[],
            &[("KEEL_MAX_RETRIES", "10"), ("KEEL_RETRY_BUDGET_MS", "1200")],
        )
        .await;
    run.assert_end("error_during_execution", true, "api_error", 4);
    let n = h.requests().len();
    assert!(
        (2..=3).contains(&n),
        "the 1.2 s budget allows only the first short waits, got {n} requests"
    );
    let text = run.result()["result"].as_str().unwrap();
    assert!(text.contains("retry budget"), "{text}");
}

async fn max_budget_stops_before_running_the_reply_that_crossed_it(p: Provider) {
    let h = Harness::for_provider(p,
        r#"{"on_exhausted":"repeat_last","steps":[
            {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"touch must_not_exist.txt"}}],"usage":{"input_tokens":100000,"output_tokens":10}}]}"#,
    )
    .await;
    let run = h
        .run_stream(
            "spend",
            &["--max-budget-usd", "0.05", "--allowedTools", "Bash"],
            &[],
        )
        .await;
    run.assert_end("error_max_budget_usd", true, "budget_exhausted", 3);
    let r = run.result();
    assert_eq!(r["errors"][0], "Reached maximum budget ($0.05)");
    assert!(r["total_cost_usd"].as_f64().unwrap() >= 0.05);
    assert!(r["modelUsage"].as_object().unwrap().len() == 1);
    assert!(
        !h.cwd().join("must_not_exist.txt").exists(),
        "the reply that crossed the budget was not executed"
    );
    let results = run.tool_results();
    assert_eq!(
        results.len(),
        1,
        "its tool_use got a synthetic result so history stays paired"
    );
    assert!(results[0]["content"].as_str().unwrap().contains("budget"));
    assert_eq!(h.requests().len(), 1);
}

async fn an_unknown_model_is_priced_at_the_highest_rate_so_the_budget_binds(p: Provider) {
    let h = Harness::for_provider(p, r#"{"steps":[{"kind":"text","text":"hi","usage":{"input_tokens":1000,"output_tokens":1000}}]}"#).await;
    let run = h
        .run_stream("hi", &["--model", "brand-new-model-x"], &[])
        .await;
    let r = run.result();
    assert!(r["total_cost_usd"].as_f64().unwrap() >= (1000.0 * 15.0 + 1000.0 * 75.0) / 1e6 - 1e-9);
    assert_eq!(r["unpriced_models"][0], "brand-new-model-x");
}

async fn fallback_model_takes_over_after_repeated_overload(p: Provider) {
    let h = Harness::for_provider(p, r#"{"steps":[{"kind":"error","status":529,"times":3},{"kind":"text","text":"from the fallback"}]}"#).await;
    let run = h
        .run_stream(
            "hi",
            &[
                "--model",
                "claude-opus-4-5",
                "--fallback-model",
                "claude-sonnet-4-5",
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let models: Vec<String> = h
        .requests()
        .iter()
        .map(|r| {
            // The clouds name the model in the URL; the recorded view carries it.
            let m = r.body["model"]
                .as_str()
                .or(r.messages_view()["model"].as_str());
            m.unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        models,
        [
            "claude-opus-4-5",
            "claude-opus-4-5",
            "claude-opus-4-5",
            "claude-sonnet-4-5"
        ]
    );
    let fb = run.of("system/model_fallback");
    assert_eq!(fb.len(), 1);
    assert_eq!(
        (
            fb[0]["original_model"].as_str(),
            fb[0]["fallback_model"].as_str(),
            fb[0]["trigger"].as_str()
        ),
        (
            Some("claude-opus-4-5"),
            Some("claude-sonnet-4-5"),
            Some("overloaded")
        )
    );
    assert!(run.result()["modelUsage"]
        .get("claude-sonnet-4-5")
        .is_some());
}

async fn connection_refused_is_transient_and_ends_with_exit_4(p: Provider) {
    let h = Harness::for_provider(p, r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                (p.base_url_var(), &p.base_url(&url)),
                ("KEEL_MAX_RETRIES", "1"),
            ],
        )
        .await;
    run.assert_end("error_during_execution", true, "api_error", 4);
    assert_eq!(run.of("system/api_retry").len(), 1);
    assert_eq!(run.result()["api_error_status"], Value::Null);
}

async fn after_a_limit_the_resumed_session_sends_a_well_formed_request(p: Provider) {
    for limit in [["--max-turns", "1"], ["--max-budget-usd", "0.05"]] {
        let h = Harness::for_provider(p,
            r#"{"steps":[
                {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo one"}}],"usage":{"input_tokens":100000,"output_tokens":10}},
                {"kind":"text","text":"continued","match":{"last_user_contains":"go on"}}]}"#,
        )
        .await;
        let mut args = vec!["--allowedTools", "Bash"];
        args.extend_from_slice(&limit);
        let run = h.run_stream("start", &args, &[]).await;
        assert_eq!(run.code, 3, "{limit:?}: {}", run.stderr);
        let id = run.result()["session_id"].as_str().unwrap().to_owned();
        let resumed = h.run_stream("go on", &["--resume", &id], &[]).await;
        resumed.assert_end("success", false, "completed", 0);
        let last = h.requests().pop().unwrap();
        assert_eq!(last.validation_error, None, "{limit:?}");
        h.validate(&last).unwrap();
        // In the Messages API's shape, whatever API carried it.
        let body = last.messages_view().to_string();
        assert!(
            body.contains("tool_result") && body.contains("start") && body.contains("go on"),
            "{limit:?}: the whole conversation was sent"
        );
    }
}
