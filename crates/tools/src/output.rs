//! Bounded capture of a byte stream: the first `head` bytes, the last `tail` bytes, and the count
//! of everything. Memory stays bounded however much a command prints. When something had to be
//! dropped, the full stream can be spilled to a file (opened lazily, at the first dropped byte).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// The most a spill file may hold; past this the file is cut off (and the marker says so).
pub const SPILL_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// When cutting the kept head/tail back to a line boundary, how far we are willing to look.
const LINE_ALIGN_WINDOW: usize = 512;

/// Head + tail capture of one stream.
#[derive(Debug)]
pub struct HeadTail {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    dropped: bool,
    spill: Spill,
}

#[derive(Debug)]
enum Spill {
    Off,
    Pending(PathBuf),
    Open {
        path: PathBuf,
        file: BufWriter<File>,
        written: u64,
    },
    Failed {
        path: PathBuf,
        error: String,
    },
}

impl HeadTail {
    /// Keep at most `head` bytes from the start and `tail` bytes from the end.
    pub fn new(head: usize, tail: usize) -> Self {
        Self {
            head_cap: head,
            tail_cap: tail,
            head: Vec::with_capacity(head.min(64 * 1024)),
            tail: VecDeque::new(),
            total: 0,
            dropped: false,
            spill: Spill::Off,
        }
    }

    /// Save the full stream to `path` if anything has to be dropped.
    pub fn with_spill(mut self, path: PathBuf) -> Self {
        self.spill = Spill::Pending(path);
        self
    }

    /// Append bytes.
    pub fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.is_empty() {
            return;
        }
        if !self.dropped && self.tail.len() + data.len() > self.tail_cap {
            self.dropped = true;
            self.open_spill();
        }
        self.write_spill(data);
        if data.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
        } else {
            let overflow = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(data);
        }
    }

    /// Total bytes seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether some of the stream had to be dropped.
    pub fn truncated(&self) -> bool {
        self.dropped
    }

    /// Flush the spill file, if one was opened.
    pub fn flush(&mut self) {
        if let Spill::Open { file, path, .. } = &mut self.spill {
            if let Err(e) = file.flush() {
                let path = path.clone();
                self.spill = Spill::Failed {
                    path,
                    error: e.to_string(),
                };
            }
        }
    }

    /// The path of the spill file, if the full stream was saved.
    pub fn spill_path(&self) -> Option<&PathBuf> {
        match &self.spill {
            Spill::Open { path, .. } => Some(path),
            _ => None,
        }
    }

    fn open_spill(&mut self) {
        let Spill::Pending(path) = &self.spill else {
            return;
        };
        let path = path.clone();
        let opened = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| File::create(&path))
            .and_then(|f| {
                let mut w = BufWriter::with_capacity(64 * 1024, f);
                w.write_all(&self.head)?;
                let (a, b) = self.tail.as_slices();
                w.write_all(a)?;
                w.write_all(b)?;
                Ok(w)
            });
        self.spill = match opened {
            Ok(file) => Spill::Open {
                path,
                file,
                written: (self.head.len() + self.tail.len()) as u64,
            },
            Err(e) => Spill::Failed {
                path,
                error: e.to_string(),
            },
        };
    }

    fn write_spill(&mut self, data: &[u8]) {
        if let Spill::Open {
            file,
            written,
            path,
        } = &mut self.spill
        {
            let room = SPILL_MAX_BYTES.saturating_sub(*written) as usize;
            let n = room.min(data.len());
            if n == 0 {
                return;
            }
            if let Err(e) = file.write_all(&data[..n]) {
                let path = path.clone();
                self.spill = Spill::Failed {
                    path,
                    error: e.to_string(),
                };
                return;
            }
            *written += n as u64;
        }
    }

    /// The kept text: lossy UTF-8, `\r` progress lines collapsed, and a marker line where
    /// bytes were dropped.
    pub fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if !self.dropped {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return normalize_cr(&String::from_utf8_lossy(&all));
        }
        let head = cut_head(&self.head);
        let tail = cut_tail(&tail);
        let omitted = self.total - head.len() as u64 - tail.len() as u64;
        let mut out = normalize_cr(&String::from_utf8_lossy(head));
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&self.marker(omitted));
        out.push('\n');
        out.push_str(&normalize_cr(&String::from_utf8_lossy(tail)));
        out
    }

    fn marker(&self, omitted: u64) -> String {
        match &self.spill {
            Spill::Open { path, written, .. } if *written < self.total => format!(
                "[... {omitted} bytes omitted; the first {written} bytes of the output were saved to {} ...]",
                path.display()
            ),
            Spill::Open { path, .. } => format!(
                "[... {omitted} bytes omitted; full output saved to {} ...]",
                path.display()
            ),
            Spill::Failed { path, error } => format!(
                "[... {omitted} bytes omitted; the full output could not be saved to {}: {error} ...]",
                path.display()
            ),
            Spill::Off | Spill::Pending(_) => {
                format!("[... {omitted} bytes omitted; the full output was not kept ...]")
            }
        }
    }
}

/// The head, cut back to the end of its last complete line (if one ends near the end) and never
/// inside a UTF-8 sequence.
fn cut_head(head: &[u8]) -> &[u8] {
    let start = head.len().saturating_sub(LINE_ALIGN_WINDOW);
    if let Some(i) = head[start..].iter().rposition(|&b| b == b'\n') {
        return &head[..start + i + 1];
    }
    match std::str::from_utf8(head) {
        Err(e) if e.error_len().is_none() => &head[..e.valid_up_to()],
        _ => head,
    }
}

/// The tail, starting at the first full line (if one starts near the beginning) and never
/// inside a UTF-8 sequence.
fn cut_tail(tail: &[u8]) -> &[u8] {
    let window = &tail[..tail.len().min(LINE_ALIGN_WINDOW)];
    if let Some(i) = window.iter().position(|&b| b == b'\n') {
        if i + 1 < tail.len() {
            return &tail[i + 1..];
        }
    }
    let skip = tail
        .iter()
        .take(3)
        .take_while(|&&b| (b & 0xC0) == 0x80)
        .count();
    &tail[skip..]
}

/// Collapse carriage-return progress output: in each line keep only what follows the last `\r`
/// (a trailing `\r`, as in CRLF, is just dropped).
pub fn normalize_cr(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.trim_end_matches('\r');
        match line.rfind('\r') {
            Some(p) => out.push_str(&line[p + 1..]),
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_kept_whole() {
        let mut h = HeadTail::new(12, 10);
        h.push(b"hello ");
        h.push(b"world, all of it");
        assert!(!h.truncated());
        assert_eq!(h.render(), "hello world, all of it");
        assert_eq!(h.total(), 22);
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let mut h = HeadTail::new(4, 4);
        for _ in 0..1000 {
            h.push(b"abcdefgh");
        }
        assert!(h.truncated());
        assert_eq!(h.total(), 8000);
        assert_eq!(
            h.render(),
            "abcd\n[... 7992 bytes omitted; the full output was not kept ...]\nefgh"
        );
        assert!(h.tail.len() <= 4 && h.head.len() <= 4);
    }

    #[test]
    fn aligns_to_lines() {
        let mut h = HeadTail::new(8, 8);
        h.push(b"one\ntwo\nthree\nfour\nfive\nsix\n");
        let r = h.render();
        assert!(r.starts_with("one\ntwo\n[..."), "{r}");
        assert!(r.ends_with("]\nsix\n"), "{r}");
        // 28 bytes total, "one\ntwo\n" (8) and "six\n" (4) kept.
        assert!(r.contains("[... 16 bytes omitted"), "{r}");
    }

    #[test]
    fn spills_everything_when_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let mut h = HeadTail::new(3, 3).with_spill(path.clone());
        h.push(b"12");
        h.push(b"345");
        h.push(b"6789");
        h.push(b"0");
        h.flush();
        assert_eq!(std::fs::read(&path).unwrap(), b"1234567890");
        assert!(h
            .render()
            .contains(&format!("full output saved to {}", path.display())));
    }

    #[test]
    fn no_spill_file_without_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let mut h = HeadTail::new(3, 3).with_spill(path.clone());
        h.push(b"123456");
        h.flush();
        assert!(!path.exists());
    }

    #[test]
    fn carriage_returns() {
        assert_eq!(normalize_cr("10%\r50%\r100%\ndone\r\n"), "100%\ndone\n");
        assert_eq!(normalize_cr("a\r\nb\r\n"), "a\nb\n");
    }

    #[test]
    fn utf8_boundaries() {
        let mut h = HeadTail::new(4, 4);
        h.push("ééééééééé".as_bytes()); // 18 bytes
        let r = h.render();
        assert!(r.starts_with("éé\n[..."), "{r}");
        assert!(r.ends_with("]\néé"), "{r}");
    }
}
