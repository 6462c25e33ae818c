//! Running the tool calls of one reply: permissions, parallelism, truthful cancellation.
//!
//! Consecutive read-only calls run side by side; anything else runs alone, in order. Each call
//! gets a child of the turn's cancel token. The engine — not the tool — words what the model is
//! told when a call was stopped, from the token's reason: *rejected* (never started),
//! *interrupted* (it ran; partial output; maybe side effects), *timed out*, *sibling cancelled*.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_protocol::frames::{PermissionDeniedFrame, UserMessage};
use keel_protocol::{
    CancelReason, ContentBlock, Extra, Frame, MessageContent, PermissionDenial, Role, SystemFrame,
    ToolUseBlock, UserFrame,
};
use keel_tools::{CancelToken, ProcessRegistry, Tool, ToolContext, ToolLimits, ToolOutcome};
use serde_json::{json, Value};

use crate::emit::{new_uuid, now_rfc3339, EmitError, Emitter};
use crate::history::PendingResults;
use crate::permissions::{AllowedBy, PermissionConfig};
use crate::session::Shared;

mod gate;

/// What dispatching needs from the session.
pub(crate) struct DispatchCx<'a> {
    pub tools: &'a [Arc<dyn Tool>],
    pub permissions: &'a PermissionConfig,
    pub emitter: &'a Emitter,
    pub turn: &'a CancelToken,
    pub cwd: &'a std::path::Path,
    pub limits: &'a Arc<ToolLimits>,
    pub processes: &'a Arc<ProcessRegistry>,
    pub shared: &'a Shared,
    /// The session's hooks.
    pub hooks: Option<&'a dyn crate::hooks::Hooks>,
    /// Asked when the rules leave a call open; `None`: denied (headless).
    pub approver: Option<&'a dyn crate::approval::Approver>,
    /// The session's transcript, for hook inputs (empty when none is kept).
    pub transcript_path: String,
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
}

/// The result of one call, before it is emitted.
struct Finished {
    block: ContentBlock,
    tool_use_result: Option<Value>,
    meta: Value,
}

/// Run every call of `pending`, resolving each. On return every call has a result.
pub(crate) async fn run_calls(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
) -> Result<Dispatched, EmitError> {
    let mut out = Dispatched::default();
    let calls: Vec<ToolUseBlock> = pending.calls().to_vec();
    cx.shared.set_queued(&calls);
    let mut batch: Vec<Runnable> = Vec::new();
    for call in calls {
        if cx.turn.is_cancelled() || out.hook_stop.is_some() {
            break;
        }
        let Some(tool) = cx
            .tools
            .iter()
            .find(|t| t.name() == call.name || (call.name == "Agent" && t.name() == "Task"))
            .cloned()
        else {
            let names: Vec<&str> = cx.tools.iter().map(|t| t.name()).collect();
            let text = format!(
                "There is no tool named `{}`; it was not run. The tools you can call are: {}.",
                call.name,
                names.join(", ")
            );
            finish(
                cx,
                pending,
                &call,
                plain(&call, text, true, None),
                "unknown-tool",
            )
            .await?;
            continue;
        };
        let (call, allowed_by) =
            match gate::gate(cx, pending, call, tool.as_ref(), &mut out).await? {
                gate::Gate::Run { call, allowed_by } => (call, allowed_by),
                gate::Gate::Resolved => continue,
                gate::Gate::Halt => break,
            };
        let read_only = tool.is_read_only(&call.input);
        let r = Runnable {
            call,
            tool,
            read_only,
            allowed_by,
        };
        if r.read_only {
            batch.push(r);
            continue;
        }
        run_batch(cx, pending, std::mem::take(&mut batch), &mut out).await?;
        run_batch(cx, pending, vec![r], &mut out).await?;
    }
    if out.hook_stop.is_none() {
        run_batch(cx, pending, batch, &mut out).await?;
    }
    // Anything not resolved now never started: the turn was cancelled before its turn came.
    for id in pending.unresolved() {
        let call = pending
            .calls()
            .iter()
            .find(|c| c.id == id)
            .cloned()
            .expect("unresolved ids come from the calls");
        let text = match (&out.hook_stop, cx.turn.reason()) {
            (Some((event, _)), None) => format!(
                "A {event} hook stopped the turn before this {} call started, so it did not run and changed nothing.",
                call.name
            ),
            (_, reason) => {
                rejected_text(&call.name, reason.unwrap_or(CancelReason::UserInterrupted))
            }
        };
        let f = plain(&call, text, true, Some("rejected"));
        finish(cx, pending, &call, f, "rejected").await?;
    }
    out.cancelled = cx.turn.reason();
    Ok(out)
}

async fn deny(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    call: &ToolUseBlock,
    message: String,
    out: &mut Dispatched,
    source: &str,
) -> Result<(), EmitError> {
    cx.emitter
        .emit(Frame::System(SystemFrame::PermissionDenied(
            PermissionDeniedFrame {
                tool_name: call.name.clone(),
                tool_use_id: call.id.clone(),
                message: message.clone(),
                session_id: cx.emitter.session_id().to_owned(),
                uuid: new_uuid(),
                extra: Extra::new(),
            },
        )))
        .await?;
    out.denials.push(PermissionDenial {
        tool_name: call.name.clone(),
        tool_use_id: call.id.clone(),
        tool_input: call.input.clone(),
    });
    let mut f = plain(call, message.clone(), true, Some("user-rejected"));
    f.tool_use_result = Some(Value::String(format!("Error: {message}")));
    f.meta = json!([{ "id": call.id, "non_execution_kind": "user-rejected", "permission_decision": { "decision": "reject", "source": source } }]);
    finish(cx, pending, call, f, "denied").await
}

fn plain(
    call: &ToolUseBlock,
    text: String,
    is_error: bool,
    non_execution_kind: Option<&str>,
) -> Finished {
    let mut meta = json!({ "id": call.id });
    if let Some(k) = non_execution_kind {
        meta["non_execution_kind"] = json!(k);
    }
    Finished {
        tool_use_result: is_error.then(|| Value::String(format!("Error: {text}"))),
        block: ContentBlock::tool_result(&call.id, text, is_error),
        meta: json!([meta]),
    }
}

async fn finish(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    call: &ToolUseBlock,
    f: Finished,
    _why: &str,
) -> Result<(), EmitError> {
    cx.shared.set_done(&call.id);
    // Resolving cannot fail: the block answers one of this reply's calls.
    let _ = pending.resolve(f.block.clone());
    cx.emitter
        .emit(Frame::User(UserFrame {
            message: UserMessage {
                role: Role::User,
                content: MessageContent::Blocks(vec![f.block]),
                extra: Extra::new(),
            },
            parent_tool_use_id: cx.emitter.parent_tool_use_id().map(str::to_owned),
            session_id: cx.emitter.session_id().to_owned(),
            uuid: Some(new_uuid()),
            timestamp: Some(now_rfc3339()),
            tool_use_result: f.tool_use_result,
            tool_result_meta: Some(f.meta),
            extra: Extra::new(),
        }))
        .await
}

/// Run calls side by side; when a Bash call fails, its running Bash siblings are cancelled.
async fn run_batch(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    batch: Vec<Runnable>,
    out: &mut Dispatched,
) -> Result<(), EmitError> {
    if batch.is_empty() {
        return Ok(());
    }
    if cx.turn.is_cancelled() {
        return Ok(()); // the caller rejects what never started
    }
    let mut running = futures_util::stream::FuturesUnordered::new();
    let mut tokens: Vec<(String, String, CancelToken)> = Vec::new();
    for r in batch {
        let token = cx.turn.child();
        tokens.push((r.call.id.clone(), r.call.name.clone(), token.clone()));
        cx.shared.set_running(&r.call.id);
        let ctx = ToolContext::new(cx.cwd.to_path_buf(), token.clone())
            .with_limits(cx.limits.clone())
            .with_tool_use_id(r.call.id.clone())
            .with_processes(cx.processes.clone());
        let grace = cx.limits.kill_grace + cx.limits.drain_deadline + Duration::from_secs(2);
        running.push(async move {
            let started = Instant::now();
            let outcome =
                call_guarded(r.tool.clone(), r.call.input.clone(), ctx, token, grace).await;
            (r, outcome, started.elapsed())
        });
    }
    let mut failed_sibling: Option<(String, String)> = None;
    use futures_util::StreamExt;
    while let Some((r, outcome, elapsed)) = running.next().await {
        if r.call.name == "Bash"
            && matches!(outcome, ToolOutcome::Failed { .. })
            && failed_sibling.is_none()
        {
            failed_sibling = Some((r.call.name.clone(), r.call.id.clone()));
            for (id, name, token) in &tokens {
                if *id != r.call.id && name == "Bash" && !pending.is_resolved(id) {
                    token.cancel(CancelReason::SiblingError);
                }
            }
        }
        if let ToolOutcome::Stopped {
            processes_killed, ..
        } = &outcome
        {
            cx.shared.add_killed(*processes_killed);
        }
        let mut f = describe(&r, outcome, elapsed, failed_sibling.as_ref(), cx.limits);
        gate::post_tool_use(cx, &r, &mut f, out).await;
        finish(cx, pending, &r.call, f, "ran").await?;
    }
    Ok(())
}

/// Run one call in its own task so a panic becomes a result, and so a tool that ignores its
/// token cannot hold the turn hostage: after `grace` past a cancel the task is abandoned.
async fn call_guarded(
    tool: Arc<dyn Tool>,
    input: Value,
    ctx: ToolContext,
    token: CancelToken,
    grace: Duration,
) -> ToolOutcome {
    let started = Instant::now();
    let name = tool.name().to_owned();
    let mut handle = tokio::spawn(async move { tool.call(input, ctx).await });
    let joined = tokio::select! {
        j = &mut handle => j,
        _ = token.cancelled() => {
            match tokio::time::timeout(grace, &mut handle).await {
                Ok(j) => j,
                Err(_) => {
                    handle.abort();
                    return ToolOutcome::Stopped {
                        reason: token.reason().unwrap_or(CancelReason::Shutdown),
                        started: true,
                        partial: format!("({name} did not stop within {} ms of the cancel; keel abandoned it)", grace.as_millis()),
                        elapsed: started.elapsed(),
                        processes_killed: 0,
                    };
                }
            }
        }
    };
    match joined {
        Ok(outcome) => outcome,
        Err(e) if e.is_panic() => {
            let p = e.into_panic();
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            ToolOutcome::failed(format!(
                "The {name} tool crashed inside keel ({msg}). This is a keel bug, not a problem with your input; the call may have partly run. Try a different approach."
            ))
        }
        Err(_) => ToolOutcome::Stopped {
            reason: CancelReason::Shutdown,
            started: true,
            partial: String::new(),
            elapsed: started.elapsed(),
            processes_killed: 0,
        },
    }
}

fn allowed_meta(call: &ToolUseBlock, by: &AllowedBy) -> Value {
    let (source, reason) = match by {
        AllowedBy::ReadOnly => ("config", "read_only"),
        AllowedBy::Rule(_) => ("config", "rule"),
        AllowedBy::Mode(_) => ("config", "mode"),
        AllowedBy::Approver => ("user_temporary", "approver"),
        AllowedBy::Hook => ("hook", "hook"),
    };
    json!({ "id": call.id, "permission_decision": { "decision": "accept", "source": source, "reason_type": reason } })
}

fn describe(
    r: &Runnable,
    outcome: ToolOutcome,
    elapsed: Duration,
    sibling: Option<&(String, String)>,
    limits: &ToolLimits,
) -> Finished {
    let call = &r.call;
    let mut meta = allowed_meta(call, &r.allowed_by);
    let (text, is_error, tool_use_result) = match outcome {
        ToolOutcome::Ok { content, meta } => (content, false, meta),
        ToolOutcome::Failed { message, meta } => (message, true, meta),
        ToolOutcome::Stopped {
            reason,
            started,
            partial,
            elapsed: ran,
            processes_killed: _,
        } => {
            let ran = if ran.is_zero() { elapsed } else { ran };
            let (kind, text) = if !started {
                ("rejected", rejected_text(&call.name, reason))
            } else {
                match reason {
                    CancelReason::UserInterrupted | CancelReason::Shutdown => (
                        "interrupted",
                        interrupted_text(&call.name, reason, ran, &partial),
                    ),
                    CancelReason::Timeout => (
                        "timed-out",
                        timed_out_text(&call.name, ran, &partial, limits),
                    ),
                    CancelReason::SiblingError => (
                        "sibling-cancelled",
                        sibling_text(&call.name, ran, &partial, sibling),
                    ),
                }
            };
            meta["non_execution_kind"] = json!(kind);
            let tur = json!({ "stdout": partial, "stderr": "", "interrupted": true, "stop_reason": reason.as_str(), "started": started });
            (text, true, Some(tur))
        }
    };
    Finished {
        block: ContentBlock::tool_result(&call.id, text, is_error),
        tool_use_result,
        meta: json!([meta]),
    }
}

/// The call never started.
pub(crate) fn rejected_text(tool: &str, reason: CancelReason) -> String {
    match reason {
        CancelReason::UserInterrupted => format!(
            "The user interrupted before this {tool} call started, so it did not run and changed nothing. Stop and wait for the user's next instruction."
        ),
        CancelReason::Shutdown => format!("keel was shutting down before this {tool} call started, so it did not run and changed nothing."),
        CancelReason::Timeout => format!("A deadline passed before this {tool} call started, so it did not run and changed nothing."),
        CancelReason::SiblingError => format!("A parallel call failed before this {tool} call started, so it did not run and changed nothing."),
    }
}

fn partial_block(partial: &str) -> String {
    if partial.trim().is_empty() {
        "It produced no output before it was stopped.".to_owned()
    } else {
        format!("Output captured before it was stopped:\n{partial}")
    }
}

fn interrupted_text(tool: &str, reason: CancelReason, ran: Duration, partial: &str) -> String {
    let who = if reason == CancelReason::Shutdown {
        "keel was shutting down and stopped"
    } else {
        "The user interrupted"
    };
    format!(
        "{who} this {tool} call after it had run for {:.1} s. It did not finish, and it may already have changed files or other state. {}\nStop and wait for the user's next instruction.",
        ran.as_secs_f64(),
        partial_block(partial)
    )
}

fn timed_out_text(tool: &str, ran: Duration, partial: &str, limits: &ToolLimits) -> String {
    format!(
        "This {tool} call timed out after {:.1} s and was stopped (its whole process group was killed). It may have partly run. {}\nIf it needs longer, pass a larger timeout (at most {} ms), or run something quicker.",
        ran.as_secs_f64(),
        partial_block(partial),
        limits.max_timeout.as_millis()
    )
}

fn sibling_text(
    tool: &str,
    ran: Duration,
    partial: &str,
    sibling: Option<&(String, String)>,
) -> String {
    let which = sibling
        .map(|(n, id)| format!("the {n} call {id}"))
        .unwrap_or_else(|| "another call".into());
    format!(
        "This {tool} call was cancelled after {:.1} s because {which}, running beside it, failed. The user did not interrupt anything. It may have partly run. {}\nLook at the failed call, fix it, then rerun what is still needed.",
        ran.as_secs_f64(),
        partial_block(partial)
    )
}
