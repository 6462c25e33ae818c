//! The route to the MCP servers an SDK host runs: each JSON-RPC message goes to the host as an
//! `mcp_message` control request, and the `mcp_response` in its answer is the server's reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use keel_core::mcp::SdkHost;
use keel_protocol::control::{McpMessageRequest, Request};
use keel_protocol::Extra;
use serde_json::Value;

use super::Bridge;

/// Carries MCP messages to the host through the bridge.
#[derive(Debug)]
pub struct HostMcp {
    bridge: Arc<Bridge>,
}

impl HostMcp {
    /// A route through `bridge`.
    pub fn new(bridge: Arc<Bridge>) -> Self {
        Self { bridge }
    }
}

impl SdkHost for HostMcp {
    fn send(
        &self,
        server: &str,
        message: Value,
        deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + 'static>> {
        let bridge = self.bridge.clone();
        let request = Request::McpMessage(McpMessageRequest {
            server_name: server.to_owned(),
            message,
            extra: Extra::new(),
        });
        Box::pin(async move {
            let answer = bridge
                .request(request, Some(deadline))
                .await
                .map_err(|e| e.to_string())?;
            answer
                .get("mcp_response")
                .cloned()
                .ok_or_else(|| "answered the message without an mcp_response".to_owned())
        })
    }
}
