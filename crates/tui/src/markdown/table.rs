//! A table: its cells collected, then laid out in aligned columns.

use pulldown_cmark::Alignment;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

/// A table being collected.
#[derive(Debug)]
pub(crate) struct Table {
    align: Vec<Alignment>,
    /// Rows of cells, each cell its spans; the first row is the header.
    rows: Vec<Vec<Vec<Span<'static>>>>,
}

impl Table {
    /// A table whose columns are aligned as given.
    pub(crate) fn new(align: Vec<Alignment>) -> Self {
        Table {
            align,
            rows: Vec::new(),
        }
    }

    /// A row begins (the header, then the body rows).
    pub(crate) fn start_row(&mut self) {
        self.rows.push(Vec::new());
    }

    /// One cell of the current row.
    pub(crate) fn push_cell(&mut self, cell: Vec<Span<'static>>) {
        if self.rows.is_empty() {
            self.rows.push(Vec::new());
        }
        if let Some(row) = self.rows.last_mut() {
            row.push(cell);
        }
    }

    /// The rows in aligned columns, a rule under the header.
    pub(crate) fn render(&self) -> Vec<Line<'static>> {
        let ncols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; ncols];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell_width(cell));
            }
        }
        let border = Style::new().fg(Color::DarkGray);
        let mut out = Vec::new();
        for (n, row) in self.rows.iter().enumerate() {
            let header = n == 0 && self.rows.len() > 1;
            let mut spans = Vec::new();
            for (i, &w) in widths.iter().enumerate() {
                spans.push(Span::styled(if i == 0 { "│ " } else { " │ " }, border));
                let cell = row.get(i).map(Vec::as_slice).unwrap_or(&[]);
                let gap = w.saturating_sub(cell_width(cell));
                let (before, after) = match self.align.get(i) {
                    Some(Alignment::Right) => (gap, 0),
                    Some(Alignment::Center) => (gap / 2, gap - gap / 2),
                    _ => (0, gap),
                };
                if before > 0 {
                    spans.push(Span::raw(" ".repeat(before)));
                }
                for s in cell {
                    let mut s = s.clone();
                    if header {
                        s.style = s.style.add_modifier(Modifier::BOLD);
                    }
                    spans.push(s);
                }
                if after > 0 {
                    spans.push(Span::raw(" ".repeat(after)));
                }
            }
            spans.push(Span::styled(" │", border));
            out.push(Line::from(spans));
            if header {
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
                out.push(Line::styled(format!("├{}┤", rule.join("┼")), border));
            }
        }
        out
    }
}

fn cell_width(cell: &[Span<'static>]) -> usize {
    cell.iter().map(|s| s.content.width()).sum()
}
