//! What the file tools share to be trustworthy with real files: which files an agent has read
//! (and what they looked like then), opening only what cannot hang, decoding text that is not
//! UTF-8 honestly, and replacing a file's content without changing what the file *is* (its
//! owner, group, mode and hard links).

use std::collections::HashMap;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::fsutil::Cancelled;
use crate::CancelToken;

/// The most files one agent's ledger remembers; past it the oldest entries are forgotten (the
/// model is then asked to read those files again before writing them).
pub const LEDGER_MAX: usize = 8192;

/// Character devices that are safe to read or write: they never block and never end.
const SAFE_DEVICES: [&str; 1] = ["/dev/null"];

pub use crate::stamp::FileStamp;

/// Whether a file may be written on the strength of what the agent read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Read in this session, unchanged since.
    Fresh,
    /// Never read in this session (or forgotten).
    NeverRead,
    /// Read, but it changed on disk since.
    ChangedSince,
}

/// The files one agent has read in this session, and what each looked like when it did. Each
/// agent has its own: a subagent must read a file itself before it overwrites it.
#[derive(Debug, Default)]
pub struct ReadLedger {
    seen: Mutex<Seen>,
    lines: crate::lineindex::LineIndexes,
}

/// Each file's stamp and when it was recorded (a counter), plus the counter.
type Seen = (HashMap<PathBuf, (FileStamp, u64)>, u64);

impl ReadLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    fn key(path: &Path) -> PathBuf {
        fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
    }

    /// Remember that `path` was read (or written by the agent) as `stamp`.
    pub fn record(&self, path: &Path, stamp: FileStamp) {
        let key = Self::key(path);
        let mut g = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let (map, clock) = &mut *g;
        *clock += 1;
        let now = *clock;
        map.insert(key, (stamp, now));
        if map.len() > LEDGER_MAX {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
    }

    /// Where lines start in the files this agent read (for Reads at an offset).
    pub fn lines(&self) -> &crate::lineindex::LineIndexes {
        &self.lines
    }

    /// Whether `path`, which looks like `current` now, was read and is unchanged since.
    pub fn check(&self, path: &Path, current: FileStamp) -> Freshness {
        let key = Self::key(path);
        let g = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match g.0.get(&key) {
            None => Freshness::NeverRead,
            Some((s, _)) if *s == current => Freshness::Fresh,
            Some(_) => Freshness::ChangedSince,
        }
    }
}

/// Why a tool did not overwrite an existing file; the text is what the model is told.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotFresh {
    /// The agent has not read the file in this session.
    #[error("{} already exists and has not been read in this session, so {tool} did not change it. Read it first, so nothing in it is lost by accident, then call {tool} again.", path.display())]
    NeverRead {
        /// The file.
        path: PathBuf,
        /// The tool that refused.
        tool: &'static str,
    },
    /// The file changed on disk since the agent last read it.
    #[error("{} changed on disk since it was last read (a command or someone else changed it), so {tool} did not touch it: writing now would discard that change. Read it again and redo the change on its current content.", path.display())]
    ChangedSince {
        /// The file.
        path: PathBuf,
        /// The tool that refused.
        tool: &'static str,
    },
}

/// Before a tool overwrites the existing file `path` (which looks like `meta` now): the agent
/// must have read it in this session, and it must not have changed since.
pub(crate) fn check_fresh(
    path: &Path,
    meta: &Metadata,
    reads: &ReadLedger,
    tool: &'static str,
) -> Result<(), NotFresh> {
    let path = path.to_owned();
    match reads.check(&path, FileStamp::of(meta)) {
        Freshness::Fresh => Ok(()),
        Freshness::NeverRead => Err(NotFresh::NeverRead { path, tool }),
        Freshness::ChangedSince => Err(NotFresh::ChangedSince { path, tool }),
    }
}

/// Why a path was refused before anything was opened for real.
pub(crate) fn refuse_kind(path: &Path, meta: &Metadata) -> Option<String> {
    let ft = meta.file_type();
    if ft.is_file() || ft.is_dir() {
        return None;
    }
    if ft.is_char_device() && SAFE_DEVICES.iter().any(|d| Path::new(d) == path) {
        return None;
    }
    let what = if ft.is_fifo() {
        "a named pipe (FIFO): reading it would wait for a writer that may never come"
    } else if ft.is_socket() {
        "a socket, not a file"
    } else if ft.is_char_device() {
        "a character device (a terminal, a stream or an endless source), not a file"
    } else if ft.is_block_device() {
        "a block device (a disk), not a file"
    } else {
        "not a regular file"
    };
    Some(format!(
        "{} is {what}; the file tools only work on regular files.",
        path.display()
    ))
}

/// Open `path` for reading without ever blocking on it: opened non-blocking (a FIFO's open
/// would otherwise wait for a writer), checked on the open file itself (no race with a swap),
/// and refused unless it is a regular file or a safe device. `Err(Ok(message))` is a refusal,
/// `Err(Err(e))` an OS error.
pub(crate) fn open_for_read(path: &Path) -> Result<(File, Metadata), Result<String, io::Error>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(Err)?;
    let meta = file.metadata().map_err(Err)?;
    if let Some(why) = refuse_kind(path, &meta) {
        return Err(Ok(why));
    }
    // Back to blocking reads: on a regular file O_NONBLOCK changes nothing, but be plain.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    if let Ok(flags) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL) {
        let flags = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
        let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(flags));
    }
    Ok((file, meta))
}

/// How a text file is encoded, as far as keel can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 (or plain ASCII).
    Utf8,
    /// Not UTF-8: read as ISO-8859-1 (Latin-1), where every byte is one character, so the text
    /// round-trips exactly.
    Latin1,
}

impl Encoding {
    /// The note a tool adds when the file is not UTF-8 (`None` for UTF-8).
    pub fn note(self) -> Option<&'static str> {
        match self {
            Encoding::Utf8 => None,
            Encoding::Latin1 => Some(
                "this file is not valid UTF-8; it was read as Latin-1 (ISO-8859-1), one character per byte",
            ),
        }
    }
}

/// Decode file bytes: UTF-8 when valid, else Latin-1 (never lossy, never silent: the caller
/// shows [`Encoding::note`]).
pub(crate) fn decode(bytes: Vec<u8>) -> (String, Encoding) {
    match String::from_utf8(bytes) {
        Ok(s) => (s, Encoding::Utf8),
        Err(e) => (
            e.into_bytes().iter().map(|&b| char::from(b)).collect(),
            Encoding::Latin1,
        ),
    }
}

/// Encode text back into the file's encoding. Latin-1 cannot hold characters past U+00FF.
pub(crate) fn encode(text: &str, enc: Encoding) -> Result<Vec<u8>, char> {
    match enc {
        Encoding::Utf8 => Ok(text.as_bytes().to_vec()),
        Encoding::Latin1 => text
            .chars()
            .map(|c| u8::try_from(u32::from(c)).map_err(|_| c))
            .collect(),
    }
}

/// How a file's content was replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replaced {
    /// A new file was created.
    Created,
    /// A new file with the same owner, group and mode was renamed over the old one: a crash
    /// leaves the old content or the new, never a mix.
    Renamed,
    /// The file was rewritten in place (truncated and written, then fsynced), because it has
    /// other hard links or keel could not give a new file its owner: it keeps its identity,
    /// but a crash in the middle can leave it partly written.
    InPlace,
}

/// Replace the content of `path` (following a symlink to its target) with `data`, keeping the
/// file's identity: a file with one link gets a new file with its owner, group and mode
/// renamed over it; a file with other hard links, or whose owner keel cannot give a new file,
/// is rewritten in place. A cancel seen before the file is touched leaves it as it was.
pub(crate) fn replace_contents(
    path: &Path,
    data: &[u8],
    cancel: &CancelToken,
) -> Result<io::Result<Replaced>, Cancelled> {
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match fs::canonicalize(path) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        },
        _ => path.to_path_buf(),
    };
    let existing = match fs::metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Ok(Err(e)),
    };
    if cancel.is_cancelled() {
        return Err(Cancelled);
    }
    match existing {
        Some(m) if m.nlink() > 1 || !m.is_file() => Ok(in_place(&target, data)),
        Some(m) => match renamed(&target, data, Some(&m), cancel)? {
            Ok(r) => Ok(Ok(r)),
            // The new file could not take the old one's owner: keep the file, write in place.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(in_place(&target, data)),
            Err(e) => Ok(Err(e)),
        },
        None => renamed(&target, data, None, cancel),
    }
}

fn in_place(target: &Path, data: &[u8]) -> io::Result<Replaced> {
    let mut f = OpenOptions::new().write(true).open(target)?;
    f.write_all(data)?;
    f.set_len(data.len() as u64)?;
    f.sync_all()?;
    Ok(Replaced::InPlace)
}

fn renamed(
    target: &Path,
    data: &[u8],
    old: Option<&Metadata>,
    cancel: &CancelToken,
) -> Result<io::Result<Replaced>, Cancelled> {
    let dir = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = crate::fsutil::temp_name(target, dir);
    let result = (|| -> io::Result<Result<Replaced, Cancelled>> {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(data)?;
        if let Some(m) = old {
            f.set_permissions(fs::Permissions::from_mode(m.mode() & 0o7777))?;
            let (uid, gid) = (m.uid(), m.gid());
            let mine = f.metadata()?;
            if mine.uid() != uid || mine.gid() != gid {
                std::os::unix::fs::fchown(&f, Some(uid), Some(gid))
                    .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()))?;
                // chown clears set-id bits on some systems: set the mode again.
                f.set_permissions(fs::Permissions::from_mode(m.mode() & 0o7777))?;
            }
        }
        f.sync_all()?;
        drop(f);
        if cancel.is_cancelled() {
            return Ok(Err(Cancelled));
        }
        fs::rename(&tmp, target)?;
        // The rename itself must survive a crash too.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(Ok(if old.is_some() {
            Replaced::Renamed
        } else {
            Replaced::Created
        }))
    })();
    match result {
        Ok(Ok(r)) => Ok(Ok(r)),
        Ok(Err(Cancelled)) => {
            let _ = fs::remove_file(&tmp);
            Err(Cancelled)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Ok(Err(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_notices_changes_and_forgets_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        fs::write(&f, "one").unwrap();
        let l = ReadLedger::new();
        let stamp = FileStamp::of(&fs::metadata(&f).unwrap());
        assert_eq!(l.check(&f, stamp), Freshness::NeverRead);
        l.record(&f, stamp);
        // Another spelling of the same file is the same entry.
        let dotted = dir.path().join(".").join("a.txt");
        assert_eq!(l.check(&dotted, stamp), Freshness::Fresh);
        fs::write(&f, "one two").unwrap();
        assert_eq!(
            l.check(&f, FileStamp::of(&fs::metadata(&f).unwrap())),
            Freshness::ChangedSince
        );
    }

    #[test]
    fn fifos_sockets_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = open_for_read(&fifo).map(|_| ()).unwrap_err().unwrap();
        assert!(err.contains("named pipe"), "{err}");
        let err = open_for_read(Path::new("/dev/zero"))
            .map(|_| ())
            .unwrap_err()
            .unwrap();
        assert!(err.contains("character device"), "{err}");
        assert!(open_for_read(Path::new("/dev/null")).is_ok());
    }

    #[test]
    fn latin1_round_trips_and_says_so() {
        let (text, enc) = decode(b"caf\xe9\n".to_vec());
        assert_eq!((text.as_str(), enc), ("café\n", Encoding::Latin1));
        assert!(enc.note().unwrap().contains("Latin-1"));
        assert_eq!(encode(&text, enc).unwrap(), b"caf\xe9\n");
        assert_eq!(encode("snow ☃", enc), Err('☃'));
        assert_eq!(decode("ok ✓".as_bytes().to_vec()).1, Encoding::Utf8);
    }

    #[test]
    fn a_hard_linked_file_is_rewritten_in_place_and_keeps_its_links() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        fs::write(&a, "old").unwrap();
        fs::hard_link(&a, &b).unwrap();
        let how = replace_contents(&a, b"new", &CancelToken::new())
            .unwrap()
            .unwrap();
        assert_eq!(how, Replaced::InPlace);
        assert_eq!(
            fs::read_to_string(&b).unwrap(),
            "new",
            "the other link sees it"
        );
        let single = dir.path().join("c.txt");
        fs::write(&single, "old").unwrap();
        fs::set_permissions(&single, fs::Permissions::from_mode(0o640)).unwrap();
        let how = replace_contents(&single, b"new", &CancelToken::new())
            .unwrap()
            .unwrap();
        assert_eq!(how, Replaced::Renamed);
        assert_eq!(fs::metadata(&single).unwrap().mode() & 0o777, 0o640);
    }
}
