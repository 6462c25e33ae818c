//! The model's handles on background tasks: `TaskOutput`, `TaskStop`/`KillShell`, and Bash's
//! `run_in_background`.

use std::sync::Arc;
use std::time::Duration;

use keel_tools::{
    input_schema, parse_input, BoxFuture, Tool, ToolContext, ToolKind, ToolOutcome, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{read_log, shell_quote, KilledBy, TaskKind, TaskManager, TaskStatus};

/// `TaskOutput`: read a background task's status and output.
pub struct TaskOutputTool(pub Arc<TaskManager>);

/// `KillShell` (`shell_id`) and `TaskStop` (`task_id`): stop one background task.
pub struct TaskStopTool {
    /// The manager.
    pub tasks: Arc<TaskManager>,
    /// [`ToolKind::KillShell`] or [`ToolKind::TaskStop`].
    pub kind: ToolKind,
}

/// TaskOutput's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct OutputInput {
    /// The id the task was started with.
    task_id: String,
    /// Wait for the task to end (default true).
    block: Option<bool>,
    /// How long to wait, in ms (0 to 600000, default 30000).
    timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct StopInput {
    /// The id of the background task to stop.
    task_id: String,
}

/// KillShell's older spelling of the same field.
#[derive(Debug, Deserialize, JsonSchema)]
struct KillShellInput {
    /// The id of the background task to stop.
    shell_id: String,
}

impl TypedTool for TaskOutputTool {
    type Input = OutputInput;
    const NAME: &'static str = "TaskOutput";
    const KIND: ToolKind = ToolKind::TaskOutput;
    const DESCRIPTION: &'static str = "Get the status and output of a background task (a background shell or subagent). With block=true (the default) it waits until the task ends or the timeout passes, then reports; a task still running is reported as running.";
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, inp: OutputInput, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let id = inp.task_id;
            let block = inp.block.unwrap_or(true);
            let ms = match inp.timeout {
                None => 30_000,
                Some(ms) if (0.0..=600_000.0).contains(&ms) => ms as u64,
                Some(_) => return ToolOutcome::failed("Invalid input for TaskOutput: `timeout` must be a number of milliseconds from 0 to 600000."),
            };
            let waited = tokio::select! {
                r = self.0.output(&id, block, Duration::from_millis(ms)) => r,
                _ = cx.cancel.cancelled() => return cx.stopped(true, String::new(), Duration::ZERO, 0),
            };
            match waited {
                Err(e) => ToolOutcome::failed(e.to_string()),
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
                            output
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
        match self.kind {
            ToolKind::KillShell => input_schema::<KillShellInput>(),
            _ => input_schema::<StopInput>(),
        }
    }
    fn is_read_only(&self, _: &Value) -> bool {
        // It only stops work keel itself started in this session.
        true
    }
    fn call<'a>(&'a self, input: Value, _cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let parsed = match self.kind {
                ToolKind::KillShell => {
                    parse_input::<KillShellInput>(self.name(), &input).map(|i| i.shell_id)
                }
                _ => parse_input::<StopInput>(self.name(), &input).map(|i| i.task_id),
            };
            let id = match parsed {
                Ok(id) => id,
                Err(e) => return e.into(),
            };
            match self.tasks.kill(&id, KilledBy::Parent).await {
                Err(e) => ToolOutcome::failed(e.to_string()),
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
    fn prepare(&self, input: &Value, tool_use_id: &str) {
        if input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
            // Shell ids follow the order of the calls, not the order they happen to start in.
            let command = input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let kind = TaskKind::Shell {
                command: command.to_owned(),
            };
            self.tasks.reserve_id(tool_use_id, &kind);
        }
    }
    fn call<'a>(&'a self, mut input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        let background = input
            .get("run_in_background")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !background {
            if self.tasks.backgrounding() {
                return Box::pin(self.movable(input, cx));
            }
            return self.inner.call(input, cx);
        }
        Box::pin(async move {
            if let Some(o) = input.as_object_mut() {
                o.remove("run_in_background");
                o.remove("timeout");
            }
            let command = command_of(&input);
            let inner = self.inner.clone();
            let limits = without_timeout(&cx.limits);
            let base = cx.clone();
            let kind = TaskKind::Shell {
                command: command.clone(),
            };
            let id = self.tasks.reserved_or_next_id(&cx.tool_use_id, &kind);
            // The command writes to the task's log, so its output can be read while it runs.
            let log = self.tasks.log_path(&id);
            if let Some(dir) = log.parent().map(std::path::Path::to_path_buf) {
                let made = tokio::task::spawn_blocking(move || {
                    std::fs::create_dir_all(&dir).map_err(|e| (dir, e))
                })
                .await;
                if let Ok(Err((dir, e))) = made {
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
                    let output =
                        tokio::task::spawn_blocking(move || read_log(&log).unwrap_or_default())
                            .await
                            .unwrap_or_default();
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
                            (TaskStatus::Killed(KilledBy::from_reason(reason)), output)
                        }
                    }
                })
                .await;
            let id = match id {
                Ok(id) => id,
                Err(e) => {
                    return ToolOutcome::failed(format!(
                        "The background shell was not started: {e}."
                    ))
                }
            };
            ToolOutcome::Ok {
                content: format!("Started background shell {id} for `{}`. It keeps running after this turn; read its output with TaskOutput(task_id: \"{id}\"), stop it with KillShell(shell_id: \"{id}\"). You will be told when it ends.", short(&command)),
                meta: Some(json!({"task_id": id, "backgroundTaskId": id})),
            }
        })
    }
}

impl BackgroundBash {
    /// A foreground command the user may move to the background while it runs. It runs under
    /// a token of its own (a child of the background root, so the session's end still stops
    /// it) and copies its output to a live log; this call enforces the timeout and passes the
    /// turn's interrupt on. If the user moves it, it becomes a task that keeps its process
    /// group, its token and its log, and the call answers at once with the task id.
    async fn movable(&self, mut input: Value, cx: ToolContext) -> ToolOutcome {
        let requested = input.get("timeout").and_then(Value::as_i64);
        let (timeout, note) = keel_tools::bash::effective_timeout(requested, &cx.limits);
        if let Some(o) = input.as_object_mut() {
            o.remove("timeout");
        }
        let command = command_of(&input);
        let own = self.tasks.child_token();
        let live_log = self.tasks.live_log_path(&cx.tool_use_id);
        let mut limits = without_timeout(&cx.limits);
        limits.live_log = Some(live_log.clone());
        let mut inner_cx = cx.clone();
        inner_cx.cancel = own.clone();
        inner_cx.limits = Arc::new(limits);
        let inner = self.inner.clone();
        let run = tokio::spawn(async move { inner.call(input, inner_cx).await });
        let kind = TaskKind::Shell {
            command: command.clone(),
        };
        let outcome = match self
            .tasks
            .run_movable(&kind, &cx.tool_use_id, &cx.cancel, &own, Some(timeout), run)
            .await
        {
            super::Movable::Done(r) => joined(r),
            super::Movable::Moved(run) => {
                let description = format!("shell `{}`", short(&command));
                let work = async move { task_end(joined(run.await)) };
                return match self
                    .tasks
                    .start(kind, description, None, own.clone(), Some(live_log), work)
                    .await
                {
                    Ok(id) => ToolOutcome::Ok {
                        content: format!("The user moved this command to the background: it keeps running as background shell {id}. Read its output so far with TaskOutput(task_id: \"{id}\"), stop it with KillShell(shell_id: \"{id}\"). You will be told when it ends; go on with the task meanwhile."),
                        meta: Some(json!({"task_id": id, "backgroundTaskId": id, "backgroundedByUser": true})),
                    },
                    Err(e) => {
                        own.cancel(keel_protocol::CancelReason::Shutdown);
                        ToolOutcome::failed(format!("The command could not be moved to the background ({e}), so it was stopped."))
                    }
                };
            }
        };
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_file(live_log)).await;
        match (outcome, note) {
            (ToolOutcome::Ok { mut content, meta }, Some(n)) => {
                content.push('\n');
                content.push_str(&n);
                ToolOutcome::Ok { content, meta }
            }
            (o, _) => o,
        }
    }
}

fn command_of(input: &Value) -> String {
    input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The limits for a command that may outlive its call: a day instead of the call's timeout
/// (a background shell is stopped by the user, the model or the session's end).
fn without_timeout(limits: &keel_tools::ToolLimits) -> keel_tools::ToolLimits {
    let mut limits = limits.clone();
    limits.default_timeout = Duration::from_secs(24 * 3600);
    limits.max_timeout = limits.default_timeout;
    limits
}

fn joined(r: Result<ToolOutcome, tokio::task::JoinError>) -> ToolOutcome {
    r.unwrap_or_else(|e| {
        ToolOutcome::failed(format!(
            "The command's worker died ({}).",
            if e.is_panic() {
                "it panicked"
            } else {
                "it was cancelled"
            }
        ))
    })
}

/// How a command that ran as a task ended, and its output.
fn task_end(outcome: ToolOutcome) -> (TaskStatus, String) {
    match outcome {
        ToolOutcome::Ok { content, .. } => (TaskStatus::Completed, content),
        ToolOutcome::Failed { message, .. } => {
            let why = message.lines().last().unwrap_or("").to_owned();
            (
                TaskStatus::Failed(format!("the command failed: {why}")),
                message,
            )
        }
        ToolOutcome::Stopped {
            reason, partial, ..
        } => (TaskStatus::Killed(KilledBy::from_reason(reason)), partial),
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
    use pretty_assertions::assert_eq;

    #[test]
    fn schemas_come_from_the_input_types() {
        assert_eq!(
            input_schema::<OutputInput>(),
            json!({"type": "object", "properties": {
                "task_id": {"type": "string", "description": "The id the task was started with."},
                "block": {"type": "boolean", "description": "Wait for the task to end (default true)."},
                "timeout": {"type": "number", "description": "How long to wait, in ms (0 to 600000, default 30000)."}
            }, "required": ["task_id"]})
        );
        assert_eq!(
            input_schema::<KillShellInput>(),
            json!({"type": "object", "properties": {
                "shell_id": {"type": "string", "description": "The id of the background task to stop."}
            }, "required": ["shell_id"]})
        );
        let e = parse_input::<OutputInput>("TaskOutput", &json!({"block": "yes"})).unwrap_err();
        assert!(e.to_string().contains("task_id"), "{e}");
    }
}
