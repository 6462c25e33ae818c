//! `rewind_files`: put the files keel's tools wrote back as they were when a prompt came.
//!
//! A real rewind that cannot happen is an error answer (the Python SDK raises it; the
//! TypeScript SDK rejects); a `dry_run` is a question, so it is answered
//! `{"canRewind": false, "error": …}` instead. Checkpointing off, an unknown prompt, a refusal
//! and a failure each have their own `error_code`.

use keel_core::SessionHandle;
use keel_protocol::control::RewindFilesRequest;
use keel_tools::checkpoint::{RewindError, RewindReport};
use serde_json::json;

use super::{Refusal, Reply};

/// The longest `user_message_id` taken (a uuid is 36 characters).
const MAX_ID_CHARS: usize = 200;

/// Answer one `rewind_files` request.
pub(super) async fn rewind_files(
    handle: &SessionHandle,
    r: RewindFilesRequest,
) -> Result<Reply, Refusal> {
    let Some(store) = handle.context().checkpoints() else {
        return Err((
            "File checkpointing is off in this session, so there is nothing to rewind to: start keel with CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING=true (the SDKs' enable_file_checkpointing option sets it)".into(),
            "checkpointing_disabled",
        ));
    };
    let id = r.user_message_id.trim().to_owned();
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
        return Err((
            format!("rewind_files: `user_message_id` must be the uuid of a user message (1 to {MAX_ID_CHARS} characters)"),
            "invalid_request",
        ));
    }
    let dry_run = r.dry_run.unwrap_or(false);
    // A tool of the running turn may be between its snapshot and its write.
    if !dry_run && handle.is_running() {
        return Err((
            "Cannot rewind the files while a turn is running: its tools may be writing them. Interrupt it or wait for its result, then ask again.".into(),
            "busy",
        ));
    }
    let outcome = tokio::task::spawn_blocking(move || store.rewind(&id, dry_run)).await;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            return Err((
                format!("rewind_files failed inside keel: {e}"),
                "internal_error",
            ))
        }
    };
    match outcome {
        Ok(report) => Ok(Reply::new(report_json(&report))),
        Err(e) if dry_run => Ok(Reply::new(
            json!({"canRewind": false, "error": e.to_string()}),
        )),
        Err(e) => {
            let code = match &e {
                RewindError::UnknownPrompt { .. } => "unknown_message",
                RewindError::Refused { .. } => "rewind_refused",
                RewindError::Failed { .. } => "rewind_failed",
            };
            Err((format!("Cannot rewind the files: {e}"), code))
        }
    }
}

fn report_json(r: &RewindReport) -> serde_json::Value {
    json!({
        "canRewind": true,
        "filesChanged": r.files_changed.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "filesDeleted": r.deleted.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "insertions": r.insertions,
        "deletions": r.deletions,
    })
}

/// Whether the host asked for file checkpoints (`CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`,
/// which the SDKs set for `enable_file_checkpointing`).
pub fn wanted(env: &keel_core::Env) -> bool {
    env("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING").is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Keep file checkpoints for the session when the host asked for them; a resumed session
/// opens the store its earlier run left, so its prompts can be rewound to.
pub fn enable_from_env(ctx: &keel_core::SessionContext, env: &keel_core::Env) {
    if !wanted(env) {
        return;
    }
    match ctx.open_checkpoints(env) {
        Some((store, refused)) => {
            if let Some(e) = refused {
                eprintln!("keel: warning: {e}; rewinding to the prompts of earlier runs of this session is not possible");
            }
            ctx.set_checkpoints(Some(std::sync::Arc::new(store)))
        }
        None => eprintln!(
            "keel: file checkpointing was asked for, but neither KEEL_HOME nor HOME is set, so there is nowhere to keep the snapshots; it is off"
        ),
    }
}

/// A prompt from stdin starts its turn: it names a checkpoint, and with
/// `--replay-user-messages` it is echoed (with that uuid) before the turn's frames.
pub async fn start_prompt(
    bridge: &super::host::Bridge,
    ctx: &keel_core::SessionContext,
    replay: bool,
    uuid: Option<String>,
    blocks: &[keel_protocol::ContentBlock],
) {
    use keel_protocol::frames::UserMessage;
    use keel_protocol::{Extra, Frame, MessageContent, Role, UserFrame};
    let uuid = uuid
        .filter(|u| !u.trim().is_empty() && u.len() <= MAX_ID_CHARS)
        .unwrap_or_else(keel_core::emit::new_uuid);
    if let Some(store) = ctx.checkpoints() {
        store.mark(&uuid, &label_of(blocks));
    }
    if !replay {
        return;
    }
    let mut extra = Extra::new();
    extra.insert("isReplay".into(), json!(true));
    bridge
        .send_written(Frame::User(UserFrame {
            message: UserMessage {
                role: Role::User,
                content: MessageContent::Blocks(blocks.to_vec()),
                extra: Extra::new(),
            },
            parent_tool_use_id: None,
            session_id: bridge.session_id().to_owned(),
            uuid: Some(uuid),
            timestamp: Some(keel_core::emit::now_rfc3339()),
            tool_use_result: None,
            tool_result_meta: None,
            extra,
        }))
        .await;
}

/// The first line of a prompt's text, for `/rewind`'s list.
pub fn label_of(blocks: &[keel_protocol::ContentBlock]) -> String {
    blocks
        .iter()
        .find_map(|b| match b {
            keel_protocol::ContentBlock::Text(t) => {
                Some(t.text.lines().next().unwrap_or("").to_owned())
            }
            _ => None,
        })
        .unwrap_or_default()
}
