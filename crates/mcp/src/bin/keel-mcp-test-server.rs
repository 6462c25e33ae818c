//! A small MCP server on stdio for keel's tests, built on rmcp's server side. `--mode` tells it
//! how to behave:
//!
//! - `normal`: answers; tools `echo {text}` and `add {a, b}`;
//! - `never-start`: writes to stderr, then never answers `initialize`;
//! - `exit-at-start`: writes a reason to stderr and exits with status 3;
//! - `crash-on-call`: starts normally; a tool call makes it write to stderr and exit with 7;
//! - `hang-on-call`: starts normally; a tool call waits until it is cancelled, and the
//!   `notifications/cancelled` it gets is written to stderr;
//! - `stderr-flood`: writes 8 MiB to stderr before it starts, then answers normally.
//!
//! Not part of keel: it exists for the tests (`CARGO_BIN_EXE_keel-mcp-test-server`).

use std::io::Write;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;

#[derive(Clone)]
struct TestServer {
    mode: String,
}

fn tool(name: &str, description: &str, schema: serde_json::Value) -> Tool {
    let mut t = Tool::default();
    t.name = name.to_owned().into();
    t.description = Some(description.to_owned().into());
    t.input_schema = Arc::new(serde_json::from_value::<JsonObject>(schema).unwrap_or_default());
    t
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            tools: vec![
                tool(
                    "echo",
                    "Answers with its text.",
                    json!({"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"]}),
                ),
                tool(
                    "add",
                    "Adds two numbers.",
                    json!({"type": "object", "properties": {"a": {"type": "number"},
                           "b": {"type": "number"}}, "required": ["a", "b"]}),
                ),
            ],
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.mode.as_str() {
            "crash-on-call" => {
                eprintln!("test server: crashing in the middle of a call");
                std::process::exit(7);
            }
            "hang-on-call" => {
                eprintln!("test server: hanging");
                context.ct.cancelled().await;
                return Err(ErrorData::internal_error("cancelled", None));
            }
            _ => {}
        }
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => {
                let text = args.get("text").and_then(|t| t.as_str()).unwrap_or("");
                Ok(
                    CallToolResult::success(vec![ContentBlock::text(format!("echo: {text}"))])
                        .into(),
                )
            }
            "add" => {
                let n = |k: &str| args.get(k).and_then(|v| v.as_f64());
                match (n("a"), n("b")) {
                    (Some(a), Some(b)) => Ok(CallToolResult::success(vec![ContentBlock::text(
                        format!("{}", a + b),
                    )])
                    .into()),
                    _ => Ok(CallToolResult::error(vec![ContentBlock::text(
                        "a and b must be numbers",
                    )])
                    .into()),
                }
            }
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        eprintln!("test server: cancelled {:?}", notification.request_id);
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args
        .iter()
        .position(|a| a == "--mode")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| "normal".into());
    match mode.as_str() {
        "never-start" => {
            eprintln!("test server: starting, slowly");
            std::future::pending::<()>().await;
        }
        "exit-at-start" => {
            eprintln!("test server: fatal: no configuration");
            std::process::exit(3);
        }
        "stderr-flood" => {
            let line = [b'x'; 1023];
            let mut err = std::io::stderr().lock();
            for _ in 0..8 * 1024 {
                let _ = err.write_all(&line);
                let _ = err.write_all(b"\n");
            }
            let _ = err.write_all(b"test server: flood over\n");
        }
        _ => {}
    }
    let Ok(service) = TestServer { mode }.serve(rmcp::transport::stdio()).await else {
        std::process::exit(1);
    };
    let _ = service.waiting().await;
}
