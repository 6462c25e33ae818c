//! The interactive UI's state: what is committed to scrollback, what the live area shows, and
//! how keys and session events change it. No terminal here: the driver feeds it events and
//! draws what it says, so every state can be built and checked in a test.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use keel_core::approval::{Approval, ApprovalRequest, PermissionUpdate};
use keel_core::event::{CallMeta, DenialSource, Emitted, Event, NonExecution, ToolResultEvent};
use keel_core::permissions::PermissionMode;
use keel_core::TurnEnd;
use keel_protocol::ContentBlock;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::editor::{Editor, History};
use crate::markdown::{self, Markdown};

/// Prompted retries offered for one user prompt after the automatic ones gave up.
pub const MAX_PROMPTED_RETRIES: u32 = 4;
/// Lines of a tool's output shown from its head and from its tail.
const HEAD: usize = 3;
const TAIL: usize = 3;
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
    /// Start a fresh session.
    Clear,
    /// Show the sessions to resume.
    ResumePicker,
    /// Resume this session.
    Resume(String),
    /// List the permission rules, agents or tasks.
    Show(Listing),
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

    // ---- session events ----------------------------------------------------------------

    /// A session event arrived.
    pub fn on_event(&mut self, e: &Emitted) {
        self.dirty = true;
        if let Some(parent) = &e.envelope.parent_tool_use_id {
            self.subagent_event(parent, &e.event);
            return;
        }
        match &e.event {
            Event::Init(info) => {
                self.status.model = info.model.clone();
                self.status.mode = info.permission_mode.clone();
            }
            Event::Warning { message, .. } => {
                self.say(format!("⚠ {message}"), Style::new().fg(Color::Yellow));
            }
            Event::StreamEvent { raw, .. } => self.stream_event(raw),
            Event::Assistant { message, .. } => {
                for block in &message.content {
                    self.assistant_block(block);
                }
            }
            Event::ToolResult(r) => self.tool_result(r),
            Event::ApiRetry(n) => {
                self.finish_stream();
                self.retry = Some(RetryView {
                    attempt: n.attempt,
                    max: n.max_retries,
                    until: Instant::now() + n.delay,
                    status: n.status,
                    label: n.label.to_owned(),
                });
            }
            Event::ModelFallback { to, text, .. } => {
                self.status.model = to.clone();
                self.say(format!("⚠ {text}"), Style::new().fg(Color::Yellow));
            }
            Event::Task(t) => match &t.end {
                None if t.tool_use_id.is_none() => self.tasks.push(TaskView {
                    id: t.task_id.clone(),
                    description: t.description.clone(),
                    started: Instant::now(),
                }),
                None => {}
                Some(end) => {
                    let was_background = self.tasks.iter().any(|v| v.id == t.task_id);
                    self.tasks.retain(|v| v.id != t.task_id);
                    if was_background {
                        let colour = match end.status {
                            keel_core::tasks::TaskStatus::Completed => Color::Green,
                            _ => Color::Yellow,
                        };
                        self.commit([Line::from(vec![
                            Span::styled("◇ ", Style::new().fg(colour)),
                            Span::raw(format!("{}: {}", t.task_id, end.summary)),
                        ])]);
                    }
                }
            },
            Event::Status { status } => {
                if status.as_deref() == Some("compacting") {
                    self.say("✻ Compacting the conversation…", dim());
                }
            }
            Event::CompactBoundary(info) => {
                self.say(
                    format!(
                        "✻ Conversation compacted ({} → about {} tokens)",
                        info.pre_tokens, info.post_tokens
                    ),
                    dim(),
                );
            }
            Event::Result(report) => {
                self.status.cost_usd = report.cost.total_usd;
                self.status.model = report.model.clone();
            }
            Event::PermissionDenied { .. }
            | Event::UserContent { .. }
            | Event::CompactedHistory { .. } => {}
        }
    }

    fn subagent_event(&mut self, parent: &str, e: &Event) {
        let activity = match e {
            Event::Assistant { message, .. } => message.content.iter().find_map(|b| match b {
                ContentBlock::ToolUse(t) => {
                    Some(format!("{}({})", t.name, summary(&t.name, &t.input)))
                }
                ContentBlock::Text(t) => t
                    .text
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_owned),
                _ => None,
            }),
            _ => None,
        };
        if let (Some(a), Some(view)) = (activity, self.tools.iter_mut().find(|t| t.id == parent)) {
            view.activity = Some(a);
        }
    }

    fn stream_event(&mut self, raw: &Value) {
        let now = Instant::now();
        if let Some(r) = self.running.as_mut() {
            r.last_model = now;
        }
        match raw["type"].as_str().unwrap_or("") {
            "message_start" => {
                // A new attempt: whatever an earlier attempt left half-said is dropped.
                self.stream = None;
                self.retry = None;
                let u = &raw["message"]["usage"];
                let tokens = [
                    "input_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                ]
                .iter()
                .filter_map(|k| u[*k].as_u64())
                .sum::<u64>();
                if tokens > 0 {
                    self.status.context_tokens = tokens;
                }
                if let Some(r) = self.running.as_mut() {
                    r.tokens = 0;
                    r.thinking = true;
                }
            }
            "content_block_start" if raw["content_block"]["type"] == "text" => {
                self.stream = Some((Markdown::default(), String::new()));
            }
            "content_block_delta" => {
                if let Some(text) = raw["delta"]["text"].as_str() {
                    if raw["delta"]["type"] == "text_delta" {
                        self.push_text(text);
                    }
                }
            }
            "message_delta" => {
                if let (Some(n), Some(r)) = (
                    raw["usage"]["output_tokens"].as_u64(),
                    self.running.as_mut(),
                ) {
                    r.tokens = n;
                }
            }
            _ => {}
        }
    }

    fn push_text(&mut self, text: &str) {
        let (md, partial) = self
            .stream
            .get_or_insert_with(|| (Markdown::default(), String::new()));
        // Only the new text can hold a newline: a long line streamed in many pieces is not
        // searched again at every piece. Every line the piece completes is rendered at once.
        let mut lines = Vec::new();
        let rest = match text.rfind('\n') {
            Some(pos) => {
                partial.push_str(&text[..=pos]);
                lines = md.lines(partial);
                partial.clear();
                &text[pos + 1..]
            }
            None => text,
        };
        partial.push_str(rest);
        if let Some(r) = self.running.as_mut() {
            r.thinking = false;
        }
        self.commit(lines);
    }

    fn finish_stream(&mut self) {
        if let Some((mut md, partial)) = self.stream.take() {
            let mut lines = Vec::new();
            if !partial.is_empty() {
                lines.extend(md.line(&partial));
            }
            lines.extend(md.finish());
            self.commit(lines);
        }
    }

    fn assistant_block(&mut self, block: &ContentBlock) {
        match block {
            ContentBlock::Text(t) => {
                if self.stream.is_some() {
                    self.finish_stream();
                } else {
                    // A reply that did not stream (the non-streaming fallback).
                    self.commit(markdown::render_all(&t.text));
                }
            }
            ContentBlock::ToolUse(t) => {
                self.finish_stream();
                self.tools.push(ToolView {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    input: t.input.clone(),
                    started: Instant::now(),
                    activity: None,
                });
                if let Some(r) = self.running.as_mut() {
                    r.thinking = false;
                }
            }
            _ => {}
        }
    }

    fn tool_result(&mut self, r: &ToolResultEvent) {
        let id = r.tool_use_id();
        let Some(pos) = self.tools.iter().position(|t| t.id == id) else {
            return;
        };
        let view = self.tools.remove(pos);
        if r.detail
            .as_ref()
            .is_some_and(|d| d["backgroundedByUser"] == true)
        {
            self.notice = None;
        }
        let lines = render_result(&view, r);
        self.commit(lines);
        if self.tools.is_empty() {
            if let Some(run) = self.running.as_mut() {
                run.thinking = true;
                run.last_model = Instant::now();
            }
        }
    }

    // ---- approvals ---------------------------------------------------------------------

    /// A call needs the user's approval.
    pub fn ask(&mut self, req: ApprovalRequest, reply: oneshot::Sender<Approval>) {
        let rules = req
            .suggestions
            .iter()
            .filter(|s| s["type"] == "addRules" && s["behavior"] == "allow")
            .flat_map(|s| s["rules"].as_array().cloned().unwrap_or_default())
            .filter_map(|r| {
                let tool = r["toolName"].as_str()?;
                Some(match r["ruleContent"].as_str() {
                    Some(c) if !c.is_empty() => format!("{tool}({c})"),
                    _ => tool.to_owned(),
                })
            })
            .collect();
        self.approvals.push_back(PendingApproval {
            req,
            reply: Some(reply),
            rules,
            selected: 0,
            reason: None,
        });
        self.dirty = true;
    }

    /// Forget questions whose call went away (the turn was interrupted while asking).
    pub fn prune_approvals(&mut self) {
        let before = self.approvals.len();
        self.approvals
            .retain(|a| a.reply.as_ref().is_some_and(|r| !r.is_closed()));
        if self.approvals.len() != before {
            self.dirty = true;
        }
    }

    fn answer(&mut self, choice: usize) {
        let Some(mut a) = self.approvals.pop_front() else {
            return;
        };
        let Some(reply) = a.reply.take() else { return };
        let approval = match choice {
            0 => Approval::Allow {
                updated_input: None,
                updates: Vec::new(),
            },
            1 => {
                let updates: Vec<PermissionUpdate> = a
                    .req
                    .suggestions
                    .iter()
                    .filter(|s| s["type"] == "addRules")
                    .filter_map(|s| PermissionUpdate::from_wire(s).ok())
                    .collect();
                match save_rules(&self.cwd, &a.rules) {
                    Ok(path) => self.say(
                        format!("  ✓ Saved to {}: {}", path.display(), a.rules.join(", ")),
                        dim(),
                    ),
                    Err(e) => self.say(
                        format!("  ⚠ Allowed for this session only: {e}"),
                        Style::new().fg(Color::Yellow),
                    ),
                }
                Approval::Allow {
                    updated_input: None,
                    updates,
                }
            }
            _ => {
                let message = match a.reason.take().filter(|r| !r.trim().is_empty()) {
                    Some(r) => format!("The user denied this call and said: {r}"),
                    None => "The user denied this call. Do not retry it; ask what to do instead if you need it.".to_owned(),
                };
                Approval::Deny {
                    message,
                    interrupt: false,
                }
            }
        };
        let _ = reply.send(approval);
        self.dirty = true;
    }

    fn deny_and_stop(&mut self) {
        if let Some(mut a) = self.approvals.pop_front() {
            if let Some(reply) = a.reply.take() {
                let _ = reply.send(Approval::Deny {
                    message: "The user stopped the turn at this call.".into(),
                    interrupt: true,
                });
            }
        }
        if let Some(r) = self.running.as_mut() {
            r.interrupting = true;
        }
        self.dirty = true;
    }

    // ---- keys --------------------------------------------------------------------------

    /// Text was pasted.
    pub fn on_paste(&mut self, text: &str) {
        self.dirty = true;
        if let Some(r) = self.approvals.front_mut().and_then(|a| a.reason.as_mut()) {
            r.push_str(&text.replace(['\r', '\n'], " "));
            return;
        }
        // Anywhere else the paste goes into the prompt (kept there under a question).
        self.editor.paste(text);
    }

    /// A key was pressed.
    pub fn on_key(&mut self, k: KeyEvent) -> Vec<Action> {
        if k.kind == KeyEventKind::Release {
            return Vec::new();
        }
        self.dirty = true;
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let was_ctrl_c = self.ctrl_c_at.take();
        self.notice = None;
        if ctrl && k.code == KeyCode::Char('c') {
            if !self.approvals.is_empty() {
                self.deny_and_stop();
                return vec![Action::Interrupt];
            }
            if self.running.is_some() {
                return self.interrupt();
            }
            if self.modal.is_some() {
                self.modal = None;
                return Vec::new();
            }
            if !self.editor.is_empty() {
                self.editor.clear();
                return Vec::new();
            }
            if was_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                return vec![Action::Exit];
            }
            self.ctrl_c_at = Some(Instant::now());
            self.notice = Some("Press Ctrl+C again to exit".into());
            return Vec::new();
        }
        if !self.approvals.is_empty() {
            return self.approval_key(k);
        }
        if let Some(m) = self.modal.take() {
            return self.modal_key(m, k);
        }
        if ctrl && k.code == KeyCode::Char('d') {
            if self.editor.is_empty() && self.running.is_none() {
                return vec![Action::Exit];
            }
            self.editor.delete();
            return Vec::new();
        }
        if ctrl && k.code == KeyCode::Char('b') {
            if self.running.is_some() && self.tools.iter().any(|t| can_background(&t.name)) {
                self.notice = Some("Moving to the background…".into());
                return vec![Action::Background];
            }
            self.notice = Some("Nothing to move to the background".into());
            return Vec::new();
        }
        match k.code {
            KeyCode::Esc if self.running.is_some() => return self.interrupt(),
            KeyCode::BackTab => return self.cycle_mode(),
            KeyCode::Enter
                if k.modifiers.contains(KeyModifiers::SHIFT)
                    || k.modifiers.contains(KeyModifiers::ALT) =>
            {
                self.editor.newline()
            }
            KeyCode::Char('j') if ctrl => self.editor.newline(),
            KeyCode::Enter => {
                let (row, col) = self.editor.cursor();
                let line = &self.editor.lines()[row];
                if col > 0 && col == line.chars().count() && line.ends_with('\\') {
                    self.editor.backspace();
                    self.editor.newline();
                } else {
                    return self.submit();
                }
            }
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Char('u') if ctrl => self.editor.kill_to_start(),
            KeyCode::Char('w') if ctrl => self.editor.delete_word(),
            KeyCode::Char(c) if !ctrl => self.editor.insert(c),
            KeyCode::Tab => self.editor.insert_str("  "),
            _ => {}
        }
        Vec::new()
    }

    fn interrupt(&mut self) -> Vec<Action> {
        match self.running.as_mut() {
            Some(r) if !r.interrupting => {
                r.interrupting = true;
                vec![Action::Interrupt]
            }
            _ => Vec::new(),
        }
    }

    fn cycle_mode(&mut self) -> Vec<Action> {
        // Shift+Tab never widens past what the session started with: bypassPermissions is in
        // the cycle only when the session was started in it.
        let mut cycle = vec![
            PermissionMode::Default,
            PermissionMode::AcceptEdits,
            PermissionMode::Plan,
        ];
        let current = PermissionMode::parse(&self.status.mode).unwrap_or(PermissionMode::Default);
        if !cycle.contains(&current) {
            cycle.push(current);
        }
        let i = cycle.iter().position(|m| *m == current).unwrap_or(0);
        let next = cycle[(i + 1) % cycle.len()];
        self.status.mode = next.as_str().to_owned();
        vec![Action::SetMode(next)]
    }

    fn approval_key(&mut self, k: KeyEvent) -> Vec<Action> {
        let Some(a) = self.approvals.front_mut() else {
            return Vec::new();
        };
        if let Some(reason) = a.reason.as_mut() {
            match k.code {
                KeyCode::Enter => self.answer(2),
                KeyCode::Esc => a.reason = None,
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(c) => reason.push(c),
                _ => {}
            }
            return Vec::new();
        }
        let options = a.options();
        match k.code {
            KeyCode::Esc => {
                self.deny_and_stop();
                return vec![Action::Interrupt];
            }
            KeyCode::Up => {
                let i = options.iter().position(|o| *o == a.selected).unwrap_or(0);
                a.selected = options[i.saturating_sub(1)];
            }
            KeyCode::Down | KeyCode::Tab => {
                let i = options.iter().position(|o| *o == a.selected).unwrap_or(0);
                a.selected = options[(i + 1).min(options.len() - 1)];
            }
            KeyCode::Enter => {
                if a.selected == 2 {
                    a.reason = Some(String::new());
                } else {
                    let s = a.selected;
                    self.answer(s);
                }
            }
            KeyCode::Char('1') | KeyCode::Char('y') => self.answer(0),
            KeyCode::Char('2') | KeyCode::Char('a') if options.contains(&1) => self.answer(1),
            KeyCode::Char('3') | KeyCode::Char('n') => a.reason = Some(String::new()),
            KeyCode::Char('2') if !options.contains(&1) => a.reason = Some(String::new()),
            _ => {}
        }
        Vec::new()
    }

    fn modal_key(&mut self, m: Modal, k: KeyEvent) -> Vec<Action> {
        match m {
            Modal::Retry { error, next } => match k.code {
                KeyCode::Enter | KeyCode::Char('y') | KeyCode::Char('1') => {
                    self.prompted_retries = next;
                    self.say(
                        format!("  ↻ Retrying ({next}/{MAX_PROMPTED_RETRIES})…"),
                        dim(),
                    );
                    self.begin_running();
                    vec![Action::Retry]
                }
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('2') => {
                    self.say("  Not retried. Your session is kept as it was.", dim());
                    self.give_back_queued();
                    Vec::new()
                }
                _ => {
                    self.modal = Some(Modal::Retry { error, next });
                    Vec::new()
                }
            },
            Modal::Picker {
                items,
                mut selected,
            } => match k.code {
                KeyCode::Esc => Vec::new(),
                KeyCode::Enter => match items.get(selected) {
                    Some((id, _)) => vec![Action::Resume(id.clone())],
                    None => Vec::new(),
                },
                KeyCode::Up => {
                    selected = selected.saturating_sub(1);
                    self.modal = Some(Modal::Picker { items, selected });
                    Vec::new()
                }
                KeyCode::Down => {
                    selected = (selected + 1).min(items.len().saturating_sub(1));
                    self.modal = Some(Modal::Picker { items, selected });
                    Vec::new()
                }
                _ => {
                    self.modal = Some(Modal::Picker { items, selected });
                    Vec::new()
                }
            },
        }
    }

    fn submit(&mut self) -> Vec<Action> {
        let shown = self.editor.lines().join("\n");
        if shown.trim().is_empty() {
            return Vec::new();
        }
        let text = self.editor.take();
        if let Some(cmd) = text.strip_prefix('/') {
            if !cmd.starts_with('/') {
                return self.slash(cmd.trim(), &shown);
            }
        }
        if self.running.is_some() {
            self.queued.push(text);
            return Vec::new();
        }
        if self.modal.is_some() {
            self.queued.push(text);
            return Vec::new();
        }
        self.start_prompt(&shown, text)
    }

    fn slash(&mut self, cmd: &str, shown: &str) -> Vec<Action> {
        let (name, args) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
        let args = args.trim();
        let busy = self.running.is_some();
        match name {
            "help" | "?" => {
                self.say(HELP, Style::new());
                Vec::new()
            }
            "exit" | "quit" => vec![Action::Exit],
            "clear" | "new" if !busy => {
                self.say("✻ New conversation", dim());
                vec![Action::Clear]
            }
            "model" if args.is_empty() => {
                self.say(
                    format!("Model: {}. Switch with /model NAME.", self.status.model),
                    Style::new(),
                );
                Vec::new()
            }
            "model" => {
                self.status.model = args.to_owned();
                self.say(format!("Model set to {args}"), dim());
                vec![Action::SetModel(args.to_owned())]
            }
            "cost" => {
                self.say(
                    format!(
                        "This session has cost ${:.4}; the context holds about {} tokens.",
                        self.status.cost_usd, self.status.context_tokens
                    ),
                    Style::new(),
                );
                Vec::new()
            }
            "permissions" => vec![Action::Show(Listing::Permissions)],
            "agents" => vec![Action::Show(Listing::Agents)],
            "tasks" => vec![Action::Show(Listing::Tasks)],
            "resume" if !busy && args.is_empty() => vec![Action::ResumePicker],
            "resume" if !busy => vec![Action::Resume(args.to_owned())],
            "compact" if !busy => self.start_prompt(shown, format!("/{cmd}")),
            "clear" | "new" | "resume" | "compact" => {
                self.say(
                    format!("/{name} waits until the turn ends (ESC stops it)."),
                    dim(),
                );
                Vec::new()
            }
            _ => match custom_command(&self.cwd, name) {
                Some(body) => {
                    let prompt = if body.contains("$ARGUMENTS") {
                        body.replace("$ARGUMENTS", args)
                    } else if args.is_empty() {
                        body
                    } else {
                        format!("{body}\n\n{args}")
                    };
                    if busy {
                        self.queued.push(prompt);
                        return Vec::new();
                    }
                    self.start_prompt(shown, prompt)
                }
                None => {
                    self.say(
                        format!("Unknown command /{name}. /help lists the commands."),
                        Style::new().fg(Color::Yellow),
                    );
                    Vec::new()
                }
            },
        }
    }

    /// Show the session picker.
    pub fn pick(&mut self, items: Vec<(String, String)>) {
        if items.is_empty() {
            self.say("No earlier sessions in this directory.", dim());
            return;
        }
        self.modal = Some(Modal::Picker { items, selected: 0 });
        self.dirty = true;
    }

    /// Whether the UI wants to be redrawn periodically (a spinner or a countdown is shown).
    pub fn animating(&self) -> bool {
        self.running.is_some() || !self.tasks.is_empty()
    }
}

/// The help text of `/help`.
pub const HELP: &str = "Keys
  Enter send · Shift+Enter, Alt+Enter or Ctrl+J new line · \\ then Enter new line
  Up/Down history · Esc stop the running turn · Ctrl+B move the running command to the background
  Shift+Tab cycle permission modes · Ctrl+C stop, or twice to exit · Ctrl+D exit on an empty prompt
Commands
  /help  /model [NAME]  /resume [ID]  /clear  /cost  /compact  /permissions  /agents  /tasks  /exit
  and your own from .claude/commands/NAME.md ($ARGUMENTS is replaced by what follows the name)";

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Tools whose running call Ctrl+B can move to the background.
pub fn can_background(name: &str) -> bool {
    matches!(name, "Bash" | "Task" | "Agent")
}

/// A command from `.claude/commands/NAME.md` (the project's, then the user's).
fn custom_command(cwd: &std::path::Path, name: &str) -> Option<String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == ':')
    {
        return None;
    }
    let file = format!("{}.md", name.replace(':', "/"));
    let mut dirs = vec![cwd.join(".claude/commands")];
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".claude/commands"));
    }
    dirs.into_iter()
        .find_map(|d| std::fs::read_to_string(d.join(&file)).ok())
        .map(|s| strip_front_matter(&s).trim().to_owned())
}

fn strip_front_matter(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix("---\n") {
        if let Some(end) = rest.find("\n---") {
            let after = &rest[end + 4..];
            return after.strip_prefix('\n').unwrap_or(after);
        }
    }
    s
}

/// Add allow rules to `.claude/settings.local.json` in `cwd`, keeping everything else in it.
/// A file that is not a JSON object is left alone (an error says why).
pub fn save_rules(cwd: &std::path::Path, rules: &[String]) -> Result<PathBuf, String> {
    let path = cwd.join(".claude").join("settings.local.json");
    let mut root: Value = match std::fs::read_to_string(&path) {
        Ok(s) if s.trim().is_empty() => serde_json::json!({}),
        Ok(s) => serde_json::from_str(&s).map_err(|e| {
            format!(
                "{} is not valid JSON ({e}); it was left as it is",
                path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let obj = root.as_object_mut().ok_or_else(|| {
        format!(
            "{} is not a JSON object; it was left as it is",
            path.display()
        )
    })?;
    let perms = obj
        .entry("permissions")
        .or_insert_with(|| serde_json::json!({}));
    let perms = perms.as_object_mut().ok_or_else(|| {
        format!(
            "\"permissions\" in {} is not an object; it was left as it is",
            path.display()
        )
    })?;
    let allow = perms
        .entry("allow")
        .or_insert_with(|| serde_json::json!([]));
    let allow = allow.as_array_mut().ok_or_else(|| {
        format!(
            "\"permissions.allow\" in {} is not a list; it was left as it is",
            path.display()
        )
    })?;
    for r in rules {
        if !allow.iter().any(|v| v.as_str() == Some(r)) {
            allow.push(Value::String(r.clone()));
        }
    }
    let dir = path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let body = serde_json::to_string_pretty(&root).map_err(|e| e.to_string())? + "\n";
    let tmp = dir.join(format!(".settings.local.json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, body)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", path.display())
        })?;
    Ok(path)
}

/// A short form of a call's input for one line.
pub fn summary(name: &str, input: &Value) -> String {
    let pick = |k: &str| input[k].as_str().map(str::to_owned);
    let s = match name {
        "Bash" => pick("command"),
        "Read" | "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => pick("file_path"),
        "Glob" | "Grep" => pick("pattern"),
        "Task" | "Agent" => pick("description"),
        "WebFetch" => pick("url"),
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

fn tool_header(t: &ToolView, colour: Color) -> Line<'static> {
    Line::from(vec![
        Span::styled("● ", Style::new().fg(colour)),
        Span::styled(t.name.clone(), Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!("({})", summary(&t.name, &t.input))),
    ])
}

fn result_text(block: &ContentBlock) -> (String, bool) {
    match block {
        ContentBlock::ToolResult(r) => (r.content.as_text(), r.is_error.unwrap_or(false)),
        _ => (String::new(), false),
    }
}

/// Head and tail of an output, the middle collapsed.
pub fn collapse(text: &str, style: Style) -> Vec<Line<'static>> {
    collapse_with(text, style, "  ⎿ ")
}

fn collapse_with(text: &str, style: Style, first_mark: &'static str) -> Vec<Line<'static>> {
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
            out = vec![tool_header(view, Color::Red)];
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
            let partial = partial_output(r, &text);
            if partial.trim().is_empty() {
                out.push(Line::styled("    (no output)", dim()));
            } else {
                out.extend(collapse_with(&partial, Style::new(), "    "));
            }
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
        _ if is_error => {
            out = vec![tool_header(view, Color::Red)];
            out.extend(collapse(&text, red));
        }
        _ => {
            out = vec![tool_header(view, Color::Green)];
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
                _ if text.trim().is_empty() => out.push(Line::styled("  ⎿ (no output)", dim())),
                _ => out.extend(collapse(&text, Style::new())),
            }
        }
    }
    out
}

/// What a stopped command printed: the structured detail's stdout/stderr when there is one.
fn partial_output(r: &ToolResultEvent, text: &str) -> String {
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
