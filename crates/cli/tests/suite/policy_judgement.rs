//! One judgement per Bash call: `keel permissions check` shows what the line runs, whether
//! each command only reads, and the read-only verdict the dispatcher batches by — the same
//! judgement the decision was made on, with the session's HOME and working directory.

use std::process::Command;

use serde_json::Value;

use super::common::keel_bin;

fn check(project: &std::path::Path, home: &std::path::Path, line: &str) -> (i32, Value) {
    let out = Command::new(keel_bin())
        .args(["permissions", "check", "--json", "--", line])
        .current_dir(project)
        .env("HOME", home)
        .env("KEEL_HOME", home.join("keel"))
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .expect("keel runs");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn the_read_only_verdict_and_the_decision_come_from_one_judgement_with_the_session_home() {
    let t = tempfile::tempdir().unwrap();
    let base = t.path().canonicalize().unwrap();
    let project = base.join("proj");
    std::fs::create_dir_all(project.join("sub")).unwrap();
    std::fs::write(project.join("sub/notes.txt"), "n").unwrap();

    // A line that only reads, after a `cd` inside the project.
    let plain = project.join("home");
    std::fs::create_dir_all(&plain).unwrap();
    let (code, v) = check(&project, &plain, "cd sub && cat notes.txt");
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["decision"], "allow", "{v}");
    assert_eq!(v["read_only"], true, "{v}");
    assert_eq!(v["commands"][0]["only_reads"], true, "{v}");
    assert_eq!(
        v["paths"][1]["resolved"],
        project.join("sub/notes.txt").display().to_string(),
        "the cd is followed from the session's directory: {v}"
    );

    // A home whose path has a blank: unquoted `$HOME` becomes two words, one may be a flag.
    // Neither the batching nor the decision takes it as a read.
    let blank = base.join("my home");
    std::fs::create_dir_all(&blank).unwrap();
    let (code, v) = check(&project, &blank, "ls $HOME");
    assert_eq!(v["read_only"], false, "{v}");
    assert_ne!(v["decision"], "allow", "{v}");
    assert_ne!(code, 0, "{v}");
    // Quoted, it is one known word: a read outside the project, so asked, but read-only.
    let (_, v) = check(&project, &blank, "ls \"$HOME\"");
    assert_eq!(v["read_only"], true, "{v}");
    assert_eq!(v["commands"][0]["only_reads"], true, "{v}");
    assert_eq!(
        v["paths"][0]["resolved"],
        blank.display().to_string(),
        "{v}"
    );

    // A write is neither read-only nor allowed, and says why.
    let (code, v) = check(&project, &plain, "rm sub/notes.txt");
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["read_only"], false, "{v}");
    assert_eq!(v["commands"][0]["only_reads"], false, "{v}");
    assert!(v["commands"][0]["not_read_only_because"].is_string(), "{v}");
}
