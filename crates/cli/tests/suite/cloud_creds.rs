//! Bedrock with credentials that expire: a profile's `credential_process` hands out
//! short-lived keys (each run numbered), and keel-mock's Bedrock dialect checks every
//! request's SigV4 header. A multi-turn run keeps working across a refresh before expiry and
//! across an `ExpiredTokenException`, each request signed with the keys current for it.

use super::common::Harness;

/// A HOME whose AWS profile `ci` gets its keys from a script that counts its runs and
/// hands out keys valid for `valid_secs`.
fn profile_with_process(h: &Harness, valid_secs: i64) -> std::path::PathBuf {
    let aws = h.home.path().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    let expires = (chrono::Utc::now() + chrono::Duration::seconds(valid_secs))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let count = aws.join("runs");
    let script = aws.join("creds.sh");
    std::fs::write(
        &script,
        format!(
            "n=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'\nprintf '{{\"Version\":1,\"AccessKeyId\":\"AKIDPROC%s\",\"SecretAccessKey\":\"secret\",\"SessionToken\":\"token%s\",\"Expiration\":\"{expires}\"}}' $n $n\n",
            c = count.display()
        ),
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile ci]\nregion = us-west-2\ncredential_process = sh '{}'\n",
            script.display()
        ),
    )
    .unwrap();
    count
}

fn bedrock_env(base: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CLAUDE_CODE_USE_BEDROCK", "1".into()),
        ("ANTHROPIC_BEDROCK_BASE_URL", base.into()),
        ("AWS_REGION", "us-west-2".into()),
        ("AWS_PROFILE", "ci".into()),
    ]
}

const THREE_TURNS_WITH_EXPIRY: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"Read","input":{"file_path":"notes.txt"}}]},
    {"kind":"error","status":403,"error_type":"ExpiredTokenException","message":"The security token included in the request is expired"},
    {"kind":"text","text":"read it"}]}"#;

/// The access key id each request was signed with, and whether keel-mock accepted it.
fn signed_keys(h: &Harness) -> Vec<String> {
    h.mock
        .requests()
        .iter()
        .map(|r| {
            assert_eq!(r.validation_error, None, "keel-mock accepts {}", r.path);
            let auth = &r.headers["authorization"];
            let key = auth
                .strip_prefix("AWS4-HMAC-SHA256 Credential=")
                .and_then(|c| c.split('/').next())
                .unwrap_or_else(|| panic!("not a SigV4 header: {auth}"));
            assert!(auth.contains("x-amz-security-token"), "{auth}");
            key.to_owned()
        })
        .collect()
}

#[tokio::test]
async fn expired_keys_are_fetched_again_once_and_the_run_goes_on() {
    let h = Harness::from_json(THREE_TURNS_WITH_EXPIRY).await;
    std::fs::write(h.cwd().join("notes.txt"), "remember the milk\n").unwrap();
    // An hour of validity: fetched once at the first request, again only when refused.
    let runs = profile_with_process(&h, 3600);
    let env = bedrock_env(&h.mock.base_url());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = h.run_stream("read my notes", &[], &env).await;
    run.assert_end("success", false, "completed", 0);
    assert!(run.stdout.contains("read it"));
    assert_eq!(signed_keys(&h), ["AKIDPROC1", "AKIDPROC1", "AKIDPROC2"]);
    let tokens: Vec<String> = h
        .mock
        .requests()
        .iter()
        .map(|r| r.headers["x-amz-security-token"].clone())
        .collect();
    assert_eq!(tokens, ["token1", "token1", "token2"]);
    assert_eq!(std::fs::read_to_string(runs).unwrap().trim(), "2");
    // The refusal was handled inside the request: no retry was announced or counted.
    assert!(run.of("system/api_retry").is_empty(), "{}", run.stdout);
}

#[tokio::test]
async fn short_lived_keys_are_refreshed_before_every_request_that_needs_it() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Read","input":{"file_path":"notes.txt"}}]},
            {"kind":"tool_use","calls":[{"name":"Read","input":{"file_path":"notes.txt"}}]},
            {"kind":"text","text":"twice"}]}"#,
    )
    .await;
    std::fs::write(h.cwd().join("notes.txt"), "remember the milk\n").unwrap();
    // Four minutes left is inside keel's five-minute margin: each turn gets fresh keys.
    let runs = profile_with_process(&h, 240);
    let env = bedrock_env(&h.mock.base_url());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = h.run_stream("read my notes twice", &[], &env).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(signed_keys(&h), ["AKIDPROC1", "AKIDPROC2", "AKIDPROC3"]);
    assert_eq!(std::fs::read_to_string(runs).unwrap().trim(), "3");
}

#[tokio::test]
async fn a_failing_credential_process_ends_the_run_with_its_message_and_no_request() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"never"}]}"#).await;
    let aws = h.home.path().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile ci]\ncredential_process = sh -c 'echo \"SSO session expired, log in again\" >&2; exit 2'\n",
    )
    .unwrap();
    let env = bedrock_env(&h.mock.base_url());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = h.run_stream("hi", &[], &env).await;
    assert_eq!(run.result()["is_error"], true, "{}", run.stdout);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("credential_process") && said.contains("log in again"),
        "{said}"
    );
    assert!(h.mock.requests().is_empty(), "nothing is sent unsigned");
}
