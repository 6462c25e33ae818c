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
            // No `az` to fall back on (a signed-in Azure CLI would be a credential).
            &[
                ("ANTHROPIC_FOUNDRY_RESOURCE", "my-resource"),
                ("PATH", "/nonexistent-keel-test-path"),
            ],
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

/// The variables of a Vertex run against `h`'s mock without Google credentials.
fn vertex_env(h: &Harness) -> Vec<(&'static str, String)> {
    vec![
        ("CLAUDE_CODE_USE_VERTEX", "1".into()),
        ("ANTHROPIC_VERTEX_PROJECT_ID", "my-project".into()),
        (
            "ANTHROPIC_VERTEX_BASE_URL",
            format!("{}/v1", h.mock.base_url()),
        ),
        ("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1".into()),
        ("ANTHROPIC_API_KEY", String::new()),
    ]
}

fn pairs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
async fn vertex_posts_to_the_model_url_of_project_and_region() {
    let h = Harness::from_json(TEXT).await;
    let env = vertex_env(&h);
    let run = h.run_stream("hi", &[], &pairs(&env)).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.of("system/init")[0]["provider"], "vertex");
    assert_eq!(
        run.of("system/init")[0]["model"],
        "claude-sonnet-4-5@20250929"
    );
    assert_eq!(run.result()["provider"], "vertex");
    assert!(run.stdout.contains("hello from the cloud"));
    let r = &h.mock.requests()[0];
    assert_eq!(
        r.path,
        "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    );
    assert_eq!(r.dialect, "vertex");
    assert_eq!(r.validation_error, None);
    assert!(
        !r.headers.contains_key("authorization"),
        "skip-auth sends none"
    );
    // A region and a model of the user's own go where they say.
    let mut env = vertex_env(&h);
    env.push(("CLOUD_ML_REGION", "europe-west1".into()));
    env.push(("ANTHROPIC_MODEL", "claude-opus-4-5@20251101".into()));
    let h2 = Harness::from_json(TEXT).await;
    let env: Vec<_> = env
        .into_iter()
        .map(|(k, v)| match k {
            "ANTHROPIC_VERTEX_BASE_URL" => (k, format!("{}/v1", h2.mock.base_url())),
            _ => (k, v),
        })
        .collect();
    let run = h2.run_stream("hi", &[], &pairs(&env)).await;
    run.assert_end("success", false, "completed", 0);
    assert!(h2.mock.requests()[0]
        .path
        .ends_with("/locations/europe-west1/publishers/anthropic/models/claude-opus-4-5@20251101:streamRawPredict"));
}

#[tokio::test]
async fn vertex_without_project_or_credentials_stops_before_any_request() {
    let h = Harness::from_json(TEXT).await;
    let base = format!("{}/v1", h.mock.base_url());
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_VERTEX", "1"),
                ("ANTHROPIC_VERTEX_BASE_URL", &base),
                ("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1"),
            ],
        )
        .await;
    assert_config_error(&h, &run, "ANTHROPIC_VERTEX_PROJECT_ID");
    // No credentials anywhere (HOME is a fresh directory).
    let run = h
        .run_stream(
            "hi",
            &["--provider", "vertex"],
            &[
                ("ANTHROPIC_VERTEX_PROJECT_ID", "p"),
                ("ANTHROPIC_VERTEX_BASE_URL", &base),
            ],
        )
        .await;
    assert_config_error(&h, &run, "GOOGLE_APPLICATION_CREDENTIALS");
    let missing = h.cwd().join("no-such-key.json");
    let run = h
        .run_stream(
            "hi",
            &["--provider", "vertex"],
            &[
                ("ANTHROPIC_VERTEX_PROJECT_ID", "p"),
                ("GOOGLE_APPLICATION_CREDENTIALS", missing.to_str().unwrap()),
            ],
        )
        .await;
    assert_config_error(&h, &run, "GOOGLE_APPLICATION_CREDENTIALS");
    let run = h
        .run_stream(
            "hi",
            &["--provider", "vertex"],
            &[
                ("ANTHROPIC_VERTEX_PROJECT_ID", "p"),
                ("CLOUD_ML_REGION", "us east"),
                ("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1"),
            ],
        )
        .await;
    assert_config_error(&h, &run, "region");
}

#[tokio::test]
async fn bedrock_signs_with_the_environment_credentials_and_streams_event_frames() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_BEDROCK", "1"),
                ("ANTHROPIC_BEDROCK_BASE_URL", &base),
                ("AWS_REGION", "eu-west-1"),
                ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
                ("AWS_SESSION_TOKEN", "session"),
            ],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(run.stdout.contains("hello from the cloud"));
    let init = run.of("system/init")[0];
    assert_eq!(init["provider"], "bedrock");
    assert_eq!(
        init["model"],
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    );
    assert_eq!(run.result()["provider"], "bedrock");
    // Priced as the Claude model it names, not at the unknown-model rate.
    assert!(run.result()["total_cost_usd"].as_f64().unwrap() > 0.0);
    let r = &h.mock.requests()[0];
    assert_eq!(r.validation_error, None);
    assert_eq!(
        r.path,
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream"
    );
    let auth = &r.headers["authorization"];
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
            && auth.contains("/eu-west-1/bedrock/aws4_request")
            && auth.contains("x-amz-security-token"),
        "{auth}"
    );
}

#[tokio::test]
async fn bedrock_api_keys_and_profiles_and_no_credentials() {
    let h = Harness::from_json(r#"{"on_exhausted":"loop","steps":[{"kind":"text","text":"ok"}]}"#)
        .await;
    let base = h.mock.base_url();
    // A Bedrock API key wins over everything else.
    let run = h
        .run_stream(
            "hi",
            &[
                "--provider",
                "bedrock",
                "--model",
                "anthropic.claude-haiku-4-5-20251001-v1:0",
            ],
            &[
                ("ANTHROPIC_BEDROCK_BASE_URL", &base),
                ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-key"),
                ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
            ],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        run.of("system/init")[0]["apiKeySource"],
        "AWS_BEARER_TOKEN_BEDROCK"
    );
    assert_eq!(
        h.mock.requests()[0].headers["authorization"],
        "Bearer bedrock-key"
    );
    // A profile of the shared credentials file.
    let aws = h.home.path().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        "[work]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n",
    )
    .unwrap();
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_BEDROCK", "1"),
                ("ANTHROPIC_BEDROCK_BASE_URL", &base),
                ("AWS_PROFILE", "work"),
            ],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(h.mock.requests()[1].headers["authorization"].contains("Credential=AKIDPROFILE/"));
    assert!(h.mock.requests()[1].path.contains("/model/us.anthropic."));
    // No credentials at all: nothing is sent.
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_BEDROCK", "1"),
                ("ANTHROPIC_BEDROCK_BASE_URL", &base),
            ],
        )
        .await;
    assert_config_error(&h, &run, "AWS credentials could not be loaded");
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_BEDROCK", "1"),
                ("AWS_REGION", "us east 1"),
                ("CLAUDE_CODE_SKIP_BEDROCK_AUTH", "1"),
            ],
        )
        .await;
    assert_config_error(&h, &run, "AWS_REGION");
    let run = h
        .run_stream("hi", &[], &[("CLAUDE_CODE_USE_BEDROCK", "maybe")])
        .await;
    assert_config_error(&h, &run, "CLAUDE_CODE_USE_BEDROCK");
    // Skipping auth (a gateway signs) sends no authorization at all.
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_BEDROCK", "1"),
                ("ANTHROPIC_BEDROCK_BASE_URL", &base),
                ("CLAUDE_CODE_SKIP_BEDROCK_AUTH", "1"),
            ],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(!h.mock.requests()[0].headers.contains_key("authorization"));
}
