//! The `keel-mock` binary: prints its URL first, serves, reports bad scenarios with exit 2.

use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::{client, request, PATIENCE};

const BIN: &str = env!("CARGO_BIN_EXE_keel-mock");

#[tokio::test]
async fn serves_a_scenario_file_and_prints_its_url_first() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.json");
    let log = dir.path().join("log.jsonl");
    std::fs::write(
        &scenario,
        r#"{"steps":[{"kind":"text","text":"from the binary"}]}"#,
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .arg("--scenario")
        .arg(&scenario)
        .arg("--log")
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("the URL is printed promptly")
        .unwrap()
        .expect("a first line");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let v: Value = client()
        .post(format!("{url}/v1/messages"))
        .json(&request(false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["content"][0]["text"], "from the binary");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logged.lines().count(), 1);
}

#[tokio::test]
async fn sigterm_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.json");
    std::fs::write(&scenario, r#"{"steps":[{"kind":"text","text":"x"}]}"#).unwrap();
    let mut child = Command::new(BIN)
        .arg("--scenario")
        .arg(&scenario)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn a_bad_scenario_exits_2_naming_file_step_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("bad.json");
    std::fs::write(&scenario, r#"{"steps":[{"kind":"tool_use","calls":[]}]}"#).unwrap();
    for flag in ["--scenario", "--check"] {
        let out = Command::new(BIN)
            .arg(flag)
            .arg(&scenario)
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(&scenario.display().to_string()), "{err}");
        assert!(
            err.contains("step 0 (tool_use): field `calls` must contain at least one call"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    std::fs::write(&scenario, r#"{"steps":[{"kind":"text","text":"fine"}]}"#).unwrap();
    let out = Command::new(BIN)
        .arg("--check")
        .arg(&scenario)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[tokio::test]
async fn help_and_usage_errors() {
    let out = Command::new(BIN).arg("--help").output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--scenario") && help.contains("--check") && help.contains("--log"));
    let out = Command::new(BIN).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
}
