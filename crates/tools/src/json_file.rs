//! Updating a JSON settings file that other sessions may be writing at the same time.
//!
//! Several keel sessions (and other tools) share files such as `~/.claude.json` and
//! `.claude/settings.local.json`. An update here is a read-change-write under an exclusive
//! `flock` on a sidecar lock file (the settings file itself is replaced, so it cannot carry the
//! lock), and the new text replaces the old atomically: a uniquely named temporary file in the
//! same directory, created exclusively, written, fsync'd, renamed over the old one, then the
//! directory fsync'd. A reader therefore always sees a whole file, old or new; no update is
//! lost to a concurrent one; every key keel does not know is kept; the file keeps its mode.
//!
//! A file keel cannot read as a JSON object is never overwritten, and neither is anything
//! that is not a regular file: a symbolic link planted in a repository must not redirect a
//! write to a file elsewhere (such as the user's global settings).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};

/// The largest settings file read (`~/.claude.json` grows with every project seen).
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Why a settings file could not be read or updated; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum JsonFileError {
    /// The file (or its directory) could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file is not a regular file (a symbolic link, a directory, a device).
    #[error("{} is not a regular file (a link, a directory or a device); it was left as it is", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_BYTES`].
    #[error("{} is larger than {MAX_BYTES} bytes; it was left as it is", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The file is not JSON.
    #[error("{} is not valid JSON ({source}); it was left as it is", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where the parse failed.
        source: serde_json::Error,
    },
    /// The file is JSON but not an object.
    #[error("{} is not a JSON object; it was left as it is", path.display())]
    NotObject {
        /// The file.
        path: PathBuf,
    },
    /// The change refused the file's content (its reason says why).
    #[error("{}: {reason}; it was left as it is", path.display())]
    Refused {
        /// The file.
        path: PathBuf,
        /// What in the content stopped the change.
        reason: String,
    },
    /// The lock could not be taken.
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The new content could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
}

/// Read `path` as a JSON object: a missing or blank file is an empty object.
pub fn read(path: &Path) -> Result<Map<String, Value>, JsonFileError> {
    let read_err = |source| JsonFileError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(read_err(e)),
    };
    if !meta.file_type().is_file() {
        return Err(JsonFileError::NotRegular {
            path: path.to_owned(),
        });
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(read_err)?;
    let mut text = String::new();
    file.take(MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_BYTES {
        return Err(JsonFileError::TooLarge {
            path: path.to_owned(),
        });
    }
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(JsonFileError::NotObject {
            path: path.to_owned(),
        }),
        Err(source) => Err(JsonFileError::Invalid {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Read `path` (see [`read`]), let `change` edit the object, and write it back atomically, all
/// under the file's lock: concurrent updates from any number of threads or processes are
/// applied one after the other, none lost. Nothing is written when `change` fails. The
/// directory is created when missing.
pub fn update<T>(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> Result<T, JsonFileError>,
) -> Result<T, JsonFileError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| JsonFileError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let _lock = lock(path, dir)?;
    let mut root = read(path)?;
    let out = change(&mut root)?;
    let text =
        serde_json::to_string_pretty(&Value::Object(root)).map_err(|e| JsonFileError::Write {
            path: path.to_owned(),
            source: io::Error::other(e),
        })? + "\n";
    replace(path, dir, text.as_bytes()).map_err(|source| JsonFileError::Write {
        path: path.to_owned(),
        source,
    })?;
    Ok(out)
}

/// The sidecar lock of `path`, held until dropped. It is named apart from `<file>.lock`, which
/// other tools use as a lock directory of their own.
fn lock(path: &Path, dir: &Path) -> Result<Flock<File>, JsonFileError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings".into());
    let hidden = if name.starts_with('.') { "" } else { "." };
    let lock_path = dir.join(format!("{hidden}{name}.keel-lock"));
    let lock_err = |source| JsonFileError::Lock {
        path: lock_path.clone(),
        source,
    };
    // Never through a link: a planted one could create a file anywhere.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(&lock_path)
        .map_err(lock_err)?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| lock_err(errno.into()))
}

/// Replace `path` with `data` atomically, keeping its mode.
fn replace(path: &Path, dir: &Path, data: &[u8]) -> io::Result<()> {
    let mode = match std::fs::symlink_metadata(path) {
        Ok(m) => Some(m.permissions().mode() & 0o7777),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    // A new file (O_EXCL): never one already there, nor a link planted in its place. A name
    // left by a crashed process of the same id is passed over.
    let mut attempt = 0;
    let (tmp, mut f) = loop {
        let tmp = crate::fsutil::temp_name(path, dir);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let written = (|| -> io::Result<()> {
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    // The rename itself must survive a crash too (best effort: not every file system can
    // sync a directory, and the new content is in place either way).
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests;
