//! Drawing inline: finished lines are written once into the terminal's own scrollback, and
//! only the live area below them is redrawn.
//!
//! Every frame goes out as one write inside synchronized-output brackets (terminals that do
//! not know them ignore them): go to the top of the live area, clear to the end of the
//! screen, write the newly finished lines (the terminal scrolls them up into its scrollback as
//! usual), then the live area, then put the cursor in the input box. Finished lines are never
//! written twice, and the live area's rows are cut to the width so none of them wraps: the
//! screen always knows how many rows it has to go back up.

use std::io::{self, Write};

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use unicode_width::UnicodeWidthChar;

use crate::view::Frame;

/// The inline screen over a terminal.
pub struct Screen<W: Write> {
    out: W,
    width: u16,
    /// How many rows up from the cursor the live area starts.
    cursor_row: u16,
    /// The widths of the live area's rows as drawn (to re-count them after a resize).
    drawn: Vec<usize>,
    colour: bool,
}

impl<W: Write> Screen<W> {
    /// A screen `width` columns wide writing to `out`.
    pub fn new(out: W, width: u16, colour: bool) -> Self {
        Self {
            out,
            width: width.max(1),
            cursor_row: 0,
            drawn: Vec::new(),
            colour,
        }
    }

    /// The width.
    pub fn width(&self) -> u16 {
        self.width
    }

    /// The terminal was resized. A narrower terminal re-flows the live area's rows that no
    /// longer fit, so the rows above the cursor are counted again at the new width.
    pub fn resize(&mut self, width: u16) {
        let width = width.max(1);
        if width < self.width {
            let w = width as usize;
            let rows_above: usize = self
                .drawn
                .iter()
                .take(self.cursor_row as usize)
                .map(|n| n.div_ceil(w).max(1))
                .sum();
            self.cursor_row = rows_above.min(u16::MAX as usize) as u16;
        }
        self.width = width;
    }

    /// Draw one frame: `committed` go into the scrollback for good, `live` replaces the live area.
    pub fn draw(&mut self, committed: &[Line<'static>], live: &Frame) -> io::Result<()> {
        let mut buf: Vec<u8> = Vec::with_capacity(4096);
        buf.extend_from_slice(b"\x1b[?2026h\x1b[?25l");
        if self.cursor_row > 0 {
            write!(buf, "\x1b[{}A", self.cursor_row)?;
        }
        buf.extend_from_slice(b"\r\x1b[J");
        for l in committed {
            write_line(&mut buf, l, None, self.colour);
            buf.extend_from_slice(b"\r\n");
        }
        let max = (self.width as usize).saturating_sub(1).max(1);
        self.drawn.clear();
        for (i, l) in live.lines.iter().enumerate() {
            if i > 0 {
                buf.extend_from_slice(b"\r\n");
            }
            let w = write_line(&mut buf, l, Some(max), self.colour);
            self.drawn.push(w);
        }
        let last = live.lines.len().saturating_sub(1) as u16;
        let (row, col) = live.cursor.unwrap_or((last, 0));
        let row = row.min(last);
        if last > row {
            write!(buf, "\x1b[{}A", last - row)?;
        }
        buf.push(b'\r');
        if col > 0 {
            write!(buf, "\x1b[{col}C")?;
        }
        if live.cursor.is_some() {
            buf.extend_from_slice(b"\x1b[?25h");
        }
        buf.extend_from_slice(b"\x1b[?2026l");
        self.cursor_row = row;
        self.out.write_all(&buf)?;
        self.out.flush()
    }

    /// Erase the live area, leaving the cursor where it began: what stays on the screen is
    /// the scrollback.
    pub fn finish(&mut self) -> io::Result<()> {
        let mut buf = Vec::new();
        if self.cursor_row > 0 {
            write!(buf, "\x1b[{}A", self.cursor_row)?;
        }
        buf.extend_from_slice(b"\r\x1b[J\x1b[0m\x1b[?25h");
        self.cursor_row = 0;
        self.drawn.clear();
        self.out.write_all(&buf)?;
        self.out.flush()
    }

    /// The writer (tests read what was written).
    pub fn get_ref(&self) -> &W {
        &self.out
    }
}

fn sgr(buf: &mut Vec<u8>, style: Style, colour: bool) {
    buf.extend_from_slice(b"\x1b[0");
    let m = style.add_modifier;
    for (flag, code) in [
        (Modifier::BOLD, ";1"),
        (Modifier::DIM, ";2"),
        (Modifier::ITALIC, ";3"),
        (Modifier::UNDERLINED, ";4"),
        (Modifier::REVERSED, ";7"),
        (Modifier::CROSSED_OUT, ";9"),
    ] {
        if m.contains(flag) {
            buf.extend_from_slice(code.as_bytes());
        }
    }
    if colour {
        if let Some(c) = style.fg {
            colour_code(buf, c, false);
        }
        if let Some(c) = style.bg {
            colour_code(buf, c, true);
        }
    }
    buf.push(b'm');
}

fn colour_code(buf: &mut Vec<u8>, c: Color, bg: bool) {
    let base = if bg { 40 } else { 30 };
    let s = match c {
        Color::Reset => format!(";{}", base + 9),
        Color::Black => format!(";{base}"),
        Color::Red => format!(";{}", base + 1),
        Color::Green => format!(";{}", base + 2),
        Color::Yellow => format!(";{}", base + 3),
        Color::Blue => format!(";{}", base + 4),
        Color::Magenta => format!(";{}", base + 5),
        Color::Cyan => format!(";{}", base + 6),
        Color::Gray => format!(";{}", base + 7),
        Color::DarkGray => format!(";{}", base + 60),
        Color::LightRed => format!(";{}", base + 61),
        Color::LightGreen => format!(";{}", base + 62),
        Color::LightYellow => format!(";{}", base + 63),
        Color::LightBlue => format!(";{}", base + 64),
        Color::LightMagenta => format!(";{}", base + 65),
        Color::LightCyan => format!(";{}", base + 66),
        Color::White => format!(";{}", base + 67),
        Color::Indexed(n) => format!(";{};5;{n}", base + 8),
        Color::Rgb(r, g, b) => format!(";{};2;{r};{g};{b}", base + 8),
    };
    buf.extend_from_slice(s.as_bytes());
}

/// Write a line's spans with their styles; cut at `max` columns when given. Control
/// characters never reach the terminal (text from the model or a command must not be able
/// to move the cursor or retitle the window): they are shown as `�`, tabs as spaces.
/// Returns the columns written.
pub fn write_line(buf: &mut Vec<u8>, line: &Line<'_>, max: Option<usize>, colour: bool) -> usize {
    let mut used = 0usize;
    let mut styled = false;
    'spans: for span in &line.spans {
        let style = line.style.patch(span.style);
        let plain = style == Style::default();
        if !plain || styled {
            sgr(buf, style, colour);
            styled = !plain;
        }
        for c in span.content.chars() {
            let (c, w) = match c {
                '\t' => {
                    let n = 4 - used % 4;
                    if max.is_some_and(|m| used + n > m) {
                        break 'spans;
                    }
                    buf.extend(std::iter::repeat_n(b' ', n));
                    used += n;
                    continue;
                }
                c if c.is_control() || invisible(c) => ('�', 1),
                c => (c, c.width().unwrap_or(0)),
            };
            if max.is_some_and(|m| used + w > m) {
                break 'spans;
            }
            let mut tmp = [0u8; 4];
            buf.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            used += w;
        }
    }
    if styled {
        buf.extend_from_slice(b"\x1b[0m");
    }
    used
}

/// Characters that reorder or hide text (bidirectional overrides and isolates, zero-width
/// characters): shown, so that what a command line says is what the screen says.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::text::Span;

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let mut buf = Vec::new();
        let line = Line::from(vec![Span::raw("a\x1b]0;pwned\x07b\x1b[2Jc\u{9b}d")]);
        write_line(&mut buf, &line, None, true);
        let s = String::from_utf8(buf).unwrap();
        assert!(
            !s.contains('\x1b') && !s.contains('\x07') && !s.contains('\u{9b}'),
            "{s:?}"
        );
        assert_eq!(s, "a�]0;pwned�b�[2Jc�d");
        // Text that would reorder itself on screen is shown as it is stored.
        let mut buf = Vec::new();
        write_line(&mut buf, &Line::raw("ls #\u{202e}fr- mr"), None, false);
        assert_eq!(String::from_utf8(buf).unwrap(), "ls #�fr- mr");
    }

    #[test]
    fn live_rows_are_cut_to_the_width() {
        let mut buf = Vec::new();
        let w = write_line(&mut buf, &Line::raw("界界界abc"), Some(5), false);
        assert_eq!(w, 4);
        assert_eq!(String::from_utf8(buf).unwrap(), "界界");
    }

    #[test]
    fn committed_lines_are_written_once() {
        let mut s = Screen::new(Vec::new(), 40, false);
        let live = Frame {
            lines: vec![Line::raw("live 1"), Line::raw("> ")],
            cursor: Some((1, 2)),
        };
        s.draw(&[Line::raw("first")], &live).unwrap();
        s.draw(&[], &live).unwrap();
        s.draw(&[Line::raw("second")], &live).unwrap();
        let out = String::from_utf8(s.get_ref().clone()).unwrap();
        assert_eq!(out.matches("first").count(), 1);
        assert_eq!(out.matches("second").count(), 1);
        assert_eq!(out.matches("live 1").count(), 3);
        // Each frame goes back up exactly to the live area's top (one row above the cursor).
        assert_eq!(out.matches("\x1b[1A\r\x1b[J").count(), 2);
    }
}
