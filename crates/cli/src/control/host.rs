//! Requests keel sends to the SDK host (`can_use_tool`, `hook_callback`) and their answers.
//!
//! Every request gets a UUID `request_id` and is written through the frame channel, so it never
//! interleaves with other stdout lines. A request whose answer is no longer wanted — its
//! deadline passed, the turn was interrupted, the engine dropped the future — is withdrawn with
//! a `control_cancel_request`. When stdin closes, every pending request fails at once: no
//! answer can come any more, and nothing may wait for one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use keel_core::approval::{Approval, ApprovalRequest, Approver, PermissionUpdate};
use keel_core::emit::new_uuid;
use keel_core::hooks::{HookDecision, HookEvent, HookInput, Hooks};
use keel_protocol::control::{
    CanUseToolRequest, HookCallbackRequest, HookMatcherConfig, PermissionAnswer, Request,
};
use keel_protocol::frames::{
    ControlCancelFrame, ControlRequestFrame, SessionStateFrame, StatusFrame, WarningFrame,
};
use keel_protocol::{ControlResponse, Extra, Frame, SystemFrame};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

/// How a request to the host failed.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestError {
    /// No answer within the deadline (the request was withdrawn).
    Timeout(Duration),
    /// The host's input is closed: no answer can come.
    HostGone,
    /// The host answered with an error response.
    Failed(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Timeout(d) => write!(f, "did not answer within {} s", d.as_secs_f64()),
            RequestError::HostGone => f.write_str("could not answer: the host closed keel's input"),
            RequestError::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

type Answer = Result<Value, String>;

/// The keel → host side of the control protocol, shared by the approver, the hooks and the
/// control server.
#[derive(Debug)]
pub struct Bridge {
    tx: mpsc::Sender<Frame>,
    session_id: String,
    pending: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    closed: AtomicBool,
    /// Send `system/session_state_changed` frames (`CLAUDE_CODE_SDK_READS_SESSION_STATE=1`).
    state_frames: bool,
    /// Send `system/hook_started` / `hook_response` (`--include-hook-events`).
    hook_events: bool,
    /// Permission requests waiting for the host (the session "requires action" while > 0).
    awaiting_approval: AtomicUsize,
    hooks: Mutex<Vec<RegisteredHook>>,
}

impl Bridge {
    /// A bridge writing into the frame channel `tx`.
    pub fn new(
        tx: mpsc::Sender<Frame>,
        session_id: String,
        state_frames: bool,
        hook_events: bool,
    ) -> Self {
        Self {
            tx,
            session_id,
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            state_frames,
            hook_events,
            awaiting_approval: AtomicUsize::new(0),
            hooks: Mutex::new(Vec::new()),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session id stamped on frames.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Write a frame (in order with every other stdout line). False if the printer is gone.
    pub async fn send(&self, frame: Frame) -> bool {
        self.tx.send(frame).await.is_ok()
    }

    /// Send a request and wait for its answer (at most `deadline`, when given).
    pub async fn request(
        &self,
        request: Request,
        deadline: Option<Duration>,
    ) -> Result<Value, RequestError> {
        let id = new_uuid();
        let (otx, orx) = oneshot::channel();
        {
            let mut p = self.pending();
            if self.closed.load(Ordering::SeqCst) {
                return Err(RequestError::HostGone);
            }
            p.insert(id.clone(), otx);
        }
        let mut guard = Withdraw {
            bridge: self,
            id: id.clone(),
            armed: true,
        };
        let frame = Frame::ControlRequest(ControlRequestFrame {
            request_id: id,
            request: request.to_wire(),
        });
        if !self.send(frame).await {
            return Err(RequestError::HostGone); // the guard forgets it (nobody reads a cancel)
        }
        let answer = match deadline {
            None => orx.await,
            Some(d) => match tokio::time::timeout(d, orx).await {
                Ok(a) => a,
                Err(_) => return Err(RequestError::Timeout(d)), // the guard withdraws it
            },
        };
        guard.armed = false;
        match answer {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(RequestError::Failed(e)),
            Err(_) => Err(RequestError::HostGone),
        }
    }

    /// Route a `control_response` from the host to the request it answers. False when no
    /// request with that id is waiting (answered, withdrawn, or never sent).
    pub fn deliver(&self, response: ControlResponse) -> bool {
        let (id, answer) = match response {
            ControlResponse::Success(s) => (s.request_id, Ok(s.response.unwrap_or(Value::Null))),
            ControlResponse::Error(e) => (e.request_id, Err(e.error)),
            ControlResponse::Other(v) => {
                let id = v
                    .get("request_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let sub = v.get("subtype").cloned().unwrap_or(Value::Null);
                (
                    id,
                    Err(format!(
                        "the host answered with a control_response of subtype {sub}"
                    )),
                )
            }
        };
        match self.pending().remove(&id) {
            Some(tx) => {
                let _ = tx.send(answer);
                true
            }
            None => false,
        }
    }

    /// stdin is closed: fail every pending request now, and every later one at once.
    pub fn close(&self) {
        let mut p = self.pending();
        self.closed.store(true, Ordering::SeqCst);
        p.clear(); // dropping the senders wakes the waiters with HostGone
    }

    /// Send `system/session_state_changed` (when the host asked for state frames).
    pub async fn state(&self, state: &str) {
        if !self.state_frames {
            return;
        }
        let _ = self.send(self.state_frame(state)).await;
    }

    fn state_frame(&self, state: &str) -> Frame {
        let mut extra = Extra::new();
        extra.insert("sdk_host_only".into(), json!(true));
        Frame::System(SystemFrame::SessionStateChanged(SessionStateFrame {
            state: state.to_owned(),
            session_id: self.session_id.clone(),
            uuid: new_uuid(),
            extra,
        }))
    }

    /// `system/status` announcing a permission mode.
    pub fn mode_status_frame(&self, mode: &str) -> Frame {
        Frame::System(SystemFrame::Status(StatusFrame {
            status: None,
            permission_mode: Some(mode.to_owned()),
            session_id: self.session_id.clone(),
            uuid: new_uuid(),
            extra: Extra::new(),
        }))
    }

    /// Send `system/status` announcing a permission mode.
    pub async fn mode_status(&self, mode: &str) {
        let _ = self.send(self.mode_status_frame(mode)).await;
    }

    /// A problem that did not stop anything: one stderr line and a `system/warning` frame.
    pub async fn warn(&self, message: String, source: &str) {
        eprintln!("keel: {message}");
        let mut extra = Extra::new();
        extra.insert("source".into(), json!(source));
        let _ = self
            .send(Frame::System(SystemFrame::Warning(WarningFrame {
                message,
                session_id: self.session_id.clone(),
                uuid: new_uuid(),
                extra,
            })))
            .await;
    }

    /// Register the hooks of `initialize` (replacing any earlier set).
    pub fn set_hooks(&self, hooks: Vec<RegisteredHook>) {
        *self.hooks.lock().unwrap_or_else(|p| p.into_inner()) = hooks;
    }

    fn matching_hooks(&self, event: HookEvent, tool: Option<&str>) -> Vec<RegisteredHook> {
        self.hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|h| {
                h.event == event && (!event.is_tool_event() || h.matches(tool.unwrap_or("")))
            })
            .cloned()
            .collect()
    }
}

/// Withdraws a request that is dropped or times out before its answer.
struct Withdraw<'a> {
    bridge: &'a Bridge,
    id: String,
    armed: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let was_pending = self.bridge.pending().remove(&self.id).is_some();
        if was_pending && !self.bridge.closed.load(Ordering::SeqCst) {
            // Not async here; the channel is large and drained continuously.
            let _ = self
                .bridge
                .tx
                .try_send(Frame::ControlCancelRequest(ControlCancelFrame {
                    request_id: self.id.clone(),
                }));
        }
    }
}

/// One hook matcher registered in `initialize`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegisteredHook {
    /// The event.
    pub event: HookEvent,
    /// Tool names (`A|B`), `*`, a simple pattern with `.*`, or none for every tool.
    pub matcher: Option<String>,
    /// The host's callback ids.
    pub callback_ids: Vec<String>,
    /// How long each callback may take.
    pub timeout: Duration,
    /// On failure (error, bad answer, timeout): block (`true`) or go on as if it had no opinion.
    pub fail_closed: bool,
}

/// A hook callback's default deadline.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

impl RegisteredHook {
    /// One matcher entry of `initialize.hooks[event]`, range-checked.
    pub fn from_config(event: HookEvent, c: HookMatcherConfig) -> Result<Self, String> {
        let timeout = match c.timeout {
            None => DEFAULT_HOOK_TIMEOUT,
            Some(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.min(24.0 * 3600.0))
            }
            Some(t) => return Err(format!("timeout {t} is not a positive number of seconds")),
        };
        // Like the reference: unset or "continue" fails open; anything else fails closed.
        let fail_closed = c.on_failure.as_deref().is_some_and(|s| s != "continue");
        Ok(Self {
            event,
            matcher: c.matcher.filter(|s| !s.trim().is_empty()),
            callback_ids: c.hook_callback_ids,
            timeout,
            fail_closed,
        })
    }

    /// Whether this matcher covers `tool`.
    pub fn matches(&self, tool: &str) -> bool {
        keel_core::hooks::matcher_covers(self.matcher.as_deref(), tool)
    }
}

/// Hooks answered by the host through `hook_callback` requests.
#[derive(Debug)]
pub struct HostHooks {
    bridge: Arc<Bridge>,
}

impl HostHooks {
    /// Hooks registered on `bridge`.
    pub fn new(bridge: Arc<Bridge>) -> Self {
        Self { bridge }
    }
}

impl Hooks for HostHooks {
    fn wants(&self, event: HookEvent, tool: Option<&str>) -> bool {
        !self.bridge.matching_hooks(event, tool).is_empty()
    }

    fn run(&self, input: HookInput) -> BoxFuture<'_, HookDecision> {
        Box::pin(async move {
            let hooks = self.bridge.matching_hooks(input.event, input.tool_name());
            let json_input = input.to_json();
            let targets: Vec<(&RegisteredHook, &String)> = hooks
                .iter()
                .flat_map(|h| h.callback_ids.iter().map(move |id| (h, id)))
                .collect();
            // Callbacks run side by side, so the wait is the slowest one's, not the sum.
            let calls = targets
                .into_iter()
                .map(|(h, id)| self.callback(h, id, &input, json_input.clone()));
            let decisions = futures_util::future::join_all(calls).await;
            let mut all = HookDecision::proceed();
            for d in decisions {
                all.merge(d);
            }
            all
        })
    }
}

impl HostHooks {
    async fn callback(
        &self,
        hook: &RegisteredHook,
        id: &str,
        input: &HookInput,
        json_input: Value,
    ) -> HookDecision {
        let event = input.event;
        let request = Request::HookCallback(HookCallbackRequest {
            callback_id: id.to_owned(),
            input: json_input,
            tool_use_id: input.tool_use_id().map(str::to_owned),
            extra: Extra::new(),
        });
        let hook_id = new_uuid();
        if self.bridge.hook_events {
            let mut extra = Extra::new();
            extra.insert("hook_id".into(), json!(hook_id));
            extra.insert("hook_name".into(), json!(format!("{event}:{id}")));
            extra.insert("hook_event".into(), json!(event.as_str()));
            self.hook_frame("hook_started", extra).await;
        }
        let answer = self.bridge.request(request, Some(hook.timeout)).await;
        let parsed = match &answer {
            Ok(v) => HookDecision::from_output(event, v)
                .map_err(|e| format!("gave an answer keel cannot use: {e}")),
            Err(e) => Err(e.to_string()),
        };
        if self.bridge.hook_events {
            let mut extra = Extra::new();
            extra.insert("hook_id".into(), json!(hook_id));
            extra.insert("hook_name".into(), json!(format!("{event}:{id}")));
            extra.insert("hook_event".into(), json!(event.as_str()));
            extra.insert(
                "output".into(),
                json!(answer.as_ref().map(|v| v.to_string()).unwrap_or_default()),
            );
            extra.insert("stdout".into(), json!(""));
            extra.insert(
                "stderr".into(),
                json!(parsed.as_ref().err().cloned().unwrap_or_default()),
            );
            let outcome = match (&answer, &parsed) {
                (Err(RequestError::HostGone), _) => "cancelled",
                (_, Ok(_)) => "success",
                _ => "error",
            };
            extra.insert("outcome".into(), json!(outcome));
            self.hook_frame("hook_response", extra).await;
        }
        match parsed {
            Ok(d) => d,
            Err(why) => {
                // Stop hooks cannot block anything by failing: the model has finished.
                let block = hook.fail_closed && event != HookEvent::Stop;
                let policy = if block {
                    "it is set to block on failure, so the action was blocked"
                } else {
                    "it fails open, so keel went on as if it had no opinion"
                };
                self.bridge
                    .warn(
                        format!("the {event} hook callback {id} {why}; {policy}"),
                        "hook",
                    )
                    .await;
                if block {
                    HookDecision::blocked(format!(
                        "the {event} hook callback {id} {why}, and it is set to block on failure"
                    ))
                } else {
                    HookDecision::proceed()
                }
            }
        }
    }

    async fn hook_frame(&self, subtype: &str, mut extra: Extra) {
        extra.insert("type".into(), json!("system"));
        extra.insert("subtype".into(), json!(subtype));
        extra.insert("uuid".into(), json!(new_uuid()));
        extra.insert("session_id".into(), json!(self.bridge.session_id));
        let _ = self.bridge.send(Frame::Other(Value::Object(extra))).await;
    }
}

/// The approver of `--permission-prompt-tool stdio`: asks the host with `can_use_tool`.
#[derive(Debug)]
pub struct HostApprover {
    bridge: Arc<Bridge>,
}

impl HostApprover {
    /// An approver asking through `bridge`.
    pub fn new(bridge: Arc<Bridge>) -> Self {
        Self { bridge }
    }
}

/// Keeps `requires_action` truthful: the state is announced while at least one permission
/// request waits, and `running` again when the last one is settled (answered or dropped).
struct AwaitingApproval<'a> {
    bridge: &'a Bridge,
}

impl<'a> AwaitingApproval<'a> {
    async fn start(bridge: &'a Bridge) -> AwaitingApproval<'a> {
        if bridge.awaiting_approval.fetch_add(1, Ordering::SeqCst) == 0 {
            bridge.state("requires_action").await;
        }
        AwaitingApproval { bridge }
    }
}

impl Drop for AwaitingApproval<'_> {
    fn drop(&mut self) {
        if self.bridge.awaiting_approval.fetch_sub(1, Ordering::SeqCst) == 1
            && self.bridge.state_frames
        {
            let _ = self.bridge.tx.try_send(self.bridge.state_frame("running"));
        }
    }
}

impl Approver for HostApprover {
    fn approve(&self, req: ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(async move {
            let request = Request::CanUseTool(CanUseToolRequest {
                tool_name: req.tool_name.clone(),
                display_name: Some(req.tool_name.clone()),
                input: req.input.clone(),
                description: req.description.clone(),
                permission_suggestions: req.suggestions.clone(),
                blocked_path: req.blocked_path.clone(),
                decision_reason: req.reason.clone(),
                tool_use_id: Some(req.tool_use_id.clone()),
                extra: Extra::new(),
            });
            let waiting = AwaitingApproval::start(&self.bridge).await;
            // No deadline: a person may be deciding. The engine races this against the turn's
            // cancel token, and a closed stdin fails it at once.
            let answer = self.bridge.request(request, None).await;
            drop(waiting);
            match answer {
                Ok(v) => self.parse_answer(&req, &v).await,
                Err(e) => Approval::Deny {
                    message: format!(
                        "Permission to run this {} call was not given: the SDK host's permission callback {e}. It was not run.",
                        req.tool_name
                    ),
                    interrupt: false,
                },
            }
        })
    }
}

impl HostApprover {
    async fn parse_answer(&self, req: &ApprovalRequest, v: &Value) -> Approval {
        let answer = match serde_json::from_value::<PermissionAnswer>(v.clone()) {
            Ok(a) => a,
            Err(e) => {
                let behavior = v
                    .get("behavior")
                    .map_or("(none)".to_owned(), |b| b.to_string());
                return Approval::Deny {
                    message: format!(
                        "The SDK host answered the permission request for this {} call with behavior {behavior}, which keel cannot use ({e}), so it was not run.",
                        req.tool_name
                    ),
                    interrupt: false,
                };
            }
        };
        match answer {
            PermissionAnswer::Allow {
                updated_input,
                updated_permissions,
            } => {
                let (updates, skipped) =
                    PermissionUpdate::parse_all(&updated_permissions.unwrap_or_default());
                for s in skipped {
                    self.bridge
                        .warn(
                            format!("a permission update from the host was not applied: {s}"),
                            "permissions",
                        )
                        .await;
                }
                for u in &updates {
                    if let PermissionUpdate::SetMode(m) = u {
                        self.bridge.mode_status(m.as_str()).await;
                    }
                }
                Approval::Allow {
                    updated_input: updated_input.filter(Value::is_object),
                    updates,
                }
            }
            PermissionAnswer::Deny { message, interrupt } => Approval::Deny { message, interrupt },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(matcher: Option<&str>) -> RegisteredHook {
        RegisteredHook {
            event: HookEvent::PreToolUse,
            matcher: matcher.map(str::to_owned),
            callback_ids: vec!["hook_0".into()],
            timeout: DEFAULT_HOOK_TIMEOUT,
            fail_closed: false,
        }
    }

    #[test]
    fn matchers() {
        assert!(hook(None).matches("Bash"));
        assert!(hook(Some("*")).matches("Bash"));
        assert!(hook(Some("Write|Edit")).matches("Edit"));
        assert!(!hook(Some("Write|Edit")).matches("Bash"));
        assert!(hook(Some("Task")).matches("Agent"));
        assert!(hook(Some("mcp__.*")).matches("mcp__fs__read"));
        assert!(!hook(Some("Bash")).matches("BashOutput"));
    }

    #[test]
    fn registration_parses_timeouts_and_policies() {
        let parse = |event, v: Value| {
            RegisteredHook::from_config(
                event,
                serde_json::from_value(v).map_err(|e| e.to_string())?,
            )
        };
        let h = parse(
            HookEvent::PreToolUse,
            json!({"matcher": "Bash", "hookCallbackIds": ["hook_0", "hook_1"], "timeout": 2, "onFailure": "block"}),
        )
        .unwrap();
        assert_eq!(h.timeout, Duration::from_secs(2));
        assert!(h.fail_closed);
        assert_eq!(h.callback_ids.len(), 2);
        let h = parse(
            HookEvent::Stop,
            json!({"matcher": null, "hookCallbackIds": []}),
        )
        .unwrap();
        assert!(!h.fail_closed);
        assert_eq!(h.timeout, DEFAULT_HOOK_TIMEOUT);
        assert!(parse(
            HookEvent::Stop,
            json!({"timeout": -1, "hookCallbackIds": []})
        )
        .is_err());
    }

    #[tokio::test]
    async fn a_timed_out_request_is_withdrawn_and_a_late_answer_ignored() {
        let (tx, mut rx) = mpsc::channel(16);
        let b = Bridge::new(tx, "s".into(), false, false);
        let r = b
            .request(
                Request::HookCallback(HookCallbackRequest::default()),
                Some(Duration::from_millis(10)),
            )
            .await;
        assert_eq!(r, Err(RequestError::Timeout(Duration::from_millis(10))));
        let Some(Frame::ControlRequest(req)) = rx.recv().await else {
            panic!()
        };
        let Some(Frame::ControlCancelRequest(c)) = rx.recv().await else {
            panic!()
        };
        assert_eq!(c.request_id, req.request_id);
        let late = ControlResponse::Error(keel_protocol::ControlError {
            request_id: req.request_id,
            error: "late".into(),
            error_code: None,
            extra: Extra::new(),
        });
        assert!(!b.deliver(late));
        b.close();
        assert_eq!(
            b.request(Request::McpStatus(Extra::new()), None).await,
            Err(RequestError::HostGone)
        );
    }
}
