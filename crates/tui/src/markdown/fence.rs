//! A fenced code block still open at the end of a streaming reply.
//!
//! Until its closing fence, every new line of such a block is a line of code and nothing else
//! (CommonMark: a fence's content is taken literally), so it is rendered on its own instead of
//! by parsing the whole block again: a reply that is one long file costs one highlight per line,
//! not a parse of everything before it.

/// The open fence of a top-level code block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenFence {
    /// The fence character (a backtick or a tilde) and how many of it open the block.
    ch: u8,
    len: usize,
    /// The columns of indentation before the opening fence (removed from each line).
    indent: usize,
    /// Which code block of the source it is, and how many lines it has so far.
    pub n: usize,
    pub next: usize,
}

impl OpenFence {
    /// The fence that opens `block` (the source of a top-level fenced code block, complete
    /// lines), if no line of it closes it yet; `n`: its number among the source's code blocks.
    pub(crate) fn of(block: &str, n: usize) -> Option<OpenFence> {
        let mut lines = block.split_terminator('\n');
        let first = lines.next()?;
        let indent = first.len() - first.trim_start_matches(' ').len();
        let rest = &first[indent..];
        let ch = *rest.as_bytes().first()?;
        let len = rest.bytes().take_while(|&b| b == ch).count();
        if indent > 3 || !(ch == b'`' || ch == b'~') || len < 3 {
            return None;
        }
        let mut fence = OpenFence {
            ch,
            len,
            indent,
            n,
            next: 0,
        };
        for l in lines {
            if fence.closes(l) {
                return None;
            }
            fence.next += 1;
        }
        Some(fence)
    }

    /// `line` closes the block: up to three spaces, at least as many fence characters as
    /// opened it, then only spaces.
    pub(crate) fn closes(&self, line: &str) -> bool {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        let run = rest.bytes().take_while(|&b| b == self.ch).count();
        indent <= 3 && run >= self.len && rest[run..].trim_matches([' ', '\t']).is_empty()
    }

    /// The code on `line`: without the indentation the fence had.
    pub(crate) fn content<'a>(&self, line: &'a str) -> &'a str {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let spaces = line.len() - line.trim_start_matches(' ').len();
        &line[spaces.min(self.indent)..]
    }
}
