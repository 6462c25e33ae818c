//! The markdown a reply is drawn with: each construct rendered whole and streamed line by
//! line (the two must agree), compared with a snapshot of what the terminal shows.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use keel_tui::markdown::{plain, render_all, Markdown};

/// The text of every line, as the terminal shows it.
fn shown(lines: &[ratatui::text::Line<'_>]) -> String {
    lines.iter().map(plain).collect::<Vec<_>>().join("\n")
}

/// `src` streamed one character at a time, committed lines only (as the app does it).
fn streamed(src: &str) -> String {
    let mut md = Markdown::default();
    let mut out = Vec::new();
    let mut partial = String::new();
    for c in src.chars() {
        partial.push(c);
        if c == '\n' {
            out.extend(md.lines(&partial));
            partial.clear();
        }
    }
    if !partial.is_empty() {
        out.extend(md.line(&partial));
    }
    out.extend(md.finish());
    shown(&out)
}

/// Render whole and streamed; they must agree; the snapshot is of that.
fn render(src: &str) -> String {
    let whole = shown(&render_all(src));
    assert_eq!(streamed(src), whole, "streamed and whole renders differ");
    whole
}

#[test]
fn nested_lists() {
    insta::assert_snapshot!(render(
        "Steps:\n\n\
         1. Read the code\n\
         \x20  - `src/lib.rs`\n\
         \x20  - the **tests**\n\
         \x20    1. unit\n\
         \x20    2. integration\n\
         2. Write the fix\n\
         \x20  * [x] reproduce\n\
         \x20  * [ ] patch\n\
         10. Ship it\n\n\
         - top\n  - middle\n    - bottom\n      - deeper still\n- back to top\n"
    ));
}

#[test]
fn block_quotes() {
    insta::assert_snapshot!(render(
        "> A quote with *emphasis*\n> over two lines.\n>\n> > Nested inside it,\n> > with `code`.\n>\n> - a list in a quote\n> - second item\n\nAfter the quote."
    ));
}

#[test]
fn fenced_code_inside_lists() {
    insta::assert_snapshot!(render(
        "1. Install:\n\n   ```sh\n   cargo install keel # the binary\n   ```\n\n2. Configure, in a nested list:\n   - edit the file:\n     ```toml\n     model = \"sonnet\"\n     ```\n   - then run it\n\n         indented code in a list\n\n3. Done.\n"
    ));
}

#[test]
fn headings_links_rules_and_tables() {
    insta::assert_snapshot!(render(
        "# Title\n\nSome **bold**, *italic*, ~~gone~~ and [a link](https://keel.dev/docs).\n\n## Section\n\n| name | right | centre |\n|:-----|------:|:------:|\n| keel | 1 | x |\n| a longer cell | 200 | yy |\n\n---\n\nThe end, see <https://keel.dev>.\n"
    ));
}

/// A line of 200,000 characters that markdown might read as the start of something (link
/// brackets, emphasis, code spans, autolinks, raw HTML) renders in linear time: well under the
/// generous bound here, where a quadratic path would take minutes.
#[test]
fn a_200k_line_of_openers_renders_in_linear_time() {
    for pattern in [
        "[", "*", "`", "<", "[a", "*a ", "_a ", "<a ", "![", "[](", "a`", "**a", "<!--",
    ] {
        let line = pattern.repeat(200_000 / pattern.len());
        let started = Instant::now();
        let mut md = Markdown::default();
        let out = md.line(&line);
        let rest = md.finish();
        let took = started.elapsed();
        let text: usize = out.iter().chain(&rest).map(|l| plain(l).len()).sum();
        // A line of `*` alone is a rule and one of backticks opens a code block (empty so
        // far); every other line is a paragraph that keeps its text.
        assert!(
            pattern == "*" || pattern == "`" || text >= line.trim().len() / 4,
            "{pattern:?}: the text was lost ({text} bytes shown)"
        );
        assert!(
            took < Duration::from_secs(10),
            "{pattern:?}: 200k characters took {took:?}"
        );
    }
}
