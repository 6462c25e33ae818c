//! `keel permissions check`: the judgement of a command line without running it, including
//! the files it reads and writes as the kernel would resolve them.

use std::process::Command;

use serde_json::Value;

use super::common::keel_bin;

fn check(project: &std::path::Path, home: &std::path::Path, args: &[&str]) -> (i32, Value) {
    let out = Command::new(keel_bin())
        .args(["permissions", "check", "--json"])
        .args(args)
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
fn the_files_a_command_touches_are_shown_where_the_kernel_would_go() {
    let project = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let project = project.path().canonicalize().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    std::fs::write(project.join("README.md"), "r").unwrap();
    std::os::unix::fs::symlink(&outside, project.join("link")).unwrap();

    // A read through a link in the project is shown at the link's target, outside: it asks.
    let (code, v) = check(
        &project,
        home.path(),
        &["--", "cat ./link/secret README.md"],
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["decision"], "ask");
    let paths = v["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{v}");
    assert_eq!(paths[0]["access"], "read");
    assert_eq!(paths[0]["word"], "./link/secret");
    assert_eq!(
        paths[0]["resolved"],
        outside.join("secret").display().to_string()
    );
    assert_eq!(paths[0]["inside_project"], false);
    assert_eq!(
        paths[1]["resolved"],
        project.join("README.md").display().to_string()
    );
    assert_eq!(paths[1]["inside_project"], true);

    // A write through the link too; and inside the project with acceptEdits it is allowed.
    let (_, v) = check(&project, home.path(), &["--", "echo hi > ./link/x"]);
    let w = &v["paths"][0];
    assert_eq!(
        (w["access"].as_str(), w["inside_project"].as_bool()),
        (Some("write"), Some(false)),
        "{v}"
    );
    assert_eq!(w["resolved"], outside.join("x").display().to_string());
    // A Read rule for where the link leads allows the read (the rule names the real place).
    let rule = format!("Read(/{}/**)", outside.display());
    let (code, v) = check(
        &project,
        home.path(),
        &["--allowedTools", &rule, "--", "cat ./link/secret"],
    );
    assert_eq!((code, v["decision"].as_str()), (0, Some("allow")), "{v}");

    // A target keel cannot know before bash expands it is said to be unknown, not guessed.
    let (code, v) = check(&project, home.path(), &["--", "echo hi > \"$X\""]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["paths"][0]["access"], "write", "{v}");
    assert!(v["paths"][0]["resolved"].is_null(), "{v}");
}

#[test]
fn a_read_deny_rule_without_a_usable_pattern_stops_a_read_only_command_from_running_unasked() {
    let project = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "a").unwrap();
    let (code, v) = check(project.path(), home.path(), &["--", "cat a.txt"]);
    assert_eq!((code, &v["decision"]), (0, &Value::from("allow")), "{v}");
    // `Read` alone denies every read; a pattern that cannot be compiled is not dropped.
    for deny in ["Read", "Read(a.txt[)"] {
        let (code, v) = check(
            project.path(),
            home.path(),
            &["--disallowedTools", deny, "--", "cat a.txt"],
        );
        assert_eq!(code, 1, "{deny}: {v}");
        assert_eq!(v["decision"], "ask", "{deny}: {v}");
    }
}
