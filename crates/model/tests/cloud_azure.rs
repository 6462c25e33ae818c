//! Microsoft Entra ID tokens for Foundry, each source against a loopback fake: the request it
//! sends, a good answer, a bad one, expiry (a fresh token once the old one is due), and — through
//! the Foundry client against keel-mock — a refused token replaced exactly once.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/fake_http.rs"]
mod fake_http;

use std::sync::Arc;
use std::time::Duration;

use fake_http::FakeHttp;
use futures_util::StreamExt;
use keel_mock::{MockServer, Scenario, Step};
use keel_model::cloud::azure::{token_url, EntraCredential, EntraSource};
use keel_model::cloud::azure_foundry::FoundryEntraClient;
use keel_model::{ApiErrorKind, ClientConfig, Model, ModelRequest, RequestMessage};
use keel_protocol::{ApiMessage, MessageContent, Role};
use serde_json::json;

const SCOPE_FORM: &str = "scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default";

fn ok(token: &str, expires_in: u64) -> (u16, String) {
    (
        200,
        json!({"token_type": "Bearer", "expires_in": expires_in, "access_token": token})
            .to_string(),
    )
}

fn secret(base: &str) -> EntraSource {
    EntraSource::ClientSecret {
        token_url: token_url(base, "contoso").unwrap(),
        client_id: "app-id".into(),
        secret: "s3cret&=".into(),
    }
}

fn chain(sources: Vec<EntraSource>) -> EntraCredential {
    EntraCredential::new(sources).unwrap()
}

#[tokio::test]
async fn client_secret_is_posted_and_its_token_cached() {
    let fake = FakeHttp::start(vec![ok("tok-1", 3599)]).await;
    let c = chain(vec![secret(&fake.base())]);
    assert_eq!(c.token().await.unwrap(), "tok-1");
    assert_eq!(c.token().await.unwrap(), "tok-1");
    let seen = fake.seen();
    assert_eq!(seen.len(), 1, "the second call is served from the cache");
    assert_eq!(seen[0].line, "POST /contoso/oauth2/v2.0/token");
    assert_eq!(
        seen[0].body,
        format!("grant_type=client_credentials&client_id=app-id&client_secret=s3cret%26%3D&{SCOPE_FORM}")
    );
}

#[tokio::test]
async fn an_expiring_token_is_replaced_before_it_dies() {
    let fake = FakeHttp::start(vec![ok("tok-1", 0), ok("tok-2", 3599)]).await;
    let c = chain(vec![secret(&fake.base())]);
    assert_eq!(c.token().await.unwrap(), "tok-1");
    assert_eq!(c.token().await.unwrap(), "tok-2");
    assert_eq!(c.token().await.unwrap(), "tok-2");
    assert_eq!(fake.seen().len(), 2);
}

#[tokio::test]
async fn bad_answers_are_errors_that_say_what_to_fix() {
    let fake = FakeHttp::start(vec![(
        401,
        json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}).to_string(),
    )])
    .await;
    let e = chain(vec![secret(&fake.base())]).token().await.unwrap_err();
    assert_eq!(
        e.kind,
        ApiErrorKind::Config,
        "a refused secret is permanent"
    );
    assert!(e.message.contains("AZURE_CLIENT_SECRET"), "{}", e.message);
    assert!(e.message.contains("AADSTS7000215"), "{}", e.message);

    let fake = FakeHttp::start(vec![(200, "<html>sign in</html>".into())]).await;
    let e = chain(vec![secret(&fake.base())]).token().await.unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::Decode, "{}", e.message);

    let fake = FakeHttp::start(vec![(503, "{}".into())]).await;
    let e = chain(vec![secret(&fake.base())]).token().await.unwrap_err();
    assert_eq!(
        e.kind,
        ApiErrorKind::Http,
        "an unavailable endpoint is transient"
    );
    assert!(e.retryable());
}

#[tokio::test]
async fn workload_identity_reads_the_rotating_file_at_each_exchange() {
    let fake = FakeHttp::start(vec![ok("tok-1", 0), ok("tok-2", 3599)]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "assertion-one\n").unwrap();
    let c = chain(vec![EntraSource::WorkloadIdentity {
        token_url: token_url(&fake.base(), "contoso").unwrap(),
        client_id: "app-id".into(),
        token_file: file.clone(),
    }]);
    assert_eq!(c.token().await.unwrap(), "tok-1");
    std::fs::write(&file, "assertion-two").unwrap();
    assert_eq!(c.token().await.unwrap(), "tok-2");
    let seen = fake.seen();
    let jwt =
        "client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer";
    for (s, a) in seen.iter().zip(["assertion-one", "assertion-two"]) {
        assert!(s.body.contains(jwt), "{}", s.body);
        assert!(
            s.body.contains(&format!("client_assertion={a}&")),
            "{}",
            s.body
        );
        assert!(s.body.contains(SCOPE_FORM), "{}", s.body);
    }
    // A file that is not a token is a configuration error naming the variable.
    std::fs::write(&file, "").unwrap();
    let c = chain(vec![EntraSource::WorkloadIdentity {
        token_url: token_url(&fake.base(), "contoso").unwrap(),
        client_id: "app-id".into(),
        token_file: dir.path().to_path_buf(),
    }]);
    let e = c.token().await.unwrap_err();
    assert!(
        e.message.contains("AZURE_FEDERATED_TOKEN_FILE"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn app_service_identity_sends_its_header_and_reads_expires_on() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let fake = FakeHttp::start(vec![(
        200,
        json!({"access_token": "mi-1", "expires_on": (now + 3600).to_string(), "resource": "https://cognitiveservices.azure.com"}).to_string(),
    )])
    .await;
    let c = chain(vec![EntraSource::AppService {
        endpoint: format!("{}/msi/token", fake.base()),
        header: "id-header-secret".into(),
        client_id: Some("user-assigned".into()),
    }]);
    assert_eq!(c.token().await.unwrap(), "mi-1");
    assert_eq!(c.token().await.unwrap(), "mi-1");
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].line,
        "GET /msi/token?api-version=2019-08-01&resource=https%3A%2F%2Fcognitiveservices.azure.com&client_id=user-assigned"
    );
    assert_eq!(
        seen[0].header("x-identity-header"),
        Some("id-header-secret")
    );
}

#[tokio::test]
async fn imds_without_an_identity_falls_through_to_the_next_source() {
    let imds = FakeHttp::start(vec![(
        400,
        json!({"error": "invalid_request", "error_description": "Identity not found"}).to_string(),
    )])
    .await;
    let next = FakeHttp::start(vec![ok("from-next", 3599)]).await;
    let c = chain(vec![
        EntraSource::Imds {
            url: format!("{}/metadata/identity/oauth2/token", imds.base()),
            client_id: None,
        },
        // Stands in for the CLI: any source after the identity.
        EntraSource::AppService {
            endpoint: format!("{}/msi/token", next.base()),
            header: "h".into(),
            client_id: None,
        },
    ]);
    assert_eq!(c.token().await.unwrap(), "from-next");
    let seen = imds.seen();
    assert_eq!(seen[0].header("metadata"), Some("true"));
    assert!(
        seen[0]
            .line
            .starts_with("GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource="),
        "{}",
        seen[0].line
    );
    // The source that answered is kept: IMDS is not asked again.
    c.invalidate("from-next").await;
    assert_eq!(c.token().await.unwrap(), "from-next");
    assert_eq!(imds.seen().len(), 1);
    assert_eq!(next.seen().len(), 2);
}

#[tokio::test]
async fn an_unreachable_identity_endpoint_and_nothing_else_is_one_clear_error() {
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = chain(vec![EntraSource::Imds {
        url: format!("http://127.0.0.1:{port}/metadata/identity/oauth2/token"),
        client_id: None,
    }]);
    let e = c.token().await.unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::Config);
    assert!(
        e.message.contains("ANTHROPIC_FOUNDRY_API_KEY"),
        "{}",
        e.message
    );
    assert!(e.message.contains("AZURE_CLIENT_SECRET"), "{}", e.message);
}

#[cfg(unix)]
mod cli {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn fake_az(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
        let p = dir.join("az");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn az(program: std::path::PathBuf, timeout: Duration) -> EntraCredential {
        chain(vec![EntraSource::AzureCli {
            program,
            tenant: Some("contoso".into()),
            timeout,
        }])
    }

    #[tokio::test]
    async fn the_cli_token_is_read_and_refreshed_when_due() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let program = fake_az(
            dir.path(),
            &format!(
                "echo \"$@\" >> '{c}'\nn=$(wc -l < '{c}')\necho \"{{\\\"accessToken\\\": \\\"cli-$n\\\", \\\"expires_on\\\": 1}}\"",
                c = count.display()
            ),
        );
        let c = az(program, Duration::from_secs(20));
        // expires_on in the past: every call asks the CLI again.
        assert_eq!(c.token().await.unwrap(), "cli-1");
        assert_eq!(c.token().await.unwrap(), "cli-2");
        let args = std::fs::read_to_string(&count).unwrap();
        assert_eq!(
            args.lines().next().unwrap(),
            "account get-access-token --output json --resource https://cognitiveservices.azure.com --tenant contoso"
        );
    }

    #[tokio::test]
    async fn a_cli_not_signed_in_or_answering_garbage_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_az(
            dir.path(),
            "echo \"ERROR: Please run 'az login' to setup account.\" >&2\nexit 1",
        );
        let e = az(program, Duration::from_secs(20))
            .token()
            .await
            .unwrap_err();
        assert!(e.message.contains("az login"), "{}", e.message);
        assert!(
            e.message.contains("ANTHROPIC_FOUNDRY_API_KEY"),
            "{}",
            e.message
        );

        let dir = tempfile::tempdir().unwrap();
        let program = fake_az(dir.path(), "echo 'not json'");
        let e = az(program, Duration::from_secs(20))
            .token()
            .await
            .unwrap_err();
        assert_eq!(e.kind, ApiErrorKind::Decode, "{}", e.message);
    }

    #[tokio::test]
    async fn a_hung_cli_is_stopped_at_its_time_limit_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // Like the real `az`: a script whose interpreter is its child, not exec'd.
        let program = fake_az(
            dir.path(),
            &format!("sleep 600 &\necho $! > '{}'\nwait", pid_file.display()),
        );
        let started = std::time::Instant::now();
        let e = az(program, Duration::from_secs(1))
            .token()
            .await
            .unwrap_err();
        assert!(
            e.message.contains("did not answer within 1 s"),
            "{}",
            e.message
        );
        assert!(started.elapsed() < Duration::from_secs(30));
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        // Gone, or a zombie waiting to be reaped.
        let alive = || {
            std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next())
                    != Some("Z")
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while alive() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!alive(), "the CLI's own child ({stat}) was left running");
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        max_tokens: 100,
        system: vec![],
        messages: vec![RequestMessage::Owned(ApiMessage {
            role: Role::User,
            content: MessageContent::Text("hi".into()),
        })],
        tools: Arc::new(vec![]),
        stream: true,
        metadata: None,
        thinking: None,
    }
}

async fn text_of(c: &FoundryEntraClient) -> Result<String, keel_model::ApiError> {
    let mut s = c.stream(&request()).await?;
    let mut text = String::new();
    while let Some(ev) = s.next().await {
        if let Some(t) = ev?.raw["delta"]["text"].as_str() {
            text.push_str(t);
        }
    }
    Ok(text)
}

#[tokio::test]
async fn foundry_sends_the_bearer_token_and_replaces_a_refused_one_once() {
    let mock = MockServer::start(
        Scenario::new(vec![Step::text("hello")]).on_exhausted(keel_mock::OnExhausted::Loop),
    )
    .await
    .unwrap();
    let auth = Arc::new(chain(vec![secret(&mock.base_url())]));
    let c = FoundryEntraClient::new(
        ClientConfig {
            base_url: mock.base_url(),
            ..ClientConfig::default()
        },
        auth,
    )
    .unwrap();
    assert_eq!(text_of(&c).await.unwrap(), "hello");
    mock.revoke_entra_tokens();
    assert_eq!(text_of(&c).await.unwrap(), "hello");
    let seen: Vec<(String, u16, Option<String>)> = mock
        .requests()
        .into_iter()
        .map(|r| (r.path, r.status, r.headers.get("authorization").cloned()))
        .collect();
    let tok = |n: u32| Some(format!("Bearer keel-mock-entra-{n}"));
    assert_eq!(
        seen,
        [
            ("/contoso/oauth2/v2.0/token".into(), 200, None),
            ("/v1/messages".into(), 200, tok(1)),
            ("/v1/messages".into(), 401, tok(1)),
            ("/contoso/oauth2/v2.0/token".into(), 200, None),
            ("/v1/messages".into(), 200, tok(2)),
        ]
    );
}

#[tokio::test]
async fn a_token_refused_twice_is_an_error_that_names_the_source_and_the_role() {
    let mock = MockServer::start(
        Scenario::new(vec![Step::text("hello")]).on_exhausted(keel_mock::OnExhausted::Loop),
    )
    .await
    .unwrap();
    // A token of keel-mock's shape that it never issued: refused every time.
    let identity = FakeHttp::start(vec![ok("keel-mock-entra-999", 3599)]).await;
    let auth = Arc::new(chain(vec![EntraSource::AppService {
        endpoint: format!("{}/msi/token", identity.base()),
        header: "h".into(),
        client_id: None,
    }]));
    let c = FoundryEntraClient::new(
        ClientConfig {
            base_url: mock.base_url(),
            ..ClientConfig::default()
        },
        auth,
    )
    .unwrap();
    let e = text_of(&c).await.unwrap_err();
    assert_eq!(e.status, Some(401));
    assert!(!e.retryable(), "{e:?}");
    assert!(e.message.contains("IDENTITY_ENDPOINT"), "{}", e.message);
    assert!(
        e.message.contains("Cognitive Services User"),
        "{}",
        e.message
    );
    assert_eq!(
        mock.requests().len(),
        2,
        "one retry with a fresh token, no more"
    );
    assert_eq!(
        identity.seen().len(),
        2,
        "the refused token was fetched anew once"
    );
}
