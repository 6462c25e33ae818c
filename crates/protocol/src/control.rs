//! The control protocol's requests, typed by `subtype`.
//!
//! On the wire a request is `{"subtype": S, ...fields}` ([`ControlRequest`]). [`Request`] is
//! the same thing with its fields typed, for both directions: host → keel (`initialize`,
//! `interrupt`, `set_permission_mode`, `set_model`, `mcp_status`, `stop_task`) and keel → host
//! (`can_use_tool`, `hook_callback`). A subtype nobody models stays [`Request::Unknown`], so the
//! receiver can answer `unsupported_request`; a known subtype whose fields have the wrong type
//! is an error that names the field, so the receiver can answer `invalid_request`. Every struct
//! keeps the fields it does not model in `extra`: a newer peer's additions are never lost.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::frames::ControlRequest;
use crate::Extra;

/// `initialize` (host → keel): what the host registers before the first turn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InitializeRequest {
    /// Hook matchers by event name (`PreToolUse`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<serde_json::Map<String, Value>>,
    /// A system prompt: a string, or a list of parts (`[""]` sends none).
    #[serde(
        rename = "systemPrompt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub system_prompt: Option<Value>,
    /// Text appended to the system prompt.
    #[serde(
        rename = "appendSystemPrompt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub append_system_prompt: Option<String>,
    /// Agent types, in the `--agents` shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Value>,
    /// Rules that deny tools, like `--disallowedTools`.
    #[serde(
        rename = "disallowedTools",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub disallowed_tools: Option<Vec<String>>,
    /// Everything else (`jsonSchema`, `sdkMcpServers`, `plugins`, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// One hook matcher of `initialize.hooks[event]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HookMatcherConfig {
    /// Tool names (`A|B`), `*`, or none for every tool.
    #[serde(default)]
    pub matcher: Option<String>,
    /// The host's callback ids.
    #[serde(rename = "hookCallbackIds")]
    pub hook_callback_ids: Vec<String>,
    /// Seconds each callback may take.
    #[serde(default)]
    pub timeout: Option<f64>,
    /// `continue` (go on as if the hook had no opinion) or anything else (block).
    #[serde(rename = "onFailure", default)]
    pub on_failure: Option<String>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `interrupt` (host → keel).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterruptRequest {
    /// Also drop the messages waiting for their turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_queued: Option<bool>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `set_permission_mode` (host → keel).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetPermissionModeRequest {
    /// The mode's wire name.
    pub mode: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `set_model` (host → keel): `null`, `""` or `"default"` return to the starting model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SetModelRequest {
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `set_max_thinking_tokens` (host → keel): the thinking budget of every later request;
/// `null` returns to the budget the session started with, `0` turns thinking off.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SetMaxThinkingTokensRequest {
    /// The budget in tokens.
    #[serde(default)]
    pub max_thinking_tokens: Option<u64>,
    /// How thinking is shown (`summarized`, `omitted`, `highlights`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_display: Option<String>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `rewind_files` (host → keel): put the files keel's tools wrote back as they were when the
/// user message `user_message_id` came.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RewindFilesRequest {
    /// The uuid of the user message (a prompt) to rewind to.
    pub user_message_id: String,
    /// Only say what would change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `stop_task` (host → keel): stop one background task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopTaskRequest {
    /// The task.
    pub task_id: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `mcp_message` (keel → host): one JSON-RPC message for an MCP server the host runs; the
/// host answers `{"mcp_response": <the JSON-RPC reply>}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct McpMessageRequest {
    /// The server, by its name in `--mcp-config`.
    pub server_name: String,
    /// The JSON-RPC message.
    pub message: Value,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `mcp_reconnect` (host → keel): stop an MCP server and start it again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct McpReconnectRequest {
    /// The server.
    #[serde(rename = "serverName")]
    pub server_name: String,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `mcp_toggle` (host → keel): disable an MCP server (its tools withdrawn) or enable it again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct McpToggleRequest {
    /// The server.
    #[serde(rename = "serverName")]
    pub server_name: String,
    /// Enable (true) or disable (false).
    pub enabled: bool,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `can_use_tool` (keel → host): may this call run?
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CanUseToolRequest {
    /// The tool.
    pub tool_name: String,
    /// The name to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The call's input.
    #[serde(default)]
    pub input: Value,
    /// The call's own description of itself, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Rules the host may add to stop being asked.
    #[serde(default)]
    pub permission_suggestions: Vec<Value>,
    /// The path that made the call need approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_path: Option<String>,
    /// Why approval is needed (a hook's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_reason: Option<String>,
    /// The call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `hook_callback` (keel → host): run one registered hook callback.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HookCallbackRequest {
    /// The callback id the host registered.
    pub callback_id: String,
    /// The hook's input (the documented hook JSON).
    #[serde(default)]
    pub input: Value,
    /// The tool call, for tool events.
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The host's answer to `can_use_tool`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "behavior", rename_all = "lowercase")]
pub enum PermissionAnswer {
    /// Run it.
    Allow {
        /// A replacement input.
        #[serde(
            rename = "updatedInput",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        updated_input: Option<Value>,
        /// Rule or mode changes that come with the approval.
        #[serde(
            rename = "updatedPermissions",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        updated_permissions: Option<Vec<Value>>,
    },
    /// Do not run it.
    Deny {
        /// What the model is told.
        #[serde(default)]
        message: String,
        /// Also stop the turn.
        #[serde(default)]
        interrupt: bool,
    },
}

/// A control request with typed fields.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// `initialize`.
    Initialize(InitializeRequest),
    /// `interrupt`.
    Interrupt(InterruptRequest),
    /// `set_permission_mode`.
    SetPermissionMode(SetPermissionModeRequest),
    /// `set_model`.
    SetModel(SetModelRequest),
    /// `set_max_thinking_tokens`.
    SetMaxThinkingTokens(SetMaxThinkingTokensRequest),
    /// `mcp_status`.
    McpStatus(Extra),
    /// `stop_task`.
    StopTask(StopTaskRequest),
    /// `rewind_files`.
    RewindFiles(RewindFilesRequest),
    /// `mcp_message`.
    McpMessage(McpMessageRequest),
    /// `mcp_reconnect`.
    McpReconnect(McpReconnectRequest),
    /// `mcp_toggle`.
    McpToggle(McpToggleRequest),
    /// `can_use_tool`.
    CanUseTool(CanUseToolRequest),
    /// `hook_callback`.
    HookCallback(HookCallbackRequest),
    /// A subtype keel does not model.
    Unknown {
        /// Its subtype.
        subtype: String,
        /// Its fields.
        fields: Extra,
    },
}

/// A known control request whose fields could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError {
    /// The request's subtype.
    pub subtype: String,
    /// What is wrong, naming the field.
    pub message: String,
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.subtype, self.message)
    }
}

impl std::error::Error for RequestError {}

fn fields_of<T: DeserializeOwned>(subtype: &str, fields: &Extra) -> Result<T, RequestError> {
    serde_path_to_error::deserialize(Value::Object(fields.clone())).map_err(|e| {
        let path = e.path().to_string();
        let message = if path == "." {
            e.inner().to_string()
        } else {
            format!("field `{path}`: {}", e.inner())
        };
        RequestError {
            subtype: subtype.to_owned(),
            message,
        }
    })
}

fn fields_from<T: Serialize>(value: &T) -> Extra {
    match serde_json::to_value(value) {
        Ok(Value::Object(m)) => m,
        _ => Extra::new(),
    }
}

impl Request {
    /// The wire subtype.
    pub fn subtype(&self) -> &str {
        match self {
            Request::Initialize(_) => "initialize",
            Request::Interrupt(_) => "interrupt",
            Request::SetPermissionMode(_) => "set_permission_mode",
            Request::SetModel(_) => "set_model",
            Request::SetMaxThinkingTokens(_) => "set_max_thinking_tokens",
            Request::McpStatus(_) => "mcp_status",
            Request::StopTask(_) => "stop_task",
            Request::RewindFiles(_) => "rewind_files",
            Request::McpMessage(_) => "mcp_message",
            Request::McpReconnect(_) => "mcp_reconnect",
            Request::McpToggle(_) => "mcp_toggle",
            Request::CanUseTool(_) => "can_use_tool",
            Request::HookCallback(_) => "hook_callback",
            Request::Unknown { subtype, .. } => subtype,
        }
    }

    /// Type the fields of a wire request.
    pub fn from_wire(req: &ControlRequest) -> Result<Self, RequestError> {
        let f = &req.fields;
        let s = req.subtype.as_str();
        Ok(match s {
            "initialize" => Request::Initialize(fields_of(s, f)?),
            "interrupt" => Request::Interrupt(fields_of(s, f)?),
            "set_permission_mode" => Request::SetPermissionMode(fields_of(s, f)?),
            "set_model" => Request::SetModel(fields_of(s, f)?),
            "set_max_thinking_tokens" => Request::SetMaxThinkingTokens(fields_of(s, f)?),
            "mcp_status" => Request::McpStatus(f.clone()),
            "stop_task" => Request::StopTask(fields_of(s, f)?),
            "rewind_files" => Request::RewindFiles(fields_of(s, f)?),
            "mcp_message" => Request::McpMessage(fields_of(s, f)?),
            "mcp_reconnect" => Request::McpReconnect(fields_of(s, f)?),
            "mcp_toggle" => Request::McpToggle(fields_of(s, f)?),
            "can_use_tool" => Request::CanUseTool(fields_of(s, f)?),
            "hook_callback" => Request::HookCallback(fields_of(s, f)?),
            _ => Request::Unknown {
                subtype: s.to_owned(),
                fields: f.clone(),
            },
        })
    }

    /// The wire form.
    pub fn to_wire(&self) -> ControlRequest {
        let fields = match self {
            Request::Initialize(r) => fields_from(r),
            Request::Interrupt(r) => fields_from(r),
            Request::SetPermissionMode(r) => fields_from(r),
            Request::SetModel(r) => fields_from(r),
            Request::SetMaxThinkingTokens(r) => fields_from(r),
            Request::McpStatus(f) => f.clone(),
            Request::StopTask(r) => fields_from(r),
            Request::RewindFiles(r) => fields_from(r),
            Request::McpMessage(r) => fields_from(r),
            Request::McpReconnect(r) => fields_from(r),
            Request::McpToggle(r) => fields_from(r),
            Request::CanUseTool(r) => fields_from(r),
            Request::HookCallback(r) => fields_from(r),
            Request::Unknown { fields, .. } => fields.clone(),
        };
        ControlRequest {
            subtype: self.subtype().to_owned(),
            fields,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wire(v: Value) -> ControlRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn known_subtypes_are_typed_and_round_trip() {
        let w = wire(json!({"subtype": "can_use_tool", "tool_name": "Bash",
            "input": {"command": "ls"}, "permission_suggestions": [], "tool_use_id": "t1",
            "future_field": 7}));
        let r = Request::from_wire(&w).unwrap();
        let Request::CanUseTool(c) = &r else {
            panic!("{r:?}")
        };
        assert_eq!(c.tool_name, "Bash");
        assert_eq!(c.extra.get("future_field"), Some(&json!(7)));
        assert_eq!(r.to_wire(), w);
    }

    #[test]
    fn unknown_subtypes_are_kept_and_bad_fields_named() {
        let r = Request::from_wire(&wire(json!({"subtype": "seed_read_state", "x": 1}))).unwrap();
        assert!(matches!(r, Request::Unknown { .. }));
        assert_eq!(r.subtype(), "seed_read_state");
        let e = Request::from_wire(&wire(json!({"subtype": "rewind_files"}))).unwrap_err();
        assert!(e.message.contains("user_message_id"), "{e}");
        let r = Request::from_wire(&wire(
            json!({"subtype": "rewind_files", "user_message_id": "u", "dry_run": true}),
        ))
        .unwrap();
        assert!(matches!(&r, Request::RewindFiles(f) if f.dry_run == Some(true)));
        let e = Request::from_wire(&wire(json!({"subtype": "set_model", "model": 5}))).unwrap_err();
        assert_eq!(e.subtype, "set_model");
        assert!(
            e.message.contains("field `model`") && e.message.contains("string"),
            "{e}"
        );
        let e = Request::from_wire(&wire(json!({"subtype": "stop_task"}))).unwrap_err();
        assert!(e.message.contains("task_id"), "{e}");
    }

    #[test]
    fn permission_answers() {
        let a: PermissionAnswer =
            serde_json::from_value(json!({"behavior": "allow", "updatedInput": {"a": 1}})).unwrap();
        assert!(matches!(
            a,
            PermissionAnswer::Allow {
                updated_input: Some(_),
                ..
            }
        ));
        let d: PermissionAnswer = serde_json::from_value(json!({"behavior": "deny"})).unwrap();
        assert_eq!(
            d,
            PermissionAnswer::Deny {
                message: String::new(),
                interrupt: false
            }
        );
        assert!(serde_json::from_value::<PermissionAnswer>(json!({"behavior": "maybe"})).is_err());
    }
}
