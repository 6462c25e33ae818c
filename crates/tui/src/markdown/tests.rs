use ratatui::style::{Color, Modifier};

use super::*;

fn texts(lines: &[Line<'_>]) -> Vec<String> {
    lines.iter().map(plain).collect()
}

/// What the streaming path commits for `text` fed in pieces of `step` bytes (split at
/// newlines the way the app does), plus what `finish` adds.
fn streamed(text: &str, step: usize) -> Vec<String> {
    let mut md = Markdown::default();
    let mut partial = String::new();
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(step.max(1)) {
        let piece: String = piece.iter().collect();
        partial.push_str(&piece);
        if let Some(nl) = partial.rfind('\n') {
            let rest = partial.split_off(nl + 1);
            out.extend(md.lines(&partial));
            partial = rest;
        }
    }
    if !partial.is_empty() {
        out.extend(md.line(&partial));
    }
    out.extend(md.finish());
    texts(&out)
}

#[test]
fn a_table_is_held_until_it_ends_and_aligned() {
    let mut md = Markdown::default();
    assert!(md.line("| a | bb |").is_empty());
    assert!(md.line("|---|---|").is_empty());
    assert!(md.line("| ccc | d |").is_empty());
    assert_eq!(
        md.held().len(),
        3,
        "shown live while held: {:?}",
        texts(&md.held())
    );
    // As on GitHub, a table ends at a blank line (a line of text right after it is a row).
    assert!(md.line("").is_empty());
    let out = texts(&md.line("after"));
    assert_eq!(out[0], "│ a   │ bb │");
    assert_eq!(out[1], "├─────┼────┤");
    assert_eq!(out[2], "│ ccc │ d  │");
    assert_eq!(out[3], "");
    assert_eq!(out[4], "after");
    assert!(md.finish().is_empty());
}

#[test]
fn a_table_at_the_end_of_a_reply_is_committed_when_it_finishes() {
    let mut md = Markdown::default();
    assert!(md.line("| a | b |").is_empty());
    assert!(md.line("|:-:|--:|").is_empty());
    assert!(md.line("| long | x |").is_empty());
    let out = texts(&md.finish());
    assert_eq!(out, vec!["│  a   │ b │", "├──────┼───┤", "│ long │ x │"]);
    assert!(md.held().is_empty());
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
    // A link whose text is its target is not repeated.
    assert_eq!(
        texts(&render_all("<https://keel.dev> and [https://a](https://a)")),
        vec!["https://keel.dev and https://a"]
    );
}

#[test]
fn styles_follow_the_markup() {
    let lines = render_all("# Big\n## Small\n**b** *i* ~~s~~ `c` [t](u)");
    let style_of = |line: usize, text: &str| {
        lines[line]
            .spans
            .iter()
            .find(|s| s.content == text)
            .map(|s| s.style)
            .unwrap_or_else(|| panic!("no span {text:?} in {:?}", lines[line]))
    };
    let big = style_of(0, "Big");
    assert!(big
        .add_modifier
        .contains(Modifier::BOLD | Modifier::UNDERLINED));
    let small = style_of(1, "Small");
    assert!(small.add_modifier.contains(Modifier::BOLD));
    assert!(!small.add_modifier.contains(Modifier::UNDERLINED));
    assert!(style_of(2, "b").add_modifier.contains(Modifier::BOLD));
    assert!(style_of(2, "i").add_modifier.contains(Modifier::ITALIC));
    assert!(style_of(2, "s")
        .add_modifier
        .contains(Modifier::CROSSED_OUT));
    assert_eq!(style_of(2, "c").fg, Some(Color::Cyan));
    assert!(style_of(2, "t").add_modifier.contains(Modifier::UNDERLINED));
    assert_eq!(style_of(2, " (u)").fg, Some(Color::DarkGray));
}

#[test]
fn streaming_commits_what_a_whole_render_shows() {
    let docs = [
        "# Plan\n\nFirst para\nsecond line.\n\n- a\n- b\n  - c\n    1. d\n\n> quote\n> > deeper\n\n```sh\necho hi\n```\n\nend",
        "1. one\n\n   ```rust\n   fn main() {}\n   ```\n2. two\n   > q\n3. three",
        "text\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter the table\n\n---\n\n    indented code\n\nlast",
        "- [ ] todo\n- [x] done\n\n* star\n\n+ plus\n\n2. starts at two\n3. three",
        "para\n```py\nx = 1\n\n  | not a table\n\n````\n~~~\n```  \nafter\n\n  ~~~~ sh\n  ls\n    -l\n  ~~~~~\n```\nopen at the end\n\n",
        "```\nblank lines at the end\n\n\n",
    ];
    for doc in docs {
        let whole = texts(&render_all(doc));
        for step in [1, 2, 3, 7, 64, 10_000] {
            assert_eq!(streamed(doc, step), whole, "step {step} of {doc:?}");
        }
    }
}

#[test]
fn a_code_line_is_committed_as_soon_as_it_is_complete() {
    let mut md = Markdown::default();
    assert!(md.line("```python").is_empty());
    assert_eq!(texts(&md.line("x = 1")), vec!["  x = 1"]);
    assert_eq!(texts(&md.line("y = 2")), vec!["  y = 2"]);
    assert!(md.line("```").is_empty());
    assert_eq!(texts(&md.line("done")), vec!["done"]);
}

#[test]
fn closed_blocks_are_dropped_from_the_source_kept() {
    let mut md = Markdown::default();
    for i in 0..1000 {
        md.line(&format!("paragraph {i}"));
        md.line("");
    }
    assert!(md.src.len() < 64, "kept {} bytes", md.src.len());
    assert_eq!(texts(&md.line("tail")), vec!["", "tail"]);
}

#[test]
fn task_list_items_show_their_box() {
    assert_eq!(
        texts(&render_all("- [ ] todo\n- [x] done")),
        vec!["☐ todo", "☑ done"]
    );
}

#[test]
fn code_is_highlighted_by_its_language() {
    let lines = render_all("```rust\nfn main() { let s = \"hi\"; } // done\n```");
    let colour_of = |text: &str| {
        lines[0]
            .spans
            .iter()
            .find(|s| s.content.contains(text))
            .and_then(|s| s.style.fg)
            .unwrap_or_else(|| panic!("no span with {text:?} in {:?}", lines[0]))
    };
    assert_eq!(colour_of("fn"), Color::Magenta);
    assert_eq!(colour_of("\"hi\""), Color::Green);
    assert_eq!(colour_of("// done"), Color::DarkGray);
    assert_eq!(colour_of("main"), Color::Blue);
    // A block comment opened on one line colours the next: the state carries over.
    let lines = render_all("```c\n/* open\nstill */ int x;\n```");
    assert_eq!(lines[1].spans[1].style.fg, Some(Color::DarkGray));
    // An unknown language is shown plain, text intact.
    let lines = render_all("```nosuchlang\nfn x\n```");
    assert_eq!(plain(&lines[0]), "  fn x");
    assert!(lines[0].spans[1..]
        .iter()
        .all(|s| s.style.fg == Some(Color::Gray)));
}

#[test]
fn a_long_code_block_is_highlighted_once_per_line() {
    // Streamed line by line, a block comment opened at the top still colours line 500: the
    // lines kept from earlier renders carry the grammar's state, not a fresh one.
    let mut md = Markdown::default();
    md.line("```c");
    md.line("/* a comment");
    let mut last = Vec::new();
    for i in 0..500 {
        last = md.line(&format!("still in it {i}"));
    }
    assert_eq!(texts(&last), vec!["  still in it 499"]);
    assert_eq!(last[0].spans[1].style.fg, Some(Color::DarkGray));
    md.line("*/ int x = 1;");
    assert_eq!(md.code.highlighted(), 502, "each line highlighted once");
    assert!(md.open.is_some(), "the open fence is rendered line by line");
    assert!(md.line("```").is_empty());
    assert!(md.open.is_none());
    assert_eq!(texts(&md.line("after")), vec!["after"]);
}
