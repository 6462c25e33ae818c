//! Requests keel sends to the SDK host (`can_use_tool`, `hook_callback`, `mcp_message`) and
//! their answers.
//!
//! Every request gets a UUID `request_id` and is written through the control channel, so it
//! never interleaves with other stdout lines. A request whose answer is no longer wanted — its
//! deadline passed, the turn was interrupted, the engine dropped the future — is withdrawn with
//! a `control_cancel_request`. When stdin closes, every pending request fails at once: no
//! answer can come any more, and nothing may wait for one.
//!
//! [`Bridge`] is the keel → host side; [`hooks`] answers hook points through it, [`approver`]
//! asks the host about calls the rules leave open, [`mcp`] carries messages to the MCP servers
//! the host runs.

mod approver;
mod hooks;
mod mcp;

pub use approver::HostApprover;
pub use hooks::{HostHooks, RegisteredHook};
pub use mcp::HostMcp;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use keel_core::emit::new_uuid;
use keel_core::hooks::HookEvent;
use keel_protocol::control::Request;
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

impl std::error::Error for RequestError {}

type Answer = Result<Value, String>;

/// A frame for the printer, with an optional word back once it has been written (or dropped,
/// when stdout is gone): what must reach stdout before anything the session emits next waits
/// for it, since the session's events travel on another channel.
#[derive(Debug)]
pub struct Outgoing {
    /// The frame.
    pub frame: Frame,
    /// Told when the frame was handled.
    pub written: Option<oneshot::Sender<()>>,
}

impl From<Frame> for Outgoing {
    fn from(frame: Frame) -> Self {
        Self {
            frame,
            written: None,
        }
    }
}

/// The keel → host side of the control protocol, shared by the approver, the hooks and the
/// control server.
#[derive(Debug)]
pub struct Bridge {
    tx: mpsc::Sender<Outgoing>,
    /// The session's id cell: `/clear` switches it, and frames sent after carry the new id.
    session_id: keel_core::SessionId,
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
        tx: mpsc::Sender<Outgoing>,
        session_id: keel_core::SessionId,
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

    /// The session id stamped on frames now.
    pub fn session_id(&self) -> String {
        self.session_id.get().to_string()
    }

    /// Write a frame (in order with every other stdout line). False if the printer is gone.
    pub async fn send(&self, frame: Frame) -> bool {
        self.tx.send(frame.into()).await.is_ok()
    }

    /// Write a frame and wait until the printer has written it: whatever is emitted after
    /// this returns comes after it on stdout. False if the printer is gone.
    pub async fn send_written(&self, frame: Frame) -> bool {
        let (tx, rx) = oneshot::channel();
        let out = Outgoing {
            frame,
            written: Some(tx),
        };
        self.tx.send(out).await.is_ok() && rx.await.is_ok()
    }

    /// Send a request and wait for its answer (at most `deadline`, when given).
    pub async fn request(
        &self,
        request: Request,
        deadline: Option<Duration>,
    ) -> Result<Value, RequestError> {
        let sent = self.send_request(request).await?;
        self.answer(sent, deadline).await
    }

    /// Send a request (in order with every other frame); [`Bridge::answer`] waits for its
    /// answer. Requests sent one after the other reach the host in that order.
    pub async fn send_request(&self, request: Request) -> Result<Sent, RequestError> {
        let id = new_uuid();
        let (otx, orx) = oneshot::channel();
        {
            let mut p = self.pending();
            if self.closed.load(Ordering::SeqCst) {
                return Err(RequestError::HostGone);
            }
            p.insert(id.clone(), otx);
        }
        let frame = Frame::ControlRequest(ControlRequestFrame {
            request_id: id.clone(),
            request: request.to_wire(),
        });
        if !self.send(frame).await {
            self.pending().remove(&id); // nobody would read a cancel
            return Err(RequestError::HostGone);
        }
        Ok(Sent { id, rx: orx })
    }

    /// Wait for the answer to a sent request (at most `deadline`, when given); a request
    /// that times out or is dropped unanswered is withdrawn.
    pub async fn answer(
        &self,
        sent: Sent,
        deadline: Option<Duration>,
    ) -> Result<Value, RequestError> {
        let Sent { id, rx: orx } = sent;
        let mut guard = Withdraw {
            bridge: self,
            id,
            armed: true,
        };
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
        // In order with the turn's own frames: `running` before its `init`.
        let _ = self.send_written(self.state_frame(state)).await;
    }

    fn state_frame(&self, state: &str) -> Frame {
        let mut extra = Extra::new();
        extra.insert("sdk_host_only".into(), json!(true));
        Frame::System(SystemFrame::SessionStateChanged(SessionStateFrame {
            state: state.to_owned(),
            session_id: self.session_id(),
            uuid: new_uuid(),
            extra,
        }))
    }

    /// `system/status` announcing a permission mode.
    pub fn mode_status_frame(&self, mode: &str) -> Frame {
        Frame::System(SystemFrame::Status(StatusFrame {
            status: None,
            permission_mode: Some(mode.to_owned()),
            session_id: self.session_id(),
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
                session_id: self.session_id(),
                uuid: new_uuid(),
                extra,
            })))
            .await;
    }

    /// Register the hooks of `initialize` (replacing any earlier set).
    pub fn set_hooks(&self, hooks: Vec<RegisteredHook>) {
        *self.hooks.lock().unwrap_or_else(|p| p.into_inner()) = hooks;
    }

    fn matching_hooks(&self, event: HookEvent, subject: Option<&str>) -> Vec<RegisteredHook> {
        self.hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|h| h.event == event && subject.is_none_or(|s| h.matches(s)))
            .cloned()
            .collect()
    }
}

/// A request sent to the host, its answer still to come.
#[derive(Debug)]
pub struct Sent {
    id: String,
    rx: oneshot::Receiver<Answer>,
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
            let _ = self.bridge.tx.try_send(
                Frame::ControlCancelRequest(ControlCancelFrame {
                    request_id: self.id.clone(),
                })
                .into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::control::HookCallbackRequest;

    #[tokio::test]
    async fn a_timed_out_request_is_withdrawn_and_a_late_answer_ignored() {
        let (tx, mut rx) = mpsc::channel(16);
        let b = Bridge::new(tx, keel_core::SessionId::new("s"), false, false);
        let r = b
            .request(
                Request::HookCallback(HookCallbackRequest::default()),
                Some(Duration::from_millis(10)),
            )
            .await;
        assert_eq!(r, Err(RequestError::Timeout(Duration::from_millis(10))));
        let Some(Frame::ControlRequest(req)) = rx.recv().await.map(|o: Outgoing| o.frame) else {
            panic!()
        };
        let Some(Frame::ControlCancelRequest(c)) = rx.recv().await.map(|o| o.frame) else {
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
