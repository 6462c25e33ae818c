//! The route to the MCP servers an SDK host runs: each JSON-RPC message goes to the host as an
//! `mcp_message` control request, and the `mcp_response` in its answer is the server's reply.
//!
//! Messages reach the host in the order the MCP client sends them (`notifications/initialized`
//! before the first request, a cancellation after the call it cancels): one task writes them
//! in turn, and each answer is awaited on a task of its own, so a slow call holds up nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use keel_core::mcp::{SdkHost, SdkHostError};
use keel_protocol::control::{McpMessageRequest, Request};
use keel_protocol::Extra;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::Bridge;

/// Messages waiting to be written to the host.
const QUEUE: usize = 1024;

type Reply = Result<Value, SdkHostError>;

struct Outgoing {
    server: String,
    message: Value,
    deadline: Duration,
    reply: oneshot::Sender<Reply>,
}

/// Carries MCP messages to the host through the bridge.
#[derive(Debug)]
pub struct HostMcp {
    queue: mpsc::Sender<Outgoing>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl HostMcp {
    /// A route through `bridge` (its writer runs on the current runtime).
    pub fn new(bridge: Arc<Bridge>) -> Self {
        let (queue, mut rx) = mpsc::channel::<Outgoing>(QUEUE);
        tokio::spawn(async move {
            while let Some(o) = rx.recv().await {
                let request = Request::McpMessage(McpMessageRequest {
                    server_name: o.server,
                    message: o.message,
                    extra: Extra::new(),
                });
                let sent = match bridge.send_request(request).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = o.reply.send(Err(SdkHostError::Request(Box::new(e))));
                        continue;
                    }
                };
                let bridge = bridge.clone();
                tokio::spawn(async move {
                    let answer = bridge
                        .answer(sent, Some(o.deadline))
                        .await
                        .map_err(|e| SdkHostError::Request(Box::new(e)))
                        .and_then(|a| {
                            a.get("mcp_response")
                                .cloned()
                                .ok_or(SdkHostError::NoMcpResponse)
                        });
                    let _ = o.reply.send(answer);
                });
            }
        });
        Self { queue }
    }
}

impl SdkHost for HostMcp {
    fn send(
        &self,
        server: &str,
        message: Value,
        deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'static>> {
        let (reply, answer) = oneshot::channel();
        let out = Outgoing {
            server: server.to_owned(),
            message,
            deadline,
            reply,
        };
        // Queued now, in the order of the calls; only a full queue makes it wait.
        let late = match self.queue.try_send(out) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(out)) => Some(out),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Box::pin(std::future::ready(Err(SdkHostError::RouteStopped)))
            }
        };
        let queue = self.queue.clone();
        Box::pin(async move {
            if let Some(out) = late {
                queue
                    .send(out)
                    .await
                    .map_err(|_| SdkHostError::RouteStopped)?;
            }
            answer
                .await
                .map_err(|_| SdkHostError::RouteStoppedWaiting)?
        })
    }
}
