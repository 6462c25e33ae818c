//! Rendering a tool call and its result into scrollback lines (no state).

use keel_core::event::{CallMeta, DenialSource, NonExecution, ToolResultEvent};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::{dim, ToolView};

use super::lines::{collapse, collapse_with, first_line, result_text, tool_header};

/// The lines a finished call leaves in the scrollback.
pub fn render_result(view: &ToolView, r: &ToolResultEvent) -> Vec<Line<'static>> {
    let (text, is_error) = result_text(&r.block);
    let secs = view.started.elapsed().as_secs();
    let red = Style::new().fg(Color::Red);
    let mut out;
    match &r.meta {
        CallMeta::Ran {
            stopped: Some(kind),
            ..
        } => {
            out = stopped(view, r, &text, kind, secs);
        }
        CallMeta::NotRun(kind) => {
            out = vec![tool_header(view, Color::DarkGray)];
            let why = match kind {
                NonExecution::Rejected | NonExecution::Interrupted => {
                    "not run: the turn was stopped before it started".to_owned()
                }
                NonExecution::CutOff => {
                    "not run: the reply was cut off while writing it".to_owned()
                }
                NonExecution::Budget => "not run: the budget ran out".to_owned(),
                other => format!("not run ({})", other.as_str()),
            };
            out.push(Line::styled(format!("  ⎿ {why}"), dim()));
        }
        CallMeta::Denied(src) => {
            out = vec![tool_header(view, Color::Yellow)];
            let by = match src {
                DenialSource::User => "denied by you",
                DenialSource::Hook => "denied by a hook",
                DenialSource::Config => "denied by a permission rule or the mode",
            };
            out.push(Line::styled(
                format!("  ⎿ {by}: {}", first_line(&text)),
                Style::new().fg(Color::Yellow),
            ));
        }
        _ if r
            .detail
            .as_ref()
            .is_some_and(|d| d["backgroundedByUser"] == true) =>
        {
            out = vec![tool_header(view, Color::Blue)];
            let id = r
                .detail
                .as_ref()
                .and_then(|d| d["task_id"].as_str())
                .unwrap_or("?");
            out.push(Line::styled(
                format!(
                    "  ⎿ moved to the background as {id} after {secs}s; the turn goes on (/tasks)"
                ),
                dim(),
            ));
        }
        _ => {
            if let Some(lines) =
                super::capabilities::result_lines(view, r.detail.as_ref(), &text, is_error)
            {
                return lines;
            }
            if is_error {
                out = vec![tool_header(view, Color::Red)];
                out.extend(collapse(&text, red));
            } else {
                out = succeeded(view, &text);
            }
        }
    }
    out
}

/// A call stopped while it ran: why, after how long, and what it printed until then.
fn stopped(
    view: &ToolView,
    r: &ToolResultEvent,
    text: &str,
    kind: &NonExecution,
    secs: u64,
) -> Vec<Line<'static>> {
    let red = Style::new().fg(Color::Red);
    let mut out = vec![tool_header(view, Color::Red)];
    let what = match kind {
        NonExecution::Interrupted => format!("interrupted after {secs}s"),
        NonExecution::TimedOut => format!("timed out after {secs}s"),
        NonExecution::SiblingCancelled => {
            format!("stopped after {secs}s because a call beside it failed")
        }
        other => format!("stopped after {secs}s ({})", other.as_str()),
    };
    out.push(Line::from(vec![
        Span::styled("  ⎿ ", dim()),
        Span::styled(what, red),
        Span::styled(" · partial output:", dim()),
    ]));
    let partial = partial_output(r, text);
    if partial.trim().is_empty() {
        out.push(Line::styled("    (no output)", dim()));
    } else {
        out.extend(collapse_with(&partial, Style::new(), "    "));
    }
    out
}

/// A call that succeeded: a diff for edits, a count for reads, the output for the rest.
fn succeeded(view: &ToolView, text: &str) -> Vec<Line<'static>> {
    let mut out = vec![tool_header(view, Color::Green)];
    match view.name.as_str() {
        "Edit" => out.extend(diff_lines(
            view.input["old_string"].as_str().unwrap_or(""),
            view.input["new_string"].as_str().unwrap_or(""),
        )),
        "Write" => {
            let content = view.input["content"].as_str().unwrap_or("");
            out.push(Line::styled(
                format!("  ⎿ wrote {} lines", content.lines().count()),
                dim(),
            ));
            out.extend(diff_lines("", content));
        }
        "Read" => out.push(Line::styled(
            format!("  ⎿ read {} lines", text.lines().count()),
            dim(),
        )),
        "TodoWrite" => out.extend(todo_lines(&view.input)),
        _ if text.trim().is_empty() => out.push(Line::styled("  ⎿ (no output)", dim())),
        _ => out.extend(collapse(text, Style::new())),
    }
    out
}

/// The task list of a TodoWrite call, one line per task: `[x]` done, `[>]` in progress (in
/// bold), `[ ]` pending; at most 20 tasks.
pub fn todo_lines(input: &Value) -> Vec<Line<'static>> {
    let todos = input["todos"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<Line<'static>> = todos
        .iter()
        .take(20)
        .enumerate()
        .map(|(i, t)| {
            let content: String = t["content"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(120)
                .collect();
            let (mark, style) = match t["status"].as_str() {
                Some("completed") => ("[x]", dim()),
                Some("in_progress") => ("[>]", Style::new().add_modifier(Modifier::BOLD)),
                _ => ("[ ]", Style::new()),
            };
            Line::from(vec![
                Span::styled(if i == 0 { "  ⎿ " } else { "    " }, dim()),
                Span::styled(format!("{mark} {content}"), style),
            ])
        })
        .collect();
    if todos.len() > 20 {
        out.push(Line::styled(
            format!("    … {} more tasks", todos.len() - 20),
            dim(),
        ));
    }
    out
}

/// What a stopped command printed: the structured detail's stdout/stderr when there is one.
pub(super) fn partial_output(r: &ToolResultEvent, text: &str) -> String {
    if let Some(d) = &r.detail {
        let out = d["stdout"].as_str().unwrap_or("");
        let err = d["stderr"].as_str().unwrap_or("");
        if !out.is_empty() || !err.is_empty() {
            return [out, err]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("\n");
        }
    }
    text.to_owned()
}

/// A coloured line diff, at most 40 lines.
pub fn diff_lines(old: &str, new: &str) -> Vec<Line<'static>> {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    let mut hidden = 0usize;
    for group in diff.grouped_ops(2) {
        for op in group {
            for change in diff.iter_changes(&op) {
                let (mark, style) = match change.tag() {
                    ChangeTag::Delete => ("-", Style::new().fg(Color::Red)),
                    ChangeTag::Insert => ("+", Style::new().fg(Color::Green)),
                    ChangeTag::Equal => (" ", dim()),
                };
                if out.len() >= 40 {
                    hidden += 1;
                    continue;
                }
                let text = change.value().trim_end_matches('\n').to_owned();
                out.push(Line::from(vec![
                    Span::styled("    ", dim()),
                    Span::styled(format!("{mark} {text}"), style),
                ]));
            }
        }
    }
    if hidden > 0 {
        out.push(Line::styled(format!("    … {hidden} more lines"), dim()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::lines::summary;

    #[test]
    fn a_todo_list_renders_one_line_per_task_with_its_state() {
        let input = serde_json::json!({"todos": [
            {"content": "Parse", "status": "completed", "activeForm": "Parsing"},
            {"content": "Test", "status": "in_progress", "activeForm": "Testing"},
            {"content": "Ship", "status": "pending", "activeForm": "Shipping"}
        ]});
        let lines: Vec<String> = todo_lines(&input).iter().map(|l| l.to_string()).collect();
        assert_eq!(lines, ["  ⎿ [x] Parse", "    [>] Test", "    [ ] Ship"]);
        assert_eq!(summary("TodoWrite", &input), "3 tasks");
        assert_eq!(
            summary(
                "NotebookEdit",
                &serde_json::json!({"notebook_path": "a.ipynb"})
            ),
            "a.ipynb"
        );
    }
}
