//! Compaction: when the conversation would outgrow the model's context window, the model is
//! asked for a summary of the older part, and the history becomes that summary followed by the
//! latest messages, kept as they were. The transcript keeps everything: a boundary record and
//! the compacted history are appended, and a resume starts from them.

use std::time::Instant;

use keel_model::{estimate_tokens, ModelRequest};
use keel_protocol::{ApiMessage, CancelReason, ContentBlock, MessageContent, Role};
use keel_tools::CancelToken;

use super::Session;
use crate::cost::price_of;
use crate::emit::EmitError;
use crate::end::{Phase, TurnEnd};
use crate::event::{CompactInfo, Event};
use crate::history::History;
use crate::hooks::HookEvent;
use crate::reply::{call_with_retry, CallCx, CallFailure};

/// Why a compaction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// The context was filling up (or the API said the prompt is too long).
    Auto,
    /// `/compact`.
    Manual,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::Auto => "auto",
            Trigger::Manual => "manual",
        }
    }
}

/// The share of the threshold the kept (verbatim) latest messages may take.
const KEEP_SHARE: u64 = 4;
/// The most output tokens the summary may take.
const SUMMARY_MAX_TOKENS: u32 = 8_192;

/// What the model is asked for.
const SUMMARY_REQUEST: &str = "The conversation so far has to be compacted to fit the context window. Write a summary that lets you carry on the work without the earlier messages: the user's goals and every explicit instruction or preference; what has been done so far, with the files, commands and results that matter (exact paths, names, errors); decisions made and why; what is still open or in progress, and the next step. Be complete but concise. Reply with the summary only, as plain text; do not call any tool.";

/// How the summary is introduced to the model afterwards.
const SUMMARY_INTRO: &str = "This session was compacted to fit the context window. A summary of the earlier conversation, written by you:";

use keel_model::message_tokens;

/// A user message that starts an exchange (a prompt, no tool results): where the kept part of
/// a compacted history may begin without separating a call from its result.
fn starts_exchange(m: &ApiMessage) -> bool {
    m.role == Role::User
        && !m
            .content
            .blocks()
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolResult(_)))
}

/// Where to cut `messages`: everything before the index is summarized, the rest kept as it is.
/// The kept part starts with a prompt and fits `keep` tokens; `messages.len()` when nothing
/// can be kept.
pub(crate) fn cut_point(messages: &[ApiMessage], keep: u64) -> usize {
    let mut tokens = 0u64;
    let mut cut = messages.len();
    for i in (1..messages.len()).rev() {
        tokens += message_tokens(&messages[i]);
        if tokens > keep {
            break;
        }
        if starts_exchange(&messages[i]) {
            cut = i;
        }
    }
    cut
}

impl Session {
    /// The model's context window, from the settings or the model table.
    pub(crate) fn context_window(&self) -> u64 {
        self.ctx
            .limits()
            .context
            .context_window
            .unwrap_or_else(|| price_of(&self.model()).0.context_window)
    }

    /// When to compact: the configured threshold, or the window minus the room for a reply
    /// and a margin of a twentieth.
    pub(crate) fn compact_threshold(&self) -> u64 {
        let window = self.context_window();
        self.ctx
            .limits()
            .context
            .compact_threshold
            .unwrap_or_else(|| {
                let reply = u64::from(self.ctx.limits().max_tokens).min(window / 4);
                window.saturating_sub(reply + window / 20)
            })
    }

    /// The tokens the next request would carry, estimated from the bytes it will send (the
    /// history's are counted as each message is encoded, once).
    pub(crate) fn tokens_in_use(&mut self) -> u64 {
        let prefix = self.prefix_bytes();
        estimate_tokens(prefix + self.history.json_bytes())
    }

    /// Compact the history. `Ok(Err(end))`: the compaction failed or was interrupted, the
    /// history is as it was, and the turn ends so.
    pub(crate) async fn compact(
        &mut self,
        trigger: Trigger,
        instructions: &str,
        turn: &CancelToken,
        api_time: &mut std::time::Duration,
    ) -> Result<Result<CompactInfo, TurnEnd>, EmitError> {
        let began = Instant::now();
        let pre_tokens = self.tokens_in_use();
        self.emitter
            .emit(Event::Status {
                status: Some("compacting".into()),
            })
            .await?;
        let instructions = self.pre_compact_hooks(trigger, instructions, turn).await;
        let done = self
            .summarize_and_replace(trigger, &instructions, turn, api_time, pre_tokens, began)
            .await;
        self.emitter.emit(Event::Status { status: None }).await?;
        done
    }

    async fn summarize_and_replace(
        &mut self,
        trigger: Trigger,
        instructions: &str,
        turn: &CancelToken,
        api_time: &mut std::time::Duration,
        pre_tokens: u64,
        began: Instant,
    ) -> Result<Result<CompactInfo, TurnEnd>, EmitError> {
        let messages = self.history.messages();
        let cut = cut_point(&messages, self.compact_threshold() / KEEP_SHARE);
        let asked = summary_request(messages[..cut].to_vec(), instructions);
        let reply = match self.request_summary(&asked, turn, api_time).await? {
            Ok(r) => r,
            Err(end) => return Ok(Err(end)),
        };
        self.ctx
            .add_usage(&reply.message.model, &reply.message.usage);
        let summary = super::text_of(&reply.message.content);
        if summary.trim().is_empty() {
            self.emitter
                .emit(Event::Warning {
                    message: "Compacting the conversation failed: the model wrote no summary, so the conversation was left as it was.".into(),
                    fields: Default::default(),
                })
                .await?;
            return Ok(Err(TurnEnd::PromptTooLong {
                detail: "the model wrote no summary of the conversation".into(),
            }));
        }

        // The new history: the summary (and what is still running), then the kept messages.
        let mut lead = vec![ContentBlock::text(format!("{SUMMARY_INTRO}\n\n{summary}"))];
        // SessionStart hooks run again (source `compact`) and their context joins the summary.
        if self.scope.role.is_main() {
            lead.extend(self.session_start_context("compact", turn).await?);
        }
        lead.extend(self.running_tasks_note());
        let kept: Vec<ApiMessage> = self.history.messages_from(cut);
        let preserved = kept.len() as u64;
        let next = join_kept(lead, kept);
        let (history, _) = History::rebuild(next.clone(), |c| {
            format!("The result of this {} call was lost in compaction.", c.name)
        });
        self.history = history;
        self.compacted_len = Some(self.history.len());
        let info = CompactInfo {
            trigger: trigger.as_str().into(),
            pre_tokens,
            post_tokens: self.tokens_in_use(),
            duration: began.elapsed(),
            preserved_messages: preserved,
            summary,
        };
        self.emitter
            .emit(Event::CompactBoundary(info.clone()))
            .await?;
        self.emitter
            .record(Event::CompactedHistory { messages: next })
            .await?;
        self.emitter.sync().await?;
        Ok(Ok(info))
    }

    /// Asks the model for the summary. `Ok(Err(end))`: the call failed (after its retries) or
    /// was interrupted.
    async fn request_summary(
        &mut self,
        asked: &[ApiMessage],
        turn: &CancelToken,
        api_time: &mut std::time::Duration,
    ) -> Result<Result<crate::reply::Reply, TurnEnd>, EmitError> {
        let mut req = ModelRequest {
            model: self.model(),
            max_tokens: self.ctx.limits().max_tokens.min(SUMMARY_MAX_TOKENS),
            system: self.system.clone(),
            messages: asked.iter().cloned().map(Into::into).collect(),
            tools: self.request_tools(),
            stream: true,
            metadata: None,
            thinking: None,
        };
        if self.ctx.limits().context.prompt_caching {
            req.mark_cache_breakpoints();
        }
        let mut cx = CallCx {
            client: self.ctx.client().as_ref(),
            emitter: &self.emitter,
            policy: &self.ctx.limits().retry,
            include_partial: false,
            cancel: turn,
            fallback_model: None,
            api_time,
        };
        match call_with_retry(&mut cx, &mut req).await {
            Ok(r) => Ok(Ok(r)),
            Err(CallFailure::Emit(e)) => Err(e),
            Err(CallFailure::Api {
                error,
                attempts,
                elapsed,
                gave_up,
            }) => {
                self.emitter
                    .emit(Event::Warning {
                        message: format!(
                            "Compacting the conversation failed, so it was left as it was: {}",
                            error.message
                        ),
                        fields: Default::default(),
                    })
                    .await?;
                Ok(Err(TurnEnd::ApiFailed {
                    error,
                    attempts,
                    elapsed,
                    gave_up,
                }))
            }
            Err(CallFailure::Cancelled { partial, .. }) => {
                if let Some(m) = partial {
                    self.ctx.add_usage(&m.model, &m.usage);
                }
                Ok(Err(TurnEnd::Interrupted {
                    phase: Phase::Streaming,
                    reason: turn.reason().unwrap_or(CancelReason::UserInterrupted),
                }))
            }
        }
    }

    /// What the model is told of the background tasks still running, which the summary cannot
    /// know the end of.
    fn running_tasks_note(&self) -> Option<ContentBlock> {
        let running: Vec<String> = self
            .ctx
            .tasks()
            .statuses()
            .into_iter()
            .filter(|(_, s)| s.as_str() == "running")
            .map(|(id, _)| id)
            .collect();
        (!running.is_empty()).then(|| {
            ContentBlock::text(format!(
                "Background tasks still running (you will be told when each ends): {}.",
                running.join(", ")
            ))
        })
    }

    /// Run PreCompact hooks; what they add goes into the instructions. They cannot stop a
    /// compaction (the alternative is a request the API refuses).
    async fn pre_compact_hooks(
        &self,
        trigger: Trigger,
        instructions: &str,
        turn: &CancelToken,
    ) -> String {
        let mut out = instructions.to_owned();
        let Some(hooks) = self.ctx.hooks() else {
            return out;
        };
        if !hooks.wants(HookEvent::PreCompact, None) {
            return out;
        }
        let mut input = self.hook_input(HookEvent::PreCompact);
        input.compact = Some((trigger.as_str().into(), instructions.to_owned()));
        if let Some(d) = crate::hooks::run_seen(&*hooks, input, turn, &self.emitter).await {
            for note in d.additional_context {
                out.push('\n');
                out.push_str(&note);
            }
        }
        out
    }
}

/// `/compact [instructions]` as a prompt: the instructions.
pub(super) fn compact_command(prompt: &[ContentBlock]) -> Option<String> {
    let [ContentBlock::Text(t)] = prompt else {
        return None;
    };
    let rest = t.text.trim().strip_prefix("/compact")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim().to_owned())
}

/// The messages before the cut, with the request for a summary (and the user's instructions)
/// added to the last user message, or as one of its own.
fn summary_request(mut asked: Vec<ApiMessage>, instructions: &str) -> Vec<ApiMessage> {
    let mut request = SUMMARY_REQUEST.to_owned();
    if !instructions.trim().is_empty() {
        request.push_str("\n\nAlso: ");
        request.push_str(instructions.trim());
    }
    match asked.last_mut() {
        Some(last) if last.role == Role::User => {
            let mut blocks =
                std::mem::replace(&mut last.content, MessageContent::Blocks(vec![])).into_blocks();
            blocks.push(ContentBlock::text(request));
            last.content = MessageContent::Blocks(blocks);
        }
        _ => asked.push(ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(vec![ContentBlock::text(request)]),
        }),
    }
    asked
}

/// The new history: `lead` (the summary, hook context, running tasks) as the first user
/// message, merged with the first kept message when that is the user's, then the kept ones.
fn join_kept(mut lead: Vec<ContentBlock>, kept: Vec<ApiMessage>) -> Vec<ApiMessage> {
    let mut next: Vec<ApiMessage> = Vec::with_capacity(kept.len() + 1);
    let mut kept = kept.into_iter();
    match kept.next() {
        Some(first) if first.role == Role::User => {
            lead.extend(first.content.into_blocks());
            next.push(ApiMessage {
                role: Role::User,
                content: MessageContent::Blocks(lead),
            });
        }
        Some(first) => {
            next.push(ApiMessage {
                role: Role::User,
                content: MessageContent::Blocks(lead),
            });
            next.push(first);
        }
        None => next.push(ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(lead),
        }),
    }
    next.extend(kept);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: Role, blocks: Vec<ContentBlock>) -> ApiMessage {
        ApiMessage {
            role,
            content: MessageContent::Blocks(blocks),
        }
    }

    #[test]
    fn the_cut_never_separates_a_call_from_its_result() {
        let call = ContentBlock::ToolUse(keel_protocol::ToolUseBlock {
            id: "t1".into(),
            name: "Bash".into(),
            input: serde_json::json!({}),
            extra: Default::default(),
        });
        let messages = vec![
            msg(Role::User, vec![ContentBlock::text("first ".repeat(500))]),
            msg(Role::Assistant, vec![ContentBlock::text("ok")]),
            msg(Role::User, vec![ContentBlock::text("second")]),
            msg(Role::Assistant, vec![call]),
            msg(
                Role::User,
                vec![ContentBlock::tool_result("t1", "out", false)],
            ),
        ];
        // Room for the last three messages: the cut goes to the prompt that starts them.
        assert_eq!(cut_point(&messages, 1_000), 2);
        // Room for two only: they start with a tool result, so nothing is kept.
        assert_eq!(cut_point(&messages, 12), 5);
    }
}
