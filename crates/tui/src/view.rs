//! The live area: everything below the scrollback that is redrawn while it changes — the
//! streaming tail, running calls, background tasks, retry countdown, spinner, queued prompts,
//! the input box (or the question in its place) and the status line.

use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Paragraph, Widget};
use unicode_width::UnicodeWidthStr;

use crate::app::{can_background, pinned_tasks, summary, App, Modal, MAX_PROMPTED_RETRIES};

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// Most rows of the input box before it scrolls.
const INPUT_ROWS: usize = 8;
/// Silence from the model before the live area says keel is waiting on it.
const STALL_HINT_SECS: u64 = 10;

/// The live area for one frame: its lines and where the cursor goes (row, column).
pub struct Frame {
    /// The lines, top to bottom.
    pub lines: Vec<Line<'static>>,
    /// The cursor's row and column, when the input box has it.
    pub cursor: Option<(u16, u16)>,
}

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

fn secs(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn tokens(n: u64) -> String {
    if n >= 1000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

/// Build the live area for `width` columns at `now`, at most `max_rows` rows (the input box and
/// status line are kept; what is above them is cut from the top).
pub fn frame(app: &App, width: u16, max_rows: u16, now: Instant) -> Frame {
    let mut top: Vec<Line<'static>> = Vec::new();
    top.extend(app.stream_held());
    top.extend(partial_rows(app.stream_partial(), width));
    top.extend(tool_rows(app, now));
    top.extend(task_rows(app, now));
    top.extend(hook_rows(app, now));
    if app.running.is_some() {
        top.extend(pinned_tasks(&app.todos));
    }
    top.extend(retry_row(app, now));
    top.extend(running_rows(app, now));
    for q in &app.queued {
        let one = q.lines().next().unwrap_or("");
        top.push(Line::from(vec![
            Span::styled("⧗ queued: ", Style::new().fg(Color::Blue)),
            Span::raw(one.chars().take(200).collect::<String>()),
        ]));
    }

    let rule = Line::styled("─".repeat(width as usize), dim());
    let mut bottom: Vec<Line<'static>> = vec![rule.clone()];
    let cursor = if let Some(a) = app.approvals.front() {
        approval_box(app, a, width, &mut bottom)
    } else if let Some(m) = &app.modal {
        bottom.extend(modal_lines(m, width));
        None
    } else {
        input_box(app, &mut bottom)
    };
    bottom.push(rule);
    bottom.push(status_line(app));

    // Keep the bottom whole; cut what is above it from the top when the screen is short.
    let room = (max_rows as usize).saturating_sub(bottom.len());
    if top.len() > room {
        let cut = top.len() - room;
        top.drain(..cut);
    }
    let offset = top.len() as u16;
    let mut lines = top;
    lines.extend(bottom);
    Frame {
        lines,
        cursor: cursor.map(|(r, c)| (r + offset, c.min(width.saturating_sub(1)))),
    }
}

/// The last rows of the line still streaming. A long one is wrapped here (its last rows), not
/// cut at the edge; once complete it goes to the scrollback, where the terminal wraps it.
/// Only its end is wrapped (enough for the rows shown): a long line is not re-wrapped whole at
/// every frame.
fn partial_rows(partial: &str, width: u16) -> Vec<Line<'static>> {
    let cols = (width as usize).saturating_sub(1).max(8);
    let keep = (PARTIAL_ROWS + 1) * cols;
    let tail = match partial.char_indices().rev().nth(keep) {
        Some((at, _)) => &partial[at..],
        None => partial,
    };
    let partial = wrap(tail, cols);
    let skip = partial.len().saturating_sub(PARTIAL_ROWS);
    partial
        .into_iter()
        .skip(skip)
        .filter(|r| !r.is_empty())
        .map(Line::raw)
        .collect()
}

/// One row per running tool call (what, for how long, whether it waits for an answer), and a
/// row for its latest activity.
fn tool_rows(app: &App, now: Instant) -> Vec<Line<'static>> {
    let bg_hint = if app.in_tmux {
        "ctrl+b ctrl+b to background"
    } else {
        "ctrl+b to background"
    };
    let mut out = Vec::new();
    for t in &app.tools {
        let asking = app.approvals.iter().any(|a| a.req.tool_use_id == t.id);
        let mut spans = vec![
            Span::styled("● ", Style::new().fg(Color::Cyan)),
            Span::styled(t.name.clone(), Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!("({})", summary(&t.name, &t.input))),
        ];
        if asking {
            spans.push(Span::styled(" · waiting for your answer", dim()));
        } else {
            spans.push(Span::styled(
                format!(" · {}", secs(now.saturating_duration_since(t.started))),
                dim(),
            ));
        }
        if can_background(&t.name) && !asking {
            spans.push(Span::styled(format!(" · {bg_hint}"), dim()));
        }
        out.push(Line::from(spans));
        if let Some(a) = &t.activity {
            out.push(Line::styled(format!("  ⎿ {a}"), dim()));
        }
    }
    out
}

/// The first three background tasks, and how many more there are.
fn task_rows(app: &App, now: Instant) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for t in app.tasks.iter().take(3) {
        out.push(Line::from(vec![
            Span::styled("◇ ", Style::new().fg(Color::Blue)),
            Span::raw(format!("{} ", t.id)),
            Span::styled(
                format!(
                    "{} · running {}",
                    t.description,
                    secs(now.saturating_duration_since(t.started))
                ),
                dim(),
            ),
        ]));
    }
    if app.tasks.len() > 3 {
        out.push(Line::styled(
            format!("◇ … {} more background tasks (/tasks)", app.tasks.len() - 3),
            dim(),
        ));
    }
    out
}

/// The countdown to the next automatic retry of a failed API call.
fn retry_row(app: &App, now: Instant) -> Option<Line<'static>> {
    let r = app.retry.as_ref()?;
    let left = r.until.saturating_duration_since(now);
    let what = match r.status {
        Some(s) => format!("API error {s} ({})", r.label),
        None => format!("API error ({})", r.label),
    };
    Some(Line::from(vec![
        Span::styled("  ⎿ ", dim()),
        Span::styled(what, Style::new().fg(Color::Red)),
        Span::raw(format!(
            " · retrying in {}s (attempt {}/{})",
            left.as_secs() + u64::from(left.subsec_millis() > 0),
            r.attempt,
            r.max
        )),
    ]))
}

/// The running turn's spinner (what it does, for how long, its tokens), after a hint when the
/// model has been silent for a while.
fn running_rows(app: &App, now: Instant) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let Some(run) = &app.running else {
        return out;
    };
    let quiet = now.saturating_duration_since(run.last_model);
    if run.thinking && app.retry.is_none() && quiet.as_secs() >= STALL_HINT_SECS {
        let left = app.idle_timeout.saturating_sub(quiet);
        out.push(Line::styled(
            format!(
                "  ⎿ Waiting for the model: nothing for {} · keel gives up on this reply in {} and retries",
                secs(quiet),
                secs(left)
            ),
            Style::new().fg(Color::Yellow),
        ));
    }
    let verb = if run.interrupting {
        "Stopping…"
    } else if run.thinking {
        "Thinking…"
    } else {
        "Working…"
    };
    let mut detail = vec![secs(now.saturating_duration_since(run.started))];
    if run.tokens > 0 {
        detail.push(format!("↓ {} tokens", tokens(run.tokens)));
    }
    if !run.interrupting {
        detail.push("esc to interrupt".into());
    }
    let tick = (now.saturating_duration_since(run.started).as_millis() / 100) as usize;
    out.push(Line::from(vec![
        Span::styled(
            format!("{} ", SPINNER[tick % SPINNER.len()]),
            Style::new().fg(Color::Magenta),
        ),
        Span::styled(verb, Style::new().fg(Color::Magenta)),
        Span::styled(format!(" ({})", detail.join(" · ")), dim()),
    ]));
    out
}

/// The permission question in place of the input box (and, once the user chose "no", the
/// line where they say what to do instead); returns the cursor's place in `bottom`.
fn approval_box(
    app: &App,
    a: &crate::app::PendingApproval,
    width: u16,
    bottom: &mut Vec<Line<'static>>,
) -> Option<(u16, u16)> {
    bottom.extend(approval_lines(app, a, width));
    let reason = a.reason.as_ref()?;
    bottom.push(Line::from(vec![Span::styled(
        "  Tell keel what to do instead (Enter to send, Esc to go back): ",
        dim(),
    )]));
    let row = bottom.len() as u16;
    bottom.push(Line::raw(format!("  > {reason}")));
    Some((row, (4 + reason.width()) as u16))
}

/// A dialog in place of the input box: the retry prompt, the `/rewind` or the resume picker.
fn modal_lines(m: &Modal, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    match m {
        Modal::Retry { next, .. } => {
            out.push(Line::styled(
                "The API is still failing after keel's automatic retries.",
                Style::new().fg(Color::Red),
            ));
            out.push(Line::raw(format!(
                "Retry now? This continues the same session (try {next} of {MAX_PROMPTED_RETRIES})."
            )));
            out.push(Line::from(vec![
                Span::styled("❯ 1. Yes", Style::new().fg(Color::Cyan)),
                Span::styled("  (Enter/y)   ", dim()),
                Span::raw("2. No"),
                Span::styled("  (Esc/n)", dim()),
            ]));
        }
        Modal::Rewind { items, selected } => {
            out.extend(rewind_lines(items, *selected, width));
        }
        Modal::Picker { items, selected } => {
            out.push(Line::styled(
                "Resume which session? (↑/↓, Enter, Esc)",
                Style::new().add_modifier(Modifier::BOLD),
            ));
            let start = selected.saturating_sub(7);
            for (i, (_, label)) in items.iter().enumerate().skip(start).take(8) {
                let style = if i == *selected {
                    Style::new().fg(Color::Cyan)
                } else {
                    Style::new()
                };
                let mark = if i == *selected { "❯ " } else { "  " };
                out.push(Line::styled(format!("{mark}{label}"), style));
            }
        }
    }
    out
}

/// The input box's rows around the cursor (at most INPUT_ROWS); returns the cursor's place in
/// `bottom`.
fn input_box(app: &App, bottom: &mut Vec<Line<'static>>) -> Option<(u16, u16)> {
    let mut cursor = None;
    let lines = app.editor.lines();
    let (row, col) = app.editor.cursor();
    let first = row.saturating_sub(INPUT_ROWS - 1);
    for (i, l) in lines.iter().enumerate().skip(first).take(INPUT_ROWS) {
        let mark = if i == 0 { "> " } else { "  " };
        if i == row {
            let before: String = l.chars().take(col).collect();
            cursor = Some((bottom.len() as u16, (2 + before.width()) as u16));
        }
        bottom.push(Line::from(vec![
            Span::styled(mark, dim()),
            Span::raw(l.clone()),
        ]));
    }
    cursor
}

/// One row per settings hook running now: which, its command, for how long.
fn hook_rows(app: &App, now: Instant) -> Vec<Line<'static>> {
    app.hooks
        .iter()
        .map(|h| {
            Line::from(vec![
                Span::styled("◆ ", Style::new().fg(Color::Cyan)),
                Span::styled(
                    format!("hook {}", h.name),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::styled(
                    format!(
                        " · {} · running {}",
                        h.command,
                        secs(now.saturating_duration_since(h.started))
                    ),
                    dim(),
                ),
            ])
        })
        .collect()
}

/// Most rows of a line still streaming that the live area shows (its end).
const PARTIAL_ROWS: usize = 6;

/// Most rows of a command or diff a permission question shows; past it a line says how much
/// more there is.
const ASK_ROWS: usize = 20;

/// `text` cut into rows of at most `width` columns — nothing of a command being approved may
/// hide past the edge of the screen.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(8);
    if text.is_empty() {
        return Vec::new();
    }
    let mut rows = Vec::new();
    for line in text.lines() {
        let mut row = String::new();
        let mut used = 0;
        for c in line.chars() {
            let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(1);
            if used + w > width {
                rows.push(std::mem::take(&mut row));
                used = 0;
            }
            row.push(c);
            used += w;
        }
        rows.push(row);
    }
    rows
}

fn more_rows(shown: usize, total: usize) -> Option<Line<'static>> {
    (total > shown).then(|| {
        Line::styled(
            format!(
                "  … {} more rows not shown here — all of it is what runs",
                total - shown
            ),
            Style::new().fg(Color::Yellow),
        )
    })
}

/// The fields of `input` other than `shown`, wrapped (nothing a call was given is hidden from
/// the question about it).
fn rest_of_input(input: &serde_json::Value, shown: &[&str], cols: usize) -> Vec<Line<'static>> {
    let Some(obj) = input.as_object() else {
        return Vec::new();
    };
    let rest: serde_json::Map<String, serde_json::Value> = obj
        .iter()
        .filter(|(k, _)| !shown.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rest.is_empty() {
        return Vec::new();
    }
    let rows = wrap(
        &serde_json::to_string_pretty(&rest).unwrap_or_default(),
        cols,
    );
    let mut out: Vec<Line<'static>> = rows
        .iter()
        .take(ASK_ROWS)
        .map(|l| Line::styled(format!("  {l}"), dim()))
        .collect();
    out.extend(more_rows(ASK_ROWS, rows.len()));
    out
}

/// The permission question for one call: the tool, what exactly it would do, why keel asks,
/// and the choices.
fn approval_lines(app: &App, a: &crate::app::PendingApproval, width: u16) -> Vec<Line<'static>> {
    let cols = (width as usize).saturating_sub(6);
    let req = &a.req;
    let mut out = vec![Line::styled(
        format!("Allow {}?", req.tool_name),
        Style::new().add_modifier(Modifier::BOLD),
    )];
    let input = &req.input;
    match req.tool_name.as_str() {
        "Bash" => {
            out.extend(asked_command(input, cols));
            if let Some(d) = &req.description {
                out.push(Line::styled(format!("  {d}"), dim()));
            }
        }
        "Edit" => {
            out.push(Line::raw(format!(
                "  {}",
                input["file_path"].as_str().unwrap_or("")
            )));
            let diff = crate::app::diff_lines(
                input["old_string"].as_str().unwrap_or(""),
                input["new_string"].as_str().unwrap_or(""),
            );
            let n = diff.len();
            out.extend(diff.into_iter().take(ASK_ROWS));
            out.extend(more_rows(ASK_ROWS, n));
        }
        "Write" => {
            let content = input["content"].as_str().unwrap_or("");
            out.push(Line::raw(format!(
                "  {} ({} lines)",
                input["file_path"].as_str().unwrap_or(""),
                content.lines().count()
            )));
            let diff = crate::app::diff_lines("", content);
            let n = diff.len();
            out.extend(diff.into_iter().take(ASK_ROWS / 2));
            out.extend(more_rows(ASK_ROWS / 2, n));
        }
        "WebFetch" => out.extend(asked_fetch(input, cols)),
        "WebSearch" => {
            let q = input["query"].as_str().unwrap_or("");
            out.push(Line::styled(
                format!("  search the web for {q:?}"),
                Style::new().fg(Color::Cyan),
            ));
            out.extend(rest_of_input(input, &["query"], cols));
        }
        _ => {
            // Every other tool: its whole input, wrapped, so nothing it was given is hidden.
            let rows = wrap(
                &serde_json::to_string_pretty(input).unwrap_or_default(),
                cols,
            );
            for l in rows.iter().take(ASK_ROWS) {
                out.push(Line::raw(format!("  {l}")));
            }
            out.extend(more_rows(ASK_ROWS, rows.len()));
        }
    }
    if let Some(r) = &req.reason {
        out.push(Line::styled(format!("  ({r})"), dim()));
    }
    out.extend(approval_choices(app, a));
    out
}

/// A Bash call's command, wrapped, at most ASK_ROWS rows.
fn asked_command(input: &serde_json::Value, cols: usize) -> Vec<Line<'static>> {
    let rows = wrap(input["command"].as_str().unwrap_or(""), cols);
    let mut out = Vec::new();
    for (i, l) in rows.iter().take(ASK_ROWS).enumerate() {
        let mark = if i == 0 { "  $ " } else { "    " };
        out.push(Line::styled(
            format!("{mark}{l}"),
            Style::new().fg(Color::Cyan),
        ));
    }
    out.extend(more_rows(ASK_ROWS, rows.len()));
    out
}

/// A WebFetch call: the host first (it is what a rule allows, and what a prompt-injected page
/// would want to change), then the whole URL, what it asks of the page, and any other field.
fn asked_fetch(input: &serde_json::Value, cols: usize) -> Vec<Line<'static>> {
    let url = input["url"].as_str().unwrap_or("");
    let mut out = vec![Line::styled(
        format!("  {}", crate::app::domain(url)),
        Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
    )];
    let rows = wrap(url, cols);
    for l in rows.iter().take(ASK_ROWS) {
        out.push(Line::raw(format!("  {l}")));
    }
    out.extend(more_rows(ASK_ROWS, rows.len()));
    if let Some(p) = input["prompt"].as_str() {
        let rows = wrap(&format!("asks: {p}"), cols);
        for l in rows.iter().take(ASK_ROWS) {
            out.push(Line::styled(format!("  {l}"), dim()));
        }
        out.extend(more_rows(ASK_ROWS, rows.len()));
    }
    out.extend(rest_of_input(input, &["url", "prompt"], cols));
    out
}

/// The answers to a permission question (the selected one marked), how many more questions
/// wait, and what Esc does.
fn approval_choices(app: &App, a: &crate::app::PendingApproval) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut opts = vec![(0usize, "1. Yes".to_owned())];
    if !a.rules.is_empty() {
        opts.push((
            1,
            format!("2. Yes, and don't ask again for {}", a.rules.join(", ")),
        ));
    }
    let n = opts.len() + 1;
    opts.push((2, format!("{n}. No, and tell keel what to do instead")));
    for (k, label) in opts {
        let sel = k == a.selected;
        out.push(Line::styled(
            format!("{}{label}", if sel { "❯ " } else { "  " }),
            if sel {
                Style::new().fg(Color::Cyan)
            } else {
                Style::new()
            },
        ));
        if k == 1 {
            out.push(Line::styled(
                "     (saved in .claude/settings.local.json)",
                dim(),
            ));
        }
    }
    if app.approvals.len() > 1 {
        out.push(Line::styled(
            format!("  ({} more waiting)", app.approvals.len() - 1),
            dim(),
        ));
    }
    out.push(Line::styled("  Esc: no, and stop the turn", dim()));
    out
}

/// Rows of the `/rewind` picker shown at once.
const REWIND_ROWS: usize = 8;

/// The `/rewind` picker: the prompts, numbered from the oldest, a window around the
/// highlighted one, and what choosing one does.
fn rewind_lines(items: &[String], selected: usize, width: u16) -> Vec<Line<'static>> {
    let mut out = vec![Line::styled(
        "Put the files back as they were at which prompt? (↑/↓, Enter, Esc)",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    let cols = (width as usize).saturating_sub(8).max(8);
    let start = selected
        .saturating_sub(REWIND_ROWS - 1)
        .min(items.len().saturating_sub(REWIND_ROWS));
    for (i, label) in items.iter().enumerate().skip(start).take(REWIND_ROWS) {
        let sel = i == selected;
        let label: String = label.chars().take(cols).collect();
        out.push(Line::styled(
            format!("{}{:>3}  {label}", if sel { "❯" } else { " " }, i + 1),
            if sel {
                Style::new().fg(Color::Cyan)
            } else {
                Style::new()
            },
        ));
    }
    out.push(Line::styled(
        "  Files keel's tools wrote since then are restored or deleted.",
        dim(),
    ));
    out.push(Line::styled(
        "  The conversation stays, and so does what commands wrote.",
        dim(),
    ));
    out
}

fn status_line(app: &App) -> Line<'static> {
    let s = &app.status;
    let mut parts = vec![Span::styled(s.model.clone(), Style::new().fg(Color::Cyan))];
    let mode_style = match s.mode.as_str() {
        "acceptEdits" => Style::new().fg(Color::Green),
        "plan" => Style::new().fg(Color::Blue),
        "bypassPermissions" => Style::new().fg(Color::Red),
        _ => dim(),
    };
    parts.push(Span::styled(" · ", dim()));
    parts.push(Span::styled(s.mode.clone(), mode_style));
    parts.push(Span::styled(format!(" · ${:.4}", s.cost_usd), dim()));
    if let Some(window) = s.context_window.filter(|w| *w > 0) {
        let pct = (s.context_tokens.saturating_mul(100) / window).min(100);
        let style = if pct >= 80 {
            Style::new().fg(Color::Yellow)
        } else {
            dim()
        };
        parts.push(Span::styled(format!(" · context {pct}%"), style));
    }
    if let Some(n) = &app.notice {
        parts.push(Span::styled(
            format!(" · {n}"),
            Style::new().fg(Color::Yellow),
        ));
    } else {
        parts.push(Span::styled(" · shift+tab mode · /help", dim()));
    }
    Line::from(parts)
}

/// The live area as a ratatui widget (what the snapshot tests render).
pub struct LiveArea<'a> {
    /// The lines.
    pub lines: &'a [Line<'static>],
}

impl Widget for LiveArea<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        Paragraph::new(Text::from(self.lines.to_vec())).render(area, buf);
    }
}
