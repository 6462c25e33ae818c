//! Running allowed calls: side by side in a batch, each in its own task, each reported
//! truthfully however it ended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use keel_protocol::{CancelReason, ContentBlock, ToolUseBlock};
use keel_tools::{CancelToken, Tool, ToolContext, ToolLimits, ToolOutcome};
use serde_json::{json, Value};

use super::texts::{interrupted_text, rejected_text, sibling_text, timed_out_text};
use super::{finish, gate, DispatchCx, Dispatched, Finished, Runnable};
use crate::emit::EmitError;
use crate::event::{CallMeta, NonExecution};
use crate::history::PendingResults;

/// Run calls side by side. When a call whose kind cancels its siblings fails (Bash), its
/// running siblings of that kind are cancelled.
pub(super) async fn run_batch(
    cx: &DispatchCx<'_>,
    pending: &mut PendingResults,
    batch: Vec<Runnable>,
    out: &mut Dispatched,
) -> Result<(), EmitError> {
    if batch.is_empty() || cx.turn.is_cancelled() {
        return Ok(()); // the caller rejects what never started
    }
    let limits = cx.ctx.limits().tools.clone();
    let hidden = cx.ctx.permissions(cx.plan_only).read_filter();
    let checkpoints = cx.ctx.checkpoints();
    let mut running = futures_util::stream::FuturesUnordered::new();
    let mut tokens: Vec<(String, keel_tools::ToolKind, CancelToken)> = Vec::new();
    for r in batch {
        let token = cx.turn.child();
        tokens.push((r.call.id.clone(), r.tool.kind(), token.clone()));
        cx.state.set_running(&r.call.id);
        r.tool.prepare(&r.call.input, &r.call.id);
        let ctx = ToolContext::new(cx.ctx.cwd(), token.clone())
            .with_limits(limits.clone())
            .with_tool_use_id(r.call.id.clone())
            .with_processes(cx.processes.clone())
            .with_reads(cx.reads.clone())
            .with_hidden(hidden.clone())
            .with_judged(r.judged.clone())
            .with_checkpoints(checkpoints.clone())
            .with_web_gate(web_gate(cx, &r))
            .with_home(cx.ctx.home().map(std::path::Path::to_path_buf));
        let grace = limits.kill_grace + limits.drain_deadline + Duration::from_secs(2);
        running.push(async move {
            let started = Instant::now();
            let outcome =
                call_guarded(r.tool.clone(), r.call.input.clone(), ctx, token, grace).await;
            (r, outcome, started.elapsed())
        });
    }
    let mut failed_sibling: Option<(String, String)> = None;
    while let Some((r, outcome, elapsed)) = running.next().await {
        let kind = r.tool.kind();
        if kind.cancels_siblings_on_failure()
            && matches!(outcome, ToolOutcome::Failed { .. })
            && failed_sibling.is_none()
        {
            failed_sibling = Some((r.call.name.clone(), r.call.id.clone()));
            for (id, k, token) in &tokens {
                if *id != r.call.id && *k == kind && !pending.is_resolved(id) {
                    token.cancel(CancelReason::SiblingError);
                }
            }
        }
        if let ToolOutcome::Stopped {
            processes_killed, ..
        } = &outcome
        {
            cx.state.add_killed(*processes_killed);
        }
        let mut f = describe(&r, outcome, elapsed, failed_sibling.as_ref(), &limits);
        bound(&mut f, &limits, &r.call.id).await;
        gate::post_tool_use(cx, &r, &mut f, out).await;
        finish(cx, pending, &r.call, f).await?;
    }
    Ok(())
}

/// A WebFetch call's gate for the URLs it reaches after its first: the same decision again.
fn web_gate(cx: &DispatchCx<'_>, r: &Runnable) -> Option<Arc<dyn keel_tools::web::HopGate>> {
    (r.tool.kind() == keel_tools::ToolKind::WebFetch).then(|| {
        Arc::new(crate::web::CallGate {
            ctx: cx.ctx.clone(),
            emitter: cx.emitter.clone(),
            cancel: cx.turn.clone(),
            plan_only: cx.plan_only,
            command: cx.command.cloned(),
            call: r.call.clone(),
            transcript_path: cx.transcript_path.clone(),
        }) as Arc<dyn keel_tools::web::HopGate>
    })
}

/// Hold every result to one size cap, whatever tool made it: a longer text keeps its head and
/// tail, and the whole is saved beside the session (the marker names the file). A result too
/// large for the API would otherwise be written into the history — and every resume of the
/// session would send it again.
async fn bound(f: &mut Finished, limits: &ToolLimits, call_id: &str) {
    let max = limits.max_result_bytes;
    let ContentBlock::ToolResult(b) = &mut f.block else {
        return;
    };
    let keel_protocol::ToolResultContent::Text(text) = &b.content else {
        return;
    };
    if text.len() > max {
        let text = text.clone();
        let spill = limits
            .spill_dir
            .as_ref()
            .map(|d| d.join(format!("{call_id}.result.txt")));
        let bounded = tokio::task::spawn_blocking(move || {
            keel_tools::output::bound_text(&text, max, spill.as_deref())
        })
        .await;
        if let Ok(Some(t)) = bounded {
            b.content = keel_protocol::ToolResultContent::Text(t);
        }
    }
    // The structured detail goes to front ends and the transcript: hold it to the same cap.
    if let Some(d) = &f.detail {
        if d.to_string().len() > max {
            f.detail = Some(
                json!({"truncated": true, "reason": format!("the detail of this result was over {max} bytes")}),
            );
        }
    }
}

/// A tool result; when the tool's detail carries an image, the model gets it as an image block
/// before the text, and the front ends' detail keeps only what describes it.
fn with_image(
    id: &str,
    text: String,
    is_error: bool,
    detail: Option<Value>,
) -> (ContentBlock, Option<Value>) {
    let mut detail = detail;
    let image = detail
        .as_mut()
        .and_then(Value::as_object_mut)
        .and_then(|d| d.remove(keel_tools::image::IMAGE_DATA_KEY));
    let Some(image) = image else {
        return (ContentBlock::tool_result(id, text, is_error), detail);
    };
    let source = json!({
        "type": "base64",
        "media_type": image["media_type"],
        "data": image["data"],
    });
    let blocks = vec![
        ContentBlock::Image(keel_protocol::content::ImageBlock {
            source,
            extra: Default::default(),
        }),
        ContentBlock::text(text),
    ];
    let block = ContentBlock::ToolResult(keel_protocol::ToolResultBlock {
        tool_use_id: id.to_owned(),
        content: keel_protocol::ToolResultContent::Blocks(blocks),
        is_error: Some(is_error),
        extra: Default::default(),
    });
    (block, detail)
}

/// The message of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
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
            let msg = panic_message(e.into_panic().as_ref());
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

fn describe(
    r: &Runnable,
    outcome: ToolOutcome,
    elapsed: Duration,
    sibling: Option<&(String, String)>,
    limits: &ToolLimits,
) -> Finished {
    let call: &ToolUseBlock = &r.call;
    let allowed_by = r.allowed_by.clone();
    let (text, is_error, detail, stopped) = match outcome {
        ToolOutcome::Ok { content, meta } => (content, false, meta, None),
        ToolOutcome::Failed { message, meta } => (message, true, meta, None),
        ToolOutcome::Stopped {
            reason,
            started,
            partial,
            elapsed: ran,
            processes_killed: _,
        } => {
            let ran = if ran.is_zero() { elapsed } else { ran };
            let (kind, text) = if !started {
                (NonExecution::Rejected, rejected_text(&call.name, reason))
            } else {
                match reason {
                    CancelReason::UserInterrupted | CancelReason::Shutdown => (
                        NonExecution::Interrupted,
                        interrupted_text(&call.name, reason, ran, &partial),
                    ),
                    CancelReason::Timeout => (
                        NonExecution::TimedOut,
                        timed_out_text(&call.name, ran, &partial, limits),
                    ),
                    CancelReason::SiblingError => (
                        NonExecution::SiblingCancelled,
                        sibling_text(&call.name, ran, &partial, sibling),
                    ),
                }
            };
            let detail = json!({ "stdout": partial, "stderr": "", "interrupted": true, "stop_reason": reason.as_str(), "started": started });
            (text, true, Some(detail), Some(kind))
        }
    };
    let (block, detail) = with_image(&call.id, text, is_error, detail);
    Finished {
        block,
        detail,
        meta: CallMeta::Ran {
            allowed_by,
            stopped,
        },
    }
}
