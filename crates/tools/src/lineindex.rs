//! Where lines start in the files an agent reads, remembered per version of each file, so that a
//! Read at an offset seeks close to its first line instead of scanning the file from the top.
//!
//! A file version is its [`FileStamp`] (device, inode, size, modification time): a file that
//! changed in any of these is indexed anew, never served from an older index. Marks are kept at
//! line starts roughly every [`MARK_BYTES`], so a second Read anywhere in the file reads at most
//! that much before its first line, and an index costs about 16 bytes per 64 KiB of file (256 KB
//! for 1 GB). At most [`MAX_INDEXED_FILES`] files are remembered per agent.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use crate::stamp::FileStamp;
use crate::CancelToken;

/// Bytes between two remembered line starts (at least).
pub const MARK_BYTES: u64 = 64 * 1024;
/// Files whose index one agent keeps; past it the least recently used is forgotten.
pub const MAX_INDEXED_FILES: usize = 16;
/// Bytes read from the file per system call while scanning.
const CHUNK: usize = 1024 * 1024;

/// A line start: the line's number (from 1) and its byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub line: u64,
    pub byte: u64,
}

impl Mark {
    /// The start of the file.
    pub const START: Mark = Mark { line: 1, byte: 0 };
}

#[derive(Debug)]
struct Index {
    stamp: FileStamp,
    /// Line starts in increasing order, `Mark::START` first.
    marks: Vec<Mark>,
    /// The number of lines, once a scan reached the end.
    total: Option<u64>,
    used: u64,
}

/// The line indexes of the files one agent read.
#[derive(Debug, Default)]
pub struct LineIndexes {
    inner: Mutex<(Vec<Index>, u64)>,
}

impl LineIndexes {
    /// The last known line start at or before `line` in this version of the file.
    pub(crate) fn nearest(&self, stamp: FileStamp, line: u64) -> Mark {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (list, clock) = &mut *g;
        *clock += 1;
        let now = *clock;
        let Some(ix) = list.iter_mut().find(|i| i.stamp == stamp) else {
            return Mark::START;
        };
        ix.used = now;
        let at = ix.marks.partition_point(|m| m.line <= line);
        ix.marks
            .get(at.wrapping_sub(1))
            .copied()
            .unwrap_or(Mark::START)
    }

    /// The number of lines of this version of the file, if a scan reached its end.
    pub(crate) fn total(&self, stamp: FileStamp) -> Option<u64> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0.iter().find(|i| i.stamp == stamp).and_then(|i| i.total)
    }

    /// Remember what a scan of this version of the file found.
    pub(crate) fn record(&self, stamp: FileStamp, found: &[Mark], total: Option<u64>) {
        if found.is_empty() && total.is_none() {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (list, clock) = &mut *g;
        *clock += 1;
        let now = *clock;
        let ix = match list.iter().position(|i| i.stamp == stamp) {
            Some(i) => &mut list[i],
            None => {
                if list.len() >= MAX_INDEXED_FILES {
                    if let Some(old) = (0..list.len()).min_by_key(|&i| list[i].used) {
                        list.swap_remove(old);
                    }
                }
                list.push(Index {
                    stamp,
                    marks: vec![Mark::START],
                    total: None,
                    used: now,
                });
                let last = list.len() - 1;
                &mut list[last]
            }
        };
        ix.used = now;
        for m in found {
            let at = ix.marks.partition_point(|x| x.line < m.line);
            if ix.marks.get(at).is_some_and(|x| x.line == m.line) {
                continue;
            }
            // Keep marks at least MARK_BYTES apart: scans that overlap add nothing twice.
            let near_prev = at > 0 && m.byte.saturating_sub(ix.marks[at - 1].byte) < MARK_BYTES;
            let near_next = ix
                .marks
                .get(at)
                .is_some_and(|x| x.byte.saturating_sub(m.byte) < MARK_BYTES);
            if !(near_prev || near_next) {
                ix.marks.insert(at, *m);
            }
        }
        if total.is_some() {
            ix.total = total;
        }
    }
}

/// Where a scan for a line ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The line starts at this byte.
    At(u64),
    /// The file ended first; it has this many lines.
    End(u64),
}

/// Scan `file` from the line start `from` to the start of line `target` (≥ `from.line`),
/// counting newlines a block at a time and noting a line start every [`MARK_BYTES`] in
/// `marks`. Reads with `pread`, so the file's own position is left alone.
pub(crate) fn scan_to(
    file: &File,
    from: Mark,
    target: u64,
    cancel: &CancelToken,
    marks: &mut Vec<Mark>,
) -> io::Result<Found> {
    if target <= from.line {
        return Ok(Found::At(from.byte));
    }
    let mut buf = vec![0u8; CHUNK];
    let mut line = from.line; // the line that starts at `start`
    let mut start = from.byte; // where the current line starts
    let mut pos = from.byte; // the next byte to read
    let mut last_mark = from.byte;
    loop {
        if cancel.is_cancelled() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
        }
        let n = match file.read_at(&mut buf, pos) {
            Ok(0) => {
                // A last line without a newline still counts.
                let total = if start < pos { line } else { line - 1 };
                return Ok(Found::End(total));
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        for block in chunk.chunks(MARK_BYTES as usize) {
            let block_at = pos + (block.as_ptr() as usize - chunk.as_ptr() as usize) as u64;
            let newlines = count_newlines(block) as u64;
            if line + newlines < target {
                // The target is further on: skip the block, noting where its last line starts.
                if let Some(i) = memchr::memrchr(b'\n', block) {
                    line += newlines;
                    start = block_at + i as u64 + 1;
                    if start - last_mark >= MARK_BYTES {
                        marks.push(Mark { line, byte: start });
                        last_mark = start;
                    }
                }
                continue;
            }
            // The target starts in this block.
            for i in memchr::memchr_iter(b'\n', block) {
                line += 1;
                start = block_at + i as u64 + 1;
                if line == target {
                    return Ok(Found::At(start));
                }
            }
        }
        pos += n as u64;
    }
}

/// Newlines in `bytes` (memchr counts with vector instructions).
fn count_newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(text: &str) -> (tempfile::NamedTempFile, File) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        let file = File::open(f.path()).unwrap();
        (f, file)
    }

    fn expected_start(text: &str, line: u64) -> Option<u64> {
        if line == 1 {
            return Some(0);
        }
        text.match_indices('\n')
            .nth(line as usize - 2)
            .map(|(i, _)| i as u64 + 1)
    }

    #[test]
    fn finds_every_line_start_and_the_end() {
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let (_t, f) = file_with(&text);
        let cancel = CancelToken::new();
        for target in [1u64, 2, 3, 999, 4999, 5000] {
            let mut marks = Vec::new();
            let got = scan_to(&f, Mark::START, target, &cancel, &mut marks).unwrap();
            assert_eq!(
                got,
                Found::At(expected_start(&text, target).unwrap()),
                "{target}"
            );
        }
        let mut marks = Vec::new();
        // After the last newline a line would start at the end (the reader then finds it
        // empty); one further there is no line at all.
        assert_eq!(
            scan_to(&f, Mark::START, 5001, &cancel, &mut marks).unwrap(),
            Found::At(text.len() as u64)
        );
        assert_eq!(
            scan_to(&f, Mark::START, 5002, &cancel, &mut marks).unwrap(),
            Found::End(5000)
        );
        // A last line without its newline counts.
        let (_t, f) = file_with("a\nb");
        assert_eq!(
            scan_to(&f, Mark::START, 9, &cancel, &mut Vec::new()).unwrap(),
            Found::End(2)
        );
        assert_eq!(
            scan_to(&f, Mark::START, 2, &cancel, &mut Vec::new()).unwrap(),
            Found::At(2)
        );
    }

    #[test]
    fn marks_are_real_line_starts_and_a_scan_from_a_mark_agrees() {
        // Lines of varied length, over several blocks and chunks.
        let text: String = (0..200_000)
            .map(|i| format!("{}\n", "x".repeat(i % 37)))
            .collect();
        let (_t, f) = file_with(&text);
        let cancel = CancelToken::new();
        let mut marks = Vec::new();
        let end = scan_to(&f, Mark::START, u64::MAX, &cancel, &mut marks).unwrap();
        assert_eq!(end, Found::End(200_000));
        assert!(marks.len() > 10, "{}", marks.len());
        for m in &marks {
            assert_eq!(Some(m.byte), expected_start(&text, m.line), "{m:?}");
        }
        let idx = LineIndexes::default();
        let stamp = FileStamp::of(&f.metadata().unwrap());
        idx.record(stamp, &marks, Some(200_000));
        for target in [1u64, 77, 65_000, 123_457, 199_999] {
            let from = idx.nearest(stamp, target);
            assert!(from.line <= target);
            let got = scan_to(&f, from, target, &cancel, &mut Vec::new()).unwrap();
            assert_eq!(got, Found::At(expected_start(&text, target).unwrap()));
        }
        assert_eq!(idx.total(stamp), Some(200_000));
    }

    #[test]
    fn an_index_belongs_to_one_version_of_a_file() {
        let text: String = (0..100_000).map(|i| format!("{i}\n")).collect();
        let (t, f) = file_with(&text);
        let idx = LineIndexes::default();
        let stamp = FileStamp::of(&f.metadata().unwrap());
        let mut marks = Vec::new();
        scan_to(&f, Mark::START, u64::MAX, &CancelToken::new(), &mut marks).unwrap();
        idx.record(stamp, &marks, Some(100_000));
        assert!(idx.nearest(stamp, 90_000).line > 1);
        // Another version (here: another size) finds nothing of the old index.
        std::fs::write(t.path(), "short\n").unwrap();
        let other = FileStamp::of(&std::fs::metadata(t.path()).unwrap());
        assert_ne!(stamp, other);
        assert_eq!(idx.nearest(other, 90_000), Mark::START);
        assert_eq!(idx.total(other), None);
    }

    #[test]
    fn the_cache_is_bounded() {
        let idx = LineIndexes::default();
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(MAX_INDEXED_FILES + 5) {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, "a\n".repeat(i + 1)).unwrap();
            let stamp = FileStamp::of(&std::fs::metadata(&p).unwrap());
            idx.record(stamp, &[Mark { line: 2, byte: 2 }], Some(i as u64 + 1));
        }
        assert_eq!(idx.inner.lock().unwrap().0.len(), MAX_INDEXED_FILES);
    }
}
