//! The input a tool-call hook gets (PreToolUse, PermissionRequest, PostToolUse): the same
//! fields for every event, from the session and the call.

use keel_protocol::ToolUseBlock;

use super::DispatchCx;
use crate::hooks::{HookEvent, HookInput, ToolHookInput};

/// The hook input for `event` about `call`, in permission mode `mode`.
pub(super) fn tool_hook_input(
    cx: &DispatchCx<'_>,
    event: HookEvent,
    call: &ToolUseBlock,
    mode: &str,
) -> HookInput {
    HookInput {
        event,
        session_id: cx.emitter.session_id(),
        cwd: cx.ctx.cwd().display().to_string(),
        permission_mode: mode.to_owned(),
        transcript_path: cx.transcript_path.clone(),
        tool: Some(ToolHookInput {
            name: call.name.clone(),
            input: call.input.clone(),
            tool_use_id: call.id.clone(),
            response: None,
        }),
        prompt: None,
        stop_hook_active: false,
        last_assistant_message: None,
        compact: None,
        extra: Vec::new(),
    }
}
