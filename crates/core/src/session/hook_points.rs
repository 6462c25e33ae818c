//! Where a session calls its hooks outside tool dispatch: when it starts (SessionStart, or
//! SubagentStart for a subagent), when a prompt arrives (UserPromptSubmit), when the model
//! ends its turn (Stop / SubagentStop), after a compaction (SessionStart with source
//! `compact`) and when it ends (SessionEnd).

use std::time::Duration;

use keel_protocol::{CancelReason, ContentBlock, Extra};
use keel_tools::CancelToken;
use serde_json::json;

use super::{Session, SessionRole};
use crate::emit::EmitError;
use crate::end::{Phase, TurnEnd};
use crate::event::Event;
use crate::hooks::{run_seen, HookDecision, HookEvent, HookInput};

/// How many times in a row Stop (or SubagentStop) hooks may send the model back to work in
/// one turn; after that the turn ends as the model wanted, with a warning.
pub(crate) const MAX_STOP_CONTINUATIONS: u32 = 8;

/// The longest all SessionEnd hooks together may take: each also has its own deadline, but a
/// session's end must not wait on a slow hook for an hour.
const SESSION_END_DEADLINE: Duration = Duration::from_secs(60);

impl Session {
    /// A hook input for `event` with the session's fields filled in (and, in a subagent, its
    /// `agent_id` and `agent_type`).
    pub(crate) fn hook_input(&self, event: HookEvent) -> HookInput {
        let mut extra = Vec::new();
        if let SessionRole::Subagent {
            agent_id,
            agent_type,
        } = &self.scope.role
        {
            extra.push(("agent_id".to_owned(), json!(agent_id)));
            extra.push(("agent_type".to_owned(), json!(agent_type)));
        }
        HookInput {
            event,
            session_id: self.emitter.session_id(),
            cwd: self.ctx.cwd().display().to_string(),
            permission_mode: self
                .ctx
                .permissions(self.scope.plan_only)
                .mode
                .as_str()
                .to_owned(),
            transcript_path: self.transcript_path(),
            tool: None,
            prompt: None,
            stop_hook_active: false,
            last_assistant_message: None,
            compact: None,
            extra,
        }
    }

    /// Show the user what hooks said for them (`systemMessage`, a failure of a hook that
    /// cannot block) as a warning frame.
    async fn show_hook_messages(
        &self,
        event: HookEvent,
        d: &HookDecision,
    ) -> Result<(), EmitError> {
        if let Some(m) = &d.system_message {
            let mut fields = Extra::new();
            fields.insert("hook_event".into(), json!(event.as_str()));
            self.emitter
                .emit(Event::Warning {
                    message: m.clone(),
                    fields,
                })
                .await?;
        }
        Ok(())
    }

    /// Run SessionStart hooks with `source` (`startup`, `resume`, `clear`, `compact`); what they
    /// add (JSON `additionalContext`, or plain stdout) is returned as context for the model.
    pub(crate) async fn session_start_context(
        &self,
        source: &str,
        turn: &CancelToken,
    ) -> Result<Vec<ContentBlock>, EmitError> {
        self.start_hooks(HookEvent::SessionStart, Some(source), turn)
            .await
    }

    async fn start_hooks(
        &self,
        event: HookEvent,
        source: Option<&str>,
        turn: &CancelToken,
    ) -> Result<Vec<ContentBlock>, EmitError> {
        let Some(hooks) = self.ctx.hooks() else {
            return Ok(Vec::new());
        };
        if !hooks.wants(event, None) {
            return Ok(Vec::new());
        }
        let mut input = self.hook_input(event);
        if let Some(source) = source {
            input.extra.push(("source".into(), json!(source)));
        }
        let Some(d) = run_seen(&*hooks, input, turn, &self.emitter).await else {
            return Ok(Vec::new());
        };
        self.show_hook_messages(event, &d).await?;
        Ok(d.additional_context
            .into_iter()
            .map(|note| ContentBlock::text(format!("{event} hook additional context: {note}")))
            .collect())
    }

    /// Run the session's start hooks, once: SessionStart (source `startup`, or `resume` when
    /// the session has history) for the main agent — before its `init`, as Claude Code —
    /// or SubagentStart for a subagent. Returns their context for the first prompt.
    pub(crate) async fn start_hooks_once(
        &mut self,
        turn: &CancelToken,
    ) -> Result<Vec<ContentBlock>, EmitError> {
        if std::mem::replace(&mut self.session_start_done, true) {
            // Set by `/clear`, whose SessionStart hooks ran before its `init`.
            return Ok(std::mem::take(&mut self.pending_start_notes));
        }
        if self.scope.role.is_main() {
            let source = if self.history.is_empty() {
                "startup"
            } else {
                "resume"
            };
            self.session_start_context(source, turn).await
        } else {
            self.start_hooks(HookEvent::SubagentStart, None, turn).await
        }
    }

    /// Run UserPromptSubmit hooks. `Some(end)` ends the turn before the model is called;
    /// otherwise `start_notes` (from [`Self::start_hooks_once`]) and what the hooks added are
    /// appended to `prompt`.
    pub(crate) async fn prompt_hooks(
        &mut self,
        prompt: &mut Vec<ContentBlock>,
        start_notes: Vec<ContentBlock>,
        turn: &CancelToken,
    ) -> Result<Option<TurnEnd>, EmitError> {
        // UserPromptSubmit hooks are told the user's words, not what SessionStart added.
        let user_text = super::text_of(prompt);
        prompt.extend(start_notes);
        let Some(hooks) = self.ctx.hooks() else {
            return Ok(None);
        };
        // A subagent's prompt is the parent model's, not the user's: no UserPromptSubmit.
        if !self.scope.role.is_main() || !hooks.wants(HookEvent::UserPromptSubmit, None) {
            return Ok(None);
        }
        let mut input = self.hook_input(HookEvent::UserPromptSubmit);
        input.prompt = Some(user_text);
        let Some(d) = run_seen(&*hooks, input, turn, &self.emitter).await else {
            return Ok(Some(TurnEnd::Interrupted {
                phase: Phase::Streaming,
                reason: turn.reason().unwrap_or(CancelReason::UserInterrupted),
            }));
        };
        self.show_hook_messages(HookEvent::UserPromptSubmit, &d)
            .await?;
        if let Some(reason) = d.stop {
            return Ok(Some(TurnEnd::HookStopped {
                event: HookEvent::UserPromptSubmit.as_str().to_owned(),
                reason,
            }));
        }
        if let Some(reason) = d.block {
            // As Claude Code does: the prompt is dropped, the user is told, and the turn ends
            // successfully (the run did what it was asked; a hook said no to the prompt).
            let mut fields = Extra::new();
            fields.insert("hook_event".into(), json!("UserPromptSubmit"));
            fields.insert("blocked".into(), json!(true));
            self.emitter
                .emit(Event::Warning {
                    message: format!("A UserPromptSubmit hook blocked the prompt: {reason}"),
                    fields,
                })
                .await?;
            return Ok(Some(TurnEnd::Completed {
                text: format!(
                    "A UserPromptSubmit hook blocked the prompt, so the model was not called: {reason}"
                ),
            }));
        }
        for note in d.additional_context {
            prompt.push(ContentBlock::text(format!(
                "UserPromptSubmit hook additional context: {note}"
            )));
        }
        Ok(None)
    }

    /// Run Stop (SubagentStop) hooks after the model ended its turn. `Ok(true)`: a hook sent the
    /// model back to work, and its feedback is now the last user message.
    pub(crate) async fn stop_hooks(
        &mut self,
        final_text: &str,
        continuations: &mut u32,
        turn: &CancelToken,
    ) -> Result<bool, EmitError> {
        let Some(hooks) = self.ctx.hooks() else {
            return Ok(false);
        };
        let event = if self.scope.role.is_main() {
            HookEvent::Stop
        } else {
            HookEvent::SubagentStop
        };
        if !hooks.wants(event, None) {
            return Ok(false);
        }
        if *continuations >= MAX_STOP_CONTINUATIONS {
            let mut fields = Extra::new();
            fields.insert("hook_event".into(), json!(event.as_str()));
            self.emitter
                .emit(Event::Warning {
                    message: format!(
                        "{event} hooks sent the model back to work {MAX_STOP_CONTINUATIONS} times in this turn; keel ends the turn here so it cannot loop forever"
                    ),
                    fields,
                })
                .await?;
            return Ok(false);
        }
        let mut input = self.hook_input(event);
        input.stop_hook_active = *continuations > 0;
        input.last_assistant_message = Some(final_text.to_owned());
        let Some(d) = run_seen(&*hooks, input, turn, &self.emitter).await else {
            return Ok(false); // the model had finished; an interrupt now changes nothing
        };
        self.show_hook_messages(event, &d).await?;
        if d.stop.is_some() {
            return Ok(false);
        }
        let mut notes: Vec<String> = d.block.into_iter().collect();
        notes.extend(d.additional_context);
        if notes.is_empty() {
            return Ok(false);
        }
        *continuations += 1;
        let text = format!(
            "A {event} hook asked you to continue before ending your turn:\n{}",
            notes.join("\n")
        );
        self.tell_model(vec![ContentBlock::text(text)]).await?;
        Ok(true)
    }

    /// Run SessionEnd hooks with `reason` (`other` at exit, `clear` for `/clear`); they cannot
    /// change anything. Each is bounded by its deadline, and all together by
    /// [`SESSION_END_DEADLINE`]; dropping them kills their process groups.
    pub(crate) async fn session_end_hooks(&self, reason: &str) {
        let Some(hooks) = self.ctx.hooks() else {
            return;
        };
        if !hooks.wants(HookEvent::SessionEnd, None) {
            return;
        }
        let mut input = self.hook_input(HookEvent::SessionEnd);
        input.extra.push(("reason".into(), reason.into()));
        match tokio::time::timeout(SESSION_END_DEADLINE, hooks.run(input)).await {
            Ok(d) => {
                if let Some(m) = d.system_message {
                    tracing::warn!("SessionEnd hook: {m}");
                }
            }
            Err(_) => tracing::warn!(
                "SessionEnd hooks did not finish within {} s and were stopped",
                SESSION_END_DEADLINE.as_secs()
            ),
        }
    }
}
