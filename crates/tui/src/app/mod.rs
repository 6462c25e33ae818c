//! The interactive UI's state: what is committed to scrollback, what the live area shows, and
//! how keys and session events change it. No terminal here: the driver feeds it events and
//! draws what it says, so every state can be built and checked in a test.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use keel_core::approval::{Approval, ApprovalRequest};
use keel_core::permissions::PermissionMode;
use keel_core::TurnEnd;
use keel_protocol::ContentBlock;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::editor::{Editor, History};
use crate::markdown::{self, Markdown};

mod capabilities;
mod commands;
mod events;
mod keys;
mod lines;
mod render;

pub use capabilities::{domain, hook_line, hook_verdict, pinned_tasks, server_block, HookVerdict};
pub use commands::save_rules;
pub use keys::HELP;
pub use lines::{can_background, collapse, summary};
use lines::{first_line, tool_header};
pub use render::{diff_lines, render_result};

/// Prompted retries offered for one user prompt after the automatic ones gave up.
pub const MAX_PROMPTED_RETRIES: u32 = 4;
/// Two Ctrl+C within this long exit.
const DOUBLE_PRESS: Duration = Duration::from_secs(2);

/// What the driver must do for the UI.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// Run a turn with this content.
    Turn(Vec<ContentBlock>),
    /// Run the turn again after a transient API failure (the driver decides between re-sending
    /// the prompt as it was and a continuation message).
    Retry,
    /// Stop the running turn (ESC).
    Interrupt,
    /// Move the running command (or foreground subagent) to the background.
    Background,
    /// Switch the permission mode.
    SetMode(PermissionMode),
    /// Switch the model.
    SetModel(String),
    /// Start a fresh session in the same process (the engine's `/clear`: background tasks
    /// keep running, the old transcript stays resumable).
    Clear,
    /// Show the sessions to resume.
    ResumePicker,
    /// Resume this session.
    Resume(String),
    /// List the permission rules, agents or tasks.
    Show(Listing),
    /// `/rewind`: list the prompts the files can be put back to (`None`), or put them back as
    /// they were when prompt N (from 1, oldest first) came.
    Rewind(Option<usize>),
    /// Leave, with the session saved.
    Exit,
}

/// What `/permissions`, `/agents` and `/tasks` list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// The rules and the mode.
    Permissions,
    /// The agent types.
    Agents,
    /// The background tasks.
    Tasks,
}

/// What the status line shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// The model.
    pub model: String,
    /// The permission mode (wire name).
    pub mode: String,
    /// Dollars spent in this session.
    pub cost_usd: f64,
    /// Tokens in the context at the last request.
    pub context_tokens: u64,
    /// The model's context window, when known.
    pub context_window: Option<u64>,
    /// The session id.
    pub session_id: String,
}

/// A call being made.
#[derive(Clone, Debug)]
pub struct ToolView {
    /// The tool_use id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// When it was asked for.
    pub started: Instant,
    /// What its subagent did last (Task calls).
    pub activity: Option<String>,
    /// Where what it runs comes from, when that matters (a skill's `project` or `user`).
    pub origin: Option<String>,
}

/// A settings hook running now (shown in the live area until it ends, so a slow hook is
/// never a silent wait).
#[derive(Clone, Debug)]
pub struct HookView {
    /// Pairs its start with its end.
    pub id: String,
    /// `Event:matcher` or `Event`.
    pub name: String,
    /// Its command, shortened.
    pub command: String,
    /// When it started.
    pub started: Instant,
}

/// A background task.
#[derive(Clone, Debug)]
pub struct TaskView {
    /// Its id.
    pub id: String,
    /// What it does.
    pub description: String,
    /// Since when.
    pub started: Instant,
}

/// A permission question waiting for the user.
#[derive(Debug)]
pub struct PendingApproval {
    /// What is asked.
    pub req: ApprovalRequest,
    reply: Option<oneshot::Sender<Approval>>,
    /// The rules "don't ask again" would add (empty: the option is not offered).
    pub rules: Vec<String>,
    /// The highlighted option (0 yes, 1 always, 2 no).
    pub selected: usize,
    /// After "no": the message for the model being typed.
    pub reason: Option<String>,
}

impl PendingApproval {
    fn options(&self) -> Vec<usize> {
        if self.rules.is_empty() {
            vec![0, 2]
        } else {
            vec![0, 1, 2]
        }
    }
}

/// The retry countdown of the automatic retries.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryView {
    /// The retry's number.
    pub attempt: u32,
    /// The most retries.
    pub max: u32,
    /// When the next attempt starts.
    pub until: Instant,
    /// HTTP status, when there was one.
    pub status: Option<u16>,
    /// What failed.
    pub label: String,
}

/// A modal question in place of the input box.
#[derive(Debug)]
pub enum Modal {
    /// Retry after a transient API failure?
    Retry {
        /// The error, said honestly.
        error: String,
        /// Which prompted retry this would be (1-based).
        next: u32,
    },
    /// `/rewind`: pick the prompt to put the files back to.
    Rewind {
        /// The prompts' first lines, oldest first.
        items: Vec<String>,
        /// The highlighted one (from 0).
        selected: usize,
    },
    /// Pick a session to resume.
    Picker {
        /// (id, one line describing it).
        items: Vec<(String, String)>,
        /// The highlighted one.
        selected: usize,
    },
}

/// A running turn.
#[derive(Clone, Debug)]
pub struct Running {
    /// When it started.
    pub started: Instant,
    /// Output tokens of the reply streaming now.
    pub tokens: u64,
    /// The last sign of life from the model (a stream event).
    pub last_model: Instant,
    /// Whether keel is waiting on the model right now (no call running).
    pub thinking: bool,
    /// ESC was pressed: the interrupt is on its way.
    pub interrupting: bool,
}

/// The UI.
pub struct App {
    /// Lines to write into the scrollback, in order (the driver drains them).
    out: Vec<Line<'static>>,
    stream: Option<(Markdown, String)>,
    /// Calls of the running turn not answered yet.
    pub tools: Vec<ToolView>,
    /// Background tasks running.
    pub tasks: Vec<TaskView>,
    /// Settings hooks running now.
    pub hooks: Vec<HookView>,
    /// The model's task list as its last TodoWrite left it (pinned above the prompt while a
    /// turn runs).
    pub todos: Vec<Value>,
    /// Where each loaded skill comes from (`project` or `user`), from the session's init.
    pub skill_scopes: std::collections::HashMap<String, String>,
    /// The turn, while one runs.
    pub running: Option<Running>,
    /// The question in place of the input box.
    pub modal: Option<Modal>,
    /// Permission questions, the first shown.
    pub approvals: VecDeque<PendingApproval>,
    /// The automatic retry being waited for.
    pub retry: Option<RetryView>,
    /// Prompted retries used for the current user prompt.
    pub prompted_retries: u32,
    /// The prompt editor.
    pub editor: Editor,
    /// Prompts typed while a turn runs, sent when it ends.
    pub queued: Vec<String>,
    /// The status line.
    pub status: Status,
    /// A short note in the status line (cleared by the next key).
    pub notice: Option<String>,
    /// How long the model may be silent before keel gives up on the stream.
    pub idle_timeout: Duration,
    /// Inside tmux (Ctrl+B is its prefix there, so the hint says to press it twice).
    pub in_tmux: bool,
    cwd: PathBuf,
    ctrl_c_at: Option<Instant>,
    /// Set when the UI should redraw.
    pub dirty: bool,
}

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

impl App {
    /// A fresh UI for a session in `cwd`.
    pub fn new(cwd: PathBuf, history: History) -> Self {
        Self {
            out: Vec::new(),
            stream: None,
            tools: Vec::new(),
            tasks: Vec::new(),
            hooks: Vec::new(),
            todos: Vec::new(),
            skill_scopes: std::collections::HashMap::new(),
            running: None,
            modal: None,
            approvals: VecDeque::new(),
            retry: None,
            prompted_retries: 0,
            editor: Editor::new(history),
            queued: Vec::new(),
            status: Status::default(),
            notice: None,
            idle_timeout: Duration::from_secs(45),
            in_tmux: false,
            cwd,
            ctrl_c_at: None,
            dirty: true,
        }
    }

    /// The lines to commit to the scrollback now, in order.
    pub fn take_committed(&mut self) -> Vec<Line<'static>> {
        std::mem::take(&mut self.out)
    }

    /// Commit lines.
    pub fn commit(&mut self, lines: impl IntoIterator<Item = Line<'static>>) {
        self.out.extend(lines);
        self.dirty = true;
    }

    /// Commit one plain line in a style.
    pub fn say(&mut self, text: impl Into<String>, style: Style) {
        let text = text.into();
        let lines: Vec<Line<'static>> = text
            .lines()
            .map(|l| Line::styled(l.to_owned(), style))
            .collect();
        self.commit(lines);
    }

    /// The held-back table of the reply streaming now, for the live area.
    pub fn stream_held(&self) -> Vec<Line<'static>> {
        self.stream
            .as_ref()
            .map(|(md, _)| md.held())
            .unwrap_or_default()
    }

    /// The line of the reply being streamed now, not complete yet.
    pub fn stream_partial(&self) -> &str {
        self.stream.as_ref().map_or("", |(_, p)| p.as_str())
    }

    // ---- turns -------------------------------------------------------------------------

    /// Start a turn with a prompt the user typed (`shown` is how it is echoed).
    fn start_prompt(&mut self, shown: &str, text: String) -> Vec<Action> {
        self.prompted_retries = 0;
        self.echo(shown);
        self.begin_running();
        vec![Action::Turn(vec![ContentBlock::text(text)])]
    }

    fn echo(&mut self, shown: &str) {
        let mut lines = vec![Line::raw("")];
        for (i, l) in shown.lines().enumerate() {
            let mark = if i == 0 { "> " } else { "  " };
            lines.push(Line::from(vec![
                Span::styled(mark, dim()),
                Span::styled(l.to_owned(), Style::new().add_modifier(Modifier::BOLD)),
            ]));
        }
        self.commit(lines);
    }

    fn begin_running(&mut self) {
        let now = Instant::now();
        self.running = Some(Running {
            started: now,
            tokens: 0,
            last_model: now,
            thinking: true,
            interrupting: false,
        });
        self.dirty = true;
    }

    /// The turn ended. Returns what to do next (send queued prompts).
    pub fn turn_ended(&mut self, end: &TurnEnd) -> Vec<Action> {
        self.finish_stream();
        let interrupted_at = self.running.take().map(|r| r.started);
        self.retry = None;
        self.hooks.clear();
        // A list the model finished is in the scrollback; a plan still open stays pinned for
        // the next turn.
        if self.todos.iter().all(|t| t["status"] == "completed") {
            self.todos.clear();
        }
        self.dirty = true;
        // Calls never answered (should not happen: the engine answers every call).
        for t in std::mem::take(&mut self.tools) {
            self.commit([tool_header(&t, Color::DarkGray)]);
        }
        for a in self.approvals.drain(..) {
            drop(a);
        }
        let code = end.exit_code();
        match end {
            TurnEnd::Completed { .. } => {}
            TurnEnd::Interrupted { .. } => {
                let secs = interrupted_at.map(|s| s.elapsed().as_secs()).unwrap_or(0);
                self.commit([Line::styled(
                    format!("  ⎿ Interrupted after {secs}s · tell keel what to do instead"),
                    dim(),
                )]);
                self.give_back_queued();
                return Vec::new();
            }
            TurnEnd::ApiFailed { .. } if code == 4 => {
                let error = end.result_text();
                self.say(
                    format!("  ⎿ {}", first_line(&error)),
                    Style::new().fg(Color::Red),
                );
                if self.prompted_retries >= MAX_PROMPTED_RETRIES {
                    self.say(
                        format!("  The API has not recovered after {MAX_PROMPTED_RETRIES} more tries. Try again later: your session is saved, and `keel --continue` picks it up."),
                        Style::new().fg(Color::Yellow),
                    );
                } else {
                    self.modal = Some(Modal::Retry {
                        error,
                        next: self.prompted_retries + 1,
                    });
                }
                return Vec::new();
            }
            TurnEnd::ApiFailed { .. } => {
                // Permanent: never offered a retry. The engine's text says what to fix (the
                // key, the model, the request's size).
                self.say(
                    format!("  ⎿ {}", end.result_text()),
                    Style::new().fg(Color::Red),
                );
            }
            other => {
                self.say(
                    format!("  ⎿ {}", first_line(&other.result_text())),
                    Style::new().fg(Color::Yellow),
                );
                self.give_back_queued();
                return Vec::new();
            }
        }
        if matches!(end, TurnEnd::Completed { .. }) {
            self.send_queued()
        } else {
            self.give_back_queued();
            Vec::new()
        }
    }

    /// Prompts queued behind a turn that did not complete go back into the editor to be looked
    /// at again, never sent behind the user's back.
    fn give_back_queued(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.queued).join("\n\n");
        if self.editor.is_empty() {
            self.editor.set_text(&text);
        } else {
            self.editor.insert_str(&format!("\n{text}"));
        }
    }

    fn send_queued(&mut self) -> Vec<Action> {
        if self.queued.is_empty() || self.modal.is_some() {
            return Vec::new();
        }
        let text = std::mem::take(&mut self.queued).join("\n\n");
        let shown = text.clone();
        self.start_prompt(&shown, text)
    }

    /// The interrupt's receipt came back.
    pub fn interrupted(&mut self, processes_killed: usize) {
        if processes_killed > 0 {
            self.say(format!("  ⎿ stopped {processes_killed} process(es)"), dim());
        }
    }
}
