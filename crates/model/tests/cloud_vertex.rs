//! Vertex AI against keel-mock's Vertex route: the URL and body Vertex wants, tokens from a
//! service-account key (a signed JWT exchanged at a local token endpoint), cached, refreshed
//! once when the API refuses one; Google's error envelope classified like every provider's.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/token_server.rs"]
mod token_server;

use std::sync::Arc;

use futures_util::StreamExt;
use keel_mock::{MockServer, Scenario, Step};
use keel_model::cloud::gcp::TokenSource;
use keel_model::{
    ApiErrorKind, ClientConfig, ErrorClass, Model, ModelRequest, RequestMessage, VertexClient,
    VertexConfig,
};
use keel_protocol::{ApiMessage, MessageContent, Role};
use serde_json::json;

/// A throwaway RSA key made for these tests only (it signs nothing anywhere else).
const KEY_PEM: &str = include_str!("data/throwaway-rsa-key.pem");

fn request(model: &str) -> ModelRequest {
    ModelRequest {
        model: model.into(),
        max_tokens: 100,
        system: vec![json!({"type": "text", "text": "be brief"})],
        messages: vec![RequestMessage::Owned(ApiMessage {
            role: Role::User,
            content: MessageContent::Text("hi".into()),
        })],
        tools: Arc::new(vec![]),
        stream: true,
        metadata: Some(json!({"user_id": "u"})),
        thinking: None,
    }
}

fn service_account(dir: &std::path::Path, token_uri: &str) -> std::path::PathBuf {
    let path = dir.join("sa.json");
    let json = json!({
        "type": "service_account", "project_id": "proj", "private_key_id": "k1",
        "private_key": KEY_PEM, "client_email": "keel-test@proj.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": token_uri,
    });
    std::fs::write(&path, json.to_string()).unwrap();
    path
}

fn client(mock: &MockServer, auth: Option<Arc<TokenSource>>) -> VertexClient {
    VertexClient::new(VertexConfig {
        client: ClientConfig {
            base_url: format!("{}/v1", mock.base_url()),
            ..ClientConfig::default()
        },
        project: "proj".into(),
        region: "us-east5".into(),
        auth,
    })
    .unwrap()
}

async fn text_of(c: &VertexClient, model: &str) -> Result<String, keel_model::ApiError> {
    let mut s = c.stream(&request(model)).await?;
    let mut text = String::new();
    while let Some(ev) = s.next().await {
        let raw = ev?.raw;
        if let Some(t) = raw["delta"]["text"].as_str() {
            text.push_str(t);
        }
    }
    Ok(text)
}

#[tokio::test]
async fn service_account_tokens_are_signed_cached_and_refreshed_once_on_401() {
    let tokens = token_server::TokenServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let sa = service_account(dir.path(), &tokens.url());
    let auth = Arc::new(TokenSource::from_file(&sa, None).unwrap());
    let mock = MockServer::start(Scenario::new(vec![
        Step::text("one"),
        Step::error(401),
        Step::text("two"),
    ]))
    .await
    .unwrap();
    let c = client(&mock, Some(auth));
    assert_eq!(
        text_of(&c, "claude-sonnet-4-5@20250929").await.unwrap(),
        "one"
    );
    assert_eq!(
        text_of(&c, "claude-sonnet-4-5@20250929").await.unwrap(),
        "two"
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(
        reqs[0].path,
        "/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
    );
    assert_eq!(reqs[0].body["anthropic_version"], "vertex-2023-10-16");
    assert!(reqs[0].body.get("model").is_none());
    assert_eq!(reqs[0].body["stream"], true);
    assert_eq!(reqs[0].validation_error, None);
    let auths: Vec<&str> = reqs
        .iter()
        .map(|r| r.headers["authorization"].as_str())
        .collect();
    // The first token serves until the API refuses it; then exactly one new one is fetched.
    assert_eq!(auths, ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"]);
    let grants = tokens.bodies();
    assert_eq!(grants.len(), 2);
    for g in &grants {
        assert!(
            g.starts_with(
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="
            ),
            "{g}"
        );
        let jwt = g.rsplit('=').next().unwrap();
        token_server::verify_jwt(jwt, KEY_PEM, &tokens.url());
    }
}

#[tokio::test]
async fn authorized_user_files_use_the_refresh_token_at_the_overridden_endpoint() {
    let tokens = token_server::TokenServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adc.json");
    std::fs::write(
        &path,
        json!({"type": "authorized_user", "client_id": "cid", "client_secret": "sec",
               "refresh_token": "1//refresh"})
        .to_string(),
    )
    .unwrap();
    let auth = Arc::new(TokenSource::from_file(&path, Some(tokens.url())).unwrap());
    let mock = MockServer::start(Scenario::new(vec![Step::text("ok")]))
        .await
        .unwrap();
    let c = client(&mock, Some(auth));
    assert_eq!(
        text_of(&c, "claude-haiku-4-5@20251001").await.unwrap(),
        "ok"
    );
    assert_eq!(
        tokens.bodies(),
        ["grant_type=refresh_token&client_id=cid&client_secret=sec&refresh_token=1%2F%2Frefresh"]
    );
    assert_eq!(mock.requests()[0].headers["authorization"], "Bearer tok-1");
}

#[tokio::test]
async fn a_refused_refresh_token_is_a_permanent_error_that_says_what_to_run() {
    let tokens = token_server::TokenServer::refusing().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adc.json");
    std::fs::write(
        &path,
        json!({"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r"}).to_string(),
    )
    .unwrap();
    let auth = Arc::new(TokenSource::from_file(&path, Some(tokens.url())).unwrap());
    let mock = MockServer::start(Scenario::new(vec![Step::text("never")]))
        .await
        .unwrap();
    let e = text_of(&client(&mock, Some(auth)), "claude-sonnet-4-5@20250929")
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Permanent, "{e}");
    assert!(
        e.message.contains("gcloud auth application-default login"),
        "{e}"
    );
    assert!(
        mock.requests().is_empty(),
        "no model request without a token"
    );
}

#[tokio::test]
async fn google_error_envelopes_are_classified_and_name_what_to_fix() {
    let mock = MockServer::start(Scenario::new(vec![
        Step::error(429),
        Step::error(503),
        Step::error(403),
        Step::error(404),
        Step::error(400),
    ]))
    .await
    .unwrap();
    let c = client(&mock, None);
    let mut errors = Vec::new();
    for _ in 0..5 {
        errors.push(text_of(&c, "claude-sonnet-4-5@20250929").await.unwrap_err());
    }
    let got: Vec<(Option<u16>, Option<&str>, ErrorClass)> = errors
        .iter()
        .map(|e| (e.status, e.error_type.as_deref(), e.class()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(429), Some("RESOURCE_EXHAUSTED"), ErrorClass::Transient),
            (Some(503), Some("UNAVAILABLE"), ErrorClass::Transient),
            (Some(403), Some("PERMISSION_DENIED"), ErrorClass::Permanent),
            (Some(404), Some("NOT_FOUND"), ErrorClass::Permanent),
            (Some(400), Some("INVALID_ARGUMENT"), ErrorClass::Permanent),
        ]
    );
    assert!(errors[2].message.contains("\"proj\""), "{}", errors[2]);
    assert!(
        errors[3].message.contains("CLOUD_ML_REGION"),
        "{}",
        errors[3]
    );
    assert!(mock
        .requests()
        .iter()
        .all(|r| !r.headers.contains_key("authorization")));
}

#[tokio::test]
async fn model_ids_and_names_that_would_change_the_url_are_refused() {
    let mock = MockServer::start(Scenario::new(vec![Step::text("x")]))
        .await
        .unwrap();
    let c = client(&mock, None);
    for bad in ["../x", "a/b", "m?x=1", "m#f", ""] {
        let e = text_of(&c, bad).await.unwrap_err();
        assert_eq!(e.kind, ApiErrorKind::Config, "{bad}");
    }
    assert!(mock.requests().is_empty());
    let bad_project = VertexClient::new(VertexConfig {
        client: ClientConfig::default(),
        project: "p/../q".into(),
        region: "us-east5".into(),
        auth: None,
    });
    assert!(bad_project.is_err());
}

/// A fake metadata server: answers a GET of the default service account's token that carries
/// `Metadata-Flavor: Google` with `meta-tok`, anything else with 403; keeps each request head.
async fn metadata_server() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                seen.lock().unwrap().push(head.clone());
                let lower = head.to_ascii_lowercase();
                let good = head.starts_with(
                    "GET /computeMetadata/v1/instance/service-accounts/default/token?scopes=",
                ) && lower.contains("\r\nmetadata-flavor: google\r\n");
                let (status, body) = if good {
                    (
                        "200 OK",
                        r#"{"access_token":"meta-tok","expires_in":3599,"token_type":"Bearer"}"#,
                    )
                } else {
                    ("403 Forbidden", r#"{"error":"missing Metadata-Flavor"}"#)
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (host, heads)
}

/// On Google Cloud (here: `GCE_METADATA_HOST` on loopback) the token comes from the metadata
/// server: a GET with its header, once, then cached.
#[tokio::test]
async fn the_metadata_server_gives_the_token_on_google_cloud() {
    let (host, heads) = metadata_server().await;
    let auth = Arc::new(TokenSource::metadata_server(&host).unwrap());
    let mock = MockServer::start(Scenario::new(vec![Step::text("one"), Step::text("two")]))
        .await
        .unwrap();
    let c = client(&mock, Some(auth));
    assert_eq!(
        text_of(&c, "claude-sonnet-4-5@20250929").await.unwrap(),
        "one"
    );
    assert_eq!(
        text_of(&c, "claude-sonnet-4-5@20250929").await.unwrap(),
        "two"
    );
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "cached after the first: {heads:?}");
    assert!(heads[0].contains("scopes=https://www.googleapis.com/auth/cloud-platform"));
    for r in mock.requests() {
        assert_eq!(r.headers["authorization"], "Bearer meta-tok");
    }
    // A host that could change the URL is refused before anything is asked.
    for bad in ["", "evil.example/x?", "a b", "h@st"] {
        assert!(TokenSource::metadata_server(bad).is_err(), "{bad:?}");
    }
}
