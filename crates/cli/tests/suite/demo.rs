//! `keel demo`: a complete offline session against the bundled scripted model.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use super::common::{keel_bin, Run};

/// Run `keel demo ARGS` with no key, no base URL and a scratch home: what a fresh machine has.
async fn demo(args: &[&str], home: &Path) -> Run {
    let child = Command::new(keel_bin())
        .arg("demo")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("keel starts");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("keel demo finished within 60 s")
        .expect("keel demo ran");
    Run::new(
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[tokio::test]
async fn demo_fixes_the_bug_in_a_real_directory_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let run = demo(&["--dir", project.to_str().unwrap()], tmp.path()).await;
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    assert_eq!(run.stderr, "", "no stderr noise");
    assert!(
        run.stdout.contains("[scripted model — no API key used]"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("model (scripted) ›"), "{}", run.stdout);
    for tool in ["● Glob", "● Read", "● Grep", "● Edit", "● Bash"] {
        assert!(run.stdout.contains(tool), "{tool} missing:\n{}", run.stdout);
    }
    assert!(run.stdout.contains("✓ done"), "{}", run.stdout);
    assert!(run.stdout.contains("$0.00"), "{}", run.stdout);
    // The edit really happened, on disk.
    let stats = std::fs::read_to_string(project.join("stats.py")).unwrap();
    assert!(
        stats.contains("return sum(values) / len(values)\n"),
        "{stats}"
    );
    assert!(!stats.contains("len(values) + 1"), "{stats}");
    // And the Bash call really ran the checks against the fixed file.
    let ran_checks = run.stdout.contains("ok    mean([2, 4, 6]) == 4")
        || run.stdout.contains("python3 is not installed here");
    assert!(ran_checks, "{}", run.stdout);
    // Only the demo's scratch home was used; it is gone, --dir stays.
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("keel-demo-"))
        .collect();
    assert!(leftovers.is_empty(), "scratch left behind: {leftovers:?}");
}

/// The scratch path from the closing line ("Scratch project: PATH (...").
fn scratch_path(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Scratch project: "))
        .unwrap_or_else(|| panic!("no scratch line in:\n{stdout}"));
    PathBuf::from(line.split(" (").next().unwrap())
}

#[tokio::test]
async fn demo_removes_its_scratch_directory_unless_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let run = demo(&[], tmp.path()).await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let gone = scratch_path(&run.stdout);
    assert!(gone.starts_with(tmp.path()), "{}", gone.display());
    assert!(!gone.exists(), "{} should be removed", gone.display());

    let run = demo(&["--keep"], tmp.path()).await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let kept = scratch_path(&run.stdout);
    let stats = std::fs::read_to_string(kept.join("stats.py")).unwrap();
    assert!(
        stats.contains("return sum(values) / len(values)\n"),
        "{stats}"
    );
}

#[tokio::test]
async fn demo_json_prints_stream_json_frames() {
    let tmp = tempfile::tempdir().unwrap();
    let run = demo(&["--json"], tmp.path()).await;
    assert_eq!(run.stderr, "");
    run.assert_end("success", false, "completed", 0);
    assert!(run
        .stdout
        .lines()
        .all(|l| serde_json::from_str::<Value>(l).is_ok()));
    assert_eq!(run.frames[0]["subtype"], "init");
    assert_eq!(run.frames[0]["apiKeySource"], "none");
    let tools: Vec<&str> = run
        .of("assistant")
        .iter()
        .filter_map(|f| f["message"]["content"][0]["name"].as_str())
        .collect();
    assert_eq!(tools, ["Glob", "Read", "Grep", "Edit", "Bash"]);
    assert!(run.tool_results().iter().all(|r| r["is_error"] == false));
}

#[tokio::test]
async fn demo_refuses_a_non_empty_dir_and_unknown_flags() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("mine.txt"), "keep me").unwrap();
    let run = demo(&["--dir", tmp.path().to_str().unwrap()], tmp.path()).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("not empty"), "{}", run.stderr);
    let run = demo(&["--frobnicate"], tmp.path()).await;
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unexpected argument") && run.stderr.contains("--frobnicate"),
        "{}",
        run.stderr
    );
}
