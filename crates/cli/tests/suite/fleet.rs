//! Fleet-friendly behaviour: stdout as a liveness signal (`KEEL_HEARTBEAT_MS`), and
//! transcripts in object storage (`KEEL_TRANSCRIPT_URL`) so a session moves between machines.
//! See docs/scale.md; retries spread for fleets are proved in `keel_core::retry`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::common::{kinds, Harness, Live, Run};

fn long_command() -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "sleep 2"}}]},
        {"kind": "text", "text": "done"}
    ]})
    .to_string()
}

#[tokio::test]
async fn heartbeats_say_what_runs_while_stdout_would_be_silent() {
    let h = Harness::from_json(&long_command()).await;
    let run = h
        .run_stream(
            "wait",
            &["--allowedTools", "Bash"],
            &[("KEEL_HEARTBEAT_MS", "200")],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let order = kinds(&run.frames);
    let call = order.iter().position(|k| k == "assistant").unwrap();
    let answered = order.iter().position(|k| k == "user").unwrap();
    let beats: Vec<usize> = (call..answered)
        .filter(|i| order[*i] == "system/heartbeat")
        .collect();
    assert!(
        beats.len() >= 2,
        "a 2 s command with a 200 ms heartbeat: {order:?}"
    );
    let sid = run.result()["session_id"].clone();
    for i in &beats {
        let b = &run.frames[*i];
        assert_eq!(b["running"], json!(["Bash"]), "{b}");
        assert!(b["silent_ms"].as_u64().unwrap() >= 200, "{b}");
        assert_eq!(b["session_id"], sid);
    }
}

#[tokio::test]
async fn no_heartbeat_between_turns_of_a_streaming_session() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "text", "text": "one", "match": {"last_user_contains": "first"}},
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "sleep 1"}}],
             "match": {"last_user_contains": "second"}},
            {"kind": "text", "text": "two"}
        ]})
        .to_string(),
    )
    .await;
    let mut s = super::common::Stream::start(
        &h,
        &["--allowedTools", "Bash"],
        &[("KEEL_HEARTBEAT_MS", "100")],
    );
    s.user("first").await;
    s.result().await;
    // The session idles between turns for many heartbeat intervals: stdout stays quiet.
    tokio::time::sleep(Duration::from_millis(800)).await;
    s.user("second").await;
    s.result().await;
    let run = s.finish().await;
    let order = kinds(&run.frames);
    let first_result = order.iter().position(|k| k == "result").unwrap();
    let next_init = first_result
        + order[first_result..]
            .iter()
            .position(|k| k == "system/init")
            .unwrap();
    assert!(
        !order[first_result..next_init].contains(&"system/heartbeat".to_owned()),
        "a heartbeat between turns: {order:?}"
    );
    // Heartbeats are on in this session: the second turn's command got them.
    assert!(
        order[next_init..].contains(&"system/heartbeat".to_owned()),
        "{order:?}"
    );
}

#[tokio::test]
async fn no_heartbeat_unless_asked_and_a_bad_interval_is_a_usage_error() {
    let h = Harness::from_json(&long_command()).await;
    let run = h.run_stream("wait", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(!kinds(&run.frames).iter().any(|k| k == "system/heartbeat"));
    for bad in ["5", "soon", "99999999999"] {
        let run = h
            .run_stream("wait", &[], &[("KEEL_HEARTBEAT_MS", bad)])
            .await;
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(run.stderr.contains("KEEL_HEARTBEAT_MS"), "{}", run.stderr);
        assert!(run.stdout.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Transcripts in object storage (KEEL_TRANSCRIPT_URL)

/// A "machine": its own working directory and home (so its own transcript store).
struct Node {
    cwd: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Node {
    fn new() -> Self {
        Self {
            cwd: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, h: &Harness, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
        let mut c = h.command(args, env);
        c.current_dir(self.cwd.path())
            .env("HOME", self.home.path())
            .env("KEEL_HOME", self.home.path().join("keel"));
        c
    }

    async fn run(&self, h: &Harness, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            self.command(h, args, env)
                .spawn()
                .unwrap()
                .wait_with_output(),
        )
        .await
        .expect("keel finished within 120 s")
        .unwrap();
        Run::new(
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// Every transcript file under this node's home.
    fn transcripts(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let projects = self.home.path().join("keel/projects");
        for d in std::fs::read_dir(projects).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
                if f.path().extension().is_some_and(|e| e == "jsonl") {
                    out.push(f.path());
                }
            }
        }
        out
    }
}

fn stream(prompt: &str) -> Vec<&str> {
    vec![
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "Bash",
    ]
}

/// The parts of session `sid` in a `file://` store at `root` (under any project key), in
/// order, and the project key they are under.
fn remote_parts(root: &Path, sid: &str) -> (String, Vec<PathBuf>) {
    for project in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let dir = project.path().join(sid);
        if dir.is_dir() {
            let mut parts: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            parts.sort();
            return (project.file_name().to_string_lossy().into_owned(), parts);
        }
    }
    (String::new(), Vec::new())
}

const TWO_RUNS: &str = r#"{"steps":[
    {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo remembered-42"}}],"match":{"last_user_contains":"start"}},
    {"kind":"text","text":"first run done","match":{"last_user_contains":"remembered-42"}},
    {"kind":"text","text":"resumed with my history","match":{"last_user_contains":"go on"}}]}"#;

#[tokio::test]
async fn a_session_moves_to_another_machine_through_the_store() {
    let h = Harness::from_json(TWO_RUNS).await;
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("file://{}", bucket.path().display());
    let env = [("KEEL_TRANSCRIPT_URL", url.as_str())];
    let (a, b) = (Node::new(), Node::new());
    let first = a.run(&h, &stream("start"), &env).await;
    first.assert_end("success", false, "completed", 0);
    let r = first.result();
    let sid = r["session_id"].as_str().unwrap().to_owned();
    assert_eq!(r["transcript_remote_current"], true, "{r}");
    // The store holds the session in the agent SDKs' layout: parts under its project key,
    // which together are the local transcript, ending with the run's result.
    let local_file = a.transcripts()[0].clone();
    let project = local_file
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(r["transcript_url"], format!("{url}/{project}/{sid}/"));
    let (stored_under, parts) = remote_parts(bucket.path(), &sid);
    assert_eq!(stored_under, project);
    assert!(!parts.is_empty());
    for p in &parts {
        let name = p.file_name().unwrap().to_string_lossy();
        assert!(
            name.starts_with("part-") && name.ends_with(".jsonl"),
            "{name}"
        );
    }
    let copy: String = parts
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let local = std::fs::read_to_string(&local_file).unwrap();
    assert_eq!(copy, local, "the parts together are the local transcript");
    assert!(copy.contains("remembered-42") && copy.contains("\"type\":\"result\""));

    // Machine B has never seen the session: --resume fetches it, and the model gets the history.
    assert!(b.transcripts().is_empty());
    let mut args = stream("go on");
    args.extend(["--resume", &sid]);
    let second = b.run(&h, &args, &env).await;
    second.assert_end("success", false, "completed", 0);
    assert_eq!(second.result()["session_id"], sid.as_str());
    assert_eq!(second.result()["result"], "resumed with my history");
    let last = h.requests().pop().unwrap();
    assert!(
        last.body.to_string().contains("remembered-42"),
        "the history came along"
    );
    assert_eq!(b.transcripts().len(), 1);
    // B went on where the session is in the store (A's project key), adding only its turn.
    let (under, parts_after) = remote_parts(bucket.path(), &sid);
    assert_eq!(under, project, "one place in the store");
    assert!(parts_after.len() > parts.len());
    let copy: String = parts_after
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(copy, std::fs::read_to_string(&b.transcripts()[0]).unwrap());
}

fn pairs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// A store the transcripts go to: a shared directory, or moto's S3 server.
enum Store {
    Dir(tempfile::TempDir),
    S3 {
        _server: tokio::process::Child,
        endpoint: String,
    },
}

impl Store {
    fn dir() -> Self {
        Store::Dir(tempfile::tempdir().unwrap())
    }

    /// moto's S3 server on a free loopback port, with a bucket `keel-fleet`. The tests that
    /// use it are ignored by default; run without moto they fail, saying how to get it.
    async fn s3() -> Self {
        let moto = moto_server().expect(
            "needs moto_server: set KEEL_TEST_MOTO_SERVER or put moto_server on PATH \
             (tests/object-store/run.sh installs it and runs these tests)",
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = tokio::process::Command::new(&moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("moto_server starts");
        let endpoint = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        // Wait (bounded) until the server answers, then make the bucket.
        let mut made = false;
        for _ in 0..300 {
            if let Ok(r) = http.put(format!("{endpoint}/keel-fleet")).send().await {
                made = r.status().is_success();
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(made, "moto made the bucket");
        Store::S3 {
            _server: server,
            endpoint,
        }
    }

    fn env(&self) -> Vec<(String, String)> {
        match self {
            Store::Dir(d) => vec![(
                "KEEL_TRANSCRIPT_URL".into(),
                format!("file://{}", d.path().display()),
            )],
            Store::S3 { endpoint, .. } => vec![
                (
                    "KEEL_TRANSCRIPT_URL".into(),
                    "s3://keel-fleet/sessions".into(),
                ),
                ("AWS_ENDPOINT_URL".into(), endpoint.clone()),
                ("AWS_ALLOW_HTTP".into(), "true".into()),
                ("AWS_ACCESS_KEY_ID".into(), "test".into()),
                ("AWS_SECRET_ACCESS_KEY".into(), "test".into()),
            ],
        }
    }

    /// The session's parts (keys relative to the store's prefix) and their sizes, in order.
    async fn parts(&self, sid: &str) -> Vec<(String, u64)> {
        match self {
            Store::Dir(d) => {
                let (project, parts) = remote_parts(d.path(), sid);
                parts
                    .iter()
                    .map(|p| {
                        let name = p.file_name().unwrap().to_string_lossy();
                        (
                            format!("{project}/{sid}/{name}"),
                            p.metadata().unwrap().len(),
                        )
                    })
                    .collect()
            }
            Store::S3 { endpoint, .. } => {
                // Listing needs no signature (reading objects back is what --resume does).
                let listing = reqwest::get(format!(
                    "{endpoint}/keel-fleet?list-type=2&prefix=sessions/"
                ))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
                let mut parts: Vec<(String, u64)> = listing
                    .split("<Contents>")
                    .skip(1)
                    .filter_map(|c| {
                        let key = c.split("<Key>").nth(1)?.split("</Key>").next()?;
                        let size = c.split("<Size>").nth(1)?.split("</Size>").next()?;
                        Some((
                            key.strip_prefix("sessions/")?.to_owned(),
                            size.parse().ok()?,
                        ))
                    })
                    .filter(|(k, _)| k.contains(&format!("/{sid}/part-")))
                    .collect();
                parts.sort();
                parts
            }
        }
    }

    /// How many bytes of the session's transcript the store holds (its parts are the local
    /// file's bytes, in order).
    async fn stored_bytes(&self, sid: &str) -> u64 {
        self.parts(sid).await.iter().map(|(_, n)| n).sum()
    }
}

/// Killed with SIGKILL while its second command runs, the session resumes on another machine
/// with what it had when its second model request went out: the first command's output.
async fn killed_session_resumes_elsewhere(store: Store) {
    let h = Harness::from_json(
        r#"{"steps":[
        {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo remembered-42"}}],"match":{"last_user_contains":"start"}},
        {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"sleep 600"}}],"match":{"last_user_contains":"remembered-42"}},
        {"kind":"text","text":"resumed with my history","match":{"last_user_contains":"go on"}}]}"#,
    )
    .await;
    let env_owned = store.env();
    let env = pairs(&env_owned);
    let (a, b) = (Node::new(), Node::new());
    let mut live = Live::spawn(a.command(&h, &stream("start"), &env));
    let init = live
        .wait_for(Duration::from_secs(30), |f| f["subtype"] == "init")
        .await;
    let sid = init["session_id"].as_str().unwrap().to_owned();
    // The second model request asked for an upload, which holds the first command's result:
    // the store has the local transcript at least up to the end of that line.
    let mut reached = false;
    for _ in 0..600 {
        let local = a.transcripts().first().map(std::fs::read_to_string);
        let needed = local.and_then(|t| {
            let t = t.ok()?;
            let at = t.find("remembered-42")?;
            Some(at + t[at..].find('\n')? + 1)
        });
        let stored = store.stored_bytes(&sid).await;
        if needed.is_some_and(|n| stored >= n as u64) {
            reached = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reached, "the first turn reached the store");
    live.signal(9);
    let killed = live.finish(Duration::from_secs(20)).await;
    assert_eq!(killed.code, -1, "killed by the signal: {}", killed.stderr);

    let mut args = stream("go on");
    args.extend(["--resume", &sid]);
    let resumed = b.run(&h, &args, &env).await;
    resumed.assert_end("success", false, "completed", 0);
    let last = h.requests().pop().unwrap();
    assert!(last.body.to_string().contains("remembered-42"));
    assert_eq!(last.validation_error, None, "a well-formed history");
}

#[tokio::test]
async fn a_session_killed_mid_turn_resumes_elsewhere_from_its_last_turn_boundary() {
    killed_session_resumes_elsewhere(Store::dir()).await;
}

#[tokio::test]
#[ignore = "needs moto_server (tests/object-store/run.sh)"]
async fn a_session_killed_mid_turn_resumes_elsewhere_from_an_s3_bucket() {
    killed_session_resumes_elsewhere(Store::s3().await).await;
}

#[tokio::test]
async fn an_unreachable_bucket_warns_and_loses_nothing_locally() {
    let h = Harness::from_json(TWO_RUNS).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let env = [
        ("KEEL_TRANSCRIPT_URL", "s3://keel-nowhere/runs"),
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ];
    let a = Node::new();
    let run = a.run(&h, &stream("start"), &env).await;
    run.assert_end("success", false, "completed", 0);
    let warnings = run.of("system/warning");
    assert_eq!(
        warnings.len(),
        1,
        "one warning, not one per turn: {warnings:?}"
    );
    assert!(warnings[0]["message"]
        .as_str()
        .unwrap()
        .contains("the local copy is intact"));
    let r = run.result();
    assert_eq!(r["transcript_remote_current"], false);
    assert!(
        r["transcript_remote_error"]
            .as_str()
            .unwrap()
            .contains("keel-nowhere"),
        "{r}"
    );
    let local = std::fs::read_to_string(&a.transcripts()[0]).unwrap();
    assert!(local.contains("remembered-42") && local.contains("first run done"));
}

#[tokio::test]
async fn a_bad_store_url_is_a_usage_error() {
    let h = Harness::from_json(TWO_RUNS).await;
    for bad in ["ftp://example/x", "not a url"] {
        let run = Node::new()
            .run(&h, &stream("start"), &[("KEEL_TRANSCRIPT_URL", bad)])
            .await;
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(run.stderr.contains("KEEL_TRANSCRIPT_URL"), "{}", run.stderr);
    }
    assert!(h.requests().is_empty());
}

/// moto's S3 server, when this machine has it (`.ci/run` installs it): the path in
/// `KEEL_TEST_MOTO_SERVER`, or `moto_server` on PATH.
fn moto_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEEL_TEST_MOTO_SERVER") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("moto_server"))
            .find(|p| p.is_file())
    })
}

#[tokio::test]
#[ignore = "needs moto_server (tests/object-store/run.sh)"]
async fn transcripts_go_to_an_s3_compatible_server_and_come_back() {
    let store = Store::s3().await;
    let h = Harness::from_json(TWO_RUNS).await;
    let env_owned = store.env();
    let env = pairs(&env_owned);
    let (a, b) = (Node::new(), Node::new());
    let first = a.run(&h, &stream("start"), &env).await;
    first.assert_end("success", false, "completed", 0);
    let sid = first.result()["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        first.result()["transcript_remote_current"],
        true,
        "{}",
        first.stdout
    );
    let url = first.result()["transcript_url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        url.starts_with("s3://keel-fleet/sessions/") && url.ends_with(&format!("/{sid}/")),
        "{url}"
    );
    // The bucket holds the session as parts, which together are the whole local transcript.
    let parts = store.parts(&sid).await;
    assert!(!parts.is_empty(), "{parts:?}");
    let local = std::fs::read(&a.transcripts()[0]).unwrap();
    assert_eq!(
        store.stored_bytes(&sid).await,
        local.len() as u64,
        "{parts:?}"
    );
    let mut args = stream("go on");
    args.extend(["--resume", &sid]);
    let second = b.run(&h, &args, &env).await;
    second.assert_end("success", false, "completed", 0);
    assert!(h
        .requests()
        .pop()
        .unwrap()
        .body
        .to_string()
        .contains("remembered-42"));
}
