//! Code blocks: each line lightly highlighted (keywords, strings, numbers, comments).

use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

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
