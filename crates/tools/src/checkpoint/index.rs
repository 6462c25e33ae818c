//! The checkpoint index on disk, so a resumed session can rewind to a prompt of its earlier
//! run: `index.json` beside the snapshots, 0600 in a 0700 directory, replaced atomically
//! (written to a new file, then renamed over the old one) after every change.
//!
//! The index is read back as untrusted input: bounded in size, a regular file (never a link),
//! every count within the limits the store itself keeps, every snapshot named by a plain file
//! name inside the store's directory, and every file it would restore an absolute, normalised
//! path inside the session's project directories. An index that fails any check is refused
//! whole, with a message naming the index and what was wrong; nothing of it is used.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    Before, Entry, State, Written, MAX_FILES, MAX_FILE_BYTES, MAX_MARKS, MAX_SESSION_BYTES,
};

/// The index's file name in the store's directory.
pub const INDEX_FILE: &str = "index.json";
/// The largest index read back.
pub const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;
/// The format written (and the only one read).
const VERSION: u32 = 1;
/// The longest prompt uuid and label kept.
const MAX_ID_CHARS: usize = 200;
/// The most entries one file has (one per prompt at most).
const MAX_ENTRIES: usize = MAX_MARKS;

/// Why a saved index was not used.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// It could not be read.
    #[error("the checkpoint index {} could not be read: {error}", .path.display())]
    Read {
        /// The index.
        path: PathBuf,
        /// The OS's error.
        error: io::Error,
    },
    /// It is not what keel writes, or names something keel would not.
    #[error("the checkpoint index {} was refused: {why}", .path.display())]
    Refused {
        /// The index.
        path: PathBuf,
        /// What is wrong with it.
        why: IndexProblem,
    },
}

/// What is wrong with a saved index keel refuses to use.
#[derive(Debug, thiserror::Error)]
pub enum IndexProblem {
    /// The store's path is not a directory.
    #[error("its directory is not a directory")]
    DirNotDir,
    /// The index is not a regular file (a link, a pipe, a device).
    #[error("it is not a regular file")]
    NotRegular,
    /// Larger than an index keel writes.
    #[error("it is larger than {} MiB", MAX_INDEX_BYTES >> 20)]
    TooLarge,
    /// It grew past the bound between the size check and the read.
    #[error("it grew while it was read")]
    Grew,
    /// Not JSON of the index's shape.
    #[error("it does not parse: {0}")]
    Parse(#[source] serde_json::Error),
    /// Written by another version of the format.
    #[error("its version is {0}, not {VERSION}")]
    Version(u32),
    /// More prompts or files than keel keeps.
    #[error("it has {marks} prompts and {files} files, more than keel keeps")]
    TooMany {
        /// Prompts listed.
        marks: usize,
        /// Files listed.
        files: usize,
    },
    /// More snapshot bytes than a session keeps.
    #[error("it counts more snapshot bytes than a session keeps")]
    TooManyBytes,
    /// A prompt id that is empty, too long, or numbered after the last.
    #[error("the prompt {0:?} is not one keel records")]
    BadPrompt(String),
    /// A file with no entries, or more than one per prompt.
    #[error("{} has no entries or too many", .0.display())]
    Entries(PathBuf),
    /// An entry naming a prompt after the last one.
    #[error("{} names a prompt after the last", .0.display())]
    LaterPrompt(PathBuf),
    /// The same file listed twice.
    #[error("{} is listed twice", .0.display())]
    Twice(PathBuf),
    /// A snapshot name that is not one keel gives (only digits, so never a path elsewhere).
    #[error("the snapshot of {} is named {blob:?}, not a snapshot of this store", .file.display())]
    BlobName {
        /// The file the snapshot is of.
        file: PathBuf,
        /// The name given.
        blob: String,
    },
    /// A snapshot with a mode or size keel never records.
    #[error("the snapshot of {} has a mode or size keel never records", .0.display())]
    BlobShape(PathBuf),
    /// A path that is relative or has `.`/`..` in it.
    #[error("{} is not an absolute, plain path", .0.display())]
    NotPlain(PathBuf),
    /// A path outside every directory the session may write in.
    #[error("{} is outside the session's project directories", .0.display())]
    Outside(PathBuf),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Disk {
    version: u32,
    seq: u64,
    blobs: u64,
    used_bytes: u64,
    marks: Vec<DiskMark>,
    files: Vec<DiskFile>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiskMark {
    uuid: String,
    seq: u64,
    label: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiskFile {
    path: PathBuf,
    entries: Vec<DiskEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiskEntry {
    mark: u64,
    before: DiskBefore,
    after: Option<DiskWritten>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum DiskBefore {
    Missing,
    Kept {
        blob: String,
        mode: u32,
        len: u64,
        hash: u64,
    },
    NotKept {
        why: String,
    },
}

#[derive(Serialize, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct DiskWritten {
    len: u64,
    hash: u64,
}

/// Write `s` as the index of the store in `dir`, atomically.
pub(crate) fn save(dir: &Path, s: &State) -> io::Result<()> {
    let disk = to_disk(dir, s);
    let data = serde_json::to_vec(&disk).map_err(io::Error::other)?;
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    let tmp = crate::fsutil::temp_name(&dir.join(INDEX_FILE), dir);
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(&data)?;
            f.sync_data()
        })
        .and_then(|()| fs::rename(&tmp, dir.join(INDEX_FILE)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

fn to_disk(dir: &Path, s: &State) -> Disk {
    let blob_name = |b: &Path| {
        b.strip_prefix(dir)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut files: Vec<DiskFile> = s
        .files
        .iter()
        .map(|(path, entries)| DiskFile {
            path: path.clone(),
            entries: entries
                .iter()
                .map(|e| DiskEntry {
                    mark: e.mark,
                    before: match &e.before {
                        Before::Missing => DiskBefore::Missing,
                        Before::Kept {
                            blob,
                            mode,
                            len,
                            hash,
                        } => DiskBefore::Kept {
                            blob: blob_name(blob),
                            mode: *mode,
                            len: *len,
                            hash: *hash,
                        },
                        Before::NotKept(why) => DiskBefore::NotKept { why: why.clone() },
                    },
                    after: e.after.map(|w| DiskWritten {
                        len: w.len,
                        hash: w.hash,
                    }),
                })
                .collect(),
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Disk {
        version: VERSION,
        seq: s.seq,
        blobs: s.blobs,
        used_bytes: s.used_bytes,
        marks: s
            .marks
            .iter()
            .map(|(uuid, seq, label)| DiskMark {
                uuid: uuid.clone(),
                seq: *seq,
                label: label.clone(),
            })
            .collect(),
        files,
    }
}

/// Read the index of the store in `dir`, if there is one, checked against `roots` (the real
/// paths of the directories the session may write in). `Ok(None)`: there is none.
pub(crate) fn load(dir: &Path, roots: &[PathBuf]) -> Result<Option<State>, IndexError> {
    let path = dir.join(INDEX_FILE);
    let refused = |why: IndexProblem| IndexError::Refused {
        path: path.clone(),
        why,
    };
    let read_err = |error: io::Error| IndexError::Read {
        path: path.clone(),
        error,
    };
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
        Ok(m) if !m.is_dir() => return Err(refused(IndexProblem::DirNotDir)),
        Ok(_) => {}
    }
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&path)
    {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
        Ok(f) => f,
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(refused(IndexProblem::NotRegular));
    }
    if meta.len() > MAX_INDEX_BYTES {
        return Err(refused(IndexProblem::TooLarge));
    }
    let mut data = Vec::new();
    file.take(MAX_INDEX_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(read_err)?;
    if data.len() as u64 > MAX_INDEX_BYTES {
        return Err(refused(IndexProblem::Grew));
    }
    let disk: Disk = serde_json::from_slice(&data).map_err(|e| refused(IndexProblem::Parse(e)))?;
    from_disk(dir, disk, roots).map(Some).map_err(refused)
}

fn from_disk(dir: &Path, d: Disk, roots: &[PathBuf]) -> Result<State, IndexProblem> {
    if d.version != VERSION {
        return Err(IndexProblem::Version(d.version));
    }
    if d.marks.len() > MAX_MARKS || d.files.len() > MAX_FILES {
        return Err(IndexProblem::TooMany {
            marks: d.marks.len(),
            files: d.files.len(),
        });
    }
    if d.used_bytes > MAX_SESSION_BYTES {
        return Err(IndexProblem::TooManyBytes);
    }
    let mut marks = Vec::with_capacity(d.marks.len());
    for m in d.marks {
        if m.uuid.is_empty() || m.uuid.chars().count() > MAX_ID_CHARS || m.seq > d.seq {
            return Err(IndexProblem::BadPrompt(m.uuid));
        }
        let label: String = m.label.chars().take(MAX_ID_CHARS).collect();
        marks.push((m.uuid, m.seq, label));
    }
    let mut files = HashMap::with_capacity(d.files.len());
    for f in d.files {
        check_path(&f.path, roots)?;
        if f.entries.is_empty() || f.entries.len() > MAX_ENTRIES {
            return Err(IndexProblem::Entries(f.path));
        }
        let mut entries = Vec::with_capacity(f.entries.len());
        for e in f.entries {
            if e.mark > d.seq {
                return Err(IndexProblem::LaterPrompt(f.path));
            }
            entries.push(Entry {
                mark: e.mark,
                before: before_of(dir, e.before, &f.path)?,
                after: e.after.map(|w| Written {
                    len: w.len,
                    hash: w.hash,
                }),
            });
        }
        if files.insert(f.path.clone(), entries).is_some() {
            return Err(IndexProblem::Twice(f.path));
        }
    }
    Ok(State {
        marks,
        seq: d.seq,
        files,
        used_bytes: d.used_bytes,
        blobs: d.blobs,
    })
}

fn before_of(dir: &Path, b: DiskBefore, file: &Path) -> Result<Before, IndexProblem> {
    Ok(match b {
        DiskBefore::Missing => Before::Missing,
        DiskBefore::NotKept { why } => Before::NotKept(why.chars().take(500).collect()),
        DiskBefore::Kept {
            blob,
            mode,
            len,
            hash,
        } => {
            // Only the names keel gives its snapshots: digits, so never a path elsewhere.
            if blob.is_empty() || blob.len() > 20 || !blob.bytes().all(|c| c.is_ascii_digit()) {
                return Err(IndexProblem::BlobName {
                    file: file.to_owned(),
                    blob,
                });
            }
            if mode > 0o7777 || len > MAX_FILE_BYTES {
                return Err(IndexProblem::BlobShape(file.to_owned()));
            }
            Before::Kept {
                blob: dir.join(blob),
                mode,
                len,
                hash,
            }
        }
    })
}

/// A file the index would restore: absolute, with no `.` or `..`, inside one of `roots`.
fn check_path(p: &Path, roots: &[PathBuf]) -> Result<(), IndexProblem> {
    let plain = p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain {
        return Err(IndexProblem::NotPlain(p.to_owned()));
    }
    if !roots.iter().any(|r| p.starts_with(r) && p != r) {
        return Err(IndexProblem::Outside(p.to_owned()));
    }
    Ok(())
}
