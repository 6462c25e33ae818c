//! The turn loop, as named steps: begin (init, prompt hooks, the prompt), then per model call
//! check the limits, call the model, take its reply, run its tools — until the model ends its
//! turn or a limit, an error or an interrupt ends it. Exactly one `result` per turn of the
//! main agent, derived from the [`TurnEnd`] the caller also gets.

use std::time::{Duration, Instant};

use keel_model::ModelRequest;
use keel_protocol::content::AssistantMessage;
use keel_protocol::{CancelReason, ContentBlock, PermissionDenial, ToolUseBlock};
use keel_tools::CancelToken;

use super::compact::Trigger;
use super::{text_of, Session};
use crate::dispatch::{rejected_text, run_calls, DispatchCx};
use crate::emit::EmitError;
use crate::end::{Phase, TurnEnd};
use crate::event::{CallMeta, Event, InitInfo, NonExecution, ToolResultEvent, TurnReport};
use crate::history::PendingResults;
use crate::reply::{call_with_retry, CallCx, CallFailure, Reply};

/// Counters of one turn.
#[derive(Default)]
pub(super) struct TurnStats {
    num_turns: u32,
    api_time: Duration,
    denials: Vec<PermissionDenial>,
    stop_reason: Option<String>,
    stop_continuations: u32,
    /// Replies in a row cut off by the output limit.
    cut_offs: u32,
    /// The text of replies cut off so far (continued by the next).
    cut_text: String,
    /// `pause_turn` continuations of this turn.
    pauses: u32,
    /// A "prompt is too long" answer was already recovered from by compacting.
    too_long_recovered: bool,
    /// Compact before the next call (the model said the context window was full).
    compact_next: bool,
    /// The model was reminded to give its structured output.
    structured_nudged: bool,
    /// The structured output the turn ends with.
    structured_output: Option<serde_json::Value>,
}

/// Whether the API refused the request for not fitting the context window.
fn is_prompt_too_long(e: &keel_model::ApiError) -> bool {
    e.status == Some(400)
        && (e.error_type.as_deref() == Some("context_length_exceeded") || {
            let m = e.message.to_ascii_lowercase();
            m.contains("prompt is too long")
                || m.contains("context window")
                || m.contains("too many tokens")
                || m.contains("maximum context length")
        })
}

/// How many replies in a row may be cut off by the output limit before the turn stops.
const MAX_CUT_OFFS: u32 = 3;
/// How many times a paused reply (`pause_turn`) is continued in one turn.
const MAX_PAUSES: u32 = 8;
/// What the model is told when its text reply was cut off by the output limit.
const CONTINUE_AFTER_CUT_OFF: &str = "Your last reply was cut off by the output token limit. Continue exactly where it stopped, without repeating anything.";

/// What the model is told about a call whose input was cut off.
fn cut_off_text(name: &str) -> String {
    format!(
        "Your reply was cut off by the output token limit (max_tokens) while this {name} call was being written, so it was not run. Make the call again with a shorter input (split large content over several calls)."
    )
}

/// What a reply leads to.
enum Taken {
    /// The turn is over.
    End(TurnEnd),
    /// Call the model again (a Stop hook sent it back to work).
    Again,
    /// Run these calls.
    Calls(PendingResults),
}

impl Session {
    /// Run one turn: `prompt` in, events out, exactly one `result` at the end (main agent).
    pub async fn run_turn(&mut self, prompt: Vec<ContentBlock>) -> TurnEnd {
        self.run_turn_under(prompt, None).await
    }

    /// Run one turn whose cancel token is a child of `parent` (a foreground subagent's turn is
    /// a child of the parent's tool call). A subagent emits no `init` and no `result`: its
    /// parent reports how it ended.
    pub(crate) async fn run_turn_under(
        &mut self,
        prompt: Vec<ContentBlock>,
        parent: Option<CancelToken>,
    ) -> TurnEnd {
        let started = Instant::now();
        let turn = parent.map(|p| p.child()).unwrap_or_default();
        self.turn_state.start(turn.clone());
        if let Some(s) = &self.structured {
            s.start_turn();
        }
        let mut stats = TurnStats::default();
        let mut end = match self.turn_state.failure() {
            // The session already failed: no model call, no tool.
            Some(_) => TurnEnd::Internal {
                message: String::new(),
            },
            None => self.guarded_turn(prompt, &turn, &mut stats).await,
        };
        if let Some(why) = self.turn_state.failure() {
            end = TurnEnd::Internal { message: why };
        }
        // The invariant, whatever path ended the turn (a `/compact` prompt, say): with
        // --json-schema, a turn without the structured answer is never a success.
        if self.structured.is_some()
            && matches!(end, TurnEnd::Completed { .. })
            && stats.structured_output.is_none()
        {
            end = TurnEnd::StructuredMissing {
                text: end.result_text(),
            };
        }
        debug_assert!(
            self.history.open_calls().is_empty(),
            "a turn ended with open tool calls"
        );
        // The transcript is made durable before the result says how the turn went; when it
        // cannot be, that is how the turn went.
        if let Err(e) = self.emitter.sync().await {
            tracing::error!("could not make the transcript durable: {e}");
            if !matches!(end, TurnEnd::Internal { .. }) {
                end = TurnEnd::Internal {
                    message: e.to_string(),
                };
            }
        }
        let report = if self.scope.role.is_main() {
            let transcript_remote = match self.ctx.remote() {
                Some(r) => Some(crate::event::RemoteCopy::of(
                    r.session_url(),
                    r.flush(crate::remote::DEFAULT_FINAL_UPLOAD_TIMEOUT).await,
                )),
                None => None,
            };
            Some(TurnReport {
                end: end.clone(),
                num_turns: stats.num_turns,
                duration: started.elapsed(),
                api_duration: stats.api_time,
                cost: self.ctx.cost(),
                denials: std::mem::take(&mut stats.denials),
                stop_reason: stats.stop_reason.take(),
                result_index: self.results_emitted,
                provider: self.ctx.provider_of(&self.model()).name().to_owned(),
                model: self.model(),
                transcript_remote,
                origin: self.origin.take(),
                account: self.capability_account(
                    self.structured
                        .as_ref()
                        .map(|_| stats.structured_output.is_some()),
                ),
                structured_output: stats.structured_output.take(),
                local_command: self.local_command.take(),
            })
        } else {
            None
        };
        self.end_command_turn();
        // Over for anyone who asks from here on: a client that read the result and then sends
        // an interrupt must hear that nothing was running, not race the final sync.
        self.turn_state.end();
        if let Some(report) = report {
            if let Err(e) = self.emitter.emit_final(Event::Result(report)).await {
                tracing::error!("could not emit the result: {e}");
            }
            crate::fault::stall("slow_final_sync").await;
            if let Err(e) = self.emitter.sync().await {
                tracing::error!("could not make the transcript durable: {e}");
            }
        }
        self.results_emitted += 1;
        end
    }

    pub(super) async fn turn_inner(
        &mut self,
        prompt: Vec<ContentBlock>,
        turn: &CancelToken,
        stats: &mut TurnStats,
    ) -> Result<TurnEnd, EmitError> {
        if let Some(end) = self.begin(prompt, turn).await? {
            return Ok(end);
        }
        loop {
            if let Some(end) = self.before_call(turn, stats).await? {
                return Ok(end);
            }
            let reply = match self.call_model(turn, stats).await? {
                Ok(reply) => reply,
                Err(TurnEnd::ApiFailed { error, .. })
                    if is_prompt_too_long(&error) && !stats.too_long_recovered =>
                {
                    // Recovered from once: compact, then ask again.
                    stats.too_long_recovered = true;
                    let mut api_time = stats.api_time;
                    let compacted = self.compact(Trigger::Auto, "", turn, &mut api_time).await?;
                    stats.api_time = api_time;
                    match compacted {
                        Ok(_) => continue,
                        Err(end) => return Ok(end),
                    }
                }
                Err(TurnEnd::ApiFailed { error, .. }) if is_prompt_too_long(&error) => {
                    return Ok(TurnEnd::PromptTooLong {
                        detail: format!("the API still answered: {}", error.message),
                    })
                }
                Err(end) => return Ok(end),
            };
            let pending = match self.take_reply(reply, turn, stats).await? {
                Taken::End(end) => return Ok(end),
                Taken::Again => continue,
                Taken::Calls(p) => p,
            };
            crate::fault::inject("before_dispatch");
            if let Some(end) = self.run_tools(pending, turn, stats).await? {
                return Ok(end);
            }
            if let Some(end) = self.structured_end(stats) {
                return Ok(end);
            }
        }
    }

    /// `init` (main agent), queued warnings, UserPromptSubmit hooks, and the prompt itself.
    async fn begin(
        &mut self,
        mut prompt: Vec<ContentBlock>,
        turn: &CancelToken,
    ) -> Result<Option<TurnEnd>, EmitError> {
        // SessionStart (or SubagentStart) hooks run first: their frames precede `init`.
        let start_notes = self.start_hooks_once(turn).await?;
        // `/clear` makes no request: a new session, then its `init` and `result`.
        let clear = self.scope.role.is_main() && super::clear::is_clear_command(&prompt);
        if clear {
            self.clear_conversation(turn).await?;
        }
        if self.scope.role.is_main() {
            // Servers an SDK host runs connect now that the host can answer; `init` lists
            // them with the rest.
            tokio::select! {
                _ = self.ctx.mcp().connect_sdk() => {}
                _ = turn.cancelled() => {}
            }
            self.sync_mcp_tools();
            let init = InitInfo {
                cwd: self.ctx.cwd().to_path_buf(),
                tools: self.offered_tool_names(),
                output_style: self.output_style.name.clone(),
                account: self.capability_account(None),
                model: self.model(),
                provider: self.ctx.provider_of(&self.model()).name().to_owned(),
                permission_mode: self.ctx.permission_mode().as_str().to_owned(),
                api_key_source: self.ctx.api_key_source().to_owned(),
                agents: self.ctx.agent_names(),
                additional_directories: self.ctx.additional_directories().to_vec(),
                mcp_servers: self
                    .ctx
                    .mcp_servers()
                    .iter()
                    .map(crate::mcp::ServerStatus::to_json)
                    .collect(),
                skills: self.ctx.extensions().skill_names(),
                slash_commands: self.ctx.extensions().command_names(),
            };
            // Sent even when it cannot be persisted, like the result: a run whose transcript
            // cannot be written still starts and ends visibly, with an error result.
            self.emitter.emit_final(Event::Init(init)).await?;
            if let Some(what) = self.missing_capability() {
                return Ok(Some(TurnEnd::CapabilityMissing { what }));
            }
        }
        for (message, fields) in std::mem::take(&mut self.warnings) {
            self.emitter
                .emit(Event::Warning { message, fields })
                .await?;
        }
        if clear {
            return Ok(Some(TurnEnd::Completed {
                text: String::new(),
            }));
        }
        if let Some(instructions) = super::compact::compact_command(&prompt) {
            if self.history.is_empty() {
                return Ok(Some(TurnEnd::Completed {
                    text: "There is nothing to compact yet.".into(),
                }));
            }
            let mut api_time = std::time::Duration::ZERO;
            return Ok(Some(
                match self
                    .compact(Trigger::Manual, &instructions, turn, &mut api_time)
                    .await?
                {
                    Ok(info) => TurnEnd::Completed {
                        text: format!(
                            "Compacted the conversation: about {} tokens before, {} after.",
                            info.pre_tokens, info.post_tokens
                        ),
                    },
                    Err(end) => end,
                },
            ));
        }
        if let Some(end) = self.prompt_hooks(&mut prompt, start_notes, turn).await? {
            return Ok(Some(end));
        }
        // After the hooks, which see the prompt as typed.
        self.expand_command(&mut prompt).await?;
        // The prompt is persisted (for resume) but not echoed to the front end.
        let uuid = self.prompt_uuid.take();
        if let Err(e) = self.tell_model_as(prompt, uuid).await {
            return match e {
                TellError::Emit(e) => Err(e),
                TellError::History(e) => Ok(Some(TurnEnd::Internal {
                    message: format!("the conversation could not take the prompt: {e}"),
                })),
            };
        }
        Ok(None)
    }

    /// Record user content in the transcript and append it to the history.
    pub(super) async fn tell_model(&mut self, content: Vec<ContentBlock>) -> Result<(), TellError> {
        self.tell_model_as(content, None).await
    }

    /// [`tell_model`](Self::tell_model), recorded under `uuid` when one is given.
    async fn tell_model_as(
        &mut self,
        content: Vec<ContentBlock>,
        uuid: Option<String>,
    ) -> Result<(), TellError> {
        if content.is_empty() {
            return Ok(());
        }
        self.emitter
            .record_as(
                uuid,
                Event::UserContent {
                    content: content.clone(),
                },
            )
            .await
            .map_err(TellError::Emit)?;
        self.history.push_user(content).map_err(TellError::History)
    }

    /// The checks before each model call: the turn cap, an interrupt, the shared budget; then
    /// tell the model which background tasks ended.
    async fn before_call(
        &mut self,
        turn: &CancelToken,
        stats: &mut TurnStats,
    ) -> Result<Option<TurnEnd>, EmitError> {
        stats.num_turns += 1;
        if let Some(max) = self.scope.max_turns {
            if stats.num_turns > max {
                return Ok(Some(TurnEnd::MaxTurns { limit: max }));
            }
        }
        if turn.is_cancelled() {
            return Ok(Some(TurnEnd::Interrupted {
                phase: Phase::Streaming,
                reason: turn.reason().unwrap_or(CancelReason::UserInterrupted),
            }));
        }
        // A subagent (or an earlier turn) may already have spent the shared budget: no request
        // is made past it.
        if let Some(end) = self.budget_spent() {
            return Ok(Some(end));
        }
        if self.scope.role.is_main() {
            let notes = self.ctx.tasks().take_notifications();
            if !notes.is_empty() {
                let blocks = notes.into_iter().map(ContentBlock::text).collect();
                self.tell_model(blocks)
                    .await
                    .map_err(TellError::into_emit)?;
            }
            // MCP servers that said their tools changed are listed again; what changed in
            // the servers (a restart, a failure) is said.
            self.ctx.mcp().refresh_lists().await;
            for message in self.ctx.mcp().take_notices() {
                let mut fields = keel_protocol::Extra::new();
                fields.insert("source".into(), serde_json::json!("mcp"));
                self.emitter
                    .emit(Event::Warning { message, fields })
                    .await?;
            }
        }
        self.sync_mcp_tools();
        Ok(None)
    }

    /// The request's `thinking` field, when thinking was asked for (and the request does not
    /// continue a tool loop begun without it, which the API refuses).
    fn thinking(&self) -> Option<serde_json::Value> {
        let n = self.ctx.thinking_tokens()?;
        (!self.history.continues_a_loop_without_thinking())
            .then(|| serde_json::json!({"type": "enabled", "budget_tokens": n}))
    }

    fn budget_spent(&self) -> Option<TurnEnd> {
        let limit = self.ctx.limits().max_budget_usd?;
        let spent = self.ctx.spent_usd();
        (spent >= limit).then_some(TurnEnd::Budget {
            limit_usd: limit,
            spent_usd: spent,
        })
    }

    /// One model call with the retry policy. `Ok(Err(end))`: the call ended the turn.
    async fn call_model(
        &mut self,
        turn: &CancelToken,
        stats: &mut TurnStats,
    ) -> Result<Result<Reply, TurnEnd>, EmitError> {
        // Never twice without a new exchange in between: a prefix (tools, system prompt)
        // larger than the threshold must not make every request a compaction.
        // Nor when the prefix alone takes half the threshold: summarizing cannot help then.
        let grown = self.history.len() > self.compacted_len.map_or(1, |n| n + 2);
        let full = self.ctx.limits().context.auto_compact
            && grown
            && (std::mem::take(&mut stats.compact_next)
                || self.tokens_in_use() > self.compact_threshold())
            && keel_model::estimate_tokens(self.prefix_bytes()) < self.compact_threshold() / 2;
        if full {
            let mut api_time = stats.api_time;
            let compacted = self.compact(Trigger::Auto, "", turn, &mut api_time).await?;
            stats.api_time = api_time;
            if let Err(end) = compacted {
                return Ok(Err(end));
            }
        }
        // A turn boundary: the transcript as it stands goes to the remote copy (in the
        // background; a slow bucket never holds the loop).
        if let (Some(remote), true) = (self.ctx.remote(), self.scope.role.is_main()) {
            remote.request();
        }
        let asked = self.model();
        let tools = self.request_tools();
        let mut req = ModelRequest {
            model: asked.clone(),
            max_tokens: self.ctx.limits().max_tokens,
            system: self.system.clone(),
            messages: self.history.request_messages(),
            tools,
            stream: true,
            metadata: None,
            thinking: self.thinking(),
        };
        if self.ctx.limits().context.prompt_caching {
            req.mark_cache_breakpoints();
        }
        let mut cx = CallCx {
            client: self.ctx.client().as_ref(),
            emitter: &self.emitter,
            policy: &self.ctx.limits().retry,
            include_partial: self.ctx.include_partial_messages(),
            cancel: turn,
            fallback_model: self.ctx.limits().fallback_model.as_deref(),
            api_time: &mut stats.api_time,
        };
        let failure = match call_with_retry(&mut cx, &mut req).await {
            Ok(reply) => {
                if req.model != asked {
                    // The fallback model took over; keep using it for the rest of the session.
                    match &mut self.scope.model {
                        Some(own) => *own = req.model.clone(),
                        None => self.ctx.set_model(req.model.clone()),
                    }
                }
                return Ok(Ok(reply));
            }
            Err(f) => f,
        };
        match failure {
            CallFailure::Emit(e) => Err(e),
            CallFailure::Api {
                error,
                attempts,
                elapsed,
                gave_up,
            } => Ok(Err(TurnEnd::ApiFailed {
                error,
                attempts,
                elapsed,
                gave_up,
            })),
            CallFailure::Cancelled {
                partial,
                request_id,
            } => {
                let reason = turn.reason().unwrap_or(CancelReason::UserInterrupted);
                if let Some(m) = partial {
                    self.ctx.add_usage(&m.model, &m.usage);
                    if let Some(pending) = self.accept_reply(m, request_id).await? {
                        self.close_unrun(
                            pending,
                            |c| rejected_text(&c.name, reason),
                            NonExecution::Rejected,
                        )
                        .await?;
                    }
                }
                Ok(Err(TurnEnd::Interrupted {
                    phase: Phase::Streaming,
                    reason,
                }))
            }
        }
    }

    /// Count the reply's cost, show and record it, and decide what comes next.
    async fn take_reply(
        &mut self,
        reply: Reply,
        turn: &CancelToken,
        stats: &mut TurnStats,
    ) -> Result<Taken, EmitError> {
        self.ctx
            .add_usage(&reply.message.model, &reply.message.usage);
        stats.stop_reason = reply.message.stop_reason.clone();
        let stop = reply.message.stop_reason.clone().unwrap_or_default();
        // A call being written when the output limit struck is incomplete: its input may be
        // cut anywhere (even into valid JSON), so it is never run.
        let cut_call = match (stop.as_str(), reply.message.content.last()) {
            ("max_tokens" | "model_context_window_exceeded", Some(ContentBlock::ToolUse(u))) => {
                Some(u.id.clone())
            }
            _ => None,
        };
        let final_text = text_of(&reply.message.content);
        let mut pending = self.accept_reply(reply.message, reply.request_id).await?;
        if let Some(end) = self.budget_spent() {
            if let Some(pending) = pending {
                let limit = self.ctx.limits().max_budget_usd.unwrap_or_default();
                self.close_unrun(
                    pending,
                    |c| format!("This {} call was not run: the session reached its cost budget (${limit}) with the reply that asked for it.", c.name),
                    NonExecution::Budget,
                )
                .await?;
            }
            return Ok(Taken::End(end));
        }
        match stop.as_str() {
            "refusal" => {
                if let Some(p) = pending {
                    self.close_unrun(
                        p,
                        |c| format!("This {} call was not run: the reply that asked for it was a refusal.", c.name),
                        NonExecution::Rejected,
                    )
                    .await?;
                }
                let text = std::mem::take(&mut stats.cut_text) + &final_text;
                return Ok(Taken::End(TurnEnd::Refused { text }));
            }
            "max_tokens" | "model_context_window_exceeded" => {
                let cut_call = cut_call.as_deref();
                let next = self
                    .after_cut_off(&stop, &mut pending, cut_call, &final_text, stats)
                    .await?;
                if let Some(next) = next {
                    return Ok(next);
                }
            }
            "pause_turn" if pending.is_none() && stats.pauses < MAX_PAUSES => {
                // The API paused a long turn: send it back as it is to let the model go on.
                stats.pauses += 1;
                return Ok(Taken::Again);
            }
            _ => stats.cut_offs = 0,
        }
        if pending.is_none() && self.structured.is_some() {
            // The answer must come as a StructuredOutput call: remind the model once.
            if !std::mem::replace(&mut stats.structured_nudged, true) {
                self.tell_model(vec![ContentBlock::text(crate::structured::NUDGE)])
                    .await
                    .map_err(TellError::into_emit)?;
                return Ok(Taken::Again);
            }
            return Ok(Taken::End(TurnEnd::StructuredMissing { text: final_text }));
        }
        match pending {
            Some(p) => Ok(Taken::Calls(p)),
            None if self
                .stop_hooks(&final_text, &mut stats.stop_continuations, turn)
                .await? =>
            {
                Ok(Taken::Again)
            }
            None => Ok(Taken::End(TurnEnd::Completed {
                text: std::mem::take(&mut stats.cut_text) + &final_text,
            })),
        }
    }

    /// A reply cut off by the output or context limit: end the turn after too many in a row,
    /// else close the call that was being written, or ask for the rest of a text reply.
    /// `Some`: what comes next; `None`: go on with the reply's other calls.
    async fn after_cut_off(
        &mut self,
        stop: &str,
        pending: &mut Option<PendingResults>,
        cut_call: Option<&str>,
        final_text: &str,
        stats: &mut TurnStats,
    ) -> Result<Option<Taken>, EmitError> {
        stats.cut_offs += 1;
        stats.compact_next |= stop == "model_context_window_exceeded";
        if stats.cut_offs > MAX_CUT_OFFS {
            stats.cut_text.push_str(final_text);
            if let Some(p) = pending.take() {
                self.close_unrun(p, |c| cut_off_text(&c.name), NonExecution::CutOff)
                    .await?;
            }
            return Ok(Some(Taken::End(TurnEnd::CutOff {
                text: std::mem::take(&mut stats.cut_text),
                times: stats.cut_offs - 1,
            })));
        }
        let Some(p) = pending.as_mut() else {
            // A text reply cut short: ask for the rest; the answer is the whole.
            stats.cut_text.push_str(final_text);
            self.tell_model(vec![ContentBlock::text(CONTINUE_AFTER_CUT_OFF)])
                .await
                .map_err(TellError::into_emit)?;
            return Ok(Some(Taken::Again));
        };
        let call = cut_call.and_then(|id| p.calls().iter().find(|c| c.id == id).cloned());
        if let Some(call) = call {
            let block = ContentBlock::tool_result(&call.id, cut_off_text(&call.name), true);
            let _ = p.resolve(block.clone());
            self.emit_unrun(vec![block], NonExecution::CutOff).await?;
        }
        Ok(None)
    }

    /// Run the reply's calls and close their obligation. `Some(end)`: the turn is over.
    async fn run_tools(
        &mut self,
        mut pending: PendingResults,
        turn: &CancelToken,
        stats: &mut TurnStats,
    ) -> Result<Option<TurnEnd>, EmitError> {
        let dcx = DispatchCx {
            ctx: &self.ctx,
            plan_only: self.scope.plan_only,
            tools: &self.tools,
            emitter: &self.emitter,
            turn,
            processes: &self.processes,
            reads: &self.reads,
            state: &*self.turn_state,
            transcript_path: self.transcript_path(),
            command: self.command.as_ref().map(|c| &c.expanded),
        };
        let dispatched = run_calls(&dcx, &mut pending).await;
        // Close the obligation before anything else, even if emitting failed.
        self.history.close(pending, |c| {
            rejected_text(&c.name, turn.reason().unwrap_or(CancelReason::Shutdown))
        });
        // Skills loaded by these calls: their text follows the results, in the same message.
        // Only the main agent has the Skill tool; a subagent it started in the same batch
        // must not take the text meant for its parent.
        let loaded = match self.scope.role.is_main() {
            true => self.ctx.extensions().take_pending(),
            false => Vec::new(),
        };
        if !loaded.is_empty() {
            let blocks = loaded.into_iter().map(ContentBlock::text).collect();
            self.tell_model(blocks)
                .await
                .map_err(TellError::into_emit)?;
        }
        let dispatched = dispatched?;
        stats.denials.extend(dispatched.denials);
        self.emitter.sync().await?;
        if let Some(reason) = dispatched.cancelled {
            return Ok(Some(TurnEnd::Interrupted {
                phase: Phase::Tools,
                reason,
            }));
        }
        Ok(dispatched
            .hook_stop
            .map(|(event, reason)| TurnEnd::HookStopped {
                event: event.as_str().to_owned(),
                reason,
            }))
    }

    /// After a batch of tool calls: a StructuredOutput call that matched the schema ends the
    /// turn with its input as the answer (no further request); too many refused ones end it
    /// with an error.
    fn structured_end(&self, stats: &mut TurnStats) -> Option<TurnEnd> {
        let s = self.structured.as_ref()?;
        if let Some(v) = s.accepted() {
            let text = v.to_string();
            stats.structured_output = Some(v);
            return Some(TurnEnd::Completed { text });
        }
        let (attempts, errors) = s.invalid();
        (attempts >= s.max_retries).then_some(TurnEnd::StructuredRetries { attempts, errors })
    }

    /// Emit one `assistant` event per content block and append the reply to the history.
    async fn accept_reply(
        &mut self,
        message: AssistantMessage,
        request_id: Option<String>,
    ) -> Result<Option<PendingResults>, EmitError> {
        for block in &message.content {
            if matches!(block, ContentBlock::Text(t) if t.text.is_empty()) {
                continue;
            }
            let mut m = message.clone();
            m.content = vec![block.clone()];
            m.stop_reason = None;
            m.stop_sequence = None;
            self.emitter
                .emit(Event::Assistant {
                    message: m,
                    request_id: request_id.clone(),
                })
                .await?;
        }
        self.history
            .push_assistant(message.content)
            .map_err(EmitError::History)
    }

    /// Close an obligation whose calls will not run, telling the model why (and the front end).
    pub(super) async fn close_unrun(
        &mut self,
        pending: PendingResults,
        text: impl Fn(&ToolUseBlock) -> String,
        kind: NonExecution,
    ) -> Result<(), EmitError> {
        let blocks = self.history.close(pending, text);
        self.emit_unrun(blocks, kind).await
    }

    /// Emit results for calls that did not run.
    pub(super) async fn emit_unrun(
        &self,
        blocks: Vec<ContentBlock>,
        kind: NonExecution,
    ) -> Result<(), EmitError> {
        for block in blocks {
            if !matches!(block, ContentBlock::ToolResult(_)) {
                continue;
            }
            self.emitter
                .emit(Event::ToolResult(ToolResultEvent {
                    block,
                    detail: None,
                    meta: CallMeta::NotRun(kind),
                }))
                .await?;
        }
        Ok(())
    }
}

/// Telling the model something failed.
#[derive(Debug)]
pub(super) enum TellError {
    /// It could not be recorded.
    Emit(EmitError),
    /// The history refused it (a keel bug: calls still open).
    History(crate::history::HistoryError),
}

impl TellError {
    fn into_emit(self) -> EmitError {
        match self {
            TellError::Emit(e) => e,
            TellError::History(e) => EmitError::History(e),
        }
    }
}

impl From<TellError> for EmitError {
    fn from(e: TellError) -> Self {
        e.into_emit()
    }
}
