//! Allow rules, suggested rules and words only known at run time.

use super::*;
use crate::paths::Roots;
use crate::rules::testing::PermissionConfig;
use crate::rules::RuleSource;

fn cfg(mode: PermissionMode, allow: &[&str]) -> PermissionConfig {
    PermissionConfig {
        mode,
        allow: allow
            .iter()
            .map(|r| Rule::parse(r, RuleSource::Flag).unwrap())
            .collect(),
        deny: Vec::new(),
        ask: Vec::new(),
        roots: Roots {
            cwd: std::env::current_dir().unwrap(),
            dirs: Vec::new(),
            home: Some("/nonexistent-home".into()),
            readable: Vec::new(),
        },
    }
}

fn allowed(c: &PermissionConfig, cmd: &str) -> bool {
    matches!(c.judge_bash("Bash", cmd).0, BashVerdict::Allowed(_))
}

#[test]
fn an_exact_rule_never_matches_a_word_by_its_raw_text() {
    let c = cfg(
        PermissionMode::Default,
        &["Bash(rm '$F')", "Bash(rm 'build.o')"],
    );
    assert!(!allowed(&c, "F=victim.txt; rm $F"));
    assert!(!allowed(&c, "rm \"$F\""));
    // The literal it names is still allowed.
    assert!(allowed(&c, "rm build.o"));
    assert!(
        allowed(&c, "rm '$F'"),
        "a quoted `$F` is the literal text `$F`"
    );
}

#[test]
fn a_wildcard_covers_a_run_time_word_only_with_a_star() {
    let c = cfg(
        PermissionMode::Default,
        &["Bash(npm run *)", "Bash(rm build.o *)"],
    );
    assert!(allowed(&c, "npm run $SCRIPT"));
    assert!(allowed(&c, "npm run \"$S\" --x"));
    assert!(
        !allowed(&c, "npm $CMD test"),
        "`$CMD` may be anything but `run`"
    );
    assert!(!allowed(&c, "rm $F"));
    assert!(!allowed(&c, "rm build.o$X"));
    assert!(allowed(&c, "rm build.o $X"));
}

#[test]
fn git_globals_that_point_elsewhere_are_not_covered_by_a_prefix_rule() {
    let c = cfg(
        PermissionMode::Default,
        &["Bash(git log:*)", "Bash(git diff)"],
    );
    for cmd in [
        "git --git-dir=/tmp/other/.git log -p",
        "git -C /tmp/other log",
        "git --work-tree=/tmp log",
        "git --namespace=x log",
        "git -c core.pager=./evil log",
        "git --exec-path=/tmp log",
        "git --config-env=core.pager=E log",
        "git -C /tmp diff",
    ] {
        assert!(!allowed(&c, cmd), "{cmd}");
    }
    assert!(allowed(&c, "git log -p --stat"));
    assert!(allowed(&c, "git --no-pager log -p"));
    assert!(allowed(&c, "git diff"));
    // A rule that spells the globals allows exactly them.
    let c = cfg(PermissionMode::Default, &["Bash(git -C /tmp/other log:*)"]);
    assert!(allowed(&c, "git -C /tmp/other log --oneline"));
    assert!(!allowed(&c, "git -C /tmp/else log"));
    assert!(!allowed(&c, "git log --output=x"));
}

#[test]
fn a_line_with_a_run_time_word_gets_no_reusable_rule() {
    let c = cfg(PermissionMode::Default, &[]);
    for cmd in [
        "F=build.o; rm $F",
        "rm \"$F\"",
        "rm *.o",
        "rm {a,b}.o",
        "rm $(cat list)",
        "touch x; rm $F",
        "echo hi > \"$OUT\"",
    ] {
        assert_eq!(c.suggest_bash("Bash", cmd), Vec::new(), "{cmd}");
    }
    // Literal lines still get their exact rule; a read-only part with a run-time word
    // needs no rule and does not stop the rest from getting one.
    assert_eq!(
        c.suggest_bash("Bash", "rm build.o"),
        vec![("Bash".to_owned(), "rm build.o".to_owned())]
    );
    assert_eq!(
        c.suggest_bash("Bash", "echo $X; rm build.o"),
        vec![("Bash".to_owned(), "rm build.o".to_owned())]
    );
    // The suggestion for git keeps the globals it was given.
    assert_eq!(
        c.suggest_bash("Bash", "git -C /tmp/x commit -m hi"),
        vec![("Bash".to_owned(), "git -C /tmp/x commit -m hi".to_owned())]
    );
}

#[test]
fn run_time_words_that_may_be_options_are_asked_in_every_mode_but_bypass() {
    for mode in [
        PermissionMode::Default,
        PermissionMode::Plan,
        PermissionMode::AcceptEdits,
    ] {
        let c = cfg(mode, &[]);
        for cmd in [
            "X='-exec touch pwned ;'; find . $X",
            "X=-opwned; sort $X f",
            "sort \"$X\" f",
            "git diff $X",
            "rg foo $X",
            "sort * f",
            "sort {-opwned,f}",
            "printf -v PATH /tmp/evil",
        ] {
            assert!(!allowed(&c, cmd), "{mode:?}: {cmd}");
        }
        // After `--`, or behind a fixed `./`, such a word can no longer be an option, but
        // what it reads is still unknown before it runs (it may name ~/.ssh): asked too.
        assert!(!allowed(&c, "sort -- \"$X\" f"), "{mode:?}");
        assert!(!allowed(&c, "sort ./* f"), "{mode:?}");
        // Control: the same commands with the files spelled out only read the project.
        assert!(allowed(&c, "sort -- f"), "{mode:?}");
        assert!(allowed(&c, "sort ./f"), "{mode:?}");
    }
}

#[test]
fn a_deny_rule_that_spells_git_globals_sees_them() {
    let mut c = cfg(PermissionMode::BypassPermissions, &[]);
    c.deny
        .push(Rule::parse("Bash(git -C /x push:*)", RuleSource::Flag).unwrap());
    c.deny
        .push(Rule::parse("Bash(git commit:*)", RuleSource::Flag).unwrap());
    let denied = |cmd: &str| matches!(c.judge_bash("Bash", cmd).0, BashVerdict::Denied(..));
    assert!(denied("git -C /x push origin"));
    assert!(denied("git -C /elsewhere commit -m x"), "peeled, as before");
    assert!(!denied("git -C /y push origin"));
}

#[test]
fn a_read_deny_rule_without_a_usable_pattern_keeps_every_file_read_from_running_unasked() {
    let reads = "cat Cargo.toml";
    assert!(allowed(&cfg(PermissionMode::Default, &[]), reads));
    // No pattern: every read is denied. A pattern that cannot be compiled (an unclosed
    // bracket) must not be dropped, or the file it was meant to protect would be read unasked.
    for deny in ["Read", "Read(secret[)"] {
        let mut c = cfg(PermissionMode::Default, &[]);
        c.deny = vec![Rule::parse(deny, RuleSource::Flag).unwrap()];
        assert!(!allowed(&c, reads), "{deny}");
    }
}

#[test]
fn git_reads_its_repository_even_when_no_operand_names_it() {
    // `git config --list` and `git remote -v` print .git/config (remote URLs may carry
    // tokens); `git status` reads the index and refs. None names a file.
    let commands = [
        "git status",
        "git config --list",
        "git config --get remote.origin.url",
        "git remote -v",
        "git log --oneline",
    ];
    for cmd in commands {
        assert!(allowed(&cfg(PermissionMode::Default, &[]), cmd), "{cmd}");
    }
    for deny in ["Read", "Read(.git/**)", "Read(./.git)"] {
        let mut c = cfg(PermissionMode::Default, &[]);
        c.deny = vec![Rule::parse(deny, RuleSource::Flag).unwrap()];
        for cmd in commands {
            assert!(!allowed(&c, cmd), "{cmd} under deny {deny}");
        }
    }
}
