//! The AWS credential chain, each source against a fake on loopback: web identity at STS,
//! SSO's cached token at the portal, credential_process, the container endpoint, IMDSv2; and
//! the provider's refresh before expiry, on refusal, and shared by concurrent requests.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel_model::cloud::aws::chain::{resolve, Env};
use keel_model::cloud::aws::metadata::Container;
use keel_model::cloud::aws::process::Process;
use keel_model::cloud::aws::time::format_rfc3339;
use keel_model::cloud::aws::{CredentialsProvider, Source};
use keel_model::cloud::sigv4;
use keel_model::ApiErrorKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request the fake received.
#[derive(Clone, Debug)]
struct Req {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: String,
}

type Handler = dyn Fn(&Req) -> (u16, String) + Send + Sync;

/// A one-request-per-connection HTTP server on loopback that answers with `handler`.
struct Fake {
    base: String,
    seen: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    async fn start(handler: impl Fn(&Req) -> (u16, String) + Send + Sync + 'static) -> Self {
        Self::start_slow(Duration::ZERO, handler).await
    }

    /// Answers only after `delay` (so concurrent callers overlap for certain).
    async fn start_slow(
        delay: Duration,
        handler: impl Fn(&Req) -> (u16, String) + Send + Sync + 'static,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let s = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let (s, handler) = (s.clone(), handler.clone());
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else {
                        return;
                    };
                    s.lock().unwrap().push(req.clone());
                    tokio::time::sleep(delay).await;
                    let (status, body) = handler(&req);
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        Self { base, seen }
    }

    fn requests(&self) -> Vec<Req> {
        self.seen.lock().unwrap().clone()
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Req> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.lines();
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Req {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    })
}

fn rfc3339_in(secs: u64) -> String {
    format_rfc3339(SystemTime::now() + Duration::from_secs(secs))
}

fn env_of(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

fn provider(env: &[(&str, String)]) -> CredentialsProvider {
    let env = env_of(env);
    let env: Env<'_> = &env;
    CredentialsProvider::new(resolve(env, "us-west-2").unwrap().expect("a source"))
}

fn metadata_json(key: &str, expires_in: u64) -> String {
    format!(
        r#"{{"Code":"Success","AccessKeyId":"{key}","SecretAccessKey":"secret","Token":"token-{key}","Expiration":"{}"}}"#,
        rfc3339_in(expires_in)
    )
}

#[tokio::test]
async fn web_identity_trades_the_token_file_at_sts() {
    let sts = Fake::start(|r| {
        if !r.body.contains("WebIdentityToken=oidc-token") {
            return (400, "<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>bad token</Message></Error></ErrorResponse>".into());
        }
        (200, format!(
            "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAWEB</AccessKeyId><SecretAccessKey>s&amp;1</SecretAccessKey><SessionToken>tok</SessionToken><Expiration>{}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
            rfc3339_in(3600)
        ))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "oidc-token\n").unwrap();
    let env = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.display().to_string()),
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::123456789012:role/ci".to_owned(),
        ),
        ("AWS_ROLE_SESSION_NAME", "build-7".to_owned()),
        ("AWS_ENDPOINT_URL_STS", sts.base.clone()),
    ];
    let p = provider(&env);
    let c = p.credentials().await.unwrap();
    assert_eq!(
        (
            c.access_key_id.as_str(),
            c.secret_access_key.as_str(),
            c.session_token.as_deref()
        ),
        ("ASIAWEB", "s&1", Some("tok"))
    );
    let r = &sts.requests()[0];
    assert_eq!(r.method, "POST");
    assert!(
        r.body.contains("Action=AssumeRoleWithWebIdentity"),
        "{}",
        r.body
    );
    assert!(
        r.body
            .contains("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fci"),
        "{}",
        r.body
    );
    assert!(r.body.contains("RoleSessionName=build-7"), "{}", r.body);
    assert!(
        !r.headers.contains_key("authorization"),
        "the call is not signed"
    );
    // A token STS refuses: the error names STS's code and what to check.
    std::fs::write(&token, "stale").unwrap();
    let e = provider(&env).credentials().await.unwrap_err();
    assert_eq!(e.kind, ApiErrorKind::Config);
    assert!(
        e.message.contains("InvalidIdentityToken") && e.message.contains("AWS_ROLE_ARN"),
        "{e}"
    );
    // Half the pair is an error naming the other half.
    let half = env_of(&[("AWS_WEB_IDENTITY_TOKEN_FILE", "/t".to_owned())]);
    let e = resolve(&half, "us-east-1").unwrap_err();
    assert!(e.message.contains("AWS_ROLE_ARN"), "{e}");
}

/// SHA-1 of the session name `corp`: the name of its token cache file.
const CORP_SHA1: &str = "ee0bfd2552fbd840c02cc48b6e823320543c450f";

fn sso_home(cache_expires: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let aws = home.path().join(".aws");
    std::fs::create_dir_all(aws.join("sso/cache")).unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile dev]\nsso_session = corp\nsso_account_id = 123456789012\nsso_role_name = Developer\n\n[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = eu-west-1\n",
    )
    .unwrap();
    std::fs::write(
        aws.join(format!("sso/cache/{CORP_SHA1}.json")),
        format!(r#"{{"accessToken":"sso-access","expiresAt":"{cache_expires}","region":"eu-west-1","startUrl":"https://corp.awsapps.com/start"}}"#),
    )
    .unwrap();
    home
}

#[tokio::test]
async fn sso_reads_the_cached_token_and_asks_the_portal() {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 3_600_000;
    let portal = Fake::start(move |r| {
        if r.headers.get("x-amz-sso_bearer_token").map(String::as_str) != Some("sso-access") {
            return (401, r#"{"message":"Session token not found or invalid"}"#.into());
        }
        (200, format!(r#"{{"roleCredentials":{{"accessKeyId":"ASIASSO","secretAccessKey":"s","sessionToken":"t","expiration":{ms}}}}}"#))
    })
    .await;
    let home = sso_home(&rfc3339_in(3600));
    let env = [
        ("HOME", home.path().display().to_string()),
        ("AWS_PROFILE", "dev".to_owned()),
        ("AWS_ENDPOINT_URL_SSO", portal.base.clone()),
    ];
    let c = provider(&env).credentials().await.unwrap();
    assert_eq!(c.access_key_id, "ASIASSO");
    let r = &portal.requests()[0];
    assert_eq!(r.method, "GET");
    assert_eq!(
        r.path,
        "/federation/credentials?account_id=123456789012&role_name=Developer"
    );
    // An expired token: no request, and the login to run.
    let home = sso_home("2020-01-01T00:00:00Z");
    let env = [
        ("HOME", home.path().display().to_string()),
        ("AWS_PROFILE", "dev".to_owned()),
        ("AWS_ENDPOINT_URL_SSO", portal.base.clone()),
    ];
    let e = provider(&env).credentials().await.unwrap_err();
    assert!(
        e.message.contains("expired") && e.message.contains("aws sso login --sso-session corp"),
        "{e}"
    );
    assert_eq!(portal.requests().len(), 1);
    // No cached token at all.
    std::fs::remove_file(home.path().join(format!(".aws/sso/cache/{CORP_SHA1}.json"))).unwrap();
    let e = provider(&env).credentials().await.unwrap_err();
    assert!(e.message.contains("no SSO token is cached"), "{e}");
}

fn process(script: &str, timeout: Duration) -> (tempfile::TempDir, CredentialsProvider) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("creds.sh");
    std::fs::write(&path, script).unwrap();
    let p = CredentialsProvider::new(Source::Process(Process {
        profile: "proc".into(),
        command: format!("sh '{}'", path.display()),
        timeout,
    }));
    (dir, p)
}

#[tokio::test]
async fn credential_process_json_version_1_and_its_failures() {
    let far = rfc3339_in(3600);
    let (_d, p) = process(
        &format!(
            r#"echo '{{"Version":1,"AccessKeyId":"ASIAPROC","SecretAccessKey":"s","SessionToken":"t","Expiration":"{far}"}}'"#
        ),
        Duration::from_secs(20),
    );
    assert_eq!(p.credentials().await.unwrap().access_key_id, "ASIAPROC");
    for (script, needle) in [
        ("echo not json", "did not print JSON"),
        (
            r#"echo '{"Version":2,"AccessKeyId":"A1B2","SecretAccessKey":"s"}'"#,
            "Version",
        ),
        (
            r#"echo '{"Version":1,"SecretAccessKey":"s"}'"#,
            "access key id",
        ),
        (
            r#"echo '{"Version":1,"AccessKeyId":"A1B2","SecretAccessKey":"s","Expiration":"later"}'"#,
            "RFC 3339",
        ),
        (
            r#"echo '{"Version":1,"AccessKeyId":"A1B2","SecretAccessKey":"s","Expiration":"2020-01-01T00:00:00Z"}'"#,
            "already expired",
        ),
        (
            "echo 'token expired, log in again' >&2; exit 3",
            "log in again",
        ),
        ("head -c 200000 /dev/zero | tr '\\0' x", "more than"),
    ] {
        let (_d, p) = process(script, Duration::from_secs(20));
        let e = p.credentials().await.unwrap_err();
        assert!(e.message.contains(needle), "{script}: {e}");
        assert!(e.message.contains("credential_process"), "{e}");
    }
}

#[tokio::test]
async fn a_credential_process_that_hangs_is_stopped_at_its_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let (_d, p) = process(
        &format!("echo $$ > '{}'; exec sleep 300", pidfile.display()),
        Duration::from_millis(1500),
    );
    let started = std::time::Instant::now();
    let e = p.credentials().await.unwrap_err();
    assert!(e.message.contains("did not finish within"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(60));
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    assert!(
        eventually(|| !alive(&pid)).await,
        "the credential process {pid} is still running"
    );
}

#[tokio::test]
async fn a_cancelled_request_kills_the_credential_process_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let (_d, p) = process(
        &format!("echo $$ > '{}'; exec sleep 300", pidfile.display()),
        Duration::from_secs(60),
    );
    let mut fetch = Box::pin(p.credentials());
    // Poll until the process has written its pid, then drop the request (the interrupt).
    let wait_pid = async {
        while !std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n')) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = &mut fetch => panic!("the process cannot have answered"),
        _ = tokio::time::timeout(Duration::from_secs(20), wait_pid) => {}
    }
    drop(fetch);
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    assert!(
        eventually(|| !alive(&pid)).await,
        "{pid} survived the cancel"
    );
}

fn alive(pid: &str) -> bool {
    // A zombie has been killed; only its parent's reaping is pending.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

async fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn container_credentials_with_an_authorization_token() {
    let fake = Fake::start(
        |r| match r.headers.get("authorization").map(String::as_str) {
            Some("Bearer from-file") | Some("inline-token") => {
                (200, metadata_json("ASIACONT", 3600))
            }
            _ => (401, "no".into()),
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "Bearer from-file\n").unwrap();
    // FULL_URI on loopback, the token from a file (wins over the inline one).
    let env = [
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/v1/credentials", fake.base),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN",
            "inline-token".to_owned(),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            token_file.display().to_string(),
        ),
    ];
    let c = provider(&env).credentials().await.unwrap();
    assert_eq!(c.session_token.as_deref(), Some("token-ASIACONT"));
    assert_eq!(fake.requests()[0].path, "/v1/credentials");
    assert_eq!(
        fake.requests()[0].headers["authorization"],
        "Bearer from-file"
    );
    // RELATIVE_URI goes to ECS's address; the same request shape against the fake.
    let env = env_of(&[(
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "/v2/credentials/abc".to_owned(),
    )]);
    match resolve(&env, "us-east-1").unwrap() {
        Some(Source::Container(c)) => assert_eq!(c.url, "http://169.254.170.2/v2/credentials/abc"),
        other => panic!("{other:?}"),
    }
    let p = CredentialsProvider::new(Source::Container(Container {
        url: format!("{}/v2/credentials/abc", fake.base),
        token: Some("inline-token".into()),
        token_file: None,
    }));
    assert_eq!(p.credentials().await.unwrap().access_key_id, "ASIACONT");
    // A wrong token: the endpoint's refusal, named.
    let p = CredentialsProvider::new(Source::Container(Container {
        url: format!("{}/v2/credentials/abc", fake.base),
        token: Some("wrong".into()),
        token_file: None,
    }));
    let e = p.credentials().await.unwrap_err();
    assert!(
        e.message.contains("HTTP 401") && e.message.contains("container credentials"),
        "{e}"
    );
    // A FULL_URI sending credentials in the clear to another host is refused up front.
    let env = env_of(&[(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "http://203.0.113.9/creds".to_owned(),
    )]);
    let e = resolve(&env, "us-east-1").unwrap_err();
    assert!(
        e.message.contains("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        "{e}"
    );
}

#[tokio::test]
async fn imds_v2_takes_a_session_token_first() {
    let fake = Fake::start(|r| {
        let token = r
            .headers
            .get("x-aws-ec2-metadata-token")
            .map(String::as_str);
        match (r.method.as_str(), r.path.as_str()) {
            ("PUT", "/latest/api/token") => {
                if r.headers
                    .contains_key("x-aws-ec2-metadata-token-ttl-seconds")
                {
                    (200, "imds-session".into())
                } else {
                    (400, String::new())
                }
            }
            (_, _) if token != Some("imds-session") => (401, String::new()),
            ("GET", "/latest/meta-data/iam/security-credentials/") => (200, "web-role\n".into()),
            ("GET", "/latest/meta-data/iam/security-credentials/web-role") => {
                (200, metadata_json("ASIAIMDS", 3600))
            }
            _ => (404, String::new()),
        }
    })
    .await;
    let env = [("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.base.clone())];
    let c = provider(&env).credentials().await.unwrap();
    assert_eq!(c.access_key_id, "ASIAIMDS");
    let methods: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        methods,
        [
            "PUT /latest/api/token",
            "GET /latest/meta-data/iam/security-credentials/",
            "GET /latest/meta-data/iam/security-credentials/web-role"
        ]
    );
    // Disabled: the chain ends without it.
    let env = env_of(&[
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.base.clone()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("HOME", "/nonexistent".to_owned()),
    ]);
    assert!(resolve(&env, "us-east-1").unwrap().is_none());
}

#[tokio::test]
async fn credentials_are_refreshed_before_they_expire_and_not_before() {
    let n = Arc::new(Mutex::new(0u32));
    let (n2, lifetime) = (n.clone(), Arc::new(Mutex::new(120u64)));
    let l2 = lifetime.clone();
    let fake = Fake::start(move |_| {
        let mut n = n2.lock().unwrap();
        *n += 1;
        (200, metadata_json(&format!("ASIA{n}"), *l2.lock().unwrap()))
    })
    .await;
    let env = [(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        format!("{}/c", fake.base),
    )];
    // Two minutes left is inside the five-minute margin: every use fetches anew.
    let p = provider(&env);
    assert_eq!(p.credentials().await.unwrap().access_key_id, "ASIA1");
    assert_eq!(p.credentials().await.unwrap().access_key_id, "ASIA2");
    assert_eq!(p.fetches(), 2);
    // An hour left: cached.
    *lifetime.lock().unwrap() = 3600;
    let p = provider(&env);
    let first = p.credentials().await.unwrap();
    assert_eq!(p.credentials().await.unwrap(), first);
    assert_eq!(p.fetches(), 1);
    // Refused by AWS: forgotten, and the next use fetches.
    p.invalidate(&first);
    assert_ne!(p.credentials().await.unwrap(), first);
    assert_eq!(p.fetches(), 2);
}

#[tokio::test]
async fn concurrent_requests_share_one_refresh() {
    let fake = Fake::start_slow(Duration::from_millis(300), |_| {
        (200, metadata_json("ASIASHARED", 3600))
    })
    .await;
    let env = [(
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        format!("{}/c", fake.base),
    )];
    let p = provider(&env);
    // join! polls all eight before any can finish: they all find the one fetch in flight.
    let (a, b, c, d, e, f, g, h) = tokio::join!(
        p.credentials(),
        p.credentials(),
        p.credentials(),
        p.credentials(),
        p.credentials(),
        p.credentials(),
        p.credentials(),
        p.credentials()
    );
    for r in [a, b, c, d, e, f, g, h] {
        assert_eq!(r.unwrap().access_key_id, "ASIASHARED");
    }
    assert_eq!(p.fetches(), 1);
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn the_chain_takes_the_environment_first_and_names_a_missing_profile() {
    let dir = tempfile::tempdir().unwrap();
    let env = env_of(&[
        ("AWS_ACCESS_KEY_ID", "AKIDENV".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "s".to_owned()),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t".to_owned()),
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::123456789012:role/x".to_owned(),
        ),
    ]);
    assert!(matches!(
        resolve(&env, "us-east-1").unwrap(),
        Some(Source::Static(_))
    ));
    let env = env_of(&[
        ("HOME", dir.path().display().to_string()),
        ("AWS_PROFILE", "missing".to_owned()),
    ]);
    let e = resolve(&env, "us-east-1").unwrap_err();
    assert!(
        e.message.contains("\"missing\"") && e.message.contains("AWS_PROFILE"),
        "{e}"
    );
    // A profile with credential_process, and one assuming a role from another profile.
    std::fs::create_dir_all(dir.path().join(".aws")).unwrap();
    std::fs::write(
        dir.path().join(".aws/config"),
        "[profile p]\ncredential_process = /bin/creds --json\n[profile r]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = p\n",
    )
    .unwrap();
    let env = env_of(&[
        ("HOME", dir.path().display().to_string()),
        ("AWS_PROFILE", "p".to_owned()),
    ]);
    assert!(matches!(
        resolve(&env, "us-east-1").unwrap(),
        Some(Source::Process(_))
    ));
    let env = env_of(&[
        ("HOME", dir.path().display().to_string()),
        ("AWS_PROFILE", "r".to_owned()),
    ]);
    match resolve(&env, "us-east-1").unwrap() {
        Some(Source::AssumeRole(a)) => assert!(matches!(*a.source, Source::Process(_))),
        other => panic!("{other:?}"),
    }
}

#[test]
fn role_profiles_that_cannot_work_are_named_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".aws")).unwrap();
    std::fs::write(
        dir.path().join(".aws/config"),
        "[profile mfa]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = base\nmfa_serial = arn:aws:iam::123456789012:mfa/me\n\
         [profile gone]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = nowhere\n\
         [profile a]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = b\n\
         [profile b]\nrole_arn = arn:aws:iam::123456789012:role/b\nsource_profile = a\n\
         [profile long]\nrole_arn = arn:aws:iam::123456789012:role/x\ncredential_source = Ec2InstanceMetadata\nduration_seconds = 99999\n\
         [profile both]\nrole_arn = arn:aws:iam::123456789012:role/x\ncredential_source = Environment\nsource_profile = a\n",
    )
    .unwrap();
    for (profile, needle) in [
        ("mfa", "mfa_serial"),
        ("gone", "\"nowhere\""),
        ("a", "more than 5 roles deep"),
        ("long", "duration_seconds"),
        ("both", "keep one"),
    ] {
        let env = env_of(&[
            ("HOME", dir.path().display().to_string()),
            ("AWS_PROFILE", profile.to_owned()),
        ]);
        let e = resolve(&env, "us-east-1").unwrap_err();
        assert!(e.message.contains(needle), "{profile}: {e}");
    }
}

#[tokio::test]
async fn a_role_is_assumed_with_a_signed_sts_call_by_the_source_profiles_keys() {
    let sts = Fake::start(|_| {
        (200, format!(
            "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>ASIAROLE</AccessKeyId><SecretAccessKey>rs</SecretAccessKey><SessionToken>rt</SessionToken><Expiration>{}</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>",
            rfc3339_in(3600)
        ))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".aws")).unwrap();
    std::fs::write(
        dir.path().join(".aws/credentials"),
        "[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = base-secret\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".aws/config"),
        "[profile deploy]\nrole_arn = arn:aws:iam::123456789012:role/deploy\nsource_profile = base\nrole_session_name = me\nexternal_id = ext-42\nduration_seconds = 1800\n",
    )
    .unwrap();
    let env = [
        ("HOME", dir.path().display().to_string()),
        ("AWS_PROFILE", "deploy".to_owned()),
        ("AWS_ENDPOINT_URL_STS", sts.base.clone()),
    ];
    let c = provider(&env).credentials().await.unwrap();
    assert_eq!(
        (c.access_key_id.as_str(), c.session_token.as_deref()),
        ("ASIAROLE", Some("rt"))
    );
    let r = &sts.requests()[0];
    for field in [
        "Action=AssumeRole&",
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fdeploy",
        "RoleSessionName=me",
        "ExternalId=ext-42",
        "DurationSeconds=1800",
    ] {
        assert!(r.body.contains(field), "{field}: {}", r.body);
    }
    // The signature is the one the base profile's keys give for what was sent.
    let headers = [
        ("content-type", r.headers["content-type"].as_str()),
        ("host", r.headers["host"].as_str()),
        ("x-amz-date", r.headers["x-amz-date"].as_str()),
    ];
    let sig = sigv4::sign(
        &sigv4::Request {
            method: "POST",
            path: "/",
            query: "",
            headers: &headers,
            payload: r.body.as_bytes(),
        },
        &sigv4::Credentials {
            access_key_id: "AKIDBASE".into(),
            secret_access_key: "base-secret".into(),
            session_token: None,
        },
        &r.headers["x-amz-date"],
        "us-west-2",
        "sts",
    );
    assert_eq!(r.headers["authorization"], sig.authorization);
}

#[tokio::test]
async fn an_expired_sso_session_token_is_refreshed_and_the_cache_updated() {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 3_600_000;
    let portal = Fake::start(move |r| {
        if r.headers.get("x-amz-sso_bearer_token").map(String::as_str) != Some("fresh-access") {
            return (401, r#"{"message":"Session token not found or invalid"}"#.into());
        }
        (200, format!(r#"{{"roleCredentials":{{"accessKeyId":"ASIASSO2","secretAccessKey":"s","sessionToken":"t","expiration":{ms}}}}}"#))
    })
    .await;
    let oidc = Fake::start(|r| {
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
        if r.path == "/token"
            && v["grantType"] == "refresh_token"
            && v["refreshToken"] == "refresh-1"
            && v["clientId"] == "client"
        {
            (200, r#"{"accessToken":"fresh-access","expiresIn":3600,"refreshToken":"refresh-2","tokenType":"Bearer"}"#.into())
        } else {
            (400, r#"{"error":"invalid_grant"}"#.into())
        }
    })
    .await;
    let home = sso_home("2020-01-01T00:00:00Z");
    let cache = home.path().join(format!(".aws/sso/cache/{CORP_SHA1}.json"));
    std::fs::write(
        &cache,
        r#"{"accessToken":"old-access","expiresAt":"2020-01-01T00:00:00Z","refreshToken":"refresh-1","clientId":"client","clientSecret":"secret","registrationExpiresAt":"2099-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    let env = [
        ("HOME", home.path().display().to_string()),
        ("AWS_PROFILE", "dev".to_owned()),
        ("AWS_ENDPOINT_URL_SSO", portal.base.clone()),
        ("AWS_ENDPOINT_URL_SSO_OIDC", oidc.base.clone()),
    ];
    assert_eq!(
        provider(&env).credentials().await.unwrap().access_key_id,
        "ASIASSO2"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(saved["accessToken"], "fresh-access");
    assert_eq!(saved["refreshToken"], "refresh-2");
    assert_eq!(
        saved["clientSecret"], "secret",
        "the rest of the entry is kept"
    );
    // A refresh token the service refuses: the login to run, and why.
    std::fs::write(
        &cache,
        r#"{"accessToken":"old-access","expiresAt":"2020-01-01T00:00:00Z","refreshToken":"revoked","clientId":"client","clientSecret":"secret"}"#,
    )
    .unwrap();
    let e = provider(&env).credentials().await.unwrap_err();
    assert!(
        e.message.contains("could not be refreshed")
            && e.message.contains("HTTP 400")
            && e.message.contains("aws sso login --sso-session corp"),
        "{e}"
    );
}
