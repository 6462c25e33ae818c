//! MCP servers in a session: the configured stdio servers are started side by side before the
//! first request, each within `MCP_TIMEOUT`, and their tools offered to the model as
//! `mcp__<server>__<tool>`. A server that does not start is reported (its status `failed`, a
//! warning with the reason and its stderr) and the session goes on without it.
//!
//! Not yet: HTTP and SSE servers, and servers an SDK host runs (`type: sdk`): they are listed
//! as `failed` with the reason.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use keel_mcp::stdio::{content_text, CallOutcome, StdioServer};
use keel_mcp::{ServerSet, ServerSpec};
use keel_protocol::CancelReason;
use keel_tools::{Tool, ToolContext, ToolKind, ToolOutcome};
use serde_json::{json, Value};

/// `MCP_TIMEOUT` when it is not set: how long a server may take to start.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// `MCP_TOOL_TIMEOUT` when it is not set: how long one call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);
/// The largest value either may take (a day), in milliseconds.
const MAX_TIMEOUT_MS: u64 = 24 * 3600 * 1000;

/// A server's state, as `init` and `mcp_status` report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// `connected` or `failed`.
    pub status: &'static str,
    /// Why it failed.
    pub error: Option<String>,
    /// The tools it offers, by the names the model sees.
    pub tools: Vec<String>,
}

impl ServerStatus {
    /// As `init` and `mcp_status` list it.
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "name": self.name, "status": self.status });
        if let Some(e) = &self.error {
            v["error"] = json!(e);
        }
        v
    }
}

/// The servers of a session once started.
pub struct Started {
    /// Each configured server's state, in name order.
    pub statuses: Vec<ServerStatus>,
    /// The tools of the servers that started.
    pub tools: Vec<Arc<dyn Tool>>,
}

/// A duration in milliseconds from the environment variable `var`, or `default`.
pub fn timeout_from_env(
    env: &dyn Fn(&str) -> Option<String>,
    var: &str,
    default: Duration,
) -> Result<Duration, String> {
    let Some(v) = env(var).filter(|v| !v.trim().is_empty()) else {
        return Ok(default);
    };
    match v.trim().parse::<u64>() {
        Ok(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(Duration::from_millis(ms)),
        _ => Err(format!(
            "{var}={v:?} is not a number of milliseconds from 1 to {MAX_TIMEOUT_MS}"
        )),
    }
}

/// Start every server of `set` side by side, each within `start_timeout`; calls are bounded
/// by `call_timeout`.
pub async fn start(
    set: &ServerSet,
    cwd: &Path,
    start_timeout: Duration,
    call_timeout: Duration,
) -> Started {
    let starts = set.entries.iter().map(|e| async move {
        let spec = match &e.spec {
            Err(err) => return (e.name.clone(), Err(err.to_string())),
            Ok(s) => s,
        };
        let result = match spec {
            ServerSpec::Stdio(s) => StdioServer::start(&e.name, s, cwd, start_timeout)
                .await
                .map_err(|err| err.to_string()),
            ServerSpec::Http(_) | ServerSpec::Sse(_) => {
                Err("keel does not connect to HTTP or SSE MCP servers yet".to_owned())
            }
            ServerSpec::Sdk { .. } => Err(
                "keel does not route calls to MCP servers an SDK host runs (type \"sdk\") yet"
                    .to_owned(),
            ),
        };
        (e.name.clone(), result)
    });
    let results = futures_util::future::join_all(starts).await;
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (name, r) in &results {
        if let Ok(s) = r {
            pairs.extend(s.tools().iter().map(|t| (name.clone(), t.name.clone())));
        }
    }
    let names = keel_mcp::assign(&pairs);
    let mut names = names.into_iter();
    let mut statuses = Vec::new();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (name, r) in results {
        match r {
            Ok(server) => {
                let offered: Vec<_> = server.tools().to_vec();
                let shared = Arc::new(tokio::sync::Mutex::new(server));
                let mut seen = Vec::new();
                for t in offered {
                    let model_name = names.next().unwrap_or_default();
                    seen.push(model_name.clone());
                    tools.push(Arc::new(McpTool {
                        name: model_name,
                        server_name: name.clone(),
                        tool: t.name,
                        description: t.description,
                        schema: t.input_schema,
                        server: shared.clone(),
                        call_timeout,
                    }));
                }
                statuses.push(ServerStatus {
                    name,
                    status: "connected",
                    error: None,
                    tools: seen,
                });
            }
            Err(why) => {
                tracing::warn!("MCP server {name} is not available: {why}");
                statuses.push(ServerStatus {
                    name,
                    status: "failed",
                    error: Some(why),
                    tools: Vec::new(),
                });
            }
        }
    }
    Started { statuses, tools }
}

/// One tool of a stdio server, as the model sees it.
struct McpTool {
    name: String,
    server_name: String,
    tool: String,
    description: String,
    schema: Value,
    /// Calls to one server go one at a time.
    server: Arc<tokio::sync::Mutex<StdioServer>>,
    call_timeout: Duration,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> ToolKind {
        ToolKind::External
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn is_read_only(&self, _: &Value) -> bool {
        // What a server's tool does is not known: it needs permission like any other write.
        false
    }
    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let began = Instant::now();
            let outcome = tokio::select! {
                o = async {
                    let mut server = self.server.lock().await;
                    server.call(&self.tool, input, self.call_timeout).await
                } => o,
                // Dropping the call abandons it, and the server is sent notifications/cancelled.
                _ = cx.cancel.cancelled() => {
                    return cx.stopped(true, String::new(), began.elapsed(), 0);
                }
            };
            let server = &self.server_name;
            match outcome {
                CallOutcome::Done { content, is_error } => {
                    let text = content_text(&content);
                    let meta = Some(json!({ "server": server, "content": content }));
                    if is_error {
                        ToolOutcome::Failed {
                            message: if text.trim().is_empty() {
                                format!("The MCP server {server} reported that the call failed, without saying why.")
                            } else {
                                text
                            },
                            meta,
                        }
                    } else {
                        ToolOutcome::Ok {
                            content: text,
                            meta,
                        }
                    }
                }
                CallOutcome::TimedOut(_) => ToolOutcome::Stopped {
                    reason: CancelReason::Timeout,
                    started: true,
                    partial: String::new(),
                    elapsed: began.elapsed(),
                    processes_killed: 0,
                },
                CallOutcome::Crashed {
                    status,
                    stderr_tail,
                } => ToolOutcome::failed(format!(
                    "The MCP server {server} stopped during the call ({}){}",
                    status.unwrap_or_else(|| "how is not known".into()),
                    if stderr_tail.trim().is_empty() {
                        String::new()
                    } else {
                        format!("; its stderr ended with: {}", last_lines(&stderr_tail, 10))
                    }
                )),
                CallOutcome::Failed(why) => ToolOutcome::failed(format!(
                    "The MCP server {server} could not run the call: {why}"
                )),
            }
        })
    }
}

/// The last `n` lines of `s`.
fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
