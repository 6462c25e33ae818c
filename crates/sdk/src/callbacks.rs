//! Callbacks the CLI calls back into: `can_use_tool` (permission prompts) and hooks.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{json, Value};

use keel_protocol::control::{CanUseToolRequest, HookCallbackRequest, PermissionAnswer};
use keel_protocol::Extra;

/// A callback's result: `Err(text)` is sent to the CLI as a control error response.
pub type CallbackResult<T> = std::result::Result<T, String>;

/// Decides whether a tool call may run (the CLI's `can_use_tool` request).
pub type CanUseTool = Arc<
    dyn Fn(ToolPermissionRequest) -> BoxFuture<'static, CallbackResult<PermissionResult>>
        + Send
        + Sync,
>;

/// Handles one hook event (the CLI's `hook_callback` request); returns the hook's JSON output
/// (`{"continue": true}`, `{"decision": "block", "reason": ...}`, `{"hookSpecificOutput": ...}`).
pub type HookCallback =
    Arc<dyn Fn(HookInput) -> BoxFuture<'static, CallbackResult<Value>> + Send + Sync>;

/// Called with each line the CLI writes on stderr, as it arrives.
pub type StderrCallback = Arc<dyn Fn(&str) + Send + Sync>;

/// Wraps an async closure as a [`CanUseTool`].
pub fn can_use_tool<F, Fut>(f: F) -> CanUseTool
where
    F: Fn(ToolPermissionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CallbackResult<PermissionResult>> + Send + 'static,
{
    Arc::new(move |req| Box::pin(f(req)))
}

/// Wraps an async closure as a [`HookCallback`].
pub fn hook_callback<F, Fut>(f: F) -> HookCallback
where
    F: Fn(HookInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CallbackResult<Value>> + Send + 'static,
{
    Arc::new(move |input| Box::pin(f(input)))
}

/// A permission question from the CLI: may this tool call run?
#[derive(Clone, Debug, PartialEq)]
pub struct ToolPermissionRequest {
    /// The tool (`Bash`, `Write`, ...).
    pub tool_name: String,
    /// The call's input.
    pub input: Value,
    /// The call's id, when the CLI sends it.
    pub tool_use_id: Option<String>,
    /// Rules the CLI suggests adding (`permission_suggestions`), as sent.
    pub suggestions: Vec<Value>,
    /// The path that triggered the question, when there is one.
    pub blocked_path: Option<String>,
    /// Every field of the request, as sent (`description`, `display_name`, ...).
    pub raw: Extra,
}

impl ToolPermissionRequest {
    /// Built from the typed request; `raw` is the request's fields as they came.
    pub(crate) fn from_request(req: CanUseToolRequest, raw: Extra) -> ToolPermissionRequest {
        ToolPermissionRequest {
            tool_name: req.tool_name,
            input: object_or_empty(req.input),
            tool_use_id: req.tool_use_id,
            suggestions: req.permission_suggestions,
            blocked_path: req.blocked_path,
            raw,
        }
    }
}

/// A missing input is an empty object, as the CLI would have sent for a call without arguments.
fn object_or_empty(v: Value) -> Value {
    if v.is_null() {
        json!({})
    } else {
        v
    }
}

/// The answer to a [`ToolPermissionRequest`].
#[derive(Clone, Debug, PartialEq)]
pub enum PermissionResult {
    /// Run the call.
    Allow {
        /// Run it with this input instead (`None`: the input as asked).
        updated_input: Option<Value>,
        /// Permission updates to apply (the `updatedPermissions` array), as JSON.
        updated_permissions: Option<Vec<Value>>,
    },
    /// Do not run it.
    Deny {
        /// Why; the model sees it.
        message: String,
        /// Also interrupt the turn.
        interrupt: bool,
    },
}

impl PermissionResult {
    /// Allow the call as asked.
    pub fn allow() -> PermissionResult {
        PermissionResult::Allow {
            updated_input: None,
            updated_permissions: None,
        }
    }

    /// Deny the call with a message for the model.
    pub fn deny(message: impl Into<String>) -> PermissionResult {
        PermissionResult::Deny {
            message: message.into(),
            interrupt: false,
        }
    }

    /// The protocol's answer. An allow always carries the input to run (the original when the
    /// callback did not replace it), as the CLI expects.
    pub(crate) fn to_answer(&self, original_input: &Value) -> PermissionAnswer {
        match self {
            PermissionResult::Allow {
                updated_input,
                updated_permissions,
            } => PermissionAnswer::Allow {
                updated_input: Some(
                    updated_input
                        .clone()
                        .unwrap_or_else(|| original_input.clone()),
                ),
                updated_permissions: updated_permissions.clone(),
            },
            PermissionResult::Deny { message, interrupt } => PermissionAnswer::Deny {
                message: message.clone(),
                interrupt: *interrupt,
            },
        }
    }

    /// The wire form (`{"behavior":"allow","updatedInput":...}` / `{"behavior":"deny",...}`).
    pub(crate) fn to_wire(&self, original_input: &Value) -> Value {
        let mut v = serde_json::to_value(self.to_answer(original_input))
            .unwrap_or_else(|_| json!({"behavior": "deny", "message": "unserializable answer"}));
        // The official SDKs send `interrupt` only when it is true; so does this one, so that a
        // CLI that reads the answer strictly sees the same bytes from every SDK.
        if v.get("interrupt") == Some(&Value::Bool(false)) {
            if let Some(o) = v.as_object_mut() {
                o.remove("interrupt");
            }
        }
        v
    }
}

/// What a hook callback receives.
#[derive(Clone, Debug, PartialEq)]
pub struct HookInput {
    /// The callback id the SDK registered (`hook_0`, ...).
    pub callback_id: String,
    /// The tool call the event is about, when there is one.
    pub tool_use_id: Option<String>,
    /// The hook input as sent (`hook_event_name`, `tool_name`, `tool_input`, `session_id`, ...).
    pub input: Value,
}

impl HookInput {
    /// Built from the typed request.
    pub(crate) fn from_request(req: HookCallbackRequest) -> HookInput {
        HookInput {
            callback_id: req.callback_id,
            tool_use_id: req.tool_use_id,
            input: object_or_empty(req.input),
        }
    }

    /// The event name (`PreToolUse`, `PostToolUse`, ...).
    pub fn event(&self) -> Option<&str> {
        self.input.get("hook_event_name").and_then(Value::as_str)
    }

    /// The tool name, for tool events.
    pub fn tool_name(&self) -> Option<&str> {
        self.input.get("tool_name").and_then(Value::as_str)
    }
}

/// Callbacks for one hook event whose tool matches `matcher`, registered with the CLI in
/// `initialize` as `{"matcher": ..., "hookCallbackIds": [...], "timeout": ...}`.
#[derive(Clone, Default)]
pub struct HookMatcher {
    /// A tool-name pattern (`Bash`, `Write|Edit`); `None` matches every tool.
    pub matcher: Option<String>,
    /// The callbacks, called in order by the CLI.
    pub callbacks: Vec<HookCallback>,
    /// How long the CLI waits for the callbacks (sent in whole seconds).
    pub timeout: Option<Duration>,
}

impl HookMatcher {
    /// A matcher for `pattern` (`None`: every tool) with no callbacks yet.
    pub fn new(pattern: Option<&str>) -> HookMatcher {
        HookMatcher {
            matcher: pattern.map(str::to_owned),
            ..HookMatcher::default()
        }
    }

    /// Adds an async callback.
    pub fn callback<F, Fut>(mut self, f: F) -> HookMatcher
    where
        F: Fn(HookInput) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = CallbackResult<Value>> + Send + 'static,
    {
        self.callbacks.push(hook_callback(f));
        self
    }

    /// Sets the timeout the CLI applies.
    pub fn timeout(mut self, timeout: Duration) -> HookMatcher {
        self.timeout = Some(timeout);
        self
    }
}

impl std::fmt::Debug for HookMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookMatcher")
            .field("matcher", &self.matcher)
            .field("callbacks", &self.callbacks.len())
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_wire_forms() {
        let input = json!({"command": "ls"});
        assert_eq!(
            PermissionResult::allow().to_wire(&input),
            json!({"behavior": "allow", "updatedInput": {"command": "ls"}})
        );
        let deny = PermissionResult::Deny {
            message: "no".into(),
            interrupt: true,
        };
        assert_eq!(
            deny.to_wire(&input),
            json!({"behavior": "deny", "message": "no", "interrupt": true})
        );
        let wire = PermissionResult::deny("no").to_wire(&input).to_string();
        assert_eq!(wire, r#"{"behavior":"deny","message":"no"}"#);
        let allow = PermissionResult::Allow {
            updated_input: Some(json!({"command": "ls -a"})),
            updated_permissions: Some(vec![json!({"type": "setMode", "mode": "plan"})]),
        };
        assert_eq!(
            allow.to_wire(&input).to_string(),
            r#"{"behavior":"allow","updatedInput":{"command":"ls -a"},"updatedPermissions":[{"type":"setMode","mode":"plan"}]}"#
        );
    }

    #[test]
    fn requests_are_built_from_the_typed_fields() {
        let raw: Extra = serde_json::from_value(json!({
            "tool_name": "Write", "tool_use_id": "t1", "blocked_path": "/etc/x",
            "permission_suggestions": [{"type": "addRules"}], "display_name": "Write file"
        }))
        .unwrap();
        let typed: CanUseToolRequest = serde_json::from_value(Value::Object(raw.clone())).unwrap();
        let req = ToolPermissionRequest::from_request(typed, raw.clone());
        assert_eq!(
            req,
            ToolPermissionRequest {
                tool_name: "Write".into(),
                input: json!({}),
                tool_use_id: Some("t1".into()),
                suggestions: vec![json!({"type": "addRules"})],
                blocked_path: Some("/etc/x".into()),
                raw,
            }
        );
    }
}
