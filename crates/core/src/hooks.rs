//! Hooks: code outside the engine that sees (and may veto) prompts and tool calls.
//!
//! The engine calls a session's [`Hooks`] at every event Claude Code's hooks know: before a
//! tool call runs (`PreToolUse`, which may block any tool, Task included, or ask for approval),
//! when the rules leave a call to be asked about (`PermissionRequest`, which may answer), after
//! it ran (`PostToolUse`, or `PostToolUseFailure` when it failed: notes for the model), when a
//! prompt arrives (`UserPromptSubmit`, which may block it: the turn then ends without a model
//! call), when the model is about to end its turn (`Stop` / `SubagentStop`, which may send it
//! back to work), when a session or subagent starts (`SessionStart`, `SubagentStart`: context),
//! before a compaction (`PreCompact`), when keel waits for the user (`Notification`) and when
//! the session ends (`SessionEnd`). Answers use the JSON output format of Claude Code hooks,
//! parsed by [`HookDecision::from_output`]; matchers are Claude Code's ([`matcher_covers`]).
//!
//! Deadlines and failure policies (fail open, fail closed) belong to the implementation, which
//! knows each hook's declared timeout; the engine additionally races every hook against the
//! turn's cancel token, so an interrupt never waits on one.

use std::fmt;

use futures_util::future::BoxFuture;
use keel_tools::CancelToken;
use serde_json::{json, Map, Value};

/// The hook events keel fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// Before a tool call runs.
    PreToolUse,
    /// After a tool call ran.
    PostToolUse,
    /// When a prompt arrives, before the model sees it.
    UserPromptSubmit,
    /// When the model ends its turn.
    Stop,
    /// Before the conversation is compacted.
    PreCompact,
    /// When a subagent ends its turn.
    SubagentStop,
    /// When a session starts (or is resumed).
    SessionStart,
    /// When a session ends.
    SessionEnd,
    /// When keel needs the user (a permission question).
    Notification,
    /// When a permission question is about to be asked: the hook may answer it.
    PermissionRequest,
    /// After a tool call failed (instead of PostToolUse).
    PostToolUseFailure,
    /// When a subagent starts, before its first request.
    SubagentStart,
}

impl HookEvent {
    /// Every event keel fires.
    pub const ALL: [HookEvent; 12] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::PreCompact,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::Notification,
        HookEvent::PermissionRequest,
        HookEvent::PostToolUseFailure,
        HookEvent::SubagentStart,
    ];

    /// The wire name (`hook_event_name`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::SubagentStart => "SubagentStart",
        }
    }

    /// Parse a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Whether hooks of this event are matched against a tool name.
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
        )
    }

    /// For the other events, the input field a matcher is compared with (SessionStart's
    /// `source`, SessionEnd's `reason`, PreCompact's `trigger`, Notification's
    /// `notification_type`, SubagentStart/SubagentStop's `agent_type`); `None`: matchers are
    /// ignored and every hook of the event runs.
    pub fn matched_field(self) -> Option<&'static str> {
        match self {
            HookEvent::SessionStart => Some("source"),
            HookEvent::SessionEnd => Some("reason"),
            HookEvent::PreCompact => Some("trigger"),
            HookEvent::Notification => Some("notification_type"),
            HookEvent::SubagentStart | HookEvent::SubagentStop => Some("agent_type"),
            _ => None,
        }
    }

    /// Whether a hook of this event can stop what it is about (a failing guard then blocks
    /// unless it opted out): PreToolUse, UserPromptSubmit, PermissionRequest.
    pub fn guards(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::UserPromptSubmit | HookEvent::PermissionRequest
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tool part of a hook's input.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolHookInput {
    /// The tool.
    pub name: String,
    /// The call's input.
    pub input: Value,
    /// The call's id.
    pub tool_use_id: String,
    /// What the tool returned (PostToolUse only).
    pub response: Option<Value>,
}

/// What a hook is told (serialized by [`HookInput::to_json`] in Claude Code's hook input shape).
#[derive(Clone, Debug, PartialEq)]
pub struct HookInput {
    /// The event.
    pub event: HookEvent,
    /// The session id.
    pub session_id: String,
    /// The working directory.
    pub cwd: String,
    /// The permission mode in force.
    pub permission_mode: String,
    /// The transcript file, when the session keeps one ("" otherwise).
    pub transcript_path: String,
    /// For tool events.
    pub tool: Option<ToolHookInput>,
    /// For UserPromptSubmit: the prompt's text.
    pub prompt: Option<String>,
    /// For Stop: whether a Stop hook already sent the model back to work in this turn.
    pub stop_hook_active: bool,
    /// For Stop: the text of the model's last reply.
    pub last_assistant_message: Option<String>,
    /// For PreCompact: `auto` or `manual`, and the instructions given with `/compact`.
    pub compact: Option<(String, String)>,
    /// Fields of the other events (`source` for SessionStart, `reason` for SessionEnd,
    /// `message` for Notification).
    pub extra: Vec<(String, Value)>,
}

impl HookInput {
    /// The tool the event is about, if any.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool.as_ref().map(|t| t.name.as_str())
    }

    /// What the hooks' matchers are compared with: the tool's name for tool events, the
    /// event's [`HookEvent::matched_field`] otherwise (`None`: every hook of the event runs).
    pub fn subject(&self) -> Option<&str> {
        if self.event.is_tool_event() {
            return Some(self.tool_name().unwrap_or(""));
        }
        if let Some((trigger, _)) = &self.compact {
            return Some(trigger.as_str());
        }
        let field = self.event.matched_field()?;
        self.extra
            .iter()
            .find(|(k, _)| k == field)
            .and_then(|(_, v)| v.as_str())
    }

    /// The call the event is about, if any.
    pub fn tool_use_id(&self) -> Option<&str> {
        self.tool.as_ref().map(|t| t.tool_use_id.as_str())
    }

    /// The JSON a hook receives.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("session_id".into(), json!(self.session_id));
        m.insert("transcript_path".into(), json!(self.transcript_path));
        m.insert("cwd".into(), json!(self.cwd));
        m.insert("permission_mode".into(), json!(self.permission_mode));
        m.insert("hook_event_name".into(), json!(self.event.as_str()));
        if let Some(t) = &self.tool {
            m.insert("tool_name".into(), json!(t.name));
            m.insert("tool_input".into(), t.input.clone());
            if let Some(r) = &t.response {
                m.insert("tool_response".into(), r.clone());
            }
            m.insert("tool_use_id".into(), json!(t.tool_use_id));
        }
        if let Some(p) = &self.prompt {
            m.insert("prompt".into(), json!(p));
        }
        if let Some((trigger, instructions)) = &self.compact {
            m.insert("trigger".into(), json!(trigger));
            m.insert("custom_instructions".into(), json!(instructions));
        }
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        if matches!(self.event, HookEvent::Stop | HookEvent::SubagentStop) {
            m.insert("stop_hook_active".into(), json!(self.stop_hook_active));
            if let Some(t) = &self.last_assistant_message {
                m.insert("last_assistant_message".into(), json!(t));
            }
        }
        Value::Object(m)
    }
}

/// A hook's output keel cannot use, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookOutputError(pub String);

/// What the hooks of one event decided, all together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HookDecision {
    /// Block: the tool call does not run / the prompt is not processed / the model goes on
    /// working (Stop). The reason is what the model (or the result) is told.
    pub block: Option<String>,
    /// PreToolUse: run the call without asking (deny rules still win).
    pub allow: bool,
    /// PreToolUse: ask for approval even if the rules would allow the call; the reason.
    pub ask: Option<String>,
    /// `continue: false`: end the turn; the reason.
    pub stop: Option<String>,
    /// PreToolUse: run the call with this input instead.
    pub updated_input: Option<Value>,
    /// Notes for the model (PostToolUse, UserPromptSubmit, Stop).
    pub additional_context: Vec<String>,
    /// A message for the user (`systemMessage`).
    pub system_message: Option<String>,
}

impl HookDecision {
    /// No opinion: go on as if no hook were registered.
    pub fn proceed() -> Self {
        Self::default()
    }

    /// A block with `reason` (a fail-closed policy uses this).
    pub fn blocked(reason: impl Into<String>) -> Self {
        Self {
            block: Some(reason.into()),
            ..Self::default()
        }
    }

    /// Parse one hook's output. An answer that is not an object, or that uses a field wrongly
    /// (an unknown `decision` or `permissionDecision`), is an error: the caller applies the
    /// hook's failure policy. Unknown fields are ignored.
    pub fn from_output(event: HookEvent, out: &Value) -> Result<Self, HookOutputError> {
        Self::read_output(event, out).map_err(HookOutputError)
    }

    fn read_output(event: HookEvent, out: &Value) -> Result<Self, String> {
        let obj = match out {
            Value::Object(o) => o,
            Value::Null => return Err("the hook returned nothing (null)".into()),
            other => return Err(format!("the hook returned {other}, not a JSON object")),
        };
        let mut d = HookDecision::default();
        let reason = obj.get("reason").and_then(Value::as_str).map(str::to_owned);
        if obj.get("async").and_then(Value::as_bool) == Some(true) {
            return Ok(d); // asynchronous hooks do not decide anything
        }
        if obj.get("continue").and_then(Value::as_bool) == Some(false) {
            d.stop = Some(
                obj.get("stopReason")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("a {event} hook stopped the turn")),
            );
        }
        match obj.get("decision") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "block" => {
                d.block = Some(
                    reason
                        .clone()
                        .unwrap_or_else(|| format!("a {event} hook blocked it")),
                );
            }
            Some(Value::String(s)) if s == "approve" && event == HookEvent::PreToolUse => {
                d.allow = true;
            }
            Some(other) => return Err(format!("the hook's decision {other} is not \"block\"")),
        }
        if let Some(m) = obj.get("systemMessage").and_then(Value::as_str) {
            d.system_message = Some(m.to_owned());
        }
        let Some(specific) = obj.get("hookSpecificOutput") else {
            return Ok(d);
        };
        let Some(specific) = specific.as_object() else {
            if specific.is_null() {
                return Ok(d);
            }
            return Err("the hook's hookSpecificOutput is not an object".into());
        };
        if event == HookEvent::PreToolUse {
            let why = specific
                .get("permissionDecisionReason")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match specific.get("permissionDecision") {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => match s.as_str() {
                    "allow" => d.allow = true,
                    "deny" => {
                        d.block = Some(
                            why.or(reason)
                                .unwrap_or_else(|| "a PreToolUse hook denied it".into()),
                        )
                    }
                    "ask" => {
                        d.ask = Some(
                            why.unwrap_or_else(|| "a PreToolUse hook asked for approval".into()),
                        )
                    }
                    "defer" => {}
                    other => {
                        return Err(format!(
                        "the hook's permissionDecision {other:?} is not allow, deny, ask or defer"
                    ))
                    }
                },
                Some(other) => {
                    return Err(format!(
                        "the hook's permissionDecision {other} is not a string"
                    ))
                }
            }
            match specific.get("updatedInput") {
                None | Some(Value::Null) => {}
                Some(v @ Value::Object(_)) => d.updated_input = Some(v.clone()),
                Some(other) => {
                    return Err(format!("the hook's updatedInput {other} is not an object"))
                }
            }
        }
        if event == HookEvent::PermissionRequest {
            read_permission_answer(specific, &mut d)?;
        }
        if let Some(c) = specific.get("additionalContext").and_then(Value::as_str) {
            if !c.trim().is_empty() {
                d.additional_context.push(c.to_owned());
            }
        }
        Ok(d)
    }

    /// Combine with the decision of another hook of the same event: a stop or a block wins
    /// over an ask, an ask over an allow; notes accumulate.
    pub fn merge(&mut self, other: HookDecision) {
        if self.stop.is_none() {
            self.stop = other.stop;
        }
        match (&mut self.block, other.block) {
            (None, b) => self.block = b,
            (Some(a), Some(b)) if *a != b => {
                a.push_str("; ");
                a.push_str(&b);
            }
            _ => {}
        }
        if self.ask.is_none() {
            self.ask = other.ask;
        }
        self.allow |= other.allow;
        if self.updated_input.is_none() {
            self.updated_input = other.updated_input;
        }
        self.additional_context.extend(other.additional_context);
        if self.system_message.is_none() {
            self.system_message = other.system_message;
        }
    }
}

/// A PermissionRequest hook's answer, `hookSpecificOutput.decision`: `{"behavior": "allow"}`
/// answers the question yes, `{"behavior": "deny", "message": ...}` no. keel does not take an
/// `updatedInput` from it (the call would have to be judged again; PreToolUse can do that).
fn read_permission_answer(
    specific: &Map<String, Value>,
    d: &mut HookDecision,
) -> Result<(), String> {
    let answer = match specific.get("decision") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(a)) => a,
        Some(other) => return Err(format!("the hook's decision {other} is not an object")),
    };
    match answer.get("behavior").and_then(Value::as_str) {
        Some("allow") => d.allow = true,
        Some("deny") => {
            let why = answer
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .unwrap_or("a PermissionRequest hook denied it");
            d.block = Some(why.to_owned());
            if answer.get("interrupt").and_then(Value::as_bool) == Some(true) {
                d.stop = Some(why.to_owned());
            }
        }
        _ => {
            return Err(format!(
                "the hook's decision.behavior {} is not \"allow\" or \"deny\"",
                answer.get("behavior").unwrap_or(&Value::Null)
            ))
        }
    }
    Ok(())
}

/// A hook matcher that is not a valid regular expression.
#[derive(Debug, thiserror::Error)]
#[error("the matcher {matcher:?} is not a valid regular expression ({source})")]
pub struct MatcherError {
    /// The matcher as written.
    pub matcher: String,
    /// What the regular expression parser said.
    #[source]
    pub source: regex::Error,
}

/// The most memory a matcher's compiled form may take: a settings file is a repository's
/// text, and a pathological pattern must be refused, not compiled.
const MATCHER_SIZE_LIMIT: usize = 1 << 20;

/// Whether `m` is a plain list of names (`Bash`, `Edit|Write`), compared exactly; anything
/// else is a regular expression.
fn is_plain(m: &str) -> bool {
    m.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|' || c == ' ')
}

fn compile(m: &str) -> Result<regex::Regex, MatcherError> {
    regex::RegexBuilder::new(m)
        .size_limit(MATCHER_SIZE_LIMIT)
        .build()
        .map_err(|source| MatcherError {
            matcher: m.to_owned(),
            source,
        })
}

/// Check a matcher when it is loaded, so a bad one is an error naming its file, not a hook
/// that silently never runs.
pub fn check_matcher(matcher: &str) -> Result<(), MatcherError> {
    let m = matcher.trim();
    if m.is_empty() || m == "*" || is_plain(m) {
        return Ok(());
    }
    compile(m).map(|_| ())
}

/// Whether a hook matcher covers `subject` (a tool's name; for other events the field
/// [`HookEvent::matched_field`] names). As in Claude Code: no matcher, `""` or `*` cover
/// everything; letters, digits, `_` and `|` are exact names (`Edit|Write`), where a tool's
/// other names count (`Task` matches `Agent`); anything else is a regular expression, searched
/// anywhere in the name (`mcp__.*`, `Notebook.*`, `^Bash$`). A matcher that does not compile
/// (refused at load, so only a host's could) covers everything: for a guard that is the side
/// that fails closed.
pub fn matcher_covers(matcher: Option<&str>, subject: &str) -> bool {
    let Some(m) = matcher
        .map(str::trim)
        .filter(|m| !m.is_empty() && *m != "*")
    else {
        return true;
    };
    if is_plain(m) {
        return m.split('|').map(str::trim).any(|alt| {
            alt == subject || (!alt.is_empty() && keel_tools::ToolKind::same_tool(alt, subject))
        });
    }
    match compile(m) {
        Ok(re) => re.is_match(subject),
        Err(e) => {
            tracing::warn!("{e}; the hook runs for everything");
            true
        }
    }
}

/// How one hook run ended, for its `system/hook_response` frame.
#[derive(Clone, Debug, PartialEq)]
pub struct HookRunEnd {
    /// What it printed on stdout (bounded).
    pub stdout: String,
    /// What it printed on stderr (bounded), or why it failed.
    pub stderr: String,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// `success`, `error` or `cancelled`.
    pub outcome: &'static str,
}

/// One hook starting or ending (`system/hook_started`, `system/hook_response`).
#[derive(Clone, Debug, PartialEq)]
pub struct HookProgress {
    /// Pairs the start with the end.
    pub hook_id: String,
    /// `Event:matcher` or `Event`, as Claude Code names hooks.
    pub hook_name: String,
    /// The hook's shell command, cut to 80 characters (the interactive UI names it).
    pub command: String,
    /// The event.
    pub event: HookEvent,
    /// `None`: it started; otherwise how it ended.
    pub end: Option<HookRunEnd>,
}

/// Told when each hook starts and ends (the session turns this into frames).
pub trait HookObserver: Send + Sync {
    /// Report `p`; waited for, so frames keep their order with the rest of the session's.
    fn report(&self, p: HookProgress) -> BoxFuture<'_, ()>;
}

impl HookObserver for crate::emit::Emitter {
    fn report(&self, p: HookProgress) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // A frame that cannot be sent (the front end left) changes nothing the hook does.
            let _ = self.emit(crate::event::Event::Hook(p)).await;
        })
    }
}

/// The hooks of a session.
pub trait Hooks: Send + Sync + fmt::Debug {
    /// Whether any hook listens for `event` whose matcher covers `subject` (the tool, or the
    /// event's matched field; `None`: any hook of the event). Lets the engine skip the call.
    fn wants(&self, event: HookEvent, tool: Option<&str>) -> bool;

    /// Run every hook that matches `input` and combine their decisions. The implementation
    /// enforces each hook's deadline and failure policy; the engine drops the future when the
    /// turn is cancelled, so an implementation that asks someone else must withdraw the
    /// question when dropped.
    fn run(&self, input: HookInput) -> BoxFuture<'_, HookDecision>;

    /// [`Hooks::run`], telling `observer` when each hook starts and ends. Implementations that
    /// report their hooks elsewhere (a host's callbacks have their own frames) just run.
    fn run_observed<'a>(
        &'a self,
        input: HookInput,
        observer: &'a dyn HookObserver,
    ) -> BoxFuture<'a, HookDecision> {
        let _ = observer;
        self.run(input)
    }
}

/// Several sets of hooks (the settings files' and a host's) run as one: every set that wants
/// the event runs, and their decisions merge.
#[derive(Debug)]
pub(crate) struct Chain(pub Vec<std::sync::Arc<dyn Hooks>>);

impl Chain {
    fn run_all<'a>(
        &'a self,
        input: HookInput,
        observer: Option<&'a dyn HookObserver>,
    ) -> BoxFuture<'a, HookDecision> {
        Box::pin(async move {
            let subject = input.subject().map(str::to_owned);
            let runs = self
                .0
                .iter()
                .filter(|h| h.wants(input.event, subject.as_deref()))
                .map(|h| match observer {
                    Some(o) => h.run_observed(input.clone(), o),
                    None => h.run(input.clone()),
                });
            let mut all = HookDecision::proceed();
            for d in futures_util::future::join_all(runs).await {
                all.merge(d);
            }
            all
        })
    }
}

impl Hooks for Chain {
    fn wants(&self, event: HookEvent, subject: Option<&str>) -> bool {
        self.0.iter().any(|h| h.wants(event, subject))
    }

    fn run(&self, input: HookInput) -> BoxFuture<'_, HookDecision> {
        self.run_all(input, None)
    }

    fn run_observed<'a>(
        &'a self,
        input: HookInput,
        observer: &'a dyn HookObserver,
    ) -> BoxFuture<'a, HookDecision> {
        self.run_all(input, Some(observer))
    }
}

/// Run the hooks for `input` unless the turn is cancelled first (`None`), reporting each
/// hook's start and end to `observer` (frames).
pub(crate) async fn run_seen(
    hooks: &dyn Hooks,
    input: HookInput,
    cancel: &CancelToken,
    observer: &dyn HookObserver,
) -> Option<HookDecision> {
    if cancel.is_cancelled() {
        return None;
    }
    tokio::select! {
        d = hooks.run_observed(input, observer) => Some(d),
        _ = cancel.cancelled() => None,
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
