//! Lowering a command line to the simple commands it would run.
//!
//! The line is parsed by a real shell parser; the walk then visits every place a command can
//! hide — pipelines, lists, subshells, groups, loops, conditionals, functions, `$(…)`,
//! backquotes, `<(…)`, here-documents — and peels the wrappers that run another program
//! (`env`, `sudo`, `timeout`, `xargs`, `find -exec`, `sh -c '…'`, …). What it cannot model is
//! reported as a problem, and a problem means the line is never allowed without asking.

use crate::fs::{FsView, RealFs};
use std::path::{Path, PathBuf};

use brush_parser::ast::{
    self, AndOr, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList,
    IoFileRedirectKind, IoFileRedirectTarget, IoRedirect, SeparatorOperator,
};
use brush_parser::ParserOptions;

use super::command::{dangerous_var, LoweredCommand, Redirect};
use super::words::{eval_word, short, Arg, ShellEnv, WordFindings};

/// How deep `sh -c`, `eval` and substitutions may nest before the walker gives up.
const MAX_DEPTH: usize = 12;

/// The deepest nesting of `(` a line may have for the parser to read it (see
/// [`Walker::script`]); unclosed, the parser needs ~1.5 ms for this many.
const MAX_PARENS: usize = 16;

/// How deeply `(` nest in `s`, counting every `(` and `)` (quoted ones too: a line that only
/// looks deep is asked about, never allowed by mistake).
fn paren_depth(s: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in s.bytes() {
        match b {
            b'(' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Whether a run of digits longer than an int holds comes right before `<` or `>` (a
/// redirection's descriptor number, or a word the parser would take for one).
fn huge_descriptor(s: &str) -> bool {
    let b = s.as_bytes();
    let mut run = 0usize;
    for c in b {
        if c.is_ascii_digit() {
            run += 1;
        } else {
            if run > 9 && matches!(c, b'<' | b'>') {
                return true;
            }
            run = 0;
        }
    }
    false
}

/// A command line lowered to its simple commands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lowered {
    /// Every simple command, in the order they appear.
    pub commands: Vec<LoweredCommand>,
    /// What the walker did not understand; non-empty means "never allow without asking".
    pub problems: Vec<String>,
}

impl Lowered {
    /// Whether everything in the line was understood.
    pub fn understood(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Lower `command`, run by bash in `cwd`, on the real file system.
pub fn lower(command: &str, cwd: &Path, env: &ShellEnv) -> Lowered {
    lower_in(&RealFs, command, cwd, env)
}

/// Lower `command`, run by bash in `cwd`, asking `fs` whether a `cd` target is a directory.
pub fn lower_in(fs: &dyn FsView, command: &str, cwd: &Path, env: &ShellEnv) -> Lowered {
    let mut w = Walker {
        fs,
        env,
        opts: ParserOptions::default(),
        out: Lowered::default(),
        cwd: Some(cwd.to_path_buf()),
    };
    w.script(command, 0);
    w.out
}

struct Walker<'e> {
    fs: &'e dyn FsView,
    env: &'e ShellEnv,
    opts: ParserOptions,
    out: Lowered,
    /// Where the next command runs, if known.
    cwd: Option<PathBuf>,
}

/// Where in the line a command sits.
#[derive(Clone, Copy)]
struct Place {
    depth: usize,
    background: bool,
    /// It may or may not run (after `&&`/`||`, inside `if`/loops/functions).
    conditional: bool,
}

impl Walker<'_> {
    fn problem(&mut self, p: String) {
        if !self.out.problems.contains(&p) {
            self.out.problems.push(p);
        }
    }

    fn script(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.problem("commands are nested too deeply to follow".to_owned());
            return;
        }
        // The parser's time grows exponentially with unclosed `(` nested in a row (each may
        // open a subshell or an arithmetic `((`): a line of 30 would hold a permission check
        // for minutes. Deeper than anything written by hand, it is not followed.
        if paren_depth(text) > MAX_PARENS {
            self.problem("the command nests parentheses too deeply to follow".to_owned());
            return;
        }
        // A descriptor number before `<` or `>` that does not fit an int makes the parser
        // panic; bash itself refuses such a number.
        if huge_descriptor(text) {
            self.problem(
                "a redirection names a file descriptor number too large to be one".to_owned(),
            );
            return;
        }
        // bash treats a NUL as the end of the string; nothing sensible contains one.
        if text.contains('\0') {
            self.problem("the command contains a NUL character".to_owned());
            return;
        }
        let mut parser = brush_parser::Parser::new(std::io::Cursor::new(text), &self.opts);
        // A panic in the parser (a form it does not expect) is a line not understood, not a
        // failed turn.
        let parsed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parser.parse_program()));
        let Ok(parsed) = parsed else {
            self.problem(format!("the shell parser failed on `{}`", short(text)));
            return;
        };
        let program = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.problem(format!(
                    "the shell parser could not read `{}`: {e}",
                    short(text)
                ));
                return;
            }
        };
        let place = Place {
            depth,
            background: false,
            conditional: false,
        };
        for list in &program.complete_commands {
            self.list(list, place);
        }
    }

    fn list(&mut self, list: &CompoundList, place: Place) {
        for item in &list.0 {
            let bg = matches!(item.1, SeparatorOperator::Async);
            let place = Place {
                background: place.background || bg,
                ..place
            };
            self.and_or(&item.0, place);
        }
    }

    fn and_or(&mut self, a: &ast::AndOrList, place: Place) {
        // A background list runs in a subshell: a `cd` there changes nothing after it.
        let saved = place.background.then(|| self.cwd.clone());
        self.pipeline(&a.first, place);
        for next in &a.additional {
            let p = match next {
                AndOr::And(p) | AndOr::Or(p) => p,
            };
            self.pipeline(
                p,
                Place {
                    conditional: true,
                    ..place
                },
            );
        }
        if let Some(cwd) = saved {
            self.cwd = cwd;
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline, place: Place) {
        if p.seq.len() > 1 {
            // Every part of a pipeline runs in its own subshell.
            let saved = self.cwd.clone();
            for c in &p.seq {
                self.command(c, place);
                self.cwd = saved.clone();
            }
        } else if let Some(c) = p.seq.first() {
            self.command(c, place);
        }
    }

    fn command(&mut self, c: &Command, place: Place) {
        match c {
            Command::Simple(s) => self.simple(s, place),
            Command::Compound(cc, redirects) => {
                let mut reds = Vec::new();
                if let Some(r) = redirects {
                    for io in &r.0 {
                        self.redirect(io, place, &mut reds);
                    }
                }
                self.attach_redirects(reds, place);
                self.compound(cc, place);
            }
            Command::Function(f) => {
                let inner = Place {
                    conditional: true,
                    ..place
                };
                let saved = self.cwd.clone();
                self.compound(&f.body.0, inner);
                self.cwd = saved;
                if let Some(r) = &f.body.1 {
                    let mut reds = Vec::new();
                    for io in &r.0 {
                        self.redirect(io, inner, &mut reds);
                    }
                    self.attach_redirects(reds, inner);
                }
            }
            Command::ExtendedTest(t, redirects) => {
                self.test_expr(&t.expr, place);
                if let Some(r) = redirects {
                    let mut reds = Vec::new();
                    for io in &r.0 {
                        self.redirect(io, place, &mut reds);
                    }
                    self.attach_redirects(reds, place);
                }
            }
        }
    }

    /// Redirections on a compound command apply to everything in it; they are recorded as
    /// a command of their own (`:` with the redirections), so that their writes are judged.
    fn attach_redirects(&mut self, reds: Vec<Redirect>, place: Place) {
        if reds.is_empty() {
            return;
        }
        self.out.commands.push(LoweredCommand {
            argv: vec![Arg::Lit(":".to_owned())],
            wrappers: Vec::new(),
            assigns: Vec::new(),
            redirects: reds,
            background: place.background,
            cwd: self.cwd.clone(),
            more_args: false,
            git_globals: Vec::new(),
            git_global_words: Vec::new(),
        });
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, place: Place) {
        use ast::ExtendedTestExpr as E;
        match e {
            E::And(a, b) | E::Or(a, b) => {
                self.test_expr(a, place);
                self.test_expr(b, place);
            }
            E::Not(a) | E::Parenthesized(a) => self.test_expr(a, place),
            E::UnaryTest(_, w) => {
                self.word(&w.value, place);
            }
            E::BinaryTest(_, a, b) => {
                self.word(&a.value, place);
                self.word(&b.value, place);
            }
        }
    }

    fn compound(&mut self, cc: &CompoundCommand, place: Place) {
        let cond = Place {
            conditional: true,
            ..place
        };
        match cc {
            CompoundCommand::Arithmetic(a) => self.arith(&a.expr.value),
            CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arith(&e.value);
                }
                self.list(&f.body.list, cond);
            }
            CompoundCommand::BraceGroup(g) => self.list(&g.list, place),
            CompoundCommand::Subshell(s) => {
                let saved = self.cwd.clone();
                self.list(&s.list, place);
                self.cwd = saved;
            }
            CompoundCommand::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value, place);
                }
                self.list(&f.body.list, cond);
            }
            CompoundCommand::CaseClause(c) => {
                self.word(&c.value.value, place);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, cond);
                    }
                    if let Some(l) = &item.cmd {
                        self.list(l, cond);
                    }
                }
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition, cond);
                self.list(&i.then, cond);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, cond);
                    }
                    self.list(&e.body, cond);
                }
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0, cond);
                self.list(&w.1.list, cond);
            }
            CompoundCommand::Coprocess(c) => {
                let saved = self.cwd.clone();
                self.command(
                    &c.body,
                    Place {
                        background: true,
                        ..cond
                    },
                );
                self.cwd = saved;
            }
        }
    }

    fn arith(&mut self, expr: &str) {
        if expr.contains("$(") || expr.contains('`') || expr.contains('[') {
            self.problem(format!(
                "the arithmetic expression `{}` may run commands",
                short(expr)
            ));
        }
    }

    /// Evaluate a word; lower the commands substituted into it.
    fn word(&mut self, raw: &str, place: Place) -> Arg {
        let mut found = WordFindings::default();
        let arg = eval_word(raw, self.env, &self.opts, &mut found);
        for p in found.problems {
            self.problem(p);
        }
        for s in found.substitutions {
            // A substitution runs in a subshell.
            let saved = self.cwd.clone();
            self.script_at(&s, place);
            self.cwd = saved;
        }
        arg
    }

    fn script_at(&mut self, text: &str, place: Place) {
        let before = self.out.commands.len();
        self.script(text, place.depth + 1);
        if place.background {
            for c in &mut self.out.commands[before..] {
                c.background = true;
            }
        }
    }

    fn redirect(&mut self, io: &IoRedirect, place: Place, out: &mut Vec<Redirect>) {
        match io {
            IoRedirect::File(_, kind, target) => match target {
                IoFileRedirectTarget::Filename(w) => {
                    let arg = self.word(&w.value, place);
                    let write = !matches!(kind, IoFileRedirectKind::Read);
                    if matches!(
                        kind,
                        IoFileRedirectKind::DuplicateInput | IoFileRedirectKind::DuplicateOutput
                    ) && is_fd_word(arg.text())
                    {
                        return;
                    }
                    out.push(Redirect { target: arg, write });
                }
                IoFileRedirectTarget::Fd(_) => {}
                IoFileRedirectTarget::Duplicate(w) => {
                    let arg = self.word(&w.value, place);
                    if !is_fd_word(arg.text()) {
                        out.push(Redirect {
                            target: arg,
                            write: matches!(kind, IoFileRedirectKind::DuplicateOutput),
                        });
                    }
                }
                IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    let saved = self.cwd.clone();
                    self.list(&sub.list, place);
                    self.cwd = saved;
                }
            },
            IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    self.heredoc(&doc.doc.value, place);
                }
            }
            IoRedirect::HereString(_, w) => {
                self.word(&w.value, place);
            }
            IoRedirect::OutputAndError(w, _) => {
                let arg = self.word(&w.value, place);
                out.push(Redirect {
                    target: arg,
                    write: true,
                });
            }
        }
    }

    fn heredoc(&mut self, body: &str, place: Place) {
        match brush_parser::word::parse_heredoc(body, &self.opts) {
            Ok(pieces) => {
                use brush_parser::word::WordPiece as P;
                fn visit(p: &P, subs: &mut Vec<String>, bad: &mut bool) {
                    match p {
                        P::CommandSubstitution(s) | P::BackquotedCommandSubstitution(s) => {
                            subs.push(s.clone())
                        }
                        P::DoubleQuotedSequence(v) | P::GettextDoubleQuotedSequence(v) => {
                            for q in v {
                                visit(&q.piece, subs, bad);
                            }
                        }
                        P::ParameterExpansion(pe) => {
                            let raw = format!("{pe:?}");
                            *bad |= raw.contains("$(") || raw.contains('`');
                        }
                        P::ArithmeticExpression(e) => {
                            *bad |= e.value.contains("$(")
                                || e.value.contains('`')
                                || e.value.contains('[');
                        }
                        _ => {}
                    }
                }
                let mut subs = Vec::new();
                let mut bad = false;
                for p in &pieces {
                    visit(&p.piece, &mut subs, &mut bad);
                }
                if bad {
                    self.problem(
                        "a here-document expands something that may run commands".to_owned(),
                    );
                }
                for s in subs {
                    let saved = self.cwd.clone();
                    self.script_at(&s, place);
                    self.cwd = saved;
                }
            }
            Err(_) => self.problem("a here-document could not be read".to_owned()),
        }
    }

    fn simple(&mut self, s: &ast::SimpleCommand, place: Place) {
        let mut assigns = Vec::new();
        let mut redirects = Vec::new();
        let mut argv = Vec::new();
        for item in s.prefix.iter().flat_map(|p| &p.0) {
            match item {
                CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                    let name = match &a.name {
                        ast::AssignmentName::VariableName(n) => n.clone(),
                        ast::AssignmentName::ArrayElementName(n, i) => {
                            self.arith(i);
                            n.clone()
                        }
                    };
                    match &a.value {
                        ast::AssignmentValue::Scalar(w) => {
                            self.word(&w.value, place);
                        }
                        ast::AssignmentValue::Array(items) => {
                            for (k, v) in items {
                                if let Some(k) = k {
                                    self.word(&k.value, place);
                                }
                                self.word(&v.value, place);
                            }
                        }
                    }
                    assigns.push(name);
                }
                CommandPrefixOrSuffixItem::IoRedirect(io) => {
                    self.redirect(io, place, &mut redirects)
                }
                CommandPrefixOrSuffixItem::Word(w) => argv.push(self.word(&w.value, place)),
                CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    let saved = self.cwd.clone();
                    self.list(&sub.list, place);
                    self.cwd = saved;
                }
            }
        }
        if let Some(w) = &s.word_or_name {
            argv.push(self.word(&w.value, place));
        }
        for item in s.suffix.iter().flat_map(|p| &p.0) {
            match item {
                CommandPrefixOrSuffixItem::IoRedirect(io) => {
                    self.redirect(io, place, &mut redirects)
                }
                CommandPrefixOrSuffixItem::Word(w)
                | CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                    argv.push(self.word(&w.value, place))
                }
                CommandPrefixOrSuffixItem::ProcessSubstitution(kind, sub) => {
                    let saved = self.cwd.clone();
                    self.list(&sub.list, place);
                    self.cwd = saved;
                    let k = match kind {
                        ast::ProcessSubstitutionKind::Read => "<(…)",
                        ast::ProcessSubstitutionKind::Write => ">(…)",
                    };
                    argv.push(Arg::Dyn(k.to_owned()));
                }
            }
        }
        if argv.is_empty() {
            // Only assignments (and redirections): they last for the rest of the line.
            for name in &assigns {
                if dangerous_var(name) {
                    self.problem(format!("`{name}=…` changes how the commands after it run"));
                }
            }
            if !redirects.is_empty() {
                self.attach_redirects(redirects, place);
            }
            return;
        }
        let cmd = LoweredCommand {
            argv,
            wrappers: Vec::new(),
            assigns,
            redirects,
            background: place.background,
            cwd: self.cwd.clone(),
            more_args: false,
            git_globals: Vec::new(),
            git_global_words: Vec::new(),
        };
        self.unwrap(cmd, place);
    }

    /// Peel wrappers off `cmd` and record it (and any command it runs) as lowered commands.
    fn unwrap(&mut self, mut cmd: LoweredCommand, place: Place) {
        use super::wrappers::{peel, Peeled};
        loop {
            let Some(first) = cmd.argv.first() else {
                // `exec > file`: only redirections are left.
                self.attach_redirects(std::mem::take(&mut cmd.redirects), place);
                return;
            };
            let Arg::Lit(prog) = first else {
                self.problem(format!(
                    "the program `{}` is only known when the command runs",
                    short(first.text())
                ));
                self.out.commands.push(cmd);
                return;
            };
            let name = Path::new(prog)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(prog)
                .to_owned();
            match peel(&name, &mut cmd) {
                Peeled::Plain => break,
                Peeled::Wrapper => continue,
                Peeled::Script { text } => {
                    // `sh -c '…'` / `eval …`: the string's commands run, in this directory.
                    let before = self.out.commands.len();
                    self.script_at(&text, place);
                    for c in &mut self.out.commands[before..] {
                        let mut ws = cmd.wrappers.clone();
                        ws.append(&mut c.wrappers);
                        c.wrappers = ws;
                        c.assigns.extend(cmd.assigns.iter().cloned());
                        c.redirects.extend(cmd.redirects.iter().cloned());
                    }
                    if !cmd.redirects.is_empty() && before == self.out.commands.len() {
                        self.attach_redirects(cmd.redirects.clone(), place);
                    }
                    return;
                }
                Peeled::Inner(inner) => {
                    // `find … -exec cmd {} ;`: the find itself and the command it runs.
                    for i in inner {
                        self.unwrap(i, place);
                    }
                    break;
                }
                Peeled::Problem(p) => {
                    self.problem(p);
                    break;
                }
                Peeled::Cd(dir) => {
                    self.cd(dir, place);
                    break;
                }
            }
        }
        self.out.commands.push(cmd);
    }

    fn cd(&mut self, dir: Option<Arg>, place: Place) {
        let target = match dir {
            None => self.env.home.as_ref().map(PathBuf::from),
            Some(Arg::Lit(d)) if d != "-" => {
                let p = Path::new(&d);
                match (&self.cwd, p.is_absolute()) {
                    (_, true) => Some(p.to_path_buf()),
                    (Some(c), false) => Some(c.join(p)),
                    (None, false) => None,
                }
            }
            _ => None,
        };
        // A `cd` that may not run, or may fail, leaves the directory unknown.
        self.cwd = match target {
            Some(t) if !place.conditional && self.fs.is_dir(&t) => Some(t),
            _ => None,
        };
    }
}

fn is_fd_word(s: &str) -> bool {
    !s.is_empty() && (s == "-" || s.trim_end_matches('-').chars().all(|c| c.is_ascii_digit()))
}
