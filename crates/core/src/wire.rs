//! The one place events become wire frames (stream-json and transcript records alike).

use keel_protocol::frames::{
    ApiRetryFrame, AssistantFrame, CompactBoundaryFrame, CompactMetadata, InitFrame,
    ModelFallbackFrame, PermissionDeniedFrame, ResultFrame, StatusFrame, StreamEventFrame,
    TaskFrame, UserMessage, WarningFrame,
};
use keel_protocol::{Extra, Frame, MessageContent, Role, SystemFrame, UserFrame};
use serde_json::{json, Value};

use crate::event::{CallMeta, Emitted, Envelope, Event, TaskEvent, ToolResultEvent, TurnReport};
use crate::permissions::AllowedBy;
use crate::task_types::TaskKind;

/// The subtype of the (never shown) record that holds the conversation after a compaction.
pub const COMPACTED_HISTORY: &str = "compacted_history";

/// A settings hook's `system/hook_started` or `system/hook_response` frame.
fn hook_frame(p: &crate::hook_event::HookProgress, sid: String, uuid: String) -> Value {
    let mut v = json!({
        "subtype": if p.end.is_some() { "hook_response" } else { "hook_started" },
        "hook_id": p.hook_id,
        "hook_name": p.hook_name,
        "hook_event": p.event.as_str(),
        "session_id": sid,
        "uuid": uuid,
    });
    if let Some(end) = &p.end {
        v["output"] = json!(end.stdout);
        v["stdout"] = json!(end.stdout);
        v["stderr"] = json!(end.stderr);
        v["exit_code"] = json!(end.exit_code);
        v["outcome"] = json!(end.outcome);
    }
    v
}

/// The wire frame of an emitted event.
pub fn frame(e: &Emitted) -> Frame {
    frame_of(&e.envelope, &e.event)
}

/// The wire frame of `event` stamped with `env`.
pub fn frame_of(env: &Envelope, event: &Event) -> Frame {
    let sid = env.session_id.clone();
    let uuid = env.uuid.clone();
    let parent = env.parent_tool_use_id.clone();
    match event {
        Event::Init(i) => init_frame(i, sid, uuid),
        Event::Warning { message, fields } => Frame::System(SystemFrame::Warning(WarningFrame {
            message: message.clone(),
            session_id: sid,
            uuid,
            extra: fields.clone(),
        })),
        Event::UserContent { content } => user_frame(env, content.clone(), None, None),
        Event::Status { status } => Frame::System(SystemFrame::Status(StatusFrame {
            status: status.clone(),
            permission_mode: None,
            session_id: sid,
            uuid,
            extra: Extra::new(),
        })),
        Event::CompactBoundary(c) => compact_boundary_frame(c, sid, uuid),
        Event::Hook(p) => Frame::System(SystemFrame::Other(hook_frame(p, sid, uuid))),
        Event::CompactedHistory { messages } => Frame::System(SystemFrame::Other(json!({
            "subtype": COMPACTED_HISTORY,
            "messages": messages,
            "session_id": sid,
            "uuid": uuid,
        }))),
        Event::Assistant {
            message,
            request_id,
        } => Frame::Assistant(AssistantFrame {
            message: message.clone(),
            parent_tool_use_id: parent,
            session_id: sid,
            uuid,
            timestamp: Some(env.timestamp.clone()),
            request_id: request_id.clone(),
            extra: Extra::new(),
        }),
        Event::ToolResult(r) => tool_result(env, r),
        Event::ApiRetry(r) => Frame::System(SystemFrame::ApiRetry(ApiRetryFrame {
            attempt: r.attempt,
            max_retries: r.max_retries,
            retry_delay_ms: r.delay.as_millis() as u64,
            error_status: r.status,
            error: r.label.to_owned(),
            parent_tool_use_id: parent,
            session_id: sid,
            uuid,
            extra: Extra::new(),
        })),
        Event::ModelFallback {
            from,
            to,
            trigger,
            text,
        } => Frame::System(SystemFrame::ModelFallback(ModelFallbackFrame {
            trigger: trigger.clone(),
            content: text.clone(),
            original_model: from.clone(),
            fallback_model: to.clone(),
            session_id: sid,
            uuid,
            extra: parent_extra(parent),
        })),
        Event::PermissionDenied {
            tool_name,
            tool_use_id,
            message,
        } => Frame::System(SystemFrame::PermissionDenied(PermissionDeniedFrame {
            tool_name: tool_name.clone(),
            tool_use_id: tool_use_id.clone(),
            message: message.clone(),
            session_id: sid,
            uuid,
            extra: Extra::new(),
        })),
        Event::StreamEvent { raw, message_id } => stream_event_frame(env, raw, message_id.as_ref()),
        Event::Task(t) => task_frame(sid, uuid, t),
        Event::Result(r) => Frame::Result(result_frame(sid, uuid, r)),
        // Its uuid is the new conversation's id, as the reference CLI writes it.
        Event::ConversationReset {
            new_conversation_id,
            user_message_uuid,
        } => Frame::Other(json!({
            "type": "conversation_reset",
            "new_conversation_id": new_conversation_id,
            "uuid": new_conversation_id,
            "trigger": "clear",
            "user_message_uuid": user_message_uuid,
            "timestamp": env.timestamp,
            "session_id": sid,
        })),
    }
}

/// The `system/init` frame: what the session runs with, and keel's own additions.
fn init_frame(i: &crate::event::InitInfo, sid: String, uuid: String) -> Frame {
    let mut extra = Extra::new();
    extra.insert("keel_version".into(), json!(crate::KEEL_VERSION));
    let dirs: Vec<String> = i
        .additional_directories
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    extra.insert("additional_directories".into(), json!(dirs));
    extra.insert("capabilities".into(), json!(["interrupt_receipt_v1"]));
    extra.insert("provider".into(), json!(i.provider));
    extra.insert("keel_capabilities".into(), i.account.clone());
    Frame::System(SystemFrame::Init(InitFrame {
        cwd: i.cwd.display().to_string(),
        session_id: sid,
        tools: i.tools.clone(),
        mcp_servers: i.mcp_servers.clone(),
        model: i.model.clone(),
        permission_mode: i.permission_mode.clone(),
        slash_commands: i.slash_commands.clone(),
        api_key_source: i.api_key_source.clone(),
        claude_code_version: crate::PROTOCOL_VERSION.to_owned(),
        output_style: i.output_style.clone(),
        agents: i.agents.clone(),
        skills: i.skills.clone(),
        plugins: Vec::new(),
        uuid,
        extra,
    }))
}

/// The `system/compact_boundary` frame of a compaction.
fn compact_boundary_frame(c: &crate::event::CompactInfo, sid: String, uuid: String) -> Frame {
    let mut extra = Extra::new();
    extra.insert("summary".into(), Value::String(c.summary.clone()));
    Frame::System(SystemFrame::CompactBoundary(CompactBoundaryFrame {
        compact_metadata: CompactMetadata {
            trigger: c.trigger.clone(),
            pre_tokens: c.pre_tokens,
            post_tokens: Some(c.post_tokens),
            duration_ms: Some(c.duration.as_millis() as u64),
            preserved_messages: Some(c.preserved_messages),
            extra: Extra::new(),
        },
        session_id: sid,
        uuid,
        extra,
    }))
}

/// The extra field that says whose a frame without its own `parent_tool_use_id` is (a
/// subagent's model fallback).
fn parent_extra(parent: Option<String>) -> Extra {
    let mut extra = Extra::new();
    if let Some(p) = parent {
        extra.insert("parent_tool_use_id".into(), Value::String(p));
    }
    extra
}

/// A `stream_event` frame: the raw event of the model API, with the message it belongs to.
fn stream_event_frame(env: &Envelope, raw: &Value, message_id: Option<&String>) -> Frame {
    let mut extra = Extra::new();
    if let Some(m) = message_id {
        extra.insert("api_message_id".into(), Value::String(m.clone()));
    }
    Frame::StreamEvent(StreamEventFrame {
        event: raw.clone(),
        session_id: env.session_id.clone(),
        parent_tool_use_id: env.parent_tool_use_id.clone(),
        uuid: env.uuid.clone(),
        extra,
    })
}

fn user_frame(
    env: &Envelope,
    content: Vec<keel_protocol::ContentBlock>,
    tool_use_result: Option<Value>,
    meta: Option<Value>,
) -> Frame {
    Frame::User(UserFrame {
        message: UserMessage {
            role: Role::User,
            content: MessageContent::Blocks(content),
            extra: Extra::new(),
        },
        parent_tool_use_id: env.parent_tool_use_id.clone(),
        session_id: env.session_id.clone(),
        uuid: Some(env.uuid.clone()),
        timestamp: Some(env.timestamp.clone()),
        tool_use_result,
        tool_result_meta: meta,
        extra: Extra::new(),
    })
}

fn tool_result(env: &Envelope, r: &ToolResultEvent) -> Frame {
    let id = r.tool_use_id();
    let mut meta = json!({ "id": id });
    match &r.meta {
        CallMeta::Plain => {}
        CallMeta::Ran {
            allowed_by,
            stopped,
        } => {
            let (source, reason) = allowed_source(allowed_by);
            meta["permission_decision"] =
                json!({ "decision": "accept", "source": source, "reason_type": reason });
            if let Some(k) = stopped {
                meta["non_execution_kind"] = json!(k.as_str());
            }
        }
        CallMeta::NotRun(k) => meta["non_execution_kind"] = json!(k.as_str()),
        CallMeta::Denied(source) => {
            meta["non_execution_kind"] = json!("user-rejected");
            meta["permission_decision"] =
                json!({ "decision": "reject", "source": source.as_str() });
        }
    }
    user_frame(
        env,
        vec![r.block.clone()],
        r.detail.clone(),
        Some(json!([meta])),
    )
}

fn allowed_source(by: &AllowedBy) -> (&'static str, &'static str) {
    match by {
        AllowedBy::ReadOnly => ("config", "read_only"),
        AllowedBy::Rule(_) => ("config", "rule"),
        AllowedBy::Mode(_) => ("config", "mode"),
        AllowedBy::Approver => ("user_temporary", "approver"),
        AllowedBy::Hook => ("hook", "hook"),
    }
}

fn task_frame(session_id: String, uuid: String, t: &TaskEvent) -> Frame {
    let mut extra = Extra::new();
    extra.insert("description".into(), json!(t.description));
    extra.insert("task_type".into(), json!(t.kind.name()));
    if let TaskKind::Agent { agent_type } = &t.kind {
        extra.insert("subagent_type".into(), json!(agent_type));
    }
    if let Some(id) = &t.tool_use_id {
        extra.insert("tool_use_id".into(), json!(id));
    }
    let Some(end) = &t.end else {
        return Frame::System(SystemFrame::TaskStarted(TaskFrame {
            task_id: t.task_id.clone(),
            session_id,
            uuid,
            extra,
        }));
    };
    extra.insert("status".into(), json!(end.status.as_str()));
    extra.insert("end_state".into(), json!(end.status.describe()));
    extra.insert("summary".into(), json!(end.summary));
    // SDKs require the field; it is empty when the output could not be kept on disk.
    let file = end
        .output_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    extra.insert("output_file".into(), json!(file));
    Frame::System(SystemFrame::TaskNotification(TaskFrame {
        task_id: t.task_id.clone(),
        session_id,
        uuid,
        extra,
    }))
}

/// The `result` of a run that ended before any turn started (a refused truncating fork):
/// nothing ran and nothing was spent.
pub fn result_before_start(session_id: &str, end: &crate::TurnEnd) -> Frame {
    let zero = std::time::Duration::ZERO;
    let report = TurnReport {
        end: end.clone(),
        num_turns: 0,
        duration: zero,
        api_duration: zero,
        cost: crate::event::CostReport {
            total_usd: 0.0,
            usage: json!({"input_tokens": 0, "cache_creation_input_tokens": 0,
                          "cache_read_input_tokens": 0, "output_tokens": 0}),
            model_usage: json!({}),
            unpriced_models: Vec::new(),
        },
        denials: Vec::new(),
        stop_reason: None,
        result_index: 0,
        model: String::new(),
        provider: String::new(),
        transcript_remote: None,
        origin: None,
        structured_output: None,
        account: json!({}),
        local_command: None,
    };
    let mut r = result_frame(session_id.to_owned(), crate::ids::new_uuid(), &report);
    // No model was chosen for a run that never started.
    for k in ["model", "provider", "keel_capabilities"] {
        r.extra.remove(k);
    }
    Frame::Result(r)
}

fn result_frame(session_id: String, uuid: String, r: &TurnReport) -> ResultFrame {
    let end = &r.end;
    let mut extra = Extra::new();
    if let Some(t) = end.api_error().and_then(|e| e.error_type.as_ref()) {
        extra.insert("api_error_type".into(), json!(t));
    }
    if !r.cost.unpriced_models.is_empty() {
        extra.insert("unpriced_models".into(), json!(r.cost.unpriced_models));
    }
    extra.insert("result_index".into(), json!(r.result_index));
    extra.insert("provider".into(), json!(r.provider));
    if let Some(t) = &r.transcript_remote {
        extra.insert("transcript_url".into(), json!(t.url));
        extra.insert("transcript_remote_current".into(), json!(t.current));
        if let Some(e) = &t.error {
            extra.insert("transcript_remote_error".into(), json!(e));
        }
    }
    extra.insert("model".into(), json!(r.model));
    // Only when the prompt carried one, as the reference CLI does (SDKs read it as null then).
    if let Some(o) = &r.origin {
        extra.insert("origin".into(), o.clone());
    }
    if let Some(v) = &r.structured_output {
        extra.insert("structured_output".into(), v.clone());
    }
    extra.insert("keel_capabilities".into(), r.account.clone());
    if let Some(c) = r.local_command {
        extra.insert("local_command".into(), json!(c));
    }
    ResultFrame {
        subtype: end.subtype(),
        is_error: end.is_error(),
        duration_ms: r.duration.as_millis() as u64,
        duration_api_ms: r.api_duration.as_millis() as u64,
        num_turns: r.num_turns,
        result: Some(end.result_text()),
        errors: end.errors(),
        session_id,
        total_cost_usd: r.cost.total_usd,
        usage: r.cost.usage.clone(),
        model_usage: r.cost.model_usage.clone(),
        permission_denials: r.denials.clone(),
        terminal_reason: Some(end.terminal_reason()),
        api_error_status: Some(end.api_error_status()),
        stop_reason: Some(r.stop_reason.clone()),
        uuid,
        extra,
    }
}
