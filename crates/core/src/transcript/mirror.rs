//! The transcript mirror (`--session-mirror`): every batch of lines appended to a transcript
//! file is handed, after the local write, to a bounded sink, so a front end can show a host
//! exactly what was written (`transcript_mirror` frames, which the SDKs' session stores keep).
//!
//! The tap knows nothing of the record format: it carries the file's path and the lines as
//! written (each a JSON value). It never blocks the writer: a sink that is full, or whose
//! reader is gone, counts what it could not take, and the front end reports the loss.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::value::RawValue;
use tokio::sync::mpsc;

/// How many batches may wait for the front end. A batch is one append (usually one line);
/// the front end drains the sink before every frame it prints, so this only fills when
/// stdout itself stalls.
pub const MIRROR_CAPACITY: usize = 8192;

/// The lines one append wrote to one file.
#[derive(Debug)]
pub struct MirrorBatch {
    /// The transcript file, as the host should know it (a subagent file that is rewritten
    /// through a temporary name is named by its final path).
    pub file_path: PathBuf,
    /// The lines, each one JSON value exactly as written.
    pub entries: Vec<Box<RawValue>>,
}

/// Where appended lines go (cheap to clone; every writer of a session shares one).
#[derive(Clone)]
pub struct MirrorSink {
    tx: mpsc::Sender<MirrorBatch>,
    lost: Arc<AtomicU64>,
}

impl std::fmt::Debug for MirrorSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorSink")
            .field("lost", &self.lost.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl MirrorSink {
    /// A sink holding up to `capacity` batches, and its receiving end.
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<MirrorBatch>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let sink = Self {
            tx,
            lost: Arc::new(AtomicU64::new(0)),
        };
        (sink, rx)
    }

    /// Hand over `bytes` (whole lines, each ending in a newline) just written to `path`.
    /// A line that is not one JSON value (never the case for keel's own writers) is left out
    /// and counted as lost, like a batch the sink has no room for.
    pub fn offer(&self, path: &Path, bytes: &[u8]) {
        let mut entries = Vec::new();
        let mut bad = 0u64;
        for line in bytes.split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match std::str::from_utf8(line)
                .ok()
                .and_then(|s| RawValue::from_string(s.trim_end().to_owned()).ok())
            {
                Some(v) => entries.push(v),
                None => bad += 1,
            }
        }
        if bad > 0 {
            self.lost.fetch_add(bad, Ordering::Relaxed);
        }
        if entries.is_empty() {
            return;
        }
        let n = entries.len() as u64;
        let batch = MirrorBatch {
            file_path: path.to_path_buf(),
            entries,
        };
        if self.tx.try_send(batch).is_err() {
            self.lost.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Entries that could not be handed over since the last call (and resets the count).
    pub fn take_lost(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_entries_and_overflow_is_counted() {
        let (sink, mut rx) = MirrorSink::channel(1);
        sink.offer(Path::new("/t/a.jsonl"), b"{\"a\":1}\n{\"b\":[2]}\n");
        // Full: counted, never blocking.
        sink.offer(Path::new("/t/a.jsonl"), b"{\"c\":3}\n");
        sink.offer(Path::new("/t/a.jsonl"), b"{\"d\":4}\nnot json\n");
        assert_eq!(sink.take_lost(), 3);
        assert_eq!(sink.take_lost(), 0);
        let b = rx.try_recv().unwrap();
        assert_eq!(b.file_path, Path::new("/t/a.jsonl"));
        let got: Vec<&str> = b.entries.iter().map(|e| e.get()).collect();
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":[2]}"]);
        assert!(rx.try_recv().is_err(), "what was lost is not queued");
    }
}
