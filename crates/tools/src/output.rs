//! Bounded capture of a byte stream: the first `head` bytes, the last `tail` bytes, and the count
//! of everything. Memory stays bounded however much a command prints. When something had to be
//! dropped, the full stream can be saved to a spill file: [`HeadTail`] says which bytes the file
//! needs (none until the first dropped byte), and [`SpillFile`] writes them on the blocking pool,
//! so a slow disk never stalls an async worker.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The most a spill file may hold; past this the file is cut off (and the marker says so).
pub const SPILL_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// When cutting the kept head/tail back to a line boundary, how far we are willing to look.
const LINE_ALIGN_WINDOW: usize = 512;

/// Pieces queued for a spill file before the stream's reader waits for the disk.
const SPILL_QUEUE: usize = 64;

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
    /// Wanted at this path once something has to be dropped.
    Wanted(PathBuf),
    /// Bytes are being handed out for the file; `sent` counts them.
    Started {
        path: PathBuf,
        sent: u64,
    },
    /// The file is closed.
    Done(SpillReport),
}

/// How saving the full stream to a spill file went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillReport {
    /// The spill file.
    pub path: PathBuf,
    /// Bytes that reached the file.
    pub written: u64,
    /// Why the file is incomplete, if it is for another reason than [`SPILL_MAX_BYTES`].
    pub error: Option<String>,
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
        self.spill = Spill::Wanted(path);
        self
    }

    /// Append bytes. Returns the bytes to append to the spill file, if one is wanted: none while
    /// the whole stream is still kept, everything so far at the first dropped byte, then each
    /// new piece, up to [`SPILL_MAX_BYTES`] in all.
    pub fn push(&mut self, mut data: &[u8]) -> Option<Vec<u8>> {
        self.total += data.len() as u64;
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.is_empty() {
            return None;
        }
        let mut for_spill = None;
        if !self.dropped && self.tail.len() + data.len() > self.tail_cap {
            self.dropped = true;
            if let Spill::Wanted(path) = &self.spill {
                let mut all = self.head.clone();
                all.extend(&self.tail);
                self.spill = Spill::Started {
                    path: path.clone(),
                    sent: 0,
                };
                for_spill = Some(all);
            }
        }
        if let Spill::Started { sent, .. } = &mut self.spill {
            let mut bytes = for_spill.unwrap_or_default();
            bytes.extend_from_slice(data);
            let room = SPILL_MAX_BYTES.saturating_sub(*sent);
            bytes.truncate(usize::try_from(room).unwrap_or(usize::MAX));
            *sent += bytes.len() as u64;
            for_spill = (!bytes.is_empty()).then_some(bytes);
        }
        if data.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
        } else {
            let overflow = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(data);
        }
        for_spill
    }

    /// Total bytes seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether some of the stream had to be dropped.
    pub fn truncated(&self) -> bool {
        self.dropped
    }

    /// The path of the spill file, once bytes were handed out for it.
    pub fn spill_path(&self) -> Option<&Path> {
        match &self.spill {
            Spill::Started { path, .. } => Some(path),
            Spill::Done(report) => Some(&report.path),
            Spill::Off | Spill::Wanted(_) => None,
        }
    }

    /// Record how writing the spill file ended, for the marker.
    pub fn spill_done(&mut self, report: SpillReport) {
        self.spill = Spill::Done(report);
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
            Spill::Done(SpillReport {
                path,
                error: Some(error),
                ..
            }) => format!(
                "[... {omitted} bytes omitted; the full output could not be saved to {}: {error} ...]",
                path.display()
            ),
            Spill::Done(SpillReport { path, written, .. }) if *written < self.total => format!(
                "[... {omitted} bytes omitted; the first {written} bytes of the output were saved to {} ...]",
                path.display()
            ),
            Spill::Done(SpillReport { path, .. }) => format!(
                "[... {omitted} bytes omitted; full output saved to {} ...]",
                path.display()
            ),
            // Rendered before the writer reported: nothing is promised about the file.
            Spill::Started { path, .. } => format!(
                "[... {omitted} bytes omitted; the full output is being saved to {} ...]",
                path.display()
            ),
            Spill::Off | Spill::Wanted(_) => {
                format!("[... {omitted} bytes omitted; the full output was not kept ...]")
            }
        }
    }
}

/// `text` bounded to about `max` bytes: its head and tail (cut at line ends) around a marker
/// that says how much was left out and where the whole was saved (`spill`, written here: call
/// this off the async workers). `None` when `text` already fits.
pub fn bound_text(text: &str, max: usize, spill: Option<&Path>) -> Option<String> {
    if text.len() <= max {
        return None;
    }
    let mut ht = HeadTail::new(max / 2, max / 2);
    if let Some(p) = spill {
        ht = ht.with_spill(p.to_path_buf());
    }
    let bytes = ht.push(text.as_bytes());
    if let (Some(path), Some(bytes)) = (spill, bytes) {
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(path, &bytes));
        ht.spill_done(SpillReport {
            path: path.to_path_buf(),
            written: if written.is_ok() {
                bytes.len() as u64
            } else {
                0
            },
            error: written.err().map(|e| e.to_string()),
        });
    }
    Some(ht.render())
}

/// A spill file written on the blocking pool. Bytes reach it through a bounded queue, so a disk
/// slower than the command slows the reading of the command's output instead of growing memory.
#[derive(Debug)]
pub struct SpillFile {
    path: PathBuf,
    tx: mpsc::Sender<Vec<u8>>,
    job: JoinHandle<SpillReport>,
}

impl SpillFile {
    /// Start writing `path` (creating its directory). Must be called within a tokio runtime.
    pub fn create(path: PathBuf) -> Self {
        let (tx, rx) = mpsc::channel(SPILL_QUEUE);
        let target = path.clone();
        let job = tokio::task::spawn_blocking(move || write_spill(target, rx));
        Self { path, tx, job }
    }

    /// A handle that queues bytes for the file (it waits while the queue is full).
    pub fn sender(&self) -> mpsc::Sender<Vec<u8>> {
        self.tx.clone()
    }

    /// Close the queue and wait, at most `deadline`, for the file to be written and flushed.
    /// Every handle from [`sender`](Self::sender) must be dropped for the file to be closed.
    pub async fn finish(self, deadline: Duration) -> SpillReport {
        drop(self.tx);
        match tokio::time::timeout(deadline, self.job).await {
            Ok(Ok(report)) => report,
            Ok(Err(e)) => SpillReport {
                path: self.path,
                written: 0,
                error: Some(format!("the writer failed: {e}")),
            },
            Err(_) => SpillReport {
                path: self.path,
                written: 0,
                error: Some(format!(
                    "writing it took longer than {} ms",
                    deadline.as_millis()
                )),
            },
        }
    }
}

/// The blocking side of [`SpillFile`]: write what arrives until every sender is gone.
fn write_spill(path: PathBuf, mut rx: mpsc::Receiver<Vec<u8>>) -> SpillReport {
    let mut report = SpillReport {
        path,
        written: 0,
        error: None,
    };
    let opened = report
        .path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| File::create(&report.path));
    let mut file = match opened {
        Ok(f) => BufWriter::with_capacity(64 * 1024, f),
        Err(e) => {
            report.error = Some(e.to_string());
            return report;
        }
    };
    while let Some(bytes) = rx.blocking_recv() {
        if let Err(e) = file.write_all(&bytes) {
            report.error = Some(e.to_string());
            return report;
        }
        report.written += bytes.len() as u64;
        // Nothing more waiting: write out what is buffered, so a reader following the file
        // (a command's live log) sees the output as it comes, not at the end.
        if rx.is_empty() {
            if let Err(e) = file.flush() {
                report.error = Some(e.to_string());
                return report;
            }
        }
    }
    if let Err(e) = file.flush() {
        report.error = Some(e.to_string());
    }
    report
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

    /// Push `pieces` the way a stream reader does, spilling what `push` hands out.
    async fn capture(mut h: HeadTail, pieces: &[&[u8]]) -> HeadTail {
        let mut file = None;
        for p in pieces {
            if let Some(bytes) = h.push(p) {
                let path = h.spill_path().unwrap().to_path_buf();
                let f = file.get_or_insert_with(|| SpillFile::create(path));
                let _ = f.sender().send(bytes).await;
            }
        }
        if let Some(f) = file {
            h.spill_done(f.finish(Duration::from_secs(20)).await);
        }
        h
    }

    #[tokio::test]
    async fn spills_everything_when_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deeper/out.txt");
        let h = HeadTail::new(3, 3).with_spill(path.clone());
        let h = capture(h, &[b"12", b"345", b"6789", b"0"]).await;
        assert_eq!(std::fs::read(&path).unwrap(), b"1234567890");
        assert_eq!(
            h.render(),
            format!(
                "123\n[... 4 bytes omitted; full output saved to {} ...]\n890",
                path.display()
            )
        );
    }

    #[test]
    fn spill_bytes_handed_out_in_order() {
        let mut h = HeadTail::new(3, 3).with_spill(PathBuf::from("/x"));
        assert_eq!(h.push(b"12"), None);
        assert_eq!(h.push(b"345"), None);
        assert_eq!(h.push(b"6789").as_deref(), Some(&b"123456789"[..]));
        assert_eq!(h.push(b"0").as_deref(), Some(&b"0"[..]));
        let mut h = HeadTail::new(3, 3);
        assert_eq!(h.push(b"1234567890"), None);
        assert!(h.truncated());
    }

    #[tokio::test]
    async fn no_spill_file_without_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let h = HeadTail::new(3, 3).with_spill(path.clone());
        let h = capture(h, &[b"123456"]).await;
        assert!(!path.exists());
        assert_eq!(h.spill_path(), None);
    }

    #[tokio::test]
    async fn spill_failure_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let path = blocker.join("out.txt");
        let h = HeadTail::new(2, 2).with_spill(path.clone());
        let h = capture(h, &[b"123456"]).await;
        let r = h.render();
        assert!(
            r.contains(&format!(
                "the full output could not be saved to {}:",
                path.display()
            )),
            "{r}"
        );
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
