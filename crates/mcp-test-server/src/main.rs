//! A small MCP server on stdio for keel's tests, built on rmcp's server side. `--mode` tells it
//! how to behave:
//!
//! - `normal`: answers; tools `echo {text}` and `add {a, b}`;
//! - `never-start`: writes to stderr, then never answers `initialize`;
//! - `slow-start`: waits `--delay-ms N` (default 1000) before it serves; with `--log FILE` it
//!   appends `start <ms>` and `ready <ms>` (milliseconds since the epoch) there;
//! - `exit-at-start`: writes a reason to stderr and exits with status 3;
//! - `crash-on-call`: starts normally; a tool call makes it write to stderr and exit with 7;
//! - `hang-on-call`: starts normally; a tool call waits until it is cancelled, and the
//!   `notifications/cancelled` it gets is written to stderr;
//! - `stderr-flood`: writes 8 MiB to stderr before it starts, then answers normally;
//! - `flood-on-call`: a call floods stderr for `--seconds N` (default 30), then answers;
//! - `crash-once`: the first call (across restarts: `--state FILE` remembers) crashes like
//!   `crash-on-call`; later ones are answered;
//! - `slow-call`: a call takes `--delay-ms N` (default 1000); with `--log FILE` it appends
//!   `call-start <ms>` and `call-end <ms>` there;
//! - `grandchild`: starts a `sleep` in its process group and writes its pid to `--pid-file`;
//! - `garbage-stdout`: writes lines that are not MCP (and one of 20 MiB) to stdout before it
//!   starts, then answers normally;
//! - `change-tools`: a call to `echo` makes it add a tool `late` and say its list changed;
//! - `rich`: `echo` answers with 200 KB of text and an image;
//! - `huge-answer`: `echo` answers with 17 MiB of text on one line, over the transport's limit;
//! - `bad-schemas`: also lists a tool `stringly` whose `inputSchema` has `"type": "string"`.
//!
//! Every mode offers one resource, `keel://notes/hello`. `--linger`: keep running after stdin
//! closes, as a server whose other threads hold it up would.
//!
//! With `--http` or `--sse` it serves over HTTP instead of stdio (see `http.rs`); with
//! `--http --oauth` it needs OAuth tokens it issues itself (see `oauth.rs`).
//!
//! Not part of keel: it exists for the tests (`CARGO_BIN_EXE_keel-mcp-test-server`).

mod http;
mod oauth;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, JsonObject, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;

#[derive(Clone)]
struct TestServer {
    mode: String,
    /// `crash-once`: the file that says the crash already happened.
    state: Option<String>,
    /// `flood-on-call`: how long a call floods stderr.
    seconds: u64,
    /// `change-tools`: the tool `late` was added.
    grown: Arc<AtomicBool>,
    /// `slow-call`: how long a call takes, and where it says when it ran.
    delay_ms: u64,
    log: Option<String>,
}

/// Append `what <ms since the epoch>` to `log`.
fn log_line(log: Option<&str>, what: &str) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    if let Some(path) = log {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{what} {ms}");
        }
    }
}

/// A 1×1 PNG.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

fn tool(name: &str, description: &str, schema: serde_json::Value) -> Tool {
    let mut t = Tool::default();
    t.name = name.to_owned().into();
    t.description = Some(description.to_owned().into());
    t.input_schema = Arc::new(serde_json::from_value::<JsonObject>(schema).unwrap_or_default());
    t
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let r = Resource::new("keel://notes/hello", "hello").with_description("A note to read.");
        Ok(ListResourcesResult {
            resources: vec![r],
            ..Default::default()
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != "keel://notes/hello" {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            "hello from a resource",
            request.uri,
        )])
        .into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = vec![
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
        ];
        if self.mode == "bad-schemas" {
            tools.push(tool(
                "stringly",
                "Its input is not an object.",
                json!({"type": "string"}),
            ));
        }
        if self.grown.load(Ordering::SeqCst) {
            tools.push(tool(
                "late",
                "Came after the list changed.",
                json!({"type": "object"}),
            ));
        }
        Ok(ListToolsResult {
            tools,
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self.mode.as_str() {
            "slow-call" => {
                log_line(self.log.as_deref(), "call-start");
                tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
                log_line(self.log.as_deref(), "call-end");
            }
            "crash-once" => {
                let state = self.state.clone().unwrap_or_default();
                if std::fs::metadata(&state).is_err() {
                    let _ = std::fs::write(&state, "crashed once");
                    eprintln!("test server: crashing in the middle of a call");
                    std::process::exit(7);
                }
            }
            "flood-on-call" => {
                let line = [b'y'; 1023];
                let t0 = Instant::now();
                let mut err = std::io::stderr().lock();
                while t0.elapsed() < Duration::from_secs(self.seconds) {
                    let _ = err.write_all(&line);
                    let _ = err.write_all(b"\n");
                }
            }
            "change-tools" if request.name.as_ref() == "echo" => {
                self.grown.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
            }
            "rich" if request.name.as_ref() == "echo" => {
                return Ok(CallToolResult::success(vec![
                    ContentBlock::text("r".repeat(200_000)),
                    ContentBlock::image(PIXEL_PNG, "image/png"),
                ])
                .into());
            }
            "huge-answer" if request.name.as_ref() == "echo" => {
                return Ok(
                    CallToolResult::success(vec![ContentBlock::text("h".repeat(17 << 20))]).into(),
                );
            }
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

/// The misbehaviour a `--mode` asks for before the server starts answering: never starting,
/// exiting at once, flooding stderr, starting slowly, leaving a grandchild, garbage on stdout.
async fn start_as(mode: &str, flag: &impl Fn(&str) -> Option<String>) {
    match mode {
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
        "slow-start" => {
            let now = || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis())
            };
            let log = |what: &str| {
                if let Some(path) = flag("--log") {
                    if let Ok(mut f) = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                    {
                        let _ = writeln!(f, "{what} {}", now());
                    }
                }
            };
            log("start");
            let ms = flag("--delay-ms")
                .and_then(|s| s.parse().ok())
                .unwrap_or(1000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            log("ready");
        }
        "grandchild" => {
            // Same process group: stopping the server's group must stop it too.
            let child = std::process::Command::new("sleep")
                .arg("3600")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn();
            if let (Ok(c), Some(path)) = (child, flag("--pid-file")) {
                let _ = std::fs::write(path, c.id().to_string());
            }
        }
        "garbage-stdout" => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"Starting the server...\nnot json either\n");
            let chunk = [b'g'; 1 << 20];
            for _ in 0..20 {
                let _ = out.write_all(&chunk);
            }
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
        _ => {}
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let mode = flag("--mode").unwrap_or_else(|| "normal".into());
    let over_http = args.iter().any(|a| a == "--http");
    let over_sse = args.iter().any(|a| a == "--sse");
    if over_http || over_sse {
        http::serve(
            mode,
            over_sse,
            flag("--require-header"),
            flag("--redirect-to"),
            args.iter().any(|a| a == "--oauth").then(|| {
                (
                    flag("--token-ttl")
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(3600),
                    !args.iter().any(|a| a == "--oauth-no-hint"),
                    flag("--after-call"),
                    flag("--client"),
                )
            }),
        )
        .await;
        return;
    }
    start_as(&mode, &flag).await;
    let server = TestServer {
        mode,
        state: flag("--state"),
        seconds: flag("--seconds").and_then(|s| s.parse().ok()).unwrap_or(30),
        grown: Arc::new(AtomicBool::new(false)),
        delay_ms: flag("--delay-ms")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1000),
        log: flag("--log"),
    };
    let Ok(service) = server.serve(rmcp::transport::stdio()).await else {
        std::process::exit(1);
    };
    let _ = service.waiting().await;
    if args.iter().any(|a| a == "--linger") {
        // A server that does not stop when its stdin closes (another thread holds it up).
        std::future::pending::<()>().await;
    }
}
