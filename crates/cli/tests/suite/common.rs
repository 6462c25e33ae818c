//! Shared test harness: a keel-mock server, a scratch working directory and home, and helpers
//! to run `keel` and read its frames.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use keel_mock::{MockServer, RecordedRequest, Scenario};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// The keel binary under test.
pub fn keel_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_keel"))
}

/// keel-mcp's test MCP server, beside the keel binary: brought up to date through cargo once
/// per test process (a no-op when it is; and `cargo test -p keel-cli` works on its own).
/// `KEEL_MCP_TEST_SERVER` names one already built: `.ci/run` sets it to the server its
/// `cargo test --workspace --no-run` has just built, because `cargo build -p keel-mcp` alone
/// unifies other features and would compile keel-mcp and its dependencies again mid-run.
pub fn mcp_test_server() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(built) = std::env::var_os("KEEL_MCP_TEST_SERVER") {
            let built = PathBuf::from(built);
            assert!(
                built.is_file(),
                "KEEL_MCP_TEST_SERVER names no file: {}",
                built.display()
            );
            return built;
        }
        let dir = keel_bin()
            .parent()
            .expect("the keel binary's directory")
            .to_path_buf();
        let bin = dir.join("keel-mcp-test-server");
        // Built even when present: a stale server would test old behaviour.
        {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let mut cmd = std::process::Command::new(cargo);
            cmd.args([
                "build",
                "-p",
                "keel-mcp-test-server",
                "--bin",
                "keel-mcp-test-server",
            ])
            .current_dir(&root);
            if let Some(target) = dir.parent() {
                cmd.env("CARGO_TARGET_DIR", target);
            }
            let status = cmd
                .status()
                .expect("running cargo to build the MCP test server");
            assert!(
                status.success(),
                "building the MCP test server failed: {status}"
            );
        }
        assert!(bin.is_file(), "no MCP test server at {}", bin.display());
        bin
    })
    .clone()
}

/// A model API the failure-model tests run against; keel-mock serves all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    /// OpenAI's Responses API.
    OpenAi,
    /// OpenAI's Chat Completions API.
    OpenAiChat,
    /// Claude on Amazon Bedrock (SigV4-signed, event-stream frames).
    Bedrock,
    /// Claude on Google Vertex AI.
    Vertex,
}

impl Provider {
    /// keel's name for it (`KEEL_PROVIDER`).
    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::OpenAiChat => "openai-chat",
            Provider::Bedrock => "bedrock",
            Provider::Vertex => "vertex",
        }
    }

    /// Whether this provider serves Claude through the Messages API (Anthropic and the clouds).
    pub fn speaks_messages(self) -> bool {
        matches!(
            self,
            Provider::Anthropic | Provider::Bedrock | Provider::Vertex
        )
    }

    /// The model id the runs send.
    pub fn model(self) -> &'static str {
        match self {
            Provider::Anthropic => "claude-sonnet-4-5",
            Provider::OpenAi | Provider::OpenAiChat => "gpt-5",
            Provider::Bedrock => "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            Provider::Vertex => "claude-sonnet-4-5@20250929",
        }
    }

    /// The variable that holds its base URL.
    pub fn base_url_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::Bedrock => "ANTHROPIC_BEDROCK_BASE_URL",
            Provider::Vertex => "ANTHROPIC_VERTEX_BASE_URL",
            _ => "OPENAI_BASE_URL",
        }
    }

    /// The base URL of a server at `origin` (OpenAI's include the version).
    pub fn base_url(self, origin: &str) -> String {
        match self {
            Provider::Anthropic | Provider::Bedrock => origin.to_owned(),
            _ => format!("{origin}/v1"),
        }
    }

    /// The error type keel reports for a scenario's Messages API error type (OpenAI's bodies
    /// carry their own codes).
    pub fn error_type(self, messages_api_type: &str) -> String {
        let status = keel_mock::status_for_error_type(messages_api_type);
        match self {
            Provider::Anthropic => return messages_api_type.to_owned(),
            Provider::Bedrock => {
                return keel_mock::cloud::bedrock_error_type(status, messages_api_type)
            }
            Provider::Vertex => {
                let body = keel_mock::cloud::vertex_error_body(status, messages_api_type, "x");
                let e = &body["error"];
                return e["status"]
                    .as_str()
                    .or(e["type"].as_str())
                    .unwrap_or_default()
                    .to_owned();
            }
            Provider::OpenAi | Provider::OpenAiChat => {}
        }
        let body = keel_mock::openai::error_body(messages_api_type, "x");
        let e = &body["error"];
        e["code"]
            .as_str()
            .or(e["type"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

/// One test per provider for each scenario function named.
macro_rules! per_provider {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::super::common::Provider;
            #[tokio::test]
            async fn anthropic() {
                super::$name(Provider::Anthropic).await
            }
            #[tokio::test]
            async fn openai() {
                super::$name(Provider::OpenAi).await
            }
            #[tokio::test]
            async fn openai_chat() {
                super::$name(Provider::OpenAiChat).await
            }
            #[tokio::test]
            async fn bedrock() {
                super::$name(Provider::Bedrock).await
            }
            #[tokio::test]
            async fn vertex() {
                super::$name(Provider::Vertex).await
            }
        }
    )*};
}
pub(crate) use per_provider;

/// A mock server plus scratch directories.
pub struct Harness {
    pub mock: MockServer,
    pub dir: tempfile::TempDir,
    pub home: tempfile::TempDir,
    /// The API keel is pointed at (Anthropic unless a test says otherwise).
    pub provider: Provider,
}

impl Harness {
    pub async fn new(scenario: Scenario) -> Self {
        let mock = MockServer::start(scenario).await.expect("keel-mock starts");
        Self {
            mock,
            dir: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
            provider: Provider::Anthropic,
        }
    }

    pub async fn from_json(json: &str) -> Self {
        Self::new(Scenario::from_json(json).expect("scenario parses")).await
    }

    /// A harness whose runs talk to keel-mock through `provider`'s API.
    pub async fn for_provider(provider: Provider, json: &str) -> Self {
        let mut h = Self::from_json(json).await;
        h.provider = provider;
        h
    }

    /// Check a recorded request with the validator of the API it spoke.
    pub fn validate(&self, r: &RecordedRequest) -> Result<(), String> {
        match r.dialect.as_str() {
            "responses" => keel_mock::openai::validate_responses(&r.body),
            "chat" => keel_mock::openai::validate_chat(&r.body),
            "bedrock" | "vertex" => keel_mock::validate_request(r.messages_view()),
            _ => keel_mock::validate_request(&r.body),
        }
    }

    /// The scratch working directory.
    pub fn cwd(&self) -> &Path {
        self.dir.path()
    }

    /// `KEEL_HOME` of the runs.
    pub fn keel_home(&self) -> PathBuf {
        self.home.path().join("keel")
    }

    /// A command for keel with the test environment (mock URL, fake key, scratch home).
    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(keel_bin());
        c.args(args)
            .current_dir(self.cwd())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("KEEL_HOME", self.keel_home())
            .env("ANTHROPIC_BASE_URL", self.mock.base_url())
            .env("ANTHROPIC_API_KEY", "sk-test-keel")
            .env("IS_SANDBOX", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        match self.provider {
            Provider::Bedrock => {
                c.env("KEEL_PROVIDER", "bedrock")
                    .env("KEEL_MODEL", self.provider.model())
                    .env("ANTHROPIC_BEDROCK_BASE_URL", self.mock.base_url())
                    .env("AWS_REGION", "us-west-2")
                    .env("AWS_ACCESS_KEY_ID", "AKIDTEST")
                    .env("AWS_SECRET_ACCESS_KEY", "secret-test-key");
            }
            Provider::Vertex => {
                c.env("KEEL_PROVIDER", "vertex")
                    .env("KEEL_MODEL", self.provider.model())
                    .env(
                        "ANTHROPIC_VERTEX_BASE_URL",
                        format!("{}/v1", self.mock.base_url()),
                    )
                    .env("ANTHROPIC_VERTEX_PROJECT_ID", "keel-test")
                    .env("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1");
            }
            _ => {}
        }
        if !self.provider.speaks_messages() {
            c.env("KEEL_PROVIDER", self.provider.name())
                .env("KEEL_MODEL", "gpt-5")
                .env(
                    "OPENAI_BASE_URL",
                    self.provider.base_url(&self.mock.base_url()),
                )
                .env("OPENAI_API_KEY", "sk-test-keel");
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    /// Run keel to completion (bounded: a hung keel fails the test instead of hanging it).
    pub async fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let child = self.command(args, env).spawn().expect("keel starts");
        let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("keel finished within 120 s")
            .expect("keel ran");
        Run::new(
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// `keel -p PROMPT --output-format stream-json --verbose` plus `extra` flags.
    pub async fn run_stream(&self, prompt: &str, extra: &[&str], env: &[(&str, &str)]) -> Run {
        let mut args = vec!["-p", prompt, "--output-format", "stream-json", "--verbose"];
        args.extend_from_slice(extra);
        self.run(&args, env).await
    }

    /// Start `keel -p PROMPT --output-format stream-json --verbose` plus `extra` flags, reading
    /// its frames as they come.
    pub fn live_stream(&self, prompt: &str, extra: &[&str], env: &[(&str, &str)]) -> Live {
        let mut args = vec!["-p", prompt, "--output-format", "stream-json", "--verbose"];
        args.extend_from_slice(extra);
        Live::spawn(self.command(&args, env))
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.mock
            .requests()
            .into_iter()
            .filter(|r| {
                (r.path.starts_with("/v1/messages")
                    || r.path.starts_with("/v1/responses")
                    || r.path.starts_with("/v1/chat/completions")
                    || r.dialect == "bedrock"
                    || r.dialect == "vertex")
                    && !r.path.contains("count_tokens")
            })
            .collect()
    }
}

/// A finished keel run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub frames: Vec<Value>,
}

impl Run {
    pub fn new(code: i32, stdout: String, stderr: String) -> Self {
        let frames = stdout
            .lines()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        Self {
            code,
            stdout,
            stderr,
            frames,
        }
    }

    /// Frames of a `type` (and `subtype`, for system frames: "system/api_retry").
    pub fn of(&self, kind: &str) -> Vec<&Value> {
        let (t, sub) = kind
            .split_once('/')
            .map(|(a, b)| (a, Some(b)))
            .unwrap_or((kind, None));
        self.frames
            .iter()
            .filter(|f| f["type"] == t && sub.is_none_or(|s| f["subtype"] == s))
            .collect()
    }

    /// The one result frame (fails unless there is exactly one, and it is last).
    pub fn result(&self) -> &Value {
        let results = self.of("result");
        assert_eq!(
            results.len(),
            1,
            "exactly one result frame expected\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert_eq!(
            self.frames.last().unwrap()["type"],
            "result",
            "the result must be the last frame"
        );
        results[0]
    }

    /// Every tool_result block keel emitted, in order.
    pub fn tool_results(&self) -> Vec<&Value> {
        self.of("user")
            .into_iter()
            .flat_map(|f| f["message"]["content"].as_array().into_iter().flatten())
            .filter(|b| b["type"] == "tool_result")
            .collect()
    }

    /// Assert subtype, is_error, terminal_reason and exit code together.
    pub fn assert_end(&self, subtype: &str, is_error: bool, terminal_reason: &str, code: i32) {
        let r = self.result();
        assert_eq!(
            (
                r["subtype"].as_str().unwrap(),
                r["is_error"].as_bool().unwrap(),
                r["terminal_reason"].as_str().unwrap(),
                self.code
            ),
            (subtype, is_error, terminal_reason, code),
            "result/exit mismatch\nresult: {r}\nstderr: {}",
            self.stderr
        );
    }
}

/// A running keel whose stdout frames are read as they come.
pub struct Live {
    pub child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub frames: Vec<Value>,
}

impl Live {
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.spawn().expect("keel starts");
        let stdout = child.stdout.take().unwrap();
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
            frames: Vec::new(),
        }
    }

    /// Read frames until one satisfies `pred` (bounded by `timeout`). Returns that frame.
    pub async fn wait_for(&mut self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let fut = async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read stdout")
                    .expect("keel exited before the awaited frame");
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                self.frames.push(v.clone());
                if pred(&v) {
                    return v;
                }
            }
        };
        tokio::time::timeout(timeout, fut)
            .await
            .expect("awaited frame did not arrive in time")
    }

    pub fn pid(&self) -> i32 {
        self.child.id().expect("running") as i32
    }

    /// Send a signal to keel.
    pub fn signal(&self, sig: i32) {
        // SAFETY-free: `kill` via the command line keeps the test crate free of unsafe code.
        let status = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Read the rest of stdout and wait for exit; returns the full run.
    pub async fn finish(mut self, timeout: Duration) -> Run {
        let fut = async {
            while let Some(line) = self.lines.next_line().await.unwrap_or(None) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    self.frames.push(v);
                }
            }
            let mut stderr = String::new();
            if let Some(mut e) = self.child.stderr.take() {
                use tokio::io::AsyncReadExt;
                let _ = e.read_to_string(&mut stderr).await;
            }
            let status = self.child.wait().await.unwrap();
            (status, stderr)
        };
        let (status, stderr) = tokio::time::timeout(timeout, fut)
            .await
            .expect("keel exited in time");
        let stdout = self
            .frames
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let mut run = Run::new(status.code().unwrap_or(-1), stdout, stderr);
        run.frames = self.frames;
        run
    }
}

/// Processes whose process group is `pgid` (zombies excluded).
/// The process group of `pid` (0 if it is gone).
pub fn pgid_of(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().nth(2)?.parse().ok()
        })
        .unwrap_or(0)
}

pub fn group_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" && f[2].parse::<i32>().ok() == Some(pgid) {
            out.push(pid);
        }
    }
    out
}

/// Processes whose command line contains `needle` (zombies excluded).
pub fn processes_matching(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true);
        if !zombie && cmd.contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// Poll (bounded) until `f` holds — for process-table checks where no event exists to wait on.
pub async fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub const WAIT: Duration = Duration::from_secs(60);

/// keel in stream-json input mode, with its stdin held open.
pub struct Stream {
    pub live: Live,
    stdin: Option<ChildStdin>,
    /// Frames a wait has already returned (each frame is returned once).
    claimed: std::collections::HashSet<usize>,
}

impl Stream {
    pub fn start(h: &Harness, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut args = vec![
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
        ];
        args.extend_from_slice(extra);
        let mut cmd = h.command(&args, env);
        cmd.stdin(Stdio::piped());
        let mut live = Live::spawn(cmd);
        let stdin = live.child.stdin.take();
        Self {
            live,
            stdin,
            claimed: Default::default(),
        }
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, v: Value) {
        self.send_raw(&v.to_string()).await;
    }

    pub async fn user(&mut self, text: &str) {
        self.send(
            json!({"type": "user", "session_id": "", "parent_tool_use_id": null,
                         "message": {"role": "user", "content": text}}),
        )
        .await;
    }

    pub async fn control(&mut self, id: &str, request: Value) {
        self.send(json!({"type": "control_request", "request_id": id, "request": request}))
            .await;
    }

    /// Send a control request and wait for its response.
    pub async fn ask(&mut self, id: &str, request: Value) -> Value {
        self.control(id, request).await;
        self.response(id).await
    }

    pub async fn response(&mut self, id: &str) -> Value {
        self.wait(|f| f["type"] == "control_response" && f["response"]["request_id"] == id)
            .await["response"]
            .clone()
    }

    /// Wait for a request keel sends the host.
    pub async fn keel_request(&mut self, subtype: &str) -> Value {
        self.wait(|f| f["type"] == "control_request" && f["request"]["subtype"] == subtype)
            .await
    }

    pub async fn answer(&mut self, request_id: &str, response: Value) {
        self.send(json!({"type": "control_response", "response":
                          {"subtype": "success", "request_id": request_id, "response": response}}))
            .await;
    }

    /// The first frame matching `pred` that no earlier wait returned, whether it has already
    /// arrived (frames may come in either order: a result before an interrupt's receipt) or
    /// arrives within [`WAIT`].
    pub async fn wait(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let found = (0..self.live.frames.len())
                .find(|i| !self.claimed.contains(i) && pred(&self.live.frames[*i]));
            if let Some(i) = found {
                self.claimed.insert(i);
                return self.live.frames[i].clone();
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            assert!(
                !left.is_zero(),
                "no awaited frame within {WAIT:?}; frames: {:?}",
                kinds(&self.live.frames)
            );
            self.live.wait_for(left, |_| true).await;
        }
    }

    pub async fn result(&mut self) -> Value {
        self.wait(|f| f["type"] == "result").await
    }

    pub fn close(&mut self) {
        self.stdin = None;
    }

    pub async fn finish(mut self) -> Run {
        self.close();
        self.live.finish(WAIT).await
    }
}

pub fn kinds(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match f["subtype"].as_str() {
            Some(s) if f["type"] == "system" => format!("system/{s}"),
            _ => f["type"].as_str().unwrap_or("?").to_owned(),
        })
        .collect()
}
