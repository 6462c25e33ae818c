//! The lean model server: a process of its own (this binary re-run as `--lean-server`) that
//! reads each request whole, as any server must, parses and keeps nothing, and answers a canned
//! stream — a tool call for each of the first `turns` requests, then text.
//!
//! It logs its own time for every request (request fully read → response fully written) and
//! when each request began and ended arriving, so keel's own share of each turn is exact per
//! request: from the moment the server finished writing response i to the moment request i+1
//! was fully read. This is the harness issue 34 describes (a separate-process fake server whose
//! time per request is logged and subtracted), without the replay estimate the keel-mock rows
//! need. keel-mock parses every request into a JSON tree, validates it, walks it for the
//! prompt-cache simulation and keeps it: work that grows with the history, on the same two
//! cores as keel, and that a replay subtracts only in part (its memory traffic slows keel too).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[allow(unused_imports)]
use super::*;

/// The largest request the lean server reads (keel's requests at turn 500 are well under this).
const MAX_BODY: usize = 256 << 20;

/// What the lean server logged for one request (times in ns since the server started).
#[derive(Clone, Debug)]
pub(crate) struct Served {
    /// Request number, from 1, in the order they were fully read.
    pub(crate) n: usize,
    /// Its first byte arrived.
    pub(crate) start_ns: u64,
    /// Its last byte arrived (headers and `content-length` bytes of body).
    pub(crate) read_ns: u64,
    /// The response's last byte was written.
    pub(crate) written_ns: u64,
    /// Body size.
    pub(crate) bytes: usize,
}

impl Served {
    /// The server's own time for this request (ms).
    pub(crate) fn server_ms(&self) -> f64 {
        (self.written_ns.saturating_sub(self.read_ns)) as f64 / 1e6
    }
}

/// keel's own share of each tool turn (ms): response i fully written → request i+1 fully read.
/// Index 0 is tool turn 1.
pub(crate) fn own_each_ms(log: &[Served]) -> Vec<f64> {
    log.windows(2)
        .map(|w| (w[1].read_ns as f64 - w[0].written_ns as f64) / 1e6)
        .collect()
}

/// Request to request (fully read to fully read) for each tool turn (ms).
pub(crate) fn gap_each_ms(log: &[Served]) -> Vec<f64> {
    log.windows(2)
        .map(|w| (w[1].read_ns as f64 - w[0].read_ns as f64) / 1e6)
        .collect()
}

/// A running lean server; killed if dropped before [`finish`](Self::finish).
pub(crate) struct LeanServer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
}

impl LeanServer {
    /// Start `me --lean-server TURNS TOOL` and read the port it listens on.
    pub(crate) fn start(me: &Path, turns: usize, tool: TurnTool) -> Result<Self> {
        let mut child = Command::new(me)
            .args(["--lean-server", &turns.to_string(), tool.arg()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the lean server")?;
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().context("lean server's stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let port: u16 = line
            .trim()
            .parse()
            .with_context(|| format!("the lean server printed {line:?}, not a port"))?;
        Ok(LeanServer {
            child,
            stdin,
            stdout,
            url: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Stop it (closing its stdin) and read its log.
    pub(crate) fn finish(mut self) -> Result<Vec<Served>> {
        drop(self.stdin.take());
        let mut log = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                break;
            }
            let f: Vec<u64> = line
                .split_whitespace()
                .map(str::parse)
                .collect::<std::result::Result<_, _>>()
                .with_context(|| format!("lean server log line {line:?}"))?;
            let [n, start_ns, read_ns, written_ns, bytes] = f[..] else {
                bail!("lean server log line {line:?}");
            };
            log.push(Served {
                n: n as usize,
                start_ns,
                read_ns,
                written_ns,
                bytes: bytes as usize,
            });
        }
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the lean server exited with {status}");
        }
        log.sort_by_key(|s| s.n);
        Ok(log)
    }
}

impl Drop for LeanServer {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `bench --lean-server TURNS bash|read`: print the port, serve until stdin closes, then print
/// one line per request: `n start_ns read_ns written_ns body_bytes`.
pub(crate) fn lean_server_main(args: &[String]) -> Result<()> {
    let [turns, tool] = args else {
        bail!("usage: bench --lean-server TURNS bash|read");
    };
    let turns: usize = turns.parse().context("--lean-server TURNS")?;
    let tool = TurnTool::from_arg(tool)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let epoch = Instant::now();
    let log: Arc<Mutex<Vec<Served>>> = Arc::new(Mutex::new(Vec::with_capacity(turns + 8)));
    let count = Arc::new(AtomicUsize::new(0));
    let replies = Arc::new(Replies::new(turns, tool));
    println!("{}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    {
        let log = log.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (log, count, replies) = (log.clone(), count.clone(), replies.clone());
                std::thread::spawn(move || {
                    if let Err(e) = serve(conn, epoch, &log, &count, &replies) {
                        eprintln!("lean server: {e:#}");
                    }
                });
            }
        });
    }
    // Until the bench closes our stdin.
    std::io::copy(&mut std::io::stdin(), &mut std::io::sink())?;
    let log = log
        .lock()
        .map_err(|_| anyhow::anyhow!("lean server log poisoned"))?;
    let mut out = std::io::stdout().lock();
    for s in log.iter() {
        writeln!(
            out,
            "{} {} {} {} {}",
            s.n, s.start_ns, s.read_ns, s.written_ns, s.bytes
        )?;
    }
    out.flush()?;
    Ok(())
}

fn ns_since(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Serve one keep-alive connection until the client closes it.
fn serve(
    mut conn: TcpStream,
    epoch: Instant,
    log: &Mutex<Vec<Served>>,
    count: &AtomicUsize,
    replies: &Replies,
) -> Result<()> {
    conn.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        // Whatever is left in `buf` belongs to the next request (a client may pipeline).
        let mut start_ns = (!buf.is_empty()).then(|| ns_since(epoch));
        let mut scanned = 0;
        let head_end = loop {
            if let Some(i) = find_head_end(&buf, scanned) {
                break i;
            }
            scanned = buf.len().saturating_sub(3);
            let n = conn.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            start_ns.get_or_insert_with(|| ns_since(epoch));
            buf.extend_from_slice(&chunk[..n]);
        };
        let len = content_length(&buf[..head_end])?;
        while buf.len() < head_end + len {
            let n = conn.read(&mut chunk)?;
            if n == 0 {
                bail!("the client closed the connection inside a request body");
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let read_ns = ns_since(epoch);
        buf.drain(..head_end + len);
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        conn.write_all(replies.get(n).as_bytes())?;
        let written_ns = ns_since(epoch);
        log.lock()
            .map_err(|_| anyhow::anyhow!("lean server log poisoned"))?
            .push(Served {
                n,
                start_ns: start_ns.unwrap_or(read_ns),
                read_ns,
                written_ns,
                bytes: len,
            });
    }
}

/// The end of the header block (after `\r\n\r\n`), searching from `from`.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| from + i + 4)
}

/// The request's `content-length` (keel always sends one; a chunked body is refused loudly).
fn content_length(head: &[u8]) -> Result<usize> {
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    if head.contains("transfer-encoding:") {
        bail!("lean server: a request without content-length (chunked) is not supported");
    }
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse::<usize>())
        .transpose()
        .context("lean server: bad content-length")?
        .unwrap_or(0);
    if len > MAX_BODY {
        bail!("lean server: a {len}-byte request is over its {MAX_BODY}-byte bound");
    }
    Ok(len)
}

/// The responses, all made before the first request so answering one is a single write: a
/// tool-call stream for each of the first `turns` requests, then the final text stream.
struct Replies {
    tools: Vec<String>,
    text: String,
}

impl Replies {
    fn new(turns: usize, tool: TurnTool) -> Self {
        Replies {
            tools: (1..=turns).map(|i| http(&reply(i, turns, tool))).collect(),
            text: http(&reply(usize::MAX, 0, tool)),
        }
    }

    /// The whole HTTP response to request `n` (1-based).
    fn get(&self, n: usize) -> &str {
        n.checked_sub(1)
            .and_then(|i| self.tools.get(i))
            .unwrap_or(&self.text)
    }
}

fn http(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The stream for request `i` (1-based): a tool call while `i <= turns`, then text.
fn reply(i: usize, turns: usize, tool: TurnTool) -> String {
    let mut s = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{i}"), "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    let (block, delta, stop) = if i <= turns {
        let (name, input) = match tool {
            TurnTool::Bash => ("Bash", json!({"command": "true"})),
            TurnTool::Read => ("Read", json!({"file_path": READ_FILE})),
        };
        (
            json!({"type": "tool_use", "id": format!("toolu_{i:08}"), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        )
    } else {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "Done every turn."}),
            "end_turn",
        )
    };
    s += &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
    );
    s += &event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    );
    s += &event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    s += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
    );
    s + &event("message_stop", json!({"type": "message_stop"}))
}
