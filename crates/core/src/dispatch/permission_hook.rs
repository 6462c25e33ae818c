//! PermissionRequest hooks: when the rules leave a call open and keel is about to ask (the
//! user, the host, or — headless — nobody, which denies), these hooks may answer first.
//!
//! They can only answer the question that would be asked. A call the rules deny never reaches
//! them, and one the rules or the mode allow never asks, so a hook's `allow` never widens what
//! the user's rules refuse: it stands in for the user's "yes" to a prompt, no more.

use keel_protocol::ToolUseBlock;

use super::hook_input::tool_hook_input;
use super::DispatchCx;
use crate::hooks::{run_seen, HookEvent};

/// What the PermissionRequest hooks said.
pub(super) enum Answer {
    /// No hook answered: ask as usual.
    Open,
    /// The turn was cancelled while they ran.
    Halt,
    /// Run the call without asking.
    Allow,
    /// Do not run it; the model reads `message`. `interrupt`: also stop the turn.
    Deny { message: String, interrupt: bool },
}

/// Run the PermissionRequest hooks for `call`. A deny from any hook wins over an allow; a
/// hook that fails denies (unless it opted out with `"onFailure": "allow"`, then it has no
/// opinion and the question is asked as usual).
pub(super) async fn answer(cx: &DispatchCx<'_>, call: &ToolUseBlock, mode: &str) -> Answer {
    let Some(hooks) = cx
        .ctx
        .hooks()
        .filter(|h| h.wants(HookEvent::PermissionRequest, Some(&call.name)))
    else {
        return Answer::Open;
    };
    let input = tool_hook_input(cx, HookEvent::PermissionRequest, call, mode);
    let Some(d) = run_seen(hooks.as_ref(), input, cx.turn, cx.emitter).await else {
        return Answer::Halt;
    };
    if let Some(why) = d.block.or(d.stop.clone()) {
        return Answer::Deny {
            message: format!(
                "{} was not run: a PermissionRequest hook denied it: {why}",
                call.name
            ),
            interrupt: d.stop.is_some(),
        };
    }
    if d.allow {
        tracing::info!(
            "a PermissionRequest hook allowed {} ({})",
            call.name,
            call.id
        );
        return Answer::Allow;
    }
    Answer::Open
}
