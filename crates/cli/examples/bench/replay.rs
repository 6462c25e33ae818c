//! How long keel-mock itself takes: the recorded requests replayed over one connection.

#[allow(unused_imports)]
use super::*;

pub(crate) fn messages_requests(mock: &MockServer) -> Vec<RecordedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| {
            // Whichever API keel spoke (`--env KEEL_PROVIDER=openai[-chat]`).
            ["/v1/messages", "/v1/responses", "/v1/chat/completions"]
                .iter()
                .any(|p| r.path.starts_with(p))
                && !r.path.contains("count_tokens")
        })
        .collect()
}

/// The time keel-mock takes to answer each of `bodies` (path, body) (ms), in order.
pub(crate) fn replay_raw(addr: SocketAddr, bodies: &[(String, Value)]) -> Result<Vec<f64>> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    let mut each = Vec::with_capacity(bodies.len());
    for (path, b) in bodies {
        let body = serde_json::to_vec(b)?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nx-api-key: bench\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let t = Instant::now();
        w.write_all(head.as_bytes())?;
        w.write_all(&body)?;
        let status = read_response(&mut r)?;
        each.push(t.elapsed().as_secs_f64() * 1000.0);
        if status != 200 {
            bail!("replay: keel-mock answered {status}");
        }
    }
    Ok(each)
}

/// Read one HTTP/1.1 response (content-length or chunked); returns the status.
pub(crate) fn read_response(r: &mut impl BufRead) -> Result<u16> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {line:?}"))?;
    let (mut chunked, mut len) = (false, 0usize);
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse()?;
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    if !chunked {
        let mut buf = vec![0; len];
        r.read_exact(&mut buf)?;
        return Ok(status);
    }
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .with_context(|| format!("bad chunk size {line:?}"))?;
        if size == 0 {
            // Trailers (none expected), then the blank line.
            loop {
                line.clear();
                r.read_line(&mut line)?;
                if line.trim().is_empty() {
                    return Ok(status);
                }
            }
        }
        let mut buf = vec![0; size + 2];
        r.read_exact(&mut buf)?;
    }
}
