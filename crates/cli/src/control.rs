//! The control server: answers the host's control requests (`initialize`, `interrupt`,
//! `set_permission_mode`, `set_model`, `mcp_status`; anything else is `unsupported_request`),
//! and owns the keel → host side ([`host`]). Success and error envelopes are exactly the
//! reference's; the texts are keel's.

pub mod host;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keel_core::approval::{PermissionUpdate, RuleBehavior};
use keel_core::emit::{new_uuid, now_rfc3339};
use keel_core::hooks::HookEvent;
use keel_core::permissions::{PermissionMode, Rule, RuleSource};
use keel_core::SessionHandle;
use keel_protocol::frames::{ControlRequestFrame, ControlResponseFrame, UserMessage};
use keel_protocol::{
    ControlError, ControlResponse, ControlSuccess, Extra, Frame, MessageContent, Role, UserFrame,
};
use serde_json::{json, Value};

use crate::stream_input::{Edit, Queue};
use host::{Bridge, RegisteredHook};

/// An error answer: the text and the `error_code`.
type Refusal = (String, &'static str);

/// A success answer: the `response`, extra envelope keys, and frames to write right after it.
#[derive(Default)]
pub struct Reply {
    response: Value,
    envelope: Extra,
    then: Vec<Frame>,
}

impl Reply {
    fn new(response: Value) -> Self {
        Self {
            response,
            ..Self::default()
        }
    }
}

/// What the control server knows about the session it serves.
pub struct ControlInfo {
    /// The model the session started with (what `set_model(null)` returns to).
    pub initial_model: String,
    /// Where the API key came from.
    pub api_key_source: String,
}

/// Answers host → keel control requests.
pub struct Controller {
    /// The keel → host side.
    pub bridge: Arc<Bridge>,
    handle: SessionHandle,
    queue: Arc<Queue>,
    info: ControlInfo,
    initialized: AtomicBool,
}

impl Controller {
    /// A controller for the session behind `handle`.
    pub fn new(
        bridge: Arc<Bridge>,
        handle: SessionHandle,
        queue: Arc<Queue>,
        info: ControlInfo,
    ) -> Self {
        Self {
            bridge,
            handle,
            queue,
            info,
            initialized: AtomicBool::new(false),
        }
    }

    /// Answer one request. Everything is answered in arrival order except `interrupt`, which
    /// waits for the turn to wind down and so runs on its own task.
    pub async fn handle(self: &Arc<Self>, frame: ControlRequestFrame) {
        let id = frame.request_id;
        let fields = frame.request.fields;
        let answer = match frame.request.subtype.as_str() {
            "interrupt" => {
                let this = self.clone();
                tokio::spawn(async move {
                    let receipt = this.interrupt(&fields).await;
                    this.respond(id, Ok(Reply::new(receipt))).await;
                });
                return;
            }
            "initialize" => self.initialize(&fields).await,
            "set_permission_mode" => self.set_permission_mode(&fields).await,
            "set_model" => self.set_model(&fields).await,
            "mcp_status" => Ok(Reply::new(json!({ "mcpServers": [] }))),
            "stop_task" => self.stop_task(&fields).await,
            other => Err((
                format!("Unsupported control request subtype: {other}"),
                "unsupported_request",
            )),
        };
        self.respond(id, answer).await;
    }

    /// Write the success or error envelope (and, after a success, the frames that follow it).
    pub async fn respond(&self, request_id: String, answer: Result<Reply, Refusal>) {
        let (response, then) = match answer {
            Ok(r) => (
                ControlResponse::Success(ControlSuccess {
                    request_id,
                    response: Some(r.response),
                    extra: r.envelope,
                }),
                r.then,
            ),
            Err((error, code)) => (
                ControlResponse::Error(ControlError {
                    request_id,
                    error,
                    error_code: Some(code.to_owned()),
                    extra: Extra::new(),
                }),
                Vec::new(),
            ),
        };
        self.bridge
            .send(Frame::ControlResponse(ControlResponseFrame { response }))
            .await;
        for f in then {
            self.bridge.send(f).await;
        }
    }

    async fn initialize(&self, f: &Extra) -> Result<Reply, Refusal> {
        if self.initialized.swap(true, Ordering::SeqCst) {
            return Err((
                "initialize was already received; hooks and settings can be registered once per process".into(),
                "already_initialized",
            ));
        }
        let mut hooks = Vec::new();
        let mut unsupported = Vec::new();
        if let Some(map) = f.get("hooks").and_then(Value::as_object) {
            for (name, matchers) in map {
                let Some(event) = HookEvent::parse(name) else {
                    unsupported.push(name.clone());
                    continue;
                };
                for (i, m) in matchers.as_array().into_iter().flatten().enumerate() {
                    let h = RegisteredHook::parse(event, m).map_err(|e| {
                        self.initialized.store(false, Ordering::SeqCst);
                        (
                            format!("initialize: hooks.{name}[{i}]: {e}"),
                            "invalid_request",
                        )
                    })?;
                    hooks.push(h);
                }
            }
        }
        if !unsupported.is_empty() {
            eprintln!(
                "keel: hooks for {} are accepted but not supported yet (keel fires PreToolUse, PostToolUse, UserPromptSubmit and Stop); they will not be called",
                unsupported.join(", ")
            );
        }
        self.bridge.set_hooks(hooks);
        self.system_prompt_fields(f);
        self.initialize_notices(f);
        // Agent types a host defines (the Python SDK's `agents` option) join the session's.
        if let Some(agents) = f
            .get("agents")
            .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
        {
            if let Err(e) = self.handle.register_agents(&agents.to_string()) {
                eprintln!("keel: initialize: agents: {e}; ignored");
            }
        }
        if let Some(tools) = f.get("disallowedTools").and_then(Value::as_array) {
            let rules: Vec<Rule> = tools
                .iter()
                .filter_map(Value::as_str)
                .flat_map(keel_core::permissions::split_rule_list)
                .filter_map(|r| match Rule::parse(&r, RuleSource::Session) {
                    Ok(rule) => Some(rule),
                    Err(e) => {
                        eprintln!("keel: initialize: disallowedTools: {e}; ignored");
                        None
                    }
                })
                .collect();
            self.handle
                .apply_permission_updates(&[PermissionUpdate::AddRules {
                    behavior: RuleBehavior::Deny,
                    rules,
                }]);
        }
        let model = self.info.initial_model.clone();
        let response = json!({
            "commands": [],
            "agents": self.handle.agent_names().iter().map(|a| json!({"name": a})).collect::<Vec<_>>(),
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": [{
                "value": "default",
                "resolvedModel": model,
                "displayName": "Default",
                "description": format!("The model keel was started with ({model})"),
                "supportsEffort": false,
                "supportedEffortLevels": [],
                "supportsAdaptiveThinking": false,
                "supportsFastMode": false,
                "supportsAutoMode": false,
                "supportsThinkingOff": true,
            }],
            "account": {
                "tokenSource": "none",
                "apiKeySource": self.info.api_key_source,
                "apiProvider": "firstParty",
            },
            "pid": std::process::id(),
            "claude_code_version": keel_core::PROTOCOL_VERSION,
            "keel_version": keel_core::KEEL_VERSION,
            "current_permission_mode": self.handle.permission_mode().as_str(),
            "hooks_applied": true,
            "hook_on_failure_supported": true,
            "analytics_disabled": true,
            "fast_mode_state": "off",
            "session_state": if self.handle.is_running() { "running" } else { "idle" },
            "capabilities": ["interrupt_receipt_v1", "interrupt_cancel_queued_v1"],
        });
        let mut reply = Reply::new(response);
        reply
            .envelope
            .insert("pending_permission_requests".into(), json!([]));
        reply
            .envelope
            .insert("pending_user_dialog_requests".into(), json!([]));
        Ok(reply)
    }

    /// The TS SDK sends the system prompt in initialize (`systemPrompt: [""]` = none).
    fn system_prompt_fields(&self, f: &Extra) {
        let prompt = match f.get("systemPrompt") {
            Some(Value::String(s)) => Some(Some(s.clone())),
            Some(Value::Array(parts)) => Some(Some(
                parts
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            )),
            _ => None,
        };
        let append = f
            .get("appendSystemPrompt")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if prompt.is_none() && append.is_none() {
            return;
        }
        self.queue.push_edit(Edit::SystemPrompt { prompt, append });
    }

    fn initialize_notices(&self, f: &Extra) {
        let nonempty = |k: &str| match f.get(k) {
            None | Some(Value::Null) => false,
            Some(Value::Object(m)) => !m.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        let mut notes = Vec::new();
        if nonempty("jsonSchema") {
            notes.push("jsonSchema (structured output is not produced)");
        }
        if nonempty("sdkMcpServers") || nonempty("mcpServers") {
            notes.push("MCP servers (keel does not start MCP servers yet)");
        }
        if nonempty("settings") || nonempty("managedSettings") {
            notes.push("settings (not applied)");
        }
        if nonempty("plugins") {
            notes.push("plugins (keel has no plugins yet)");
        }
        if !notes.is_empty() {
            eprintln!(
                "keel: initialize carries fields that are accepted but not supported yet: {}",
                notes.join("; ")
            );
        }
    }

    async fn set_permission_mode(&self, f: &Extra) -> Result<Reply, Refusal> {
        let modes: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.as_str()).collect();
        let requested = f.get("mode").and_then(Value::as_str).unwrap_or("");
        let Some(mode) = PermissionMode::parse(requested) else {
            let error = if requested == "auto" {
                format!(
                    "Cannot set permission mode: auto is not supported by keel yet; use one of {}",
                    modes.join(", ")
                )
            } else {
                format!(
                    "Cannot set permission mode: must be one of {}",
                    modes.join(", ")
                )
            };
            return Err((error, "invalid_mode"));
        };
        if mode == PermissionMode::BypassPermissions
            && nix::unistd::geteuid().is_root()
            && std::env::var_os("IS_SANDBOX").is_none()
        {
            return Err((
                "Cannot set permission mode: bypassPermissions cannot be used as root, where a command could change anything on the machine (set IS_SANDBOX=1 in a disposable sandbox)".into(),
                "invalid_mode",
            ));
        }
        self.handle.set_permission_mode(mode);
        let mut reply = Reply::new(json!({ "mode": mode.as_str() }));
        // The status frame follows the response, as in the reference.
        reply
            .then
            .push(self.bridge.mode_status_frame(mode.as_str()));
        Ok(reply)
    }

    async fn set_model(&self, f: &Extra) -> Result<Reply, Refusal> {
        let model = match f.get("model") {
            None | Some(Value::Null) => self.info.initial_model.clone(),
            Some(Value::String(s)) if s.trim().is_empty() || s == "default" => {
                self.info.initial_model.clone()
            }
            Some(Value::String(s)) => s.trim().to_owned(),
            Some(other) => {
                return Err((
                    format!("Cannot set model: {other} is not a model name"),
                    "invalid_request",
                ))
            }
        };
        self.handle.set_model(model.clone());
        let mut extra = Extra::new();
        extra.insert("isReplay".into(), json!(true));
        self.bridge
            .send(Frame::User(UserFrame {
                message: UserMessage {
                    role: Role::User,
                    content: MessageContent::Text(format!(
                        "<local-command-stdout>Set model to `{model}`</local-command-stdout>"
                    )),
                    extra: Extra::new(),
                },
                parent_tool_use_id: None,
                session_id: self.bridge.session_id().to_owned(),
                uuid: Some(new_uuid()),
                timestamp: Some(now_rfc3339()),
                tool_use_result: None,
                tool_result_meta: None,
                extra,
            }))
            .await;
        Ok(Reply::new(json!({ "model": model })))
    }

    /// The truthful interrupt receipt: what was running, what was stopped, what never started,
    /// what is still queued (or, with `cancel_queued`, was dropped from the queue).
    /// `stop_task{task_id}`: stop one background task (an interrupt leaves them running).
    async fn stop_task(&self, f: &Extra) -> Result<Reply, Refusal> {
        let Some(id) = f.get("task_id").and_then(Value::as_str) else {
            return Err(("stop_task needs a `task_id`".to_owned(), "invalid_request"));
        };
        match self.handle.stop_task(id).await {
            Ok(status) => Ok(Reply::new(
                json!({"task_id": id, "status": status.as_str(), "end_state": status.describe()}),
            )),
            Err(e) => Err((e, "unknown_task")),
        }
    }

    async fn interrupt(&self, f: &Extra) -> Value {
        let cancel_queued = f.get("cancel_queued").and_then(Value::as_bool) == Some(true);
        let (still_queued, cancelled) = self.queue.interrupt_snapshot(cancel_queued);
        if self.queue.is_starting() && !self.handle.is_running() {
            // A message was taken for a turn that has not armed its cancel token yet: it will
            // within moments; interrupt that turn rather than report "nothing running".
            self.handle.wait_until_running(Duration::from_secs(2)).await;
        }
        let receipt = self.handle.interrupt().await;
        let mut v = json!({
            "still_queued": still_queued,
            "was_running": receipt.was_running,
            "stopped": receipt.stopped,
            "never_started": receipt.never_started,
            "processes_killed": receipt.processes_killed,
            "turn_ended": receipt.turn_ended,
            "background_running": receipt.background_running,
        });
        if cancel_queued {
            v["cancelled"] = json!(cancelled);
        }
        v
    }
}
