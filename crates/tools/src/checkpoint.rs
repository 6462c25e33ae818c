//! File checkpoints: what each file looked like before keel's file tools first wrote it after
//! a prompt, so the files can be put back as they were at that prompt (`rewind_files`,
//! `/rewind`).
//!
//! A front end marks each prompt ([`Checkpoints::mark`]) with the prompt's uuid; Write, Edit
//! and NotebookEdit call [`Checkpoints::before_write`] before they touch a file and
//! [`Checkpoints::after_write`] with what they wrote. Only the first write of a file after
//! each mark is snapshotted (content and mode, or "did not exist"): that is all a rewind to
//! a mark needs. A Bash command's own writes are not seen. Snapshots live in a directory of
//! the session, with the index beside them ([`index`]): a resumed session opens the store
//! again ([`Checkpoints::open`]) and can rewind to a prompt of its earlier run.
//!
//! A rewind is all or nothing: every file is checked first (still exactly what keel last
//! wrote, snapshot kept, directory writable), every restored content is staged beside its file,
//! and only then are the files replaced; a failure while replacing puts back the files already
//! replaced.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod dirfd;
pub mod index;
mod restore;

pub use index::IndexError;
pub use restore::{FileProblem, RewindError, RewindReport};

/// The largest file whose content is snapshotted; a larger one is recorded as not kept (a
/// rewind that needs it says so).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// The most snapshot bytes one session keeps; past it, further snapshots are not kept.
pub const MAX_SESSION_BYTES: u64 = 512 * 1024 * 1024;
/// The most prompts remembered; the oldest are forgotten past it.
pub const MAX_MARKS: usize = 10_000;
/// The most files tracked; past it, further files are recorded as not kept.
pub const MAX_FILES: usize = 100_000;

/// What a file was before keel's first write of it after a mark.
#[derive(Clone, Debug)]
pub(crate) enum Before {
    /// It did not exist: a rewind deletes it.
    Missing,
    /// Its content (in the blob file) and its permission bits.
    Kept {
        blob: PathBuf,
        mode: u32,
        len: u64,
        hash: u64,
    },
    /// It could not be kept (too large, the session's budget spent, unreadable): why.
    NotKept(String),
}

/// What keel's last write left in a file: enough to notice a change made outside keel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    pub len: u64,
    pub hash: u64,
}

/// One file's record for the writes after one mark.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// The mark (its sequence number) after which keel first wrote the file.
    pub mark: u64,
    pub before: Before,
    /// What keel's last write left; `None` while no write after this mark has succeeded.
    pub after: Option<Written>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    /// Prompts in order: uuid, sequence number, a label for people.
    pub marks: Vec<(String, u64, String)>,
    /// The sequence number of the latest mark.
    pub seq: u64,
    /// Per file, its entries in mark order.
    pub files: HashMap<PathBuf, Vec<Entry>>,
    pub used_bytes: u64,
    pub blobs: u64,
}

/// The checkpoints of one session.
#[derive(Debug)]
pub struct Checkpoints {
    dir: PathBuf,
    pub(crate) state: Mutex<State>,
}

/// A content hash for noticing changes (not for security: the length is compared too, and a
/// change made to fool it would have to be made on purpose by someone who can write the file
/// anyway). FNV-1a, so it is the same in every build of keel: the index keeps it on disk.
pub(crate) fn hash_of(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Checkpoints {
    /// A store keeping its snapshots in `dir` (created on the first snapshot).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            state: Mutex::new(State::default()),
        }
    }

    /// The store in `dir` as a session left it: its saved index read back and checked (files
    /// only inside `roots`, the real paths of the directories the session may write in). An
    /// index that is refused is reported, and the store starts empty (its snapshots are kept
    /// apart from the new ones).
    pub fn open(dir: impl Into<PathBuf>, roots: &[PathBuf]) -> (Self, Option<IndexError>) {
        let dir = dir.into();
        match index::load(&dir, roots) {
            Ok(state) => (
                Self {
                    dir,
                    state: Mutex::new(state.unwrap_or_default()),
                },
                None,
            ),
            Err(e) => (Self::new(dir), Some(e)),
        }
    }

    /// Save the index (best effort: a store that cannot save still serves this run).
    fn save(&self, s: &State) {
        if let Err(e) = index::save(&self.dir, s) {
            tracing::warn!(
                "the checkpoint index in {} was not saved: {e}",
                self.dir.display()
            );
        }
    }

    /// Where the snapshots are kept.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A prompt starts: later writes belong to it. `label` is shown by `/rewind`.
    pub fn mark(&self, uuid: &str, label: &str) {
        let mut s = self.lock();
        s.seq += 1;
        let seq = s.seq;
        let label: String = label.chars().take(200).collect();
        s.marks.push((uuid.to_owned(), seq, label));
        if s.marks.len() > MAX_MARKS {
            s.marks.remove(0);
        }
        self.save(&s);
    }

    /// The prompts that can be rewound to, oldest first: uuid and label.
    pub fn prompts(&self) -> Vec<(String, String)> {
        self.lock()
            .marks
            .iter()
            .map(|(u, _, l)| (u.clone(), l.clone()))
            .collect()
    }

    /// Whether `uuid` names a remembered prompt.
    pub fn knows(&self, uuid: &str) -> bool {
        self.lock().marks.iter().any(|(u, _, _)| u == uuid)
    }

    /// Before a tool writes `path`: snapshot it, unless it was already snapshotted since the
    /// latest mark. Never fails the write: what cannot be kept is recorded as such.
    pub fn before_write(&self, path: &Path) {
        let key = key_of(path);
        let mut s = self.lock();
        let seq = s.seq;
        if s.files
            .get(&key)
            .and_then(|v| v.last())
            .is_some_and(|e| e.mark == seq)
        {
            return;
        }
        let before = if s.files.len() >= MAX_FILES && !s.files.contains_key(&key) {
            Before::NotKept(format!("more than {MAX_FILES} files were tracked"))
        } else {
            self.snapshot(&key, &mut s)
        };
        s.files.entry(key).or_default().push(Entry {
            mark: seq,
            before,
            after: None,
        });
        self.save(&s);
    }

    /// After a tool wrote `data` to `path` successfully.
    pub fn after_write(&self, path: &Path, data: &[u8]) {
        let key = key_of(path);
        let mut s = self.lock();
        if let Some(e) = s.files.get_mut(&key).and_then(|v| v.last_mut()) {
            e.after = Some(Written {
                len: data.len() as u64,
                hash: hash_of(data),
            });
            self.save(&s);
        }
    }

    fn snapshot(&self, path: &Path, s: &mut State) -> Before {
        let meta = match fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Before::Missing,
            Err(e) => return Before::NotKept(format!("it could not be read: {e}")),
        };
        if !meta.is_file() {
            return Before::NotKept("it is not a regular file".into());
        }
        if meta.len() > MAX_FILE_BYTES {
            return Before::NotKept(format!(
                "it was larger than the {} MiB a snapshot keeps",
                MAX_FILE_BYTES / (1024 * 1024)
            ));
        }
        if s.used_bytes + meta.len() > MAX_SESSION_BYTES {
            return Before::NotKept(format!(
                "the session's {} MiB of snapshots were used up",
                MAX_SESSION_BYTES / (1024 * 1024)
            ));
        }
        let mut data = Vec::new();
        let read =
            fs::File::open(path).and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut data));
        if let Err(e) = read {
            return Before::NotKept(format!("it could not be read: {e}"));
        }
        if data.len() as u64 > MAX_FILE_BYTES {
            return Before::NotKept("it grew past the snapshot limit while it was read".into());
        }
        let blob = match write_blob(&self.dir, s, &data) {
            Ok(b) => b,
            Err(e) => {
                return Before::NotKept(format!(
                    "its snapshot could not be written to {}: {e}",
                    self.dir.display()
                ))
            }
        };
        s.used_bytes += data.len() as u64;
        Before::Kept {
            blob,
            mode: meta.permissions().mode() & 0o7777,
            len: data.len() as u64,
            hash: hash_of(&data),
        }
    }
}

/// Write a snapshot under the next free number of the store (a number a refused index's
/// snapshots still hold is passed over), and return its path.
fn write_blob(dir: &Path, s: &mut State, data: &[u8]) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    for _ in 0..10_000 {
        s.blobs += 1;
        let blob = dir.join(format!("{:08}", s.blobs));
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode_0600()
            .open(&blob);
        match f {
            Ok(mut f) => return f.write_all(data).map(|()| blob),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free snapshot name"))
}

/// `OpenOptions` with mode 0600 (snapshots may hold secrets the user keeps in the repository).
trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::mode(self, 0o600)
    }
}

/// The key of a file: its real path, resolved as far as it exists (a file a Write creates,
/// in directories it creates, is keyed under its nearest existing directory's real path).
pub(crate) fn key_of(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// How long a session's checkpoints are kept after it last wrote to them.
pub const RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 60 * 60);

/// Remove the checkpoint stores in `parent` (one directory per session) that nothing has
/// written to for `older_than`, except `keep` (the store about to be used). Only what is
/// plainly keel's store is removed: a real directory (never what a link points at) named as a
/// session id and holding keel's index, so a `parent` that is not keel's (a `KEEL_HOME` set to
/// some other folder) loses nothing. A store that cannot be removed is left for the next time.
/// Returns how many were removed.
pub fn prune_stale(parent: &Path, keep: &Path, older_than: std::time::Duration) -> usize {
    let Ok(entries) = fs::read_dir(parent) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for e in entries.flatten() {
        let path = e.path();
        if path == keep {
            continue;
        }
        // `DirEntry::metadata` does not follow a link: a link is never a store.
        let Ok(meta) = e.metadata() else { continue };
        let stale = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age > older_than);
        let keels = is_session_id(&e.file_name())
            && fs::symlink_metadata(path.join(index::INDEX_FILE)).is_ok_and(|m| m.is_file());
        if meta.is_dir() && stale && keels && fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether `name` is a session id as keel makes them (a hyphenated UUID).
fn is_session_id(name: &std::ffi::OsStr) -> bool {
    let Some(n) = name.to_str() else { return false };
    n.len() == 36
        && n.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests;
