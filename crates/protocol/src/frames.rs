//! stream-json frames: what keel writes on stdout and reads on stdin.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::{AssistantMessage, MessageContent, Role};
use crate::tagged::tagged_enum;
use crate::Extra;

/// One line of stream-json. Unknown `type`s are kept as `Other`.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `system` frames (init, api_retry, ...).
    System(SystemFrame),
    /// One content block of a model reply.
    Assistant(AssistantFrame),
    /// A user message: a prompt, or tool results.
    User(UserFrame),
    /// The end of a run or of one turn of a streaming session.
    Result(ResultFrame),
    /// A raw SSE event (only with `--include-partial-messages`).
    StreamEvent(StreamEventFrame),
    /// A control request (either direction).
    ControlRequest(ControlRequestFrame),
    /// The answer to a control request.
    ControlResponse(ControlResponseFrame),
    /// Withdraws a control request whose answer is no longer needed.
    ControlCancelRequest(ControlCancelFrame),
    /// A frame type keel does not model, kept verbatim.
    Other(Value),
}

tagged_enum!(Frame, "type", {
    "system" => System,
    "assistant" => Assistant,
    "user" => User,
    "result" => Result,
    "stream_event" => StreamEvent,
    "control_request" => ControlRequest,
    "control_response" => ControlResponse,
    "control_cancel_request" => ControlCancelRequest,
});

impl Frame {
    /// The frame's `type` tag.
    pub fn kind(&self) -> &str {
        match self {
            Frame::System(_) => "system",
            Frame::Assistant(_) => "assistant",
            Frame::User(_) => "user",
            Frame::Result(_) => "result",
            Frame::StreamEvent(_) => "stream_event",
            Frame::ControlRequest(_) => "control_request",
            Frame::ControlResponse(_) => "control_response",
            Frame::ControlCancelRequest(_) => "control_cancel_request",
            Frame::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }

    /// The frame's `uuid`, when it has one.
    pub fn uuid(&self) -> Option<&str> {
        match self {
            Frame::System(s) => s.uuid(),
            Frame::Assistant(a) => Some(&a.uuid),
            Frame::User(u) => u.uuid.as_deref(),
            Frame::Result(r) => Some(&r.uuid),
            Frame::StreamEvent(e) => Some(&e.uuid),
            _ => None,
        }
    }
}

/// `system` frames, by `subtype`. Unknown subtypes are kept as `Other`.
#[derive(Clone, Debug, PartialEq)]
pub enum SystemFrame {
    /// `init`: sent at the start of every run (and every turn of a streaming session).
    Init(InitFrame),
    /// `api_retry`: a transient API error; keel waits and tries again.
    ApiRetry(ApiRetryFrame),
    /// `model_fallback`: keel switched to the fallback model.
    ModelFallback(ModelFallbackFrame),
    /// `permission_denied`: a tool call was refused.
    PermissionDenied(PermissionDeniedFrame),
    /// `status`: what the session is doing, or a permission mode change.
    Status(StatusFrame),
    /// `session_state_changed`: running / idle / requires_action.
    SessionStateChanged(SessionStateFrame),
    /// `task_started`: a subagent or background task began.
    TaskStarted(TaskFrame),
    /// `task_notification`: a background task ended.
    TaskNotification(TaskFrame),
    /// `warning`: something the user should know that did not stop the run (keel's own).
    Warning(WarningFrame),
    /// `compact_boundary`: the conversation was compacted; what the model sees starts here.
    CompactBoundary(CompactBoundaryFrame),
    /// `heartbeat` (keel's own, opt-in): stdout was silent for a while during a turn; the
    /// process is alive and says what is running.
    Heartbeat(HeartbeatFrame),
    /// Any other subtype, kept verbatim.
    Other(Value),
}

tagged_enum!(SystemFrame, "subtype", {
    "init" => Init,
    "api_retry" => ApiRetry,
    "model_fallback" => ModelFallback,
    "permission_denied" => PermissionDenied,
    "status" => Status,
    "session_state_changed" => SessionStateChanged,
    "task_started" => TaskStarted,
    "task_notification" => TaskNotification,
    "warning" => Warning,
    "compact_boundary" => CompactBoundary,
    "heartbeat" => Heartbeat,
});

impl SystemFrame {
    /// The frame's `uuid`.
    pub fn uuid(&self) -> Option<&str> {
        match self {
            SystemFrame::Init(f) => Some(&f.uuid),
            SystemFrame::ApiRetry(f) => Some(&f.uuid),
            SystemFrame::ModelFallback(f) => Some(&f.uuid),
            SystemFrame::PermissionDenied(f) => Some(&f.uuid),
            SystemFrame::Status(f) => Some(&f.uuid),
            SystemFrame::SessionStateChanged(f) => Some(&f.uuid),
            SystemFrame::TaskStarted(f) | SystemFrame::TaskNotification(f) => Some(&f.uuid),
            SystemFrame::Warning(f) => Some(&f.uuid),
            SystemFrame::CompactBoundary(f) => Some(&f.uuid),
            SystemFrame::Heartbeat(f) => Some(&f.uuid),
            SystemFrame::Other(v) => v.get("uuid").and_then(Value::as_str),
        }
    }
}

// Serialize wrappers: a `System` frame is `{"type":"system","subtype":...,...}`.
// `tagged_enum!` on `Frame` puts `type` first; `SystemFrame` then adds `subtype`.

/// `system/init`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InitFrame {
    /// The working directory.
    pub cwd: String,
    /// The session id.
    pub session_id: String,
    /// Names of the tools the model may call.
    #[serde(default)]
    pub tools: Vec<String>,
    /// MCP servers and their status.
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
    /// The model in use.
    pub model: String,
    /// The permission mode.
    #[serde(rename = "permissionMode")]
    pub permission_mode: String,
    /// Slash commands (none in headless keel).
    #[serde(default)]
    pub slash_commands: Vec<String>,
    /// Where the API key came from (`ANTHROPIC_API_KEY`, `none`).
    #[serde(rename = "apiKeySource", default)]
    pub api_key_source: String,
    /// The protocol version keel is compatible with (SDKs check it).
    #[serde(default)]
    pub claude_code_version: String,
    /// The output style.
    #[serde(default)]
    pub output_style: String,
    /// Agent types available to the Task tool.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Skills (none yet).
    #[serde(default)]
    pub skills: Vec<Value>,
    /// Plugins (none yet).
    #[serde(default)]
    pub plugins: Vec<Value>,
    /// This frame's id.
    pub uuid: String,
    /// Fields keel does not model, or keel's own additions (`keel_version`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/api_retry`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiRetryFrame {
    /// Which retry this is (1 = the first retry).
    pub attempt: u32,
    /// The retry cap in force.
    pub max_retries: u32,
    /// How long keel waits before the retry.
    pub retry_delay_ms: u64,
    /// The HTTP status, or null for a connection or stream failure.
    pub error_status: Option<u16>,
    /// The error class: overloaded, rate_limit, server_error, authentication_failed, unknown.
    pub error: String,
    /// Set when emitted inside a subagent: the Task call it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_use_id: Option<String>,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/model_fallback`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelFallbackFrame {
    /// What caused the switch (`overloaded`).
    pub trigger: String,
    /// The model keel was using.
    pub original_model: String,
    /// The model keel switched to.
    pub fallback_model: String,
    /// A sentence for people.
    pub content: String,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/permission_denied`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PermissionDeniedFrame {
    /// The tool that was refused.
    pub tool_name: String,
    /// The refused call.
    pub tool_use_id: String,
    /// Why, and how to allow it.
    pub message: String,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusFrame {
    /// `requesting`, `compacting`, or null.
    pub status: Option<String>,
    /// The new permission mode, after a change.
    #[serde(
        rename = "permissionMode",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub permission_mode: Option<String>,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/session_state_changed`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionStateFrame {
    /// `running`, `idle` or `requires_action`.
    pub state: String,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields (`sdk_host_only`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/task_started` and `system/task_notification`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskFrame {
    /// The task id.
    pub task_id: String,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields (status, summary, description, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/warning` (keel's own): a problem that did not stop the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WarningFrame {
    /// What happened, for people.
    pub message: String,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields (`source`, `line`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/heartbeat` (keel's own, when `KEEL_HEARTBEAT_MS` is set): written when stdout has
/// been silent for that long during a turn — a liveness signal for whoever supervises keel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatFrame {
    /// How long stdout had been silent, in milliseconds.
    pub silent_ms: u64,
    /// The tool calls running (started and not yet answered), by tool name.
    pub running: Vec<String>,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `system/compact_boundary`: the conversation was compacted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactBoundaryFrame {
    /// What was compacted and how.
    pub compact_metadata: CompactMetadata,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// Other fields (keel adds `summary`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `compact_metadata` of a compact boundary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactMetadata {
    /// `auto` (the context was filling up) or `manual` (`/compact`).
    pub trigger: String,
    /// Tokens in the context before.
    pub pre_tokens: u64,
    /// Tokens in the context after (estimated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_tokens: Option<u64>,
    /// How long compacting took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// How many of the latest messages were kept as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserved_messages: Option<u64>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `assistant`: one content block of a model reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantFrame {
    /// The reply, with exactly one content block.
    pub message: AssistantMessage,
    /// The Task call this frame belongs to, when a subagent emitted it.
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
    /// The session id.
    pub session_id: String,
    /// This frame's id.
    pub uuid: String,
    /// When keel received the block (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The API's request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Other fields (`error`, `is_api_error_message`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `user`: a prompt, or tool results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserFrame {
    /// The message.
    pub message: UserMessage,
    /// The Task call this frame belongs to, when a subagent emitted it.
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
    /// The session id (a host may send an empty one).
    #[serde(default)]
    pub session_id: String,
    /// This frame's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// When it was written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Structured detail of a tool result (Bash: stdout, stderr, interrupted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_result: Option<Value>,
    /// Per tool result: how the permission decision went, and why a call did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result_meta: Option<Value>,
    /// Other fields (`isReplay`, `client_composed`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// The message of a `user` frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Always `user`.
    pub role: Role,
    /// A string or blocks.
    pub content: MessageContent,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `result`: the one frame that ends every run (and every turn of a streaming session).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultFrame {
    /// `success`, `error_during_execution`, `error_max_turns`, `error_max_budget_usd`.
    pub subtype: crate::ResultSubtype,
    /// Whether the run failed.
    pub is_error: bool,
    /// Wall time of the run.
    pub duration_ms: u64,
    /// Time spent waiting on the model API.
    pub duration_api_ms: u64,
    /// Model calls made (plus one when tools ran after the last call).
    pub num_turns: u32,
    /// The final text, or the error explained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Error messages, for limit and error subtypes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
    /// The session id.
    pub session_id: String,
    /// Cost of the run in US dollars.
    #[serde(default)]
    pub total_cost_usd: f64,
    /// Summed token usage.
    #[serde(default)]
    pub usage: Value,
    /// Usage and cost per model.
    #[serde(rename = "modelUsage", default)]
    pub model_usage: Value,
    /// Calls refused by permission rules.
    #[serde(default)]
    pub permission_denials: Vec<PermissionDenial>,
    /// Why the run ended (`completed`, `api_error`, `max_turns`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_reason: Option<crate::TerminalReason>,
    /// The HTTP status of the API error that ended the run: absent, null, or a status.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::tagged::double_option"
    )]
    pub api_error_status: Option<Option<u16>>,
    /// The stop reason of the last model reply: absent, null, or a reason.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::tagged::double_option"
    )]
    pub stop_reason: Option<Option<String>>,
    /// This frame's id.
    pub uuid: String,
    /// Other fields (`api_error_type`, `subagent_stats`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// One refused call, as listed in `result.permission_denials`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PermissionDenial {
    /// The tool.
    pub tool_name: String,
    /// The call.
    pub tool_use_id: String,
    /// Its input.
    pub tool_input: Value,
}

/// `stream_event`: one raw SSE event, forwarded with `--include-partial-messages`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamEventFrame {
    /// The SSE event as the API sent it.
    pub event: Value,
    /// The session id.
    pub session_id: String,
    /// The Task call this belongs to, when a subagent emitted it.
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
    /// This frame's id.
    pub uuid: String,
    /// Other fields (`api_message_id`).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `control_request`: `{"type":"control_request","request_id":ID,"request":{"subtype":S,...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlRequestFrame {
    /// The request id, echoed in the response.
    pub request_id: String,
    /// The request.
    pub request: ControlRequest,
}

/// The body of a control request: a `subtype` and its fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// What is asked (`initialize`, `interrupt`, `can_use_tool`, ...).
    pub subtype: String,
    /// The request's fields.
    #[serde(flatten)]
    pub fields: Extra,
}

/// `control_response`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlResponseFrame {
    /// Success or error.
    pub response: ControlResponse,
}

/// The body of a control response.
#[derive(Clone, Debug, PartialEq)]
pub enum ControlResponse {
    /// `{"subtype":"success","request_id":ID,"response":{...}}`.
    Success(ControlSuccess),
    /// `{"subtype":"error","request_id":ID,"error":"text","error_code":...}`.
    Error(ControlError),
    /// Anything else, kept.
    Other(Value),
}

tagged_enum!(ControlResponse, "subtype", {
    "success" => Success,
    "error" => Error,
});

/// A successful control response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlSuccess {
    /// The request it answers.
    pub request_id: String,
    /// The answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// Other envelope fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A failed control response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlError {
    /// The request it answers.
    pub request_id: String,
    /// What went wrong, for people.
    pub error: String,
    /// A machine-readable code (`invalid_mode`, `unsupported_request`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Other envelope fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `control_cancel_request`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlCancelFrame {
    /// The request being withdrawn.
    pub request_id: String,
}
