//! Whether one call may run: PreToolUse hooks, the permission rules (with the changes a host
//! made during the session), and the approver when the rules leave it open. After a call ran,
//! PostToolUse hooks.

use keel_protocol::{CancelReason, ContentBlock, ToolResultContent, ToolUseBlock};
use keel_tools::Tool;
use serde_json::Value;

use super::hook_input::tool_hook_input;
use super::{deny, DispatchCx, Dispatched, Finished, Runnable};
use crate::approval::{suggestions, Approval, ApprovalRequest};
use crate::emit::EmitError;
use crate::event::DenialSource;
use crate::history::PendingResults;
use crate::hooks::{run_seen, HookEvent};
use crate::permissions::{AllowedBy, Decision};

/// The gate's verdict on one call (returned once per call, never stored: size is no concern).
#[allow(clippy::large_enum_variant)]
pub(super) enum Gate {
    /// Run it (maybe with an input a hook or the host replaced).
    Run {
        call: ToolUseBlock,
        allowed_by: AllowedBy,
        /// The path the decision was made on, resolved: the tool opens this one.
        judged: Option<std::path::PathBuf>,
        /// Whether it only reads (it may run beside other such calls), from the same
        /// judgement the decision read.
        read_only: bool,
    },
    /// It has its result already (blocked or denied); go on with the next call.
    Resolved,
    /// Stop dispatching: the turn was cancelled (this call stays unresolved) or a hook stopped
    /// the turn (`out.hook_stop` is set).
    Halt,
}

/// What the PreToolUse hooks said about a call that may still run.
#[derive(Default)]
struct HookVerdict {
    /// Run it without asking (deny rules still win).
    allow: bool,
    /// Ask even if the rules allow it; why.
    ask: Option<String>,
}

/// The live permission rules, with this session's own tool output readable.
pub(super) fn live_permissions(cx: &DispatchCx<'_>) -> crate::permissions::PermissionConfig {
    let mut p = cx.ctx.permissions(cx.plan_only);
    if let Some(d) = &cx.ctx.limits().tools.spill_dir {
        p.roots.readable.push(d.clone());
    }
    p
}

/// Whether a call only reads, for batching: a Bash call by its judgement (the session's
/// roots), never by the tool's own look with the process's `.` and `HOME`.
pub(super) fn read_only_of(
    tool: &dyn Tool,
    input: &serde_json::Value,
    judgement: Option<&keel_policy::Judgement>,
) -> bool {
    match judgement {
        Some(j) => j.read_only(),
        None if tool.kind() == keel_tools::ToolKind::Bash => false,
        None => tool.is_read_only(input),
    }
}

/// Decide one call; resolve it here when it will not run. The steps: PreToolUse hooks, the
/// rules (with the hooks' opinion), then the approver when the rules leave it open.
pub(super) async fn gate(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    mut call: ToolUseBlock,
    tool: &dyn Tool,
    out: &mut Dispatched,
) -> Result<Gate, EmitError> {
    let hooks = match pre_tool_use(cx, pending, &mut call, out).await? {
        Ok(v) => v,
        Err(gate) => return Ok(gate),
    };
    // The mode and rules may have changed while the hooks ran: decide on the live ones.
    let mut perms = live_permissions(cx);
    if let Some(c) = cx.command {
        c.widen_user(&mut perms);
    }
    // One judgement of the call, with the session's roots: the decision and the batching
    // both read it.
    let judgement = perms.judge_call(tool.kind(), &call.input);
    let read_only = read_only_of(tool, &call.input, judgement.as_ref());
    let mut decision = perms.decide_judged(
        &call.name,
        tool.kind(),
        &call.input,
        read_only,
        judgement.as_ref(),
    );
    if hooks.ask.is_some() && matches!(decision, Decision::Allow(_)) {
        decision = Decision::Ask;
    }
    if hooks.allow && matches!(decision, Decision::Ask | Decision::AskWhy(_)) {
        decision = Decision::Allow(AllowedBy::Hook);
    }
    // A custom command's allowed-tools only narrow (checked last: nothing lifts them).
    if let Some(message) = cx
        .command
        .and_then(|c| c.refuses(&perms, &call.name, tool.kind(), &call.input, read_only))
    {
        if !matches!(decision, Decision::Deny { .. }) {
            decision = Decision::Deny { message };
        }
    }
    match decision {
        Decision::Allow(allowed_by) => {
            let judged = perms.judged_path(tool.kind(), &call.input);
            Ok(Gate::Run {
                call,
                allowed_by,
                judged,
                read_only,
            })
        }
        Decision::Deny { message } => {
            deny(cx, pending, &call, message, out, DenialSource::Config).await?;
            Ok(Gate::Resolved)
        }
        Decision::Ask => ask(cx, pending, call, tool, hooks.ask, out).await,
        Decision::AskWhy(why) => ask(cx, pending, call, tool, hooks.ask.or(Some(why)), out).await,
    }
}

/// Run the PreToolUse hooks. `Err(gate)`: they settled the call (blocked it, stopped the
/// turn, or the turn was cancelled while they ran); otherwise their opinion, with the call's
/// input replaced if a hook asked.
async fn pre_tool_use(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    call: &mut ToolUseBlock,
    out: &mut Dispatched,
) -> Result<Result<HookVerdict, Gate>, EmitError> {
    let Some(hooks) = cx
        .ctx
        .hooks()
        .filter(|h| h.wants(HookEvent::PreToolUse, Some(&call.name)))
    else {
        return Ok(Ok(HookVerdict::default()));
    };
    let mode = live_permissions(cx).mode;
    let input = tool_hook_input(cx, HookEvent::PreToolUse, call, mode.as_str());
    let Some(d) = run_seen(hooks.as_ref(), input, cx.turn, cx.emitter).await else {
        return Ok(Err(Gate::Halt));
    };
    if let Some(reason) = d.stop {
        let message = format!(
            "{} was not run: a PreToolUse hook stopped the turn: {reason}",
            call.name
        );
        deny(cx, pending, call, message, out, DenialSource::Hook).await?;
        out.hook_stop = Some((HookEvent::PreToolUse, reason));
        return Ok(Err(Gate::Halt));
    }
    if let Some(reason) = d.block {
        let message = format!(
            "{} was not run: a PreToolUse hook blocked it: {reason}",
            call.name
        );
        deny(cx, pending, call, message, out, DenialSource::Hook).await?;
        return Ok(Err(Gate::Resolved));
    }
    if let Some(input) = d.updated_input {
        call.input = input;
    }
    Ok(Ok(HookVerdict {
        allow: d.allow,
        ask: d.ask,
    }))
}

/// The rules leave the call open: ask the session's approver (headless: deny, saying how to
/// allow it). Rules granted with an approval go into the shared context, for every agent.
async fn ask(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    call: ToolUseBlock,
    tool: &dyn Tool,
    reason: Option<String>,
    out: &mut Dispatched,
) -> Result<Gate, EmitError> {
    let perms = live_permissions(cx);
    match super::permission_hook::answer(cx, &call, perms.mode.as_str()).await {
        super::permission_hook::Answer::Open => {}
        super::permission_hook::Answer::Halt => return Ok(Gate::Halt),
        super::permission_hook::Answer::Allow => {
            let judged = perms.judged_path(tool.kind(), &call.input);
            let j = perms.judge_call(tool.kind(), &call.input);
            let read_only = read_only_of(tool, &call.input, j.as_ref());
            return Ok(Gate::Run {
                call,
                allowed_by: AllowedBy::Hook,
                judged,
                read_only,
            });
        }
        super::permission_hook::Answer::Deny { message, interrupt } => {
            deny(cx, pending, &call, message, out, DenialSource::Hook).await?;
            if interrupt {
                cx.turn.cancel(CancelReason::UserInterrupted);
                return Ok(Gate::Halt);
            }
            return Ok(Gate::Resolved);
        }
    }
    let Some(approver) = cx.ctx.approver() else {
        let message =
            perms.headless_denial(&call.name, tool.kind(), &call.input, reason.as_deref());
        deny(cx, pending, &call, message, out, DenialSource::Config).await?;
        return Ok(Gate::Resolved);
    };
    let req = approval_request(cx, &call, tool, &perms, reason);
    notify_waiting(cx, &call, &perms);
    let answer = tokio::select! {
        a = approver.approve(req) => a,
        _ = cx.turn.cancelled() => return Ok(Gate::Halt),
    };
    match answer {
        Approval::Allow {
            updated_input,
            updates,
        } => approved(cx, pending, call, tool, updated_input, &updates, out).await,
        Approval::Deny { message, interrupt } => {
            let message = if message.trim().is_empty() {
                format!(
                    "The user did not allow this {} call, so it was not run.",
                    call.name
                )
            } else {
                message
            };
            deny(cx, pending, &call, message, out, DenialSource::User).await?;
            if interrupt {
                cx.turn.cancel(CancelReason::UserInterrupted);
                return Ok(Gate::Halt);
            }
            Ok(Gate::Resolved)
        }
    }
}

/// What the approver is asked: the call, the path it would write, the rules that would allow
/// it from now on, and why the rules did not decide.
fn approval_request(
    cx: &DispatchCx<'_>,
    call: &ToolUseBlock,
    tool: &dyn Tool,
    perms: &crate::permissions::PermissionConfig,
    reason: Option<String>,
) -> ApprovalRequest {
    ApprovalRequest {
        tool_name: call.name.clone(),
        tool_use_id: call.id.clone(),
        input: call.input.clone(),
        description: call
            .input
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        blocked_path: tool
            .kind()
            .edits_files()
            .then(|| tool.kind().path_field())
            .flatten()
            .and_then(|f| call.input.get(f).and_then(Value::as_str))
            .map(|p| cx.ctx.cwd().join(p).display().to_string()),
        suggestions: suggestions(perms, &call.name, tool.kind(), &call.input),
        reason,
        mode: perms.mode,
    }
}

/// Notification hooks hear that keel is waiting for the user; they decide nothing.
fn notify_waiting(
    cx: &DispatchCx<'_>,
    call: &ToolUseBlock,
    perms: &crate::permissions::PermissionConfig,
) {
    if let Some(hooks) = cx
        .ctx
        .hooks()
        .filter(|h| h.wants(crate::hooks::HookEvent::Notification, None))
    {
        let mut input = tool_hook_input(
            cx,
            crate::hooks::HookEvent::Notification,
            call,
            perms.mode.as_str(),
        );
        input.tool = None;
        input.extra.push((
            "message".into(),
            format!("keel needs your permission to use {}", call.name).into(),
        ));
        input
            .extra
            .push(("notification_type".into(), "permission_prompt".into()));
        tokio::spawn(async move {
            let _ = hooks.run(input).await;
        });
    }
}

/// The user (or host) allowed the call, perhaps with a changed input and new rules: the rules
/// go into the shared context; a changed input is judged again.
async fn approved(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    mut call: ToolUseBlock,
    tool: &dyn Tool,
    updated_input: Option<Value>,
    updates: &[crate::approval::PermissionUpdate],
    out: &mut Dispatched,
) -> Result<Gate, EmitError> {
    for refused in cx.ctx.apply_permission_updates(updates) {
        cx.emitter
            .emit(crate::event::Event::Warning {
                message: format!("the approval's mode change was not applied: {refused}"),
                fields: keel_protocol::Extra::new(),
            })
            .await?;
    }
    if let Some(input) = updated_input.filter(Value::is_object) {
        call.input = input;
        // A changed input is a new call as far as deny rules go.
        let perms = live_permissions(cx);
        if let Some((rule, _)) = perms.denied_by(&call.name, tool.kind(), &call.input) {
            let message = format!(
                "{} was not run: the input the host approved is denied by the rule `{}` from {}.",
                call.name,
                rule.text(),
                rule.source
            );
            deny(cx, pending, &call, message, out, DenialSource::Config).await?;
            return Ok(Gate::Resolved);
        }
    }
    let live = live_permissions(cx);
    let judged = live.judged_path(tool.kind(), &call.input);
    // The host may have changed the input: judged again, with the session's roots.
    let j = live.judge_call(tool.kind(), &call.input);
    let read_only = read_only_of(tool, &call.input, j.as_ref());
    Ok(Gate::Run {
        call,
        allowed_by: AllowedBy::Approver,
        judged,
        read_only,
    })
}

/// Run PostToolUse (or, for a call that failed, PostToolUseFailure) hooks for a call that ran;
/// their notes are appended to its result.
pub(super) async fn post_tool_use(
    cx: &DispatchCx<'_>,
    r: &Runnable,
    f: &mut Finished,
    out: &mut Dispatched,
) {
    // A call that failed fires PostToolUseFailure instead, with the error as its input.
    let failed = matches!(&f.block, ContentBlock::ToolResult(b) if b.is_error == Some(true));
    let event = if failed {
        HookEvent::PostToolUseFailure
    } else {
        HookEvent::PostToolUse
    };
    let Some(hooks) = cx
        .ctx
        .hooks()
        .filter(|h| h.wants(event, Some(&r.call.name)))
    else {
        return;
    };
    if cx.turn.is_cancelled() {
        return;
    }
    let mode = live_permissions(cx).mode;
    let mut input = tool_hook_input(cx, event, &r.call, mode.as_str());
    let text = match &f.block {
        ContentBlock::ToolResult(b) => match &b.content {
            ToolResultContent::Text(t) => t.clone(),
            ToolResultContent::Blocks(_) => String::new(),
        },
        _ => String::new(),
    };
    if failed {
        input.extra.push(("error".into(), Value::String(text)));
        input
            .extra
            .push(("is_interrupt".into(), Value::Bool(false)));
    } else if let Some(t) = input.tool.as_mut() {
        t.response = Some(f.detail.clone().unwrap_or(Value::String(text)));
    }
    let Some(d) = run_seen(hooks.as_ref(), input, cx.turn, cx.emitter).await else {
        return;
    };
    let mut notes: Vec<String> = d
        .block
        .iter()
        .map(|b| format!("A {event} hook says: {b}"))
        .collect();
    notes.extend(d.additional_context);
    if let Some(reason) = d.stop {
        notes.push(format!("A {event} hook stopped the turn: {reason}"));
        if out.hook_stop.is_none() {
            out.hook_stop = Some((event, reason));
        }
    }
    if notes.is_empty() {
        return;
    }
    if let ContentBlock::ToolResult(b) = &mut f.block {
        let note = notes.join("\n");
        match &mut b.content {
            ToolResultContent::Text(t) => {
                if !t.is_empty() {
                    t.push_str("\n\n");
                }
                t.push_str(&note);
            }
            ToolResultContent::Blocks(blocks) => blocks.push(ContentBlock::text(note)),
        }
    }
}
