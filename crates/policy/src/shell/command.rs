//! One simple command as the policy sees it ([`LoweredCommand`]), the files its redirections
//! open, and the variables that change what a command runs. A leaf: the lowering, the
//! wrappers and the read-only table all speak these types.

use std::path::PathBuf;

use super::words::Arg;

/// A file a command's redirection opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The file, as a word.
    pub target: Arg,
    /// It is opened for writing (`>`, `>>`, `>|`, `&>`, `<>`, `>&file`).
    pub write: bool,
}

impl Redirect {
    /// A write that changes no file: `/dev/null`, the standard streams, the terminal.
    pub fn is_harmless(&self) -> bool {
        match self.target.lit() {
            Some(t) => {
                matches!(t, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty")
                    || t.strip_prefix("/dev/fd/")
                        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            }
            None => false,
        }
    }
}

/// `git` global options that change neither which repository it acts on nor what it runs.
pub const HARMLESS_GIT_GLOBALS: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-optional-locks",
    "--literal-pathspecs",
    "--no-advice",
];

/// One simple command the line would run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoweredCommand {
    /// The program and its arguments, after the wrappers around it were peeled.
    pub argv: Vec<Arg>,
    /// The wrappers that run it, outermost first, each with its own words (`["sudo", "-u",
    /// "root"]`). A shell's `-c` is not listed: the string's commands are lowered on their own.
    pub wrappers: Vec<Vec<Arg>>,
    /// Environment variables set for it (`FOO=1 cmd`, `env FOO=1 cmd`).
    pub assigns: Vec<String>,
    /// Files its redirections open.
    pub redirects: Vec<Redirect>,
    /// It runs in the background (`&`).
    pub background: bool,
    /// The directory it runs in, when the walker can tell (`cd` is followed).
    pub cwd: Option<PathBuf>,
    /// More arguments are appended when it runs (`xargs`, `find -exec … {} +`).
    pub more_args: bool,
    /// For `git`: global options that were removed to find the subcommand (`-C`, `-c`, …).
    pub git_globals: Vec<String>,
    /// For `git`: the global options' words as written (`-C`, `/elsewhere`), which an allow
    /// rule must spell to match: they change which repository the subcommand acts on.
    pub git_global_words: Vec<Arg>,
}

impl LoweredCommand {
    /// The program as written (`rm`, `/bin/rm`), if known.
    pub fn program(&self) -> Option<&str> {
        self.argv.first().and_then(Arg::lit)
    }

    /// The words of the command, wrappers included, for showing and for allow rules that
    /// name a wrapper.
    pub fn full_argv(&self) -> Vec<&Arg> {
        self.wrappers.iter().flatten().chain(&self.argv).collect()
    }

    /// The words as written, wrappers included, with `git`'s global options back in their
    /// place: what an allow rule (and a suggested rule) is matched against.
    pub fn rule_argv(&self) -> Vec<&Arg> {
        let mut out: Vec<&Arg> = self.wrappers.iter().flatten().collect();
        let mut rest = self.argv.iter();
        if let Some(p) = rest.next() {
            out.push(p);
        }
        out.extend(
            self.git_global_words
                .iter()
                .filter(|a| !a.lit().is_some_and(|w| HARMLESS_GIT_GLOBALS.contains(&w))),
        );
        out.extend(rest);
        out
    }

    /// The command as one line (words joined by spaces).
    pub fn display(&self) -> String {
        join(self.argv.iter())
    }

    /// The command with its wrappers as one line.
    pub fn display_full(&self) -> String {
        join(self.full_argv().into_iter())
    }
}

fn join<'a>(args: impl Iterator<Item = &'a Arg>) -> String {
    let mut s = String::new();
    for a in args {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(a.text());
    }
    s
}

/// Variables that change which program runs or what a shell or a tool does before it
/// starts: setting one means the command is not what it looks like.
pub fn dangerous_var(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "IFS",
        "PROMPT_COMMAND",
        "CDPATH",
        "GLOBIGNORE",
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "LESSOPEN",
        "LESSCLOSE",
        "NODE_OPTIONS",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "HOME",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "BROWSER",
    ];
    EXACT.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("GIT_")
        || name.ends_with("_PAGER")
        || name.starts_with("BASH_FUNC_")
}
