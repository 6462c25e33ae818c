//! The transcript writer: the [`Persist`] behind a session's emitter.
//!
//! Every record is one `write` of the whole line (newline included) on a file opened with
//! `O_APPEND`, so it is in the OS before the frame reaches any consumer, and a kill of keel
//! cannot lose it. `sync` fsyncs; [`FsyncMode::Message`] fsyncs every record as well. A failed
//! write is cut back off the file (so no half line is left behind) and reported with the path
//! and the OS error; it is never swallowed. The file is locked (`flock`) while a writer holds
//! it, so two keels cannot append to one session.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use keel_protocol::{AssistantFrame, Frame, UserFrame};
use nix::fcntl::{Flock, FlockArg};

use super::cc::{entry_line, Place};
use super::mirror::MirrorSink;
use super::{FsyncMode, SessionHeader};
use crate::event::Emitted;
use crate::ids::{new_uuid, now_rfc3339};
use crate::persist::{Persist, PersistError, PersistOp};

/// Where the records go.
enum Target {
    /// Not created yet: created at the first append, starting with these lines (the header and,
    /// for a fork, the copied history). Runs that never start leave no file behind.
    Pending { prefix: Vec<u8> },
    /// Open, locked, `len` bytes long (every byte a complete record).
    Open {
        file: Flock<File>,
        len: u64,
        dirty: bool,
    },
    /// The file cannot be written at all: every append fails with this error.
    Broken(PersistError),
}

struct State {
    target: Target,
    /// The last entry of the main file's `parentUuid` chain.
    last_uuid: Option<String>,
    /// A file created since the last sync: its directory entry must be made durable too.
    new_file: bool,
}

/// Appends frame records to one session's transcript.
pub struct TranscriptWriter {
    path: PathBuf,
    session_id: String,
    cwd: String,
    /// The file is in keel's old format: records go on in that format.
    legacy: bool,
    /// A subagent's file: its agent id (its entries are a sidechain, as Claude Code's are).
    agent_id: Option<String>,
    mode: FsyncMode,
    state: Mutex<State>,
    /// `--session-mirror`: where every appended line also goes, and the path to name.
    mirror: std::sync::OnceLock<(MirrorSink, PathBuf)>,
}

impl std::fmt::Debug for TranscriptWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptWriter")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// One line (newline included) for `frame`, its uuid, and whether it joins the file's
/// `parentUuid` chain (user and assistant entries do; keel's own entries do not).
fn record_line(
    frame: &Frame,
    place: &Place<'_>,
) -> Result<(String, bool, Vec<u8>), serde_json::Error> {
    let uuid = frame
        .uuid()
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(new_uuid);
    let timestamp = match frame {
        Frame::User(UserFrame {
            timestamp: Some(t), ..
        })
        | Frame::Assistant(AssistantFrame {
            timestamp: Some(t), ..
        }) => t.clone(),
        _ => now_rfc3339(),
    };
    let (chained, line) = entry_line(frame, place, &uuid, &timestamp)?;
    Ok((uuid, chained, line))
}

/// keel's old record format, still written to a file that holds it (a resumed old session),
/// so that no file mixes two formats.
#[derive(serde::Serialize)]
struct LegacyRecordOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    uuid: &'a str,
    parent_uuid: Option<&'a str>,
    session_id: &'a str,
    timestamp: String,
    frame: &'a Frame,
}

fn legacy_line(
    frame: &Frame,
    session_id: &str,
    parent: Option<&str>,
) -> Result<(String, bool, Vec<u8>), serde_json::Error> {
    let uuid = frame
        .uuid()
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(new_uuid);
    let mut line = serde_json::to_vec(&LegacyRecordOut {
        kind: "frame",
        uuid: &uuid,
        parent_uuid: parent,
        session_id,
        timestamp: now_rfc3339(),
        frame,
    })?;
    line.push(b'\n');
    Ok((uuid, true, line))
}

impl TranscriptWriter {
    /// A writer for a new transcript at `path`, created at the first append with `header` and
    /// then `history` (a fork's copy of the conversation) as its first records.
    pub fn create_lazily(
        path: PathBuf,
        header: &SessionHeader,
        history: &[Frame],
        mode: FsyncMode,
    ) -> Result<Self, PersistError> {
        Self::create_lazily_as(path, header, history, mode, None)
    }

    /// [`TranscriptWriter::create_lazily`] for the file of subagent `agent_id`
    /// (`<session>/subagents/agent-<id>.jsonl`): its entries are marked as Claude Code marks
    /// a subagent's (`isSidechain`, `agentId`).
    pub fn create_lazily_as(
        path: PathBuf,
        header: &SessionHeader,
        history: &[Frame],
        mode: FsyncMode,
        agent_id: Option<&str>,
    ) -> Result<Self, PersistError> {
        let bad = |e: serde_json::Error| encode_error(&e);
        let mut prefix = serde_json::to_vec(header).map_err(bad)?;
        prefix.push(b'\n');
        let mut last: Option<String> = None;
        for f in history {
            let place = Place {
                session_id: &header.session_id,
                cwd: &header.cwd,
                parent: last.as_deref(),
                agent_id,
            };
            let (uuid, chained, line) = record_line(f, &place).map_err(bad)?;
            prefix.extend_from_slice(&line);
            if chained {
                last = Some(uuid);
            }
        }
        Ok(Self {
            path,
            session_id: header.session_id.clone(),
            cwd: header.cwd.clone(),
            legacy: false,
            agent_id: agent_id.map(str::to_owned),
            mode,
            state: Mutex::new(State::new(Target::Pending { prefix }, last)),
            mirror: std::sync::OnceLock::new(),
        })
    }

    /// A writer appending to an existing, already locked and cut transcript of `len` bytes.
    /// `last_uuid` is the last entry of the file's `parentUuid` chain.
    pub(crate) fn continuing(
        path: PathBuf,
        session_id: String,
        cwd: String,
        file: Flock<File>,
        len: u64,
        last_uuid: Option<String>,
        (legacy, mode): (bool, FsyncMode),
    ) -> Self {
        let target = Target::Open {
            file,
            len,
            dirty: false,
        };
        Self {
            path,
            session_id,
            cwd,
            legacy,
            agent_id: None,
            mode,
            state: Mutex::new(State::new(target, last_uuid)),
            mirror: std::sync::OnceLock::new(),
        }
    }

    /// A writer for a transcript that cannot be written: every append fails with `error`,
    /// so the run ends with an error result that says so.
    pub fn broken(path: PathBuf, session_id: String, error: PersistError) -> Self {
        Self {
            path,
            session_id,
            cwd: String::new(),
            legacy: false,
            agent_id: None,
            mode: FsyncMode::Turn,
            state: Mutex::new(State::new(Target::Broken(error), None)),
            mirror: std::sync::OnceLock::new(),
        }
    }

    /// Hand every line appended from now on (a new file's first lines included) to `sink`
    /// as well, after it is written, naming the file `shown_as` (the final path of a file
    /// written under a temporary name). Set once; later calls are ignored.
    pub fn mirror_to(&self, sink: MirrorSink, shown_as: PathBuf) {
        let _ = self.mirror.set((sink, shown_as));
    }

    /// The writer of session `session_id`, started in this process after this one (`/clear`):
    /// its file beside this one, created at its first record, as durable as this one and
    /// mirrored where this one is. This file is left as it is: complete and resumable.
    pub fn next_session(&self, session_id: &str, model: &str) -> TranscriptWriter {
        let path = match self.path.as_os_str().is_empty() {
            true => PathBuf::new(),
            false => self.path.with_file_name(format!("{session_id}.jsonl")),
        };
        if let Target::Broken(e) = &self.lock().target {
            return Self::broken(path, session_id.to_owned(), e.clone());
        }
        let header = SessionHeader::new(session_id, Path::new(&self.cwd), model);
        let w = Self::create_lazily(path.clone(), &header, &[], self.mode)
            .unwrap_or_else(|e| Self::broken(path.clone(), session_id.to_owned(), e));
        if let Some((sink, _)) = self.mirror.get() {
            w.mirror_to(sink.clone(), path);
        }
        w
    }

    /// The transcript file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session the records belong to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The durability setting.
    pub fn mode(&self) -> FsyncMode {
        self.mode
    }

    /// Whether the file exists yet (a new session's file is created at its first record).
    pub fn is_created(&self) -> bool {
        matches!(self.lock().target, Target::Open { .. })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Append one frame as a record (`stream_event` frames are partial and are not kept).
    pub fn append_frame(&self, frame: &Frame) -> Result<(), PersistError> {
        self.append_record(frame)
    }

    fn append_record(&self, frame: &Frame) -> Result<(), PersistError> {
        if matches!(frame, Frame::StreamEvent(_)) {
            return Ok(());
        }
        let mut st = self.lock();
        let created = self.ensure_open(&mut st)?;
        let line = if self.legacy {
            let (uuid, _, line) = legacy_line(frame, &self.session_id, st.last_uuid.as_deref())
                .map_err(|e| encode_error(&e))?;
            let Target::Open { file, len, dirty } = &mut st.target else {
                unreachable!("ensure_open leaves the file open");
            };
            append_line(file, &self.path, len, &line)?;
            *dirty = true;
            st.last_uuid = Some(uuid);
            line
        } else {
            let place = Place {
                session_id: &self.session_id,
                cwd: &self.cwd,
                parent: st.last_uuid.as_deref(),
                agent_id: self.agent_id.as_deref(),
            };
            let (uuid, chained, line) = record_line(frame, &place).map_err(|e| encode_error(&e))?;
            let Target::Open { file, len, dirty } = &mut st.target else {
                unreachable!("ensure_open leaves the file open");
            };
            append_line(file, &self.path, len, &line)?;
            *dirty = true;
            if chained {
                st.last_uuid = Some(uuid);
            }
            line
        };
        // The mirror tap: after the local write, under the lock, so batches keep file order.
        if let Some((sink, shown)) = self.mirror.get() {
            match created {
                Some(mut first) => {
                    first.extend_from_slice(&line);
                    sink.offer(shown, &first);
                }
                None => sink.offer(shown, &line),
            }
        }
        if self.mode == FsyncMode::Message {
            drop(st);
            return self.sync_records();
        }
        Ok(())
    }

    /// fsync what was appended since the last sync.
    pub fn sync_now(&self) -> Result<(), PersistError> {
        self.sync_records()
    }

    fn sync_records(&self) -> Result<(), PersistError> {
        let mut st = self.lock();
        let new_file = std::mem::take(&mut st.new_file);
        match &mut st.target {
            Target::Open { file, dirty, .. } => {
                if new_file {
                    // The new directory entry must be durable too, or a power loss can lose
                    // the whole file.
                    file.sync_all().map_err(|e| self.sync_error(e))?;
                    let dir = self.path.parent().unwrap_or(Path::new("."));
                    sync_dir(dir).map_err(|e| self.sync_error(e))?;
                    *dirty = false;
                } else if *dirty {
                    file.sync_data().map_err(|e| self.sync_error(e))?;
                    *dirty = false;
                }
                Ok(())
            }
            Target::Pending { .. } => Ok(()),
            Target::Broken(m) => Err(m.clone()),
        }
    }

    fn sync_error(&self, e: std::io::Error) -> PersistError {
        let message = format!(
            "could not flush the transcript {} to disk: {e}",
            self.path.display()
        );
        PersistError::io(PersistOp::Sync, &self.path, &e, message)
    }

    /// Open the file if it is not yet; when this call created it, the lines it started with.
    fn ensure_open(&self, st: &mut State) -> Result<Option<Vec<u8>>, PersistError> {
        let prefix = match &st.target {
            Target::Open { .. } => return Ok(None),
            Target::Broken(m) => return Err(m.clone()),
            Target::Pending { prefix } => prefix,
        };
        let (file, len) = create(&self.path, prefix)?;
        let before = std::mem::replace(
            &mut st.target,
            Target::Open {
                file,
                len,
                dirty: true,
            },
        );
        let Target::Pending { prefix } = before else {
            unreachable!("matched Pending above");
        };
        // Made durable (file and directory entry) at the next sync, not here: creating the
        // file must not delay the first model request.
        st.new_file = true;
        Ok(Some(prefix))
    }
}

/// Create the file (and its directories), lock it, and write `prefix` (flushed to the OS; the
/// caller makes it durable at its next sync).
fn create(path: &Path, prefix: &[u8]) -> Result<(Flock<File>, u64), PersistError> {
    let shown = path.display();
    make_dir(path.parent().unwrap_or(Path::new(".")), path)?;
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| {
            let message = format!("could not create the transcript {shown}: {e}");
            PersistError::io(PersistOp::Create, path, &e, message)
        })?;
    let file = lock_exclusive(file).map_err(|e| {
        let message = format!("could not lock the transcript {shown}: {e}");
        PersistError::io(PersistOp::Lock, path, &e, message)
    })?;
    let mut len = 0;
    append_line(&file, path, &mut len, prefix)?;
    Ok((file, len))
}

/// Append whole lines to a transcript file (`len` bytes long before, updated after). THE one
/// place through which every line of every transcript file (main and subagent) is written:
/// a failed write is cut back off, so the file holds only whole lines.
fn append_line(file: &File, path: &Path, len: &mut u64, line: &[u8]) -> Result<(), PersistError> {
    let mut f = file;
    if let Err(e) = f.write_all(line) {
        let _ = file.set_len(*len);
        let message = format!("could not write the transcript {}: {e}", path.display());
        return Err(PersistError::io(PersistOp::Write, path, &e, message));
    }
    *len += line.len() as u64;
    Ok(())
}

/// Create `dir` (and its parents) for the transcript `path`.
fn make_dir(dir: &Path, path: &Path) -> Result<(), PersistError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            let message = format!(
                "could not create the transcript directory {} (for {}): {e}",
                dir.display(),
                path.display()
            );
            PersistError::io(PersistOp::Create, dir, &e, message)
        })
}

impl State {
    fn new(target: Target, last_uuid: Option<String>) -> Self {
        Self {
            target,
            last_uuid,
            new_file: false,
        }
    }
}

/// A record that could not be turned into JSON (a keel bug: records are keel's own types).
fn encode_error(e: &serde_json::Error) -> PersistError {
    PersistError::new(
        PersistOp::Encode,
        format!("could not encode a transcript record: {e}"),
    )
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    match File::open(dir).and_then(|d| d.sync_all()) {
        // Some file systems cannot fsync a directory; the file itself is synced.
        Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => Ok(()),
        other => other,
    }
}

/// Take the writer's lock on a transcript without waiting. `WouldBlock` means another keel
/// holds it.
pub(crate) fn lock_exclusive(file: File) -> std::io::Result<Flock<File>> {
    try_lock(file).map_err(|(_, e)| e)
}

/// Take the writer's lock, waiting at most `patience` for it. The lock lives as long as any
/// process holds the file open: a command keel was starting when it was killed can hold it
/// for a moment (between its fork and its exec), so a resume right after a crash waits briefly
/// instead of calling the session busy. `WouldBlock` means it stayed held.
pub(crate) fn lock_exclusive_within(
    mut file: File,
    patience: std::time::Duration,
) -> std::io::Result<Flock<File>> {
    let deadline = std::time::Instant::now() + patience;
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match try_lock(file) {
            Ok(f) => return Ok(f),
            Err((f, e))
                if e.kind() == std::io::ErrorKind::WouldBlock
                    && std::time::Instant::now() < deadline =>
            {
                file = f;
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
            }
            Err((_, e)) => return Err(e),
        }
    }
}

fn try_lock(file: File) -> Result<Flock<File>, (File, std::io::Error)> {
    Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|(f, errno)| (f, std::io::Error::from_raw_os_error(errno as i32)))
}

impl Persist for TranscriptWriter {
    fn append(&self, e: &Emitted) -> Result<(), PersistError> {
        self.append_frame(&crate::wire::frame(e))
    }

    fn sync(&self) -> Result<(), PersistError> {
        self.sync_now()
    }

    fn next_session(
        &self,
        session_id: &str,
        model: &str,
    ) -> Option<(std::sync::Arc<dyn Persist>, PathBuf)> {
        let w = TranscriptWriter::next_session(self, session_id, model);
        let path = w.path().to_path_buf();
        Some((std::sync::Arc::new(w), path))
    }
}
