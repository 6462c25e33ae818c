//! MCP servers an SDK host runs (`"type": "sdk"` in `--mcp-config`): the host program defines
//! tools in-process (the Python SDK's `create_sdk_mcp_server`, the TypeScript SDK's
//! `createSdkMcpServer`), and keel reaches them over the control protocol — every JSON-RPC
//! message goes to the host as a `control_request` of subtype `mcp_message`, and the host's
//! `mcp_response` is the server's reply.
//!
//! [`SdkTransport`] is that route as an rmcp transport, so the handshake, listing, calls and
//! cancellation are rmcp's like any other server's. Each message is sent on its own task: a
//! call the host is slow to answer holds up nothing else. A message the host cannot deliver
//! (no answer in time, the host gone, an error envelope) fails the request it carried with a
//! JSON-RPC error that says so.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Why an SDK host's server gave no reply to a message; the text follows "the SDK host's MCP
/// server NAME " in the JSON-RPC error the request gets.
#[derive(Debug, thiserror::Error)]
pub enum SdkHostError {
    /// keel's route to the host stopped before the message was written.
    #[error("could not be reached: keel's route to the host has stopped")]
    RouteStopped,
    /// keel's route to the host stopped while the reply was awaited.
    #[error("did not answer: keel's route to the host has stopped")]
    RouteStoppedWaiting,
    /// The host answered the control request without an `mcp_response`.
    #[error("answered the message without an mcp_response")]
    NoMcpResponse,
    /// The reply is not a JSON-RPC message rmcp can read.
    #[error("answered with a reply keel could not read: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// The control request itself failed (no answer in time, the host gone, an error
    /// response): the route's own error.
    #[error(transparent)]
    Request(Box<dyn std::error::Error + Send + Sync>),
}

/// The route to the host: send `message` to its server `server` and wait (at most
/// `deadline`) for the JSON-RPC reply it carries back in `mcp_response`.
pub trait SdkHost: Send + Sync + 'static {
    /// Deliver one message; the reply, or why there is none. Messages must reach the host in
    /// the order of the calls (not of the polls of the futures they return): MCP orders
    /// `notifications/initialized` before every request.
    fn send(
        &self,
        server: &str,
        message: Value,
        deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<Value, SdkHostError>> + Send + 'static>>;
}

/// How many replies may wait for rmcp to take them.
const REPLY_QUEUE: usize = 64;

/// An rmcp transport to one SDK server over the control protocol.
pub struct SdkTransport {
    server: String,
    host: Arc<dyn SdkHost>,
    deadline: Duration,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
}

impl SdkTransport {
    /// A transport to the host's server `server`; each message waits at most `deadline`.
    pub fn new(server: &str, host: Arc<dyn SdkHost>, deadline: Duration) -> Self {
        let (tx, rx) = mpsc::channel(REPLY_QUEUE);
        Self {
            server: server.to_owned(),
            host,
            deadline,
            tx,
            rx,
        }
    }
}

/// The reply rmcp gets for the request `id`: the host's, or an error saying why there is none.
fn reply_for(id: &Value, server: &str, reply: Result<Value, SdkHostError>) -> Value {
    let error = |message: String| json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32603, "message": message } });
    match reply {
        Ok(Value::Object(mut m)) if m.contains_key("result") || m.contains_key("error") => {
            // A reply is for the request it answers, whatever id the host wrote.
            m.insert("id".into(), id.clone());
            m.entry("jsonrpc").or_insert_with(|| json!("2.0"));
            Value::Object(m)
        }
        Ok(other) => error(format!(
            "the SDK host answered for MCP server {server} with something that is not a JSON-RPC reply: {}",
            crate::clip::clip(&other.to_string(), 200)
        )),
        Err(why) => error(format!("the SDK host's MCP server {server} {why}")),
    }
}

impl Transport<RoleClient> for SdkTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let server = self.server.clone();
        let tx = self.tx.clone();
        // rmcp calls `send` in the order of its messages and may poll the futures in any
        // order: the message is handed to the host now.
        let message = serde_json::to_value(&item);
        let sent = message.as_ref().ok().map(|m| {
            // Only a request gets a reply; notifications and keel's own replies get an
            // acknowledgement, which is dropped.
            let id = match (m.get("method"), m.get("id")) {
                (Some(_), Some(id)) if !id.is_null() => Some(id.clone()),
                _ => None,
            };
            (id, self.host.send(&server, m.clone(), self.deadline))
        });
        async move {
            let Some((id, reply)) = sent else {
                return Err(std::io::Error::other(
                    message.err().map_or_else(String::new, |e| e.to_string()),
                ));
            };
            tokio::spawn(async move {
                let reply = reply.await;
                let Some(id) = id else { return };
                let reply = reply_for(&id, &server, reply);
                let parsed =
                    serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(reply).or_else(|e| {
                        serde_json::from_value(reply_for(
                            &id,
                            &server,
                            Err(SdkHostError::Unreadable(e)),
                        ))
                    });
                if let Ok(m) = parsed {
                    let _ = tx.send(m).await;
                }
            });
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.rx.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.rx.close();
        std::future::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_for_its_request_and_a_missing_one_is_an_error() {
        let id = json!(3);
        let r = reply_for(
            &id,
            "s",
            Ok(json!({"jsonrpc": "2.0", "id": 9, "result": {}})),
        );
        assert_eq!(r["id"], 3);
        let r = reply_for(&id, "s", Ok(json!({"result": {"tools": []}})));
        assert_eq!(r["jsonrpc"], "2.0");
        let r = reply_for(&id, "s", Ok(json!("nonsense")));
        assert!(r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a JSON-RPC reply"));
        let late = std::io::Error::other("did not answer within 5 s");
        let r = reply_for(&id, "calc", Err(SdkHostError::Request(Box::new(late))));
        assert_eq!(
            r["error"]["message"],
            "the SDK host's MCP server calc did not answer within 5 s"
        );
        assert_eq!(r["id"], 3);
    }
}
