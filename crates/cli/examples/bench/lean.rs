//! A lean model server for the long-session measurement: it reads each request whole (as any
//! server must) but parses and keeps nothing, and answers a canned stream — a tool call for
//! each of the first `turns` requests, then text. keel-mock parses every request into a JSON
//! tree and keeps them all; at turn 500 that is megabytes per request on the same two cores as
//! keel, and its memory traffic shows up in keel's own CPU time. A real API runs elsewhere.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Serve on loopback; returns the base URL and the server's task (abort it when done).
pub(crate) fn start_lean(
    rt: &tokio::runtime::Runtime,
    turns: usize,
    tool: TurnTool,
) -> Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let url = format!("http://{}", listener.local_addr()?);
    let count = Arc::new(AtomicUsize::new(0));
    let server = rt.spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((conn, _)) = listener.accept().await {
            let count = count.clone();
            conns.spawn(async move {
                let _ = serve(conn, turns, tool, &count).await;
            });
        }
    });
    Ok((url, server))
}

async fn serve(
    mut conn: tokio::net::TcpStream,
    turns: usize,
    tool: TurnTool,
    count: &AtomicUsize,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        // Headers, then exactly content-length bytes of body (kept only until answered).
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        buf.drain(..head_end + len);
        let i = count.fetch_add(1, Ordering::SeqCst) + 1;
        let body = reply(i, turns, tool);
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(resp.as_bytes()).await?;
    }
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
