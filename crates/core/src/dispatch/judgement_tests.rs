//! The dispatcher's batching and the permission decision read one judgement of a Bash call,
//! made with the session's roots, not the process's `.` and `HOME`.

use keel_tools::{BashTool, Tool};
use serde_json::json;

use super::gate::read_only_of;
use crate::permissions::{AllowedBy, Decision, PermissionConfig, PermissionMode, Roots};

fn session(cwd: &std::path::Path, home: &std::path::Path) -> PermissionConfig {
    let mut p = PermissionConfig::new(PermissionMode::Default, cwd);
    p.roots = Roots {
        cwd: cwd.to_path_buf(),
        dirs: Vec::new(),
        home: Some(home.to_path_buf()),
        readable: Vec::new(),
    };
    p
}

/// Batching and decision for one call, as the gate computes them.
fn judged(p: &PermissionConfig, line: &str) -> (bool, Decision) {
    let input = json!({ "command": line });
    let j = p.judge_call(keel_tools::ToolKind::Bash, &input);
    let ro = read_only_of(&BashTool, &input, j.as_ref());
    let d = p.decide_judged("Bash", keel_tools::ToolKind::Bash, &input, ro, j.as_ref());
    (ro, d)
}

#[test]
fn batching_and_decision_agree_on_a_line_whose_meaning_depends_on_the_session_home() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("proj");
    // A home with a blank: unquoted `$HOME` splits into two words there, one of which may be
    // anything, so `ls $HOME` is not known to only read.
    let home = t.path().join("my home");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let p = session(&proj, &home);
    let (ro, d) = judged(&p, "ls $HOME");
    assert!(!ro, "the session's HOME splits: not read-only for batching");
    assert!(
        !matches!(d, Decision::Allow(AllowedBy::ReadOnly)),
        "nor for the decision: {d:?}"
    );
    // The tool on its own looks with the process's HOME (no blank there) and would have
    // batched it as a read: the two used to disagree.
    if std::env::var("HOME").is_ok_and(|h| !h.contains([' ', '\t', '*', '?', '['])) {
        assert!(BashTool.is_read_only(&json!({ "command": "ls $HOME" })));
    }
}

#[test]
fn batching_and_decision_agree_on_a_cd_into_the_session_cwd() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("proj");
    std::fs::create_dir_all(proj.join("only-in-the-project")).unwrap();
    std::fs::write(proj.join("only-in-the-project/f.txt"), "x").unwrap();
    let p = session(&proj, &t.path().join("home"));
    // The session's cwd is not the process's: the `cd` is followed from the session's.
    let (ro, d) = judged(&p, "cd only-in-the-project && cat f.txt");
    assert!(ro);
    assert_eq!(d, Decision::Allow(AllowedBy::ReadOnly));
    // A write is neither.
    let (ro, d) = judged(&p, "cd only-in-the-project && rm f.txt");
    assert!(!ro);
    assert!(matches!(d, Decision::Ask | Decision::AskWhy(_)), "{d:?}");
}
