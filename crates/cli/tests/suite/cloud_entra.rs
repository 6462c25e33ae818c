//! Microsoft Foundry with Microsoft Entra ID instead of a key: the real `keel` binary gets a
//! token from keel-mock's fake Entra token endpoint (a client secret, a federated token file)
//! or from a fake Azure CLI, sends it as `Authorization: Bearer`, and keel-mock refuses any
//! token of its shape it did not hand out; a revoked token is replaced once.

use super::common::{Harness, Stream};

const TEXT: &str =
    r#"{"on_exhausted": "loop", "steps":[{"kind":"text","text":"hello from Foundry"}]}"#;

/// Foundry at `h`'s mock, Entra at the mock too, with `extra` variables.
fn env<'a>(base: &'a str, extra: &[(&'static str, &'a str)]) -> Vec<(&'static str, &'a str)> {
    let mut v = vec![
        ("CLAUDE_CODE_USE_FOUNDRY", "1"),
        ("ANTHROPIC_FOUNDRY_BASE_URL", base),
        ("ANTHROPIC_API_KEY", ""),
        ("AZURE_AUTHORITY_HOST", base),
        ("AZURE_TENANT_ID", "contoso"),
        ("AZURE_CLIENT_ID", "keel-app"),
    ];
    v.extend_from_slice(extra);
    v
}

fn messages(h: &Harness) -> Vec<keel_mock::RecordedRequest> {
    h.mock
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/messages")
        .collect()
}

fn token_requests(h: &Harness) -> Vec<String> {
    h.mock
        .requests()
        .into_iter()
        .filter(|r| r.path == "/contoso/oauth2/v2.0/token")
        .map(|r| r.status.to_string())
        .collect()
}

#[tokio::test]
async fn a_client_secret_is_traded_for_a_bearer_token_foundry_accepts() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let run = h
        .run_stream("hi", &[], &env(&base, &[("AZURE_CLIENT_SECRET", "s3cret")]))
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.result()["provider"], "foundry");
    assert_eq!(run.of("system/init")[0]["apiKeySource"], "none");
    let reqs = h.mock.requests();
    assert_eq!(reqs.len(), 2, "one token request, one model request");
    assert_eq!(reqs[0].path, "/contoso/oauth2/v2.0/token");
    assert_eq!(reqs[0].status, 200);
    let m = &reqs[1];
    assert_eq!(m.path, "/v1/messages");
    assert_eq!(m.status, 200, "{:?}", m.validation_error);
    assert_eq!(m.headers["authorization"], "Bearer keel-mock-entra-1");
    assert!(!m.headers.contains_key("x-api-key"), "no key is sent");
    assert_eq!(m.body["model"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn a_refused_secret_ends_the_run_naming_it_without_a_model_request() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let run = h
        .run_stream(
            "hi",
            &[],
            &env(
                &base,
                &[("AZURE_CLIENT_SECRET", keel_mock::entra::REFUSED_SECRET)],
            ),
        )
        .await;
    assert_ne!(run.code, 0, "stderr: {}", run.stderr);
    let r = run.result();
    assert_eq!(r["is_error"], true);
    let text = r.to_string();
    assert!(text.contains("AZURE_CLIENT_SECRET"), "{text}");
    assert!(text.contains("invalid client secret"), "{text}");
    assert_eq!(
        token_requests(&h),
        ["401"],
        "a refused secret is not retried"
    );
    assert!(messages(&h).is_empty(), "no model request without a token");
}

#[tokio::test]
async fn an_incomplete_or_unsafe_entra_setup_stops_before_any_request() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let mut e = env(&base, &[("AZURE_CLIENT_SECRET", "s")]);
    e.retain(|(k, _)| *k != "AZURE_CLIENT_ID");
    let run = h.run_stream("hi", &[], &e).await;
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("AZURE_CLIENT_ID"), "{}", run.stderr);
    let run = h
        .run_stream(
            "hi",
            &[],
            &env(
                &base,
                &[
                    ("AZURE_CLIENT_SECRET", "s"),
                    ("AZURE_AUTHORITY_HOST", "http://login.example.com"),
                ],
            ),
        )
        .await;
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("AZURE_AUTHORITY_HOST"),
        "{}",
        run.stderr
    );
    assert!(h.mock.requests().is_empty(), "nothing may be sent");
}

#[tokio::test]
async fn a_federated_token_file_is_the_client_assertion() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let file = h.home.path().join("federated-token");
    std::fs::write(&file, "eyJhbGciOi.federated.sig\n").unwrap();
    let file = file.to_string_lossy().into_owned();
    let run = h
        .run_stream(
            "hi",
            &[],
            &env(&base, &[("AZURE_FEDERATED_TOKEN_FILE", &file)]),
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.mock.requests();
    assert_eq!(reqs[0].path, "/contoso/oauth2/v2.0/token");
    assert_eq!(reqs[0].status, 200);
    assert_eq!(
        messages(&h)[0].headers["authorization"],
        "Bearer keel-mock-entra-1"
    );
}

#[tokio::test]
async fn a_revoked_token_is_replaced_once_and_the_turn_succeeds() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let e = env(&base, &[("AZURE_CLIENT_SECRET", "s3cret")]);
    let mut st = Stream::start(&h, &[], &e);
    st.user("first").await;
    assert_eq!(st.result().await["subtype"], "success");
    h.mock.revoke_entra_tokens();
    st.user("second").await;
    let r = st.result().await;
    assert_eq!(r["subtype"], "success", "{r}");
    st.finish().await;
    let m = messages(&h);
    let seen: Vec<(u16, &str)> = m
        .iter()
        .map(|r| (r.status, r.headers["authorization"].as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (200, "Bearer keel-mock-entra-1"),
            (401, "Bearer keel-mock-entra-1"),
            (200, "Bearer keel-mock-entra-2"),
        ]
    );
    assert_eq!(token_requests(&h), ["200", "200"]);
}

/// A fake `az` on PATH: it records its arguments and prints a token as the CLI does.
#[cfg(unix)]
#[tokio::test]
async fn the_azure_cli_gives_the_token_when_nothing_else_is_set() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let bin = h.home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let args_file = h.home.path().join("az-args");
    let script = format!(
        "#!/bin/sh\necho \"$@\" > '{}'\necho '{{\"accessToken\": \"az-cli-token\", \"expires_on\": 4102444800, \"tokenType\": \"Bearer\"}}'\n",
        args_file.display()
    );
    std::fs::write(bin.join("az"), script).unwrap();
    std::fs::set_permissions(bin.join("az"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_FOUNDRY", "1"),
                ("ANTHROPIC_FOUNDRY_BASE_URL", &base),
                ("ANTHROPIC_API_KEY", ""),
                ("PATH", &path),
            ],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        messages(&h)[0].headers["authorization"],
        "Bearer az-cli-token"
    );
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert_eq!(
        args.trim(),
        "account get-access-token --output json --resource https://cognitiveservices.azure.com"
    );
}

#[tokio::test]
async fn a_certificate_credential_is_named_as_not_read_rather_than_skipped() {
    let h = Harness::from_json(TEXT).await;
    let base = h.mock.base_url();
    let run = h
        .run_stream(
            "hi",
            &[],
            &env(&base, &[("AZURE_CLIENT_CERTIFICATE_PATH", "/tmp/cert.pem")]),
        )
        .await;
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("AZURE_CLIENT_CERTIFICATE_PATH"),
        "{}",
        run.stderr
    );
    assert!(h.mock.requests().is_empty(), "nothing may be sent");
}
