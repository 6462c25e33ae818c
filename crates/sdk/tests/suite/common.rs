//! Fake CLIs (bash scripts written to a tempdir) and helpers shared by the suites.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use keel_sdk::{Error, Message, Options, PromptMode};
use serde_json::Value;

/// Helpers every fake script gets. The SDK writes compact JSON, so bash regexes are enough.
const PRELUDE: &str = r#"#!/usr/bin/env bash
DIR="$(cd "$(dirname "$0")" && pwd)"
printf '%s\n' "$@" > "$DIR/argv.log"
: > "$DIR/stdin.log"
# Read one stdin line into $line (logged); fails at EOF.
next() { IFS= read -r line || return 1; printf '%s\n' "$line" >> "$DIR/stdin.log"; }
rid() { [[ $line =~ \"request_id\":\"([^\"]+)\" ]] && printf '%s' "${BASH_REMATCH[1]}"; }
sub() { [[ $line =~ \"subtype\":\"([^\"]+)\" ]] && printf '%s' "${BASH_REMATCH[1]}"; }
ok() { local body="${2:-}"; [ -z "$body" ] && body='{}'; printf '{"type":"control_response","response":{"subtype":"success","request_id":"%s","response":%s}}\n' "$1" "$body"; }
err() { printf '{"type":"control_response","response":{"subtype":"error","request_id":"%s","error":"%s","error_code":"%s"}}\n' "$1" "$2" "$3"; }
init() { next; ok "$(rid)" "{\"commands\":[],\"pid\":$$}"; }
init_frame() { printf '{"type":"system","subtype":"init","cwd":"/","session_id":"s1","model":"fake","permissionMode":"default","uuid":"u-i"}\n'; }
assistant() { printf '{"type":"assistant","message":{"id":"m1","role":"assistant","model":"fake","content":[{"type":"text","text":"%s"}]},"session_id":"s1","uuid":"u-a"}\n' "$1"; }
result_ok() { printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":1,"duration_api_ms":1,"num_turns":%s,"result":"%s","session_id":"s1","uuid":"u-r"}\n' "${2:-1}" "$1"; }
# result_err SUBTYPE EXTRA_FIELDS (e.g. ,"errors":["x"])
result_err() { printf '{"type":"result","subtype":"%s","is_error":true,"duration_ms":1,"duration_api_ms":1,"num_turns":2,"session_id":"s1","uuid":"u-r"%s}\n' "$1" "$2"; }
state() { printf '{"type":"system","subtype":"session_state_changed","state":"%s","session_id":"s1","uuid":"u-s"}\n' "$1"; }
"#;

/// A fake CLI: a bash script in its own tempdir, logging its argv and stdin there.
pub struct Fake {
    dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Fake {
    /// A script made of the prelude and `body`.
    pub fn new(body: &str) -> Fake {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fake-cli");
        std::fs::write(&path, format!("{PRELUDE}\n{body}\n")).expect("write fake");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Fake { dir, path }
    }

    /// The scratch directory (the CLI's cwd).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Options that run this fake in stream-json mode, cwd = its directory.
    pub fn options(&self) -> Options {
        Options::default()
            .with_cli_path(&self.path)
            .with_cwd(self.dir.path())
    }

    /// Options that run this fake in argv mode (`-p PROMPT`, stdin closed).
    pub fn argv_options(&self) -> Options {
        Options {
            prompt_mode: Some(PromptMode::Argv),
            ..self.options()
        }
    }

    /// The arguments the fake was started with, one per line.
    pub fn argv(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("argv.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every line the SDK wrote on the fake's stdin, parsed.
    pub fn stdin_frames(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("stdin.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdin line {l:?}: {e}")))
            .collect()
    }

    /// A file in the scratch directory, once the fake has written it (bounded wait).
    pub async fn wait_file(&self, name: &str) -> String {
        let p = self.dir.path().join(name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(s) = std::fs::read_to_string(&p) {
                if s.ends_with('\n') {
                    return s.trim().to_owned();
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the fake never wrote {name}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) until the fake has created file `name`.
    pub async fn wait_file_exists(&self, name: &str) {
        let p = self.dir.path().join(name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !p.exists() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the fake never created {name}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Runs `fut`, failing the test (instead of hanging it) after 60 s.
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("the test did not finish within 60 s")
}

/// Collects a stream of SDK items.
pub async fn collect(
    stream: impl Stream<Item = keel_sdk::Result<Message>>,
) -> Vec<keel_sdk::Result<Message>> {
    bounded(stream.collect::<Vec<_>>()).await
}

/// Splits items into the messages and the errors, keeping the order of each.
pub fn split(items: Vec<keel_sdk::Result<Message>>) -> (Vec<Message>, Vec<Error>) {
    let mut msgs = Vec::new();
    let mut errs = Vec::new();
    for i in items {
        match i {
            Ok(m) => msgs.push(m),
            Err(e) => errs.push(e),
        }
    }
    (msgs, errs)
}

/// Whether process `pid` is gone (absent, or a zombie nobody has reaped yet).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// Waits (bounded) until process `pid` is gone.
pub async fn wait_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !process_gone(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} is still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
