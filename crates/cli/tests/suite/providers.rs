//! Choosing a provider, what only some providers do (reasoning carried across turns), and a
//! fallback to another provider's model. The failure model itself runs per provider in
//! failures.rs, cancel.rs and agents.rs. See docs/providers.md.

use serde_json::Value;

use super::common::{Harness, Provider};

fn paths(h: &Harness) -> Vec<String> {
    h.requests().iter().map(|r| r.path.clone()).collect()
}

#[tokio::test]
async fn init_and_result_name_the_provider_and_the_model() {
    for (model, provider, path) in [
        ("openai/gpt-5", "openai", "/v1/responses"),
        ("openai-chat/gpt-4.1", "openai-chat", "/v1/chat/completions"),
        ("claude-sonnet-4-5", "anthropic", "/v1/messages"),
    ] {
        let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"hello"}]}"#).await;
        let origin = h.mock.base_url();
        let run = h
            .run_stream(
                "hi",
                &["--model", model],
                &[
                    ("OPENAI_BASE_URL", &format!("{origin}/v1")),
                    ("OPENAI_API_KEY", "sk-test-keel"),
                ],
            )
            .await;
        run.assert_end("success", false, "completed", 0);
        let init = run.of("system/init")[0];
        assert_eq!(
            (init["model"].as_str(), init["provider"].as_str()),
            (Some(model), Some(provider))
        );
        let r = run.result();
        assert_eq!(
            (r["model"].as_str(), r["provider"].as_str()),
            (Some(model), Some(provider))
        );
        assert_eq!(paths(&h), [path], "{model}");
        // The provider prefix is keel's: the API gets the model's own id.
        let sent = h.requests()[0].body["model"].as_str().unwrap().to_owned();
        assert_eq!(sent, model.rsplit('/').next().unwrap());
        if provider != "anthropic" {
            assert_eq!(init["apiKeySource"], "OPENAI_API_KEY");
        }
    }
}

#[tokio::test]
async fn an_explicit_provider_sends_gateway_model_ids_as_written_and_settings_can_choose_it() {
    let h = Harness::from_json(r#"{"on_exhausted":"loop","steps":[{"kind":"text","text":"ok"}]}"#)
        .await;
    let base = format!("{}/v1", h.mock.base_url());
    let env = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "k")];
    let run = h
        .run_stream(
            "hi",
            &[
                "--provider",
                "openai-chat",
                "--model",
                "anthropic/claude-sonnet-4",
            ],
            &env,
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = &h.requests()[0];
    assert_eq!(
        (r.path.as_str(), r.body["model"].as_str()),
        ("/v1/chat/completions", Some("anthropic/claude-sonnet-4"))
    );
    // The same from the user's settings file, with the model from KEEL_MODEL.
    let user = h.home.path().join(".claude");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("settings.json"), r#"{"provider": "openai"}"#).unwrap();
    let mut env2 = env.to_vec();
    env2.push(("KEEL_MODEL", "gpt-5-mini"));
    let run = h.run_stream("hi", &[], &env2).await;
    run.assert_end("success", false, "completed", 0);
    let r = h.requests().pop().unwrap();
    assert_eq!(
        (r.path.as_str(), r.body["model"].as_str()),
        ("/v1/responses", Some("gpt-5-mini"))
    );
    assert_eq!(run.result()["provider"], "openai");
}

#[tokio::test]
async fn provider_mistakes_are_clear_usage_errors() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 4] = [
        (&["--provider", "gemini"], &[], "gemini"),
        (
            &["--provider", "openai"],
            &[("OPENAI_API_KEY", "k")],
            "needs a model",
        ),
        (&["--model", "openai/gpt-5"], &[], "OPENAI_API_KEY"),
        (
            &["--model", "openai/gpt-5"],
            &[
                ("OPENAI_BASE_URL", "ftp://example"),
                ("OPENAI_API_KEY", "k"),
            ],
            "OPENAI_BASE_URL",
        ),
    ];
    for (args, env, needle) in cases {
        let mut all = vec!["-p", "hi"];
        all.extend_from_slice(args);
        let run = h.run(&all, env).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn responses_reasoning_is_carried_to_the_next_request() {
    let h = Harness::for_provider(
        Provider::OpenAi,
        r#"{"steps":[
            {"kind":"tool_use","thinking":"check the directory first","calls":[{"name":"Bash","input":{"command":"echo listed"}}]},
            {"kind":"text","text":"done"}]}"#,
    )
    .await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].validation_error, None);
    let input = reqs[1].body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().filter_map(|i| i["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    let reasoning = &input[1];
    assert_eq!(
        reasoning["encrypted_content"],
        keel_mock::signature("check the directory first")
    );
    assert!(reasoning.get("id").is_none());
    // The user sees it as thinking.
    assert!(run
        .of("assistant")
        .iter()
        .any(|f| f["message"]["content"][0]["type"] == "thinking"));
}

#[tokio::test]
async fn the_fallback_model_may_be_another_providers() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","thinking":"plan","calls":[{"name":"Bash","input":{"command":"echo one"}}]},
            {"kind":"error","status":529,"times":3},
            {"kind":"text","text":"from anthropic"}]}"#,
    )
    .await;
    let base = format!("{}/v1", h.mock.base_url());
    let run = h
        .run_stream(
            "go",
            &[
                "--model",
                "openai/gpt-5",
                "--fallback-model",
                "claude-sonnet-4-5",
                "--allowedTools",
                "Bash",
            ],
            &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "k")],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        paths(&h),
        [
            "/v1/responses",
            "/v1/responses",
            "/v1/responses",
            "/v1/responses",
            "/v1/messages"
        ]
    );
    let last = h.requests().pop().unwrap();
    assert_eq!(last.validation_error, None);
    let body = last.body.to_string();
    assert!(
        body.contains("echo one") && body.contains("tool_result"),
        "the history went along"
    );
    assert!(
        !body.contains("keel-openai-reasoning"),
        "OpenAI's reasoning is not sent to Anthropic"
    );
    let fb = run.of("system/model_fallback");
    assert_eq!(fb[0]["fallback_model"], "claude-sonnet-4-5");
    let r = run.result();
    assert_eq!(
        (r["provider"].as_str(), r["model"].as_str()),
        (Some("anthropic"), Some("claude-sonnet-4-5"))
    );
    let usage: Value = r["modelUsage"].clone();
    assert!(
        usage.get("gpt-5").is_some() && usage.get("claude-sonnet-4-5").is_some(),
        "{usage}"
    );
}

#[tokio::test]
async fn a_repository_cannot_choose_where_its_readers_code_is_sent() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"ok"}]}"#).await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        r#"{"provider": "openai-chat"}"#,
    )
    .unwrap();
    let base = format!("{}/v1", h.mock.base_url());
    let run = h
        .run_stream(
            "hi",
            &[],
            &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "k")],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        paths(&h),
        ["/v1/messages"],
        "the project's provider was not taken"
    );
    assert!(
        run.stderr.contains("`provider` is ignored"),
        "{}",
        run.stderr
    );
}
