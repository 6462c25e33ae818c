//! Which session a run belongs to, from the flags (`--resume`, `--continue`, `--fork-session`,
//! `--session-id`) and `KEEL_HOME`/`KEEL_FSYNC`: every input mode starts its session here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_core::history::History;
use keel_core::transcript::{FsyncMode, Notice, OpenRequest, Start, Store, TranscriptWriter};
use keel_core::SessionConfig;

use crate::args::Cli;
use crate::run::{Env, StartError, UsageError};

/// The session a run starts with.
pub struct SessionStart {
    /// Its transcript writer.
    pub writer: Arc<TranscriptWriter>,
    /// The conversation so far (empty for a new session).
    pub history: History,
    /// What loading found and repaired (already shown on stderr).
    pub notices: Vec<Notice>,
}

/// `$KEEL_HOME`, else `$HOME/.keel`. A relative `KEEL_HOME` is taken from `cwd`.
pub fn keel_home(env: &Env, cwd: &Path) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let home = match nonempty("KEEL_HOME") {
        Some(h) => PathBuf::from(h),
        None => PathBuf::from(nonempty("HOME")?).join(".keel"),
    };
    Some(if home.is_absolute() {
        home
    } else {
        cwd.join(home)
    })
}

/// The durability setting from `KEEL_FSYNC` (default `turn`).
pub fn fsync_mode(env: &Env) -> Result<FsyncMode, UsageError> {
    match env("KEEL_FSYNC").filter(|v| !v.trim().is_empty()) {
        None => Ok(FsyncMode::default()),
        Some(v) => FsyncMode::parse(&v).ok_or_else(|| {
            UsageError(format!(
                "Error: KEEL_FSYNC must be `turn` (fsync at every turn boundary, the default) or `message` (fsync every message), got {v:?}"
            ))
        }),
    }
}

fn start(cli: &Cli) -> Result<Start, UsageError> {
    let start = match (&cli.resume, cli.continue_session) {
        (Some(_), true) => {
            return Err(UsageError(
                "Error: use either --resume <id> or --continue, not both".into(),
            ))
        }
        (Some(id), false) => Start::Resume(id.clone()),
        (None, true) => Start::Continue,
        (None, false) => Start::New,
    };
    if cli.fork_session && start == Start::New {
        return Err(UsageError(
            "Error: --fork-session branches off an existing session; use it with --resume <id> or --continue".into(),
        ));
    }
    if let Some(id) = &cli.session_id {
        if uuid::Uuid::parse_str(id.trim()).is_err() {
            return Err(UsageError(format!(
                "Error: --session-id must be a UUID (like 123e4567-e89b-12d3-a456-426614174000), got {id:?}"
            )));
        }
        if start != Start::New && !cli.fork_session {
            return Err(UsageError(
                "Error: a resumed session keeps its id; --session-id with --resume or --continue needs --fork-session (the id of the fork)".into(),
            ));
        }
    }
    Ok(start)
}

/// Open (or create) the session the flags ask for, and set `cfg.session_id` to its id.
/// A session that cannot be found is an error (exit 1); a transcript that cannot be written is
/// not: the run starts and ends with an error result that names the file and the OS error.
pub fn open(cli: &Cli, env: &Env, cfg: &mut SessionConfig) -> Result<SessionStart, StartError> {
    let start = start(cli)?;
    let fsync = fsync_mode(env)?;
    let Some(home) = keel_home(env, &cfg.cwd) else {
        let message = "keel has nowhere to keep the session transcript: neither KEEL_HOME nor HOME is set; set KEEL_HOME to a writable directory".to_owned();
        if start != Start::New {
            return Err(StartError::failed(format!("Error: {message}")));
        }
        let id = cfg.session_id.clone();
        return Ok(SessionStart {
            writer: Arc::new(TranscriptWriter::broken(PathBuf::new(), id, message)),
            history: History::new(),
            notices: Vec::new(),
        });
    };
    let store = Store::new(home);
    let opened = store
        .open(&OpenRequest {
            cwd: &cfg.cwd,
            model: &cfg.model,
            fsync,
            start,
            fork: cli.fork_session,
            session_id: cli.session_id.clone(),
        })
        .map_err(|e| StartError::failed(format!("Error: {e}")))?;
    for n in &opened.notices {
        eprintln!("keel: warning: {}", n.message);
    }
    cfg.session_id = opened.session_id;
    cfg.transcript_path = Some(opened.writer.path().to_owned());
    Ok(SessionStart {
        writer: opened.writer,
        history: opened.history,
        notices: opened.notices,
    })
}
