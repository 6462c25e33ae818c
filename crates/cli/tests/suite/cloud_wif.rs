//! Vertex AI through workload identity federation, end to end: the real `keel` binary reads an
//! `external_account` file, exchanges its subject token at a loopback security token service,
//! trades the result for a service account's token, and keel-mock's Vertex route receives it.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::common::Harness;

const TEXT: &str = r#"{"steps":[{"kind":"text","text":"hello from Vertex"}]}"#;

/// A loopback STS + IAM Credentials stand-in: `POST /v1/token` answers `federated`,
/// `POST …:generateAccessToken` answers `sa-token` (if the bearer is `federated`); it keeps
/// each request line and body.
async fn google_fake() -> (String, Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    if let Some((h, b)) = text.split_once("\r\n\r\n") {
                        let len = h
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if b.len() >= len {
                            break (h.to_owned(), b.to_owned());
                        }
                    }
                };
                let line = head.lines().next().unwrap_or("").to_owned();
                log.lock().unwrap().push(format!("{line}\n{body}"));
                let bearer_ok = head
                    .lines()
                    .any(|l| l.eq_ignore_ascii_case("authorization: Bearer federated"));
                let (status, json) = if line.starts_with("POST /v1/token ") {
                    (
                        "200 OK",
                        r#"{"access_token":"federated","token_type":"Bearer","expires_in":3600}"#,
                    )
                } else if line.contains(":generateAccessToken") && bearer_ok {
                    (
                        "200 OK",
                        r#"{"accessToken":"sa-token","expireTime":"2099-01-01T00:00:00Z"}"#,
                    )
                } else {
                    (
                        "403 Forbidden",
                        r#"{"error":{"code":403,"status":"PERMISSION_DENIED","message":"no"}}"#,
                    )
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                    json.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (base, seen, task)
}

#[tokio::test]
async fn vertex_uses_a_federated_identity_from_an_external_account_file() {
    let h = Harness::from_json(TEXT).await;
    let (google, seen, task) = google_fake().await;
    let subject = h.home.path().join("ci-oidc-token");
    std::fs::write(&subject, "ci-subject-token").unwrap();
    let adc = h.home.path().join("wif.json");
    let file = serde_json::json!({
        "type": "external_account",
        "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/ci/providers/gh",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": format!("{google}/v1/token"),
        "service_account_impersonation_url": format!("{google}/v1/projects/-/serviceAccounts/ci@p.iam.gserviceaccount.com:generateAccessToken"),
        "credential_source": {"file": subject},
    });
    std::fs::write(&adc, file.to_string()).unwrap();
    let vertex = format!("{}/v1", h.mock.base_url());
    let adc = adc.to_string_lossy().into_owned();
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_VERTEX", "1"),
                ("ANTHROPIC_VERTEX_PROJECT_ID", "my-project"),
                ("ANTHROPIC_VERTEX_BASE_URL", &vertex),
                ("GOOGLE_APPLICATION_CREDENTIALS", &adc),
                ("ANTHROPIC_API_KEY", ""),
            ],
        )
        .await;
    task.abort();
    run.assert_end("success", false, "completed", 0);
    let reqs = h.mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].headers["authorization"], "Bearer sa-token");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].starts_with("POST /v1/token "), "{}", seen[0]);
    assert!(
        seen[0].contains("subject_token=ci-subject-token"),
        "{}",
        seen[0]
    );
    assert!(seen[1].contains(":generateAccessToken"), "{}", seen[1]);
}

#[tokio::test]
async fn a_subject_token_url_in_clear_stops_keel_before_any_request() {
    let h = Harness::from_json(TEXT).await;
    let adc = h.home.path().join("wif.json");
    let file = serde_json::json!({
        "type": "external_account",
        "audience": "//iam.googleapis.com/x",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": "https://sts.googleapis.com/v1/token",
        "credential_source": {"url": "http://tokens.example.com/subject"},
    });
    std::fs::write(&adc, file.to_string()).unwrap();
    let vertex = format!("{}/v1", h.mock.base_url());
    let adc = adc.to_string_lossy().into_owned();
    let run = h
        .run_stream(
            "hi",
            &[],
            &[
                ("CLAUDE_CODE_USE_VERTEX", "1"),
                ("ANTHROPIC_VERTEX_PROJECT_ID", "my-project"),
                ("ANTHROPIC_VERTEX_BASE_URL", &vertex),
                ("GOOGLE_APPLICATION_CREDENTIALS", &adc),
            ],
        )
        .await;
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("credential_source.url"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{}",
        run.stderr
    );
    assert!(h.mock.requests().is_empty());
}
