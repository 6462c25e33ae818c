//! Rules, modes and the decision for each kind of tool.

use super::testing::PermissionConfig;
use super::*;
use serde_json::json;

fn cfg(mode: PermissionMode, allow: &[&str], deny: &[&str]) -> PermissionConfig {
    PermissionConfig {
        mode,
        allow: allow
            .iter()
            .map(|r| Rule::parse(r, RuleSource::Flag).unwrap())
            .collect(),
        deny: deny
            .iter()
            .map(|r| Rule::parse(r, RuleSource::Flag).unwrap())
            .collect(),
        ask: Vec::new(),
        roots: Roots {
            cwd: std::env::current_dir().unwrap(),
            dirs: Vec::new(),
            home: Some("/nonexistent-home".into()),
            readable: Vec::new(),
        },
    }
}

fn bash(c: &str) -> Value {
    json!({ "command": c })
}

#[test]
fn rule_lists_split_outside_parentheses() {
    assert_eq!(
        split_rule_list("Bash(git status:*), Edit Read"),
        vec!["Bash(git status:*)", "Edit", "Read"]
    );
    assert!(Rule::parse("Bash(git", RuleSource::Flag).is_err());
    assert_eq!(
        Rule::parse("Agent(Explore)", RuleSource::Flag)
            .unwrap()
            .tool,
        "Task"
    );
}

/// A rule that cannot be read says what is wrong as a kind, keeps the rule as written and
/// where it came from, and shows users the same sentence as before.
#[test]
fn rule_errors_carry_kind_text_and_origin() {
    let from = RuleSource::Settings("/p/.claude/settings.json".to_owned());
    let cases = [
        (
            " Bash(git ",
            RuleErrorKind::UnclosedParen,
            "permission rule \"Bash(git\" has an opening parenthesis but does not end with ')'",
        ),
        (
            "(ls)",
            RuleErrorKind::NoToolName,
            "permission rule \"(ls)\" does not start with a tool name",
        ),
        (
            "Bash*",
            RuleErrorKind::NoToolName,
            "permission rule \"Bash*\" does not start with a tool name",
        ),
        (
            "WebFetch(https://x)",
            RuleErrorKind::WebFetchPattern,
            "permission rule \"WebFetch(https://x)\": a WebFetch rule names a host, as WebFetch(domain:example.com), WebFetch(domain:*.example.com) or WebFetch(domain:127.0.0.1:8080)",
        ),
    ];
    for (text, kind, shown) in cases {
        let e = Rule::parse(text, from.clone()).unwrap_err();
        assert_eq!(
            e,
            RuleError {
                kind,
                text: text.trim().to_owned(),
                origin: from.clone(),
            }
        );
        assert_eq!(e.to_string(), shown);
    }
}

#[test]
fn bash_prefix_rules_cover_every_part() {
    let c = cfg(PermissionMode::Default, &["Bash(git status:*)"], &[]);
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("git status --short"), false),
        Decision::Allow(_)
    ));
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("git statusx"), false),
        Decision::Ask | Decision::AskWhy(_)
    ));
    assert!(matches!(
        c.decide(
            "Bash",
            ToolKind::Bash,
            &bash("git status && rm -rf x"),
            false
        ),
        Decision::Ask | Decision::AskWhy(_)
    ));
}

#[test]
fn deny_wins_everywhere() {
    let c = cfg(
        PermissionMode::BypassPermissions,
        &["Bash"],
        &["Bash(rm:*)"],
    );
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("ls && rm -rf /tmp/x"), false),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("touch x"), false),
        Decision::Allow(_)
    ));
}

#[test]
fn modes() {
    let plan = cfg(PermissionMode::Plan, &["Write"], &[]);
    assert!(matches!(
        plan.decide("Write", ToolKind::Write, &json!({"file_path": "a"}), false),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        plan.decide("Read", ToolKind::Read, &json!({"file_path": "a"}), true),
        Decision::Allow(AllowedBy::ReadOnly)
    ));
    let edits = cfg(PermissionMode::AcceptEdits, &[], &[]);
    assert!(matches!(
        edits.decide(
            "Edit",
            ToolKind::Edit,
            &json!({"file_path": "a.txt"}),
            false
        ),
        Decision::Allow(_)
    ));
    assert!(matches!(
        edits.decide("Bash", ToolKind::Bash, &bash("touch x"), false),
        Decision::Ask | Decision::AskWhy(_)
    ));
    let msg = edits.headless_denial("Bash", ToolKind::Bash, &bash("touch x"), None);
    assert!(msg.contains("\"Bash(touch x)\""), "{msg}");
}

#[test]
fn dont_ask_denies_what_would_be_asked() {
    let c = cfg(PermissionMode::DontAsk, &["Bash(touch:*)"], &[]);
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("touch x"), false),
        Decision::Allow(_)
    ));
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("ls"), false),
        Decision::Allow(AllowedBy::ReadOnly)
    ));
    match c.decide("Bash", ToolKind::Bash, &bash("rm x"), false) {
        Decision::Deny { message } => assert!(message.contains("dontAsk"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.decide("Write", ToolKind::Write, &json!({"file_path": "a"}), false),
        Decision::Deny { .. }
    ));
}

#[test]
fn ask_rules_turn_an_allow_into_a_question() {
    let mut c = cfg(PermissionMode::Default, &["Bash", "Write"], &[]);
    c.ask = vec![
        Rule::parse("Bash(git push:*)", RuleSource::Flag).unwrap(),
        Rule::parse("Write(./.github/**)", RuleSource::Flag).unwrap(),
    ];
    // Through wrappers and sequences, as deny rules are.
    for cmd in [
        "git push",
        "git -C . push origin",
        "ls && env FOO=1 git push",
    ] {
        match c.decide("Bash", ToolKind::Bash, &bash(cmd), false) {
            Decision::AskWhy(why) => assert!(why.contains("Bash(git push:*)"), "{why}"),
            other => panic!("{cmd}: {other:?}"),
        }
    }
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("git status"), false),
        Decision::Allow(_)
    ));
    assert!(matches!(
        c.decide(
            "Write",
            ToolKind::Write,
            &json!({"file_path": "./.github/x/../ci.yml"}),
            false
        ),
        Decision::AskWhy(_)
    ));
    assert!(matches!(
        c.decide(
            "Write",
            ToolKind::Write,
            &json!({"file_path": "src/a"}),
            false
        ),
        Decision::Allow(_)
    ));
    // Even bypassPermissions asks; a deny rule still wins.
    c.mode = PermissionMode::BypassPermissions;
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("git push"), false),
        Decision::AskWhy(_)
    ));
    c.deny = vec![Rule::parse("Bash(git:*)", RuleSource::Flag).unwrap()];
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("git push"), false),
        Decision::Deny { .. }
    ));
    // In dontAsk mode the question is a denial.
    c.deny.clear();
    c.mode = PermissionMode::DontAsk;
    assert!(matches!(
        c.decide("Bash", ToolKind::Bash, &bash("git push"), false),
        Decision::Deny { .. }
    ));
}
