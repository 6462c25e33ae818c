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
mod fence;
mod render;
mod table;

pub use code::code_line;

use code::CodeCache;
use fence::OpenFence;
use render::TopKind;

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
    /// The last block is a fenced code block still open: its new lines are rendered alone.
    open: Option<OpenFence>,
}

impl Markdown {
    /// Render one complete source line (without its newline); the lines returned are final. A
    /// table row returns nothing (it is held back until the table ends).
    pub fn line(&mut self, src: &str) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        if !self.code_line(src, &mut out) {
            self.src.push_str(src);
            self.src.push('\n');
            out.extend(self.advance(false));
        }
        out
    }

    /// Render complete source lines at once (`text` ends with a newline, or is taken as if it
    /// did); the lines returned are final.
    pub fn lines(&mut self, text: &str) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        let mut pending = false;
        for l in text.split_terminator('\n') {
            if pending || !self.code_line(l, &mut out) {
                self.src.push_str(l);
                self.src.push('\n');
                pending = true;
            }
        }
        if pending {
            out.extend(self.advance(false));
        }
        out
    }

    /// A line of the fenced code block open at the end, rendered alone (see `fence`); false
    /// when there is no such block or the line closes it.
    fn code_line(&mut self, src: &str, out: &mut Vec<Line<'static>>) -> bool {
        let Some(fence) = self.open.as_mut() else {
            return false;
        };
        if fence.closes(src) {
            self.open = None;
            return false;
        }
        out.push(self.code.line(fence.n, fence.next, fence.content(src)));
        fence.next += 1;
        self.committed += 1;
        self.src.push_str(src);
        self.src.push('\n');
        true
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
            Some(last)
                if !finished
                    && (last.kind == TopKind::Table
                        || (last.kind == TopKind::Paragraph && self.ends_in_table_row())) =>
            {
                last.line
            }
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
        let mut trimmed = false;
        if let Some(last) = r.top.last().filter(|_| r.top.len() > 1) {
            if self.committed >= last.line && last.src_line_start <= self.src.len() {
                self.src.drain(..last.src_line_start);
                self.committed -= last.line;
                // The code blocks are numbered from the new start.
                self.code.drop_first(last.code_before);
                trimmed = true;
            }
        }
        self.open = None;
        if let Some(last) = r
            .top
            .last()
            .filter(|l| !finished && l.kind == TopKind::Fenced)
        {
            let (start, n) = if trimmed {
                (0, 0)
            } else {
                (last.src_line_start, last.code_before)
            };
            // Only when every line is committed and the lines kept for the block are exactly
            // its lines so far: then rendering a new line alone is what a full render shows.
            self.open = self
                .src
                .get(start..)
                .and_then(|block| OpenFence::of(block, n))
                .filter(|f| hold_from == total && self.code.lines_of(n) == Some(f.next));
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
