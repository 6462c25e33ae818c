//! Splitting the CLI's stdout into lines, with a large but finite cap on each.

use std::io;

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// One line of stdout.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line, without its newline. Raw bytes: text that is not UTF-8 is the caller's to report.
    Text(Bytes),
    /// A line longer than the cap was skipped; its length.
    TooLong(usize),
}

/// A decoder of newline-ended lines. A line over `max` bytes is dropped as it streams in (the
/// buffer never holds more than the cap plus one read), reported as [`Line::TooLong`] with its
/// full length, and the next line is read as usual. A last line without a newline is still a
/// line.
#[derive(Debug)]
pub(crate) struct LineCodec {
    max: usize,
    /// Where to resume looking for a newline: the bytes before it were searched already, which
    /// keeps a long line from being searched again on every read.
    searched: usize,
    /// The length so far of an over-long line being dropped.
    skipping: Option<usize>,
}

impl LineCodec {
    /// Lines of at most `max` bytes.
    pub(crate) fn new(max: usize) -> LineCodec {
        LineCodec {
            max,
            searched: 0,
            skipping: None,
        }
    }
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        let from = self.searched.min(buf.len());
        match buf[from..].iter().position(|&b| b == b'\n') {
            Some(offset) => {
                let end = from + offset;
                self.searched = 0;
                if let Some(skipped) = self.skipping.take() {
                    buf.advance(end + 1);
                    return Ok(Some(Line::TooLong(skipped + end)));
                }
                if end > self.max {
                    buf.advance(end + 1);
                    return Ok(Some(Line::TooLong(end)));
                }
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                Ok(Some(Line::Text(line.freeze())))
            }
            None => {
                if let Some(skipped) = self.skipping.as_mut() {
                    *skipped += buf.len();
                    buf.clear();
                    self.searched = 0;
                } else if buf.len() > self.max {
                    self.skipping = Some(buf.len());
                    buf.clear();
                    self.searched = 0;
                } else {
                    self.searched = buf.len();
                }
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        self.searched = 0;
        if let Some(skipped) = self.skipping.take() {
            return Ok(Some(Line::TooLong(skipped)));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        Ok(Some(Line::Text(buf.split().freeze())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::FramedRead;

    /// Decodes `data`, delivered `chunk` bytes at a time, with a cap of `max`.
    async fn lines(data: &[u8], chunk: usize, max: usize) -> Vec<Line> {
        let (mut w, r) = tokio::io::duplex(chunk);
        let data = data.to_vec();
        let writer = tokio::spawn(async move {
            for part in data.chunks(chunk) {
                w.write_all(part).await.unwrap();
            }
        });
        let out: Vec<Line> = FramedRead::new(r, LineCodec::new(max))
            .map(|l| l.unwrap())
            .collect()
            .await;
        writer.await.unwrap();
        out
    }

    fn text(s: &[u8]) -> Line {
        Line::Text(Bytes::copy_from_slice(s))
    }

    #[tokio::test]
    async fn a_long_line_is_skipped_with_its_length_and_the_next_one_read() {
        for chunk in [1, 3, 4, 64] {
            assert_eq!(
                lines(b"one\ntoolongline\nthree", chunk, 8).await,
                [text(b"one"), Line::TooLong(11), text(b"three")],
                "chunk {chunk}"
            );
        }
    }

    #[tokio::test]
    async fn the_cap_is_inclusive_and_a_long_last_line_is_reported() {
        assert_eq!(
            lines(b"12345678\n123456789", 4, 8).await,
            [text(b"12345678"), Line::TooLong(9)]
        );
        assert_eq!(lines(b"", 4, 8).await, []);
        assert_eq!(lines(b"\n\n", 1, 8).await, [text(b""), text(b"")]);
    }

    #[tokio::test]
    async fn bytes_that_are_not_utf8_pass_through() {
        assert_eq!(
            lines(b"{\xff\xfe}\nok\n", 2, 8).await,
            [text(b"{\xff\xfe}"), text(b"ok")]
        );
    }
}
