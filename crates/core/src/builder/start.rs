//! Which session a run belongs to, from the options (`--resume`, `--continue`,
//! `--fork-session`, `--session-id`, `--no-session-persistence`) and `KEEL_HOME`/`KEEL_FSYNC`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::options::FlagUuid;
use super::{BuildError, Env, SessionOptions};
use crate::history::History;
use crate::transcript::{
    FsyncMode, Notice, OpenError, OpenRequest, Start, Store, TranscriptWriter, Truncation,
};

/// The session a run starts with.
pub(crate) struct SessionStart {
    /// Its id.
    pub session_id: String,
    /// Its transcript writer; `None` when no transcript is kept.
    pub writer: Option<Arc<TranscriptWriter>>,
    /// The conversation so far (empty for a new session).
    pub history: History,
    /// What loading found and repaired.
    pub notices: Vec<Notice>,
}

pub use crate::env::{keel_home, user_config_dir};

/// The user's state file (MCP servers of the user and local scopes), as Claude Code has it:
/// `$CLAUDE_CONFIG_DIR/.claude.json`, else `$HOME/.claude.json`.
pub fn claude_json(env: &Env, cwd: &Path) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty()).map(PathBuf::from);
    let file = match nonempty("CLAUDE_CONFIG_DIR") {
        Some(d) => d.join(".claude.json"),
        None => nonempty("HOME")?.join(".claude.json"),
    };
    Some(if file.is_absolute() {
        file
    } else {
        cwd.join(file)
    })
}

/// The durability setting from `KEEL_FSYNC` (default `turn`).
fn fsync_mode(env: &Env) -> Result<FsyncMode, BuildError> {
    match env("KEEL_FSYNC").filter(|v| !v.trim().is_empty()) {
        None => Ok(FsyncMode::default()),
        Some(v) => FsyncMode::parse(&v).ok_or_else(|| {
            BuildError::Usage(format!(
                "Error: KEEL_FSYNC must be `turn` (fsync at every turn boundary, the default) or `message` (fsync every message), got {v:?}"
            ))
        }),
    }
}

fn start(o: &SessionOptions) -> Result<Start, BuildError> {
    let start = match (&o.resume, o.continue_session) {
        (Some(_), true) => {
            return Err(BuildError::Usage(
                "Error: use either --resume <id> or --continue, not both".into(),
            ))
        }
        (Some(id), false) => Start::Resume(id.clone()),
        (None, true) => Start::Continue,
        (None, false) => Start::New,
    };
    if o.fork_session && start == Start::New {
        return Err(BuildError::Usage(
            "Error: --fork-session branches off an existing session; use it with --resume <id> or --continue".into(),
        ));
    }
    if o.session_id.is_some() && start != Start::New && !o.fork_session {
        return Err(BuildError::Usage(
            "Error: a resumed session keeps its id; --session-id with --resume or --continue needs --fork-session (the id of the fork)".into(),
        ));
    }
    truncation(o)?;
    Ok(start)
}

/// `--resume-session-at` / `--resume-drops-turn`: checked here (usage errors), applied by the
/// store when it forks.
fn truncation(o: &SessionOptions) -> Result<Option<Truncation>, BuildError> {
    let Some(at) = &o.resume_session_at else {
        if o.resume_drops_turn.is_some() {
            return Err(BuildError::Usage(
                "Error: --resume-drops-turn declares the turn a --resume-session-at fork drops; give --resume-session-at too".into(),
            ));
        }
        return Ok(None);
    };
    if !o.fork_session {
        return Err(BuildError::Usage(
            "Error: --resume-session-at needs --fork-session: keel's transcripts are append-only, so a history cut short continues as a new session and the old one stays as it was".into(),
        ));
    }
    Ok(Some(Truncation {
        at: at.hyphenated(),
        drops_turn: o.resume_drops_turn.as_ref().map(FlagUuid::hyphenated),
    }))
}

/// Open (or create) the session the options ask for. A session that cannot be found is an
/// error (exit 1); a transcript that cannot be written is not: the run starts and ends with an
/// error result that names the file and the OS error.
pub(crate) fn open(
    o: &SessionOptions,
    env: &Env,
    cwd: &Path,
    model: &str,
    remote: Option<&crate::remote::RemoteTranscripts>,
) -> Result<SessionStart, BuildError> {
    let start = start(o)?;
    if o.no_session_persistence {
        if start != Start::New {
            return Err(BuildError::Usage(
                "Error: --no-session-persistence starts a session that is never written; it cannot be combined with --resume, --continue or --fork-session".into(),
            ));
        }
        return Ok(SessionStart {
            session_id: o
                .session_id
                .as_ref()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_else(crate::emit::new_uuid),
            writer: None,
            history: History::new(),
            notices: Vec::new(),
        });
    }
    let fsync = fsync_mode(env)?;
    let Some(home) = keel_home(env, cwd) else {
        let message = "keel has nowhere to keep the session transcript: neither KEEL_HOME nor HOME is set; set KEEL_HOME to a writable directory".to_owned();
        if start != Start::New {
            return Err(BuildError::Session(format!("Error: {message}")));
        }
        let id = o
            .session_id
            .as_ref()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_else(crate::emit::new_uuid);
        return Ok(SessionStart {
            writer: Some(Arc::new(TranscriptWriter::broken(
                PathBuf::new(),
                id.clone(),
                crate::emit::PersistError::new(crate::emit::PersistOp::Create, message),
            ))),
            session_id: id,
            history: History::new(),
            notices: Vec::new(),
        });
    };
    // Sessions live under the config root (CLAUDE_CONFIG_DIR, else KEEL_HOME, else
    // ~/.claude); old ones are still found under KEEL_HOME (else ~/.keel).
    let store = Store::from_env(env, cwd, Some(home.clone())).unwrap_or_else(|| Store::new(home));
    if let (Start::Resume(id), Some(remote)) = (&start, remote) {
        fetch_if_absent(&store, remote, cwd, id)?;
    }
    let cut = truncation(o)?;
    let opened = store
        .open_at(
            &OpenRequest {
                cwd,
                model,
                fsync,
                start,
                fork: o.fork_session,
                session_id: o.session_id.as_ref().map(|s| s.as_str().to_owned()),
            },
            cut.as_ref(),
            o.mirror.as_ref(),
        )
        .map_err(|e| match e {
            OpenError::Rejected(r) => BuildError::ResumeRejected(r.to_string()),
            e => BuildError::Session(format!("Error: {e}")),
        })?;
    // A new session's or a fork's file is created at its first record: mirrored from there.
    if let Some(m) = &o.mirror {
        opened
            .writer
            .mirror_to(m.clone(), opened.writer.path().to_path_buf());
    }
    Ok(SessionStart {
        session_id: opened.session_id,
        writer: Some(opened.writer),
        history: opened.history,
        notices: opened.notices,
    })
}

/// A session to resume that is not on this disk is fetched from the remote store into this
/// directory's sessions (and then resumed as if it had always been here).
fn fetch_if_absent(
    store: &Store,
    remote: &crate::remote::RemoteTranscripts,
    cwd: &Path,
    id: &str,
) -> Result<(), BuildError> {
    let id = id.trim();
    // Only a plain session id names an object (no path tricks through the id).
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Ok(());
    }
    let path = store.session_path(cwd, id);
    if path.is_file() {
        return Ok(());
    }
    let fetched = tokio::runtime::Handle::current().block_on(remote.fetch(id, &path));
    match fetched {
        Ok(true) => {
            tracing::info!("fetched session {id} from {}", remote.url());
            Ok(())
        }
        // Not there either: the local lookup says so, naming where it looked.
        Ok(false) => Ok(()),
        Err(e) => Err(BuildError::Session(format!(
            "Error: session {id} is not on this machine, and fetching it from {} failed: {e}",
            remote.url()
        ))),
    }
}
