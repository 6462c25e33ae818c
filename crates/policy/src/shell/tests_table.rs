//! Table tests for every program on the read-only list (each with forms it allows and forms
//! it refuses), and for words only known at run time.

use super::*;

/// Each program on the list: forms judged read-only, and forms that are not.
const TABLE: &[(&str, &[&str], &[&str])] = &[
    (
        "echo",
        &["echo -n hi", "echo $X \"$Y\" *"],
        &["echo hi > f"],
    ),
    (
        "printf",
        &["printf '%s\\n' a b", "printf -- '%s' \"$X\"", "printf x$X"],
        &[
            "printf -v PATH /tmp/evil",
            "printf $X",
            "printf \"$X\" a",
            "printf '%s' a > f",
        ],
    ),
    ("pwd", &["pwd", "pwd -P"], &["pwd x", "pwd -Z"]),
    ("true", &["true", "true $X"], &["true > f"]),
    ("false", &["false", "false --x"], &["false >> f"]),
    ("whoami", &["whoami"], &["whoami x", "whoami $X"]),
    (
        "id",
        &["id -u", "id -un root"],
        &["id -Z x --bogus", "id $X"],
    ),
    (
        "uname",
        &["uname -a", "uname -sr"],
        &["uname x", "uname -Q"],
    ),
    ("nproc", &["nproc"], &["nproc --all", "nproc x"]),
    (
        "printenv",
        &["printenv HOME", "printenv -0"],
        &["printenv -x", "printenv $X"],
    ),
    (
        "hostname",
        &["hostname", "hostname -f"],
        &["hostname evil", "hostname -F f"],
    ),
    (
        "basename",
        &["basename a/b.c .c", "basename -s .c a.c"],
        &["basename -x a", "basename \"$X\""],
    ),
    (
        "dirname",
        &["dirname a/b", "dirname -z a/b"],
        &["dirname -x a", "dirname $X"],
    ),
    (
        "test",
        &["test -f x", "test -n \"$X\""],
        &["test -f x > out"],
    ),
    ("[", &["[ -d src ]", "[ $X = y ]"], &["[ -d src ] > out"]),
    ("seq", &["seq 1 10", "seq -w 1 10"], &["seq -x 1", "seq $N"]),
    (
        "sleep",
        &["sleep 1", "sleep 0.5"],
        &["sleep 1 &", "sleep \"$T\""],
    ),
    (
        "ls",
        &["ls -la", "ls --color=auto src", "ls ./*", "ls -- \"$D\""],
        &["ls --hyperlink=always", "ls $D", "ls \"$D\"", "ls *"],
    ),
    (
        "cat",
        &["cat -n f", "cat ./*.md", "cat -- $F"],
        &["cat -x f", "cat $F", "cat {-n,f}"],
    ),
    (
        "head",
        &["head -20 f", "head -n 5 a b", "head -n \"$N\" f"],
        &["head --bogus f", "head -n $N f", "head \"$F\""],
    ),
    (
        "tail",
        &["tail -f log", "tail -n 3 f"],
        &["tail -x f", "tail -n $N f"],
    ),
    (
        "wc",
        &["wc -l f", "wc -l ./*.rs"],
        &["wc -l *.rs", "wc --files0-from=x --bogus"],
    ),
    (
        "du",
        &["du -sh .", "du --max-depth=1"],
        &["du -X f", "du $D"],
    ),
    ("df", &["df -h", "df -T /"], &["df -Z", "df \"$X\""]),
    (
        "stat",
        &["stat f", "stat -c %s f"],
        &["stat -Q f", "stat $F"],
    ),
    (
        "file",
        &["file f", "file -b f"],
        &["file -C", "file -m magic f"],
    ),
    (
        "which",
        &["which ls", "which -a ls"],
        &["which -x ls", "which $P"],
    ),
    (
        "readlink",
        &["readlink -f x", "readlink --canonicalize x"],
        &["readlink -Q x", "readlink $L"],
    ),
    (
        "realpath",
        &["realpath x", "realpath --relative-to=. x"],
        &["realpath -Q x", "realpath \"$X\""],
    ),
    (
        "cut",
        &["cut -d: -f1 f", "cut -f 2 f"],
        &["cut -Q f", "cut -f $F f"],
    ),
    ("tr", &["tr a-z A-Z", "tr -d x"], &["tr -Q a b", "tr $A b"]),
    (
        "date",
        &["date", "date +%s", "date -u"],
        &["date -s 2020-01-01", "date $FMT", "date --set=x"],
    ),
    (
        "sort",
        &[
            "sort in",
            "sort -k2 -n -r in",
            "sort -- \"$F\"",
            "sort ./*.txt",
        ],
        &[
            "sort -o out in",
            "sort $X f",
            "sort \"$X\" f",
            "sort * f",
            "sort {-opwned,f}",
            "sort -k $K f",
        ],
    ),
    (
        "uniq",
        &["uniq a", "uniq -c a"],
        &["uniq a b", "uniq -- ./*", "uniq $F"],
    ),
    (
        "grep",
        &[
            "grep -rn foo src",
            "grep -e \"$P\" f",
            "grep -- \"$P\" f",
            "grep foo ./*.rs",
        ],
        &[
            "grep -Q foo",
            "grep foo $F",
            "grep $P f",
            "grep \"$P\" f",
            "grep foo *",
        ],
    ),
    (
        "rg",
        &["rg foo", "rg -n --glob '*.rs' foo src", "rg -e \"$P\""],
        &["rg --pre ./evil foo", "rg foo $X", "rg $P", "rg foo \"$D\""],
    ),
    (
        "diff",
        &["diff a b", "diff -r a b"],
        &["diff -Q a b", "diff a $B"],
    ),
    (
        "cmp",
        &["cmp a b", "cmp -l a b"],
        &["cmp -Q a b", "cmp a \"$B\""],
    ),
    ("comm", &["comm -12 a b"], &["comm -Q a b", "comm $A b"]),
    (
        "tree",
        &["tree -L 2", "tree -a src"],
        &["tree -o out", "tree $D"],
    ),
    (
        "jq",
        &["jq -r .name package.json", "jq -- \"$F\" f"],
        &["jq -Q . f", "jq \"$F\" f", "jq . $F"],
    ),
    ("nl", &["nl f", "nl -ba f"], &["nl -Q f", "nl $F"]),
    ("md5sum", &["md5sum f"], &["md5sum -Q f", "md5sum $F"]),
    (
        "sha256sum",
        &["sha256sum -c sums"],
        &["sha256sum --bogus", "sha256sum \"$F\""],
    ),
    ("sha1sum", &["sha1sum f"], &["sha1sum -Q f", "sha1sum * "]),
    ("cd", &["cd src && ls", "cd \"$D\""], &["cd src && rm x"]),
    (":", &[":", ": $X"], &[": > f"]),
    (
        "find",
        &[
            "find . -name '*.rs' -type f",
            "find ./src -name \"$N\"",
            "find ./* -maxdepth 1",
        ],
        &[
            "find . -delete",
            "find . $X",
            "find \"$D\" -type f",
            "find . -name $N",
            "find * -type f",
        ],
    ),
    (
        "sed",
        &["sed -n '1,20p' f", "sed 's/a/b/g' f"],
        &["sed -i s/a/b/ f", "sed -n \"$S\" f", "sed -n 1p $F"],
    ),
    (
        "tar",
        &["tar -tzf a.tgz", "tar tvf a.tar", "tar -tf \"$A\""],
        &["tar -xf a.tar", "tar -tf $A", "tar -t $X"],
    ),
    (
        "git",
        &[
            "git status",
            "git log --oneline -5",
            "git diff HEAD~1 -- src/",
            "git diff -- \"$F\"",
            "git show HEAD",
            "git --no-pager log",
            "git rev-parse --show-toplevel",
            "git ls-files",
            "git branch -a",
            "git remote -v",
            "git blame f",
            "git describe --tags",
            "git tag -l",
            "git config --get user.name",
            "git ls-tree HEAD",
        ],
        &[
            "git push",
            "git diff $X",
            "git diff \"$X\"",
            "git log $X",
            "git -C /tmp log",
            "git --git-dir=/tmp/x/.git log",
            "git --work-tree=/tmp log",
            "git --namespace=x log",
            "git -c core.pager=./evil log",
            "git config --get $K",
            "git tag v1",
            "git $SUB",
        ],
    ),
];

#[test]
fn every_program_on_the_list_has_allowed_and_refused_forms() {
    let mut missing = Vec::new();
    for p in readonly::programs() {
        match TABLE.iter().find(|(name, _, _)| *name == p) {
            Some((_, yes, no)) if !yes.is_empty() && !no.is_empty() => {}
            _ => missing.push(p),
        }
    }
    assert!(
        missing.is_empty(),
        "programs with no table tests: {missing:?}"
    );
    let mut wrong = Vec::new();
    for (prog, yes, no) in TABLE {
        for cmd in *yes {
            if !is_read_only_command(cmd) {
                wrong.push(format!("{prog}: {cmd:?} should be read-only"));
            }
        }
        for cmd in *no {
            if is_read_only_command(cmd) {
                wrong.push(format!("{prog}: {cmd:?} should need approval"));
            }
        }
    }
    assert!(wrong.is_empty(), "wrong verdicts:\n{}", wrong.join("\n"));
}

fn expansion(word: &str) -> Expansion {
    let l = lower(&format!("x {word}"), Path::new("/"), &ShellEnv::default());
    l.commands.last().expect("one command").argv[1]
        .expansion()
        .unwrap_or_else(|| panic!("{word} should be only known at run time"))
}

#[test]
fn what_bash_may_make_of_a_word() {
    // (word, may split, first word may be an option, any word may be)
    let cases: &[(&str, bool, bool, bool)] = &[
        ("$X", true, true, true),
        ("\"$X\"", false, true, true),
        ("\"./$X\"", false, false, false),
        ("./$X", true, false, true),
        ("a$X", true, false, true),
        ("*", true, true, true),
        ("./*", true, false, false),
        ("*.rs", true, true, true),
        ("'-'*", true, true, true),
        ("{-o,x}", true, true, true),
        ("x{a,b}", true, false, false),
        ("\"$@\"", true, true, true),
        ("\"${A[@]}\"", true, true, true),
        ("\"$(cmd)\"", false, true, true),
        ("$(cmd)", true, true, true),
        ("\"$((1-2))\"", false, true, true),
        ("~-", false, true, true),
        ("~+/x", false, true, true),
        ("~root/x", false, false, false),
        ("<(…)", false, false, false),
    ];
    let mut wrong = Vec::new();
    for (w, splits, first, any) in cases {
        let e = if *w == "<(…)" {
            Arg::Dyn((*w).to_owned()).expansion().unwrap()
        } else {
            expansion(w)
        };
        if (e.splits, e.first_dash, e.any_dash) != (*splits, *first, *any) {
            wrong.push(format!("{w}: {e:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_unquoted_home_with_blanks_is_not_one_known_word() {
    let env = ShellEnv {
        home: Some("/home/a b".to_owned()),
    };
    let l = lower("ls $HOME \"$HOME\"", Path::new("/"), &env);
    assert!(l.commands[0].argv[1].lit().is_none());
    assert_eq!(l.commands[0].argv[2].lit(), Some("/home/a b"));
}

#[test]
fn wrappers_do_not_take_a_word_that_may_shift_the_program() {
    for cmd in [
        "timeout $T ls",
        "timeout \"$T\" ls",
        "env A=$X ls",
        "sudo -u $U ls",
        "nice \"$N\" ls",
        "xargs $X",
        "find . $X",
        "find . -exec echo $X \\;",
        "find . -name $N",
        "git $G log",
        "git -C \"$D\" log",
        "git --git-dir=$D log",
    ] {
        let l = lower(cmd, Path::new("/"), &ShellEnv::default());
        assert!(
            !l.understood(),
            "{cmd}: {:?}",
            l.commands
                .iter()
                .map(|c| c.display_full())
                .collect::<Vec<_>>()
        );
    }
    for cmd in [
        "timeout 5 ls $X",
        "env A=\"$X\" ls",
        "find . -name \"$N\"",
        "find \"./$D\"",
    ] {
        let l = lower(cmd, Path::new("/"), &ShellEnv::default());
        assert!(l.understood(), "{cmd}: {:?}", l.problems);
    }
}

#[test]
fn git_globals_are_kept_for_rules() {
    let l = lower(
        "git --no-pager -C /other --git-dir=/x/.git log -p",
        Path::new("/"),
        &ShellEnv::default(),
    );
    let c = &l.commands[0];
    assert_eq!(c.display(), "git log -p");
    let words: Vec<&str> = c.rule_argv().iter().map(|a| a.text()).collect();
    assert_eq!(
        words,
        vec!["git", "-C", "/other", "--git-dir=/x/.git", "log", "-p"]
    );
    let l = lower("git --no-pager log", Path::new("/"), &ShellEnv::default());
    let words: Vec<&str> = l.commands[0].rule_argv().iter().map(|a| a.text()).collect();
    assert_eq!(words, vec!["git", "log"]);
}
