//! How keys, pastes and slash commands change the UI's state.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use keel_core::permissions::PermissionMode;
use ratatui::style::{Color, Style};

use super::commands::{command_origin, custom_command};
use super::{can_background, dim, Action, App, Listing, Modal, DOUBLE_PRESS, MAX_PROMPTED_RETRIES};

impl App {
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
                // Twice in a row leaves even while a turn runs (it is stopped first, honestly):
                // a turn that ends between the two presses must not swallow the second.
                if was_ctrl_c.is_some_and(|t| t.elapsed() < DOUBLE_PRESS) {
                    return vec![Action::Exit];
                }
                self.ctrl_c_at = Some(Instant::now());
                self.notice = Some("Stopping the turn; press Ctrl+C again to exit".into());
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

    pub(super) fn interrupt(&mut self) -> Vec<Action> {
        match self.running.as_mut() {
            Some(r) if !r.interrupting => {
                r.interrupting = true;
                vec![Action::Interrupt]
            }
            _ => Vec::new(),
        }
    }

    pub(super) fn cycle_mode(&mut self) -> Vec<Action> {
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

    pub(super) fn approval_key(&mut self, k: KeyEvent) -> Vec<Action> {
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

    pub(super) fn modal_key(&mut self, m: Modal, k: KeyEvent) -> Vec<Action> {
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
            Modal::Rewind {
                items,
                mut selected,
            } => match k.code {
                KeyCode::Esc => {
                    self.say("  Not rewound. The files are as they were.", dim());
                    Vec::new()
                }
                KeyCode::Enter => vec![Action::Rewind(Some(selected + 1))],
                KeyCode::Up | KeyCode::Down => {
                    selected = match k.code {
                        KeyCode::Up => selected.saturating_sub(1),
                        _ => (selected + 1).min(items.len().saturating_sub(1)),
                    };
                    self.modal = Some(Modal::Rewind { items, selected });
                    Vec::new()
                }
                _ => {
                    self.modal = Some(Modal::Rewind { items, selected });
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

    pub(super) fn submit(&mut self) -> Vec<Action> {
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

    pub(super) fn slash(&mut self, cmd: &str, shown: &str) -> Vec<Action> {
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
                self.todos.clear();
                // The engine runs it as a turn (`/clear`): it ends with a result.
                self.begin_running();
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
            "rewind" if !busy && args.is_empty() => vec![Action::Rewind(None)],
            "rewind" if !busy => match args.parse::<usize>() {
                Ok(n) if n >= 1 => vec![Action::Rewind(Some(n))],
                _ => {
                    self.say(
                        "/rewind N puts the files back as they were at prompt N; /rewind alone lets you pick the prompt.",
                        Style::new().fg(Color::Yellow),
                    );
                    Vec::new()
                }
            },
            "clear" | "new" | "resume" | "compact" | "rewind" => {
                self.say(
                    format!("/{name} waits until the turn ends (ESC stops it)."),
                    dim(),
                );
                Vec::new()
            }
            _ => match custom_command(&self.cwd, name) {
                Some(c) => {
                    // Sent as typed: the engine expands it (arguments, allowed-tools, model).
                    let prompt = format!("/{cmd}");
                    if busy {
                        self.queued.push(prompt);
                        return Vec::new();
                    }
                    let origin = command_origin(&self.cwd, &c);
                    let actions = self.start_prompt(shown, prompt);
                    self.say(format!("  ⎿ {origin}"), dim());
                    actions
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

    /// Show the `/rewind` picker over these prompts (oldest first), the latest highlighted.
    pub fn pick_rewind(&mut self, items: Vec<String>) {
        if items.is_empty() {
            self.say("No prompts yet to rewind to.", dim());
            return;
        }
        let selected = items.len() - 1;
        self.modal = Some(Modal::Rewind { items, selected });
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
  /help  /model [NAME]  /resume [ID]  /clear  /cost  /compact  /rewind [N]  /permissions  /agents
  /tasks  /exit
  and your own from .claude/commands/NAME.md ($ARGUMENTS is replaced by what follows the name)";
