//! A fetched page as markdown, for the model that reads it.
//!
//! The conversion is htmd's (turndown's rules). htmd walks the document recursively, so a page
//! nested thousands of levels deep (easy to write, and a page may be hostile) would overflow
//! the stack and take keel down: the conversion runs on a thread of its own with a large stack,
//! and a document deeper than [`MAX_DEPTH`] is flattened to its text, walked without recursion.
//! The HTML parser itself slows down with the square of the nesting, so a page whose tags
//! (counted by a quick scan) nest far deeper than that is never parsed at all: its tags are
//! stripped as text.

use std::rc::Rc;

use markup5ever_rcdom::{Node, NodeData};

/// The deepest element nesting converted to markdown; deeper pages become plain text.
pub const MAX_DEPTH: usize = 512;
/// The conversion thread's stack: ample for [`MAX_DEPTH`] levels of htmd's walk.
const STACK_BYTES: usize = 64 << 20;
/// Elements whose content is never text a reader sees.
const SKIPPED: [&str; 7] = [
    "script", "style", "noscript", "template", "svg", "iframe", "object",
];

/// Why a page could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The conversion thread could not be started.
    #[error("could not start the HTML conversion: {0}")]
    Thread(#[source] std::io::Error),
    /// The conversion thread ended without an answer (it panicked).
    #[error("the HTML conversion failed on this page")]
    Failed,
}

/// The page's markdown, and whether it was flattened to plain text for its depth.
#[derive(Debug, PartialEq)]
pub struct Converted {
    /// The text the model reads.
    pub text: String,
    /// True when the page was nested too deep and only its text was kept.
    pub flattened: bool,
}

/// Convert `html` to markdown on a thread of its own (see the module comment).
pub async fn to_markdown(html: String) -> Result<Converted, ConvertError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("keel-webfetch-html".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let _ = tx.send(convert(&html));
        })
        .map_err(ConvertError::Thread)?;
    rx.await.map_err(|_| ConvertError::Failed)
}

/// Elements that never hold others, or that the parser closes by itself: a quick scan does
/// not count them as nesting.
const NOT_NESTING: [&str; 21] = [
    "br", "img", "input", "meta", "link", "hr", "area", "base", "col", "embed", "source", "track",
    "wbr", "param", "p", "li", "option", "td", "tr", "dt", "dd",
];

/// How far a quick scan looks for the `>` that ends a tag (a page of `<` with no `>` would
/// otherwise make every tag a scan of the rest of the page).
const TAG_WINDOW: usize = 1024;

/// How deep the tags of `html` nest, by a quick scan (not a parse): the deepest stack of open
/// tags, where a closing tag closes the nearest open tag of its name (one of no open tag's
/// name closes nothing, as the parser ignores it). Linear: the scan stops once the depth is
/// past what [`convert`] parses.
fn scanned_depth(html: &str) -> usize {
    let mut open: Vec<String> = Vec::new();
    let mut deepest = 0usize;
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let closing = rest.starts_with('/');
        let name: String = rest
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if name.is_empty() || NOT_NESTING.contains(&name.as_str()) {
            continue;
        }
        let window = &rest.as_bytes()[..rest.len().min(TAG_WINDOW)];
        let end = window
            .iter()
            .position(|b| *b == b'>')
            .unwrap_or(window.len());
        if closing {
            if let Some(at) = open.iter().rposition(|n| *n == name) {
                open.truncate(at);
            }
        } else if window[..end].last() != Some(&b'/') {
            open.push(name);
            deepest = deepest.max(open.len());
            if deepest > 4 * MAX_DEPTH {
                break;
            }
        }
    }
    deepest
}

/// The text of `html` with every tag removed and script and style contents dropped, without
/// parsing (for pages too deep to parse).
fn stripped(html: &str) -> String {
    let mut out = String::new();
    // Lowercased once (ASCII lowercasing keeps every byte where it is), not at every script.
    let lower_page = html.to_ascii_lowercase();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let lower: String = rest
            .chars()
            .take(8)
            .collect::<String>()
            .to_ascii_lowercase();
        let skip_to = ["<script", "<style"]
            .iter()
            .find(|t| lower.starts_with(*t))
            .map(|t| format!("</{}", &t[1..]));
        let end = match skip_to {
            Some(close) => lower_page[html.len() - rest.len()..]
                .find(&close)
                .map(|j| j + close.len()),
            None => Some(0),
        };
        rest = &rest[end.unwrap_or(rest.len())..];
        match rest.find('>') {
            Some(j) => {
                rest = &rest[j + 1..];
                out.push(' ');
            }
            None => rest = "",
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The conversion itself (blocking).
pub fn convert(html: &str) -> Converted {
    if scanned_depth(html) > 4 * MAX_DEPTH {
        return Converted {
            text: stripped(html),
            flattened: true,
        };
    }
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    let tree = match converter.html_to_tree(html) {
        Ok(t) => t,
        // Parsing a string cannot fail on I/O; keep the text as it came if it ever does.
        Err(_) => {
            return Converted {
                text: html.to_owned(),
                flattened: true,
            }
        }
    };
    if depth(&tree) > MAX_DEPTH {
        return Converted {
            text: plain_text(&tree),
            flattened: true,
        };
    }
    Converted {
        text: converter.tree_to_markdown(&tree),
        flattened: false,
    }
}

fn element_name(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

/// The deepest nesting of the tree, walked without recursion.
fn depth(root: &Rc<Node>) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root.clone(), 0usize)];
    while let Some((node, d)) = stack.pop() {
        deepest = deepest.max(d);
        for child in node.children.borrow().iter() {
            stack.push((child.clone(), d + 1));
        }
    }
    deepest
}

/// The text of the tree in document order, without recursion; block elements end lines.
fn plain_text(root: &Rc<Node>) -> String {
    let mut out = String::new();
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        if let Some(name) = element_name(&node) {
            if SKIPPED.contains(&name) {
                continue;
            }
            if matches!(
                name,
                "p" | "div" | "br" | "li" | "tr" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6"
            ) && !out.ends_with('\n')
                && !out.is_empty()
            {
                out.push('\n');
            }
        }
        if let NodeData::Text { contents } = &node.data {
            let t = contents.borrow();
            let t = t.trim();
            if !t.is_empty() {
                if !out.is_empty() && !out.ends_with(['\n', ' ']) {
                    out.push(' ');
                }
                out.push_str(t);
            }
        }
        for child in node.children.borrow().iter().rev() {
            stack.push(child.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_become_markdown_without_scripts() {
        let c = convert("<html><head><title>T</title><script>alert(1)</script></head><body><h1>Hello</h1><p>A <a href=\"https://x.test/\">link</a>.</p><style>p{}</style></body></html>");
        assert!(!c.flattened);
        assert!(c.text.contains("# Hello"), "{}", c.text);
        assert!(c.text.contains("[link](https://x.test/)"), "{}", c.text);
        assert!(!c.text.contains("alert"), "{}", c.text);
        assert!(!c.text.contains("p{}"), "{}", c.text);
    }

    #[tokio::test]
    async fn a_page_nested_too_deep_is_flattened_not_a_crash() {
        // Deep enough to overflow htmd's recursive walk, shallow enough to parse.
        let n = 1500;
        let html = format!(
            "<b>top</b>{}deep text{}",
            "<div>".repeat(n),
            "</div>".repeat(n)
        );
        let c = to_markdown(html).await.unwrap();
        assert!(c.flattened);
        assert_eq!(c.text, "top\ndeep text");
        // Far deeper: not even parsed (the parser slows with the square of the depth).
        let n = 200_000;
        let html = format!(
            "<script>x</script>{}deep text{}",
            "<div>".repeat(n),
            "</div>".repeat(n)
        );
        let started = std::time::Instant::now();
        let c = to_markdown(html).await.unwrap();
        assert!(c.flattened);
        assert_eq!(c.text, "deep text");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn closing_tags_of_nothing_do_not_hide_the_depth() {
        // The parser ignores `</x>`, so these `<div>`s nest 100,000 deep: the scan must see it.
        let html = "<div></x>".repeat(100_000);
        assert!(scanned_depth(&html) > 4 * MAX_DEPTH);
        assert!(convert(&html).flattened);
        // Matching closings do close.
        assert_eq!(scanned_depth(&"<div><p>a</div>".repeat(1000)), 1);
    }

    #[test]
    fn a_page_of_unclosed_tags_is_scanned_in_one_pass() {
        // No `>` anywhere: each tag's end is looked for within a window, not the whole page.
        let html = "<a".repeat(2_000_000);
        let started = std::time::Instant::now();
        let c = convert(&html);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        assert!(c.flattened);
    }
}
