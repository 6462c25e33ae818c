//! A prompt that runs a custom command (`/name args`): expanded before the model sees it, and
//! the command's `model` and `allowed-tools` bound to that turn only.

use keel_protocol::{ContentBlock, Extra};

use super::Session;
use crate::emit::EmitError;
use crate::event::Event;

/// The custom command a turn runs, and what it replaced.
#[derive(Debug)]
pub(crate) struct CommandTurn {
    /// The expansion (the command, its arguments).
    pub expanded: crate::extend::Expanded,
    /// The agent's own model before the command's `model` replaced it.
    pub saved_model: Option<Option<String>>,
}

impl Session {
    /// Expand the prompt when it runs a custom command (main agent only). A command file that
    /// cannot be read any more is said in a warning, and the prompt goes on as typed.
    pub(super) async fn expand_command(
        &mut self,
        prompt: &mut Vec<ContentBlock>,
    ) -> Result<(), EmitError> {
        if !self.scope.role.is_main() {
            return Ok(());
        }
        let Some(expanded) = self.ctx.extensions().expand(prompt) else {
            return Ok(());
        };
        let expanded = match expanded {
            Ok(x) => x,
            Err(e) => {
                let mut fields = Extra::new();
                fields.insert("source".into(), serde_json::json!("custom_command"));
                let message =
                    format!("the custom command was not expanded, the prompt goes as typed: {e}");
                return self.emitter.emit(Event::Warning { message, fields }).await;
            }
        };
        prompt.splice(0..1, expanded.blocks.iter().cloned());
        let saved_model = expanded
            .command
            .model
            .clone()
            .map(|m| self.scope.model.replace(m));
        self.command = Some(CommandTurn {
            expanded,
            saved_model,
        });
        Ok(())
    }

    /// The turn is over: the command's model and tool limits no longer apply.
    pub(super) fn end_command_turn(&mut self) {
        if let Some(c) = self.command.take() {
            if let Some(saved) = c.saved_model {
                self.scope.model = saved;
            }
        }
    }
}
