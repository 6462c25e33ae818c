//! Google credentials that stand on others, against loopback fakes named in the credentials
//! file: workload identity federation (a subject token from a file or a URL, the STS exchange,
//! an optional impersonation) and impersonated service accounts; cached, refreshed when due or
//! when dropped after a refusal, and refused when an endpoint would carry a credential in clear.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/fake_http.rs"]
mod fake_http;

use fake_http::FakeHttp;
use keel_model::cloud::gcp::TokenSource;
use keel_model::ApiErrorKind;
use serde_json::{json, Value};

const AUDIENCE: &str =
    "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/prov";
const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

fn sts_ok(token: &str, expires_in: u64) -> (u16, String) {
    (
        200,
        json!({"access_token": token, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "token_type": "Bearer", "expires_in": expires_in}).to_string(),
    )
}

fn write(dir: &std::path::Path, name: &str, v: &Value) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

fn form_has(body: &str, pair: &str) {
    assert!(body.split('&').any(|p| p == pair), "{pair} not in {body}");
}

#[tokio::test]
async fn a_file_sourced_subject_token_is_exchanged_cached_and_reread_when_due() {
    let sts = FakeHttp::start(vec![sts_ok("fed-1", 0), sts_ok("fed-2", 3600)]).await;
    let dir = tempfile::tempdir().unwrap();
    let subject = dir.path().join("oidc-token");
    std::fs::write(&subject, "subject-one\n").unwrap();
    let adc = write(
        dir.path(),
        "adc.json",
        &json!({"type": "external_account", "audience": AUDIENCE, "subject_token_type": JWT_TYPE,
                "token_url": format!("{}/v1/token", sts.base()),
                "credential_source": {"file": subject}}),
    );
    let src = TokenSource::from_file(&adc, None).unwrap();
    assert_eq!(src.token().await.unwrap(), "fed-1");
    std::fs::write(&subject, "subject-two").unwrap();
    assert_eq!(
        src.token().await.unwrap(),
        "fed-2",
        "an expired token is replaced"
    );
    assert_eq!(src.token().await.unwrap(), "fed-2", "a live one is cached");
    let seen = sts.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].line, "POST /v1/token");
    let b = &seen[0].body;
    form_has(
        b,
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange",
    );
    form_has(
        b,
        "scope=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcloud-platform",
    );
    form_has(
        b,
        "requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token",
    );
    form_has(b, "subject_token=subject-one");
    form_has(
        b,
        "subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Ajwt",
    );
    assert!(
        b.contains("audience=%2F%2Fiam.googleapis.com%2Fprojects%2F123"),
        "{b}"
    );
    form_has(&seen[1].body, "subject_token=subject-two");

    // A token the API refused is dropped and fetched anew, once per refusal.
    src.invalidate("fed-2").await;
    assert_eq!(src.token().await.unwrap(), "fed-2");
    assert_eq!(sts.seen().len(), 3);
}

#[tokio::test]
async fn a_url_sourced_json_subject_token_is_exchanged_then_impersonated() {
    let subject = FakeHttp::start(vec![(200, json!({"value": "azure-subject"}).to_string())]).await;
    let sts = FakeHttp::start(vec![sts_ok("federated", 3600)]).await;
    let iam = FakeHttp::start(vec![(
        200,
        json!({"accessToken": "sa-token", "expireTime": "2099-01-01T00:00:00Z"}).to_string(),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let adc = write(
        dir.path(),
        "adc.json",
        &json!({"type": "external_account", "audience": AUDIENCE, "subject_token_type": JWT_TYPE,
                "token_url": format!("{}/v1/token", sts.base()),
                "service_account_impersonation_url": format!("{}/v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken", iam.base()),
                "credential_source": {"url": format!("{}/subject?resource=x", subject.base()),
                                      "headers": {"Metadata": "True"},
                                      "format": {"type": "json", "subject_token_field_name": "value"}}}),
    );
    let src = TokenSource::from_file(&adc, None).unwrap();
    assert_eq!(src.token().await.unwrap(), "sa-token");
    let s = subject.seen();
    assert_eq!(s[0].line, "GET /subject?resource=x");
    assert_eq!(s[0].header("metadata"), Some("True"));
    form_has(&sts.seen()[0].body, "subject_token=azure-subject");
    let i = &iam.seen()[0];
    assert_eq!(
        i.line,
        "POST /v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:generateAccessToken"
    );
    assert_eq!(i.header("authorization"), Some("Bearer federated"));
    let body: Value = serde_json::from_str(&i.body).unwrap();
    assert_eq!(
        body["scope"],
        json!(["https://www.googleapis.com/auth/cloud-platform"])
    );
    assert_eq!(body["lifetime"], "3600s");
    // expireTime far ahead: capped, cached.
    assert_eq!(src.token().await.unwrap(), "sa-token");
    assert_eq!(iam.seen().len(), 1);
}

#[tokio::test]
async fn refusals_and_bad_answers_are_clear_errors() {
    let sts = FakeHttp::start(vec![(
        400,
        json!({"error": "invalid_grant", "error_description": "The audience in ID Token does not match."}).to_string(),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let subject = dir.path().join("tok");
    std::fs::write(&subject, "s").unwrap();
    let file = |url: String| {
        json!({"type": "external_account", "audience": AUDIENCE, "subject_token_type": JWT_TYPE,
               "token_url": url, "credential_source": {"file": subject}})
    };
    let adc = write(
        dir.path(),
        "a.json",
        &file(format!("{}/v1/token", sts.base())),
    );
    let e = TokenSource::from_file(&adc, None)
        .unwrap()
        .token()
        .await
        .unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::Config, "a refusal is permanent");
    assert!(e.message.contains("audience in ID Token"), "{}", e.message);
    assert!(e.message.contains("a.json"), "{}", e.message);

    let garbage = FakeHttp::start(vec![(200, "<html>".into())]).await;
    let adc = write(
        dir.path(),
        "b.json",
        &file(format!("{}/v1/token", garbage.base())),
    );
    let e = TokenSource::from_file(&adc, None)
        .unwrap()
        .token()
        .await
        .unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::Decode, "{}", e.message);

    let busy = FakeHttp::start(vec![(503, "{}".into())]).await;
    let adc = write(
        dir.path(),
        "c.json",
        &file(format!("{}/v1/token", busy.base())),
    );
    let e = TokenSource::from_file(&adc, None)
        .unwrap()
        .token()
        .await
        .unwrap_err();
    assert!(e.retryable(), "a busy token service is transient: {e:?}");
}

#[test]
fn endpoints_in_clear_and_unknown_sources_are_refused_when_the_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let base = json!({"type": "external_account", "audience": AUDIENCE, "subject_token_type": JWT_TYPE,
                      "token_url": "https://sts.googleapis.com/v1/token",
                      "credential_source": {"url": "http://tokens.example.com/subject"}});
    let adc = write(dir.path(), "a.json", &base);
    let e = TokenSource::from_file(&adc, None).unwrap_err();
    assert!(e.message.contains("credential_source.url"), "{}", e.message);

    let mut v = base.clone();
    v["credential_source"] = json!({"file": "/dev/null"});
    v["token_url"] = json!("http://sts.example.com/v1/token");
    let e = TokenSource::from_file(&write(dir.path(), "b.json", &v), None).unwrap_err();
    assert!(e.message.contains("token_url"), "{}", e.message);

    let mut v = base.clone();
    v["credential_source"] =
        json!({"environment_id": "aws1", "region_url": "http://169.254.169.254"});
    let e = TokenSource::from_file(&write(dir.path(), "c.json", &v), None).unwrap_err();
    assert!(e.message.contains("AWS-sourced"), "{}", e.message);

    // A subject-token file that is not a regular file is refused when it is read.
    let mut v = base;
    v["credential_source"] = json!({"file": dir.path()});
    let src = TokenSource::from_file(&write(dir.path(), "d.json", &v), None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt.block_on(src.token()).unwrap_err();
    assert!(e.message.contains("not a regular file"), "{}", e.message);

    // An impersonated account may not stand on another impersonated one.
    let nested = json!({"type": "impersonated_service_account",
        "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/x:generateAccessToken",
        "source_credentials": {"type": "impersonated_service_account"}});
    assert!(TokenSource::from_file(&write(dir.path(), "e.json", &nested), None).is_err());
}

#[tokio::test]
async fn an_impersonated_account_trades_its_source_token() {
    let oauth = FakeHttp::start(vec![sts_ok("user-1", 3600), sts_ok("user-2", 3600)]).await;
    let iam = FakeHttp::start(vec![
        (
            200,
            json!({"accessToken": "imp-1", "expireTime": "2000-01-01T00:00:00Z"}).to_string(),
        ),
        (
            200,
            json!({"accessToken": "imp-2", "expireTime": "2099-01-01T00:00:00Z"}).to_string(),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let adc = write(
        dir.path(),
        "adc.json",
        &json!({"type": "impersonated_service_account",
                "service_account_impersonation_url": format!("{}/v1/projects/-/serviceAccounts/t@p.iam.gserviceaccount.com:generateAccessToken", iam.base()),
                "delegates": ["projects/-/serviceAccounts/d@p.iam.gserviceaccount.com"],
                "source_credentials": {"type": "authorized_user", "client_id": "cid",
                                       "client_secret": "cs", "refresh_token": "rt"}}),
    );
    let src = TokenSource::from_file(&adc, Some(format!("{}/token", oauth.base()))).unwrap();
    assert_eq!(src.token().await.unwrap(), "imp-1");
    // imp-1 had already expired: a fresh source token, a fresh impersonation.
    assert_eq!(src.token().await.unwrap(), "imp-2");
    assert_eq!(src.token().await.unwrap(), "imp-2");
    let o = oauth.seen();
    assert_eq!(o.len(), 2);
    form_has(&o[0].body, "grant_type=refresh_token");
    form_has(&o[0].body, "refresh_token=rt");
    let i = iam.seen();
    assert_eq!(i[0].header("authorization"), Some("Bearer user-1"));
    assert_eq!(i[1].header("authorization"), Some("Bearer user-2"));
    let body: Value = serde_json::from_str(&i[0].body).unwrap();
    assert_eq!(
        body["delegates"],
        json!(["projects/-/serviceAccounts/d@p.iam.gserviceaccount.com"])
    );
}

#[tokio::test]
async fn a_workforce_pool_names_the_project_to_bill() {
    let sts = FakeHttp::start(vec![sts_ok("wf", 3600)]).await;
    let dir = tempfile::tempdir().unwrap();
    let subject = dir.path().join("tok");
    std::fs::write(&subject, "s").unwrap();
    let adc = write(
        dir.path(),
        "adc.json",
        &json!({"type": "external_account",
                "audience": "//iam.googleapis.com/locations/global/workforcePools/wp/providers/p",
                "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                "token_url": format!("{}/v1/token", sts.base()),
                "workforce_pool_user_project": "billing-proj",
                "credential_source": {"file": subject}}),
    );
    let src = TokenSource::from_file(&adc, None).unwrap();
    assert_eq!(src.token().await.unwrap(), "wf");
    form_has(
        &sts.seen()[0].body,
        "options=%7B%22userProject%22%3A%22billing-proj%22%7D",
    );
}
