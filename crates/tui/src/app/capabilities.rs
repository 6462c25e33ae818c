//! How keel's capability tools and events look: hook runs, WebFetch and WebSearch (and the
//! provider's own search blocks in a reply), the task list, notebook edits and skills. Pure
//! functions from what the engine emitted to lines; the state lives in [`super::App`].

use keel_core::hooks::{HookDecision, HookEvent, HookProgress, HookRunEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::lines::{collapse, first_line, tool_header};
use super::{dim, ToolView};

/// Most sources of a search listed under it.
const SOURCES: usize = 5;
/// Most lines of a notebook cell's new source previewed.
const CELL_PREVIEW: usize = 8;
/// Most tasks of the pinned task list shown above the prompt.
pub const PINNED_TASKS: usize = 8;

/// What one finished hook run did, as the UI says it: a verb phrase and its detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookVerdict {
    /// What the hook did ("blocked the call", "timed out", ...).
    pub what: String,
    /// Its reason, message or error (may be empty).
    pub detail: String,
    /// Whether it is a failure of the hook itself (red) rather than a decision (yellow/dim).
    pub failed: bool,
}

/// How a hook run ended, read the way the engine reads it. `None`: it did nothing worth a
/// line (exit 0 without an answer) — a hook that merely ran stays quiet.
pub fn hook_verdict(event: HookEvent, end: &HookRunEnd) -> Option<HookVerdict> {
    let v = |what: &str, detail: &str, failed: bool| {
        Some(HookVerdict {
            what: what.to_owned(),
            detail: first_line(detail.trim()).chars().take(300).collect(),
            failed,
        })
    };
    match end.exit_code {
        None if end.outcome == "cancelled" => v("was stopped with the turn", &end.stderr, false),
        None if end.stderr.contains("deadline") => v("timed out", &end.stderr, true),
        None => v("failed", &end.stderr, true),
        Some(2) => match block_phrase(event) {
            Some(what) => v(what, &end.stderr, false),
            None => v("said", &end.stderr, false),
        },
        Some(0) => answered(event, end),
        Some(code) => v(
            &format!("failed (exit code {code})"),
            if end.stderr.trim().is_empty() {
                &end.stdout
            } else {
                &end.stderr
            },
            true,
        ),
    }
}

/// What a block means for `event` (`None`: the event cannot block).
fn block_phrase(event: HookEvent) -> Option<&'static str> {
    Some(match event {
        HookEvent::PreToolUse | HookEvent::PermissionRequest => "blocked the call",
        HookEvent::UserPromptSubmit => "blocked the prompt",
        HookEvent::Stop | HookEvent::SubagentStop => "kept the model working",
        HookEvent::PostToolUse | HookEvent::PostToolUseFailure => "told the model",
        _ => return None,
    })
}

/// A hook that exited 0: its JSON answer, or plain text that becomes context.
fn answered(event: HookEvent, end: &HookRunEnd) -> Option<HookVerdict> {
    let out = end.stdout.trim();
    let v = |what: String, detail: String, failed: bool| {
        Some(HookVerdict {
            what,
            detail: first_line(detail.trim()).chars().take(300).collect(),
            failed,
        })
    };
    if out.starts_with('{') {
        let decision = serde_json::from_str::<Value>(out)
            .map_err(|e| e.to_string())
            .and_then(|j| HookDecision::from_output(event, &j).map_err(|e| e.to_string()));
        let d = match decision {
            Ok(d) => d,
            Err(e) => return v("printed an answer keel cannot use".into(), e, true),
        };
        if let Some(s) = d.stop {
            return v("stopped the turn".into(), s, false);
        }
        if let Some(b) = d.block {
            let what = block_phrase(event).unwrap_or("blocked");
            return v(what.into(), b, false);
        }
        if let Some(a) = d.ask {
            return v("asked for your approval".into(), a, false);
        }
        if d.updated_input.is_some() {
            return v("changed the call's input".into(), String::new(), false);
        }
        if d.allow {
            return v("allowed the call".into(), String::new(), false);
        }
        let chars: usize = d.additional_context.iter().map(|c| c.chars().count()).sum();
        if chars > 0 {
            return v(
                format!("added context ({chars} chars)"),
                String::new(),
                false,
            );
        }
        if let Some(m) = d.system_message {
            return v("said".into(), m, false);
        }
        return None;
    }
    if !out.is_empty() && matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart) {
        let chars = out.chars().count();
        return v(
            format!("added context ({chars} chars)"),
            String::new(),
            false,
        );
    }
    None
}

/// The scrollback line of a finished hook run, or `None` when it stays quiet.
pub fn hook_line(p: &HookProgress) -> Option<Line<'static>> {
    let end = p.end.as_ref()?;
    let verdict = hook_verdict(p.event, end)?;
    let colour = if verdict.failed {
        Color::Red
    } else if verdict.what.starts_with("added context")
        || verdict.what == "allowed the call"
        || verdict.what == "was stopped with the turn"
    {
        Color::DarkGray
    } else {
        Color::Yellow
    };
    let mut spans = vec![
        Span::styled("◆ ", Style::new().fg(colour)),
        Span::styled(
            format!("hook {}", p.hook_name),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!(" · {} · ", p.command), dim()),
        Span::styled(verdict.what, Style::new().fg(colour)),
    ];
    if !verdict.detail.is_empty() {
        spans.push(Span::raw(format!(": {}", verdict.detail)));
    }
    Some(Line::from(spans))
}

/// The host of a URL (`example.com`, `127.0.0.1`), parsed as WebFetch parses it (so a
/// backslash or a user part cannot make it show another host than the one fetched); the text
/// itself when it is not a URL with a host.
pub fn domain(url: &str) -> String {
    match url::Url::parse(url.trim()) {
        Ok(u) => u.host_str().map_or_else(|| url.to_owned(), str::to_owned),
        Err(_) => url.to_owned(),
    }
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// The lines of a finished call of a capability tool, or `None` for the generic rendering.
pub(super) fn result_lines(
    view: &ToolView,
    detail: Option<&Value>,
    text: &str,
    is_error: bool,
) -> Option<Vec<Line<'static>>> {
    let empty = Value::Null;
    let d = detail.unwrap_or(&empty);
    match (view.name.as_str(), is_error) {
        ("WebFetch", _) => Some(web_fetch(view, d, text, is_error)),
        ("WebSearch", false) => Some(web_search(view, d, text)),
        ("NotebookEdit", false) => Some(notebook(view, d)),
        ("Skill", false) => Some(skill(view)),
        _ => None,
    }
}

fn web_fetch(view: &ToolView, d: &Value, text: &str, is_error: bool) -> Vec<Line<'static>> {
    let asked = view.input["url"].as_str().unwrap_or("");
    let host = domain(asked);
    if is_error {
        let red = Style::new().fg(Color::Red);
        let mut out = vec![tool_header(view, Color::Red)];
        out.push(Line::from(vec![
            Span::styled("  ⎿ ", dim()),
            Span::styled(format!("{host} · "), dim()),
            Span::styled(first_line(text).chars().take(400).collect::<String>(), red),
        ]));
        let rest: Vec<&str> = text.lines().skip(1).collect();
        if !rest.is_empty() {
            out.extend(
                collapse(&rest.join("\n"), red)
                    .into_iter()
                    .map(indent_continuation),
            );
        }
        return out;
    }
    let mut facts = vec![host.clone()];
    if let Some(code) = d["code"].as_u64() {
        let reason = d["codeText"].as_str().unwrap_or("");
        facts.push(format!("{code} {reason}").trim_end().to_owned());
    }
    if let Some(b) = d["bytes"].as_u64() {
        facts.push(size(b));
    }
    if let Some(ms) = d["durationMs"].as_u64() {
        facts.push(format!("{:.1}s", ms as f64 / 1000.0));
    }
    if let Some(url) = d["url"].as_str() {
        let landed = domain(url);
        if landed != host {
            facts.push(format!("redirected to {landed}"));
        }
    }
    let mut out = vec![
        tool_header(view, Color::Green),
        Line::styled(format!("  ⎿ {}", facts.join(" · ")), dim()),
    ];
    let answer = d["result"].as_str().unwrap_or(text);
    out.extend(
        collapse(answer, Style::new())
            .into_iter()
            .map(indent_continuation),
    );
    out
}

/// A line made by [`collapse`] moved under a `⎿` line already written.
fn indent_continuation(mut l: Line<'static>) -> Line<'static> {
    if let Some(first) = l.spans.first_mut() {
        if first.content == "  ⎿ " {
            first.content = "    ".into();
        }
    }
    l
}

/// `(title, url)` of each source a WebSearch detail lists.
fn sources(d: &Value) -> Vec<(String, String)> {
    d["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["content"].as_array())
        .flatten()
        .filter_map(|l| {
            Some((
                l["title"].as_str()?.to_owned(),
                l["url"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn source_lines(list: &[(String, String)]) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for (i, (title, url)) in list.iter().take(SOURCES).enumerate() {
        let title: String = title.chars().take(80).collect();
        out.push(Line::from(vec![
            Span::styled(format!("    {}. ", i + 1), dim()),
            Span::raw(title),
            Span::styled(format!(" — {}", domain(url)), dim()),
        ]));
    }
    if list.len() > SOURCES {
        out.push(Line::styled(
            format!("    … {} more sources", list.len() - SOURCES),
            dim(),
        ));
    }
    out
}

fn web_search(view: &ToolView, d: &Value, text: &str) -> Vec<Line<'static>> {
    let list = sources(d);
    let mut facts = vec![match list.len() {
        1 => "1 result".to_owned(),
        n => format!("{n} results"),
    }];
    if let Some(n) = d["searches"].as_u64() {
        facts.push(if n == 1 {
            "1 search".into()
        } else {
            format!("{n} searches")
        });
    }
    if let Some(s) = d["durationSeconds"].as_f64() {
        facts.push(format!("{s:.1}s"));
    }
    let mut out = vec![
        tool_header(view, Color::Green),
        Line::styled(format!("  ⎿ {}", facts.join(" · ")), dim()),
    ];
    if list.is_empty() && d.is_null() {
        out.extend(
            collapse(text, Style::new())
                .into_iter()
                .map(indent_continuation),
        );
    }
    out.extend(source_lines(&list));
    out
}

/// The provider's own search in a reply (`server_tool_use` / `web_search_tool_result`
/// blocks): the query it ran, then the sources it found or the error it reported.
pub fn server_block(block: &Value) -> Vec<Line<'static>> {
    match block["type"].as_str() {
        Some("server_tool_use") => {
            let name = match block["name"].as_str() {
                Some("web_search") => "WebSearch".to_owned(),
                Some(other) => other.to_owned(),
                None => "server tool".to_owned(),
            };
            let query = block["input"]["query"].as_str().unwrap_or("");
            vec![Line::from(vec![
                Span::styled("● ", Style::new().fg(Color::Green)),
                Span::styled(name, Style::new().add_modifier(Modifier::BOLD)),
                Span::raw(format!("({query:?})")),
                Span::styled(" · run by the provider", dim()),
            ])]
        }
        Some("web_search_tool_result") => {
            let content = &block["content"];
            if let Some(list) = content.as_array() {
                let found: Vec<(String, String)> = list
                    .iter()
                    .filter_map(|r| {
                        Some((
                            r["title"].as_str()?.to_owned(),
                            r["url"].as_str()?.to_owned(),
                        ))
                    })
                    .collect();
                let mut out = vec![Line::styled(
                    format!(
                        "  ⎿ {} result{}",
                        found.len(),
                        if found.len() == 1 { "" } else { "s" }
                    ),
                    dim(),
                )];
                out.extend(source_lines(&found));
                out
            } else {
                let code = content["error_code"].as_str().unwrap_or("unknown error");
                vec![Line::styled(
                    format!("  ⎿ the provider's search failed: {code}"),
                    Style::new().fg(Color::Red),
                )]
            }
        }
        _ => Vec::new(),
    }
}

fn notebook(view: &ToolView, d: &Value) -> Vec<Line<'static>> {
    let input = &view.input;
    let pick = |k: &str| {
        d[k].as_str()
            .or_else(|| input[k].as_str())
            .unwrap_or("")
            .to_owned()
    };
    let mode = match pick("edit_mode").as_str() {
        "" => "replace".to_owned(),
        m => m.to_owned(),
    };
    let cell = match pick("cell_id").as_str() {
        "" => "the first cell".to_owned(),
        c => format!("cell {c}"),
    };
    let kind = pick("cell_type");
    let kind = if kind.is_empty() {
        String::new()
    } else {
        format!(" ({kind})")
    };
    let what = match mode.as_str() {
        "insert" => format!("inserted {cell}{kind}"),
        "delete" => format!("deleted {cell}"),
        _ => format!("replaced the source of {cell}{kind}"),
    };
    let mut out = vec![
        tool_header(view, Color::Green),
        Line::styled(format!("  ⎿ {what}"), dim()),
    ];
    if mode != "delete" {
        let source = input["new_source"].as_str().unwrap_or("");
        let lines: Vec<&str> = source.lines().collect();
        for l in lines.iter().take(CELL_PREVIEW) {
            out.push(Line::from(vec![
                Span::styled("    ", dim()),
                Span::styled(
                    format!("+ {}", l.chars().take(200).collect::<String>()),
                    Style::new().fg(Color::Green),
                ),
            ]));
        }
        if lines.len() > CELL_PREVIEW {
            out.push(Line::styled(
                format!("    … {} more lines", lines.len() - CELL_PREVIEW),
                dim(),
            ));
        }
    }
    out
}

fn skill(view: &ToolView) -> Vec<Line<'static>> {
    let name = view.input["skill"].as_str().unwrap_or("?");
    let whose = match view.origin.as_deref() {
        Some("project") => format!("the project's skill {name} (.claude/skills/{name})"),
        Some("user") => format!("your own skill {name} (user scope)"),
        _ => format!("the skill {name}"),
    };
    vec![
        tool_header(view, Color::Green),
        Line::styled(format!("  ⎿ loaded {whose}"), dim()),
    ]
}

/// The pinned task list: a heading with the count done, then the tasks (a window around the
/// one in progress when there are more than fit).
pub fn pinned_tasks(todos: &[Value]) -> Vec<Line<'static>> {
    if todos.is_empty() {
        return Vec::new();
    }
    let done = todos.iter().filter(|t| t["status"] == "completed").count();
    let mut out = vec![Line::from(vec![
        Span::styled("☰ ", Style::new().fg(Color::Blue)),
        Span::styled("Tasks", Style::new().add_modifier(Modifier::BOLD)),
        Span::styled(format!(" ({done}/{} done)", todos.len()), dim()),
    ])];
    let focus = todos
        .iter()
        .position(|t| t["status"] != "completed")
        .unwrap_or(0);
    let start = focus
        .saturating_sub(1)
        .min(todos.len().saturating_sub(PINNED_TASKS));
    if start > 0 {
        out.push(Line::styled(format!("  … {start} done above"), dim()));
    }
    for t in todos.iter().skip(start).take(PINNED_TASKS) {
        out.push(task_line(t));
    }
    let below = todos.len().saturating_sub(start + PINNED_TASKS);
    if below > 0 {
        out.push(Line::styled(format!("  … {below} more"), dim()));
    }
    out
}

/// One task: `[x]` done (dim), `[>]` in progress (bold, in its active form), `[ ]` pending.
fn task_line(t: &Value) -> Line<'static> {
    let content = t["content"].as_str().unwrap_or("");
    let (mark, text, style) = match t["status"].as_str() {
        Some("completed") => ("[x]", content, dim()),
        Some("in_progress") => (
            "[>]",
            t["activeForm"]
                .as_str()
                .filter(|a| !a.trim().is_empty())
                .unwrap_or(content),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        _ => ("[ ]", content, Style::new()),
    };
    let text: String = text.chars().take(120).collect();
    Line::styled(format!("  {mark} {text}"), style)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(code: Option<i32>, stdout: &str, stderr: &str) -> HookRunEnd {
        HookRunEnd {
            stdout: stdout.into(),
            stderr: stderr.into(),
            exit_code: code,
            outcome: if code == Some(0) { "success" } else { "error" },
        }
    }

    #[test]
    fn hook_runs_are_read_as_the_engine_reads_them() {
        let pre = HookEvent::PreToolUse;
        assert_eq!(hook_verdict(pre, &end(Some(0), "", "")), None);
        let blocked = hook_verdict(pre, &end(Some(2), "", "no rm here\nmore")).unwrap();
        assert_eq!(
            (blocked.what.as_str(), blocked.detail.as_str()),
            ("blocked the call", "no rm here")
        );
        let json = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"prod is off limits"}}"#;
        assert_eq!(
            hook_verdict(pre, &end(Some(0), json, "")).unwrap().detail,
            "prod is off limits"
        );
        let timed = end(
            None,
            "",
            "did not finish within its 5 s deadline and was stopped",
        );
        assert_eq!(hook_verdict(pre, &timed).unwrap().what, "timed out");
        let ctx = hook_verdict(HookEvent::SessionStart, &end(Some(0), "branch main", "")).unwrap();
        assert_eq!(ctx.what, "added context (11 chars)");
        let stop = hook_verdict(HookEvent::Stop, &end(Some(2), "", "tests fail")).unwrap();
        assert_eq!(stop.what, "kept the model working");
        let bad = hook_verdict(pre, &end(Some(0), "{nope", "")).unwrap();
        assert!(bad.failed && bad.what.contains("cannot use"), "{bad:?}");
        let crashed = hook_verdict(pre, &end(Some(1), "", "boom")).unwrap();
        assert_eq!(
            (crashed.what.as_str(), crashed.failed),
            ("failed (exit code 1)", true)
        );
    }

    #[test]
    fn domains_are_taken_from_urls() {
        assert_eq!(domain("https://example.com/a?b"), "example.com");
        assert_eq!(domain("http://user@127.0.0.1:8080/x"), "127.0.0.1");
        assert_eq!(domain("http://[::1]:80/"), "[::1]");
        assert_eq!(
            domain("http://evil.example\\@good.example/"),
            "evil.example"
        );
        assert_eq!(domain("not a url"), "not a url");
    }
}
