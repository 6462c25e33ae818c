//! Reading NDJSON lines with a large but finite cap.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete line is in the buffer (without its newline).
    Text,
    /// A line longer than the cap was skipped; its length.
    TooLong(usize),
    /// End of the stream.
    Eof,
}

/// Reads one line into `buf` (cleared first). A line over `max` bytes is consumed and dropped, so
/// the next read starts at the next line. A last line without a newline is returned as `Text`.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut skipped: Option<usize> = None;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match skipped {
                Some(n) => Line::TooLong(n),
                None if buf.is_empty() => Line::Eof,
                None => Line::Text,
            });
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        match skipped.as_mut() {
            Some(n) => *n += part,
            None if buf.len() + part > max => {
                skipped = Some(buf.len() + part);
                buf.clear();
            }
            None => buf.extend_from_slice(&chunk[..part]),
        }
        r.consume(if done { part + 1 } else { part });
        if done {
            return Ok(match skipped {
                Some(n) => Line::TooLong(n),
                None => Line::Text,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_caps_and_eof() {
        let data: &[u8] = b"one\ntoolongline\nthree";
        let mut r = tokio::io::BufReader::with_capacity(4, data);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Text);
        assert_eq!(buf, b"one");
        assert_eq!(
            read_line(&mut r, &mut buf, 8).await.unwrap(),
            Line::TooLong(11)
        );
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Text);
        assert_eq!(buf, b"three");
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Eof);
    }
}
