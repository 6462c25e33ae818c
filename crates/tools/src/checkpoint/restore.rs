//! Rewinding the files to a mark: check everything, stage everything, then replace; put back
//! what was replaced if a replacement fails. Every file is reached through its directory, held
//! open from the checks to the last rename ([`Dir`]): a directory swapped for a link in between
//! cannot redirect a write. Every snapshot is checked against the length and hash recorded
//! when it was taken before anything is replaced.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::dirfd::Dir;
use super::{hash_of, Before, Checkpoints, Entry, State, Written};

/// What a rewind did (or, for a dry run, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RewindReport {
    /// The files restored or deleted, in path order.
    pub files_changed: Vec<PathBuf>,
    /// Of those, the files deleted (they did not exist at the prompt).
    pub deleted: Vec<PathBuf>,
    /// Lines the rewind puts back.
    pub insertions: u64,
    /// Lines the rewind takes out.
    pub deletions: u64,
}

/// Why a rewind did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// No prompt with this uuid is remembered.
    #[error("no checkpoint for the user message {uuid}: it is not a prompt of this session (or too old to be remembered)")]
    UnknownPrompt {
        /// The uuid asked for.
        uuid: String,
    },
    /// Some files cannot be restored; none was touched.
    #[error("nothing was restored, because {}", problems_text(.problems))]
    Refused {
        /// Each file that cannot be restored, and why.
        problems: Vec<(PathBuf, FileProblem)>,
    },
    /// Replacing a file failed midway; the files already replaced were put back.
    #[error("restoring {} failed ({error}); {}", .path.display(), if *.rolled_back { "the files already restored were put back, so nothing changed" } else { "some files could not be put back: check them" })]
    Failed {
        /// The file whose replacement failed.
        path: PathBuf,
        /// The OS's error.
        error: io::Error,
        /// Whether every file already replaced was put back.
        rolled_back: bool,
    },
}

/// Why one file cannot be put back (the sentence follows the file's path).
#[derive(Debug, thiserror::Error)]
pub enum FileProblem {
    /// Its content differs from what keel's last write left.
    #[error("changed outside keel since keel last wrote it")]
    ChangedOutside,
    /// It was deleted after keel wrote it.
    #[error("was deleted since keel wrote it")]
    Deleted,
    /// It did not exist when keel last touched it, and exists now.
    #[error("was created outside keel since keel last touched it")]
    CreatedOutside,
    /// A directory, a link or a device now stands where the file was.
    #[error("is no longer a regular file")]
    NotRegular,
    /// A directory on its path is now a link (or gone): restoring would write elsewhere.
    #[error(
        "is no longer where it was: a directory on its path was replaced by a link or removed"
    )]
    Moved,
    /// It could not be read to check it.
    #[error("cannot be checked: {0}")]
    Unreadable(io::Error),
    /// keel's last write of it failed and what it held before was not kept.
    #[error(
        "cannot be checked: keel's last write of it failed and its state before that was not kept"
    )]
    Unverifiable,
    /// What it held at the prompt was not kept (too large, budget spent, unreadable).
    #[error("cannot be restored: its content at that prompt was not kept ({0})")]
    NotKept(String),
    /// Its snapshot cannot be read.
    #[error("cannot be restored: its snapshot {} cannot be read: {error}", .path.display())]
    SnapshotUnreadable {
        /// The snapshot.
        path: PathBuf,
        /// The OS's error.
        error: io::Error,
    },
    /// Its snapshot is not what keel wrote.
    #[error("cannot be restored: its snapshot {} was changed", .0.display())]
    SnapshotChanged(PathBuf),
    /// Its directory cannot be written (permission denied, read-only file system).
    #[error("cannot be restored: {} cannot be written ({error})", .dir.display())]
    NotWritable {
        /// The directory.
        dir: PathBuf,
        /// The OS's error.
        error: io::Error,
    },
}

fn problems_text(problems: &[(PathBuf, FileProblem)]) -> String {
    problems
        .iter()
        .map(|(p, why)| format!("{} {why}", p.display()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What to do to one file.
enum Action {
    Restore {
        blob: PathBuf,
        mode: u32,
        len: u64,
        hash: u64,
    },
    Delete,
}

struct Step {
    path: PathBuf,
    /// The file's directory, open since the checks.
    dir: Rc<Dir>,
    /// The file's name in it.
    name: OsString,
    action: Action,
    /// The restored content, written beside the file (its name in `dir`).
    staged: Option<OsString>,
    /// A second link to the file as it is now, to put it back (its name in `dir`).
    backup: Option<OsString>,
}

/// The directories of a rewind, each opened once.
type Dirs = HashMap<PathBuf, Rc<Dir>>;

impl Checkpoints {
    /// Put every file keel's tools wrote since the prompt `uuid` back as it was when that
    /// prompt came (files created since are deleted). `dry_run`: only say what would change.
    pub fn rewind(&self, uuid: &str, dry_run: bool) -> Result<RewindReport, RewindError> {
        let mut s = self.lock();
        let Some(seq) = s.marks.iter().find(|(u, _, _)| u == uuid).map(|m| m.1) else {
            return Err(RewindError::UnknownPrompt {
                uuid: uuid.to_owned(),
            });
        };
        let mut paths: Vec<&PathBuf> = s.files.keys().collect();
        paths.sort();
        let mut problems = Vec::new();
        let mut steps = Vec::new();
        let mut report = RewindReport::default();
        let mut dirs = Dirs::new();
        for path in paths {
            match plan(path, &s.files[path], seq, &mut dirs) {
                Ok(None) => {}
                Ok(Some((action, (ins, del), dir))) => {
                    report.insertions += ins;
                    report.deletions += del;
                    report.files_changed.push(path.clone());
                    if matches!(action, Action::Delete) {
                        report.deleted.push(path.clone());
                    }
                    steps.push(Step {
                        path: path.clone(),
                        name: path.file_name().unwrap_or_default().to_owned(),
                        dir,
                        action,
                        staged: None,
                        backup: None,
                    });
                }
                Err(why) => problems.push((path.clone(), why)),
            }
        }
        if problems.is_empty() {
            for st in &mut steps {
                if let Err(why) = stage(st, dry_run) {
                    problems.push((st.path.clone(), why));
                }
            }
        }
        if !problems.is_empty() {
            discard(&steps);
            return Err(RewindError::Refused { problems });
        }
        if dry_run {
            return Ok(report);
        }
        #[cfg(test)]
        BETWEEN.with(|b| b.borrow_mut().take().map(|f| f()));
        let applied = apply(&steps);
        if applied.is_ok() {
            forget_after(&mut s, seq);
            self.save(&s);
        }
        applied.map(|()| report)
    }
}

/// An action on one file, the lines it puts back and takes out, and the file's directory.
type Planned = (Action, (u64, u64), Rc<Dir>);

/// The directory `dir`, opened without following links (once per rewind); a directory that
/// no longer opens that way was swapped for a link (or removed) since keel wrote the file, and
/// a restore through it would write somewhere else.
fn open_dir(dir: &Path, dirs: &mut Dirs) -> Result<Rc<Dir>, FileProblem> {
    if let Some(d) = dirs.get(dir) {
        return Ok(d.clone());
    }
    let d = Rc::new(Dir::open(dir).map_err(|_| FileProblem::Moved)?);
    dirs.insert(dir.to_path_buf(), d.clone());
    Ok(d)
}

/// What rewinding `entries` to mark `seq` does to `path`; `None`: nothing; `Err`: why it
/// cannot.
fn plan(
    path: &Path,
    entries: &[Entry],
    seq: u64,
    dirs: &mut Dirs,
) -> Result<Option<Planned>, FileProblem> {
    let Some(first) = entries.iter().position(|e| e.mark >= seq) else {
        return Ok(None);
    };
    let since = &entries[first..];
    if since.iter().all(|e| e.after.is_none()) {
        return Ok(None); // keel's writes since then all failed: it changed nothing
    }
    let Some(last) = since.last() else {
        return Ok(None);
    };
    let expected: Option<Written> = match (&last.after, &last.before) {
        (Some(w), _) => Some(*w),
        (None, Before::Missing) => None,
        (None, Before::Kept { len, hash, .. }) => Some(Written {
            len: *len,
            hash: *hash,
        }),
        (None, Before::NotKept(_)) => return Err(FileProblem::Unverifiable),
    };
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(FileProblem::Moved);
    };
    let dir = open_dir(parent, dirs)?;
    let current = read_current(&dir, name, expected.map_or(0, |w| w.len))?;
    match (&current, expected) {
        (None, Some(_)) => return Err(FileProblem::Deleted),
        (Some(_), None) => return Err(FileProblem::CreatedOutside),
        (Some(c), Some(w)) if c.len() as u64 != w.len || hash_of(c) != w.hash => {
            return Err(FileProblem::ChangedOutside)
        }
        _ => {}
    }
    match &since[0].before {
        Before::NotKept(why) => Err(FileProblem::NotKept(why.clone())),
        Before::Missing => Ok(current.map(|c| (Action::Delete, (0, count_lines(&c)), dir))),
        Before::Kept {
            blob,
            mode,
            len,
            hash,
        } => {
            let old = read_blob(blob, *len, *hash)?;
            let now = current.unwrap_or_default();
            if old == now {
                return Ok(None);
            }
            let lines = line_changes(&now, &old);
            Ok(Some((
                Action::Restore {
                    blob: blob.clone(),
                    mode: *mode,
                    len: *len,
                    hash: *hash,
                },
                lines,
                dir,
            )))
        }
    }
}

/// The file's content now (`None`: it does not exist), read up to a little past `expect`.
fn read_current(dir: &Dir, name: &OsStr, expect: u64) -> Result<Option<Vec<u8>>, FileProblem> {
    dir.read(name, expect.saturating_add(1))
        .map_err(|e| e.map_or(FileProblem::NotRegular, FileProblem::Unreadable))
}

/// A snapshot's content, checked against the length and hash recorded when it was taken: a
/// snapshot changed since (corrupted, or tampered with) is never restored.
fn read_blob(blob: &Path, len: u64, hash: u64) -> Result<Vec<u8>, FileProblem> {
    let mut data = Vec::new();
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(blob)
        .and_then(|f| f.take(len.saturating_add(1)).read_to_end(&mut data))
        .map_err(|error| FileProblem::SnapshotUnreadable {
            path: blob.to_path_buf(),
            error,
        })?;
    if data.len() as u64 != len || hash_of(&data) != hash {
        return Err(FileProblem::SnapshotChanged(blob.to_path_buf()));
    }
    Ok(data)
}

fn count_lines(data: &[u8]) -> u64 {
    String::from_utf8_lossy(data).lines().count() as u64
}

/// Lines a change from `now` to `then` adds and removes (as multisets of lines: a moved line
/// counts as unchanged).
fn line_changes(now: &[u8], then: &[u8]) -> (u64, u64) {
    let (now, then) = (String::from_utf8_lossy(now), String::from_utf8_lossy(then));
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for l in now.lines() {
        *counts.entry(l).or_default() -= 1;
    }
    for l in then.lines() {
        *counts.entry(l).or_default() += 1;
    }
    let ins = counts.values().filter(|c| **c > 0).map(|c| *c as u64).sum();
    let del = counts
        .values()
        .filter(|c| **c < 0)
        .map(|c| (-*c) as u64)
        .sum();
    (ins, del)
}

/// A name beside `path` no one can have prepared: the unique temporary name (process id and
/// counter) with `.what` appended (a fixed name could be a link planted by the repository).
fn side_name(path: &Path, what: &str) -> OsString {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut name = crate::fsutil::temp_name(path, dir)
        .file_name()
        .unwrap_or_default()
        .to_owned();
    name.push(".");
    name.push(what);
    name
}

/// Prepare one step: the restored content beside the file (from the snapshot, checked again)
/// and a second link to the file as it is now. A dry run only checks that the directory may
/// be written.
fn stage(st: &mut Step, dry_run: bool) -> Result<(), FileProblem> {
    let dir_path = st.path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let not_writable = |error: io::Error| FileProblem::NotWritable {
        dir: dir_path.clone(),
        error,
    };
    if dry_run {
        return st.dir.writable().map_err(not_writable);
    }
    let backup = side_name(&st.path, "keel-rewind-old");
    st.dir.link(&st.name, &backup).map_err(not_writable)?;
    st.backup = Some(backup);
    if let Action::Restore {
        blob,
        mode,
        len,
        hash,
    } = &st.action
    {
        // Read and checked again: the snapshot may have changed since the plan.
        let data = read_blob(blob, *len, *hash)?;
        let staged = side_name(&st.path, "keel-rewind-new");
        st.staged = Some(staged.clone());
        let written = st.dir.create_new(&staged, 0o600).and_then(|mut out| {
            out.write_all(&data)?;
            out.set_permissions(fs::Permissions::from_mode(*mode))
        });
        written.map_err(not_writable)?;
    }
    Ok(())
}

fn discard(steps: &[Step]) {
    for st in steps {
        for p in st.staged.iter().chain(st.backup.iter()) {
            let _ = st.dir.unlink(p);
        }
    }
}

/// Replace every file; on a failure put back those already replaced.
fn apply(steps: &[Step]) -> Result<(), RewindError> {
    for (i, st) in steps.iter().enumerate() {
        let done = match (&st.action, &st.staged) {
            (Action::Restore { .. }, Some(staged)) => st.dir.rename(staged, &st.name),
            (Action::Restore { .. }, None) => Err(io::Error::other("nothing was staged")),
            (Action::Delete, _) => st.dir.unlink(&st.name),
        };
        if let Err(error) = done {
            let mut rolled_back = true;
            for back in &steps[..i] {
                if let Some(b) = &back.backup {
                    rolled_back &= back.dir.rename(b, &back.name).is_ok();
                }
            }
            discard(steps);
            return Err(RewindError::Failed {
                path: st.path.clone(),
                error,
                rolled_back,
            });
        }
    }
    discard(steps);
    Ok(())
}

/// After a rewind to mark `seq`: what was written since is undone, so forget it (and the
/// later prompts: their writes are gone).
fn forget_after(s: &mut State, seq: u64) {
    for entries in s.files.values_mut() {
        entries.retain(|e| e.mark < seq);
    }
    s.files.retain(|_, v| !v.is_empty());
    s.marks.retain(|m| m.1 <= seq);
}

#[cfg(test)]
thread_local! {
    /// A test's action between the checks and the writes of this thread's next rewind.
    static BETWEEN: std::cell::RefCell<Option<Box<dyn FnOnce()>>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` between the checks and the writes of this thread's next rewind (tests only).
#[cfg(test)]
pub(super) fn between_checks_and_writes(f: Box<dyn FnOnce()>) {
    BETWEEN.with(|b| *b.borrow_mut() = Some(f));
}
