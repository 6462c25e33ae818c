//! Streamed markdown: a reply committed to the scrollback as its lines complete.
//!
//! A reply arrives in pieces. Each time a source line is complete, the source received so far
//! (up to that newline) is parsed again by pulldown-cmark and rendered whole; the rendered
//! lines not committed yet go to the terminal's scrollback, never to be drawn again. Rendering
//! keeps the source's line structure, so what a complete line renders to does not change when
//! more text follows. What could still change is held back and shown in the live area: a table
//! (a new row may widen every column) until the block after it begins.
//!
//! The source kept is only what could still matter: once a new top-level block has begun,
//! every block before it is closed for good (CommonMark never reopens one), so the source
//! before it is dropped. A long reply therefore costs one parse of its current block per line,
//! not one of the whole reply.

mod code;
mod render;
mod table;

pub use code::code_line;

use code::CodeCache;

use ratatui::text::Line;

/// The renderer of one message.
#[derive(Debug, Default)]
pub struct Markdown {
    /// The source of the blocks that may still change, complete lines only.
    src: String,
    /// How many of its rendered lines are committed.
    committed: usize,
    /// Rendered lines held back (a table still growing).
    held: Vec<Line<'static>>,
    /// The highlighted lines of its code blocks, from the last render.
    code: CodeCache,
}

impl Markdown {
    /// Render one complete source line (without its newline); the lines returned are final. A
    /// table row returns nothing (it is held back until the table ends).
    pub fn line(&mut self, src: &str) -> Vec<Line<'static>> {
        self.src.push_str(src);
        self.src.push('\n');
        self.advance(false)
    }

    /// Render complete source lines at once (`text` ends with a newline, or is taken as if it
    /// did); the lines returned are final.
    pub fn lines(&mut self, text: &str) -> Vec<Line<'static>> {
        if text.is_empty() {
            return Vec::new();
        }
        self.src.push_str(text);
        if !text.ends_with('\n') {
            self.src.push('\n');
        }
        self.advance(false)
    }

    /// The message is complete: whatever is held back, rendered.
    pub fn finish(&mut self) -> Vec<Line<'static>> {
        let out = self.advance(true);
        *self = Markdown::default();
        out
    }

    /// What is held back, as it would render now (shown in the live area, not committed).
    pub fn held(&self) -> Vec<Line<'static>> {
        self.held.clone()
    }

    /// Render the source, commit what is final, hold back the rest, drop closed blocks.
    fn advance(&mut self, finished: bool) -> Vec<Line<'static>> {
        let r = render::render(&self.src, &mut self.code);
        let total = r.lines.len();
        let hold_from = match r.top.last() {
            Some(last) if !finished && (last.table || self.ends_in_table_row()) => last.line,
            _ => total,
        };
        let new = if hold_from > self.committed {
            r.lines[self.committed..hold_from].to_vec()
        } else {
            Vec::new()
        };
        self.committed = self.committed.max(hold_from);
        self.held = r.lines[self.committed.min(total)..].to_vec();
        // Every top-level block before the last one is closed and committed: drop its source.
        if let Some(last) = r.top.last().filter(|_| r.top.len() > 1) {
            if self.committed >= last.line && last.src_line_start <= self.src.len() {
                self.src.drain(..last.src_line_start);
                self.committed -= last.line;
                // The code blocks are numbered from the new start.
                self.code = CodeCache::default();
            }
        }
        new
    }

    /// The last source line starts a table row: it may be the header of a table whose
    /// delimiter row has not arrived yet, so it is not committed as text.
    fn ends_in_table_row(&self) -> bool {
        let body = self.src.strip_suffix('\n').unwrap_or(&self.src);
        let last = body.rsplit('\n').next().unwrap_or("");
        last.trim_start().starts_with('|')
    }
}

/// Every line of a whole message (a reply that did not stream).
pub fn render_all(text: &str) -> Vec<Line<'static>> {
    render::render(text, &mut CodeCache::default()).lines
}

/// The plain text of a line (for tests and width checks).
pub fn plain(line: &Line<'_>) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

#[cfg(test)]
mod tests;
