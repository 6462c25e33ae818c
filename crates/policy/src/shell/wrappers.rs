//! Programs that run other programs, and how to find the program they run.

use super::command::{dangerous_var, LoweredCommand, Redirect};
use super::words::{short, Arg};

/// What peeling one wrapper found.
pub(super) enum Peeled {
    /// Not a wrapper (or a wrapper with nothing to run): the command is what it is.
    Plain,
    /// A wrapper was removed; look at what it runs.
    Wrapper,
    /// The command runs this shell text (`sh -c`, `eval`).
    Script {
        /// The text.
        text: String,
    },
    /// The command runs these other commands too (`find -exec`); the command itself stays.
    Inner(Vec<LoweredCommand>),
    /// The command cannot be judged.
    Problem(String),
    /// `cd`/`pushd`: the directory changes.
    Cd(Option<Arg>),
}

fn lit(cmd: &LoweredCommand, i: usize) -> Option<&str> {
    cmd.argv.get(i).and_then(Arg::lit)
}

/// Move the first `n` words of the command into its wrappers (or drop them, for wrappers
/// that change nothing a rule cares about).
fn take(cmd: &mut LoweredCommand, n: usize, keep: bool) {
    let words: Vec<Arg> = cmd.argv.drain(..n.min(cmd.argv.len())).collect();
    if keep {
        cmd.wrappers.push(words);
    }
}

/// Options of a wrapper: which take a value.
struct Opts {
    /// Short options without a value.
    flags: &'static str,
    /// Short options with a value (`-u root`, `-uroot`).
    valued: &'static str,
    /// Long options without a value.
    long: &'static [&'static str],
    /// Long options with a value (`--user root`, `--user=root`).
    long_valued: &'static [&'static str],
}

/// Why a wrapper's options could not be skipped with certainty (the line is then not
/// understood, and the sentence is listed among its problems).
#[derive(Debug, thiserror::Error)]
enum OptsProblem {
    /// A word only known at run time where an option may stand.
    #[error("`{wrapper}` is given `{word}`, which bash may expand to an option")]
    MayBeOption { wrapper: String, word: String },
    /// An option's value (or the wrapper's own operand) only known at run time may split.
    #[error("`{wrapper}` is given `{word}`, which bash may expand to several words")]
    MaySplit { wrapper: String, word: String },
    /// An option that takes a value is the last word.
    #[error("`{wrapper} {flag}` is missing its value")]
    MissingValue { wrapper: String, flag: String },
    /// An option keel does not know this wrapper to have.
    #[error("`{wrapper}` has the option `{flag}`, which keel does not know")]
    UnknownOption { wrapper: String, flag: String },
}

/// Skip the options of a wrapper starting at word 1; the index of the first word after them,
/// the values given to options (by option letter or name), or a problem.
fn skip_opts(
    cmd: &LoweredCommand,
    name: &str,
    o: &Opts,
) -> Result<(usize, Vec<(String, Arg)>), OptsProblem> {
    let mut i = 1;
    let mut values = Vec::new();
    while let Some(a) = cmd.argv.get(i) {
        let Some(w) = a.lit() else {
            // A word bash may expand to an option (or to several words, one of which may
            // be) is an option keel cannot judge: it could shift which word is the program.
            if a.may_be_option() {
                return Err(OptsProblem::MayBeOption {
                    wrapper: name.to_owned(),
                    word: short(a.text()),
                });
            }
            break;
        };
        if w == "--" {
            i += 1;
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            let (key, has_eq) = match long.split_once('=') {
                Some((k, _)) => (k, true),
                None => (long, false),
            };
            if o.long.contains(&key) && !has_eq {
                values.push((key.to_owned(), Arg::Lit(String::new())));
                i += 1;
                continue;
            }
            if o.long_valued.contains(&key) {
                if has_eq {
                    values.push((key.to_owned(), Arg::Lit(long[key.len() + 1..].to_owned())));
                    i += 1;
                } else {
                    let v =
                        cmd.argv
                            .get(i + 1)
                            .cloned()
                            .ok_or_else(|| OptsProblem::MissingValue {
                                wrapper: name.to_owned(),
                                flag: format!("--{key}"),
                            })?;
                    one_value(name, &v)?;
                    values.push((key.to_owned(), v));
                    i += 2;
                }
                continue;
            }
            return Err(OptsProblem::UnknownOption {
                wrapper: name.to_owned(),
                flag: format!("--{key}"),
            });
        }
        if w.len() > 1 && w.starts_with('-') {
            i += short_opts(cmd, i, &w[1..], name, o, &mut values)?;
            continue;
        }
        break;
    }
    Ok((i, values))
}

/// A cluster of short options (`-ks9`, the letters after the dash) at word `i`: their values
/// added to `values`; how many words it took (2 when the last letter's value is the next word).
fn short_opts(
    cmd: &LoweredCommand,
    i: usize,
    letters: &str,
    name: &str,
    o: &Opts,
    values: &mut Vec<(String, Arg)>,
) -> Result<usize, OptsProblem> {
    let chars: Vec<char> = letters.chars().collect();
    let mut j = 0;
    let mut consumed_next = false;
    while j < chars.len() {
        let c = chars[j];
        if o.flags.contains(c) {
            values.push((c.to_string(), Arg::Lit(String::new())));
            j += 1;
            continue;
        }
        if o.valued.contains(c) {
            let rest: String = chars[j + 1..].iter().collect();
            if rest.is_empty() {
                let v = cmd
                    .argv
                    .get(i + 1)
                    .cloned()
                    .ok_or_else(|| OptsProblem::MissingValue {
                        wrapper: name.to_owned(),
                        flag: format!("-{c}"),
                    })?;
                one_value(name, &v)?;
                values.push((c.to_string(), v));
                consumed_next = true;
            } else {
                values.push((c.to_string(), Arg::Lit(rest)));
            }
            break;
        }
        // `nice -5`: a number is the adjustment.
        if name == "nice" && (c.is_ascii_digit()) {
            break;
        }
        return Err(OptsProblem::UnknownOption {
            wrapper: name.to_owned(),
            flag: format!("-{c}"),
        });
    }
    Ok(if consumed_next { 2 } else { 1 })
}

/// A wrapper's option value or own operand must stay one word: a split would shift which
/// word bash runs as the program (`timeout $T ls` with T=`5 rm -rf x`).
fn one_value(name: &str, v: &Arg) -> Result<(), OptsProblem> {
    if v.may_split() {
        return Err(OptsProblem::MaySplit {
            wrapper: name.to_owned(),
            word: short(v.text()),
        });
    }
    Ok(())
}

/// Peel one wrapper named `name` (the file name of the program word).
pub(super) fn peel(name: &str, cmd: &mut LoweredCommand) -> Peeled {
    match name {
        "env" => peel_env(cmd),
        "sudo" | "doas" => peel_sudo(name, cmd),
        "nice" => simple_wrapper(cmd, name, &NICE_OPTS, 0),
        "timeout" => simple_wrapper(cmd, name, &TIMEOUT_OPTS, 1),
        "nohup" | "builtin" => simple_wrapper(cmd, name, &NO_OPTS, 0),
        "setsid" => simple_wrapper(cmd, name, &SETSID_OPTS, 0),
        "stdbuf" => simple_wrapper(cmd, name, &STDBUF_OPTS, 0),
        "exec" => simple_wrapper(cmd, name, &EXEC_OPTS, 0),
        "time" => peel_time(name, cmd),
        "command" => peel_command(name, cmd),
        "xargs" => peel_xargs(cmd),
        "find" => peel_find(cmd),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "busybox" => {
            peel_shell(name, cmd)
        }
        "eval" => peel_eval(cmd),
        "source" | "." => Peeled::Problem(format!(
            "`{name} {}` runs the commands in a file, which keel cannot see",
            cmd.argv.get(1).map(|a| short(a.text())).unwrap_or_default()
        )),
        "alias" | "unalias" | "hash" | "enable" | "trap" | "fc" | "bind" => Peeled::Problem(
            format!("`{name}` changes what later commands mean, which keel does not follow"),
        ),
        "export" | "declare" | "typeset" | "local" | "readonly" => peel_declare(name, cmd),
        "cd" | "pushd" => peel_cd(cmd),
        "popd" => Peeled::Cd(Some(Arg::Dyn("popd".to_owned()))),
        "git" => peel_git(cmd),
        _ => Peeled::Plain,
    }
}

/// The options of `sudo` and `doas`.
const SUDO_OPTS: Opts = Opts {
    flags: "EHnSkPAbeil",
    valued: "ugCpDhrtTU",
    long: &[
        "preserve-env",
        "set-home",
        "non-interactive",
        "stdin",
        "reset-timestamp",
        "preserve-groups",
        "askpass",
        "background",
        "login",
        "shell",
    ],
    long_valued: &[
        "user",
        "group",
        "chdir",
        "prompt",
        "host",
        "role",
        "type",
        "other-user",
        "close-from",
    ],
};

/// The options of `nice`.
const NICE_OPTS: Opts = Opts {
    flags: "",
    valued: "n",
    long: &[],
    long_valued: &["adjustment"],
};

/// The options of `timeout` (its duration follows them).
const TIMEOUT_OPTS: Opts = Opts {
    flags: "v",
    valued: "sk",
    long: &["foreground", "preserve-status", "verbose"],
    long_valued: &["signal", "kill-after"],
};

/// No options at all (`nohup`, `builtin`).
const NO_OPTS: Opts = Opts {
    flags: "",
    valued: "",
    long: &[],
    long_valued: &[],
};

/// The options of `setsid`.
const SETSID_OPTS: Opts = Opts {
    flags: "fwc",
    valued: "",
    long: &["fork", "wait", "ctty"],
    long_valued: &[],
};

/// The options of `stdbuf`.
const STDBUF_OPTS: Opts = Opts {
    flags: "",
    valued: "ioe",
    long: &[],
    long_valued: &["input", "output", "error"],
};

/// The options of the `exec` builtin.
const EXEC_OPTS: Opts = Opts {
    flags: "cl",
    valued: "a",
    long: &[],
    long_valued: &[],
};

/// The options of `time` (GNU time's among them).
const TIME_OPTS: Opts = Opts {
    flags: "pvqa",
    valued: "of",
    long: &["portability", "verbose", "quiet", "append"],
    long_valued: &["output", "format"],
};

/// The options of the `command` builtin that run the command.
const COMMAND_OPTS: Opts = Opts {
    flags: "p",
    valued: "",
    long: &[],
    long_valued: &[],
};

/// `sudo`/`doas`: dropped like a plain wrapper, unless an option makes it run something
/// other than the command that follows (a login shell, an editor, a listing).
fn peel_sudo(name: &str, cmd: &mut LoweredCommand) -> Peeled {
    match skip_opts(cmd, name, &SUDO_OPTS) {
        Ok((i, vals)) => {
            if vals
                .iter()
                .any(|(k, _)| matches!(k.as_str(), "i" | "s" | "login" | "shell" | "e" | "l"))
            {
                return Peeled::Problem(format!(
                    "`{name}` with a login shell, an editor or a listing option runs something keel cannot see"
                ));
            }
            if i >= cmd.argv.len() {
                return Peeled::Plain;
            }
            take(cmd, i, true);
            Peeled::Wrapper
        }
        Err(p) => Peeled::Problem(p.to_string()),
    }
}

/// `time`: dropped, but the file its `-o`/`--output` names is written.
fn peel_time(name: &str, cmd: &mut LoweredCommand) -> Peeled {
    match skip_opts(cmd, name, &TIME_OPTS) {
        Ok((i, vals)) => {
            for (k, v) in vals {
                if k == "o" || k == "output" {
                    cmd.redirects.push(Redirect {
                        target: v,
                        write: true,
                    });
                }
            }
            if i >= cmd.argv.len() {
                return Peeled::Plain;
            }
            take(cmd, i, false);
            Peeled::Wrapper
        }
        Err(p) => Peeled::Problem(p.to_string()),
    }
}

/// The `command` builtin: runs what follows, except `command -v x` / `-V`, which only
/// describes x.
fn peel_command(name: &str, cmd: &mut LoweredCommand) -> Peeled {
    if matches!(lit(cmd, 1), Some(f) if f.starts_with("-v") || f.starts_with("-V")) {
        return Peeled::Plain;
    }
    simple_wrapper(cmd, name, &COMMAND_OPTS, 0)
}

/// `eval`: its words, when all are known, are a script of their own.
fn peel_eval(cmd: &LoweredCommand) -> Peeled {
    let words: Option<Vec<&str>> = cmd.argv[1..].iter().map(Arg::lit).collect();
    match words {
        Some(w) if !w.is_empty() => Peeled::Script { text: w.join(" ") },
        Some(_) => Peeled::Plain,
        None => Peeled::Problem(
            "`eval` runs a string that is only known when the command runs".to_owned(),
        ),
    }
}

/// `export`/`declare` and kin: harmless unless they set a variable that changes how the
/// commands after them run, or one only known at run time.
fn peel_declare(name: &str, cmd: &LoweredCommand) -> Peeled {
    for a in &cmd.argv[1..] {
        let name_part = a.text().split('=').next().unwrap_or("");
        if a.lit().is_none() || dangerous_var(name_part) {
            return Peeled::Problem(format!(
                "`{name} {}` changes how the commands after it run",
                short(a.text())
            ));
        }
    }
    Peeled::Plain
}

/// `cd`/`pushd`: the directory the commands after it run in (its first word that is not
/// an option).
fn peel_cd(cmd: &LoweredCommand) -> Peeled {
    let dir = cmd.argv[1..]
        .iter()
        .find(|a| !matches!(a.lit(), Some(s) if s.starts_with('-') && s.len() > 1))
        .cloned();
    Peeled::Cd(dir)
}

/// A wrapper whose options are `o`, followed by `positional` words of its own (timeout's
/// duration), then the command it runs. The wrapper is dropped: it does not change what
/// the command may do.
fn simple_wrapper(cmd: &mut LoweredCommand, name: &str, o: &Opts, positional: usize) -> Peeled {
    match skip_opts(cmd, name, o) {
        Ok((i, _)) => {
            for a in cmd.argv.iter().skip(i).take(positional) {
                if let Err(p) = one_value(name, a) {
                    return Peeled::Problem(p.to_string());
                }
                if a.lit().is_none() && a.may_be_option() {
                    return Peeled::Problem(format!(
                        "`{name}` is given `{}`, which bash may expand to an option",
                        short(a.text())
                    ));
                }
            }
            let i = i + positional;
            if i >= cmd.argv.len() {
                return Peeled::Plain;
            }
            take(cmd, i, false);
            Peeled::Wrapper
        }
        Err(p) => Peeled::Problem(p.to_string()),
    }
}

fn peel_env(cmd: &mut LoweredCommand) -> Peeled {
    let o = Opts {
        flags: "i0v",
        valued: "uC",
        long: &["ignore-environment", "null", "debug"],
        long_valued: &["unset", "chdir"],
    };
    let (mut i, vals) = match skip_opts(cmd, "env", &o) {
        Ok(x) => x,
        Err(p) => {
            return Peeled::Problem(
                if cmd.argv.iter().any(|a| {
                    matches!(a.lit(), Some(s) if s.starts_with("-S") || s.starts_with("--split-string"))
                }) {
                    "`env -S` splits a string into a command, which keel does not follow".to_owned()
                } else {
                    p.to_string()
                },
            )
        }
    };
    if vals.iter().any(|(k, _)| k == "C" || k == "chdir") {
        cmd.cwd = None;
    }
    while let Some(a) = cmd.argv.get(i) {
        let t = a.text();
        match t.split_once('=') {
            Some((n, _))
                if !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                // After `env`, `A=$X` is an ordinary word: bash may split it, and the words
                // split off become the program and its arguments.
                if let Err(p) = one_value("env", a) {
                    return Peeled::Problem(p.to_string());
                }
                cmd.assigns.push(n.to_owned());
                i += 1;
            }
            _ => break,
        }
    }
    if i >= cmd.argv.len() {
        return Peeled::Plain;
    }
    take(cmd, i, false);
    Peeled::Wrapper
}

fn peel_xargs(cmd: &mut LoweredCommand) -> Peeled {
    let o = Opts {
        flags: "0rtpxo",
        valued: "dnLPsEIaie",
        long: &[
            "null",
            "no-run-if-empty",
            "verbose",
            "interactive",
            "exit",
            "open-tty",
            "show-limits",
        ],
        long_valued: &[
            "delimiter",
            "max-args",
            "max-lines",
            "max-procs",
            "max-chars",
            "eof",
            "replace",
            "arg-file",
            "process-slot-var",
        ],
    };
    match skip_opts(cmd, "xargs", &o) {
        Ok((i, _)) => {
            if i >= cmd.argv.len() {
                // `xargs` alone runs `echo`.
                cmd.argv.push(Arg::Lit("echo".to_owned()));
            }
            take(cmd, i, true);
            cmd.more_args = true;
            Peeled::Wrapper
        }
        Err(p) => Peeled::Problem(p.to_string()),
    }
}

fn peel_find(cmd: &mut LoweredCommand) -> Peeled {
    let mut inner = Vec::new();
    // A word only known at run time may become `-exec …` (or end one early), unless it is
    // one word given as a test's value (`-name "$X"`).
    for (i, a) in cmd.argv.iter().enumerate().skip(1) {
        if a.lit().is_some() {
            continue;
        }
        let is_value = i > 1
            && cmd.argv[i - 1]
                .lit()
                .is_some_and(|p| super::readonly::FIND_VALUED.contains(&p));
        let ok = if is_value {
            !a.may_split()
        } else {
            !super::readonly::find_word_may_be_expression(a)
        };
        if !ok {
            return Peeled::Problem(format!(
                "`find` is given `{}`, which bash may expand to part of its expression (such as `-exec`)",
                short(a.text())
            ));
        }
    }
    let mut i = 1;
    while i < cmd.argv.len() {
        let w = cmd.argv[i].text();
        if matches!(w, "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < cmd.argv.len() && !matches!(cmd.argv[end].text(), ";" | "+") {
                end += 1;
            }
            if end >= cmd.argv.len() {
                return Peeled::Problem(format!("`find {w}` is not terminated by `;` or `+`"));
            }
            let argv: Vec<Arg> = cmd.argv[start..end]
                .iter()
                .filter(|a| a.text() != "{}")
                .cloned()
                .collect();
            if argv.is_empty() {
                return Peeled::Problem(format!("`find {w}` has no command"));
            }
            inner.push(LoweredCommand {
                argv,
                wrappers: vec![vec![Arg::Lit("find".to_owned()), Arg::Lit(w.to_owned())]],
                assigns: cmd.assigns.clone(),
                redirects: Vec::new(),
                background: cmd.background,
                cwd: if w.ends_with("dir") {
                    None
                } else {
                    cmd.cwd.clone()
                },
                more_args: true,
                git_globals: Vec::new(),
                git_global_words: Vec::new(),
            });
            i = end + 1;
        } else {
            i += 1;
        }
    }
    if inner.is_empty() {
        Peeled::Plain
    } else {
        Peeled::Inner(inner)
    }
}

fn peel_shell(name: &str, cmd: &mut LoweredCommand) -> Peeled {
    // `busybox sh -c …`
    if name == "busybox" {
        match lit(cmd, 1) {
            Some(sub) => {
                let sub = sub.to_owned();
                take(cmd, 1, true);
                return if matches!(sub.as_str(), "sh" | "ash" | "bash") {
                    peel_shell(&sub, cmd)
                } else {
                    Peeled::Wrapper
                };
            }
            None => return Peeled::Plain,
        }
    }
    let mut i = 1;
    let mut dash_c = false;
    while let Some(a) = cmd.argv.get(i) {
        let Some(w) = a.lit() else {
            return Peeled::Problem(format!("`{name}` has an argument only known when it runs"));
        };
        if w == "--" || w == "-" {
            i += 1;
            break;
        }
        if w.starts_with("--") {
            match w {
                "--norc" | "--noprofile" | "--login" | "--posix" | "--noediting"
                | "--restricted" => {
                    i += 1;
                    continue;
                }
                "--version" | "--help" => return Peeled::Plain,
                "--rcfile" | "--init-file" => {
                    return Peeled::Problem(format!("`{name} {w}` runs a file keel cannot see"))
                }
                _ => {
                    return Peeled::Problem(format!(
                        "`{name}` has the option `{w}`, which keel does not know"
                    ))
                }
            }
        }
        if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 {
            let letters = &w[1..];
            if letters.contains('o') || letters.contains('O') {
                // `-o option` takes a value.
                i += 2;
            } else {
                i += 1;
            }
            if letters.contains('c') {
                dash_c = true;
            }
            if letters.contains('i') || letters.contains('s') {
                return Peeled::Problem(format!(
                    "`{name} {w}` reads commands from its input, which keel cannot see"
                ));
            }
            continue;
        }
        break;
    }
    if !dash_c {
        return Peeled::Problem(format!(
            "`{name}` without `-c` runs commands from a file or its input, which keel cannot see"
        ));
    }
    match cmd.argv.get(i) {
        Some(Arg::Lit(text)) => Peeled::Script { text: text.clone() },
        Some(Arg::Dyn(t)) => Peeled::Problem(format!(
            "`{name} -c {}` runs a string only known when the command runs",
            short(t)
        )),
        None => Peeled::Problem(format!("`{name} -c` has no command string")),
    }
}

/// `git -C dir -c k=v --no-pager log` is `git log` run elsewhere with extra configuration:
/// the global options are set aside (in `git_globals`) so rules see the subcommand.
fn peel_git(cmd: &mut LoweredCommand) -> Peeled {
    let mut i = 1;
    let mut globals = Vec::new();
    while let Some(a) = cmd.argv.get(i) {
        let Some(w) = a.lit() else {
            if a.may_be_option() {
                return Peeled::Problem(format!(
                    "`git` is given `{}`, which bash may expand to a global option",
                    short(a.text())
                ));
            }
            break;
        };
        if !w.starts_with('-') {
            break;
        }
        let key = w.split('=').next().unwrap_or(w);
        let valued_sep = matches!(
            key,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--config-env"
                | "--exec-path"
                | "--super-prefix"
                | "--list-cmds"
                | "--attr-source"
        ) && !w.contains('=');
        match key {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
            | "--exec-path" | "--super-prefix" | "--attr-source" => {
                if key == "-C" || key == "--work-tree" || key == "--git-dir" {
                    cmd.cwd = None;
                }
                globals.push(key.to_owned());
                if valued_sep && key != "--exec-path" {
                    if cmd.argv.get(i + 1).is_none() {
                        return Peeled::Problem(format!("`git {key}` is missing its value"));
                    }
                    i += 2;
                } else {
                    i += 1;
                }
            }
            "--no-pager"
            | "-P"
            | "-p"
            | "--paginate"
            | "--bare"
            | "--no-replace-objects"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-optional-locks"
            | "--no-advice"
            | "--no-lazy-fetch" => {
                globals.push(key.to_owned());
                i += 1;
            }
            "--version" | "--help" | "-v" | "-h" | "--html-path" | "--man-path" | "--info-path" => {
                return Peeled::Plain
            }
            _ => {
                return Peeled::Problem(format!(
                    "`git` has the global option `{w}`, which keel does not know"
                ))
            }
        }
    }
    if i > 1 {
        let mut argv = vec![cmd.argv[0].clone()];
        argv.extend(cmd.argv.drain(i..));
        let words: Vec<Arg> = cmd.argv.drain(1..).collect();
        if let Some(v) = words.iter().find(|a| a.lit().is_none()) {
            return Peeled::Problem(format!(
                "`git` is given `{}` as a global option's value, which is only known when it runs",
                short(v.text())
            ));
        }
        cmd.argv = argv;
        cmd.git_globals = globals;
        cmd.git_global_words = words;
    }
    if cmd.argv.len() < 2 {
        return Peeled::Plain;
    }
    Peeled::Plain
}
