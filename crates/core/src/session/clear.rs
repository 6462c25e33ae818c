//! `/clear`: the conversation is dropped and a new session starts in the same process.
//!
//! No model request is made. The old session ends as if the process had ended (SessionEnd hooks
//! with reason `clear`, its transcript made durable and copied to object storage, left
//! complete and resumable), a `conversation_reset` frame stamped with the old id says so, and
//! everything after it carries the new id: the turn's `system/init` and `result`, the new
//! transcript file beside the old one (mirrored and copied like the first), SessionStart hooks
//! with source `clear`. Background tasks and their processes are not the conversation's: they
//! keep running, still owned by the session's task manager, and are still stopped at exit.

use std::sync::Arc;

use keel_protocol::{ContentBlock, Extra};
use keel_tools::{CancelToken, ReadLedger};

use super::Session;
use crate::emit::{new_uuid, EmitError, Emitter};
use crate::event::Event;
use crate::history::History;

/// Whether `prompt` is `/clear` (alone, or followed by whitespace and words the command
/// ignores, as the reference CLI accepts it).
pub(crate) fn is_clear_command(prompt: &[ContentBlock]) -> bool {
    let [ContentBlock::Text(t)] = prompt else {
        return false;
    };
    t.text
        .trim()
        .strip_prefix("/clear")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
}

impl Session {
    /// End the current conversation and start a new session (see the module docs). The
    /// turn's `init` and `result` follow, under the new id.
    pub(super) async fn clear_conversation(&mut self, turn: &CancelToken) -> Result<(), EmitError> {
        self.session_end_hooks("clear").await;
        let new_id = new_uuid();
        let user_message_uuid = self.prompt_uuid.take().unwrap_or_else(new_uuid);
        self.emitter
            .emit(Event::ConversationReset {
                new_conversation_id: new_id.clone(),
                user_message_uuid,
            })
            .await?;
        // The old file, its last record the reset, is whole and durable (and copied) before
        // anything is written under the new id.
        self.emitter.sync().await?;
        let mut not_copied = None;
        if let Some(remote) = self.ctx.remote() {
            if let Err(e) = remote
                .flush(crate::remote::DEFAULT_FINAL_UPLOAD_TIMEOUT)
                .await
            {
                not_copied = Some(format!(
                    "the cleared session's last records were not copied to {} ({e}); its local transcript is whole",
                    remote.session_url()
                ));
            }
        }
        self.switch_session(&new_id);
        // Said under the new id: the old file ends with the reset.
        if let Some(message) = not_copied {
            self.emitter
                .emit(Event::Warning {
                    message,
                    fields: Extra::new(),
                })
                .await?;
        }
        self.history = History::new();
        self.compacted_len = None;
        // The new conversation has read nothing: an edit needs a read first again.
        self.reads = Arc::new(ReadLedger::new());
        // Its SessionStart hooks run now, before its `init`; what they add goes with the next
        // prompt.
        self.session_start_done = true;
        self.pending_start_notes = self.session_start_context("clear", turn).await?;
        self.local_command = Some("clear");
        Ok(())
    }

    /// Point the context and every emitter at session `id`: its transcript file (beside the
    /// old one), its subagents' directory, its copy in object storage.
    fn switch_session(&mut self, id: &str) {
        let model = self.model();
        let next = self
            .emitter
            .persist_place()
            .and_then(|p| p.next_session(id, &model));
        let path = next
            .as_ref()
            .map(|(_, p)| p.clone())
            .filter(|p| !p.as_os_str().is_empty());
        let remote = match (self.ctx.remote(), &path) {
            (Some(old), Some(p)) => Some(crate::remote::Uploader::start(
                old.store().clone(),
                id.to_owned(),
                p.clone(),
                warn_through(self.emitter.clone()),
            )),
            _ => None,
        };
        if let Some((writer, _)) = next {
            self.emitter.switch_persist(writer);
        }
        let old = self.ctx.switch_session(id, path, remote);
        tracing::info!("/clear: session {old} ended, session {id} started");
    }
}

/// An upload failure of the new session's remote copy, said as a warning frame.
fn warn_through(em: Emitter) -> Box<dyn Fn(String) + Send + Sync> {
    Box::new(move |message: String| {
        let em = em.clone();
        tokio::spawn(async move {
            let _ = em
                .emit(Event::Warning {
                    message,
                    fields: Extra::new(),
                })
                .await;
        });
    })
}

#[cfg(test)]
mod tests {
    use super::is_clear_command;
    use keel_protocol::ContentBlock;

    #[test]
    fn clear_is_recognised_with_arguments_and_spaces_only() {
        let p = |s: &str| vec![ContentBlock::text(s)];
        assert!(is_clear_command(&p("/clear")));
        assert!(is_clear_command(&p("  /clear  \n")));
        assert!(is_clear_command(&p("/clear now please")));
        assert!(!is_clear_command(&p("/clearly not")));
        assert!(!is_clear_command(&p("please /clear")));
        assert!(!is_clear_command(&[
            ContentBlock::text("/clear"),
            ContentBlock::text("more")
        ]));
    }
}
