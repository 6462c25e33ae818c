//! Code blocks, highlighted with syntect's grammars in the terminal's own colours.
//!
//! keel carries no colour theme: each scope a grammar names (comment, string, keyword, ...) maps
//! to one of the terminal's sixteen colours, so code reads well on a dark or a light terminal
//! alike. The grammars load once, at the first code block (a few milliseconds); a block whose
//! language is unknown, or whose grammar fails on a line, is shown plain from there on.

use std::sync::OnceLock;

use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxSet};

/// The grammars keel ships (syntect's default set, parsed on first use).
fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// Scope prefixes and their colours, most specific first.
fn palette() -> &'static [(Scope, Color)] {
    static PALETTE: OnceLock<Vec<(Scope, Color)>> = OnceLock::new();
    PALETTE.get_or_init(|| {
        [
            ("comment", Color::DarkGray),
            ("string", Color::Green),
            ("constant.character.escape", Color::Cyan),
            ("constant", Color::Yellow),
            ("keyword.operator", Color::Gray),
            ("keyword", Color::Magenta),
            ("storage", Color::Magenta),
            ("entity.name.function", Color::Blue),
            ("support.function", Color::Blue),
            ("variable.function", Color::Blue),
            ("entity.name", Color::Cyan),
            ("support.type", Color::Cyan),
            ("support.class", Color::Cyan),
            ("entity.other.attribute-name", Color::Yellow),
            ("markup.heading", Color::Magenta),
            ("invalid", Color::Red),
        ]
        .iter()
        .filter_map(|(s, c)| Scope::new(s).ok().map(|s| (s, *c)))
        .collect()
    })
}

/// The plain colour of code.
const PLAIN: Color = Color::Gray;

/// The colour of text under `stack`: the innermost scope that has one.
fn colour(stack: &ScopeStack) -> Color {
    for scope in stack.as_slice().iter().rev() {
        if let Some((_, c)) = palette().iter().find(|(p, _)| p.is_prefix_of(*scope)) {
            return *c;
        }
    }
    PLAIN
}

/// The highlighting state of one code block, line after line.
pub(crate) struct Highlighter {
    /// `None`: the language is unknown or its grammar failed; the rest is plain.
    state: Option<(ParseState, ScopeStack)>,
}

impl Highlighter {
    /// A block in `lang` (a fence's info word: a name or a file extension; may be empty).
    pub(crate) fn new(lang: &str) -> Self {
        let state = if lang.is_empty() {
            None
        } else {
            let set = syntaxes();
            set.find_syntax_by_token(lang)
                .map(|syntax| (ParseState::new(syntax), ScopeStack::new()))
        };
        Highlighter { state }
    }

    /// The next line of the block (without its newline), indented by two columns.
    pub(crate) fn line(&mut self, src: &str) -> Line<'static> {
        let mut spans = vec![Span::raw("  ")];
        match self.spans(src) {
            Some(s) => spans.extend(s),
            None => {
                self.state = None;
                spans.push(Span::styled(src.to_owned(), Style::new().fg(PLAIN)));
            }
        }
        Line::from(spans)
    }

    fn spans(&mut self, src: &str) -> Option<Vec<Span<'static>>> {
        let (state, stack) = self.state.as_mut()?;
        // The grammars expect each line with its newline.
        let with_nl = format!("{src}\n");
        let ops = state.parse_line(&with_nl, syntaxes()).ok()?;
        let mut out: Vec<Span<'static>> = Vec::new();
        let mut at = 0;
        for (pos, op) in ops {
            let pos = pos.min(src.len());
            if pos > at {
                push(&mut out, &src[at..pos], colour(stack));
                at = pos;
            }
            stack.apply(&op).ok()?;
        }
        if at < src.len() {
            push(&mut out, &src[at..], colour(stack));
        }
        Some(out)
    }
}

/// Append text in a colour, joined to the last span when it has the same one.
fn push(out: &mut Vec<Span<'static>>, text: &str, c: Color) {
    let style = Style::new().fg(c);
    match out.last_mut() {
        Some(last) if last.style == style => last.content.to_mut().push_str(text),
        _ => out.push(Span::styled(text.to_owned(), style)),
    }
}

/// One line of code in `lang`, highlighted on its own (no state from the lines before it).
pub fn code_line(src: &str, lang: &str) -> Line<'static> {
    Highlighter::new(lang).line(src)
}

/// The highlighted lines of a source's code blocks, kept from one render to the next: the
/// streaming view renders the open block again at every line, and a grammar is too slow to
/// run over a long block again and again (that would be quadratic in its length).
#[derive(Default)]
pub(crate) struct CodeCache {
    blocks: Vec<CachedBlock>,
    /// How many lines went through a grammar (each should, once).
    highlighted: usize,
}

impl std::fmt::Debug for CodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CodeCache({} blocks)", self.blocks.len())
    }
}

/// One code block: its language, the highlighter past its last line, its lines so far.
struct CachedBlock {
    lang: String,
    hl: Highlighter,
    lines: Vec<(String, Line<'static>)>,
}

impl CachedBlock {
    fn new(lang: &str) -> Self {
        CachedBlock {
            lang: lang.to_owned(),
            hl: Highlighter::new(lang),
            lines: Vec::new(),
        }
    }
}

impl CodeCache {
    /// How many lines went through a grammar (for tests).
    #[cfg(test)]
    pub(crate) fn highlighted(&self) -> usize {
        self.highlighted
    }

    /// The first `n` code blocks are gone from the source (the others are numbered from 0).
    pub(crate) fn drop_first(&mut self, n: usize) {
        self.blocks.drain(..n.min(self.blocks.len()));
    }

    /// How many lines of the `n`th code block are kept.
    pub(crate) fn lines_of(&self, n: usize) -> Option<usize> {
        self.blocks.get(n).map(|b| b.lines.len())
    }

    /// The source's `n`th code block (from 0) begins, in `lang`.
    pub(crate) fn open(&mut self, n: usize, lang: &str) {
        if self.blocks.get(n).is_some_and(|b| b.lang == lang) {
            return;
        }
        // What followed a block that changed cannot be trusted either.
        self.blocks.truncate(n);
        self.blocks.push(CachedBlock::new(lang));
    }

    /// Line `i` of the `n`th code block, highlighted: from the cache when it is the same text.
    pub(crate) fn line(&mut self, n: usize, i: usize, src: &str) -> Line<'static> {
        let Some(b) = self.blocks.get_mut(n) else {
            return code_line(src, "");
        };
        match b.lines.get(i) {
            Some((text, line)) if text == src => return line.clone(),
            Some(_) => {
                // The block's text changed under a line already seen: highlight it again from
                // its first line (rare: the source only grows).
                let before: Vec<String> = b.lines[..i].iter().map(|(t, _)| t.clone()).collect();
                *b = CachedBlock::new(&b.lang);
                for t in before {
                    self.highlighted += 1;
                    let l = b.hl.line(&t);
                    b.lines.push((t, l));
                }
            }
            None => {}
        }
        if i != b.lines.len() {
            return code_line(src, &b.lang);
        }
        self.highlighted += 1;
        let line = b.hl.line(src);
        b.lines.push((src.to_owned(), line.clone()));
        line
    }
}
