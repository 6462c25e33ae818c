//! Background tasks: background subagents and `Bash` with `run_in_background`.
//!
//! Each task has its own cancel token under the session's background root — a turn interrupt
//! does not reach it. When a task ends, a `system/task_notification` frame is emitted at once,
//! its output is persisted, and the main conversation is told at its next model call.
//! `TaskOutput` waits on the task's state (never reports a finished task as timed out, notices a
//! worker that died); `KillShell`/`TaskStop` stop one task; ending the session stops them all
//! and reports each as killed.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_protocol::frames::TaskFrame;
use keel_protocol::{CancelReason, Extra, Frame, SystemFrame};
use keel_tools::{BoxFuture, CancelToken, Tool, ToolContext, ToolKind, ToolOutcome};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::emit::{new_uuid, Emitter};

/// How a task ended (or that it has not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// Still running.
    Running,
    /// Finished its job.
    Completed,
    /// Failed, and why.
    Failed(String),
    /// Stopped by a limit (`max_turns`, `budget`).
    Truncated(String),
    /// Stopped by someone (`user`, `parent`, `system`).
    Killed(String),
}

impl TaskStatus {
    /// The status word used in frames and tool results.
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed(_) => "failed",
            TaskStatus::Truncated(_) => "truncated",
            TaskStatus::Killed(_) => "killed",
        }
    }

    /// The status with its detail, e.g. `truncated{max_turns}`.
    pub fn describe(&self) -> String {
        match self {
            TaskStatus::Running | TaskStatus::Completed => self.as_str().to_owned(),
            TaskStatus::Failed(d) => format!("failed{{{d}}}"),
            TaskStatus::Truncated(d) => format!("truncated{{{d}}}"),
            TaskStatus::Killed(by) => format!("killed{{by: {by}}}"),
        }
    }
}

/// What kind of work a task does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// A background subagent.
    Agent {
        /// Its agent type.
        agent_type: String,
    },
    /// A background shell command.
    Shell {
        /// The command.
        command: String,
    },
}

struct Task {
    id: String,
    kind: TaskKind,
    description: String,
    state: watch::Sender<(TaskStatus, String)>,
    token: CancelToken,
    kill_by: Mutex<Option<String>>,
    notified: AtomicBool,
}

/// The background tasks of one session.
pub struct TaskManager {
    tasks: Mutex<Vec<Arc<Task>>>,
    root: CancelToken,
    emitter: Emitter,
    dir: Option<PathBuf>,
    next: AtomicU64,
    /// Set once the session ends: later endings are recorded and logged, not streamed (the
    /// run's `result` has already been sent and stays the last frame).
    closing: AtomicBool,
}

impl std::fmt::Debug for TaskManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskManager").finish_non_exhaustive()
    }
}

impl TaskManager {
    /// A manager whose frames go through `emitter` and whose outputs are saved in `dir`.
    pub fn new(emitter: Emitter, dir: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            tasks: Mutex::new(Vec::new()),
            root: CancelToken::new(),
            emitter,
            dir,
            next: AtomicU64::new(1),
            closing: AtomicBool::new(false),
        })
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Task>>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn find(&self, id: &str) -> Option<Arc<Task>> {
        self.list().iter().find(|t| t.id == id).cloned()
    }

    /// Start a task. `work` gets the task's own cancel token and returns how it ended and its
    /// output. Returns the task id.
    pub async fn spawn<F, Fut>(
        self: &Arc<Self>,
        kind: TaskKind,
        description: String,
        id: Option<String>,
        work: F,
    ) -> String
    where
        F: FnOnce(CancelToken) -> Fut,
        Fut: Future<Output = (TaskStatus, String)> + Send + 'static,
    {
        let id = id.unwrap_or_else(|| self.next_id(&kind));
        let token = self.root.child();
        let (state, _) = watch::channel((TaskStatus::Running, String::new()));
        let task = Arc::new(Task {
            id: id.clone(),
            kind: kind.clone(),
            description: description.clone(),
            state,
            token: token.clone(),
            kill_by: Mutex::new(None),
            notified: AtomicBool::new(false),
        });
        self.list().push(task.clone());
        let mut extra = Extra::new();
        extra.insert("description".into(), json!(description));
        extra.insert("task_type".into(), json!(kind_name(&kind)));
        if let TaskKind::Agent { agent_type } = &kind {
            extra.insert("subagent_type".into(), json!(agent_type));
        }
        let _ = self
            .emitter
            .emit(Frame::System(SystemFrame::TaskStarted(TaskFrame {
                task_id: id.clone(),
                session_id: self.emitter.session_id().to_owned(),
                uuid: new_uuid(),
                extra,
            })))
            .await;
        let handle = tokio::spawn(work(token));
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
            let kill_by = task
                .kill_by
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if let Some(by) = kill_by {
                if status != TaskStatus::Completed {
                    status = TaskStatus::Killed(by);
                }
            }
            me.finish(&task, status, output).await;
        });
        id
    }

    async fn finish(&self, task: &Task, status: TaskStatus, output: String) {
        let mut saved = None;
        if let Some(dir) = &self.dir {
            let path = dir.join(format!("{}.output", task.id));
            if std::fs::create_dir_all(dir)
                .and_then(|_| std::fs::write(&path, &output))
                .is_ok()
            {
                saved = Some(path);
            }
        }
        task.state.send_replace((status.clone(), output.clone()));
        let mut extra = Extra::new();
        extra.insert("status".into(), json!(status.as_str()));
        extra.insert("end_state".into(), json!(status.describe()));
        extra.insert(
            "summary".into(),
            json!(summary(&task.description, &status, &output)),
        );
        extra.insert("task_type".into(), json!(kind_name(&task.kind)));
        // SDKs require the field; it is empty when the output could not be kept on disk.
        let file = saved.map(|p| p.display().to_string()).unwrap_or_default();
        extra.insert("output_file".into(), json!(file));
        let frame = Frame::System(SystemFrame::TaskNotification(TaskFrame {
            task_id: task.id.clone(),
            session_id: self.emitter.session_id().to_owned(),
            uuid: new_uuid(),
            extra,
        }));
        if self.closing.load(Ordering::SeqCst) {
            eprintln!(
                "keel: background task {} ({}) was stopped at the end of the session: {}",
                task.id,
                task.description,
                status.describe()
            );
            let _ = self.emitter.record(&frame);
        } else {
            let _ = self.emitter.emit(frame).await;
        }
    }

    /// A fresh task id (`shell_N`, `agent_N`), for work that needs its id before it starts.
    pub fn next_id(&self, kind: &TaskKind) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}_{n}", kind_name(kind))
    }

    /// Where a background shell writes its output while it runs (so `TaskOutput` can show it
    /// before it ends): beside the session, or in the temp directory without one.
    pub fn log_path(&self, id: &str) -> PathBuf {
        let dir = self.dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("keel-tasks-{}", std::process::id()))
        });
        dir.join(format!("{id}.log"))
    }

    /// The status and output of a task, waiting up to `timeout` for it to end when `block`.
    /// For a task still running, the output is what its log holds so far.
    pub async fn output(
        &self,
        id: &str,
        block: bool,
        timeout: Duration,
    ) -> Result<(TaskStatus, String), String> {
        let task = self.find(id).ok_or_else(|| self.unknown(id))?;
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
        Ok((status, read_log(&self.log_path(id)).unwrap_or_default()))
    }

    /// Stop one task; `by` is who stopped it (`parent`, `user`, `system`). Waits (bounded) for
    /// it to end and returns its final status.
    pub async fn kill(&self, id: &str, by: &str) -> Result<TaskStatus, String> {
        let task = self.find(id).ok_or_else(|| self.unknown(id))?;
        if task.state.borrow().0 == TaskStatus::Running {
            *task.kill_by.lock().unwrap_or_else(|p| p.into_inner()) = Some(by.to_owned());
            task.token.cancel(if by == "system" {
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
            if let Ok(s) = self.kill(&id, "system").await {
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

    fn unknown(&self, id: &str) -> String {
        let ids: Vec<String> = self.list().iter().map(|t| t.id.clone()).collect();
        if ids.is_empty() {
            format!("There is no background task {id:?}; no background task was started in this session.")
        } else {
            format!(
                "There is no background task {id:?}. The tasks of this session are: {}.",
                ids.join(", ")
            )
        }
    }
}

/// Output kept from a task log: all of it when short, else its head and tail around a marker
/// that names the log.
const LOG_KEEP: u64 = 15_000;

fn read_log(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    if len <= 2 * LOG_KEEP {
        let mut s = Vec::new();
        f.read_to_end(&mut s)?;
        return Ok(String::from_utf8_lossy(&s).into_owned());
    }
    let mut head = vec![0; LOG_KEEP as usize];
    f.read_exact(&mut head)?;
    f.seek(SeekFrom::Start(len - LOG_KEEP))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)?;
    Ok(format!(
        "{}\n[... {} bytes omitted; the whole output is in {} ...]\n{}",
        String::from_utf8_lossy(&head),
        len - 2 * LOG_KEEP,
        path.display(),
        String::from_utf8_lossy(&tail)
    ))
}

/// `s` quoted for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn kind_name(k: &TaskKind) -> &'static str {
    match k {
        TaskKind::Agent { .. } => "agent",
        TaskKind::Shell { .. } => "shell",
    }
}

fn last_line(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

fn summary(description: &str, status: &TaskStatus, output: &str) -> String {
    let tail = last_line(output);
    let base = format!("{description}: {}", status.describe());
    if tail.is_empty() {
        format!("{base}.")
    } else {
        format!("{base}; last output line: {tail}")
    }
}

/// `TaskOutput`: read a background task's status and output.
pub struct TaskOutputTool(pub Arc<TaskManager>);

/// `KillShell` (`shell_id`) and `TaskStop` (`task_id`): stop one background task.
pub struct TaskStopTool {
    /// The manager.
    pub tasks: Arc<TaskManager>,
    /// [`ToolKind::KillShell`] or [`ToolKind::TaskStop`].
    pub kind: ToolKind,
}

impl TaskStopTool {
    /// The input field naming the task: KillShell calls it `shell_id`.
    fn id_field(&self) -> &'static str {
        match self.kind {
            ToolKind::KillShell => "shell_id",
            _ => "task_id",
        }
    }
}

fn str_field<'a>(input: &'a Value, tool: &str, field: &str) -> Result<&'a str, ToolOutcome> {
    input.get(field).and_then(Value::as_str).ok_or_else(|| ToolOutcome::failed(format!("Invalid input for {tool}: `{field}` is required (the id a background task was started with).")))
}

impl Tool for TaskOutputTool {
    fn name(&self) -> &'static str {
        "TaskOutput"
    }
    fn kind(&self) -> ToolKind {
        ToolKind::TaskOutput
    }
    fn description(&self) -> &'static str {
        "Get the status and output of a background task (a background shell or subagent). With block=true (the default) it waits until the task ends or the timeout passes, then reports; a task still running is reported as running."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {
            "task_id": {"type": "string", "description": "The id the task was started with."},
            "block": {"type": "boolean", "description": "Wait for the task to end (default true)."},
            "timeout": {"type": "number", "description": "How long to wait, in ms (0 to 600000, default 30000)."}
        }, "required": ["task_id"]})
    }
    fn is_read_only(&self, _: &Value) -> bool {
        true
    }
    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let id = match str_field(&input, "TaskOutput", "task_id") {
                Ok(i) => i.to_owned(),
                Err(e) => return e,
            };
            let block = input.get("block").and_then(Value::as_bool).unwrap_or(true);
            let ms = match input.get("timeout") {
                None | Some(Value::Null) => 30_000,
                Some(v) => match v.as_f64() {
                    Some(ms) if (0.0..=600_000.0).contains(&ms) => ms as u64,
                    _ => return ToolOutcome::failed("Invalid input for TaskOutput: `timeout` must be a number of milliseconds from 0 to 600000."),
                },
            };
            let waited = tokio::select! {
                r = self.0.output(&id, block, Duration::from_millis(ms)) => r,
                _ = cx.cancel.cancelled() => return cx.stopped(true, String::new(), Duration::ZERO, 0),
            };
            match waited {
                Err(e) => ToolOutcome::failed(e),
                Ok((TaskStatus::Running, so_far)) => ToolOutcome::Ok {
                    content: format!(
                        "Task {id} is still running{}.{}",
                        if block {
                            format!(" after waiting {ms} ms")
                        } else {
                            String::new()
                        },
                        if so_far.is_empty() {
                            String::new()
                        } else {
                            format!(" Its output so far:\n{so_far}")
                        }
                    ),
                    meta: Some(json!({"task_id": id, "status": "running"})),
                },
                Ok((status, output)) => ToolOutcome::Ok {
                    content: format!(
                        "Task {id} ended: {}.\n{}",
                        status.describe(),
                        if output.is_empty() {
                            "(no output)".into()
                        } else {
                            output.clone()
                        }
                    ),
                    meta: Some(
                        json!({"task_id": id, "status": status.as_str(), "end_state": status.describe()}),
                    ),
                },
            }
        })
    }
}

impl Tool for TaskStopTool {
    fn name(&self) -> &'static str {
        match self.kind {
            ToolKind::KillShell => "KillShell",
            _ => "TaskStop",
        }
    }
    fn kind(&self) -> ToolKind {
        self.kind
    }
    fn description(&self) -> &'static str {
        if self.kind == ToolKind::KillShell {
            "Stop a background shell started with Bash run_in_background, by its shell_id. Its whole process group is killed."
        } else {
            "Stop a background task (a background shell or subagent) by its task_id."
        }
    }
    fn input_schema(&self) -> Value {
        let field = self.id_field();
        json!({"type": "object", "properties": {field: {"type": "string", "description": "The id of the background task to stop."}}, "required": [field]})
    }
    fn is_read_only(&self, _: &Value) -> bool {
        // It only stops work keel itself started in this session.
        true
    }
    fn call<'a>(&'a self, input: Value, _cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let field = self.id_field();
            let id = match str_field(&input, self.name(), field) {
                Ok(i) => i.to_owned(),
                Err(e) => return e,
            };
            match self.tasks.kill(&id, "parent").await {
                Err(e) => ToolOutcome::failed(e),
                Ok(TaskStatus::Killed(_)) => {
                    ToolOutcome::ok(format!("Task {id} was stopped (killed)."))
                }
                Ok(TaskStatus::Running) => ToolOutcome::failed(format!(
                    "Task {id} was asked to stop but is still running."
                )),
                Ok(other) => ToolOutcome::ok(format!(
                    "Task {id} had already ended ({}); nothing to stop.",
                    other.describe()
                )),
            }
        })
    }
}

/// `Bash` with `run_in_background`: the call returns a task id at once; the command runs under
/// the task's own token (an interrupt of the turn does not stop it).
pub struct BackgroundBash {
    /// The plain Bash tool.
    pub inner: Arc<dyn Tool>,
    /// The session's tasks.
    pub tasks: Arc<TaskManager>,
}

impl Tool for BackgroundBash {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn kind(&self) -> ToolKind {
        self.inner.kind()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> Value {
        let mut s = self.inner.input_schema();
        if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert(
                "run_in_background".into(),
                json!({"type": "boolean", "description": "Start the command as a background task and return its task id at once; read its output later with TaskOutput, stop it with KillShell."}),
            );
        }
        s
    }
    fn is_read_only(&self, input: &Value) -> bool {
        self.inner.is_read_only(input)
    }
    fn call<'a>(&'a self, mut input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        let background = input
            .get("run_in_background")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !background {
            return self.inner.call(input, cx);
        }
        Box::pin(async move {
            if let Some(o) = input.as_object_mut() {
                o.remove("run_in_background");
                o.remove("timeout");
            }
            let command = input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let inner = self.inner.clone();
            let mut limits = (*cx.limits).clone();
            limits.default_timeout = Duration::from_secs(24 * 3600);
            limits.max_timeout = limits.default_timeout;
            let base = cx.clone();
            let kind = TaskKind::Shell {
                command: command.clone(),
            };
            let id = self.tasks.next_id(&kind);
            // The command writes to the task's log, so its output can be read while it runs.
            let log = self.tasks.log_path(&id);
            if let Some(dir) = log.parent() {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    return ToolOutcome::failed(format!(
                        "Could not start the background shell: cannot create {}: {e}",
                        dir.display()
                    ));
                }
            }
            input["command"] = Value::String(format!(
                "exec >{} 2>&1\n{command}",
                shell_quote(&log.display().to_string())
            ));
            let description = format!("shell `{}`", short(&command));
            let id = self
                .tasks
                .spawn(kind, description, Some(id), move |token| async move {
                    let mut ctx = base;
                    ctx.cancel = token;
                    ctx.limits = Arc::new(limits);
                    let outcome = inner.call(input, ctx).await;
                    let output = read_log(&log).unwrap_or_default();
                    match outcome {
                        ToolOutcome::Ok { .. } => (TaskStatus::Completed, output),
                        ToolOutcome::Failed { message, .. } => {
                            // The exit status is the message's last line; the output is the log.
                            let why = message.lines().last().unwrap_or("").to_owned();
                            (
                                TaskStatus::Failed(format!("the command failed: {why}")),
                                output,
                            )
                        }
                        ToolOutcome::Stopped { reason, .. } => {
                            (TaskStatus::Killed(reason.as_str().into()), output)
                        }
                    }
                })
                .await;
            ToolOutcome::Ok {
                content: format!("Started background shell {id} for `{}`. It keeps running after this turn; read its output with TaskOutput(task_id: \"{id}\"), stop it with KillShell(shell_id: \"{id}\"). You will be told when it ends.", short(&command)),
                meta: Some(json!({"task_id": id, "backgroundTaskId": id})),
            }
        })
    }
}

fn short(s: &str) -> String {
    let one = s.lines().next().unwrap_or("");
    if one.chars().count() > 80 || s.lines().count() > 1 {
        format!("{}…", one.chars().take(80).collect::<String>())
    } else {
        one.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> (Arc<TaskManager>, tokio::sync::mpsc::Receiver<Frame>) {
        let (tx, rx) = tokio::sync::mpsc::channel(100);
        (TaskManager::new(Emitter::new("s", tx), None), rx)
    }

    #[test]
    fn a_long_log_keeps_head_and_tail_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shell_1.log");
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let out = read_log(&path).unwrap();
        assert!(
            out.starts_with("line 0\n") && out.trim_end().ends_with("line 9999"),
            "head and tail kept"
        );
        assert!(
            out.contains("omitted") && out.contains(&path.display().to_string()),
            "a marker naming the log"
        );
        assert!(out.len() < 2 * LOG_KEEP as usize + 200);
        std::fs::write(&path, "short\n").unwrap();
        assert_eq!(read_log(&path).unwrap(), "short\n");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[tokio::test]
    async fn output_waits_exactly_and_never_calls_a_finished_task_running() {
        let (m, _rx) = manager();
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let id = m
            .spawn(
                TaskKind::Shell {
                    command: "x".into(),
                },
                "x".into(),
                None,
                |_t| async move {
                    let _ = wait.await;
                    (TaskStatus::Completed, "done".into())
                },
            )
            .await;
        let (s, _) = m
            .output(&id, true, Duration::from_millis(50))
            .await
            .unwrap();
        assert_eq!(s, TaskStatus::Running);
        release.send(()).unwrap();
        let (s, out) = m.output(&id, true, Duration::from_secs(10)).await.unwrap();
        assert_eq!((s, out.as_str()), (TaskStatus::Completed, "done"));
        assert!(
            m.take_notifications().is_empty(),
            "already read through TaskOutput"
        );
    }

    #[tokio::test]
    async fn a_dead_worker_is_noticed_and_kill_reports_who() {
        let (m, mut rx) = manager();
        let id = m
            .spawn(
                TaskKind::Shell {
                    command: "x".into(),
                },
                "x".into(),
                None,
                |_t| async { panic!("boom") },
            )
            .await;
        let (s, _) = m.output(&id, true, Duration::from_secs(10)).await.unwrap();
        assert!(
            matches!(s, TaskStatus::Failed(ref r) if r.contains("died")),
            "{s:?}"
        );
        let id2 = m
            .spawn(
                TaskKind::Agent {
                    agent_type: "Explore".into(),
                },
                "y".into(),
                None,
                |t| async move {
                    t.cancelled().await;
                    (TaskStatus::Failed("stopped".into()), "partial".into())
                },
            )
            .await;
        assert_eq!(
            m.kill(&id2, "parent").await.unwrap(),
            TaskStatus::Killed("parent".into())
        );
        // The dead worker was already seen through TaskOutput; only the killed one is news.
        let notes = m.take_notifications();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("agent_2")
                && notes[0].contains("killed{by: parent}")
                && notes[0].contains("partial"),
            "{notes:?}"
        );
        assert!(m.take_notifications().is_empty(), "told once");
        let mut kinds = Vec::new();
        while let Ok(f) = rx.try_recv() {
            if let Frame::System(s) = f {
                kinds.push(match s {
                    SystemFrame::TaskStarted(_) => "started",
                    SystemFrame::TaskNotification(_) => "notification",
                    _ => "other",
                });
            }
        }
        assert_eq!(
            kinds,
            ["started", "notification", "started", "notification"]
        );
        assert!(m
            .output("nope", false, Duration::ZERO)
            .await
            .unwrap_err()
            .contains("agent_2"));
    }
}
