//! How the session's events and permission questions change the UI's state.

use std::time::Instant;

use keel_core::approval::{Approval, ApprovalRequest, PermissionUpdate};
use keel_core::event::{CallMeta, Emitted, Event, ToolResultEvent};
use keel_protocol::ContentBlock;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{
    dim, hook_line, markdown, render_result, save_rules, server_block, summary, App, HookView,
    Markdown, PendingApproval, RetryView, TaskView, ToolView,
};

impl App {
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
                self.skill_scopes = info.account["skills"]["loaded"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| Some((s["name"].as_str()?.into(), s["scope"].as_str()?.into())))
                    .collect();
            }
            Event::Hook(p) => self.hook_progress(p),
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
            | Event::CompactedHistory { .. }
            | Event::ConversationReset { .. } => {}
        }
    }

    /// A settings hook started (shown while it runs) or ended (a line when it did something).
    fn hook_progress(&mut self, p: &keel_core::hooks::HookProgress) {
        if p.end.is_none() {
            self.hooks.push(HookView {
                id: p.hook_id.clone(),
                name: p.hook_name.clone(),
                command: p.command.clone(),
                started: Instant::now(),
            });
            return;
        }
        self.hooks.retain(|h| h.id != p.hook_id);
        if let Some(line) = hook_line(p) {
            // A reply streaming now is finished first, so the line lands after its text.
            self.finish_stream();
            self.commit([line]);
        }
    }

    pub(super) fn subagent_event(&mut self, parent: &str, e: &Event) {
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

    pub(super) fn stream_event(&mut self, raw: &Value) {
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

    pub(super) fn push_text(&mut self, text: &str) {
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

    pub(super) fn finish_stream(&mut self) {
        if let Some((mut md, partial)) = self.stream.take() {
            let mut lines = Vec::new();
            if !partial.is_empty() {
                lines.extend(md.line(&partial));
            }
            lines.extend(md.finish());
            self.commit(lines);
        }
    }

    pub(super) fn assistant_block(&mut self, block: &ContentBlock) {
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
                let origin = match t.name.as_str() {
                    "Skill" => t.input["skill"]
                        .as_str()
                        .map(|n| n.trim().trim_start_matches('/'))
                        .and_then(|n| self.skill_scopes.get(n).cloned()),
                    _ => None,
                };
                self.tools.push(ToolView {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    input: t.input.clone(),
                    started: Instant::now(),
                    activity: None,
                    origin,
                });
                if let Some(r) = self.running.as_mut() {
                    r.thinking = false;
                }
            }
            ContentBlock::Other(v) => {
                let lines = server_block(v);
                if !lines.is_empty() {
                    self.finish_stream();
                    self.commit(lines);
                }
            }
            _ => {}
        }
    }

    pub(super) fn tool_result(&mut self, r: &ToolResultEvent) {
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
        let ran = !matches!(
            r.meta,
            CallMeta::NotRun(_)
                | CallMeta::Denied(_)
                | CallMeta::Ran {
                    stopped: Some(_),
                    ..
                }
        );
        if view.name == "TodoWrite" && ran {
            let failed =
                matches!(&r.block, ContentBlock::ToolResult(b) if b.is_error == Some(true));
            if !failed {
                self.todos = view.input["todos"].as_array().cloned().unwrap_or_default();
            }
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

    pub(super) fn answer(&mut self, choice: usize) {
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

    pub(super) fn deny_and_stop(&mut self) {
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
}
