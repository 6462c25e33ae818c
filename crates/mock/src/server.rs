//! The server: one accept loop, one task per connection, all stopped by one token.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::handler::{handle, Shared};
use crate::record::{RecordedRequest, Recorder};
use crate::reply::Counters;
use crate::scenario::Scenario;
use crate::select::Cursor;

/// Most client connections served at once. Past it the server stops accepting until one
/// ends, leaving newcomers in the kernel's backlog: a runaway client slows down instead of
/// making the server spawn without end.
const MAX_CONNECTIONS: usize = 1024;
/// Most request headers hyper accepts in one request.
const MAX_HEADERS: usize = 100;
/// Most bytes hyper buffers while reading a request head (request line and headers); the
/// body has its own cap in the handler.
const MAX_HEAD_BYTES: usize = 400 * 1024;

/// How to run a server.
#[derive(Clone, Debug)]
pub struct MockConfig {
    /// The scenario to replay.
    pub scenario: Scenario,
    /// Address to listen on (default 127.0.0.1).
    pub host: IpAddr,
    /// Port to listen on; 0 picks a free one.
    pub port: u16,
    /// Append every request as one JSON line to this file.
    pub log_path: Option<PathBuf>,
}

impl MockConfig {
    /// Loopback, any free port, no log file.
    pub fn new(scenario: Scenario) -> MockConfig {
        MockConfig {
            scenario,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            log_path: None,
        }
    }
}

/// A running mock server; dropping it or calling [`MockServer::shutdown`] stops it.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    connections: watch::Receiver<usize>,
    /// Connections accepted since the start (a client that reuses its keep-alive connection
    /// makes one).
    accepted: Arc<AtomicUsize>,
    token: CancellationToken,
    accept: JoinHandle<()>,
}

impl MockServer {
    /// Serve `scenario` on 127.0.0.1 at a free port.
    pub async fn start(scenario: Scenario) -> io::Result<MockServer> {
        MockServer::start_with(MockConfig::new(scenario)).await
    }

    /// Serve as configured. An invalid scenario is an `InvalidInput` error.
    pub async fn start_with(cfg: MockConfig) -> io::Result<MockServer> {
        cfg.scenario
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let recorder = Recorder::new(cfg.log_path.as_deref()).map_err(|e| {
            let path = cfg.log_path.as_deref().unwrap_or(std::path::Path::new(""));
            io::Error::new(
                e.kind(),
                format!("cannot open the request log {}: {e}", path.display()),
            )
        })?;
        let listener = TcpListener::bind(SocketAddr::new(cfg.host, cfg.port)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            cursor: Mutex::new(Cursor::new(&cfg.scenario)),
            scenario: Mutex::new(Arc::new(cfg.scenario)),
            recorder,
            ids: Counters::default(),
            cache: crate::cache::PromptCache::default(),
            entra: crate::entra::Issued::default(),
        });
        let token = CancellationToken::new();
        let (conn_tx, connections) = watch::channel(0usize);
        let accepted = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn(accept_loop(
            listener,
            shared.clone(),
            token.clone(),
            (Arc::new(conn_tx), accepted.clone()),
        ));
        Ok(MockServer {
            addr,
            shared,
            connections,
            accepted,
            token,
            accept,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT`, ready for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replay `scenario` from its first step for every request from now on (a test fixing the
    /// server it made fail, say). Requests already being answered finish as they started.
    pub fn replace_scenario(&self, scenario: Scenario) -> io::Result<()> {
        scenario
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut cursor = self.shared.cursor.lock().unwrap_or_else(|p| p.into_inner());
        *cursor = Cursor::new(&scenario);
        *self
            .shared
            .scenario
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(scenario);
        Ok(())
    }

    /// Forget every Microsoft Entra ID token the fake token endpoint handed out, so the next
    /// request carrying one is refused with 401 (a revoked or expired token).
    pub fn revoke_entra_tokens(&self) {
        self.shared.entra.revoke_all();
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.recorder.snapshot()
    }

    /// Wait until at least `n` requests have been recorded; false if `timeout` passes first.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        self.shared.recorder.wait_for(n, timeout).await
    }

    /// How many client connections are open right now.
    pub fn open_connections(&self) -> usize {
        *self.connections.borrow()
    }

    /// How many client connections have been accepted since the server started.
    pub fn accepted_connections(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Wait until no client connection is open (every handler has ended); false on timeout.
    pub async fn wait_idle(&self, timeout: Duration) -> bool {
        let mut rx = self.connections.clone();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Stop accepting and close every connection.
    pub fn shutdown(self) {
        // Drop does the work.
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.token.cancel();
        self.accept.abort();
    }
}

/// Counts a connection as open, and holds its place under [`MAX_CONNECTIONS`], for as long
/// as it lives.
struct ConnGuard {
    count: Arc<watch::Sender<usize>>,
    _slot: OwnedSemaphorePermit,
}

impl ConnGuard {
    fn new(count: Arc<watch::Sender<usize>>, slot: OwnedSemaphorePermit) -> ConnGuard {
        count.send_modify(|n| *n += 1);
        ConnGuard { count, _slot: slot }
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.count.send_modify(|n| *n = n.saturating_sub(1));
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    token: CancellationToken,
    (conns, n_accepted): (Arc<watch::Sender<usize>>, Arc<AtomicUsize>),
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let slot = tokio::select! {
            () = token.cancelled() => return,
            s = slots.clone().acquire_owned() => match s {
                Ok(s) => s,
                // Never closed; if it were, there would be nothing left to serve.
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            () = token.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((socket, _)) => {
                n_accepted.fetch_add(1, Ordering::Relaxed);
                let guard = ConnGuard::new(conns.clone(), slot);
                tokio::spawn(serve(socket, shared.clone(), token.clone(), guard));
            }
            Err(_) => {
                // Out of file descriptors and the like: back off briefly instead of spinning.
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
            }
        }
    }
}

async fn serve(socket: TcpStream, shared: Arc<Shared>, token: CancellationToken, guard: ConnGuard) {
    let _guard = guard;
    let _ = socket.set_nodelay(true);
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move { handle(&shared, req).await }
    });
    let conn = http1::Builder::new()
        .keep_alive(true)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(socket), service);
    // Dropping the connection future drops any handler and body with it, stalls included.
    tokio::select! {
        _ = conn => {}
        () = token.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn handle_can_be_shared_across_tasks() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::MockServer>();
        send_sync::<super::MockConfig>();
    }
}
