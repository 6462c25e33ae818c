//! One-line forms of a tool call and the collapsed form of its output: the pieces both the
//! general rendering and the capability tools' rendering are built from (a leaf).

use keel_protocol::ContentBlock;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::{dim, ToolView};

/// Lines of a tool's output shown from its head and from its tail.
const HEAD: usize = 3;
const TAIL: usize = 3;

pub(super) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Tools whose running call Ctrl+B can move to the background.
pub fn can_background(name: &str) -> bool {
    matches!(name, "Bash" | "Task" | "Agent")
}

/// A short form of a call's input for one line.
pub fn summary(name: &str, input: &Value) -> String {
    let pick = |k: &str| input[k].as_str().map(str::to_owned);
    let s = match name {
        "Bash" => pick("command"),
        "Read" | "Write" | "Edit" | "MultiEdit" => pick("file_path"),
        "NotebookEdit" => pick("notebook_path"),
        "TodoWrite" => input["todos"]
            .as_array()
            .map(|t| format!("{} tasks", t.len())),
        "Glob" | "Grep" => pick("pattern"),
        "Task" | "Agent" => pick("description"),
        "WebFetch" => pick("url"),
        "WebSearch" => pick("query").map(|q| format!("{q:?}")),
        "Skill" => pick("skill"),
        "TaskOutput" | "TaskStop" => pick("task_id"),
        "KillShell" => pick("shell_id"),
        _ => None,
    }
    .unwrap_or_else(|| {
        let s = input.to_string();
        if s == "{}" {
            String::new()
        } else {
            s
        }
    });
    let one = s.lines().next().unwrap_or("");
    let cut: String = one.chars().take(80).collect();
    if cut.len() < s.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

pub(super) fn tool_header(t: &ToolView, colour: Color) -> Line<'static> {
    Line::from(vec![
        Span::styled("● ", Style::new().fg(colour)),
        Span::styled(t.name.clone(), Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!("({})", summary(&t.name, &t.input))),
    ])
}

pub(super) fn result_text(block: &ContentBlock) -> (String, bool) {
    match block {
        ContentBlock::ToolResult(r) => (r.content.as_text(), r.is_error.unwrap_or(false)),
        _ => (String::new(), false),
    }
}

/// Head and tail of an output, the middle collapsed.
pub fn collapse(text: &str, style: Style) -> Vec<Line<'static>> {
    collapse_with(text, style, "  ⎿ ")
}

pub(super) fn collapse_with(
    text: &str,
    style: Style,
    first_mark: &'static str,
) -> Vec<Line<'static>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let row = |l: &str, first: bool| {
        Line::from(vec![
            Span::styled(if first { first_mark } else { "    " }, dim()),
            Span::styled(l.chars().take(400).collect::<String>(), style),
        ])
    };
    if lines.len() <= HEAD + TAIL + 1 {
        for (i, l) in lines.iter().enumerate() {
            out.push(row(l, i == 0));
        }
    } else {
        for (i, l) in lines[..HEAD].iter().enumerate() {
            out.push(row(l, i == 0));
        }
        out.push(Line::styled(
            format!("    … +{} lines …", lines.len() - HEAD - TAIL),
            dim(),
        ));
        for l in &lines[lines.len() - TAIL..] {
            out.push(row(l, false));
        }
    }
    out
}
