use super::*;
use pretty_assertions::assert_eq;

fn env() -> ShellEnv {
    ShellEnv {
        home: Some("/home/u".to_owned()),
    }
}

/// The lowered commands (with wrappers) of `cmd`, or `Err(problems)`.
fn lo(cmd: &str) -> Result<Vec<String>, Vec<String>> {
    let l = lower(cmd, Path::new("/"), &env());
    if l.understood() {
        Ok(l.commands
            .iter()
            .map(LoweredCommand::display_full)
            .collect())
    } else {
        Err(l.problems)
    }
}

fn ok(cmd: &str, want: &[&str]) {
    assert_eq!(
        lo(cmd),
        Ok(want.iter().map(|s| s.to_string()).collect()),
        "command: {cmd:?}"
    );
}

fn not_understood(cmd: &str) {
    assert!(
        lo(cmd).is_err(),
        "should not be understood: {cmd:?} -> {:?}",
        lo(cmd)
    );
}

#[test]
fn lists_pipelines_and_groups() {
    ok("ls -la", &["ls -la"]);
    ok("git status && git diff", &["git status", "git diff"]);
    ok("a | b || c; d & e", &["a", "b", "c", "d", "e"]);
    ok("echo 'a | b' \"c;d\"", &["echo a | b c;d"]);
    ok("ls\npwd\n", &["ls", "pwd"]);
    ok("(cd /tmp && ls) ; { pwd; }", &["cd /tmp", "ls", "pwd"]);
    ok("if true; then ls; else rm x; fi", &["true", "ls", "rm x"]);
    ok("for f in a b; do rm $f; done", &["rm $f"]);
    ok(
        "while read l; do echo $l; done < in",
        &[":", "read l", "echo $l"],
    );
    ok("case x in y) rm y;; esac", &["rm y"]);
    ok("f() { rm -rf x; }; f", &["rm -rf x", "f"]);
    ok("echo a # b; rm x", &["echo a"]);
}

#[test]
fn substitutions_are_lowered() {
    ok("echo $(rm x)", &["rm x", "echo $(rm x)"]);
    ok("echo `rm x`", &["rm x", "echo `rm x`"]);
    ok("echo \"$(rm x)\"", &["rm x", "echo \"$(rm x)\""]);
    ok("diff <(ls a) <(rm b)", &["ls a", "rm b", "diff <(…) <(…)"]);
    ok("cat <<EOF\n$(rm x)\nEOF", &["rm x", "cat"]);
    ok("cat <<'EOF'\n$(rm x)\nEOF", &["cat"]);
    ok("X=$(rm y) ls", &["rm y", "ls"]);
    ok("cat <<< \"$(rm z)\"", &["rm z", "cat"]);
}

#[test]
fn quoting_is_read_as_bash_reads_it() {
    // The ANSI-C quote with an escaped quote inside: bash sees one word, then `; rm x`.
    ok("ls $'a\\'b' ; rm x", &["ls a'b", "rm x"]);
    ok("echo $'\\x41'", &["echo A"]);
    ok("r\\m x", &["rm x"]);
    ok("'r'\"m\" x", &["rm x"]);
    ok("ls\r; rm x", &["ls\r", "rm x"]);
    ok("ls & rm x", &["ls", "rm x"]);
    ok("ls\\\n; rm x", &["ls", "rm x"]);
    ok(
        "echo ~/x $HOME/y \"$HOME\"",
        &["echo /home/u/x /home/u/y /home/u"],
    );
}

#[test]
fn wrappers_are_peeled() {
    ok("env -u BAR FOO=1 rm x", &["rm x"]);
    // After an assignment, env's options are over: `-u` is the program.
    ok("env FOO=1 -u BAR rm x", &["-u BAR rm x"]);
    ok("sudo -u root rm x", &["sudo -u root rm x"]);
    ok("nice -n 5 rm x", &["rm x"]);
    ok("timeout -s KILL 10 rm x", &["rm x"]);
    ok("nohup setsid stdbuf -o0 time -p rm x", &["rm x"]);
    ok("command rm x", &["rm x"]);
    ok("exec rm x", &["rm x"]);
    ok("xargs -0 rm -f", &["xargs -0 rm -f"]);
    ok(
        "find . -name '*.o' -exec rm {} \\;",
        &["find -exec rm", "find . -name *.o -exec rm {} ;"],
    );
    ok("bash -lc 'ls; rm x'", &["ls", "rm x"]);
    ok("sh -c \"sh -c 'rm y'\"", &["rm y"]);
    ok("eval rm x", &["rm x"]);
    ok(
        "git -C /tmp --no-pager -c core.pager=less push",
        &["git push"],
    );
    ok("/usr/bin/env rm x", &["rm x"]);
    let l = lower("FOO=1 env BAR=2 rm x", Path::new("/"), &env());
    assert_eq!(l.commands[0].assigns, vec!["FOO", "BAR"]);
    let l = lower("git -c core.fsmonitor=x status", Path::new("/"), &env());
    assert_eq!(l.commands[0].git_globals, vec!["-c"]);
}

#[test]
fn what_cannot_be_modelled_is_a_problem() {
    for c in [
        "eval \"$X\"",
        "source ./x.sh",
        ". ./x.sh",
        "$CMD x",
        "${X:-rm} x",
        "echo ${X:-$(rm y)}",
        "bash -c \"$X\"",
        "bash script.sh",
        "echo rm | bash",
        "echo rm | sh -s",
        "env -S 'rm x'",
        "sudo -s",
        "PATH=/tmp/evil; ls",
        "export PATH=/tmp",
        "alias ls=rm; ls",
        "hash -p /tmp/evil ls; ls",
        "echo $((a[$(rm x)]))",
        "ls |",
        "echo 'unbalanced",
        "if; then",
        "git --weird status",
        "nice --bogus rm",
        "$'\\u0072m' x",
    ] {
        not_understood(c);
    }
}

#[test]
fn redirections() {
    let l = lower(
        "ls > f 2>&1 < in >> g &> h 2>/dev/null",
        Path::new("/"),
        &env(),
    );
    let r: Vec<(String, bool)> = l.commands[0]
        .redirects
        .iter()
        .map(|r| (r.target.text().to_owned(), r.write))
        .collect();
    assert_eq!(
        r,
        vec![
            ("f".into(), true),
            ("in".into(), false),
            ("g".into(), true),
            ("h".into(), true),
            ("/dev/null".into(), true)
        ]
    );
    let l = lower("{ ls; } > out", Path::new("/"), &env());
    assert!(l.commands.iter().any(|c| c
        .redirects
        .iter()
        .any(|r| r.write && r.target.text() == "out")));
    let l = lower("exec 3> out", Path::new("/"), &env());
    assert!(
        l.commands
            .iter()
            .any(|c| c.redirects.iter().any(|r| r.write)),
        "{l:?}"
    );
}

#[test]
fn cd_is_followed_only_when_it_surely_runs() {
    let tmp = std::env::temp_dir();
    let t = tmp.display().to_string();
    let l = lower(&format!("cd {t} && cat x"), Path::new("/"), &env());
    assert_eq!(l.commands[1].cwd.as_deref(), Some(tmp.as_path()));
    let l = lower(&format!("(cd {t}); cat x"), Path::new("/"), &env());
    assert_eq!(l.commands[1].cwd.as_deref(), Some(Path::new("/")));
    let l = lower(&format!("true || cd {t}; cat x"), Path::new("/"), &env());
    assert_eq!(l.commands[2].cwd, None);
    let l = lower("cd \"$X\"; cat x", Path::new("/"), &env());
    assert_eq!(l.commands[1].cwd, None);
    let l = lower(&format!("cd {t} | true; cat x"), Path::new("/"), &env());
    assert_eq!(l.commands[2].cwd.as_deref(), Some(Path::new("/")));
}

#[test]
fn read_only_table() {
    let cases: &[(&str, bool)] = &[
        ("ls -la", true),
        ("ls -la --color=auto src", true),
        ("pwd", true),
        ("cat README.md | head -20", true),
        ("head -n 5 a b", true),
        ("tail -f log", true),
        ("wc -l *.rs", false),
        ("wc -l ./*.rs", true),
        ("wc -l -- *.rs", true),
        ("git status", true),
        ("git status --short", true),
        ("git log --oneline -5", true),
        ("git diff HEAD~1 -- src/", true),
        ("git --no-pager show HEAD", true),
        ("git branch", true),
        ("git branch -a", true),
        ("git remote -v", true),
        ("git rev-parse --show-toplevel", true),
        ("git config --get user.name", true),
        ("grep -rn foo src 2>/dev/null | wc -l", true),
        ("grep -A 3 -e foo file", true),
        ("rg foo", true),
        ("rg -n --glob '*.rs' foo src", true),
        ("find . -name '*.rs' -type f", true),
        ("find . -maxdepth 2 -print0", true),
        ("ls && pwd; echo done", true),
        ("sort in", true),
        ("sort -k2 -n -r in", true),
        ("uniq a", true),
        ("date", true),
        ("date +%s", true),
        ("sed -n '1,20p' f", true),
        ("sed 's/a/b/g' f", true),
        ("tar -tzf a.tgz", true),
        ("tar tvf a.tar", true),
        ("jq -r .name package.json", true),
        ("echo -n hi", true),
        ("echo --anything goes", true),
        ("LC_ALL=C sort f", true),
        ("timeout 5 ls", true),
        ("cd src && ls", true),
        ("echo hi 2>&1", true),
        ("echo hi > /dev/null", true),
        ("cargo test 2>&1", false),
        ("echo hi > f", false),
        ("echo hi >> f", false),
        ("git push", false),
        ("git commit -m x", false),
        ("git branch new-feature", false),
        ("git branch -D old", false),
        ("git remote add origin x", false),
        ("git diff --output=patch", false),
        ("git diff --ext-diff", false),
        ("git -C /tmp status", false),
        ("git -c core.pager=./evil log", false),
        ("git -c core.fsmonitor=./evil status", false),
        ("git --git-dir=/tmp/x/.git status", false),
        ("git config core.pager evil", false),
        ("git fetch --upload-pack=./evil", false),
        ("ls && rm x", false),
        ("cat $(x)", false),
        ("cat `x`", false),
        ("cat <(rm x)", false),
        ("sleep 1 &", false),
        ("ls &", false),
        ("PATH=/tmp ls", false),
        ("GIT_PAGER=./evil git log", false),
        ("find . -delete", false),
        ("find . -exec rm {} \\;", false),
        ("find . -execdir sh -c x \\;", false),
        ("find . -fprint out", false),
        ("find . -fls out", false),
        ("find . -newer x -ok rm {} \\;", false),
        ("sort -o out in", false),
        ("sort -ro out in", false),
        ("sort --compress-program=./evil.sh big.txt", false),
        ("sort --output=x in", false),
        ("sort -T /tmp in", false),
        ("uniq a b", false),
        ("date -s 2020-01-01", false),
        ("rg --pre ./evil foo", false),
        ("rg --pre=./evil foo", false),
        ("rg -z foo", false),
        ("rg --hostname-bin ./evil foo", false),
        ("sed -i s/a/b/ f", false),
        ("sed -e '1e rm x' f", false),
        ("sed 's/a/b/e' f", false),
        ("sed 's/a/b/w out' f", false),
        ("sed -n '1w out' f", false),
        ("awk 'BEGIN{system(\"rm x\")}'", false),
        ("awk '{print}' f", false),
        ("tar --to-command=./evil -xf a.tar", false),
        ("tar -xf a.tar", false),
        ("tar -tf a.tar --to-command=x", false),
        ("less f", false),
        ("more f", false),
        ("man ls", false),
        ("xargs cat", false),
        ("ls | xargs rm", false),
        ("env rm x", false),
        ("env", false),
        ("rm -rf /", false),
        ("/bin/ls", false),
        ("./ls", false),
        ("echo 'unterminated", false),
        ("", false),
        ("(ls)", true),
        ("cat <<EOF\nx\nEOF", true),
        ("cat <<EOF\n$(rm x)\nEOF", false),
        ("ls $'a\\'b' ; rm x", false),
        ("hostname evil", false),
        ("hostname", true),
        ("tree -o out", false),
        ("diff -r a b", true),
        ("bash -c 'ls -la'", true),
        ("bash -c 'ls; rm x'", false),
        ("sudo ls", false),
        ("ls -la --hyperlink=always", false),
        ("head --bogus f", false),
    ];
    let mut wrong = Vec::new();
    for (cmd, want) in cases {
        if is_read_only_command(cmd) != *want {
            wrong.push(format!("{cmd:?}: want {want}"));
        }
    }
    assert!(wrong.is_empty(), "wrong verdicts:\n{}", wrong.join("\n"));
}

#[test]
fn reads_are_reported_for_deny_checks() {
    let l = lower(
        "grep -r -f pats.txt foo src < in.txt",
        Path::new("/"),
        &env(),
    );
    let r = readonly::judge(&l.commands[0]).unwrap();
    let reads: Vec<&str> = r.reads.iter().map(Arg::text).collect();
    // With `-f`, every positional is a file: `foo` too.
    assert_eq!(reads, vec!["pats.txt", "foo", "src", "in.txt"]);
    assert!(r.recursive);
    let l = lower("rg foo", Path::new("/"), &env());
    assert!(readonly::judge(&l.commands[0]).unwrap().recursive);
    let l = lower("cat .env", Path::new("/"), &env());
    let r = readonly::judge(&l.commands[0]).unwrap();
    assert_eq!(r.reads, vec![Arg::Lit(".env".into())]);
    assert!(!r.recursive);
}

/// Why a command is not read-only is a kind with the words that made it so, and its text is
/// the sentence `keel permissions check` shows.
#[test]
fn not_read_only_says_which_kind_and_which_words() {
    let why = |cmd: &str| {
        let l = lower(cmd, Path::new("/"), &env());
        readonly::judge(&l.commands[0]).unwrap_err()
    };
    let cases = [
        (
            "sed -i s/a/b/ f",
            NotReadOnly::UnknownFlag {
                program: "sed".into(),
                flag: "-i".into(),
            },
            "`sed` is read-only only without `-i`, or it is not a flag keel knows to be safe",
        ),
        (
            "git push",
            NotReadOnly::NotListed {
                program: "git push".into(),
            },
            "`git push` is not on the read-only list",
        ),
        (
            "tar -tf",
            NotReadOnly::MissingValue {
                program: "tar".into(),
                flag: "-f".into(),
                what: "archive",
            },
            "`tar -f` is missing its archive",
        ),
        (
            "head -n",
            NotReadOnly::MissingValue {
                program: "head".into(),
                flag: "-n".into(),
                what: "value",
            },
            "`head -n` is missing its value",
        ),
        (
            "ls > out.txt",
            NotReadOnly::Writes {
                target: "out.txt".into(),
            },
            "it writes to `out.txt`",
        ),
        (
            "tar -xf a.tar",
            NotReadOnly::UnknownFlag {
                program: "tar".into(),
                flag: "-x".into(),
            },
            "`tar` is read-only only without `-x`, or it is not a flag keel knows to be safe",
        ),
    ];
    for (cmd, kind, shown) in cases {
        let e = why(cmd);
        assert_eq!(e, kind, "{cmd}");
        assert_eq!(e.to_string(), shown, "{cmd}");
    }
}

#[test]
fn history_reads_count_as_reading_the_repository() {
    // `git show HEAD:.env` prints a file no argument names as a path.
    for cmd in [
        "git show HEAD:.env",
        "git log -p",
        "git cat-file -p HEAD:.env",
        "git blame x",
    ] {
        let l = lower(cmd, Path::new("/"), &env());
        let r = readonly::judge(&l.commands[0]).unwrap();
        assert_eq!(r.reads, vec![Arg::Lit(".".into())], "{cmd}");
        assert!(r.recursive, "{cmd}");
    }
    let l = lower("git status", Path::new("/"), &env());
    assert!(!readonly::judge(&l.commands[0]).unwrap().recursive);
    // A list of file names read from a file hides what is read.
    let l = lower("sort --files0-from=list", Path::new("/"), &env());
    assert!(readonly::judge(&l.commands[0]).is_err());
}

#[test]
fn loops_with_test_brackets() {
    ok(
        "touch started; while [ ! -f go ]; do sleep 0.02; done",
        &["touch started", "[ ! -f go ]", "sleep 0.02"],
    );
}

#[test]
fn globs_and_braces_are_only_known_at_run_time() {
    let l = lower(
        "ls a* b? c[12] {x,y} d{1..3} [ ] {} e]",
        Path::new("/"),
        &env(),
    );
    let kinds: Vec<bool> = l.commands[0]
        .argv
        .iter()
        .map(|a| a.lit().is_some())
        .collect();
    assert_eq!(
        kinds,
        vec![true, false, false, false, false, false, true, true, true, true]
    );
    // A brace expansion in command position could be any program.
    not_understood("{rm,-rf,x}");
}

/// The lowering and bash agree on what runs: each line is run by bash with `argv` (a script
/// that records its arguments) as the only program, and the recorded calls must be exactly
/// the lowered commands.
#[test]
fn bash_runs_what_the_lowering_says() {
    use std::os::unix::fs::PermissionsExt;
    // bash is what the Bash tool runs: every machine keel's tests run on has it.
    let bash_runs = std::process::Command::new("bash")
        .arg("-c")
        .arg("true")
        .status();
    assert!(
        bash_runs.is_ok_and(|s| s.success()),
        "bash does not run here"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let script = dir.path().join("argv");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nout={log}.$$\nfor a in \"$@\"; do printf '%s\\037' \"$a\" >> $out; done\nprintf '\\036' >> $out\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cases = [
        "argv $'a\\'b' ; argv x",
        "argv $'\\x41\\101\\n' y",
        "argv 'a b' \"c d\" e\\ f",
        "argv a\\\nb",
        "argv one # argv two",
        "argv a#b",
        "argv x & argv y; wait",
        "argv 1\nargv 2",
        "argv \"a\\\"b\" 'c\\'",
        "argv a'b'\"c\"",
        "argv ~ \"~\" x~",
        "argv {}",
        "argv ']' '['",
        "argv -- --x",
        "argv $'\\t' $'\\\\'",
        "argv \\$HOME '$HOME'",
        "f() { argv in-f; }; f",
        "argv \"a\\nb\"",
    ];
    for cmd in cases {
        for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("log.") {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        let status = std::process::Command::new("bash")
            .arg("-c")
            .arg(cmd)
            .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
            .env("HOME", "/home/u")
            .status()
            .unwrap();
        assert!(status.success(), "{cmd:?}");
        let mut raw = String::new();
        for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("log.") {
                raw.push_str(&std::fs::read_to_string(e.path()).unwrap());
            }
        }
        let mut ran: Vec<Vec<String>> = raw
            .split('\u{1e}')
            .filter(|c| !c.is_empty())
            .map(|c| {
                c.split('\u{1f}')
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .collect();
        let l = lower(cmd, dir.path(), &env());
        assert!(l.understood(), "{cmd:?}: {:?}", l.problems);
        let mut lowered: Vec<Vec<String>> = l
            .commands
            .iter()
            .filter(|c| c.program() == Some("argv"))
            .map(|c| {
                c.argv[1..]
                    .iter()
                    .map(|a| a.lit().expect("every word is known").to_owned())
                    .filter(|a| !a.is_empty())
                    .collect()
            })
            .collect();
        ran.sort();
        lowered.sort();
        assert_eq!(lowered, ran, "lowering and bash disagree on {cmd:?}");
    }
}

/// Found by fuzzing: the parser's time grows exponentially with unclosed `(` in a row, so a
/// model could hold a permission check (and the turn) for minutes with one short command. Such a
/// line is not followed, and is answered at once.
#[test]
fn deep_parentheses_are_refused_at_once() {
    let t0 = std::time::Instant::now();
    let l = lower(&format!("{}\u{ba}", "(".repeat(40)), Path::new("/"), &env());
    assert!(!l.understood());
    assert!(
        l.problems[0].contains("nests parentheses too deeply"),
        "{:?}",
        l.problems
    );
    let l = lower(
        &format!("{}ls{}", "(".repeat(17), ")".repeat(17)),
        Path::new("/"),
        &env(),
    );
    assert!(!l.understood());
    // The refusal is a quick count, not a slow parse (generous: a debug build on a busy box).
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t0.elapsed()
    );
    // What people write still reads.
    ok(
        "(cd a && (ls; (echo $((1 + (2 * 3))))))",
        &["cd a", "ls", "echo $((1 + (2 * 3)))"],
    );
}

/// Found by fuzzing: a redirection's file descriptor number too large for an int made the
/// shell parser panic. Such a line is not followed (asked about, denied headless), and no
/// panic escapes.
#[test]
fn huge_descriptor_numbers_are_refused_not_a_panic() {
    for cmd in [
        "7777777777777777777777777777777<7777>",
        "ls 99999999999>out",
        "cat 2147483648<&0",
    ] {
        let l = lower(cmd, Path::new("/"), &env());
        assert!(!l.understood(), "{cmd}");
        assert!(
            l.problems.iter().any(|p| p.contains("descriptor")),
            "{cmd}: {:?}",
            l.problems
        );
    }
    // Ordinary descriptors still read.
    ok("ls 2>/dev/null", &["ls"]);
}
