//! A stdio server's stdout on its way to the MCP transport: lines that are not MCP are
//! dropped and counted, and a JSON-RPC line longer than the transport reads is answered with
//! an error for its id, so the call it belonged to fails at once instead of timing out.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Lines a server wrote to stdout that are not MCP messages.
#[derive(Debug, Default)]
pub(crate) struct Noise {
    pub(crate) lines: u64,
    /// The start of the first one.
    pub(crate) first: String,
    pub(crate) reported: bool,
}

/// The most of a stray line kept for the report.
const NOISE_SAMPLE: usize = 120;

impl Noise {
    pub(crate) fn record(noise: &Mutex<Noise>, sample: &[u8]) {
        let mut n = noise.lock().unwrap_or_else(|p| p.into_inner());
        if n.lines == 0 {
            n.first = String::from_utf8_lossy(sample).into_owned();
        }
        n.lines += 1;
    }
}

/// The longest line (newline included) the MCP transport reads; a longer one it would drop
/// with only a trace line, leaving the call it answered to wait out its whole deadline.
pub const MAX_ANSWER_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// Finds the top-level `"id"` of a JSON-RPC message as it streams by, in constant memory
/// (the id may come last: some servers write `{"result": …, "jsonrpc": "2.0", "id": 7}`).
#[derive(Default)]
struct IdScan {
    depth: u32,
    in_str: bool,
    escaped: bool,
    /// At depth 1, the next string is a key.
    want_key: bool,
    reading_key: bool,
    key: Vec<u8>,
    /// Reading the value of a top-level `"id"`.
    in_id: bool,
    value: Vec<u8>,
    id: Option<Vec<u8>>,
}

/// Bytes of a key or an id kept; longer ones are not ids keel can answer.
const ID_SCAN_MAX: usize = 256;

impl IdScan {
    fn feed(&mut self, b: u8) {
        if self.in_str {
            if self.in_id && self.value.len() < ID_SCAN_MAX {
                self.value.push(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_str = false;
                self.reading_key = false;
            } else if self.reading_key && self.key.len() < ID_SCAN_MAX {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_str = true;
                if self.depth == 1 && self.want_key {
                    self.reading_key = true;
                    self.want_key = false;
                    self.key.clear();
                } else if self.in_id && self.value.len() < ID_SCAN_MAX {
                    self.value.push(b);
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                // An object or list is no id.
                self.in_id = false;
                if self.depth == 1 {
                    self.want_key = b == b'{';
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                self.in_id = self.key == b"id";
                self.value.clear();
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.want_key = true;
            }
            _ if b.is_ascii_whitespace() => {}
            _ if self.in_id && self.value.len() < ID_SCAN_MAX => self.value.push(b),
            _ => {}
        }
    }

    fn end_value(&mut self) {
        if self.in_id && !self.value.is_empty() && self.value.len() < ID_SCAN_MAX {
            self.id = Some(std::mem::take(&mut self.value));
        }
        self.in_id = false;
    }

    /// The id, if it is one JSON-RPC allows (a number or a string).
    fn id(&self) -> Option<Value> {
        let v: Value = serde_json::from_slice(self.id.as_deref()?).ok()?;
        (v.is_number() || v.is_string()).then_some(v)
    }
}

/// The error keel answers in place of a line too long for the transport, so the call it
/// answered fails at once, saying why, instead of waiting out its deadline.
fn overlong_answer(id: Value, bytes: u64) -> Vec<u8> {
    let message = format!(
        "the MCP server's answer was {bytes} bytes on one line, over the {} MiB the MCP transport reads; keel dropped it",
        MAX_ANSWER_LINE >> 20
    );
    let mut line =
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
            .to_string()
            .into_bytes();
    line.push(b'\n');
    line
}

/// Where [`filter_stdout`] is in the current line.
#[derive(PartialEq)]
enum Line {
    Start,
    Pass,
    Drop,
    /// A JSON-RPC line past [`MAX_ANSWER_LINE`]: dropped while its id is looked for.
    Overlong,
}

/// Pass on from a server's stdout only the lines that may be JSON-RPC (the first byte that is
/// not blank is `{` or `[`); other lines are dropped as they stream by — counted, the start of
/// the first kept for the report — so a chatty or broken server costs no memory. A JSON-RPC
/// line longer than the transport reads is replaced by an error answer for its id.
pub(crate) async fn filter_stdout(
    mut from: impl tokio::io::AsyncRead + Unpin,
    mut to: tokio::io::DuplexStream,
    noise: Arc<Mutex<Noise>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    // Whole lines only go on, so a line is known to fit before any of it is passed.
    let mut pending: Vec<u8> = Vec::new();
    let mut line = Line::Start;
    let mut sample = Vec::new();
    let mut scan = IdScan::default();
    let mut seen: u64 = 0;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            let mut flush = false;
            match line {
                Line::Start if b.is_ascii_whitespace() => {
                    pending.push(b);
                    flush = b == b'\n';
                }
                Line::Start if b == b'{' || b == b'[' => {
                    line = Line::Pass;
                    pending.push(b);
                    scan = IdScan::default();
                    scan.feed(b);
                }
                Line::Start => {
                    line = Line::Drop;
                    sample.clear();
                    sample.push(b);
                }
                Line::Pass if b == b'\n' => {
                    pending.push(b);
                    flush = true;
                    line = Line::Start;
                }
                Line::Pass => {
                    pending.push(b);
                    scan.feed(b);
                    if pending.len() + 1 > MAX_ANSWER_LINE {
                        seen = pending.len() as u64;
                        pending = Vec::new();
                        line = Line::Overlong;
                    }
                }
                Line::Overlong if b == b'\n' => {
                    match scan.id() {
                        Some(id) => pending = overlong_answer(id, seen),
                        None => Noise::record(
                            &noise,
                            b"(an MCP message too long to read, with no id keel could find)",
                        ),
                    }
                    flush = true;
                    line = Line::Start;
                }
                Line::Overlong => {
                    seen += 1;
                    scan.feed(b);
                }
                Line::Drop if b == b'\n' => {
                    Noise::record(&noise, &sample);
                    line = Line::Start;
                }
                Line::Drop => {
                    if sample.len() < NOISE_SAMPLE {
                        sample.push(b);
                    }
                }
            }
            if flush {
                if !pending.is_empty() && to.write_all(&pending).await.is_err() {
                    return;
                }
                pending.clear();
                if pending.capacity() > 1 << 20 {
                    pending = Vec::new();
                }
            }
        }
    }
    if line == Line::Drop {
        Noise::record(&noise, &sample);
    }
}

#[cfg(test)]
mod id_scan_tests {
    use super::*;

    fn id_of(line: &str) -> Option<Value> {
        let mut s = IdScan::default();
        line.bytes().for_each(|b| s.feed(b));
        s.id()
    }

    #[test]
    fn the_top_level_id_is_found_first_or_last_and_nested_ones_are_not() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"result":{"id":9}}"#),
            Some(json!(7))
        );
        assert_eq!(
            id_of(
                r#"{"result":{"content":[{"id":"x","text":"a\"id\":3"}]},"jsonrpc":"2.0","id":"r-1"}"#
            ),
            Some(json!("r-1"))
        );
        assert_eq!(id_of(r#"{"result":{"id":5}}"#), None);
        assert_eq!(id_of(r#"{"id":{"a":1}}"#), None);
    }
}
