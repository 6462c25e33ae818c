//! Where a turn calls the session's hooks outside tool dispatch: when the prompt arrives
//! (UserPromptSubmit) and when the model ends its turn (Stop).

use keel_protocol::{CancelReason, ContentBlock};
use keel_tools::CancelToken;

use super::Session;
use crate::emit::EmitError;
use crate::end::{Phase, TurnEnd};
use crate::hooks::{run_raced, HookEvent, HookInput};

/// How many times in a row Stop hooks may send the model back to work in one turn.
const MAX_STOP_CONTINUATIONS: u32 = 8;

impl Session {
    /// A hook input for `event` with the session's fields filled in.
    pub(crate) fn hook_input(&self, event: HookEvent) -> HookInput {
        HookInput {
            event,
            session_id: self.emitter.session_id().to_owned(),
            cwd: self.ctx.cwd.display().to_string(),
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
            extra: Vec::new(),
        }
    }

    /// Run UserPromptSubmit hooks. `Some(end)` ends the turn before the model is called;
    /// otherwise notes the hooks added are appended to `prompt`.
    pub(crate) async fn prompt_hooks(
        &mut self,
        prompt: &mut Vec<ContentBlock>,
        turn: &CancelToken,
    ) -> Option<TurnEnd> {
        let hooks = self.ctx.hooks()?;
        if !self.session_start_done && self.scope.role.is_main() {
            self.session_start_done = true;
            if hooks.wants(HookEvent::SessionStart, None) {
                let mut input = self.hook_input(HookEvent::SessionStart);
                let source = if self.history.is_empty() {
                    "startup"
                } else {
                    "resume"
                };
                input.extra.push(("source".into(), source.into()));
                if let Some(d) = run_raced(&*hooks, input, turn).await {
                    for note in d.additional_context {
                        prompt.push(ContentBlock::text(note));
                    }
                }
            }
        }
        if !hooks.wants(HookEvent::UserPromptSubmit, None) {
            return None;
        }
        let mut input = self.hook_input(HookEvent::UserPromptSubmit);
        input.prompt = Some(super::text_of(prompt));
        let Some(d) = run_raced(&*hooks, input, turn).await else {
            return Some(TurnEnd::Interrupted {
                phase: Phase::Streaming,
                reason: turn.reason().unwrap_or(CancelReason::UserInterrupted),
            });
        };
        if let Some(reason) = d.stop.or(d.block) {
            return Some(TurnEnd::HookStopped {
                event: HookEvent::UserPromptSubmit.as_str().to_owned(),
                reason,
            });
        }
        for note in d.additional_context {
            prompt.push(ContentBlock::text(note));
        }
        None
    }

    /// Run Stop hooks after the model ended its turn. `Ok(true)`: a hook sent the model back to
    /// work, and its feedback is now the last user message.
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
        if !hooks.wants(event, None) || *continuations >= MAX_STOP_CONTINUATIONS {
            return Ok(false);
        }
        let mut input = self.hook_input(event);
        input.stop_hook_active = *continuations > 0;
        input.last_assistant_message = Some(final_text.to_owned());
        let Some(d) = run_raced(&*hooks, input, turn).await else {
            return Ok(false); // the model had finished; an interrupt now changes nothing
        };
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

    /// Run SessionEnd hooks (they cannot change anything; each is bounded by its deadline).
    pub(crate) async fn session_end_hooks(&self) {
        let Some(hooks) = self.ctx.hooks() else {
            return;
        };
        if !hooks.wants(HookEvent::SessionEnd, None) {
            return;
        }
        let mut input = self.hook_input(HookEvent::SessionEnd);
        input.extra.push(("reason".into(), "other".into()));
        let _ = hooks.run(input).await;
    }
}
