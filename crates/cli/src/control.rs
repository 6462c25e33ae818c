//! The control server: answers the host's control requests (`initialize`, `interrupt`,
//! `set_permission_mode`, `set_model`, `set_max_thinking_tokens`, `mcp_status`, `mcp_reconnect`, `mcp_toggle`,
//! `stop_task`, `rewind_files`; anything else is `unsupported_request`),
//! and owns the keel → host side ([`host`]). Success and error envelopes are exactly the
//! reference's; the texts are keel's.

pub mod host;
pub(crate) mod rewind;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keel_core::builder::options::{ThinkingBudget, MIN_THINKING_TOKENS};
use keel_core::emit::{new_uuid, now_rfc3339};
use keel_core::hooks::HookEvent;
use keel_core::permissions::{PermissionMode, Rule, RuleSource};
use keel_core::SessionHandle;
use keel_protocol::control::{
    HookMatcherConfig, InitializeRequest, InterruptRequest, Request, SetMaxThinkingTokensRequest,
    SetModelRequest, SetPermissionModeRequest, StopTaskRequest,
};
use keel_protocol::frames::{ControlRequestFrame, ControlResponseFrame, UserMessage};
use keel_protocol::{
    ControlError, ControlResponse, ControlSuccess, Extra, Frame, MessageContent, Role, UserFrame,
};
use serde_json::{json, Value};

use crate::queue::{Edit, Queue};
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

/// Answers host → keel control requests.
pub struct Controller {
    /// The keel → host side.
    pub bridge: Arc<Bridge>,
    handle: SessionHandle,
    queue: Arc<Queue>,
    initialized: AtomicBool,
}

impl Controller {
    /// A controller for the session behind `handle`.
    pub fn new(bridge: Arc<Bridge>, handle: SessionHandle, queue: Arc<Queue>) -> Self {
        Self {
            bridge,
            handle,
            queue,
            initialized: AtomicBool::new(false),
        }
    }

    /// Answer one request. Everything is answered in arrival order except `interrupt`, which
    /// waits for the turn to wind down and so runs on its own task.
    pub async fn handle(self: &Arc<Self>, frame: ControlRequestFrame) {
        let id = frame.request_id;
        let request = match Request::from_wire(&frame.request) {
            Ok(r) => r,
            Err(e) => {
                let refusal = (format!("Malformed control request: {e}"), "invalid_request");
                return self.respond(id, Err(refusal)).await;
            }
        };
        let answer = match request {
            Request::Interrupt(r) => {
                let this = self.clone();
                tokio::spawn(async move {
                    let receipt = this.interrupt(&r).await;
                    this.respond(id, Ok(Reply::new(receipt))).await;
                });
                return;
            }
            // Stopping and starting a server takes up to MCP_TIMEOUT: on its own task too.
            Request::McpReconnect(r) => {
                let this = self.clone();
                tokio::spawn(async move {
                    let hub = this.handle.context().mcp().clone();
                    let answer = match hub.reconnect(&r.server_name).await {
                        Ok(s) if s.status == "connected" => Ok(Reply::new(json!({}))),
                        Ok(s) => Err((
                            format!(
                                "MCP server {} did not reconnect: {}",
                                s.name,
                                s.error.unwrap_or_default()
                            ),
                            "mcp_error",
                        )),
                        Err(e) => Err((e.to_string(), "invalid_request")),
                    };
                    this.respond(id, answer).await;
                });
                return;
            }
            Request::McpToggle(r) => {
                let this = self.clone();
                tokio::spawn(async move {
                    let hub = this.handle.context().mcp().clone();
                    let answer = match hub.toggle(&r.server_name, r.enabled).await {
                        Ok(_) => Ok(Reply::new(json!({}))),
                        Err(e) => Err((e.to_string(), "invalid_request")),
                    };
                    this.respond(id, answer).await;
                });
                return;
            }
            Request::Initialize(r) => self.initialize(r).await,
            Request::SetPermissionMode(r) => self.set_permission_mode(&r).await,
            Request::SetModel(r) => self.set_model(r).await,
            Request::SetMaxThinkingTokens(r) => self.set_max_thinking_tokens(&r),
            Request::McpStatus(_) => Ok(Reply::new(json!({
                "mcpServers": self
                    .handle
                    .context()
                    .mcp_servers()
                    .iter()
                    .map(keel_core::mcp::ServerStatus::to_json)
                    .collect::<Vec<_>>()
            }))),
            Request::StopTask(r) => self.stop_task(&r).await,
            Request::RewindFiles(r) => rewind::rewind_files(&self.handle, r).await,
            Request::CanUseTool(_)
            | Request::HookCallback(_)
            | Request::McpMessage(_)
            | Request::Unknown { .. } => Err((
                format!("Unsupported control request subtype: {}", request.subtype()),
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

    async fn initialize(&self, r: InitializeRequest) -> Result<Reply, Refusal> {
        if self.initialized.swap(true, Ordering::SeqCst) {
            return Err((
                "initialize was already received; hooks and settings can be registered once per process".into(),
                "already_initialized",
            ));
        }
        let done = self.apply_initialize(r);
        if done.is_err() {
            // A refused initialize may be sent again, corrected.
            self.initialized.store(false, Ordering::SeqCst);
        }
        done
    }

    /// What initialize registers, in order: hooks, MCP servers the host runs, the subagent
    /// text switch, the system prompt, agent types and deny rules; then the answer.
    fn apply_initialize(&self, r: InitializeRequest) -> Result<Reply, Refusal> {
        let hooks = initialize_hooks(&r)?;
        // MCP servers the host runs may be named here instead of in --mcp-config.
        if let Some(list) = r.extra.get("sdkMcpServers").filter(|v| !v.is_null()) {
            let names = sdk_server_names(list)?;
            self.handle.context().mcp().add_sdk_servers(&names);
        }
        // Off unless the host asks: a foreground subagent's text stays out of the stream.
        match r.extra.get("forwardSubagentText") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(on)) => self.queue.push_edit(Edit::ForwardSubagentText(*on)),
            Some(other) => {
                return Err((
                    format!("initialize: forwardSubagentText must be true or false, got {other}"),
                    "invalid_request",
                ));
            }
        }
        self.bridge.set_hooks(hooks);
        self.system_prompt_fields(&r);
        self.initialize_notices(&r.extra);
        let ctx = self.handle.context();
        // Agent types a host defines (the Python SDK's `agents` option) join the session's.
        if let Some(agents) = r
            .agents
            .as_ref()
            .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
        {
            if let Err(e) = ctx.register_agents(&agents.to_string()) {
                eprintln!("keel: initialize: agents: {e}; ignored");
            }
        }
        if let Some(tools) = &r.disallowed_tools {
            // Into the session's context: every agent, subagents included, is bound by them.
            ctx.deny(disallowed_rules(tools)?);
        }
        Ok(self.initialize_reply())
    }

    /// The answer to initialize: what the session offers (commands, agents, output styles,
    /// its model, account) and what of the protocol keel supports.
    fn initialize_reply(&self) -> Reply {
        let ctx = self.handle.context();
        let model = ctx.initial_model().to_owned();
        let response = json!({
            "commands": ctx.extensions().initialize_commands(),
            "agents": ctx.agent_names().iter().map(|a| json!({"name": a})).collect::<Vec<_>>(),
            "output_style": ctx.output_style(),
            "available_output_styles": ctx.available_output_styles(),
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
                "apiKeySource": ctx.api_key_source(),
                "apiProvider": "firstParty",
            },
            "pid": std::process::id(),
            "claude_code_version": keel_core::PROTOCOL_VERSION,
            "keel_version": keel_core::KEEL_VERSION,
            "current_permission_mode": ctx.permission_mode().as_str(),
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
        reply
    }

    /// The TS SDK sends the system prompt in initialize (`systemPrompt: [""]` = none).
    fn system_prompt_fields(&self, r: &InitializeRequest) {
        let prompt = match &r.system_prompt {
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
        let append = r.append_system_prompt.clone();
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
        // `jsonSchema` needs no note: both SDKs also pass it as --json-schema, which keel honours.
        if nonempty("mcpServers") {
            notes.push("MCP servers given in initialize (keel starts only those of --mcp-config and the settings files)");
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

    async fn set_permission_mode(&self, r: &SetPermissionModeRequest) -> Result<Reply, Refusal> {
        let modes: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.as_str()).collect();
        let requested = r.mode.as_str();
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
        // One gate for every route: the launch flags and the root rule.
        if let Err(why) = self.handle.context().set_permission_mode(mode) {
            return Err((format!("Cannot set permission mode: {why}"), "invalid_mode"));
        }
        let mut reply = Reply::new(json!({ "mode": mode.as_str() }));
        // The status frame follows the response, as in the reference.
        reply
            .then
            .push(self.bridge.mode_status_frame(mode.as_str()));
        Ok(reply)
    }

    async fn set_model(&self, r: SetModelRequest) -> Result<Reply, Refusal> {
        let ctx = self.handle.context();
        let model = match r.model.as_deref().map(str::trim) {
            None | Some("") | Some("default") => ctx.initial_model().to_owned(),
            Some(m) => m.to_owned(),
        };
        ctx.set_model(model.clone());
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

    /// `set_max_thinking_tokens{max_thinking_tokens}`: the thinking budget of every later
    /// request, checked as `--max-thinking-tokens` is (0, or 1024 up to the output limit);
    /// `null` returns to the launch budget. The answer says the budget now in force. A
    /// `thinking_display` is refused rather than ignored: keel shows thinking as the API sends it.
    fn set_max_thinking_tokens(&self, r: &SetMaxThinkingTokensRequest) -> Result<Reply, Refusal> {
        if r.thinking_display.is_some() {
            return Err((
                "Cannot set thinking_display: keel shows thinking as the API sends it; send \
                 thinking_display as null or leave it out"
                    .to_owned(),
                "unsupported_request",
            ));
        }
        let ctx = self.handle.context();
        let tokens = match r.max_thinking_tokens {
            None => ctx.launch_thinking_tokens(),
            Some(n) => ThinkingBudget::new(n)
                .ok_or_else(|| {
                    (
                        format!(
                            "Cannot set max_thinking_tokens to {n}: it must be 0 (no thinking) or \
                         from {MIN_THINKING_TOKENS} to {}",
                            ThinkingBudget::max_tokens()
                        ),
                        "invalid_request",
                    )
                })?
                .tokens(),
        };
        let now = ctx.set_thinking_tokens(tokens);
        Ok(Reply::new(
            json!({ "max_thinking_tokens": now.unwrap_or(0) }),
        ))
    }

    /// The truthful interrupt receipt: what was running, what was stopped, what never started,
    /// what is still queued (or, with `cancel_queued`, was dropped from the queue).
    /// `stop_task{task_id}`: stop one background task (an interrupt leaves them running).
    async fn stop_task(&self, r: &StopTaskRequest) -> Result<Reply, Refusal> {
        let id = r.task_id.as_str();
        match self.handle.stop_task(id).await {
            Ok(status) => Ok(Reply::new(
                json!({"task_id": id, "status": status.as_str(), "end_state": status.describe()}),
            )),
            Err(e) => Err((e.to_string(), "unknown_task")),
        }
    }

    async fn interrupt(&self, r: &InterruptRequest) -> Value {
        let cancel_queued = r.cancel_queued == Some(true);
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

/// The hooks a host registers in initialize (`hooks.<Event>[i]`); events keel does not fire
/// are accepted with a warning.
fn initialize_hooks(r: &InitializeRequest) -> Result<Vec<RegisteredHook>, Refusal> {
    let mut hooks = Vec::new();
    let mut unsupported = Vec::new();
    for (name, matchers) in r.hooks.iter().flatten() {
        let Some(event) = HookEvent::parse(name) else {
            unsupported.push(name.clone());
            continue;
        };
        for (i, m) in matchers.as_array().into_iter().flatten().enumerate() {
            let h = serde_json::from_value::<HookMatcherConfig>(m.clone())
                .map_err(|e| e.to_string())
                .and_then(|c| RegisteredHook::from_config(event, c))
                .map_err(|e| {
                    (
                        format!("initialize: hooks.{name}[{i}]: {e}"),
                        "invalid_request",
                    )
                })?;
            hooks.push(h);
        }
    }
    if !unsupported.is_empty() {
        eprintln!(
            "keel: hooks for {} are accepted but not supported yet (keel fires PreToolUse, PostToolUse, UserPromptSubmit and Stop); they will not be called",
            unsupported.join(", ")
        );
    }
    Ok(hooks)
}

/// `sdkMcpServers`: the names of MCP servers the host runs (non-empty, at most 256 bytes).
fn sdk_server_names(list: &Value) -> Result<Vec<String>, Refusal> {
    list.as_array()
        .and_then(|a| {
            a.iter()
                .map(|n| n.as_str().filter(|s| !s.is_empty() && s.len() <= 256))
                .map(|n| n.map(str::to_owned))
                .collect::<Option<Vec<String>>>()
        })
        .ok_or_else(|| {
            (
                "initialize: sdkMcpServers must be a list of server names (non-empty strings of at most 256 bytes)".to_owned(),
                "invalid_request",
            )
        })
}

/// `disallowedTools` as deny rules. Rules a host cannot get right are refused outright:
/// dropping one would let a tool the host meant to deny run.
fn disallowed_rules(tools: &[String]) -> Result<Vec<Rule>, Refusal> {
    let mut rules = Vec::new();
    for text in tools
        .iter()
        .flat_map(|t| keel_core::permissions::split_rule_list(t))
    {
        match Rule::parse(&text, RuleSource::Session) {
            Ok(rule) => rules.push(rule),
            Err(e) => {
                return Err((
                    format!("initialize: disallowedTools: {e}"),
                    "invalid_request",
                ))
            }
        }
    }
    Ok(rules)
}
