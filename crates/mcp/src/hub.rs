//! MCP servers in a session ([`McpHub`]): the configured stdio servers are started side by
//! side before the first request, each within `MCP_TIMEOUT`; servers an SDK host runs
//! (`type: sdk`) are connected over the control protocol once the host can answer (at the
//! start of the first turn). Their tools are offered to the model as `mcp__<server>__<tool>`,
//! and the set follows the servers: a server that says its tools changed is listed again, a
//! server that crashes during a call is restarted once (a second crash marks it failed), a
//! host may reconnect or disable a server (`mcp_reconnect`, `mcp_toggle`). Each change is
//! said (a warning frame) and shows in the next `mcp_status`.
//!
//! A server that does not start is reported (its status `failed`, a warning with the reason
//! and its stderr) and the session goes on without it. A server at a URL that wants OAuth and
//! has no usable token is `needs-auth`, its reason naming `keel mcp login <server>`; a session
//! never opens a browser.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

pub use crate::config::{parse_servers, ConfigError};
use crate::server::{content_text, CallOutcome, Server, ServerTool};
use crate::ServerSet;
/// OAuth for servers at a URL (`keel mcp login` uses it).
pub use crate::{oauth, ServerSpec};
pub use crate::{Origin, SdkHost, SdkHostError};
use futures_util::future::BoxFuture;
use keel_protocol::CancelReason;
use keel_tools::{Tool, ToolContext, ToolKind, ToolOutcome};
use serde_json::{json, Value};

/// `MCP_TIMEOUT` when it is not set: how long a server may take to start.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// `MCP_TOOL_TIMEOUT` when it is not set: how long one call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);
/// `MAX_MCP_OUTPUT_TOKENS` when it is not set: the most of one call's text the model gets.
pub const DEFAULT_MAX_OUTPUT_TOKENS: usize = 25_000;
/// Bytes per token, for the output cap.
const BYTES_PER_TOKEN: usize = 4;
/// The largest value either timeout may take (a day), in milliseconds.
const MAX_TIMEOUT_MS: u64 = 24 * 3600 * 1000;
/// How many times a server that crashed during calls is restarted before it is marked failed.
const MAX_RESTARTS: u32 = 1;

/// A server's state, as `init` and `mcp_status` report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// `connected`, `pending` (an SDK server not connected yet), `failed`, `needs-auth` or
    /// `disabled`.
    pub status: &'static str,
    /// Why it failed.
    pub error: Option<String>,
    /// The tools it offers, by the names the model sees.
    pub tools: Vec<String>,
    /// What keel worked around (tools left out, and why).
    pub warnings: Vec<String>,
}

impl ServerStatus {
    /// As `init` and `mcp_status` list it.
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "name": self.name, "status": self.status });
        if let Some(e) = &self.error {
            v["error"] = json!(e);
        }
        if !self.warnings.is_empty() {
            v["warnings"] = json!(self.warnings);
        }
        v
    }
}

/// An environment variable that bounds MCP servers holds no number in its range.
#[derive(Debug, thiserror::Error)]
#[error("{var}={value:?} is not a number of {unit} from 1 to {max}")]
pub struct EnvError {
    /// The variable.
    pub var: String,
    /// What it held.
    pub value: String,
    /// What it counts.
    pub unit: &'static str,
    /// The largest value taken.
    pub max: u64,
}

/// A request about one server of the session that cannot be carried out.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// No server of that name is configured.
    #[error("There is no MCP server named {0:?} in this session")]
    NoSuchServer(String),
    /// Its configuration cannot be used (the reason was found when the session was built).
    #[error("MCP server {name:?} cannot be started: {why}")]
    CannotStart {
        /// The server.
        name: String,
        /// Why.
        why: String,
    },
    /// A resource was asked of a server that is not connected or offers none.
    #[error(
        "No connected MCP server named {name:?} offers resources. Servers that do: {offering}."
    )]
    NoResources {
        /// The server asked for.
        name: String,
        /// The servers that do offer resources, comma-separated.
        offering: String,
    },
}

/// A duration in milliseconds from the environment variable `var`, or `default`.
pub fn timeout_from_env(
    env: &dyn Fn(&str) -> Option<String>,
    var: &str,
    default: Duration,
) -> Result<Duration, EnvError> {
    let Some(v) = env(var).filter(|v| !v.trim().is_empty()) else {
        return Ok(default);
    };
    match v.trim().parse::<u64>() {
        Ok(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(Duration::from_millis(ms)),
        _ => Err(EnvError {
            var: var.to_string(),
            value: v,
            unit: "milliseconds",
            max: MAX_TIMEOUT_MS,
        }),
    }
}

/// `MAX_MCP_OUTPUT_TOKENS` from the environment, or the default.
pub fn output_cap_from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<usize, EnvError> {
    const VAR: &str = "MAX_MCP_OUTPUT_TOKENS";
    let Some(v) = env(VAR).filter(|v| !v.trim().is_empty()) else {
        return Ok(DEFAULT_MAX_OUTPUT_TOKENS);
    };
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=10_000_000).contains(&n) => Ok(n),
        _ => Err(EnvError {
            var: VAR.to_string(),
            value: v,
            unit: "tokens",
            max: 10_000_000,
        }),
    }
}

/// The bounds every server of a session works within.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Start-up (`MCP_TIMEOUT`).
    pub start: Duration,
    /// One call (`MCP_TOOL_TIMEOUT`).
    pub call: Duration,
    /// The most text of one call the model gets (`MAX_MCP_OUTPUT_TOKENS`), in bytes.
    pub output_bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            start: DEFAULT_START_TIMEOUT,
            call: DEFAULT_CALL_TIMEOUT,
            output_bytes: DEFAULT_MAX_OUTPUT_TOKENS * BYTES_PER_TOKEN,
        }
    }
}

impl Bounds {
    /// A cap of `tokens` tokens.
    pub fn with_output_tokens(mut self, tokens: usize) -> Self {
        self.output_bytes = tokens.saturating_mul(BYTES_PER_TOKEN);
        self
    }
}

/// The live connection of one server: replaced in place when it is restarted, so the tools
/// that hold it keep working.
type Conn = Arc<tokio::sync::Mutex<Option<Server>>>;

/// Where a server stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// An SDK server not connected yet.
    Pending,
    Connected,
    Failed,
    /// A server at a URL that needs the user to sign in (`keel mcp login`).
    NeedsAuth,
    Disabled,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Connected => "connected",
            State::Failed => "failed",
            State::NeedsAuth => "needs-auth",
            State::Disabled => "disabled",
        }
    }
}

/// What a connected server offers.
struct Offer {
    tools: Vec<ServerTool>,
    resources: bool,
    left_out: Vec<String>,
}

impl Offer {
    fn of(server: &Server) -> Self {
        Self {
            tools: server.tools().to_vec(),
            resources: server.has_resources(),
            left_out: server.left_out().to_vec(),
        }
    }
}

/// One configured server.
struct Slot {
    name: String,
    spec: Option<ServerSpec>,
    status: State,
    error: Option<String>,
    conn: Conn,
    /// Its tools as it listed them last.
    offered: Vec<ServerTool>,
    /// Its tools by the names the model sees.
    names: Vec<String>,
    restarts: u32,
    /// It offers resources.
    resources: bool,
    /// Tools of its listing left out, and why.
    left_out: Vec<String>,
}

impl Slot {
    /// A server not started yet (`spec`: `None` when its configuration is broken).
    fn new(name: &str, spec: Option<ServerSpec>) -> Self {
        Slot {
            name: name.to_owned(),
            spec,
            status: State::Pending,
            error: None,
            conn: Arc::new(tokio::sync::Mutex::new(None)),
            offered: Vec::new(),
            names: Vec::new(),
            left_out: Vec::new(),
            restarts: 0,
            resources: false,
        }
    }

    /// Connected, offering `offer`.
    fn up(&mut self, offer: Offer) {
        self.status = State::Connected;
        self.error = None;
        self.offered = offer.tools;
        self.resources = offer.resources;
        self.left_out = offer.left_out;
    }

    /// Not connected (failed or disabled), offering nothing.
    fn down(&mut self, status: State, why: Option<String>) {
        self.status = status;
        self.error = why;
        self.offered.clear();
        self.resources = false;
        self.left_out.clear();
    }

    fn is_up(&self) -> bool {
        self.status == State::Connected
    }
}

#[derive(Default)]
struct HubState {
    slots: Vec<Slot>,
    tools: Vec<Arc<dyn Tool>>,
    /// What changed, to be said in warning frames.
    notices: Vec<String>,
}

impl HubState {
    fn slot(&mut self, name: &str) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.name == name)
    }
}

/// The MCP servers of a session.
pub struct McpHub {
    state: Mutex<HubState>,
    /// Bumped whenever the tools change.
    generation: AtomicU64,
    /// The route to the SDK host, set by the front end that has one.
    host: OnceLock<Arc<dyn SdkHost>>,
    /// One connection round of SDK servers at a time.
    sdk_connect: tokio::sync::Mutex<()>,
    cwd: PathBuf,
    bounds: Bounds,
    me: Weak<McpHub>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.statuses())
            .finish()
    }
}

/// Why a server is not connected: the state it is left in, and the reason.
type Down = (State, String);

/// Start or connect one server.
async fn connect(
    name: &str,
    spec: &ServerSpec,
    cwd: &Path,
    bounds: Bounds,
    host: Option<Arc<dyn SdkHost>>,
) -> Result<Server, Down> {
    let failed = |e: crate::StartError| (State::Failed, e.to_string());
    match spec {
        ServerSpec::Stdio(s) => Server::start_stdio(name, s, cwd, bounds.start)
            .await
            .map_err(failed),
        ServerSpec::Http(u) | ServerSpec::Sse(u) => Server::start_url(
            name,
            u,
            matches!(spec, ServerSpec::Sse(_)),
            bounds.start,
            bounds.call.max(bounds.start),
        )
        .await
        .map_err(|e| {
            let state = if e.needs_auth {
                State::NeedsAuth
            } else {
                State::Failed
            };
            (state, e.to_string())
        }),
        ServerSpec::Sdk { .. } => match host {
            // Each message may take as long as a call (the host's tool runs inside it).
            Some(h) => Server::start_sdk(name, h, bounds.start, bounds.call.max(bounds.start))
                .await
                .map_err(failed),
            None => Err((State::Failed,
                "it is run by an SDK host, and this session has none (it needs --input-format stream-json and a host that defines the server)"
                    .to_owned(),
            )),
        },
    }
}

impl McpHub {
    fn with_slots(slots: Vec<Slot>, cwd: PathBuf, bounds: Bounds) -> Arc<McpHub> {
        let hub = Arc::new_cyclic(|me| McpHub {
            state: Mutex::new(HubState {
                slots,
                ..HubState::default()
            }),
            generation: AtomicU64::new(1),
            host: OnceLock::new(),
            sdk_connect: tokio::sync::Mutex::new(()),
            cwd,
            bounds,
            me: me.clone(),
        });
        hub.rebuild(&mut hub.lock());
        hub
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start every stdio server of `set` side by side, each within the start bound; SDK
    /// servers wait for [`McpHub::connect_sdk`].
    pub async fn start(set: &ServerSet, cwd: &Path, bounds: Bounds) -> Arc<McpHub> {
        let starts = set.entries.iter().map(|e| async move {
            let result = match &e.spec {
                Err(err) => Err((State::Failed, err.to_string())),
                Ok(ServerSpec::Sdk { .. }) => return (e, None),
                Ok(spec) => connect(&e.name, spec, cwd, bounds, None).await,
            };
            (e, Some(result))
        });
        let results = futures_util::future::join_all(starts).await;
        let mut slots = Vec::new();
        let mut notices = Vec::new();
        for (e, r) in results {
            let mut slot = Slot::new(&e.name, e.spec.as_ref().ok().cloned());
            match r {
                None => {}
                Some(Ok(server)) => {
                    slot.up(Offer::of(&server));
                    notices.extend(server.noise_report());
                    notices.extend(server.left_out().iter().cloned());
                    slot.conn = Arc::new(tokio::sync::Mutex::new(Some(server)));
                }
                Some(Err((state, why))) => {
                    tracing::info!("MCP server {} is not available: {why}", e.name);
                    if state == State::NeedsAuth {
                        notices.push(why.clone());
                    }
                    slot.down(state, Some(why));
                }
            }
            slots.push(slot);
        }
        let hub = Self::with_slots(slots, cwd.to_owned(), bounds);
        hub.lock().notices = notices;
        hub
    }

    /// Route messages for SDK servers through `host` (a front end with an SDK host calls this
    /// once, before the first turn).
    pub fn set_sdk_host(&self, host: Arc<dyn SdkHost>) {
        let _ = self.host.set(host);
    }

    /// Servers the host runs that it names in `initialize` (`sdkMcpServers`, as the
    /// TypeScript SDK sends them) rather than in `--mcp-config`: they connect with the others.
    pub fn add_sdk_servers(&self, names: &[String]) {
        let mut st = self.lock();
        for name in names {
            if st.slots.iter().any(|s| &s.name == name) {
                continue;
            }
            st.slots.push(Slot::new(
                name,
                Some(ServerSpec::Sdk { name: name.clone() }),
            ));
        }
        st.slots.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Connect the SDK servers not connected yet, side by side, each within the start bound;
    /// without a host they are marked failed.
    pub async fn connect_sdk(&self) {
        let _round = self.sdk_connect.lock().await;
        let waiting: Vec<(String, ServerSpec, Conn)> = self
            .lock()
            .slots
            .iter()
            .filter(|s| s.status == State::Pending)
            .filter_map(|s| Some((s.name.clone(), s.spec.clone()?, s.conn.clone())))
            .collect();
        if waiting.is_empty() {
            return;
        }
        let host = self.host.get().cloned();
        let results = futures_util::future::join_all(
            waiting
                .iter()
                .map(|(name, spec, _)| connect(name, spec, &self.cwd, self.bounds, host.clone())),
        )
        .await;
        for ((name, _, conn), r) in waiting.into_iter().zip(results) {
            self.settle(&name, &conn, r, None).await;
        }
    }

    /// Record how connecting `name` ended (`r`), with `said` as the notice for a success.
    async fn settle(&self, name: &str, conn: &Conn, r: Result<Server, Down>, said: Option<String>) {
        let outcome = match r {
            Ok(server) => {
                let offer = Offer::of(&server);
                let noise: Vec<String> = server
                    .noise_report()
                    .into_iter()
                    .chain(server.left_out().iter().cloned())
                    .collect();
                *conn.lock().await = Some(server);
                Ok((offer, noise))
            }
            Err(why) => Err(why),
        };
        let mut st = self.lock();
        match outcome {
            Ok((offer, noise)) => {
                if let Some(slot) = st.slot(name) {
                    slot.up(offer);
                }
                st.notices.extend(noise);
                st.notices.extend(said);
            }
            Err((state, why)) => {
                tracing::info!("MCP server {name} is not available: {why}");
                st.notices
                    .push(format!("MCP server {name} is not available: {why}"));
                if let Some(slot) = st.slot(name) {
                    slot.down(state, Some(why));
                }
            }
        }
        self.rebuild(&mut st);
    }

    /// Each server's state, in name order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.lock()
            .slots
            .iter()
            .map(|s| ServerStatus {
                name: s.name.clone(),
                status: s.status.as_str(),
                error: s.error.clone(),
                tools: s.names.clone(),
                warnings: s.left_out.clone(),
            })
            .collect()
    }

    /// The tools of the connected servers, and the generation they belong to.
    pub fn tools(&self) -> (u64, Vec<Arc<dyn Tool>>) {
        let st = self.lock();
        (self.generation.load(Ordering::SeqCst), st.tools.clone())
    }

    /// The current generation of the tools (it changes whenever they do).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// What changed since the last call, as sentences for warning frames.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().notices)
    }

    /// List again the tools of every server that said they changed (between turns).
    pub async fn refresh_lists(&self) {
        let conns: Vec<(String, Conn)> = self
            .lock()
            .slots
            .iter()
            .filter(|s| s.is_up())
            .map(|s| (s.name.clone(), s.conn.clone()))
            .collect();
        for (name, conn) in conns {
            let Ok(mut guard) = conn.try_lock() else {
                continue; // a call is running; the next turn looks again
            };
            let Some(server) = guard.as_mut().filter(|s| s.tools_changed()) else {
                continue;
            };
            let listed = server.relist(self.bounds.start).await.map(<[_]>::to_vec);
            drop(guard);
            let mut st = self.lock();
            match listed {
                Ok(tools) => {
                    if let Some(slot) = st.slot(&name) {
                        slot.offered = tools;
                    }
                    st.notices
                        .push(format!("MCP server {name} changed its tools"));
                }
                Err(why) => st.notices.push(format!(
                    "MCP server {name} said its tools changed, but {why}; its old tools stay"
                )),
            }
            self.rebuild(&mut st);
        }
    }

    /// Reconnect server `name` (`mcp_reconnect`): stop it, start it again. Err: no such server.
    pub async fn reconnect(&self, name: &str) -> Result<ServerStatus, HubError> {
        let (spec, conn) = self.slot_parts(name)?;
        if let Some(old) = conn.lock().await.take() {
            old.stop().await;
        }
        let host = self.host.get().cloned();
        let r = connect(name, &spec, &self.cwd, self.bounds, host).await;
        {
            if let Some(s) = self.lock().slot(name) {
                s.restarts = 0;
            }
        }
        self.settle(
            name,
            &conn,
            r,
            Some(format!("MCP server {name} reconnected")),
        )
        .await;
        self.status_of(name)
    }

    /// Enable or disable server `name` (`mcp_toggle`): a disabled server is stopped and its
    /// tools withdrawn; enabling starts it again.
    pub async fn toggle(&self, name: &str, enabled: bool) -> Result<ServerStatus, HubError> {
        let (_, conn) = self.slot_parts(name)?;
        if enabled {
            if self.status_of(name)?.status != State::Disabled.as_str() {
                return self.status_of(name);
            }
            return self.reconnect(name).await;
        }
        if let Some(old) = conn.lock().await.take() {
            old.stop().await;
        }
        let mut st = self.lock();
        if let Some(s) = st.slot(name) {
            s.down(State::Disabled, None);
        }
        st.notices.push(format!("MCP server {name} disabled"));
        self.rebuild(&mut st);
        drop(st);
        self.status_of(name)
    }

    fn slot_parts(&self, name: &str) -> Result<(ServerSpec, Conn), HubError> {
        let st = self.lock();
        let slot = st
            .slots
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| HubError::NoSuchServer(name.to_string()))?;
        let spec = slot.spec.clone().ok_or_else(|| HubError::CannotStart {
            name: name.to_string(),
            why: slot.error.clone().unwrap_or_default(),
        })?;
        Ok((spec, slot.conn.clone()))
    }

    fn status_of(&self, name: &str) -> Result<ServerStatus, HubError> {
        self.statuses()
            .into_iter()
            .find(|s| s.name == name)
            .ok_or_else(|| HubError::NoSuchServer(name.to_string()))
    }

    /// Server `name` crashed during a call (its connection already taken out of `conn`):
    /// restart it once, or mark it failed. Called with the connection's lock held, so no
    /// other call sees it half-restarted.
    async fn crashed(&self, name: &str, conn: &mut Option<Server>, how: &str) {
        let spec = {
            let mut st = self.lock();
            let Some(slot) = st.slot(name) else {
                return;
            };
            if slot.restarts >= MAX_RESTARTS || slot.spec.is_none() {
                slot.down(
                    State::Failed,
                    Some(format!("it stopped again during a call ({how})")),
                );
                st.notices.push(format!(
                    "MCP server {name} stopped again during a call ({how}); it is not restarted again, its tools are withdrawn"
                ));
                self.rebuild(&mut st);
                return;
            }
            slot.restarts += 1;
            slot.spec.clone()
        };
        let Some(spec) = spec else { return };
        let host = self.host.get().cloned();
        let r = connect(name, &spec, &self.cwd, self.bounds, host).await;
        let mut st = self.lock();
        let Some(slot) = st.slot(name) else {
            return;
        };
        match r {
            Ok(server) => {
                slot.up(Offer::of(&server));
                *conn = Some(server);
                st.notices.push(format!(
                    "MCP server {name} stopped during a call ({how}) and was restarted"
                ));
            }
            Err((state, why)) => {
                slot.down(state, Some(why.clone()));
                st.notices.push(format!(
                    "MCP server {name} stopped during a call ({how}) and could not be restarted: {why}"
                ));
            }
        }
        self.rebuild(&mut st);
    }

    /// Name the tools of the connected servers (deterministically, over all of them) and make
    /// their tool objects.
    fn rebuild(&self, st: &mut HubState) {
        let mut pairs = Vec::new();
        for s in st.slots.iter().filter(|s| s.is_up()) {
            pairs.extend(s.offered.iter().map(|t| (s.name.clone(), t.name.clone())));
        }
        let mut names = crate::assign(&pairs).into_iter();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for s in st.slots.iter_mut() {
            s.names.clear();
            if !s.is_up() {
                continue;
            }
            for t in &s.offered {
                let model_name = names.next().unwrap_or_default();
                s.names.push(model_name.clone());
                tools.push(Arc::new(McpTool {
                    name: model_name,
                    server_name: s.name.clone(),
                    tool: t.name.clone(),
                    description: t.description.clone(),
                    schema: t.input_schema.clone(),
                    conn: s.conn.clone(),
                    hub: self.me.clone(),
                    bounds: self.bounds,
                }));
            }
        }
        if st.slots.iter().any(|s| s.is_up() && s.resources) {
            tools.push(Arc::new(ResourceTool {
                read: false,
                hub: self.me.clone(),
            }));
            tools.push(Arc::new(ResourceTool {
                read: true,
                hub: self.me.clone(),
            }));
        }
        st.tools = tools;
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The connections of the connected servers that offer resources (`only`: that one).
    fn resource_servers(&self, only: Option<&str>) -> Result<Vec<(String, Conn)>, HubError> {
        let st = self.lock();
        let found: Vec<_> = st
            .slots
            .iter()
            .filter(|s| s.is_up() && s.resources)
            .filter(|s| only.is_none_or(|n| n == s.name))
            .map(|s| (s.name.clone(), s.conn.clone()))
            .collect();
        match (only, found.is_empty()) {
            (Some(n), true) => Err(HubError::NoResources {
                name: n.to_string(),
                offering: st
                    .slots
                    .iter()
                    .filter(|s| s.is_up() && s.resources)
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
            _ => Ok(found),
        }
    }

    /// Stop every server (the end of the session): each process group is terminated.
    pub async fn shutdown(&self) {
        // Collected first so the hub's lock is released before the awaits below.
        #[allow(clippy::needless_collect)]
        let conns: Vec<Conn> = self.lock().slots.iter().map(|s| s.conn.clone()).collect();
        let stops = conns.into_iter().map(|c| async move {
            let taken = c.lock().await.take();
            if let Some(server) = taken {
                server.stop().await;
            }
        });
        futures_util::future::join_all(stops).await;
    }
}

/// One tool of a server, as the model sees it.
struct McpTool {
    name: String,
    server_name: String,
    tool: String,
    description: String,
    schema: Value,
    /// The server's connection (held only to take a caller, or to restart it).
    conn: Conn,
    hub: Weak<McpHub>,
    bounds: Bounds,
}

impl McpTool {
    async fn run(&self, input: Value) -> CallOutcome {
        // The connection is held only to take a caller: calls to one server run side by side.
        let caller = match self.conn.lock().await.as_ref() {
            Some(server) => server.caller(),
            None => return CallOutcome::Failed("it is not connected".into()),
        };
        let outcome = match caller.call(&self.tool, input, self.bounds.call).await {
            Ok(done) => done,
            Err(why) => {
                let mut guard = self.conn.lock().await;
                let outcome = match guard.as_mut() {
                    Some(server) => server.diagnose(why).await,
                    None => CallOutcome::Failed(why),
                };
                if let CallOutcome::Crashed { status, .. } = &outcome {
                    // Restarted once (a call beside this one may have restarted it already:
                    // then it is the new process, which diagnose found alive).
                    let how = status.clone().unwrap_or_else(|| "how is not known".into());
                    if let Some(old) = guard.take() {
                        old.stop().await;
                    }
                    if let Some(hub) = self.hub.upgrade() {
                        hub.crashed(&self.server_name, &mut guard, &how).await;
                    }
                }
                outcome
            }
        };
        let noise = self
            .conn
            .lock()
            .await
            .as_ref()
            .and_then(|s| s.noise_report());
        if let (Some(n), Some(hub)) = (noise, self.hub.upgrade()) {
            hub.lock().notices.push(n);
        }
        outcome
    }

    /// The model's view of what the server answered: its text held to the output cap, and
    /// the first image, if any, as an image block.
    fn answer(&self, content: Vec<Value>, is_error: bool, cx: &ToolContext) -> ToolOutcome {
        let server = &self.server_name;
        // The first image goes to the model as an image; the rest of the content as text.
        // Only what the API takes: a known image type, base64 data within its size limit.
        let first_image = content.iter().position(|c| {
            c.get("type").and_then(Value::as_str) == Some("image")
                && matches!(
                    c.get("mimeType").and_then(Value::as_str),
                    Some("image/png" | "image/jpeg" | "image/gif" | "image/webp")
                )
                && c.get("data").and_then(Value::as_str).is_some_and(|d| {
                    !d.is_empty()
                        && d.len() as u64 <= keel_tools::image::MAX_IMAGE_BYTES / 3 * 4 + 4
                        && d.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                })
        });
        let rest: Vec<Value> = content
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != first_image)
            .map(|(_, c)| c.clone())
            .collect();
        let mut text = content_text(&rest);
        let spill = cx
            .limits
            .spill_dir
            .as_ref()
            .map(|d| d.join(format!("{}.mcp.txt", cx.tool_use_id)));
        if let Some(t) =
            keel_tools::output::bound_text(&text, self.bounds.output_bytes, spill.as_deref())
        {
            text = t;
        }
        let image = first_image.map(|i| {
            let c = &content[i];
            json!({ "media_type": c["mimeType"], "data": c["data"] })
        });
        // The front ends get what the server said, less any image's data.
        let shown: Vec<Value> = content
            .into_iter()
            .map(|mut c| {
                if let Some(o) = c.as_object_mut() {
                    if o.get("type").and_then(Value::as_str) == Some("image") {
                        o.insert("data".into(), json!("(image data, passed to the model)"));
                    }
                }
                c
            })
            .collect();
        let mut meta = json!({ "server": server, "content": shown });
        if let Some(img) = image {
            meta[keel_tools::image::IMAGE_DATA_KEY] = img;
        }
        if is_error {
            ToolOutcome::Failed {
                message: if text.trim().is_empty() {
                    format!("The MCP server {server} reported that the call failed, without saying why.")
                } else {
                    text
                },
                meta: Some(meta),
            }
        } else {
            ToolOutcome::Ok {
                content: text,
                meta: Some(meta),
            }
        }
    }
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
                o = self.run(input) => o,
                // Dropping the call abandons it, and the server is sent notifications/cancelled.
                _ = cx.cancel.cancelled() => {
                    return cx.stopped(true, String::new(), began.elapsed(), 0);
                }
            };
            let server = &self.server_name;
            match outcome {
                CallOutcome::Done { content, is_error } => self.answer(content, is_error, &cx),
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

/// `ListMcpResourcesTool` and `ReadMcpResourceTool`: the resources of the servers that offer
/// them, listed and read. Offered while a connected server has resources.
struct ResourceTool {
    read: bool,
    hub: Weak<McpHub>,
}

impl ResourceTool {
    async fn run(&self, input: Value, cx: &ToolContext) -> ToolOutcome {
        let Some(hub) = self.hub.upgrade() else {
            return ToolOutcome::failed("The session's MCP servers are gone.");
        };
        let server = input.get("server").and_then(Value::as_str);
        let deadline = hub.bounds.call;
        if !self.read {
            let servers = match hub.resource_servers(server) {
                Ok(s) => s,
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            let mut all = Vec::new();
            for (name, conn) in servers {
                let guard = conn.lock().await;
                let Some(s) = guard.as_ref() else { continue };
                match s.list_resources(deadline).await {
                    Ok(list) => all.extend(list.into_iter().map(|mut r| {
                        r["server"] = json!(name);
                        r
                    })),
                    Err(e) => return ToolOutcome::failed(format!("The MCP server {name}: {e}")),
                }
            }
            let text = if all.is_empty() {
                "No resources.".to_owned()
            } else {
                serde_json::to_string_pretty(&all).unwrap_or_default()
            };
            return ToolOutcome::Ok {
                content: self.bounded(text, cx, hub.bounds.output_bytes),
                meta: None,
            };
        }
        let (Some(server), Some(uri)) = (server, input.get("uri").and_then(Value::as_str)) else {
            return ToolOutcome::failed("ReadMcpResourceTool needs `server` and `uri`.");
        };
        let servers = match hub.resource_servers(Some(server)) {
            Ok(s) => s,
            Err(e) => return ToolOutcome::failed(e.to_string()),
        };
        let Some((_, conn)) = servers.into_iter().next() else {
            return ToolOutcome::failed(format!("The MCP server {server} is not connected."));
        };
        let guard = conn.lock().await;
        let Some(s) = guard.as_ref() else {
            return ToolOutcome::failed(format!("The MCP server {server} is not connected."));
        };
        match s.read_resource(uri, deadline).await {
            Ok(contents) => {
                let text = contents
                    .iter()
                    .map(|c| match (c.get("text"), c.get("blob")) {
                        (Some(Value::String(t)), _) => t.clone(),
                        (_, Some(Value::String(b))) => format!(
                            "[binary content of {} ({}), {} bytes of base64, not shown]",
                            c.get("uri").and_then(Value::as_str).unwrap_or(uri),
                            c.get("mimeType")
                                .and_then(Value::as_str)
                                .unwrap_or("unknown type"),
                            b.len()
                        ),
                        _ => String::new(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                ToolOutcome::Ok {
                    content: self.bounded(text, cx, hub.bounds.output_bytes),
                    meta: Some(json!({ "server": server, "uri": uri })),
                }
            }
            Err(e) => ToolOutcome::failed(format!("The MCP server {server}: {e}")),
        }
    }

    fn bounded(&self, text: String, cx: &ToolContext, max: usize) -> String {
        let spill = cx
            .limits
            .spill_dir
            .as_ref()
            .map(|d| d.join(format!("{}.mcp.txt", cx.tool_use_id)));
        keel_tools::output::bound_text(&text, max, spill.as_deref()).unwrap_or(text)
    }
}

impl Tool for ResourceTool {
    fn name(&self) -> &str {
        if self.read {
            "ReadMcpResourceTool"
        } else {
            "ListMcpResourcesTool"
        }
    }
    fn kind(&self) -> ToolKind {
        ToolKind::External
    }
    fn description(&self) -> &str {
        if self.read {
            "Reads one resource of a connected MCP server, by the server's name and the resource's URI (as ListMcpResourcesTool gives them)."
        } else {
            "Lists the resources the connected MCP servers offer (each with its server, URI, name and type); give `server` to list one server's only."
        }
    }
    fn input_schema(&self) -> Value {
        if self.read {
            json!({"type": "object", "properties": {
                "server": {"type": "string", "description": "The MCP server's name."},
                "uri": {"type": "string", "description": "The resource's URI."}},
                "required": ["server", "uri"], "additionalProperties": false})
        } else {
            json!({"type": "object", "properties": {
                "server": {"type": "string", "description": "Only this MCP server's resources."}},
                "additionalProperties": false})
        }
    }
    fn is_read_only(&self, _: &Value) -> bool {
        // A server decides what reading means: like its tools, it needs permission.
        false
    }
    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let began = Instant::now();
            tokio::select! {
                o = self.run(input, &cx) => o,
                _ = cx.cancel.cancelled() => cx.stopped(true, String::new(), began.elapsed(), 0),
            }
        })
    }
}

/// The last `n` lines of `s`.
fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
