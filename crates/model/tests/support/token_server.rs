//! A tiny OAuth token endpoint on loopback for the Vertex tests: it answers each POST with
//! `tok-N` (N counting from 1), or refuses every one, and keeps the form bodies it received.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub struct TokenServer {
    addr: std::net::SocketAddr,
    bodies: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TokenServer {
    pub async fn start() -> Self {
        Self::serve(false).await
    }

    pub async fn refusing() -> Self {
        Self::serve(true).await
    }

    async fn serve(refuse: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let body = loop {
                        let Ok(n) = sock.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buf).into_owned();
                        if let Some((head, body)) = text.split_once("\r\n\r\n") {
                            let len = head
                                .lines()
                                .find_map(|l| {
                                    let (k, v) = l.split_once(':')?;
                                    k.eq_ignore_ascii_case("content-length")
                                        .then(|| v.trim().parse::<usize>().ok())?
                                })
                                .unwrap_or(0);
                            if body.len() >= len {
                                break body.to_owned();
                            }
                        }
                    };
                    let n = {
                        let mut b = seen.lock().unwrap();
                        b.push(body);
                        b.len()
                    };
                    let (status, json) = if refuse {
                        ("400 Bad Request", r#"{"error":"invalid_grant","error_description":"Token has been expired or revoked."}"#.to_owned())
                    } else {
                        (
                            "200 OK",
                            format!(
                                r#"{{"access_token":"tok-{n}","expires_in":3599,"token_type":"Bearer"}}"#
                            ),
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
        Self { addr, bodies, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    pub fn bodies(&self) -> Vec<String> {
        self.bodies.lock().unwrap().clone()
    }
}

/// Check a service-account assertion: RS256 over header.claims with the key of `pem`, for
/// the cloud-platform scope, addressed to `aud`, valid for an hour.
pub fn verify_jwt(jwt: &str, pem: &str, aud: &str) {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "{jwt}");
    let header: serde_json::Value = serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
    assert_eq!(header["alg"], "RS256");
    let claims: serde_json::Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
    assert_eq!(claims["aud"], aud);
    assert_eq!(claims["iss"], "keel-test@proj.iam.gserviceaccount.com");
    assert_eq!(
        claims["scope"],
        "https://www.googleapis.com/auth/cloud-platform"
    );
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        3600
    );
    let der_b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(der_b64)
        .unwrap();
    let key = ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
    use ring::signature::KeyPair as _;
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        key.public_key().as_ref().to_vec(),
    );
    let signed = format!("{}.{}", parts[0], parts[1]);
    public
        .verify(signed.as_bytes(), &b64.decode(parts[2]).unwrap())
        .expect("the assertion is signed with the service account's key");
}
