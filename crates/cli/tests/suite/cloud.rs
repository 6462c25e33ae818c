//! The cloud providers (Microsoft Foundry, Google Vertex AI, Amazon Bedrock) chosen by the
//! variables Claude Code reads, against keel-mock's cloud routes: what goes on the wire, and
//! that a missing setting stops keel before any request, naming the variable.

use super::common::Harness;

const TEXT: &str = r#"{"steps":[{"kind":"text","text":"hello from the cloud"}]}"#;

/// Assert keel exited 2 before talking to the model, saying `needle` on stderr.
fn assert_config_error(h: &Harness, run: &super::common::Run, needle: &str) {
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "stderr should name {needle}: {}",
        run.stderr
    );
    assert!(h.mock.requests().is_empty(), "no request may be sent");
}

#[tokio::test]
async fn foundry_sends_the_messages_api_with_its_key() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_FOUNDRY", "1"),
                ("ANTHROPIC_FOUNDRY_BASE_URL", &base),
                ("ANTHROPIC_FOUNDRY_API_KEY", "foundry-key"),
                ("ANTHROPIC_API_KEY", ""),
            ],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let init = run.of("system/init")[0];
    assert_eq!(init["provider"], "foundry");
    assert_eq!(init["apiKeySource"], "ANTHROPIC_FOUNDRY_API_KEY");
    assert_eq!(run.result()["provider"], "foundry");
    let reqs = h.mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].headers["x-api-key"], "foundry-key");
    assert_eq!(reqs[0].body["model"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn foundry_without_resource_or_key_stops_before_any_request() {
    let h = Harness::from_json(TEXT).await;
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_FOUNDRY", "1"),
                ("ANTHROPIC_FOUNDRY_API_KEY", "k"),
            ],
        )
        .await;
    assert_config_error(&h, &run, "ANTHROPIC_FOUNDRY_RESOURCE");
    let run = h
        .run_stream(
            "hi",
            &["--provider", "foundry"],
            &[("ANTHROPIC_FOUNDRY_RESOURCE", "my-resource")],
        )
        .await;
    assert_config_error(&h, &run, "ANTHROPIC_FOUNDRY_API_KEY");
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_FOUNDRY", "1"),
                ("ANTHROPIC_FOUNDRY_RESOURCE", "a/b"),
                ("ANTHROPIC_FOUNDRY_API_KEY", "k"),
            ],
        )
        .await;
    assert_config_error(&h, &run, "ANTHROPIC_FOUNDRY_RESOURCE");
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_FOUNDRY", "1"),
                ("CLAUDE_CODE_USE_VERTEX", "yes"),
            ],
        )
        .await;
    assert_config_error(&h, &run, "CLAUDE_CODE_USE_VERTEX");
}
