//! The approver of `--permission-prompt-tool stdio`: asks the host with `can_use_tool`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use keel_core::approval::{Approval, ApprovalRequest, Approver, PermissionUpdate};
use keel_protocol::control::{CanUseToolRequest, PermissionAnswer, Request};
use keel_protocol::Extra;
use serde_json::Value;

use super::Bridge;

/// The approver of `--permission-prompt-tool stdio`: asks the host with `can_use_tool`.
#[derive(Debug)]
pub struct HostApprover {
    bridge: Arc<Bridge>,
    /// The session's bypass gate: a `setMode` it refuses gets no status frame.
    gate: keel_core::context::BypassGate,
}

impl HostApprover {
    /// An approver asking through `bridge`, for a session whose bypass gate is `gate`.
    pub fn new(bridge: Arc<Bridge>, gate: keel_core::context::BypassGate) -> Self {
        Self { bridge, gate }
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
            let _ = self
                .bridge
                .tx
                .try_send(self.bridge.state_frame("running").into());
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
                        // A refused mode is reported by the session as a warning, not here.
                        if self.gate.check(*m).is_ok() {
                            self.bridge.mode_status(m.as_str()).await;
                        }
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
