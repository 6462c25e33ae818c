//! Recording every request: in memory for the handle, and optionally as JSON lines in a file.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// One request as the server received and answered it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Position in arrival order, from 0 (the index in [`crate::MockServer::requests`]).
    pub seq: usize,
    /// When it arrived, in milliseconds since the Unix epoch.
    pub received_at_ms: u64,
    /// When it arrived, in milliseconds since the server started.
    pub elapsed_ms: f64,
    /// HTTP method.
    pub method: String,
    /// Path including the query string, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// Request headers with lower-case names (repeated headers joined with ", ").
    pub headers: BTreeMap<String, String>,
    /// The body as JSON; `Null` if it was not JSON.
    pub body: serde_json::Value,
    /// For an OpenAI route, the body in the Messages API's shape (system, messages with
    /// text / tool_use / tool_result blocks, tool names); `Null` for the Messages API itself,
    /// whose body is already that shape (see [`RecordedRequest::messages_view`]).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub view: serde_json::Value,
    /// The API the request spoke: `messages`, `responses` or `chat`.
    #[serde(default)]
    pub dialect: String,
    /// Whether the body asked for a stream (`"stream": true`).
    pub stream: bool,
    /// Index of the scenario step that answered; `None` when the request was rejected.
    pub step: Option<usize>,
    /// HTTP status sent; 0 when the connection is closed before any header.
    pub status: u16,
    /// Why the request was rejected as invalid, if it was.
    pub validation_error: Option<String>,
}

impl RecordedRequest {
    /// The request in the Messages API's shape, whatever API it spoke.
    pub fn messages_view(&self) -> &serde_json::Value {
        if self.view.is_null() {
            &self.body
        } else {
            &self.view
        }
    }
}

/// The shared request log.
pub(crate) struct Recorder {
    list: Mutex<Vec<RecordedRequest>>,
    file: Option<Mutex<File>>,
    count: watch::Sender<usize>,
    started: Instant,
}

impl Recorder {
    /// A recorder; with a path, records are also appended to that file.
    pub(crate) fn new(log_path: Option<&Path>) -> io::Result<Recorder> {
        let file = match log_path {
            Some(p) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(p)?,
            )),
            None => None,
        };
        Ok(Recorder {
            list: Mutex::new(Vec::new()),
            file,
            count: watch::channel(0).0,
            started: Instant::now(),
        })
    }

    /// Milliseconds since the server started, to the microsecond (so the value survives a
    /// trip through the JSON log unchanged).
    pub(crate) fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_micros() as f64 / 1000.0
    }

    /// Record a request. `decide` gets the request's sequence number and fills in the record;
    /// it runs under the log's lock so sequence numbers, memory and file agree on the order.
    pub(crate) fn record_with<T>(&self, decide: impl FnOnce(usize) -> (RecordedRequest, T)) -> T {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let seq = list.len();
        let (mut rec, out) = decide(seq);
        rec.seq = seq;
        if let Some(file) = &self.file {
            let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
            let mut line = serde_json::to_string(&rec).unwrap_or_default();
            line.push('\n');
            if let Err(e) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
                eprintln!("keel-mock: cannot append to the request log: {e}");
            }
        }
        list.push(rec);
        let n = list.len();
        drop(list);
        self.count.send_replace(n);
        out
    }

    /// A copy of every record so far.
    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        self.list.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Wait until at least `n` requests are recorded; false on timeout.
    pub(crate) async fn wait_for(&self, n: usize, timeout: Duration) -> bool {
        let mut rx = self.count.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}
