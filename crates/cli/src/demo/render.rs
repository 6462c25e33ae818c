//! The demo's readable transcript: the session's frames rendered for a person, not a parser.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use keel_protocol::{ContentBlock, Frame, ResultFrame, SystemFrame};
use serde_json::Value;
use tokio::sync::mpsc;

/// Lines of a tool result shown before "… N more lines".
const RESULT_LINES: usize = 6;
/// Characters of one shown line (or one tool input summary) before it is cut.
const LINE_CHARS: usize = 100;

/// Styling, on only when stdout is a terminal and `NO_COLOR` is unset.
#[derive(Clone, Copy)]
struct Style {
    on: bool,
}

impl Style {
    fn detect() -> Self {
        Style {
            on: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }
    fn wrap(self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
    fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }
    fn bold(self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn model(self, s: &str) -> String {
        self.wrap("1;36", s)
    }
    fn tool(self, s: &str) -> String {
        self.wrap("1;33", s)
    }
    fn bad(self, s: &str) -> String {
        self.wrap("1;31", s)
    }
    fn good(self, s: &str) -> String {
        self.wrap("1;32", s)
    }
}

/// Write to stdout; false once stdout is gone (a closed pipe must not panic the demo).
fn out(s: &str) -> bool {
    let mut lock = std::io::stdout().lock();
    lock.write_all(s.as_bytes())
        .and_then(|_| lock.write_all(b"\n"))
        .and_then(|_| lock.flush())
        .is_ok()
}

/// The header: what this is, where it runs, and the prompt.
pub fn banner(project: &Path, prompt: &str) {
    let st = Style::detect();
    out(&format!(
        "{}\n{}\n\n  project  {}\n  prompt   {}\n",
        st.bold("keel demo: one complete session, offline"),
        st.model(
            "[scripted model — no API key used] The model's replies come from a script \
             (keel-mock, in-process); keel is real and runs every tool call below."
        ),
        project.display(),
        prompt
    ));
}

/// Where the scratch project is (or was), printed last.
pub fn scratch_note(project: &Path, removed: bool, from_dir: bool) {
    let st = Style::detect();
    let line = if from_dir {
        format!(
            "Project: {} (kept: it is the --dir you gave)",
            project.display()
        )
    } else if removed {
        format!(
            "Scratch project: {} (removed now; `keel demo --keep` keeps it so you can look)",
            project.display()
        )
    } else {
        format!(
            "Scratch project: {} (kept; look around, then delete it)",
            project.display()
        )
    };
    out(&st.dim(&line));
}

/// Render frames until the channel closes. Returns false if stdout went away.
pub async fn render(mut rx: mpsc::Receiver<keel_core::Emitted>, project: PathBuf) -> bool {
    let st = Style::detect();
    let mut ok = true;
    while let Some(event) = rx.recv().await {
        if !ok {
            continue; // keep draining so the session never blocks on a dead printer
        }
        let frame = keel_core::wire::frame(&event);
        for line in frame_lines(&frame, &project, st) {
            ok &= out(&line);
        }
    }
    ok
}

fn frame_lines(frame: &Frame, project: &Path, st: Style) -> Vec<String> {
    match frame {
        Frame::System(SystemFrame::Init(i)) => vec![st.dim(&format!(
            "session {} · model {} (scripted) · permission mode {} · tools {}",
            short_id(&i.session_id),
            i.model,
            i.permission_mode,
            i.tools.join(", ")
        ))],
        Frame::System(SystemFrame::ApiRetry(r)) => vec![st.dim(&format!(
            "  api error ({}), retry {}/{} in {} ms",
            r.error, r.attempt, r.max_retries, r.retry_delay_ms
        ))],
        Frame::System(SystemFrame::PermissionDenied(d)) => {
            vec![st.bad(&format!("  denied {}: {}", d.tool_name, d.message))]
        }
        Frame::System(SystemFrame::Warning(w)) => vec![st.bad(&format!("warning: {}", w.message))],
        Frame::Assistant(a) => a
            .message
            .content
            .iter()
            .flat_map(|b| block_lines(b, project, st))
            .collect(),
        Frame::User(u) => u
            .message
            .content
            .blocks()
            .iter()
            .flat_map(|b| block_lines(b, project, st))
            .collect(),
        Frame::Result(r) => result_lines(r, st),
        _ => Vec::new(),
    }
}

fn block_lines(block: &ContentBlock, project: &Path, st: Style) -> Vec<String> {
    match block {
        ContentBlock::Text(t) => {
            let mut lines = t.text.lines();
            let first = lines.next().unwrap_or("");
            let mut v = vec![format!("\n{} {first}", st.model("model (scripted) ›"))];
            v.extend(lines.map(|l| format!("  {l}")));
            v
        }
        ContentBlock::Thinking(t) => {
            vec![format!(
                "\n{}",
                st.dim(&format!("model (scripted) thinking › {}", t.thinking))
            )]
        }
        ContentBlock::ToolUse(u) => vec![format!(
            "  {} {}",
            st.tool(&format!("● {}", u.name)),
            tool_summary(&u.name, &u.input, project)
        )],
        ContentBlock::ToolResult(r) => {
            // Paths inside the project read better relative; the project path is in the banner.
            let prefix = format!("{}/", project.display());
            let text = r.content.as_text().replace(&prefix, "");
            let failed = r.is_error == Some(true);
            let all: Vec<&str> = text.lines().collect();
            let mut v = Vec::new();
            for (i, l) in all.iter().take(RESULT_LINES).enumerate() {
                let lead = if i == 0 { "└ " } else { "  " };
                let l = cut(l, LINE_CHARS);
                v.push(if failed {
                    format!("    {}", st.bad(&format!("{lead}{l}")))
                } else {
                    format!("    {}", st.dim(&format!("{lead}{l}")))
                });
            }
            if all.is_empty() {
                v.push(format!("    {}", st.dim("└ (no output)")));
            }
            if all.len() > RESULT_LINES {
                let more = all.len() - RESULT_LINES;
                let s = if more == 1 { "" } else { "s" };
                v.push(format!(
                    "    {}",
                    st.dim(&format!("  … {more} more line{s}"))
                ));
            }
            v
        }
        _ => Vec::new(),
    }
}

/// A one-line summary of a tool call's input.
fn tool_summary(name: &str, input: &Value, project: &Path) -> String {
    let s = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or("");
    let path = |k: &str| {
        let p = s(k);
        Path::new(p)
            .strip_prefix(project)
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| p.to_owned())
    };
    let text = match name {
        "Bash" => format!("$ {}", s("command")),
        "Read" | "Write" => path("file_path"),
        "Edit" => format!(
            "{}: {:?} → {:?}",
            path("file_path"),
            s("old_string"),
            s("new_string")
        ),
        "Glob" | "Grep" => {
            let mut t = s("pattern").to_owned();
            if !s("path").is_empty() {
                t.push_str(&format!(" in {}", path("path")));
            }
            t
        }
        _ => input.to_string(),
    };
    cut(text.lines().next().unwrap_or(""), LINE_CHARS)
}

fn result_lines(r: &ResultFrame, st: Style) -> Vec<String> {
    let secs = r.duration_ms as f64 / 1000.0;
    let turns = if r.num_turns == 1 { "turn" } else { "turns" };
    let cost = format!(
        "cost $0.00 — scripted model (at {} list prices these tokens would cost ${:.4})",
        model_name(r),
        r.total_cost_usd
    );
    let head = if r.is_error {
        let why = r
            .result
            .as_deref()
            .or_else(|| {
                r.errors
                    .as_ref()
                    .and_then(|e| e.first().map(String::as_str))
            })
            .unwrap_or("");
        st.bad(&format!(
            "✗ {} — {}",
            r.subtype,
            why.lines().next().unwrap_or("")
        ))
    } else {
        st.good("✓ done")
    };
    vec![
        String::new(),
        format!("{head} · {} {turns} · {secs:.2} s · {cost}", r.num_turns),
    ]
}

fn model_name(r: &ResultFrame) -> String {
    r.model_usage
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_else(|| "the model's".into())
}

fn short_id(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_are_short_and_relative() {
        let p = Path::new("/tmp/x/project");
        assert_eq!(
            tool_summary("Read", &json!({"file_path": "/tmp/x/project/a.py"}), p),
            "a.py"
        );
        assert_eq!(
            tool_summary("Bash", &json!({"command": "true\nfalse"}), p),
            "$ true"
        );
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
