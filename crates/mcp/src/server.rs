//! A connected MCP server (through rmcp's client): a stdio server — a child process in a
//! process group of its own, speaking MCP on its stdin and stdout, its stderr kept as a
//! bounded tail for error messages and never passed to keel's terminal — or a server an SDK
//! host runs, reached over the control protocol ([`crate::sdk`]).
//!
//! Every wait is bounded: start-up (spawn, `initialize`, `tools/list`) by one deadline, each
//! call by its own. What went wrong is said with the server's stderr tail: a server that does
//! not start, exits while starting, crashes in the middle of a call, or does not answer in
//! time. The process is started with keel-tools' one spawner, like a Bash command: stopping a
//! server stops its whole process group (the `npx`/`uvx` wrappers' children too) and whatever
//! it daemonized, and nothing of it outlives keel, even a SIGKILLed keel.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools::spawn::{Child, ExitStatus, Spawn};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::config::StdioSpec;
use crate::stdout::{filter_stdout, Noise};

/// The most of a server's stderr kept (its end), for messages.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How long a stopped server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A tool a server offers, as it describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerTool {
    /// The server's name for it.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The JSON schema of its input, passed through.
    pub input_schema: Value,
}

/// A server that could not be started, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}{}", tail_note(stderr_tail))]
pub struct StartError {
    /// What happened.
    pub reason: String,
    /// The end of what the server wrote to stderr.
    pub stderr_tail: String,
    /// The server needs the user to sign in (`keel mcp login`): status `needs-auth`.
    pub needs_auth: bool,
}

fn tail_note(tail: &str) -> String {
    let t = tail.trim();
    if t.is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with: {t}")
    }
}

/// How a tool call ended.
#[derive(Clone, Debug, PartialEq)]
pub enum CallOutcome {
    /// The server answered: its content blocks (as MCP writes them), and whether it reported
    /// an error.
    Done {
        /// The content blocks.
        content: Vec<Value>,
        /// The server said the call failed.
        is_error: bool,
    },
    /// No answer within the deadline; the server was sent `notifications/cancelled`.
    TimedOut(Duration),
    /// The server process ended during the call.
    Crashed {
        /// How it ended (`None` when it could not be learned).
        status: Option<String>,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The server answered with a protocol error, or the call could not be sent.
    Failed(String),
}

/// The end of a stream, at most `cap` bytes.
#[derive(Debug, Default)]
struct Tail {
    buf: Vec<u8>,
    cap: usize,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.cap {
            self.buf.clear();
            self.buf.extend_from_slice(&bytes[bytes.len() - self.cap..]);
            return;
        }
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..over);
        self.buf.extend_from_slice(bytes);
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

/// keel's side of a connection: it notes when the server says its tool list changed.
#[derive(Clone, Debug, Default)]
pub struct Watcher {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Watcher {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info.name = "keel".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    fn on_tool_list_changed(
        &self,
        _: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }
}

/// The process behind a stdio server.
struct Process {
    child: Child,
    pgid: Option<i32>,
    noise: Arc<Mutex<Noise>>,
    stderr: Arc<Mutex<Tail>>,
    /// The task reading stderr into the tail; it ends when the stream does.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
}

/// A connected server.
pub struct Server {
    name: String,
    service: RunningService<RoleClient, Watcher>,
    watcher: Watcher,
    process: Option<Process>,
    tools: Vec<ServerTool>,
    /// Why tools of its listing were left out (see [`server_tools`]).
    left_out: Vec<String>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("pgid", &self.pgid())
            .field("tools", &self.tools.len())
            .finish()
    }
}

/// The tools of a listing, as keel keeps them, and a warning for each tool left out: one
/// whose `inputSchema` says `type` is anything but `object` would make the model API refuse
/// every request of the session (and of every resume), so it is never offered.
fn server_tools(server: &str, tools: Vec<rmcp::model::Tool>) -> (Vec<ServerTool>, Vec<String>) {
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for t in tools {
        let schema = Value::Object((*t.input_schema).clone());
        let name = t.name.into_owned();
        match schema.get("type") {
            Some(kind) if kind != "object" => left_out.push(format!(
                "MCP server {server}: tool {name:?} is not offered to the model: its inputSchema must describe a JSON object (\"type\": \"object\"), found \"type\": {kind}"
            )),
            _ => kept.push(ServerTool {
                name,
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: schema,
            }),
        }
    }
    (kept, left_out)
}

impl Server {
    /// Connect to a server an SDK host runs, through `host`, and list its tools, all within
    /// `deadline`; each message waits at most `message_deadline` for the host's answer.
    pub async fn start_sdk(
        name: &str,
        host: Arc<dyn crate::sdk::SdkHost>,
        deadline: Duration,
        message_deadline: Duration,
    ) -> Result<Server, StartError> {
        let transport = crate::sdk::SdkTransport::new(name, host, message_deadline);
        Self::start_on(
            name,
            transport,
            deadline,
            "the SDK host did not finish starting it",
        )
        .await
    }

    /// Connect to a server at a URL (`"type": "http"`, or the legacy `"sse"` when `sse`), and
    /// list its tools, all within `deadline`; each message waits at most `message_deadline`.
    pub async fn start_url(
        name: &str,
        spec: &crate::config::UrlSpec,
        sse: bool,
        deadline: Duration,
        message_deadline: Duration,
    ) -> Result<Server, StartError> {
        let fail = |reason: String| StartError {
            reason,
            stderr_tail: String::new(),
            needs_auth: false,
        };
        let late = format!("{} did not finish starting", spec.url);
        if sse {
            let transport = crate::http::UrlTransport::legacy_sse(name, spec, message_deadline);
            let transport = transport.map_err(|e| fail(e.to_string()))?;
            return Self::start_on(name, transport, deadline, &late).await;
        }
        let auth = oauth_for(name, spec, deadline);
        let transport =
            crate::http::UrlTransport::streamable_with(name, spec, message_deadline, auth.clone());
        let transport = transport.map_err(|e| fail(e.to_string()))?;
        let started = Self::start_on(name, transport, deadline, &late).await;
        match (started, auth.and_then(|a| a.needs_login())) {
            // Said plainly, not as the handshake failure it caused.
            (Err(_), Some(why)) => Err(StartError {
                reason: why.to_string(),
                stderr_tail: String::new(),
                needs_auth: true,
            }),
            (started, _) => started,
        }
    }

    /// Handshake and list the tools over `transport`, within `deadline` (`late`: what is said
    /// when it runs out).
    async fn start_on<T>(
        name: &str,
        transport: T,
        deadline: Duration,
        late: &str,
    ) -> Result<Server, StartError>
    where
        T: rmcp::transport::Transport<RoleClient, Error = std::io::Error> + 'static,
    {
        let watcher = Watcher::default();
        let started = tokio::time::timeout(deadline, async {
            let service = watcher
                .clone()
                .serve(transport)
                .await
                .map_err(|e| format!("it did not complete the MCP handshake: {e}"))?;
            let tools = service
                .list_all_tools()
                .await
                .map_err(|e| format!("it started but listing its tools failed: {e}"))?;
            Ok::<_, String>((service, tools))
        })
        .await;
        match started {
            Ok(Ok((service, tools))) => {
                let (tools, left_out) = server_tools(name, tools);
                Ok(Server {
                    name: name.to_owned(),
                    service,
                    watcher,
                    process: None,
                    tools,
                    left_out,
                })
            }
            Ok(Err(reason)) => Err(StartError {
                reason,
                stderr_tail: String::new(),
                needs_auth: false,
            }),
            Err(_) => Err(StartError {
                reason: format!("{late} within {} (MCP_TIMEOUT)", seconds(deadline)),
                stderr_tail: String::new(),
                needs_auth: false,
            }),
        }
    }

    /// Start server `name` as `spec` says, in `cwd` (or the spec's own directory, relative to
    /// it), and list its tools, all within `deadline`. On failure nothing is left running.
    pub async fn start_stdio(
        name: &str,
        spec: &StdioSpec,
        cwd: &Path,
        deadline: Duration,
    ) -> Result<Server, StartError> {
        let dir: PathBuf = match &spec.cwd {
            Some(d) => cwd.join(d),
            None => cwd.to_owned(),
        };
        let mut child = spawn_stdio(spec, &dir).await?;
        let pgid = Some(child.pgid());
        let (stderr, mut stderr_reader) = tail_stderr(&mut child);
        let (Some(raw_stdout), Some(stdin)) = (child.take_stdout(), child.take_stdin()) else {
            stop(&mut child).await;
            return Err(StartError {
                reason: "its stdin and stdout could not be connected".into(),
                stderr_tail: String::new(),
                needs_auth: false,
            });
        };
        let noise = Arc::new(Mutex::new(Noise::default()));
        let (filtered, stdout) = tokio::io::duplex(64 * 1024);
        tokio::spawn(filter_stdout(raw_stdout, filtered, noise.clone()));
        let watcher = Watcher::default();
        let started = tokio::time::timeout(deadline, async {
            let service = watcher
                .clone()
                .serve((stdout, stdin))
                .await
                .map_err(|e| e.to_string())?;
            let tools = service
                .list_all_tools()
                .await
                .map_err(|e| format!("it started but listing its tools failed: {e}"))?;
            Ok::<_, String>((service, tools))
        })
        .await;
        let handshake_error = match started {
            Ok(Ok((service, tools))) => {
                let (tools, left_out) = server_tools(name, tools);
                return Ok(Server {
                    name: name.to_owned(),
                    service,
                    watcher,
                    process: Some(Process {
                        child,
                        pgid,
                        noise,
                        stderr,
                        stderr_reader,
                    }),
                    tools,
                    left_out,
                });
            }
            Ok(Err(e)) => Some(e),
            Err(_) => None,
        };
        let why = handshake_error;
        Err(start_failed(&mut child, &mut stderr_reader, &stderr, why, deadline).await)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its tools, as listed when it started.
    pub fn tools(&self) -> &[ServerTool] {
        &self.tools
    }

    /// The process group its process leads (a stdio server's).
    pub fn pgid(&self) -> Option<i32> {
        self.process.as_ref().and_then(|p| p.pgid)
    }

    /// The end of what it wrote to stderr (empty for a server without a process).
    pub fn stderr_tail(&self) -> String {
        self.process.as_ref().map_or_else(String::new, |p| {
            p.stderr.lock().unwrap_or_else(|e| e.into_inner()).text()
        })
    }

    /// Once, after a stdio server wrote to stdout what is not MCP: what and how much (those
    /// lines are dropped; the connection goes on).
    pub fn noise_report(&self) -> Option<String> {
        let p = self.process.as_ref()?;
        let mut n = p.noise.lock().unwrap_or_else(|e| e.into_inner());
        if n.lines == 0 || n.reported {
            return None;
        }
        n.reported = true;
        Some(format!(
            "MCP server {} wrote {} line(s) to stdout that are not MCP messages; they were dropped (the first began: {:?})",
            self.name, n.lines, n.first
        ))
    }

    /// Why tools of its last listing were left out (one sentence each, naming server and tool).
    pub fn left_out(&self) -> &[String] {
        &self.left_out
    }

    /// Whether the server offers resources (its `resources` capability).
    pub fn has_resources(&self) -> bool {
        self.service
            .peer_info()
            .is_some_and(|i| i.capabilities.resources.is_some())
    }

    /// Its resources (each as MCP describes it: `uri`, `name`, `mimeType`, ...), within
    /// `deadline`.
    pub async fn list_resources(&self, deadline: Duration) -> Result<Vec<Value>, String> {
        let list = within(
            deadline,
            "listing its resources",
            self.service.list_all_resources(),
        )
        .await?;
        Ok(list
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect())
    }

    /// The contents of resource `uri` (each as MCP writes it: `text` or `blob`), within
    /// `deadline`.
    pub async fn read_resource(&self, uri: &str, deadline: Duration) -> Result<Vec<Value>, String> {
        let params = rmcp::model::ReadResourceRequestParams::new(uri);
        let what = format!("reading {uri}");
        let r = within(deadline, &what, self.service.read_resource(params)).await?;
        Ok(r.contents
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect())
    }

    /// Whether the server said its tool list changed since the last [`Server::relist`].
    pub fn tools_changed(&self) -> bool {
        self.watcher.tools_changed.load(Ordering::SeqCst)
    }

    /// List its tools again (after it said they changed), within `deadline`.
    pub async fn relist(&mut self, deadline: Duration) -> Result<&[ServerTool], String> {
        self.watcher.tools_changed.store(false, Ordering::SeqCst);
        let tools = within(deadline, "listing its tools", self.service.list_all_tools()).await?;
        (self.tools, self.left_out) = server_tools(&self.name, tools);
        Ok(&self.tools)
    }

    /// Call `tool` with `input` (a JSON object), waiting at most `deadline`. A call that runs
    /// out of time is abandoned, and the server told so (`notifications/cancelled`).
    pub async fn call(&mut self, tool: &str, input: Value, deadline: Duration) -> CallOutcome {
        match self.caller().call(tool, input, deadline).await {
            Err(e) => self.diagnose(e).await,
            Ok(done) => done,
        }
    }

    /// A handle that calls the server's tools without holding the server: calls to one
    /// server run side by side.
    pub fn caller(&self) -> Caller {
        Caller {
            peer: self.service.peer().clone(),
        }
    }

    /// After a call failed in transport (`why`): the crash that explains it, if the process
    /// ended, or the failure as it was.
    pub async fn diagnose(&mut self, why: String) -> CallOutcome {
        let Some(p) = self.process.as_mut() else {
            return CallOutcome::Failed(why);
        };
        match wait_exit(&mut p.child, Duration::from_millis(500)).await {
            Some(st) => {
                drained(&mut p.stderr_reader).await;
                CallOutcome::Crashed {
                    status: Some(describe(st)),
                    stderr_tail: self.stderr_tail(),
                }
            }
            None => CallOutcome::Failed(why),
        }
    }

    /// Stop it: close the connection, then SIGTERM to its process group, SIGKILL after a
    /// grace period, and reap it.
    pub async fn stop(self) {
        let _ = tokio::time::timeout(Duration::from_millis(500), self.service.cancel()).await;
        if let Some(mut p) = self.process {
            stop(&mut p.child).await;
        }
    }
}

/// OAuth for server `name` at `spec`, unless its configuration sends its own `Authorization`
/// header (then that is what it uses, and a 401 is a plain failure).
fn oauth_for(
    name: &str,
    spec: &crate::config::UrlSpec,
    deadline: Duration,
) -> Option<Arc<crate::oauth::Auth>> {
    if spec
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        return None;
    }
    let store = crate::oauth::keel_home_from_env()
        .map(|h| crate::oauth::TokenStore::new(crate::oauth::store_path(&h)));
    Some(Arc::new(crate::oauth::Auth::new(
        name,
        &spec.url,
        store,
        deadline.min(Duration::from_secs(30)),
    )))
}

/// Calls a server's tools (see [`Server::caller`]).
#[derive(Clone, Debug)]
pub struct Caller {
    peer: rmcp::service::Peer<RoleClient>,
}

impl Caller {
    /// Call `tool` with `input` (a JSON object), waiting at most `deadline` (a call abandoned
    /// then is cancelled at the server). `Err`: the request failed in transport — the server
    /// may have ended; [`Server::diagnose`] says.
    pub async fn call(
        &self,
        tool: &str,
        input: Value,
        deadline: Duration,
    ) -> Result<CallOutcome, String> {
        let Value::Object(args) = input else {
            return Ok(CallOutcome::Failed(
                "the input of an MCP tool must be a JSON object".into(),
            ));
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        match tokio::time::timeout(deadline, self.peer.call_tool(params)).await {
            Ok(Ok(r)) => Ok(CallOutcome::Done {
                content: r
                    .content
                    .iter()
                    .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
                    .collect(),
                is_error: r.is_error.unwrap_or(false),
            }),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Ok(CallOutcome::TimedOut(deadline)),
        }
    }
}

/// The text of a call's content, for a model that takes text: text blocks as they are, other
/// blocks described.
pub fn content_text(content: &[Value]) -> String {
    content
        .iter()
        .map(
            |c| match (c.get("type").and_then(Value::as_str), c.get("text")) {
                (Some("text"), Some(Value::String(t))) => t.clone(),
                (kind, _) => format!("[{} content]", kind.unwrap_or("unknown")),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

/// `request` (`what`, for messages) within `deadline`: its answer, or what went wrong.
async fn within<T, E: std::fmt::Display>(
    deadline: Duration,
    what: &str,
    request: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(deadline, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what} failed: {e}")),
        Err(_) => Err(format!("{what} took longer than {}", seconds(deadline))),
    }
}

/// Spawn the process of a stdio server in `dir`, with the spec's arguments and environment.
async fn spawn_stdio(spec: &StdioSpec, dir: &Path) -> Result<Child, StartError> {
    // Started the way a Bash command is (keel-tools' one spawner): its own process group
    // under a supervisor that also holds whatever it daemonizes, all of it dead with keel
    // (even a SIGKILLed keel) and killed when `child` is dropped.
    let spawn = Spawn::program(&spec.command)
        .args(&spec.args)
        .cwd(dir)
        .stdin_piped();
    let spawn = spec
        .env
        .iter()
        .fold(spawn, |s, (k, v)| s.env(k.as_str(), v.as_str()));
    // Without a launcher the parent-death signal follows the *thread* that forks: spawn
    // from a runtime worker (long-lived), never from a blocking-pool thread that exits
    // when idle.
    let spawned = tokio::spawn(async move { spawn.spawn().map_err(|e| e.to_string()) })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    spawned.map_err(|e| StartError {
        reason: format!(
            "could not start `{}` (in {}): {e}",
            spec.command,
            dir.display()
        ),
        stderr_tail: String::new(),
        needs_auth: false,
    })
}

/// The bounded tail of the child's stderr, and the task that keeps reading it (`None` when
/// stderr is not connected).
fn tail_stderr(child: &mut Child) -> (Arc<Mutex<Tail>>, Option<tokio::task::JoinHandle<()>>) {
    let stderr = Arc::new(Mutex::new(Tail {
        buf: Vec::new(),
        cap: STDERR_TAIL_BYTES,
    }));
    let reader = child.take_stderr().map(|mut err| {
        let tail = stderr.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 8192];
            while let Ok(n) = err.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                tail.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(&chunk[..n]);
            }
        })
    });
    (stderr, reader)
}

/// Stop a stdio server that was spawned but did not come up, and say why, with its last
/// stderr: `handshake_error` is what the handshake said (`None`: `deadline` passed first).
async fn start_failed(
    child: &mut Child,
    stderr_reader: &mut Option<tokio::task::JoinHandle<()>>,
    stderr: &Arc<Mutex<Tail>>,
    handshake_error: Option<String>,
    deadline: Duration,
) -> StartError {
    let reason = match handshake_error {
        Some(e) => {
            // It may have exited: say how, after its last words reached the tail.
            let exited = wait_exit(child, Duration::from_millis(500)).await;
            stop(child).await;
            drained(stderr_reader).await;
            match exited {
                Some(st) => format!("it exited while starting ({})", describe(st)),
                None => format!("it did not complete the MCP handshake: {e}"),
            }
        }
        None => {
            stop(child).await;
            drained(stderr_reader).await;
            format!(
                "it did not finish starting within {} (MCP_TIMEOUT)",
                seconds(deadline)
            )
        }
    };
    StartError {
        reason,
        stderr_tail: stderr.lock().unwrap_or_else(|p| p.into_inner()).text(),
        needs_auth: false,
    }
}

/// Wait up to `within` for the child to exit.
async fn wait_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    tokio::time::timeout(within, child.wait())
        .await
        .ok()?
        .status
}

/// Wait (a bounded time: a grandchild may still hold the stream open) until the stderr reader
/// has taken in everything an exited process wrote.
async fn drained(reader: &mut Option<tokio::task::JoinHandle<()>>) {
    if let Some(r) = reader.as_mut() {
        if tokio::time::timeout(Duration::from_secs(1), r)
            .await
            .is_ok()
        {
            *reader = None;
        }
    }
}

/// SIGTERM to the group (the supervisor stops what the server daemonized), SIGKILL after the
/// grace period to whatever is left.
async fn stop(child: &mut Child) {
    child.stop(STOP_GRACE).await;
}

fn describe(st: ExitStatus) -> String {
    match st {
        ExitStatus::Code(c) => format!("exit status {c}"),
        ExitStatus::Signal(s) => format!("killed by signal {s}"),
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_end_and_no_more() {
        let mut t = Tail {
            buf: Vec::new(),
            cap: 10,
        };
        t.push(b"hello ");
        t.push(b"world!");
        assert_eq!(t.text(), "llo world!");
        t.push(&[b'x'; 100]);
        assert_eq!(t.text(), "x".repeat(10));
        t.push(b"end");
        assert_eq!(t.text(), "xxxxxxxend");
    }
}
