//! Streamed markdown, one source line at a time.
//!
//! A reply arrives in pieces; each complete source line is rendered as soon as it is whole and
//! committed to the terminal's scrollback, never drawn again. What cannot be rendered line by
//! line is held back: a table (a new row may widen every column) until the first line that is
//! not part of it. Code blocks are highlighted line by line.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

/// The renderer of one message.
#[derive(Debug, Default)]
pub struct Markdown {
    /// Inside a fenced code block: its language.
    code: Option<String>,
    /// Table rows held back.
    table: Vec<String>,
}

impl Markdown {
    /// Render one complete source line; what it returns is final. A table row returns nothing
    /// (it is held back until the table ends).
    pub fn line(&mut self, src: &str) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        let trimmed = src.trim_start();
        if let Some(lang) = &self.code {
            if trimmed.starts_with("```") {
                self.code = None;
                return out;
            }
            out.push(code_line(src, lang));
            return out;
        }
        let is_row = trimmed.starts_with('|');
        if !is_row && !self.table.is_empty() {
            out.extend(self.flush_table());
        }
        if is_row {
            self.table.push(trimmed.to_owned());
            return out;
        }
        if let Some(rest) = trimmed.strip_prefix("```") {
            self.code = Some(rest.trim().to_lowercase());
            return out;
        }
        out.push(block_line(src));
        out
    }

    /// The message is complete: whatever is held back, rendered.
    pub fn finish(&mut self) -> Vec<Line<'static>> {
        self.code = None;
        self.flush_table()
    }

    /// What is held back, as it would render now (shown in the live area, not committed).
    pub fn held(&self) -> Vec<Line<'static>> {
        render_table(&self.table)
    }

    fn flush_table(&mut self) -> Vec<Line<'static>> {
        let rows = std::mem::take(&mut self.table);
        render_table(&rows)
    }
}

/// Every line of a whole message (a reply that did not stream).
pub fn render_all(text: &str) -> Vec<Line<'static>> {
    let mut md = Markdown::default();
    let mut out = Vec::new();
    for l in text.lines() {
        out.extend(md.line(l));
    }
    out.extend(md.finish());
    out
}

fn block_line(src: &str) -> Line<'static> {
    let indent = src.len() - src.trim_start().len();
    let pad = " ".repeat(indent);
    let t = src.trim_start();
    if let Some((level, rest)) = heading(t) {
        let mut style = Style::new().add_modifier(Modifier::BOLD);
        if level == 1 {
            style = style.add_modifier(Modifier::UNDERLINED);
        }
        return Line::from(inline(rest, style));
    }
    if t.len() >= 3 && (t.chars().all(|c| c == '-') || t.chars().all(|c| c == '*')) {
        return Line::styled("─".repeat(40), Style::new().fg(Color::DarkGray));
    }
    if let Some(rest) = t.strip_prefix("> ").or_else(|| t.strip_prefix('>')) {
        let mut spans = vec![Span::styled("│ ", Style::new().fg(Color::DarkGray))];
        spans.extend(inline(rest, Style::new().add_modifier(Modifier::ITALIC)));
        return Line::from(spans);
    }
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = t.strip_prefix(bullet) {
            let (mark, rest) = match rest.strip_prefix("[ ] ") {
                Some(r) => ("☐ ", r),
                None => match rest
                    .strip_prefix("[x] ")
                    .or_else(|| rest.strip_prefix("[X] "))
                {
                    Some(r) => ("☑ ", r),
                    None => ("• ", rest),
                },
            };
            let mut spans = vec![Span::raw(pad), Span::raw(mark)];
            spans.extend(inline(rest, Style::new()));
            return Line::from(spans);
        }
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits < 10 && t[digits..].starts_with(". ") {
        let mut spans = vec![Span::raw(pad), Span::raw(t[..digits + 2].to_owned())];
        spans.extend(inline(&t[digits + 2..], Style::new()));
        return Line::from(spans);
    }
    let mut spans = vec![Span::raw(pad)];
    spans.extend(inline(t, Style::new()));
    Line::from(spans)
}

fn heading(t: &str) -> Option<(usize, &str)> {
    let level = t.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&level) && t[level..].starts_with(' ') {
        Some((level, t[level..].trim()))
    } else {
        None
    }
}

/// Inline markup: `code`, **bold**, *italic* / _italic_, [text](url).
pub fn inline(s: &str, base: Style) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut bold = false;
    let mut italic = false;
    let style = |bold: bool, italic: bool| {
        let mut st = base;
        if bold {
            st = st.add_modifier(Modifier::BOLD);
        }
        if italic {
            st = st.add_modifier(Modifier::ITALIC);
        }
        st
    };
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut links: Option<(Vec<usize>, Vec<usize>)> = None;
    let flush = |text: &mut String, out: &mut Vec<Span<'static>>, st: Style| {
        if !text.is_empty() {
            out.push(Span::styled(std::mem::take(text), st));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            if let Some(end) = chars[i + 1..].iter().position(|&d| d == '`') {
                flush(&mut text, &mut out, style(bold, italic));
                let code: String = chars[i + 1..i + 1 + end].iter().collect();
                out.push(Span::styled(code, Style::new().fg(Color::Cyan)));
                i += end + 2;
                continue;
            }
        }
        if c == '*' && chars.get(i + 1) == Some(&'*') {
            flush(&mut text, &mut out, style(bold, italic));
            bold = !bold;
            i += 2;
            continue;
        }
        let word_edge = |j: usize| j == 0 || !chars[j - 1].is_alphanumeric();
        if (c == '*' || c == '_')
            && (italic || (word_edge(i) && chars.get(i + 1).is_some_and(|n| !n.is_whitespace())))
        {
            flush(&mut text, &mut out, style(bold, italic));
            italic = !italic;
            i += 1;
            continue;
        }
        // A link: `[label](url)` (the label holds no `]`). Where the next `]` and `)` are is
        // known for every position, so a line of brackets costs one pass, not one per bracket.
        if c == '[' {
            let (next_close, next_paren) =
                links.get_or_insert_with(|| (next_of(&chars, ']'), next_of(&chars, ')')));
            if let Some((close, end)) = link_at(&chars, next_close, next_paren, i) {
                flush(&mut text, &mut out, style(bold, italic));
                let label: String = chars[i + 1..close].iter().collect();
                let url: String = chars[close + 2..end].iter().collect();
                let same = url == label;
                out.push(Span::styled(
                    label,
                    style(bold, italic).add_modifier(Modifier::UNDERLINED),
                ));
                if !same {
                    out.push(Span::styled(
                        format!(" ({url})"),
                        Style::new().fg(Color::DarkGray),
                    ));
                }
                i = end + 1;
                continue;
            }
        }
        text.push(c);
        i += 1;
    }
    flush(&mut text, &mut out, style(bold, italic));
    out
}

/// Where the next `c` is at or after each position (`len` for none), in one backward pass.
fn next_of(chars: &[char], c: char) -> Vec<usize> {
    let mut next = vec![chars.len(); chars.len() + 1];
    for i in (0..chars.len()).rev() {
        next[i] = if chars[i] == c { i } else { next[i + 1] };
    }
    next
}

/// For a `[` at `open`: the `]` that closes it, when a `(` follows, and the `)` after that.
fn link_at(
    chars: &[char],
    next_close: &[usize],
    next_paren: &[usize],
    open: usize,
) -> Option<(usize, usize)> {
    let close = next_close[open + 1];
    if chars.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = next_paren[close + 2];
    (end < chars.len()).then_some((close, end))
}

const KEYWORDS: &[&str] = &[
    "fn",
    "let",
    "mut",
    "pub",
    "use",
    "mod",
    "impl",
    "struct",
    "enum",
    "trait",
    "match",
    "if",
    "else",
    "for",
    "while",
    "loop",
    "return",
    "async",
    "await",
    "def",
    "class",
    "import",
    "from",
    "const",
    "var",
    "function",
    "export",
    "in",
    "not",
    "and",
    "or",
    "true",
    "false",
    "None",
    "null",
    "self",
    "Self",
    "type",
    "interface",
    "package",
    "func",
    "go",
    "then",
    "fi",
    "do",
    "done",
    "case",
    "esac",
    "echo",
    "static",
    "where",
    "yield",
    "try",
    "catch",
    "with",
];

/// One line of a code block, with light highlighting: keywords, strings, numbers, comments.
pub fn code_line(src: &str, lang: &str) -> Line<'static> {
    let hash_comments = matches!(
        lang,
        "sh" | "bash"
            | "shell"
            | "zsh"
            | "python"
            | "py"
            | "ruby"
            | "rb"
            | "toml"
            | "yaml"
            | "yml"
            | "console"
            | ""
    );
    let mut spans = vec![Span::raw("  ")];
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut word = String::new();
    let plain = Style::new().fg(Color::Gray);
    let push_word = |word: &mut String, spans: &mut Vec<Span<'static>>| {
        if word.is_empty() {
            return;
        }
        let w = std::mem::take(word);
        let st = if KEYWORDS.contains(&w.as_str()) {
            Style::new().fg(Color::Magenta)
        } else if w.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            Style::new().fg(Color::Yellow)
        } else {
            plain
        };
        spans.push(Span::styled(w, st));
    };
    while i < chars.len() {
        let c = chars[i];
        let comment = (c == '/' && chars.get(i + 1) == Some(&'/'))
            || (c == '#' && hash_comments && (i == 0 || chars[i - 1].is_whitespace()));
        if comment {
            push_word(&mut word, &mut spans);
            let rest: String = chars[i..].iter().collect();
            spans.push(Span::styled(rest, Style::new().fg(Color::DarkGray)));
            return Line::from(spans);
        }
        if c == '"' || c == '\'' {
            push_word(&mut word, &mut spans);
            let end = chars[i + 1..]
                .iter()
                .position(|&d| d == c)
                .map(|e| i + 2 + e)
                .unwrap_or(chars.len());
            let s: String = chars[i..end].iter().collect();
            spans.push(Span::styled(s, Style::new().fg(Color::Green)));
            i = end;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            push_word(&mut word, &mut spans);
            spans.push(Span::styled(c.to_string(), plain));
        }
        i += 1;
    }
    push_word(&mut word, &mut spans);
    Line::from(spans)
}

fn is_separator(cells: &[String]) -> bool {
    !cells.is_empty()
        && cells.iter().all(|c| {
            let t = c.trim();
            !t.is_empty() && t.chars().all(|ch| ch == '-' || ch == ':')
        })
}

fn cells(row: &str) -> Vec<String> {
    let t = row.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(|c| c.trim().to_owned()).collect()
}

fn render_table(rows: &[String]) -> Vec<Line<'static>> {
    if rows.is_empty() {
        return Vec::new();
    }
    let parsed: Vec<Vec<String>> = rows.iter().map(|r| cells(r)).collect();
    let body: Vec<&Vec<String>> = parsed.iter().filter(|r| !is_separator(r)).collect();
    let ncols = body.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut widths = vec![0usize; ncols];
    for r in &body {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.width());
        }
    }
    let header = parsed.len() > 1 && is_separator(&parsed[1]);
    let border = Style::new().fg(Color::DarkGray);
    let mut out = Vec::new();
    for (n, r) in body.iter().enumerate() {
        let mut spans = Vec::new();
        for (i, w) in widths.iter().enumerate() {
            spans.push(Span::styled(if i == 0 { "│ " } else { " │ " }, border));
            let c = r.get(i).map(String::as_str).unwrap_or("");
            let st = if header && n == 0 {
                Style::new().add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
            spans.push(Span::styled(
                format!("{c}{}", " ".repeat(w - c.width())),
                st,
            ));
        }
        spans.push(Span::styled(" │", border));
        out.push(Line::from(spans));
        if header && n == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            out.push(Line::styled(format!("├{}┤", rule.join("┼")), border));
        }
    }
    out
}

/// The plain text of a line (for tests and width checks).
pub fn plain(line: &Line<'_>) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(plain).collect()
    }

    #[test]
    fn a_table_is_held_until_it_ends_and_aligned() {
        let mut md = Markdown::default();
        assert!(md.line("| a | bb |").is_empty());
        assert!(md.line("|---|---|").is_empty());
        assert!(md.line("| ccc | d |").is_empty());
        assert_eq!(md.held().len(), 3, "shown live while held");
        let out = texts(&md.line("after"));
        assert_eq!(out[0], "│ a   │ bb │");
        assert_eq!(out[2], "│ ccc │ d  │");
        assert_eq!(out[3], "after");
        assert!(md.finish().is_empty());
    }

    #[test]
    fn code_blocks_drop_their_fences_and_keep_their_text() {
        let out = texts(&render_all("x\n```rust\nlet a = \"s\"; // c\n```\ny"));
        assert_eq!(out, vec!["x", "  let a = \"s\"; // c", "y"]);
    }

    #[test]
    fn inline_markup_is_removed_from_the_text() {
        let out = texts(&render_all(
            "# Title\n- **bold** and `code` and *it*\n1. [k](http://x)",
        ));
        assert_eq!(
            out,
            vec!["Title", "• bold and code and it", "1. k (http://x)"]
        );
        // Brackets that are not links stay as they are, however many there are.
        let brackets = "[".repeat(200_000);
        assert_eq!(texts(&render_all(&brackets)), vec![brackets.clone()]);
        assert_eq!(
            texts(&render_all("[a] and [b](u) [c")),
            vec!["[a] and b (u) [c"]
        );
        // Underscores inside words are not italics.
        assert_eq!(
            texts(&render_all("snake_case_name")),
            vec!["snake_case_name"]
        );
    }
}
