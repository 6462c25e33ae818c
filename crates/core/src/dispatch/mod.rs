//! Running the tool calls of one reply: permissions, parallelism, truthful cancellation.
//!
//! Consecutive read-only calls run side by side; anything else runs alone, in order. Each call
//! gets a child of the turn's cancel token. The engine — not the tool — words what the model is
//! told when a call was stopped, from the token's reason: *rejected* (never started),
//! *interrupted* (it ran; partial output; maybe side effects), *timed out*, *sibling cancelled*.

mod gate;
mod hook_input;
#[cfg(test)]
mod judgement_tests;
mod permission_hook;
mod run;
mod texts;

pub(crate) use run::panic_message;
pub(crate) use texts::rejected_text;

use std::sync::Arc;

use keel_protocol::{CancelReason, ContentBlock, PermissionDenial, ToolUseBlock};
use keel_tools::{CancelToken, ProcessRegistry, Tool};
use serde_json::Value;

use crate::context::SessionContext;
use crate::emit::{EmitError, Emitter};
use crate::event::{CallMeta, DenialSource, Event, NonExecution, ToolResultEvent};
use crate::history::PendingResults;
use crate::permissions::AllowedBy;

/// Where the dispatcher records how far each call got, so that an interrupt can say truthfully
/// which calls ran, which never started, and how many processes it stopped (the session's turn
/// state keeps this).
pub(crate) trait CallStates: Send + Sync {
    /// These calls are about to be dispatched; none has started.
    fn set_queued(&self, calls: &[keel_protocol::ToolUseBlock]);
    /// The call `id` started running.
    fn set_running(&self, id: &str);
    /// The call `id`'s result was given (emitted and recorded).
    fn set_done(&self, id: &str);
    /// Processes stopped when a call was cut short.
    fn add_killed(&self, n: usize);
}

/// What dispatching needs from the session.
pub(crate) struct DispatchCx<'a> {
    /// The session's live state: rules, mode, hooks, approver, limits.
    pub ctx: &'a Arc<SessionContext>,
    /// The agent is held to plan mode.
    pub plan_only: bool,
    pub tools: &'a [Arc<dyn Tool>],
    pub emitter: &'a Emitter,
    pub turn: &'a CancelToken,
    pub processes: &'a Arc<ProcessRegistry>,
    /// The files this agent has read.
    pub reads: &'a Arc<keel_tools::ReadLedger>,
    pub state: &'a dyn CallStates,
    /// The session's transcript, for hook inputs (empty when none is kept).
    pub transcript_path: String,
    /// The custom command the turn runs: its `allowed-tools` bind the turn's calls.
    pub command: Option<&'a crate::extend::Expanded>,
}

/// What happened while dispatching.
#[derive(Debug, Default)]
pub(crate) struct Dispatched {
    /// Calls refused by permissions.
    pub denials: Vec<PermissionDenial>,
    /// Set when the turn's token was cancelled during dispatch.
    pub cancelled: Option<CancelReason>,
    /// Set when a hook answered `continue: false`: the event and its reason.
    pub hook_stop: Option<(crate::hooks::HookEvent, String)>,
}

/// A call ready to run (permission granted, tool found).
struct Runnable {
    call: ToolUseBlock,
    tool: Arc<dyn Tool>,
    read_only: bool,
    allowed_by: AllowedBy,
    /// The path the permission decision resolved, which the tool opens.
    judged: Option<std::path::PathBuf>,
}

/// The result of one call, before it is emitted.
struct Finished {
    block: ContentBlock,
    detail: Option<Value>,
    meta: CallMeta,
}

impl Finished {
    /// A result for a call that did not run (or has nothing but text to say).
    fn plain(call: &ToolUseBlock, text: String, is_error: bool, meta: CallMeta) -> Self {
        Finished {
            detail: is_error.then(|| Value::String(format!("Error: {text}"))),
            block: ContentBlock::tool_result(&call.id, text, is_error),
            meta,
        }
    }
}

/// The tool a call names (by its name or an alias), if the session offers it.
fn find_tool(tools: &[Arc<dyn Tool>], called: &str) -> Option<Arc<dyn Tool>> {
    tools
        .iter()
        .find(|t| t.name() == called)
        .or_else(|| tools.iter().find(|t| t.kind().answers_to(t.name(), called)))
        .cloned()
}

/// Run every call of `pending`, resolving each. On return every call has a result.
pub(crate) async fn run_calls(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
) -> Result<Dispatched, EmitError> {
    let mut out = Dispatched::default();
    let calls: Vec<ToolUseBlock> = pending.calls().to_vec();
    cx.state.set_queued(&calls);
    let mut batch: Vec<Runnable> = Vec::new();
    for call in calls {
        if cx.turn.is_cancelled() || out.hook_stop.is_some() {
            break;
        }
        // Answered before dispatch (a call cut off by the output limit): never run.
        if pending.is_resolved(&call.id) {
            continue;
        }
        let Some(tool) = find_tool(cx.tools, &call.name) else {
            let names: Vec<&str> = cx.tools.iter().map(|t| t.name()).collect();
            let text = format!(
                "There is no tool named `{}`; it was not run. The tools you can call are: {}.",
                call.name,
                names.join(", ")
            );
            let f = Finished::plain(&call, text, true, CallMeta::Plain);
            finish(cx, pending, &call, f).await?;
            continue;
        };
        // Whether it may run beside its neighbours comes from the gate's one judgement.
        let (call, allowed_by, judged, read_only) =
            match gate::gate(cx, pending, call, tool.as_ref(), &mut out).await? {
                gate::Gate::Run {
                    call,
                    allowed_by,
                    judged,
                    read_only,
                } => (call, allowed_by, judged, read_only),
                gate::Gate::Resolved => continue,
                gate::Gate::Halt => break,
            };
        let r = Runnable {
            call,
            tool,
            read_only,
            allowed_by,
            judged,
        };
        if r.read_only {
            batch.push(r);
            continue;
        }
        run::run_batch(cx, pending, std::mem::take(&mut batch), &mut out).await?;
        run::run_batch(cx, pending, vec![r], &mut out).await?;
    }
    if out.hook_stop.is_none() {
        run::run_batch(cx, pending, batch, &mut out).await?;
    }
    reject_unstarted(cx, pending, &out).await?;
    out.cancelled = cx.turn.reason();
    Ok(out)
}

/// Anything not resolved now never started: the turn was cancelled (or a hook stopped it)
/// before its turn came.
async fn reject_unstarted(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    out: &Dispatched,
) -> Result<(), EmitError> {
    for id in pending.unresolved() {
        let Some(call) = pending.calls().iter().find(|c| c.id == id).cloned() else {
            continue;
        };
        let text = match (&out.hook_stop, cx.turn.reason()) {
            (Some((event, _)), None) => format!(
                "A {event} hook stopped the turn before this {} call started, so it did not run and changed nothing.",
                call.name
            ),
            (_, reason) => {
                rejected_text(&call.name, reason.unwrap_or(CancelReason::UserInterrupted))
            }
        };
        let f = Finished::plain(&call, text, true, CallMeta::NotRun(NonExecution::Rejected));
        finish(cx, pending, &call, f).await?;
    }
    Ok(())
}

/// Refuse a call: a `permission_denied` event, a denial in the result, an error result.
async fn deny(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    call: &ToolUseBlock,
    message: String,
    out: &mut Dispatched,
    source: DenialSource,
) -> Result<(), EmitError> {
    cx.emitter
        .emit(Event::PermissionDenied {
            tool_name: call.name.clone(),
            tool_use_id: call.id.clone(),
            message: message.clone(),
        })
        .await?;
    out.denials.push(PermissionDenial {
        tool_name: call.name.clone(),
        tool_use_id: call.id.clone(),
        tool_input: call.input.clone(),
    });
    let f = Finished::plain(call, message, true, CallMeta::Denied(source));
    finish(cx, pending, call, f).await
}

/// Resolve a call and emit its result.
async fn finish(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    call: &ToolUseBlock,
    f: Finished,
) -> Result<(), EmitError> {
    cx.state.set_done(&call.id);
    // Resolving cannot fail: the block answers one of this reply's calls.
    let _ = pending.resolve(f.block.clone());
    cx.emitter
        .emit(Event::ToolResult(ToolResultEvent {
            block: f.block,
            detail: f.detail,
            meta: f.meta,
        }))
        .await
}
