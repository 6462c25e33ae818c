//! The whole judgement on a file system in memory: no disk, the roots and PATH handed in.

use std::ffi::OsStr;
use std::path::PathBuf;

use serde_json::json;

use super::web::NoWeb;
use super::{AllowedBy, Decision, PermissionMode, Policy, Rule, RuleSource};
use crate::fs::FakeFs;
use crate::paths::Roots;
use crate::ToolKind;

fn roots() -> Roots {
    Roots {
        cwd: PathBuf::from("/w/proj"),
        dirs: Vec::new(),
        home: Some(PathBuf::from("/w/home")),
        readable: Vec::new(),
    }
}

#[test]
fn a_judgement_on_a_fake_tree_follows_its_links_and_its_path() {
    let fs = FakeFs::new();
    fs.dir("/w/proj/src")
        .file("/w/proj/src/a.rs")
        .file("/w/home/.ssh/id_rsa")
        .link("/w/proj/keys", "/w/home/.ssh")
        .dir("/w/outside/sub")
        .link("/w/proj/up", "../outside/sub")
        .file("/opt/bin/deploy")
        .link("/w/proj/deploy", "/opt/bin/deploy");
    let r = roots();
    let allow = vec![Rule::parse("Bash(deploy:*)", RuleSource::Flag).unwrap()];
    let p = Policy {
        mode: PermissionMode::AcceptEdits,
        allow: &allow,
        deny: &[],
        ask: &[],
        roots: &r,
        fs: &fs,
        path_var: Some(OsStr::new("/opt/bin:/usr/bin")),
        web: &NoWeb,
        judged: None,
    };
    let bash = |line: &str| p.decide("Bash", ToolKind::Bash, &json!({ "command": line }), false);
    // Inside the fake project: read-only, allowed, batched as a read.
    assert_eq!(bash("cat src/a.rs"), Decision::Allow(AllowedBy::ReadOnly));
    assert!(p.judge("cat src/a.rs").read_only());
    // Through a link to the fake home's keys: read-only, but asked (outside the project).
    let j = p.judge("cat keys/id_rsa");
    assert!(j.read_only());
    let uses = p.path_uses(&j);
    assert_eq!(uses[0].resolved, Some(PathBuf::from("/w/home/.ssh/id_rsa")));
    assert!(matches!(bash("cat keys/id_rsa"), Decision::AskWhy(_)));
    // A `..` after a link leaves the link's target: a write there is outside the project.
    let w = p.decide(
        "Write",
        ToolKind::Write,
        &json!({ "file_path": "up/../pwned" }),
        false,
    );
    assert!(matches!(w, Decision::AskWhy(_)), "{w:?}");
    assert_eq!(
        p.judged_path(ToolKind::Write, &json!({ "file_path": "up/../pwned" })),
        Some(PathBuf::from("/w/outside/pwned"))
    );
    // `./deploy` is the `deploy` found on the PATH handed in: the rule names it.
    assert!(matches!(
        bash("./deploy now"),
        Decision::Allow(AllowedBy::Rule(_))
    ));
    // Without that PATH it is only `./deploy`, which no rule names.
    let bare = Policy {
        path_var: None,
        ..p
    };
    assert!(matches!(
        bare.decide(
            "Bash",
            ToolKind::Bash,
            &json!({ "command": "./deploy now" }),
            false
        ),
        Decision::Ask | Decision::AskWhy(_)
    ));
}
