//! Turning one shell word into what bash would pass to the program, when that can be known
//! without running anything.

use brush_parser::word::{Parameter, ParameterExpr, TildeExpr, WordPiece};
use brush_parser::ParserOptions;

/// One word of a lowered command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Known exactly: bash passes this string.
    Lit(String),
    /// Depends on the run (a variable, a command's output, a glob, a brace expansion): the
    /// word as written. It may become any string, or several words.
    Dyn(String),
}

impl Arg {
    /// The literal value, if known.
    pub fn lit(&self) -> Option<&str> {
        match self {
            Arg::Lit(s) => Some(s),
            Arg::Dyn(_) => None,
        }
    }

    /// The text used when a command is shown or matched against a rule: the value when known,
    /// the word as written otherwise.
    pub fn text(&self) -> &str {
        match self {
            Arg::Lit(s) | Arg::Dyn(s) => s,
        }
    }

    /// For a word only known at run time, what bash may turn it into; `None` for a literal.
    pub fn expansion(&self) -> Option<Expansion> {
        match self {
            Arg::Lit(_) => None,
            Arg::Dyn(raw) => Some(expansion_of(raw)),
        }
    }

    /// Whether bash may pass this word as something that starts with `-` (and so a program
    /// may read it as an option), or as several words any of which may.
    pub fn may_be_option(&self) -> bool {
        match self {
            Arg::Lit(s) => s.starts_with('-'),
            Arg::Dyn(_) => self.expansion().is_none_or(|e| e.any_dash),
        }
    }

    /// Whether bash may pass this word as zero or several words.
    pub fn may_split(&self) -> bool {
        self.expansion().is_some_and(|e| e.splits)
    }
}

/// What bash may make of a word whose value is only known at run time. Judged from the word
/// as written, failing closed: whatever is not sure to be safe is assumed possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expansion {
    /// It may become zero or several words: an unquoted variable or substitution (split on
    /// `IFS`), a glob, a brace list, a quoted `"$@"`.
    pub splits: bool,
    /// The first word it becomes may start with `-`: nothing fixed that is not a dash comes
    /// before the first part only known at run time.
    pub first_dash: bool,
    /// Any word it becomes may start with `-` (the first, or one split off later).
    pub any_dash: bool,
    /// The first character, when it is fixed (`./*` starts with `.`).
    pub leading: Option<char>,
}

impl Expansion {
    /// What nothing is known about: any number of words, any of them an option.
    pub const UNKNOWN: Expansion = Expansion {
        splits: true,
        first_dash: true,
        any_dash: true,
        leading: None,
    };
}

/// Walks the pieces of a word, collecting the fixed text before the first part only known at
/// run time and whether that part or a later one may split or start with `-`.
#[derive(Default)]
struct Scan {
    prefix: String,
    prefix_done: bool,
    /// The first run-time part cannot start with `-` (a `~` that names a home directory).
    first_part_safe: bool,
    splits: bool,
    dash_anywhere: bool,
}

impl Scan {
    fn fixed(&mut self, s: &str) {
        if !self.prefix_done {
            self.prefix.push_str(s);
        }
    }

    fn run_time(&mut self, cannot_start_with_dash: bool) {
        if !self.prefix_done {
            self.prefix_done = true;
            self.first_part_safe = cannot_start_with_dash;
        }
    }

    fn visit(&mut self, p: &WordPiece, quoted: bool) {
        match p {
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                for q in inner {
                    self.visit(&q.piece, true);
                }
            }
            WordPiece::Text(t) if !quoted && expands(t) => {
                // A glob or brace list: every word it becomes starts with the text before it.
                let cut = t.find(['*', '?', '[', '{']).unwrap_or(t.len());
                self.fixed(&t[..cut]);
                self.run_time(false);
                self.splits = true;
            }
            WordPiece::TildeExpansion(t) => {
                // A home directory is absolute (or `~name` stays as written); `~+`, `~-` and
                // the directory stack are variables a command may have set to anything.
                self.run_time(matches!(t, TildeExpr::Home | TildeExpr::UserHome(_)));
            }
            WordPiece::ParameterExpansion(pe) => {
                let d = format!("{pe:?}");
                let many = d.contains('@')
                    || d.contains("concatenate: false")
                    || d.contains("VariableNames")
                    || d.contains("MemberKeys");
                if !quoted || many {
                    self.splits = true;
                    self.dash_anywhere = true;
                }
                self.run_time(false);
            }
            WordPiece::CommandSubstitution(_)
            | WordPiece::BackquotedCommandSubstitution(_)
            | WordPiece::ArithmeticExpression(_) => {
                if !quoted {
                    self.splits = true;
                    self.dash_anywhere = true;
                }
                self.run_time(false);
            }
            other => {
                let mut v = String::new();
                let mut found = WordFindings::default();
                if piece(
                    other,
                    false,
                    quoted,
                    &ShellEnv::default(),
                    &mut v,
                    &mut found,
                ) {
                    self.fixed(&v);
                } else {
                    self.splits = true;
                    self.dash_anywhere = true;
                    self.run_time(false);
                }
            }
        }
    }
}

/// What bash may make of the word `raw` (as written); see [`Expansion`].
fn expansion_of(raw: &str) -> Expansion {
    // Words the walker made up for constructs that are not words: `<(…)` becomes one path
    // under /dev/fd, `popd` a directory from the stack.
    if matches!(raw, "<(…)" | ">(…)") {
        return Expansion {
            splits: false,
            first_dash: false,
            any_dash: false,
            leading: Some('/'),
        };
    }
    let Ok(pieces) = brush_parser::word::parse(raw, &ParserOptions::default()) else {
        return Expansion::UNKNOWN;
    };
    let mut scan = Scan::default();
    for p in &pieces {
        scan.visit(&p.piece, false);
    }
    if !scan.prefix_done {
        // Nothing here is only known at run time, yet the word was not read as a literal.
        return Expansion::UNKNOWN;
    }
    let first_dash = match scan.prefix.chars().next() {
        Some(c) => c == '-',
        None => !scan.first_part_safe,
    };
    Expansion {
        splits: scan.splits,
        first_dash,
        any_dash: first_dash || scan.dash_anywhere,
        leading: scan.prefix.chars().next(),
    }
}

/// What evaluating a word found besides its value: command substitutions to lower, and
/// constructs that cannot be judged at all.
#[derive(Default)]
pub(super) struct WordFindings {
    /// The text of each `$(…)` and backquoted substitution, to be lowered as commands.
    pub substitutions: Vec<String>,
    /// Why the word cannot be understood, if it cannot.
    pub problems: Vec<String>,
}

/// What the walker knows of the environment, for `~` and `$HOME`.
#[derive(Clone, Debug, Default)]
pub struct ShellEnv {
    /// The user's home directory.
    pub home: Option<String>,
}

/// Evaluate a raw word (as the parser kept it) to an [`Arg`], collecting substitutions.
pub(super) fn eval_word(
    raw: &str,
    env: &ShellEnv,
    opts: &ParserOptions,
    found: &mut WordFindings,
) -> Arg {
    let pieces = match brush_parser::word::parse(raw, opts) {
        Ok(p) => p,
        Err(_) => {
            found
                .problems
                .push(format!("the word `{}` could not be parsed", short(raw)));
            return Arg::Dyn(raw.to_owned());
        }
    };
    let mut out = String::new();
    let mut known = true;
    for (i, p) in pieces.iter().enumerate() {
        known &= piece(&p.piece, i == 0, false, env, &mut out, found);
    }
    if known {
        Arg::Lit(out)
    } else {
        Arg::Dyn(raw.to_owned())
    }
}

/// Append the value of one piece to `out`; false when it is not known.
fn piece(
    p: &WordPiece,
    first: bool,
    quoted: bool,
    env: &ShellEnv,
    out: &mut String,
    found: &mut WordFindings,
) -> bool {
    match p {
        WordPiece::Text(t) => {
            // Unquoted text is subject to pathname and brace expansion.
            if !quoted && expands(t) {
                out.push_str(t);
                return false;
            }
            out.push_str(t);
            true
        }
        WordPiece::SingleQuotedText(t) => {
            out.push_str(t);
            true
        }
        WordPiece::AnsiCQuotedText(t) => match ansi_c(t) {
            Some(s) => {
                out.push_str(&s);
                true
            }
            None => false,
        },
        WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
            let mut known = true;
            for q in inner {
                known &= piece(&q.piece, false, true, env, out, found);
            }
            known
        }
        WordPiece::EscapeSequence(e) => {
            let mut chars = e.chars();
            match (chars.next(), chars.next()) {
                (Some('\\'), Some('\n')) => true,
                (Some('\\'), Some(c)) => {
                    if quoted && !matches!(c, '$' | '`' | '"' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                    out.extend(chars);
                    true
                }
                _ => {
                    out.push_str(e);
                    true
                }
            }
        }
        WordPiece::TildeExpansion(t) => match (t, first, &env.home) {
            (TildeExpr::Home, true, Some(h)) => {
                out.push_str(h);
                true
            }
            _ => false,
        },
        WordPiece::ParameterExpansion(pe) => {
            let raw = format!("{pe:?}");
            if raw.contains("$(") || raw.contains('`') {
                found
                    .problems
                    .push("a parameter expansion contains a command substitution".to_owned());
                return false;
            }
            match pe {
                ParameterExpr::Parameter {
                    parameter: Parameter::Named(n),
                    indirect: false,
                } if n == "HOME" => match &env.home {
                    // Unquoted, a value with blanks or glob characters would be split or
                    // expanded further.
                    Some(h) if quoted || !h.contains([' ', '\t', '\n', '*', '?', '[']) => {
                        out.push_str(h);
                        true
                    }
                    _ => false,
                },
                _ => false,
            }
        }
        WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
            found.substitutions.push(s.clone());
            false
        }
        WordPiece::ArithmeticExpression(e) => {
            if e.value.contains("$(") || e.value.contains('`') || e.value.contains('[') {
                found.problems.push(format!(
                    "the arithmetic expression `{}` may run commands",
                    short(&e.value)
                ));
            }
            false
        }
    }
}

/// Whether unquoted text is subject to pathname or brace expansion: `*`, `?`, a `[` with a
/// `]` after it, or braces holding a `,` or `..`.
fn expands(t: &str) -> bool {
    if t.contains(['*', '?']) {
        return true;
    }
    if let Some(i) = t.find('[') {
        if t[i..].contains(']') {
            return true;
        }
    }
    if let Some(i) = t.find('{') {
        if let Some(j) = t[i..].find('}') {
            let inner = &t[i..i + j];
            return inner.contains(',') || inner.contains("..");
        }
    }
    false
}

/// Decode the body of `$'…'` as bash does; `None` for escapes keel does not model.
pub(super) fn ansi_c(t: &str) -> Option<String> {
    let mut out = String::new();
    let mut it = t.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = it.next()?;
        match e {
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'e' | 'E' => out.push('\x1b'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            'x' => {
                let mut v = 0u32;
                let mut n = 0;
                while n < 2 && it.peek().is_some_and(char::is_ascii_hexdigit) {
                    v = v * 16 + it.next()?.to_digit(16)?;
                    n += 1;
                }
                if n == 0 {
                    return None;
                }
                if v == 0 {
                    // bash ends the string at a NUL.
                    return Some(out);
                }
                out.push(char::from_u32(v).filter(char::is_ascii)?);
            }
            '0'..='7' => {
                let mut v = e.to_digit(8)?;
                let mut n = 1;
                while n < 3 && it.peek().is_some_and(|c| ('0'..='7').contains(c)) {
                    v = v * 8 + it.next()?.to_digit(8)?;
                    n += 1;
                }
                if v == 0 {
                    return Some(out);
                }
                out.push(char::from_u32(v).filter(char::is_ascii)?);
            }
            // \u, \U, \c and anything unusual: not modelled.
            _ => return None,
        }
    }
    Some(out)
}

pub(super) fn short(s: &str) -> String {
    if s.chars().count() <= 60 {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(60).collect::<String>())
    }
}
