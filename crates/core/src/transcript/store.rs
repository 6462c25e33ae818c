//! Where transcripts live, and how a run gets its session: new, resumed, continued or forked.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use keel_protocol::Frame;

use crate::persist::{PersistError, PersistOp};
use serde_json::json;

use super::notices::{notices, repair_notices, Disposition};
use super::writer::lock_exclusive_within;
use super::{FsyncMode, Notice, NoticeKind, RepairCause, SessionHeader, TranscriptWriter};
use crate::history::History;
use crate::ids::new_uuid;

/// How long a resume waits for another process to let go of the transcript.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Where sessions live: the config root's `projects/` (Claude Code's layout, where new
/// sessions are written), and keel's old `projects/` (read, so old sessions still list and
/// resume) when that is another directory.
#[derive(Clone, Debug)]
pub struct Store {
    home: PathBuf,
    legacy: Option<PathBuf>,
}

/// The config root (Claude Code's `~/.claude`): `$CLAUDE_CONFIG_DIR` when set, else
/// `$KEEL_HOME` when set (it isolates everything), else `$HOME/.claude`. A relative value is
/// taken from `cwd`. `None`: none of them is set.
pub fn config_root(env: &dyn Fn(&str) -> Option<String>, cwd: &Path) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty()).map(PathBuf::from);
    let root = nonempty("CLAUDE_CONFIG_DIR")
        .or_else(|| nonempty("KEEL_HOME"))
        .or_else(|| Some(nonempty("HOME")?.join(".claude")))?;
    Some(if root.is_absolute() {
        root
    } else {
        cwd.join(root)
    })
}

/// Which conversation a run starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// A new, empty session.
    New,
    /// The session with this id (`--resume`).
    Resume(String),
    /// The most recently active session of the working directory (`--continue`).
    Continue,
}

/// What a run asks of the store.
#[derive(Clone, Debug)]
pub struct OpenRequest<'a> {
    /// The working directory.
    pub cwd: &'a Path,
    /// The model (recorded in a new session's header).
    pub model: &'a str,
    /// When to fsync.
    pub fsync: FsyncMode,
    /// Where to start from.
    pub start: Start,
    /// With `Resume`/`Continue`: copy the conversation into a new session instead of appending
    /// to the old one (`--fork-session`).
    pub fork: bool,
    /// The id of the new session (`--session-id`), for `New` or a fork.
    pub session_id: Option<String>,
}

/// A session ready to run.
#[derive(Debug)]
pub struct Opened {
    /// Its id.
    pub session_id: String,
    /// Its transcript writer (hand it to the emitter).
    pub writer: Arc<TranscriptWriter>,
    /// The conversation so far, well-formed.
    pub history: History,
    /// What loading found and repaired, to report.
    pub notices: Vec<Notice>,
    /// The session whose conversation was loaded (the old id, for a fork).
    pub resumed_from: Option<String>,
}

/// A session could not be opened. Each message names what was asked and where keel looked.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// `--resume` named a session that does not exist.
    #[error("no session {id} to resume: keel looked for {}{}", looked.display(), elsewhere_hint(elsewhere))]
    NotFound {
        /// The id asked for.
        id: String,
        /// The file keel looked for.
        looked: PathBuf,
        /// The transcript of that id under another working directory, and that directory.
        elsewhere: Option<(PathBuf, Option<String>)>,
    },
    /// `--continue` found no session.
    #[error("no session to continue in {}: keel found no transcript in {}", cwd.display(), looked.display())]
    NothingToContinue {
        /// The working directory.
        cwd: PathBuf,
        /// The directory keel looked in.
        looked: PathBuf,
    },
    /// `--session-id` named a session that exists already.
    #[error("session {id} already exists ({}); resume it with --resume {id}, or choose another id", path.display())]
    Exists {
        /// The id.
        id: String,
        /// Its transcript.
        path: PathBuf,
    },
    /// The id is not a UUID.
    #[error("{id:?} is not a session id: session ids are UUIDs (as `keel sessions` lists them)")]
    NotAnId {
        /// What was given.
        id: String,
    },
    /// Another keel is appending to the session.
    #[error("session {id} is in use by another keel process (its transcript {} is locked); wait for that run to end, or add --fork-session to branch off a copy", path.display())]
    InUse {
        /// The id.
        id: String,
        /// Its transcript.
        path: PathBuf,
    },
    /// The transcript is empty: a crash or a full disk truncated it, or it was never written.
    #[error("session {id} cannot be resumed: its transcript {} is empty (0 bytes), so there is no conversation to continue; it was cut off (a crash, a full disk) or never written. Start a new session, or restore the file from a backup", path.display())]
    Empty {
        /// The id.
        id: String,
        /// Its transcript.
        path: PathBuf,
    },
    /// A truncating fork was refused (`--resume-session-at`, `--resume-drops-turn`).
    #[error(transparent)]
    Rejected(#[from] super::truncate::TruncateError),
    /// The transcript could not be read.
    #[error("could not read the transcript {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn elsewhere_hint(e: &Option<(PathBuf, Option<String>)>) -> String {
    match e {
        Some((_, Some(cwd))) => format!(
            " (a session with this id belongs to the directory {cwd}; run keel there to resume it)"
        ),
        Some((p, None)) => format!(
            " (a transcript with this id is at {}, under another directory)",
            p.display()
        ),
        None => String::new(),
    }
}

impl Store {
    /// The store under the config root `home` (`<home>/projects`), and nothing else.
    pub fn new(home: impl Into<PathBuf>) -> Self {
        Self {
            home: home.into(),
            legacy: None,
        }
    }

    /// The store of a run: sessions under [`config_root`]`/projects`, and old ones still read
    /// from `<keel_home>/projects` (`$KEEL_HOME`, else `~/.keel`) when that is elsewhere.
    pub fn from_env(
        env: &dyn Fn(&str) -> Option<String>,
        cwd: &Path,
        keel_home: Option<PathBuf>,
    ) -> Option<Self> {
        let home = config_root(env, cwd)?;
        let legacy = keel_home
            .map(|h| h.join("projects"))
            .filter(|p| *p != home.join("projects"));
        Some(Self { home, legacy })
    }

    /// The config root.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `<config root>/projects`, where sessions are written.
    pub fn projects_dir(&self) -> PathBuf {
        self.home.join("projects")
    }

    /// keel's old sessions directory, when it is not [`Store::projects_dir`].
    pub fn legacy_dir(&self) -> Option<&Path> {
        self.legacy.as_deref()
    }

    /// The directories `cwd`'s sessions may be in: the current one first, then the old one.
    pub(super) fn project_dirs_of(&self, cwd: &Path) -> Vec<PathBuf> {
        let old = super::slug_v1(cwd);
        let mut dirs = vec![self.project_dir(cwd), self.projects_dir().join(&old)];
        dirs.extend(self.legacy.as_ref().map(|l| l.join(&old)));
        dirs.dedup();
        dirs
    }

    /// The directory of `cwd`'s sessions.
    pub fn project_dir(&self, cwd: &Path) -> PathBuf {
        self.projects_dir().join(super::slug(cwd))
    }

    /// The transcript of session `id` of `cwd`.
    pub fn session_path(&self, cwd: &Path, id: &str) -> PathBuf {
        self.project_dir(cwd).join(format!("{id}.jsonl"))
    }

    /// Open the session a run asks for.
    pub fn open(&self, req: &OpenRequest<'_>) -> Result<Opened, OpenError> {
        self.open_at(req, None, None)
    }

    /// [`open`](Self::open); with `cut`, a fork whose history ends at `cut.at`
    /// (`--resume-session-at`; the source transcript is only read). With `mirror`, what a
    /// resume appends while opening (results for calls a crash left open) is mirrored too.
    pub fn open_at(
        &self,
        req: &OpenRequest<'_>,
        cut: Option<&super::truncate::Truncation>,
        mirror: Option<&super::MirrorSink>,
    ) -> Result<Opened, OpenError> {
        let source = match &req.start {
            Start::New => None,
            Start::Resume(id) => Some(self.find(req.cwd, id)?),
            Start::Continue => {
                Some(
                    self.latest(req.cwd)
                        .ok_or_else(|| OpenError::NothingToContinue {
                            cwd: req.cwd.to_owned(),
                            looked: self.project_dir(req.cwd),
                        })?,
                )
            }
        };
        match source {
            None => self.create(req, None, &[]),
            Some((id, path)) if req.fork => self.fork(req, &id, &path, cut),
            Some((id, path)) => self.resume(req, id, path, mirror),
        }
    }

    /// A new session (empty, or a fork's copy of `history`).
    fn create(
        &self,
        req: &OpenRequest<'_>,
        forked_from: Option<(&str, &Path)>,
        history: &[Frame],
    ) -> Result<Opened, OpenError> {
        let id = match &req.session_id {
            Some(id) => normalize_id(id)?,
            None => new_uuid(),
        };
        let path = self.session_path(req.cwd, &id);
        if path.exists() {
            return Err(OpenError::Exists { id, path });
        }
        let mut header = SessionHeader::new(&id, req.cwd, req.model);
        if let Some((old, old_path)) = forked_from {
            header.forked_from =
                Some(json!({ "session_id": old, "path": old_path.display().to_string() }));
        }
        let history: Vec<Frame> = history.iter().map(|f| with_session(f, &id)).collect();
        super::checkpoint::touched(&path, &id);
        let writer = TranscriptWriter::create_lazily(path.clone(), &header, &history, req.fsync)
            .unwrap_or_else(|m| TranscriptWriter::broken(path, id.clone(), m));
        Ok(Opened {
            session_id: id,
            writer: Arc::new(writer),
            history: History::new(),
            notices: Vec::new(),
            resumed_from: None,
        })
    }

    fn fork(
        &self,
        req: &OpenRequest<'_>,
        old: &str,
        path: &Path,
        cut: Option<&super::truncate::Truncation>,
    ) -> Result<Opened, OpenError> {
        refuse_empty(old, path)?;
        let read_err = |source| OpenError::Read {
            path: path.to_owned(),
            source,
        };
        let (loaded, rebuilt) = match cut {
            None => super::load_file(path, old, true).map_err(read_err)?,
            Some(c) => super::truncate::load_truncated(path, old, c).map_err(read_err)??,
        };
        let mut opened = self.create(req, Some((old, path)), &rebuilt.frames)?;
        opened.notices = notices(&loaded, &rebuilt, Disposition::Fork);
        opened.history = rebuilt.history;
        opened.resumed_from = Some(old.to_owned());
        Ok(opened)
    }

    fn resume(
        &self,
        req: &OpenRequest<'_>,
        id: String,
        path: PathBuf,
        mirror: Option<&super::MirrorSink>,
    ) -> Result<Opened, OpenError> {
        refuse_empty(&id, &path)?;
        let read_err = |source| OpenError::Read {
            path: path.clone(),
            source,
        };
        let file = match OpenOptions::new().read(true).append(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(OpenError::NotFound {
                    id,
                    looked: path,
                    elsewhere: None,
                })
            }
            Err(e) => return resume_read_only(id, path, &e),
        };
        let file = match lock_exclusive_within(file, LOCK_PATIENCE) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(OpenError::InUse { id, path })
            }
            Err(e) => return Err(read_err(e)),
        };
        // Read under the lock: nobody else appends between reading and cutting.
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        // From the checkpoint of a long transcript when one holds: only what came after it is
        // read. The writer appends at the end whatever the cursor.
        let (loaded, rebuilt) =
            super::checkpoint::load(&path, &file, size, &id).map_err(read_err)?;
        super::checkpoint::touched(&path, &id);
        let mut notices = notices(&loaded, &rebuilt, Disposition::Resume);
        let (len, cut) = repair_end(&file, &path, &id, req, &loaded);
        let writer = match cut {
            Ok(()) => {
                // A file in keel's old format goes on in it: no file mixes two formats.
                let legacy = len > 0
                    && (loaded.legacy || loaded.header.as_ref().is_some_and(|h| h.schema < 2));
                let last = match legacy {
                    true => loaded.last_uuid,
                    false => loaded.last_chain_uuid,
                };
                TranscriptWriter::continuing(
                    path.clone(),
                    id.clone(),
                    req.cwd.display().to_string(),
                    file,
                    len,
                    last,
                    (legacy, req.fsync),
                )
            }
            Err(m) => TranscriptWriter::broken(path.clone(), id.clone(), m),
        };
        // Record the repairs at the end of the file, so the file itself is well-formed again.
        // (Repairs in the middle stay derived: the damaged line that caused them stays too.)
        let mut writer = Arc::new(writer);
        if let Some(m) = mirror {
            writer.mirror_to(m.clone(), path.clone());
        }
        for r in rebuilt
            .repairs
            .iter()
            .filter(|r| r.cause == RepairCause::SessionEnded)
        {
            if let Err(m) = writer.append_frame(&r.frame) {
                writer = Arc::new(TranscriptWriter::broken(path.clone(), id.clone(), m));
                break;
            }
        }
        if let Err(m) = writer.sync_now() {
            writer = Arc::new(TranscriptWriter::broken(path.clone(), id.clone(), m));
        }
        if !writer.is_created() {
            // Broken: the notices said "recorded"; say what really happened.
            notices.retain(|n| n.kind != NoticeKind::RepairedToolCalls);
            notices.extend(repair_notices(&rebuilt, &path, false));
        }
        Ok(Opened {
            session_id: id.clone(),
            writer,
            history: rebuilt.history,
            notices,
            resumed_from: Some(id),
        })
    }

    /// The transcript of session `id` of `cwd`.
    fn find(&self, cwd: &Path, id: &str) -> Result<(String, PathBuf), OpenError> {
        let id = normalize_id(id)?;
        let path = self.session_path(cwd, &id);
        for dir in self.project_dirs_of(cwd) {
            let p = dir.join(format!("{id}.jsonl"));
            if p.is_file() {
                return Ok((id, p));
            }
        }
        let elsewhere = self.project_dirs().into_iter().find_map(|d| {
            let p = d.join(format!("{id}.jsonl"));
            p.is_file().then(|| {
                let cwd = session_cwd(&p);
                (p, cwd)
            })
        });
        Err(OpenError::NotFound {
            id,
            looked: path,
            elsewhere,
        })
    }

    /// The most recently written session of `cwd` (a session of another directory whose
    /// name maps to the same slug is skipped).
    fn latest(&self, cwd: &Path) -> Option<(String, PathBuf)> {
        let want = cwd.display().to_string();
        self.project_dirs_of(cwd)
            .iter()
            .flat_map(|d| transcripts_in(d))
            .filter(|(_, p, _)| session_cwd(p).is_none_or(|c| c == want))
            .max_by_key(|(_, _, t)| *t)
            .map(|(id, p, _)| (id, p))
    }

    /// Every project directory, the current ones first, then the old ones.
    pub(super) fn project_dirs(&self) -> Vec<PathBuf> {
        let mut all = Vec::new();
        for root in std::iter::once(self.projects_dir()).chain(self.legacy.clone()) {
            let Ok(rd) = std::fs::read_dir(root) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            all.extend(dirs);
        }
        all
    }
}

/// `(id, path, modified)` of every `*.jsonl` in `dir`.
pub(super) fn transcripts_in(dir: &Path) -> Vec<(String, PathBuf, SystemTime)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let path = e.path();
            let id = path
                .file_name()?
                .to_str()?
                .strip_suffix(".jsonl")?
                .to_owned();
            let meta = e.metadata().ok()?;
            meta.is_file()
                .then(|| (id, path, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
        })
        .collect()
}

/// The working directory of a transcript: its header's, else the first entry's that names
/// one (a file Claude Code wrote has no header). Only the file's first 64 KiB are read.
pub(super) fn session_cwd(path: &Path) -> Option<String> {
    if let Some(h) = super::reader::read_header(path) {
        return Some(h.cwd);
    }
    let f = File::open(path).ok()?;
    BufReader::new(f.take(64 * 1024))
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l).ok()?;
            v.get("cwd")?.as_str().map(str::to_owned)
        })
}

fn normalize_id(id: &str) -> Result<String, OpenError> {
    uuid::Uuid::parse_str(id.trim())
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| OpenError::NotAnId { id: id.to_owned() })
}

/// `frame` as part of session `id` (a fork's copy).
fn with_session(frame: &Frame, id: &str) -> Frame {
    let mut f = frame.clone();
    match &mut f {
        Frame::User(u) => u.session_id = id.to_owned(),
        Frame::Assistant(a) => a.session_id = id.to_owned(),
        _ => {}
    }
    f
}

/// A zero-byte transcript is not an empty conversation to resume silently: it lost everything.
fn refuse_empty(id: &str, path: &Path) -> Result<(), OpenError> {
    match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 => Err(OpenError::Empty {
            id: id.to_owned(),
            path: path.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// Resumes a transcript that is readable but not writable (a read-only file system, say): it
/// is loaded anyway, so the run can start and end with a result that says what failed.
fn resume_read_only(id: String, path: PathBuf, e: &std::io::Error) -> Result<Opened, OpenError> {
    let (loaded, rebuilt) =
        super::load_file(&path, &id, false).map_err(|source| OpenError::Read {
            path: path.clone(),
            source,
        })?;
    let message = format!(
        "could not open the transcript {} for writing: {e}",
        path.display()
    );
    let message = PersistError::io(PersistOp::Create, &path, e, message);
    Ok(Opened {
        notices: notices(&loaded, &rebuilt, Disposition::ReadOnly),
        history: rebuilt.history,
        writer: Arc::new(TranscriptWriter::broken(path, id.clone(), message)),
        session_id: id.clone(),
        resumed_from: Some(id),
    })
}

/// Makes the end of a resumed transcript (locked, read) well-formed before anything is
/// appended: an incomplete last record is cut off, a missing newline added, and a file with
/// nothing readable left gets a header again. Returns the length the writer goes on from, and
/// what failed.
fn repair_end(
    file: &File,
    path: &Path,
    id: &str,
    req: &OpenRequest<'_>,
    loaded: &super::Loaded,
) -> (u64, Result<(), PersistError>) {
    // `Write` is implemented for `&File`: the caller keeps the file, for the writer.
    let mut out = file;
    let mut len = loaded.good_len;
    let mut cut = Ok(());
    if len < loaded.file_len {
        cut = file.set_len(len).map_err(|e| {
            let message = format!(
                "could not cut the incomplete last record off the transcript {}: {e}",
                path.display()
            );
            PersistError::io(PersistOp::Write, path, &e, message)
        });
    }
    if cut.is_ok() && loaded.needs_newline {
        cut = out.write_all(b"\n").map(|_| len += 1).map_err(|e| {
            let message = format!("could not write the transcript {}: {e}", path.display());
            PersistError::io(PersistOp::Write, path, &e, message)
        });
    }
    if cut.is_ok() && len == 0 {
        // Nothing readable was left, not even the header: start the file again with one.
        let header = SessionHeader::new(id, req.cwd, req.model);
        let mut line = serde_json::to_vec(&header).unwrap_or_default();
        line.push(b'\n');
        cut = out
            .write_all(&line)
            .map(|_| len = line.len() as u64)
            .map_err(|e| {
                let message = format!("could not write the transcript {}: {e}", path.display());
                PersistError::io(PersistOp::Write, path, &e, message)
            });
    }
    (len, cut)
}
