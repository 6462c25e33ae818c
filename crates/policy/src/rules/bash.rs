//! Bash calls judged on what they would run: the command line is lowered to its simple
//! commands (crate::shell), deny rules are checked on every one of them (and on every
//! wrapper), and the call is allowed without asking only if every one is allowed — by a
//! rule, or because it only reads — and every file it writes through a redirection may be
//! written.

use std::path::{Path, PathBuf};

use std::ffi::OsStr;

use crate::fs::FsView;
use crate::kpath::kernel_path_in;
use crate::paths::{PathPattern, Resolved, Roots};
use crate::shell::{self, readonly, Arg, Lowered, LoweredCommand, ShellEnv};

use super::needs::{exact_path_rule, NeedsApproval};
use super::{Judgement, PermissionMode, Policy, Rule};

/// A Bash rule's pattern, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BashPattern {
    /// `git status:*` — these words, then anything.
    Prefix(Vec<String>),
    /// `npm run *` — `*` is any run of characters (`\*` a literal star).
    Wildcard(String),
    /// `rm -rf build/\*` — exactly this command (its words, with `\*` a literal star).
    Exact(Vec<String>),
}

impl BashPattern {
    pub(crate) fn parse(p: &str) -> BashPattern {
        if let Some(prefix) = p.strip_suffix(":*") {
            return BashPattern::Prefix(words(prefix));
        }
        if has_unescaped_star(p) {
            return BashPattern::Wildcard(p.trim().to_owned());
        }
        BashPattern::Exact(words(p))
    }
}

/// A `*` outside quotes and not escaped.
fn has_unescaped_star(p: &str) -> bool {
    let mut esc = false;
    let mut quote: Option<char> = None;
    for c in p.chars() {
        if esc {
            esc = false;
            continue;
        }
        match (c, quote) {
            ('\\', q) if q != Some('\'') => esc = true,
            ('\'' | '"', None) => quote = Some(c),
            (c, Some(q)) if c == q => quote = None,
            ('*', None) => return true,
            _ => {}
        }
    }
    false
}

/// A rule's text split into words as the shell would (quotes kept together, `\*` a literal
/// `*`); plain whitespace splitting if it does not parse.
fn words(p: &str) -> Vec<String> {
    shlex::split(p).unwrap_or_else(|| {
        p.split_whitespace()
            .map(|w| w.replace("\\*", "*"))
            .collect()
    })
}

/// Quote words for an exact rule: each word as the shell would need it, so that the rule
/// reads back as exactly these words (a `*` inside quotes is literal).
pub(crate) fn exact_rule(words: &[&str]) -> Option<String> {
    let mut out = Vec::new();
    for w in words {
        let needs = w.is_empty()
            || w.chars()
                .any(|c| !(c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c)));
        if needs {
            if w.contains('\'') {
                return None;
            }
            out.push(format!("'{w}'"));
        } else {
            out.push((*w).to_owned());
        }
    }
    Some(out.join(" "))
}

/// The program a command word names, as rules see it: a bare name as is; a path whose real
/// file is the program of that name found on `PATH` as that name; any other path as written.
pub(crate) fn rule_program(
    fs: &dyn FsView,
    path_var: Option<&OsStr>,
    word: &str,
    cwd: Option<&Path>,
) -> String {
    if !word.contains('/') {
        return word.to_owned();
    }
    let name = Path::new(word)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(word);
    let given = match cwd {
        Some(c) => c.join(word),
        None if Path::new(word).is_absolute() => PathBuf::from(word),
        None => return word.to_owned(),
    };
    // `which` finds only existing files, so equal resolutions name one existing file.
    match (
        kernel_path_in(fs, &given),
        which(fs, path_var, name).map(|p| kernel_path_in(fs, &p)),
    ) {
        (Ok(a), Some(Ok(b))) if a == b => name.to_owned(),
        _ => word.to_owned(),
    }
}

/// The first regular file named `name` in the directories of `path_var`.
fn which(fs: &dyn FsView, path_var: Option<&OsStr>, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .map(|d| d.join(name))
        .find(|p| p.is_absolute() && fs.is_file(p))
}

/// The text of a word for matching.
fn text(a: &Arg) -> &str {
    a.text()
}

/// Stands for a word only known at run time when a wildcard rule is matched.
const RUN_TIME: char = '\u{0}';
const RUN_TIME_STR: &str = "\u{0}";

/// Whether an allow rule's pattern allows one lowered command (wrappers included).
fn allow_matches(pol: &Policy<'_>, pat: &BashPattern, cmd: &LoweredCommand) -> bool {
    // Configuration that makes git run other programs is never covered by a rule.
    if cmd
        .git_globals
        .iter()
        .any(|g| matches!(g.as_str(), "-c" | "--config-env" | "--exec-path"))
    {
        return false;
    }
    if cmd.assigns.iter().any(|v| shell::dangerous_var(v)) {
        return false;
    }
    // git's global options stay in place: `git log:*` must not allow `git -C /elsewhere log`.
    let full: Vec<&Arg> = cmd.rule_argv();
    let Some(first) = full.first().and_then(|a| a.lit()) else {
        return false;
    };
    let prog = rule_program(pol.fs, pol.path_var, first, cmd.cwd.as_deref());
    let rest: Vec<&str> = full[1..].iter().map(|a| text(a)).collect();
    match pat {
        BashPattern::Prefix(w) => {
            let Some((p0, pw)) = w.split_first() else {
                return false;
            };
            if *p0 != prog || rest.len() < pw.len() {
                return false;
            }
            // The words of the prefix must be known exactly.
            pw.iter()
                .zip(&full[1..])
                .all(|(r, a)| a.lit() == Some(r.as_str()))
        }
        BashPattern::Exact(w) => {
            if cmd.more_args {
                return false;
            }
            let Some((p0, pw)) = w.split_first() else {
                return false;
            };
            // Every word must be known: a word only known at run time is never the text it
            // was written as (`rm '$F'` must not allow `rm $F`).
            *p0 == prog
                && pw.len() == rest.len()
                && pw
                    .iter()
                    .zip(&full[1..])
                    .all(|(r, a)| a.lit() == Some(r.as_str()))
        }
        BashPattern::Wildcard(p) => {
            if p.contains(RUN_TIME) {
                return false;
            }
            // A word only known at run time stands as a character no rule text holds, so
            // only a `*` can cover it — and a `*` covers whatever it expands to.
            let mut joined = prog;
            for a in &full[1..] {
                joined.push(' ');
                joined.push_str(a.lit().unwrap_or(RUN_TIME_STR));
            }
            super::wildcard_escaped(p, &joined)
        }
    }
}

/// The flags and positionals of a command, for deny rules: which short flag letters and long
/// flags it uses anywhere, and its other words in order.
struct Shape<'a> {
    short: Vec<char>,
    long: Vec<&'a str>,
    positionals: Vec<&'a Arg>,
    any_dynamic: bool,
}

fn shape(args: &[Arg]) -> Shape<'_> {
    let mut s = Shape {
        short: Vec::new(),
        long: Vec::new(),
        positionals: Vec::new(),
        any_dynamic: false,
    };
    for a in args {
        match a {
            Arg::Dyn(_) => {
                s.any_dynamic = true;
                s.positionals.push(a);
            }
            Arg::Lit(w) => {
                if let Some(l) = w.strip_prefix("--") {
                    s.long.push(l.split('=').next().unwrap_or(l));
                } else if w.len() > 1 && w.starts_with('-') {
                    s.short.extend(w[1..].chars());
                } else {
                    s.positionals.push(a);
                }
            }
        }
    }
    s
}

/// Short flags and their long spellings, so that a deny rule written with one also stops
/// the other (`rm -rf` and `rm --recursive --force`).
const FLAG_ALIASES: &[(&str, &str, &str)] = &[
    ("rm", "rR", "recursive"),
    ("rm", "f", "force"),
    ("rm", "d", "dir"),
    ("cp", "rR", "recursive"),
    ("cp", "f", "force"),
    ("mv", "f", "force"),
    ("chmod", "R", "recursive"),
    ("chown", "R", "recursive"),
    ("chgrp", "R", "recursive"),
    ("git", "f", "force"),
    ("git", "d", "delete"),
    ("git", "D", "delete"),
    ("git", "x", "exec"),
    ("shred", "u", "remove"),
    ("find", "", "delete"),
];

/// Whether a deny rule's pattern names this command (its unwrapped program and arguments):
/// the program by any spelling, each flag of the rule present in any order or grouping, and
/// the rule's other words in order. A word only known at run time may be anything.
fn deny_matches(pat: &BashPattern, argv: &[Arg]) -> bool {
    let Some(first) = argv.first() else {
        return false;
    };
    let prog = match first.lit() {
        Some(p) => Path::new(p)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(p)
            .to_owned(),
        // Only known when it runs: it could be anything the rule names.
        None => return true,
    };
    let rule_words = match pat {
        BashPattern::Prefix(w) | BashPattern::Exact(w) => w.clone(),
        BashPattern::Wildcard(p) => {
            let mut joined = prog.clone();
            for a in &argv[1..] {
                joined.push(' ');
                joined.push_str(a.text());
            }
            if super::wildcard_escaped(p, &joined) {
                return true;
            }
            // Also by shape, for the literal words before the first star.
            let lit: String = p.split('*').next().unwrap_or("").to_owned();
            words(&lit)
        }
    };
    let Some((p0, pw)) = rule_words.split_first() else {
        return false;
    };
    let rule_prog = Path::new(p0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(p0);
    if rule_prog != prog {
        return false;
    }
    let s = shape(&argv[1..]);
    let mut pos = s.positionals.iter();
    for w in pw {
        if let Some(l) = w.strip_prefix("--") {
            let key = l.split('=').next().unwrap_or(l);
            let present = s.long.contains(&key)
                || FLAG_ALIASES.iter().any(|(p, short, long)| {
                    *p == prog && *long == key && short.chars().any(|c| s.short.contains(&c))
                });
            if !present && !s.any_dynamic {
                return false;
            }
        } else if w.len() > 1 && w.starts_with('-') {
            let present = |c: char| {
                s.short.contains(&c)
                    || FLAG_ALIASES.iter().any(|(p, short, long)| {
                        *p == prog && short.contains(c) && s.long.contains(long)
                    })
            };
            if !w[1..].chars().all(present) && !s.any_dynamic {
                return false;
            }
        } else {
            // The next positional equal to it (or one only known at run time).
            if !pos
                .by_ref()
                .any(|a| matches!(a, Arg::Dyn(_)) || a.text() == w)
            {
                return false;
            }
        }
    }
    // An exact deny rule also covers the same command with more arguments: denying less
    // than the user wrote would be the wrong way to fail.
    true
}

/// The verdict on a Bash call.
#[derive(Debug, PartialEq)]
pub(crate) enum BashVerdict {
    /// A deny rule names part of it (the rule, the part).
    Denied(Rule, String),
    /// Everything is allowed; by which rule (or `None`: it only reads).
    Allowed(Option<String>),
    /// Something needs a person's approval; why.
    Ask(String),
}

/// A file a judged command line reads or writes, as `keel permissions check` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathUse {
    /// Whether the command writes it (through a redirection) or reads it.
    pub writes: bool,
    /// The word as written.
    pub word: String,
    /// Where the kernel would go (each symlink followed where it stands); `None` when the word
    /// is not known before the command runs.
    pub resolved: Option<PathBuf>,
    /// Whether that is inside the working directory or an added directory.
    pub inside: bool,
    /// Why the resolution failed (a symlink loop), if it did.
    pub broken: Option<String>,
}

pub(crate) fn env_of(roots: &Roots) -> ShellEnv {
    ShellEnv {
        home: roots.home.as_ref().map(|h| h.display().to_string()),
    }
}

impl<'p> Policy<'p> {
    fn bash_rules<'a>(
        &self,
        rules: &'p [Rule],
        tool: &'a str,
    ) -> impl Iterator<Item = (&'p Rule, Option<BashPattern>)> + 'a
    where
        'p: 'a,
    {
        rules
            .iter()
            .filter(move |r| r.tool == tool || r.tool == "Bash")
            .map(|r| (r, r.pattern.as_deref().map(BashPattern::parse)))
    }

    /// The rule among `rules` that matches a command this command line runs, or one of its
    /// wrappers taken as a command of its own (and the command it matched).
    pub(crate) fn bash_rule_hit(
        &self,
        rules: &'p [Rule],
        tool: &str,
        command: &str,
    ) -> Option<(&'p Rule, String)> {
        let j = self.judged_line(command);
        self.lowered_hit(rules, tool, &j.lowered)
    }

    fn lowered_hit(
        &self,
        rules: &'p [Rule],
        tool: &str,
        lowered: &Lowered,
    ) -> Option<(&'p Rule, String)> {
        for cmd in &lowered.commands {
            let mut candidates: Vec<Vec<Arg>> = vec![cmd.argv.clone()];
            for w in &cmd.wrappers {
                let mut v = w.clone();
                v.extend(cmd.argv.iter().cloned());
                candidates.push(v);
            }
            // A deny rule that spells git's global options (`Bash(git -C /x push:*)`) sees
            // them in place too.
            if !cmd.git_global_words.is_empty() {
                let mut v: Vec<Arg> = cmd.argv.iter().take(1).cloned().collect();
                v.extend(cmd.git_global_words.iter().cloned());
                v.extend(cmd.argv.iter().skip(1).cloned());
                candidates.push(v);
            }
            for rule in rules.iter().filter(|r| r.tool == tool || r.tool == "Bash") {
                let hit = match rule.pattern.as_deref() {
                    None => true,
                    Some(p) => {
                        let pat = BashPattern::parse(p);
                        candidates.iter().any(|c| deny_matches(&pat, c))
                    }
                };
                if hit {
                    return Some((rule, cmd.display_full()));
                }
            }
        }
        None
    }

    /// Judge a Bash command line.
    pub(crate) fn judge_bash(&self, tool: &str, command: &str) -> (BashVerdict, Vec<String>) {
        let j = self.judged_line(command);
        let lowered = &j.lowered;
        let mut parts = Vec::new();
        // Deny rules: on every command, and on every wrapper as a command of its own.
        if let Some((rule, part)) = self.lowered_hit(self.deny, tool, lowered) {
            return (BashVerdict::Denied(rule.clone(), part), parts);
        }
        if let Some(denied) = self.redirect_denied(lowered) {
            return (denied, parts);
        }
        if !lowered.understood() {
            let why = lowered.problems.join("; ");
            parts.push(format!("not understood: {why}"));
            return (self.judge_not_understood(tool, &why), parts);
        }
        if lowered.commands.is_empty() {
            return (BashVerdict::Ask("the command is empty".to_owned()), parts);
        }
        let (by_rule, open) = self.judge_commands(tool, &j, &mut parts);
        if self.mode == PermissionMode::BypassPermissions {
            return (BashVerdict::Allowed(None), parts);
        }
        if open.is_empty() {
            (BashVerdict::Allowed(by_rule), parts)
        } else {
            (
                BashVerdict::Ask(format!("not allowed by any rule: {}", open.join(", "))),
                parts,
            )
        }
    }

    /// A redirection of the line that writes into a file an Edit/Write deny rule protects, as
    /// the verdict it earns.
    fn redirect_denied(&self, lowered: &Lowered) -> Option<BashVerdict> {
        for cmd in &lowered.commands {
            for r in cmd.redirects.iter().filter(|r| r.write && !r.is_harmless()) {
                if let Some(p) = self.resolve_word(&r.target, cmd.cwd.as_deref()) {
                    if let Some(rule) = self.path_denied(&["Edit", "Write"], &p) {
                        let part = format!("> {}", r.target.text());
                        return Some(BashVerdict::Denied(rule.clone(), part));
                    }
                }
            }
        }
        None
    }

    /// The verdict on a line keel could not fully understand (`why`), once no deny rule hit.
    fn judge_not_understood(&self, tool: &str, why: &str) -> BashVerdict {
        let has_bash_deny = self.bash_rules(self.deny, tool).next().is_some();
        // In bypass mode only deny rules could stop it; they cannot see into what was
        // not understood, so it is asked about — unless there are none to see with.
        if !has_bash_deny {
            if self.mode == PermissionMode::BypassPermissions {
                return BashVerdict::Allowed(None);
            }
            // A rule that allows every command needs no understanding of this one.
            if self.mode != PermissionMode::Plan {
                if let Some(r) = self
                    .allow
                    .iter()
                    .find(|r| (r.tool == "Bash" || r.tool == tool) && r.pattern.is_none())
                {
                    return BashVerdict::Allowed(Some(r.text()));
                }
            }
        }
        BashVerdict::Ask(format!("keel could not tell what it would run: {why}"))
    }

    /// Each command of an understood line (and each file it writes through a redirection)
    /// judged against the read-only table and the allow rules, one line each into `parts`:
    /// the first allow rule that was needed, and what no rule allows.
    fn judge_commands(
        &self,
        tool: &str,
        j: &Judgement,
        parts: &mut Vec<String>,
    ) -> (Option<String>, Vec<String>) {
        let mut by_rule = None;
        let mut open: Vec<String> = Vec::new();
        for (cmd, ro) in j.lowered.commands.iter().zip(&j.readonly) {
            let shown = cmd.display_full();
            // Only reads (and reads nothing a Read deny rule protects)?
            let ro = ro
                .clone()
                .map_err(NeedsApproval::from)
                .and_then(|r| self.reads_allowed(&r, cmd.cwd.as_deref()));
            let rule = if self.mode == PermissionMode::Plan {
                None
            } else {
                self.bash_rules(self.allow, tool)
                    .find(|(_, pat)| match pat {
                        None => true,
                        Some(p) => allow_matches(self, p, cmd),
                    })
            };
            match (&ro, rule) {
                (Ok(()), _) => parts.push(format!("`{shown}`: reads only")),
                (Err(_), Some((r, _))) => {
                    parts.push(format!("`{shown}`: allowed by `{}`", r.text()));
                    by_rule.get_or_insert_with(|| r.text());
                }
                (Err(why), None) => {
                    parts.push(format!("`{shown}`: needs approval ({why})"));
                    open.push(format!("`{}` ({why})", shell_short(&shown)));
                }
            }
            self.judge_redirect_writes(cmd, parts, &mut open);
        }
        (by_rule, open)
    }

    /// Files a command writes through redirections need what a Write there needs.
    fn judge_redirect_writes(
        &self,
        cmd: &LoweredCommand,
        parts: &mut Vec<String>,
        open: &mut Vec<String>,
    ) {
        for r in cmd.redirects.iter().filter(|r| r.write && !r.is_harmless()) {
            match self.write_allowed(&r.target, cmd.cwd.as_deref()) {
                Ok(how) => parts.push(format!("`> {}`: {how}", r.target.text())),
                Err(why) => {
                    parts.push(format!("`> {}`: needs approval ({why})", r.target.text()));
                    open.push(format!("the write to `{}` ({why})", r.target.text()));
                }
            }
        }
    }

    /// The files the commands of a judged line read (operands of read-only commands, input
    /// redirections) and write (output redirections), each resolved as the kernel would.
    pub fn path_uses(&self, j: &Judgement) -> Vec<PathUse> {
        let mut out = Vec::new();
        for (cmd, ro) in j.lowered.commands.iter().zip(&j.readonly) {
            let cwd = cmd.cwd.as_deref();
            let mut words: Vec<(bool, Arg)> = Vec::new();
            if let Ok(r) = ro {
                words.extend(r.reads.iter().cloned().map(|w| (false, w)));
                if r.recursive && !words.iter().any(|(w, _)| !w) {
                    words.push((false, Arg::Lit(".".to_owned())));
                }
            }
            words.extend(
                cmd.redirects
                    .iter()
                    .filter(|r| r.write && !r.is_harmless())
                    .map(|r| (true, r.target.clone())),
            );
            for (writes, w) in words {
                let resolved = self.resolve_word(&w, cwd);
                out.push(PathUse {
                    writes,
                    word: w.text().to_owned(),
                    inside: resolved
                        .as_ref()
                        .is_some_and(|p| self.roots.contains(self.fs, p)),
                    broken: resolved.as_ref().and_then(|p| p.broken.clone()),
                    resolved: resolved.map(|p| p.real),
                });
            }
        }
        out
    }

    /// Resolve a word naming a path, if it is known (and its directory is).
    pub(crate) fn resolve_word(&self, w: &Arg, cwd: Option<&Path>) -> Option<Resolved> {
        let t = w.lit()?;
        if Path::new(t).is_absolute() || t.starts_with('~') {
            return Some(self.roots.resolve(self.fs, t));
        }
        Some(self.roots.resolve_in(self.fs, t, cwd?))
    }

    /// Whether a read-only command may run without asking for what it reads: it runs in a
    /// directory that may be read, and every file operand is one that may be read (inside
    /// the working directory or an added directory, keel's own output, a documented system
    /// location, or allowed by a Read rule) and that no Read deny rule protects.
    fn reads_allowed(
        &self,
        r: &readonly::ReadOnly,
        cwd: Option<&Path>,
    ) -> Result<(), NeedsApproval> {
        let denies: Vec<(&Rule, Option<PathPattern>)> = self.read_deny_patterns();
        let mut reads: Vec<Arg> = r.reads.clone();
        if r.recursive && reads.is_empty() {
            reads.push(Arg::Lit(".".to_owned()));
        }
        // A command run after `cd` elsewhere reads there even with no operand (`ls`).
        if let Some(dir) = cwd {
            let here = self.roots.resolve_in(self.fs, ".", dir);
            if !self.read_ok(&here) {
                return Err(NeedsApproval::RunsOutside {
                    allow_dir: read_rule_dir(self.fs, &here),
                    dir: here.real,
                });
            }
        }
        for w in &reads {
            let Some(p) = self.resolve_word(w, cwd) else {
                return Err(NeedsApproval::Unresolved {
                    word: w.text().to_owned(),
                });
            };
            for (rule, pat) in &denies {
                let covered = match pat {
                    None => true,
                    Some(pat) => {
                        pat.matches(&p)
                            || (r.recursive && self.fs.is_dir(&p.real) && pat.may_match_under(&p))
                    }
                };
                if covered {
                    return Err(NeedsApproval::ReadDenied {
                        word: w.text().to_owned(),
                        rule: rule.text(),
                        origin: rule.source.clone(),
                    });
                }
            }
            if !self.read_ok(&p) {
                return Err(NeedsApproval::ReadsOutside {
                    word: w.text().to_owned(),
                    via: (p.real != p.lexical).then(|| p.real.clone()),
                    allow_dir: read_rule_dir(self.fs, &p),
                });
            }
        }
        Ok(())
    }

    /// Whether `p` may be read without asking: a readable place, or a Read allow rule.
    fn read_ok(&self, p: &Resolved) -> bool {
        self.roots.readable(self.fs, p) || self.path_allowed(&["Read"], p).is_some()
    }

    /// Whether a write to the path in `w` needs no approval; how, or why it does.
    fn write_allowed(&self, w: &Arg, cwd: Option<&Path>) -> Result<String, NeedsApproval> {
        // A rule that allows every command allows what any command could write.
        if self.mode != PermissionMode::Plan {
            if let Some(r) = self
                .allow
                .iter()
                .find(|r| r.tool == "Bash" && r.pattern.is_none())
            {
                return Ok(format!("allowed by `{}`", r.text()));
            }
        }
        let Some(p) = self.resolve_word(w, cwd) else {
            return Err(NeedsApproval::WriteUnresolved);
        };
        if self.mode == PermissionMode::Plan {
            return Err(NeedsApproval::PlanMode);
        }
        if let Some(rule) = self.path_allowed(&["Edit", "Write"], &p) {
            return Ok(format!("allowed by `{}`", rule.text()));
        }
        if self.mode == PermissionMode::AcceptEdits && self.roots.contains(self.fs, &p) {
            return Ok("allowed by acceptEdits inside the working directory".to_owned());
        }
        if self.mode == PermissionMode::BypassPermissions {
            return Ok("allowed by bypassPermissions".to_owned());
        }
        Err(if self.roots.contains(self.fs, &p) {
            NeedsApproval::WriteNotAllowed
        } else {
            NeedsApproval::WriteOutside
        })
    }
}

/// The directory a Read rule would have to allow for reading `p` (itself, or its parent).
fn read_rule_dir(fs: &dyn FsView, p: &Resolved) -> PathBuf {
    if fs.is_dir(&p.real) {
        p.real.clone()
    } else {
        p.real.parent().unwrap_or(Path::new("/")).to_path_buf()
    }
}

fn shell_short(s: &str) -> String {
    if s.chars().count() <= 80 {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(80).collect::<String>())
    }
}

impl<'p> Policy<'p> {
    /// Rules that would allow exactly this command line next time, and nothing more: one
    /// exact rule per command that needed approval, and one exact path rule per file it
    /// writes. Empty when the line was not fully understood.
    pub fn suggest_bash(&self, tool: &str, command: &str) -> Vec<(String, String)> {
        let j = self.judged_line(command);
        let mut out = Vec::new();
        if !j.lowered.understood() {
            return out;
        }
        for (cmd, ro) in j.lowered.commands.iter().zip(&j.readonly) {
            let ro = ro
                .clone()
                .map_err(NeedsApproval::from)
                .and_then(|r| self.reads_allowed(&r, cmd.cwd.as_deref()));
            let allowed = self.bash_rules(self.allow, tool).any(|(_, p)| match p {
                None => true,
                Some(p) => allow_matches(self, &p, cmd),
            });
            let needs_rule = ro.is_err() && !allowed;
            // A word only known at run time makes any rule built from it either a wildcard
            // (its text matched as written) or wrong: a line with such a command gets no
            // reusable rule at all, and the approval is for this call only.
            if needs_rule && cmd.rule_argv().iter().any(|a| a.lit().is_none())
                || cmd
                    .redirects
                    .iter()
                    .any(|r| r.write && !r.is_harmless() && r.target.lit().is_none())
            {
                return Vec::new();
            }
            if needs_rule && !cmd.more_args {
                let full = cmd.rule_argv();
                let prog = full
                    .first()
                    .and_then(|a| a.lit())
                    .map(|p| rule_program(self.fs, self.path_var, p, cmd.cwd.as_deref()));
                if let Some(prog) = prog {
                    let mut words: Vec<&str> = vec![prog.as_str()];
                    words.extend(full[1..].iter().map(|a| a.text()));
                    if let Some(r) = exact_rule(&words) {
                        let item = (tool.to_owned(), r);
                        if !out.contains(&item) {
                            out.push(item);
                        }
                    }
                }
            }
            for r in cmd.redirects.iter().filter(|r| r.write && !r.is_harmless()) {
                if self.write_allowed(&r.target, cmd.cwd.as_deref()).is_err() {
                    if let Some(p) = self.resolve_word(&r.target, cmd.cwd.as_deref()) {
                        let item = ("Edit".to_owned(), exact_path_rule(&p.real));
                        if !out.contains(&item) {
                            out.push(item);
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
