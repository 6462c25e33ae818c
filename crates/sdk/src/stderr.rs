//! The CLI's stderr: kept in a bounded ring (the tail wins) and passed on live, line by line.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::callbacks::StderrCallback;

/// A partial line longer than this is handed to the callback without waiting for its newline.
const MAX_CALLBACK_LINE: usize = 64 * 1024;

/// The last `cap` bytes written to stderr.
pub(crate) struct StderrRing {
    cap: usize,
    buf: Mutex<VecDeque<u8>>,
}

impl StderrRing {
    pub(crate) fn new(cap: usize) -> StderrRing {
        StderrRing {
            cap,
            buf: Mutex::new(VecDeque::new()),
        }
    }

    pub(crate) fn push(&self, bytes: &[u8]) {
        let mut b = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = if bytes.len() > self.cap {
            &bytes[bytes.len() - self.cap..]
        } else {
            bytes
        };
        let overflow = (b.len() + bytes.len()).saturating_sub(self.cap);
        b.drain(..overflow);
        b.extend(bytes);
    }

    /// The tail as text (invalid UTF-8, e.g. a character cut at the front, becomes U+FFFD).
    pub(crate) fn snapshot(&self) -> String {
        let b = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let (a, c) = b.as_slices();
        let mut v = Vec::with_capacity(a.len() + c.len());
        v.extend_from_slice(a);
        v.extend_from_slice(c);
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// Reads `r` to its end into `ring`, calling `cb` with each line.
pub(crate) async fn pump<R: AsyncRead + Unpin>(
    mut r: R,
    ring: &StderrRing,
    cb: Option<StderrCallback>,
) {
    let mut chunk = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        ring.push(&chunk[..n]);
        let Some(cb) = &cb else { continue };
        for &b in &chunk[..n] {
            if b == b'\n' {
                emit(cb, &mut line);
            } else {
                line.push(b);
                if line.len() >= MAX_CALLBACK_LINE {
                    emit(cb, &mut line);
                }
            }
        }
    }
    if let Some(cb) = &cb {
        if !line.is_empty() {
            emit(cb, &mut line);
        }
    }
}

fn emit(cb: &StderrCallback, line: &mut Vec<u8>) {
    let text = String::from_utf8_lossy(line);
    cb(text.trim_end_matches('\r'));
    line.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn ring_keeps_the_tail() {
        let r = StderrRing::new(5);
        r.push(b"abc");
        r.push(b"defg");
        assert_eq!(r.snapshot(), "cdefg");
        r.push(b"0123456789");
        assert_eq!(r.snapshot(), "56789");
    }

    #[tokio::test]
    async fn pump_calls_back_per_line() {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let s2 = seen.clone();
        let cb: StderrCallback = Arc::new(move |l| s2.lock().unwrap().push(l.to_owned()));
        let ring = StderrRing::new(100);
        pump(&b"one\r\ntwo\nthree"[..], &ring, Some(cb)).await;
        assert_eq!(*seen.lock().unwrap(), ["one", "two", "three"]);
        assert_eq!(ring.snapshot(), "one\r\ntwo\nthree");
    }
}
