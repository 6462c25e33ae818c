//! AWS event-stream framing (what Bedrock streams): each message is a prelude (total length,
//! headers length, CRC-32 of those 8 bytes), headers, a payload and a CRC-32 of everything
//! before it. Every length is bounded before anything is buffered; a bad CRC or a length out
//! of range is a protocol error (retried like a garbled stream), never an allocation.

use crate::error::{ApiError, ApiErrorKind};
use keel_protocol::eventstream::crc32;

/// The largest message accepted (Bedrock's are a few KiB).
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Prelude (12) + message CRC (4).
const MIN_MESSAGE: usize = 16;

/// One decoded message: its string headers and its payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    /// Headers whose value is a string (`:message-type`, `:event-type`, ...); others are
    /// checked for bounds and skipped.
    pub headers: Vec<(String, String)>,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

impl Message {
    /// The string header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn bad(what: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        ApiErrorKind::Protocol,
        format!("the event stream is malformed: {what}"),
    )
}

/// Messages from bytes that arrive in pieces of any size.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// Add bytes as they arrived.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Whether bytes of an unfinished message are buffered.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The next complete message, `None` until one is buffered, or the error that ends the
    /// stream.
    pub fn next_message(&mut self) -> Result<Option<Message>, ApiError> {
        if self.buf.len() < 12 {
            return Ok(None);
        }
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let total = be(&self.buf[0..4]) as usize;
        let headers_len = be(&self.buf[4..8]) as usize;
        if crc32(&self.buf[0..8]) != be(&self.buf[8..12]) {
            return Err(bad("the prelude's CRC does not match"));
        }
        if !(MIN_MESSAGE..=MAX_MESSAGE).contains(&total) {
            return Err(bad(format!(
                "a message of {total} bytes (at least {MIN_MESSAGE}, at most {MAX_MESSAGE})"
            )));
        }
        if headers_len > total - MIN_MESSAGE {
            return Err(bad(format!(
                "{headers_len} bytes of headers in a message of {total}"
            )));
        }
        if self.buf.len() < total {
            return Ok(None);
        }
        let msg: Vec<u8> = self.buf.drain(..total).collect();
        if crc32(&msg[..total - 4]) != be(&msg[total - 4..]) {
            return Err(bad("the message's CRC does not match"));
        }
        let headers = parse_headers(&msg[12..12 + headers_len])?;
        Ok(Some(Message {
            headers,
            payload: msg[12 + headers_len..total - 4].to_vec(),
        }))
    }
}

/// The string headers of a header block; every value's length is checked against the block.
fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    let take = |b: &mut &[u8], n: usize| -> Result<Vec<u8>, ApiError> {
        if b.len() < n {
            return Err(bad("a header runs past the header block"));
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head.to_vec())
    };
    while !b.is_empty() {
        let name_len = take(&mut b, 1)?[0] as usize;
        if name_len == 0 {
            return Err(bad("a header without a name"));
        }
        let name = String::from_utf8(take(&mut b, name_len)?)
            .map_err(|_| bad("a header name that is not UTF-8"))?;
        let kind = take(&mut b, 1)?[0];
        let fixed = match kind {
            0 | 1 => Some(0),
            2 => Some(1),
            3 => Some(2),
            4 => Some(4),
            5 | 8 => Some(8),
            9 => Some(16),
            6 | 7 => None,
            k => return Err(bad(format!("header {name:?} has the unknown type {k}"))),
        };
        match fixed {
            Some(n) => {
                take(&mut b, n)?;
            }
            None => {
                let l = take(&mut b, 2)?;
                let len = u16::from_be_bytes([l[0], l[1]]) as usize;
                let value = take(&mut b, len)?;
                if kind == 7 {
                    let v = String::from_utf8(value)
                        .map_err(|_| bad(format!("header {name:?} is not UTF-8")))?;
                    out.push((name, v));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::eventstream::encode;

    fn chunk() -> Vec<u8> {
        encode(
            &[(":message-type", "event"), (":event-type", "chunk")],
            br#"{"bytes":"eyJ0eXBlIjoicGluZyJ9"}"#,
        )
    }

    #[test]
    fn frames_split_at_every_byte_decode_alike() {
        let two: Vec<u8> = [chunk(), chunk()].concat();
        for cut in 0..two.len() {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for piece in [&two[..cut], &two[cut..]] {
                d.push(piece);
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(got[0].header(":event-type"), Some("chunk"));
            assert_eq!(got[1].payload, br#"{"bytes":"eyJ0eXBlIjoicGluZyJ9"}"#);
            assert!(!d.has_partial());
        }
    }

    #[test]
    fn corrupt_crcs_and_lengths_are_refused() {
        let good = chunk();
        let mut prelude = good.clone();
        prelude[9] ^= 1;
        let mut body = good.clone();
        let n = body.len();
        body[n - 6] ^= 1;
        let mut huge = encode(&[], b"");
        huge[0..4].copy_from_slice(&((MAX_MESSAGE + 1) as u32).to_be_bytes());
        let c = crc32(&huge[0..8]);
        huge[8..12].copy_from_slice(&c.to_be_bytes());
        let mut tiny = huge.clone();
        tiny[0..4].copy_from_slice(&8u32.to_be_bytes());
        let c = crc32(&tiny[0..8]);
        tiny[8..12].copy_from_slice(&c.to_be_bytes());
        let mut headers_past = good.clone();
        headers_past[4..8].copy_from_slice(&(good.len() as u32).to_be_bytes());
        let c = crc32(&headers_past[0..8]);
        headers_past[8..12].copy_from_slice(&c.to_be_bytes());
        for (what, bytes, needle) in [
            ("prelude CRC", prelude, "prelude's CRC"),
            ("message CRC", body, "message's CRC"),
            ("over 16 MiB", huge, "at most"),
            ("under 16 bytes", tiny, "at least"),
            ("headers past the end", headers_past, "bytes of headers"),
        ] {
            let mut d = Decoder::default();
            d.push(&bytes);
            let e = d.next_message().unwrap_err();
            assert_eq!(e.kind, ApiErrorKind::Protocol, "{what}");
            assert!(e.message.contains(needle), "{what}: {e}");
        }
    }

    #[test]
    fn a_header_longer_than_its_block_is_refused() {
        // A string header claiming 300 bytes inside a 20-byte block, with valid CRCs.
        let mut h = vec![1u8, b'a', 7];
        h.extend_from_slice(&300u16.to_be_bytes());
        h.extend_from_slice(b"short");
        let total = 12 + h.len() + 4;
        let mut m = (total as u32).to_be_bytes().to_vec();
        m.extend_from_slice(&(h.len() as u32).to_be_bytes());
        let c = crc32(&m);
        m.extend_from_slice(&c.to_be_bytes());
        m.extend_from_slice(&h);
        let c = crc32(&m);
        m.extend_from_slice(&c.to_be_bytes());
        let mut d = Decoder::default();
        d.push(&m);
        assert!(d
            .next_message()
            .unwrap_err()
            .message
            .contains("past the header block"));
    }
}
