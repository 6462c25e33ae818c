//! A small, conservative reading of shell command lines: split a compound command into its
//! simple commands, and decide whether a command line clearly cannot change anything.
//!
//! This is not a shell parser. It understands quoting, `|`, `|&`, `&&`, `||`, `;`, `&`,
//! newlines, comments and redirections; anything it cannot reason about (command or process
//! substitution, subshells, here-documents, compound commands such as `if`/`for`, unbalanced
//! quotes) makes it give up (`None`), and callers must then assume the worst.

/// One simple command of a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Its words after shell quoting is removed (redirection words such as `2>&1` included).
    pub argv: Vec<String>,
    /// It was sent to the background with `&`.
    pub background: bool,
    /// It has an output redirection that may write a file (`>`, `>>`, `&>`, `<>`, ... except
    /// fd duplication like `2>&1` and `>/dev/null`).
    pub writes_files: bool,
}

/// The argv of each simple command joined by `|`, `&&`, `||`, `;`, `&` or newlines, or `None`
/// when the line has constructs this reading cannot reason about.
pub fn split_commands(command: &str) -> Option<Vec<Vec<String>>> {
    parse_commands(command).map(|cmds| cmds.into_iter().map(|c| c.argv).collect())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    /// `;` or newline: an empty command beside it is fine.
    Seq,
    /// `|`, `|&`, `&&`, `||`: needs a command on both sides.
    Binary,
    /// `&`
    Background,
}

/// Words that start compound commands (or groups) whose bodies the splitter would misread.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "coproc", "{", "}", "[[", "]]", "!",
];

/// Split `command` into simple commands with what we know about each; see [`split_commands`].
pub fn parse_commands(command: &str) -> Option<Vec<SimpleCommand>> {
    let chars: Vec<char> = command.chars().collect();
    let n = chars.len();
    let at = |i: usize| chars.get(i).copied();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut writes = false;
    let mut word_start = true;
    // The previous separator needs a command after it.
    let mut need_operand = false;
    let mut i = 0;

    let mut finish =
        |cur: &mut String, writes: &mut bool, sep: Sep, need_operand: &mut bool| -> Option<()> {
            let text = cur.trim();
            if text.is_empty() {
                if *need_operand || sep != Sep::Seq {
                    return None;
                }
            } else {
                let argv = shlex::split(text)?;
                if let Some(first) = argv.first() {
                    if KEYWORDS.contains(&first.as_str()) {
                        return None;
                    }
                    out.push(SimpleCommand {
                        argv,
                        background: sep == Sep::Background,
                        writes_files: *writes,
                    });
                }
            }
            *need_operand = sep == Sep::Binary;
            cur.clear();
            *writes = false;
            Some(())
        };

    while i < n {
        let c = chars[i];
        match c {
            '\\' => {
                match at(i + 1) {
                    Some('\n') => {}
                    Some(next) => {
                        cur.push(c);
                        cur.push(next);
                    }
                    None => return None,
                }
                i += 2;
                word_start = false;
                continue;
            }
            '\'' => {
                let close = (i + 1..n).find(|&j| chars[j] == '\'')?;
                cur.extend(&chars[i..=close]);
                i = close + 1;
                word_start = false;
                continue;
            }
            '"' => {
                let mut j = i + 1;
                loop {
                    match at(j)? {
                        '\\' => j += 2,
                        '`' => return None,
                        '$' if at(j + 1) == Some('(') => return None,
                        '"' => break,
                        _ => j += 1,
                    }
                }
                cur.extend(&chars[i..=j]);
                i = j + 1;
                word_start = false;
                continue;
            }
            '`' | '(' | ')' => return None,
            '$' if at(i + 1) == Some('(') => return None,
            '#' if word_start => {
                while i < n && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '<' => match at(i + 1) {
                Some('<') | Some('(') => return None,
                Some('>') => writes = true,
                Some('&') => {
                    cur.push_str("<&");
                    i += 2;
                    word_start = false;
                    continue;
                }
                _ => {}
            },
            '>' => {
                if at(i + 1) == Some('(') {
                    return None;
                }
                let (len, w) = redirect_target(&chars, i + 1);
                writes |= w;
                cur.extend(&chars[i..i + 1 + len]);
                i += 1 + len;
                word_start = false;
                continue;
            }
            '&' => match at(i + 1) {
                Some('&') => {
                    finish(&mut cur, &mut writes, Sep::Binary, &mut need_operand)?;
                    i += 2;
                    word_start = true;
                    continue;
                }
                Some('>') => {
                    if at(i + 2) == Some('(') {
                        return None;
                    }
                    let (len, w) = redirect_target(&chars, i + 2);
                    writes |= w;
                    cur.extend(&chars[i..i + 2 + len]);
                    i += 2 + len;
                    word_start = false;
                    continue;
                }
                _ => {
                    finish(&mut cur, &mut writes, Sep::Background, &mut need_operand)?;
                    i += 1;
                    word_start = true;
                    continue;
                }
            },
            '|' => {
                let len = if matches!(at(i + 1), Some('|') | Some('&')) {
                    2
                } else {
                    1
                };
                finish(&mut cur, &mut writes, Sep::Binary, &mut need_operand)?;
                i += len;
                word_start = true;
                continue;
            }
            ';' => {
                if at(i + 1) == Some(';') || at(i + 1) == Some('&') {
                    return None;
                }
                finish(&mut cur, &mut writes, Sep::Seq, &mut need_operand)?;
                i += 1;
                word_start = true;
                continue;
            }
            '\n' => {
                // A line break right after `|`, `&&`, `||` continues the command.
                if !(need_operand && cur.trim().is_empty()) {
                    finish(&mut cur, &mut writes, Sep::Seq, &mut need_operand)?;
                }
                i += 1;
                word_start = true;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        word_start = c.is_whitespace();
        i += 1;
    }
    if cur.trim().is_empty() && need_operand {
        return None;
    }
    finish(&mut cur, &mut writes, Sep::Seq, &mut need_operand)?;
    Some(out)
}

/// Looks at what follows `>` (or `&>`) starting at `from`: returns how many characters belong to
/// the operator itself (`>`, `|`, `&N`, `&-`) and whether it may write a file. The target word of
/// a plain redirection is left for the caller to read as a normal word, except that
/// `/dev/null` counts as harmless.
fn redirect_target(chars: &[char], from: usize) -> (usize, bool) {
    match chars.get(from) {
        Some('>') | Some('|') => (1, true),
        Some('&') => {
            // `>&2`, `>&-`: duplicate or close a descriptor. `>&file` writes a file.
            let rest: String = chars[from + 1..]
                .iter()
                .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '|' | '&' | '\n'))
                .collect();
            let dup = !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '-');
            (1, !dup)
        }
        _ => {
            let word: String = chars[from..]
                .iter()
                .skip_while(|c| **c == ' ' || **c == '\t')
                .take_while(|c| {
                    !c.is_whitespace() && !matches!(c, ';' | '|' | '&' | ')' | '<' | '>')
                })
                .collect();
            (0, word != "/dev/null")
        }
    }
}

/// Whether `command` clearly cannot change anything: every simple command starts with an
/// allowlisted read-only program (with no argument that makes it write or run something), and
/// there is no file redirection, substitution, background job or environment prefix.
/// When unsure, `false`.
pub fn is_read_only_command(command: &str) -> bool {
    match parse_commands(command) {
        Some(cmds) => !cmds.is_empty() && cmds.iter().all(simple_is_read_only),
        None => false,
    }
}

fn simple_is_read_only(cmd: &SimpleCommand) -> bool {
    if cmd.background || cmd.writes_files {
        return false;
    }
    let argv = &cmd.argv;
    let Some(first) = argv.first() else {
        return false;
    };
    let args = &argv[1..];
    let has = |flags: &[&str]| {
        args.iter().any(|a| {
            flags
                .iter()
                .any(|f| a == f || a.starts_with(&format!("{f}=")))
        })
    };
    match first.as_str() {
        "echo" | "printf" | "ls" | "cat" | "head" | "tail" | "wc" | "pwd" | "whoami" | "uname"
        | "which" | "stat" | "du" | "df" | "true" | "false" | "grep" | "cut" | "tr"
        | "basename" | "dirname" | "realpath" => true,
        "date" => !has(&["-s", "--set"]),
        "file" => !has(&["-C", "--compile"]),
        "rg" => !has(&["--pre"]),
        "sort" => !has(&["-o", "--output"]) && !args.iter().any(|a| short_flag_has(a, 'o')),
        // `uniq in out` writes `out`.
        "uniq" => args.iter().filter(|a| !a.starts_with('-')).count() <= 1,
        "find" => !args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete" | "-fls"
            ) || a.starts_with("-fprint")
        }),
        "git" => git_is_read_only(args),
        _ => false,
    }
}

/// A short-option cluster like `-ro` that contains `flag`.
fn short_flag_has(arg: &str, flag: char) -> bool {
    arg.len() > 1 && arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(flag)
}

fn git_is_read_only(args: &[String]) -> bool {
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .skip_while(|a| *a == "--no-pager")
        .collect();
    let Some((sub, rest)) = args.split_first() else {
        return false;
    };
    let writes_output = rest.iter().any(|a| a.starts_with("--output"));
    match *sub {
        "status" | "log" | "diff" | "show" | "rev-parse" | "ls-files" => !writes_output,
        "branch" => rest.iter().all(|a| {
            matches!(
                *a,
                "-a" | "-r" | "-v" | "-vv" | "--all" | "--remotes" | "--verbose" | "--show-current"
            )
        }),
        "remote" => rest.iter().all(|a| matches!(*a, "-v" | "--verbose")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn argv(parts: &[&[&str]]) -> Option<Vec<Vec<String>>> {
        Some(
            parts
                .iter()
                .map(|p| p.iter().map(|s| s.to_string()).collect())
                .collect(),
        )
    }

    #[test]
    fn split_table() {
        let cases: &[(&str, Option<Vec<Vec<String>>>)] = &[
            ("ls -la", argv(&[&["ls", "-la"]])),
            (
                "git status && git diff",
                argv(&[&["git", "status"], &["git", "diff"]]),
            ),
            ("a | b || c; d", argv(&[&["a"], &["b"], &["c"], &["d"]])),
            ("echo 'a | b' \"c;d\"", argv(&[&["echo", "a | b", "c;d"]])),
            ("ls\npwd\n", argv(&[&["ls"], &["pwd"]])),
            ("ls &&\n  pwd", argv(&[&["ls"], &["pwd"]])),
            (
                "cargo test 2>&1 | tail -5",
                argv(&[&["cargo", "test", "2>&1"], &["tail", "-5"]]),
            ),
            (
                "sleep 1 & echo hi",
                argv(&[&["sleep", "1"], &["echo", "hi"]]),
            ),
            ("echo a # b; rm x", argv(&[&["echo", "a"]])),
            ("echo a\\ b", argv(&[&["echo", "a b"]])),
            ("echo \"$HOME\"", argv(&[&["echo", "$HOME"]])),
            ("make |& tee log", argv(&[&["make"], &["tee", "log"]])),
            ("", Some(vec![])),
            ("echo $(whoami)", None),
            ("echo `whoami`", None),
            ("echo \"$(whoami)\"", None),
            ("diff <(ls a) <(ls b)", None),
            ("(cd x && ls)", None),
            ("cat <<EOF\nhi\nEOF", None),
            ("echo 'unbalanced", None),
            ("echo \"unbalanced", None),
            ("for f in *; do rm $f; done", None),
            ("if true; then ls; fi", None),
            ("{ ls; }", None),
            ("ls |", None),
            ("| ls", None),
            ("ls && && pwd", None),
        ];
        for (cmd, want) in cases {
            assert_eq!(&split_commands(cmd), want, "command: {cmd:?}");
        }
    }

    #[test]
    fn redirections_detected() {
        let w = |c: &str| parse_commands(c).unwrap().iter().any(|c| c.writes_files);
        assert!(w("echo hi > f"));
        assert!(w("echo hi>f"));
        assert!(w("echo hi >> f"));
        assert!(w("echo hi &> f"));
        assert!(w("echo hi >& f"));
        assert!(w("cat <> f"));
        assert!(w("echo hi >| f"));
        assert!(!w("echo hi 2>&1"));
        assert!(!w("echo hi >&2"));
        assert!(!w("echo hi > /dev/null"));
        assert!(!w("echo hi 2>/dev/null"));
        assert!(!w("echo hi &>/dev/null"));
        assert!(!w("cat < f"));
        assert!(!w("echo '>' x"));
    }

    #[test]
    fn read_only_table() {
        let cases: &[(&str, bool)] = &[
            ("ls -la", true),
            ("pwd", true),
            ("cat README.md | head -20", true),
            ("git status", true),
            ("git log --oneline -5", true),
            ("git diff HEAD~1 -- src/", true),
            ("git --no-pager show HEAD", true),
            ("git branch", true),
            ("git branch -a", true),
            ("git remote -v", true),
            ("grep -rn foo src 2>/dev/null | wc -l", true),
            ("rg foo", true),
            ("find . -name '*.rs'", true),
            ("ls && pwd; echo done", true),
            ("cargo test 2>&1", false),
            ("echo hi > f", false),
            ("echo hi >> f", false),
            ("git push", false),
            ("git commit -m x", false),
            ("git branch new-feature", false),
            ("git branch -D old", false),
            ("git remote add origin x", false),
            ("git diff --output=patch", false),
            ("git -C /tmp status", false),
            ("ls && rm x", false),
            ("cat $(x)", false),
            ("cat `x`", false),
            ("cat <(ls)", false),
            ("sleep 1 &", false),
            ("ls &", false),
            ("FOO=1 ls", false),
            ("find . -delete", false),
            ("find . -exec rm {} \\;", false),
            ("find . -fprint out", false),
            ("sort -o out in", false),
            ("sort -ro out in", false),
            ("sort in", true),
            ("uniq a b", false),
            ("uniq a", true),
            ("date", true),
            ("date -s 2020-01-01", false),
            ("rg --pre evil foo", false),
            ("rm -rf /", false),
            ("/bin/ls", false),
            ("echo 'unterminated", false),
            ("", false),
            ("xargs rm", false),
            ("ls | xargs rm", false),
            ("(ls)", false),
            ("cat <<EOF\nx\nEOF", false),
        ];
        for (cmd, want) in cases {
            assert_eq!(is_read_only_command(cmd), *want, "command: {cmd:?}");
        }
    }
}
