//! Background tasks: background subagents and `Bash` with `run_in_background`.
//!
//! Each task has its own cancel token under the session's background root — a turn interrupt
//! does not reach it. When a task ends, a task event is emitted at once, its output is
//! persisted, and the main conversation is told at its next model call. `TaskOutput` waits on
//! the task's state (never reports a finished task as timed out, notices a worker that died);
//! `KillShell`/`TaskStop` stop one task; ending the session stops them all and reports each as
//! killed. The list is bounded: at most [`MAX_RUNNING`] tasks run at once, and finished tasks
//! the model was told about are forgotten once more than [`MAX_KEPT`] are kept.

mod log;
mod tools;

use log::{last_line, summary};
pub(crate) use log::{read_log, shell_quote};

pub use tools::{BackgroundBash, OutputInput, TaskOutputTool, TaskStopTool};

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_protocol::CancelReason;
use keel_tools::CancelToken;
use tokio::sync::watch;

use crate::emit::Emitter;
use crate::event::{Event, TaskEnd, TaskEvent};

/// The most background tasks that may run at once in one session.
pub const MAX_RUNNING: usize = 64;
/// The most tasks a session remembers (running ones always; finished ones until told).
pub const MAX_KEPT: usize = 512;

pub use crate::task_types::{KilledBy, Limit, TaskKind, TaskStatus};

/// A task could not be found or started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// No task has this id.
    #[error("{}", unknown_text(.id, .known))]
    Unknown {
        /// The id asked for.
        id: String,
        /// The ids of the session's tasks.
        known: Vec<String>,
    },
    /// Too many tasks run already.
    #[error("{running} background tasks are running, the most a session allows ({MAX_RUNNING}); wait for one to end (TaskOutput) or stop one (TaskStop)")]
    TooMany {
        /// How many run.
        running: usize,
    },
}

fn unknown_text(id: &str, known: &[String]) -> String {
    if known.is_empty() {
        format!(
            "There is no background task {id:?}; no background task was started in this session."
        )
    } else {
        format!(
            "There is no background task {id:?}. The tasks of this session are: {}.",
            known.join(", ")
        )
    }
}

struct Task {
    id: String,
    kind: TaskKind,
    description: String,
    state: watch::Sender<(TaskStatus, String)>,
    token: CancelToken,
    kill_by: Mutex<Option<KilledBy>>,
    notified: AtomicBool,
    /// Where its output goes while it runs, when not the default log (a command moved to the
    /// background keeps writing the live log it started with).
    log: Option<PathBuf>,
}

impl Task {
    fn running(&self) -> bool {
        self.state.borrow().0 == TaskStatus::Running
    }
}

type MovableCalls = std::collections::HashMap<String, (tokio::sync::oneshot::Sender<()>, bool)>;

/// How a movable foreground call's work came back.
pub(crate) enum Movable<T> {
    /// It finished (or was stopped) in the foreground.
    Done(Result<T, tokio::task::JoinError>),
    /// The user moved it; it is still running.
    Moved(tokio::task::JoinHandle<T>),
}

/// The background tasks of one session.
pub struct TaskManager {
    tasks: Mutex<Vec<Arc<Task>>>,
    root: CancelToken,
    emitter: Emitter,
    dir: Option<PathBuf>,
    next: AtomicU64,
    /// Ids taken in call order for calls that have not started yet, by tool_use id.
    reserved: Mutex<std::collections::HashMap<String, String>>,
    /// Set once the session ends: later endings are recorded and logged, not streamed (the
    /// run's `result` has already been sent and stays the last frame).
    closing: AtomicBool,
    /// Whether a running foreground command may be moved to the background (an interactive
    /// front end offers it; headless runs never do).
    backgrounding: AtomicBool,
    /// The foreground calls that can be moved to the background now, by tool_use id, and
    /// whether each is a subagent.
    movable: Mutex<MovableCalls>,
}

impl std::fmt::Debug for TaskManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskManager").finish_non_exhaustive()
    }
}

impl TaskManager {
    /// A manager whose events go through `emitter` and whose outputs are saved in `dir`.
    pub(crate) fn new(emitter: Emitter, dir: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            tasks: Mutex::new(Vec::new()),
            root: CancelToken::new(),
            emitter,
            dir,
            next: AtomicU64::new(1),
            reserved: Mutex::default(),
            closing: AtomicBool::new(false),
            backgrounding: AtomicBool::new(false),
            movable: Mutex::default(),
        })
    }

    /// Let the user move running foreground commands to the background (an interactive front
    /// end calls this once; see [`crate::SessionHandle::background_running_calls`]).
    pub fn enable_backgrounding(&self) {
        self.backgrounding.store(true, Ordering::Relaxed);
    }

    /// Whether running foreground commands may be moved to the background.
    pub fn backgrounding(&self) -> bool {
        self.backgrounding.load(Ordering::Relaxed)
    }

    fn movable(&self) -> std::sync::MutexGuard<'_, MovableCalls> {
        self.movable.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for a foreground call's work, already running under `own` (a token of
    /// [`child_token`](Self::child_token)): pass the turn's interrupt on to it, stop it at
    /// `timeout`, or — when the user asks — hand it back still running, to become a task.
    pub(crate) async fn run_movable<T: Send + 'static>(
        &self,
        kind: &TaskKind,
        tool_use_id: &str,
        turn: &CancelToken,
        own: &CancelToken,
        timeout: Option<Duration>,
        mut run: tokio::task::JoinHandle<T>,
    ) -> Movable<T> {
        let (tx, mut moved) = tokio::sync::oneshot::channel();
        self.movable().insert(
            tool_use_id.to_owned(),
            (tx, matches!(kind, TaskKind::Agent { .. })),
        );
        let deadline = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let mut offered = true;
        let out = loop {
            tokio::select! {
                r = &mut run => break Movable::Done(r),
                _ = turn.cancelled() => {
                    own.cancel(turn.reason().unwrap_or(CancelReason::UserInterrupted));
                    break Movable::Done(run.await);
                }
                _ = &mut deadline => {
                    own.cancel(CancelReason::Timeout);
                    break Movable::Done(run.await);
                }
                asked = &mut moved, if offered && self.has_room() => {
                    if asked.is_err() {
                        // The offer went away without a request: keep waiting without it.
                        offered = false;
                        continue;
                    }
                    break Movable::Moved(run);
                }
            }
        };
        self.movable().remove(tool_use_id);
        out
    }

    /// Ask the movable foreground calls to move to the background: the foreground subagents
    /// when one runs (a command running inside one goes along with it), else the commands.
    /// Returns the ids of the calls asked.
    pub fn move_to_background(&self) -> Vec<String> {
        let mut calls = self.movable();
        let agents = calls.values().any(|(_, agent)| *agent);
        // Collected first: the removals below need `calls` mutably.
        #[allow(clippy::needless_collect)]
        let ids: Vec<String> = calls
            .iter()
            .filter(|(_, (_, agent))| *agent == agents)
            .map(|(id, _)| id.clone())
            .collect();
        let asked: Vec<_> = ids
            .into_iter()
            .filter_map(|id| calls.remove(&id).map(|(tx, _)| (id, tx)))
            .collect();
        drop(calls);
        asked
            .into_iter()
            .filter_map(|(id, tx)| tx.send(()).ok().map(|()| id))
            .collect()
    }

    /// Whether one more task may start now.
    pub(crate) fn has_room(&self) -> bool {
        self.list().iter().filter(|t| t.running()).count() < MAX_RUNNING
    }

    /// A cancel token under the background root: the session's end stops what runs under it,
    /// a turn's interrupt does not.
    pub(crate) fn child_token(&self) -> CancelToken {
        self.root.child()
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Task>>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn find(&self, id: &str) -> Result<Arc<Task>, TaskError> {
        let list = self.list();
        list.iter()
            .find(|t| t.id == id)
            .cloned()
            .ok_or_else(|| TaskError::Unknown {
                id: id.to_owned(),
                known: list.iter().map(|t| t.id.clone()).collect(),
            })
    }

    /// Make room for one more task: refuse past [`MAX_RUNNING`], forget the oldest finished
    /// tasks the model was told about past [`MAX_KEPT`].
    fn admit(&self, task: Arc<Task>) -> Result<(), TaskError> {
        let mut list = self.list();
        let running = list.iter().filter(|t| t.running()).count();
        if running >= MAX_RUNNING {
            return Err(TaskError::TooMany { running });
        }
        while list.len() >= MAX_KEPT {
            let Some(i) = list
                .iter()
                .position(|t| !t.running() && t.notified.load(Ordering::Relaxed))
            else {
                break;
            };
            list.remove(i);
        }
        list.push(task);
        Ok(())
    }

    /// Start a task. `work` gets the task's own cancel token and returns how it ended and its
    /// output. Returns the task id.
    pub async fn spawn<F, Fut>(
        self: &Arc<Self>,
        kind: TaskKind,
        description: String,
        id: Option<String>,
        work: F,
    ) -> Result<String, TaskError>
    where
        F: FnOnce(CancelToken) -> Fut,
        Fut: Future<Output = (TaskStatus, String)> + Send + 'static,
    {
        let token = self.root.child();
        let work = work(token.clone());
        self.start(kind, description, id, token, None, work).await
    }

    /// Start a task from work already under way with `token` (a foreground command the user
    /// moved to the background), whose output so far and from now on is in `log`.
    pub(crate) async fn start<Fut>(
        self: &Arc<Self>,
        kind: TaskKind,
        description: String,
        id: Option<String>,
        token: CancelToken,
        log: Option<PathBuf>,
        work: Fut,
    ) -> Result<String, TaskError>
    where
        Fut: Future<Output = (TaskStatus, String)> + Send + 'static,
    {
        let id = id.unwrap_or_else(|| self.next_id(&kind));
        let (state, _) = watch::channel((TaskStatus::Running, String::new()));
        let task = Arc::new(Task {
            id: id.clone(),
            kind: kind.clone(),
            description: description.clone(),
            state,
            token: token.clone(),
            kill_by: Mutex::new(None),
            notified: AtomicBool::new(false),
            log,
        });
        self.admit(task.clone())?;
        let _ = self
            .emitter
            .emit(Event::Task(TaskEvent {
                task_id: id.clone(),
                description,
                kind,
                tool_use_id: None,
                end: None,
            }))
            .await;
        let handle = tokio::spawn(work);
        let me = self.clone();
        tokio::spawn(async move {
            let (mut status, output) = match handle.await {
                Ok(r) => r,
                Err(e) => (
                    TaskStatus::Failed(format!(
                        "the task's worker died ({})",
                        if e.is_panic() {
                            "it panicked"
                        } else {
                            "it was cancelled"
                        }
                    )),
                    String::new(),
                ),
            };
            let kill_by = *task.kill_by.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(by) = kill_by {
                if status != TaskStatus::Completed {
                    status = TaskStatus::Killed(by);
                }
            }
            me.finish(&task, status, output).await;
        });
        Ok(id)
    }

    async fn finish(&self, task: &Task, status: TaskStatus, output: String) {
        let saved = match &self.dir {
            Some(dir) => {
                let path = dir.join(format!("{}.output", task.id));
                let (dir, out) = (dir.clone(), output.clone());
                let p = path.clone();
                let written = tokio::task::spawn_blocking(move || {
                    std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&p, out))
                })
                .await;
                matches!(written, Ok(Ok(()))).then_some(path)
            }
            None => None,
        };
        task.state.send_replace((status.clone(), output.clone()));
        let event = Event::Task(TaskEvent {
            task_id: task.id.clone(),
            description: task.description.clone(),
            kind: task.kind.clone(),
            tool_use_id: None,
            end: Some(TaskEnd {
                summary: summary(&task.description, &status, &output),
                status: status.clone(),
                output_file: saved,
            }),
        });
        if self.closing.load(Ordering::SeqCst) {
            eprintln!(
                "keel: background task {} ({}) was stopped at the end of the session: {}",
                task.id,
                task.description,
                status.describe()
            );
            let _ = self.emitter.record(event).await;
        } else {
            let _ = self.emitter.emit(event).await;
        }
    }

    /// A fresh task id (`shell_N`, `agent_N`), for work that needs its id before it starts.
    pub fn next_id(&self, kind: &TaskKind) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}_{n}", kind.name())
    }

    /// Take the next id now for the call `tool_use_id`, which starts later.
    pub fn reserve_id(&self, tool_use_id: &str, kind: &TaskKind) {
        let id = self.next_id(kind);
        self.reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tool_use_id.to_owned(), id);
    }

    /// The id reserved for `tool_use_id`, or a fresh one.
    pub fn reserved_or_next_id(&self, tool_use_id: &str, kind: &TaskKind) -> String {
        self.reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tool_use_id)
            .unwrap_or_else(|| self.next_id(kind))
    }

    /// Where a background shell writes its output while it runs (so `TaskOutput` can show it
    /// before it ends): beside the session, or in the temp directory without one.
    pub fn log_path(&self, id: &str) -> PathBuf {
        let dir = self.dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("keel-tasks-{}", std::process::id()))
        });
        dir.join(format!("{id}.log"))
    }

    /// Where a foreground command that may be moved to the background copies its output.
    pub(crate) fn live_log_path(&self, tool_use_id: &str) -> PathBuf {
        let stem = keel_tools::bash::file_stem(tool_use_id);
        self.log_path(&format!("call-{stem}"))
    }

    /// The status and output of a task, waiting up to `timeout` for it to end when `block`.
    /// For a task still running, the output is what its log holds so far.
    pub async fn output(
        &self,
        id: &str,
        block: bool,
        timeout: Duration,
    ) -> Result<(TaskStatus, String), TaskError> {
        let task = self.find(id)?;
        let mut rx = task.state.subscribe();
        if block {
            let _ = tokio::time::timeout(timeout, rx.wait_for(|(s, _)| *s != TaskStatus::Running))
                .await;
        }
        // Read the state after the wait, so a task that ended at the deadline is reported ended.
        let (status, output) = rx.borrow().clone();
        if status != TaskStatus::Running {
            task.notified.store(true, Ordering::Relaxed);
            return Ok((status, output));
        }
        let log = task.log.clone().unwrap_or_else(|| self.log_path(id));
        let so_far = tokio::task::spawn_blocking(move || read_log(&log).unwrap_or_default())
            .await
            .unwrap_or_default();
        Ok((status, so_far))
    }

    /// Stop one task; `by` is who stopped it. Waits (bounded) for it to end and returns its
    /// final status.
    pub async fn kill(&self, id: &str, by: KilledBy) -> Result<TaskStatus, TaskError> {
        let task = self.find(id)?;
        if task.running() {
            *task.kill_by.lock().unwrap_or_else(|p| p.into_inner()) = Some(by);
            task.token.cancel(if by == KilledBy::System {
                CancelReason::Shutdown
            } else {
                CancelReason::UserInterrupted
            });
        }
        let mut rx = task.state.subscribe();
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            rx.wait_for(|(s, _)| *s != TaskStatus::Running),
        )
        .await;
        let status = rx.borrow().0.clone();
        Ok(status)
    }

    /// Stop every running task (end of session). Returns `(id, final status)` for each.
    pub async fn shutdown(&self) -> Vec<(String, TaskStatus)> {
        self.closing.store(true, Ordering::SeqCst);
        let running: Vec<String> = self
            .list()
            .iter()
            .filter(|t| t.state.borrow().0 == TaskStatus::Running)
            .map(|t| t.id.clone())
            .collect();
        let mut out = Vec::new();
        for id in running {
            if let Ok(s) = self.kill(&id, KilledBy::System).await {
                out.push((id, s));
            }
        }
        out
    }

    /// Tasks that ended and that the main conversation has not been told about; marks them told.
    pub fn take_notifications(&self) -> Vec<String> {
        self.list()
            .iter()
            .filter(|t| t.state.borrow().0 != TaskStatus::Running && !t.notified.swap(true, Ordering::Relaxed))
            .map(|t| {
                let (status, output) = t.state.borrow().clone();
                let last = last_line(&output);
                format!(
                    "<task-notification>Background task {} ({}) ended: {}.{} Read its full output with TaskOutput(task_id: \"{}\").</task-notification>",
                    t.id,
                    t.description,
                    status.describe(),
                    if last.is_empty() { String::new() } else { format!(" Its last output line: {last}.") },
                    t.id
                )
            })
            .collect()
    }

    /// Ids and statuses of every task.
    pub fn statuses(&self) -> Vec<(String, TaskStatus)> {
        self.list()
            .iter()
            .map(|t| (t.id.clone(), t.state.borrow().0.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests;
