//! The Bash tool: run one shell command under supervision (own process group, deadline, bounded
//! output, drain deadline) and report honestly how it ended.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::fsutil::{off_worker, NotDone};
use crate::input::{input_schema, parse_input, InputError};
use crate::output::{HeadTail, SpillFile};
use crate::process::group_alive;
use crate::shell::is_read_only_command;
use crate::spawn::{Child, Spawn};
use crate::supervise::{ExitStatus, Report};
use crate::{BoxFuture, CancelReason, Tool, ToolContext, ToolLimits, ToolOutcome};

/// Runs a shell command.
#[derive(Clone, Copy, Debug, Default)]
pub struct BashTool;

const DESCRIPTION: &str = "Run a shell command with bash in the session's working directory and \
return what it printed (stdout, then stderr) and how it exited. The command has no terminal and \
its stdin is closed, so interactive programs and prompts will not work. Each call starts a fresh \
shell: `cd` and variables do not carry over to the next call, so use absolute paths or \
`cd dir && ...`. Long output is cut to its beginning and end. The command is stopped after \
`timeout` milliseconds (default 2 minutes, at most 10). Processes left running in the background \
(`server &`) keep running until the session ends. For reading, editing and searching files \
prefer the Read, Edit, Write, Glob and Grep tools.";

/// Bash's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Input {
    /// The command line to run with `bash -c`.
    command: String,
    /// How long the command may run, in milliseconds (default 120000, at most 600000).
    // Offered as a JSON number, as models are used to; read as whole milliseconds.
    #[schemars(extend("type" = "number"))]
    timeout: Option<i64>,
    /// A few words saying what the command does, shown to the user.
    // Read by the front ends from the raw input; declared here so the schema offers it.
    #[allow(dead_code)]
    description: Option<String>,
}

impl Tool for BashTool {
    fn name(&self) -> &'static str {
        "Bash"
    }
    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Bash
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        input_schema::<Input>()
    }

    fn is_read_only(&self, input: &Value) -> bool {
        input
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(is_read_only_command)
    }

    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(run(input, cx))
    }
}

/// The timeout to use and, when the request was changed, a note saying so.
pub fn effective_timeout(
    requested: Option<i64>,
    limits: &ToolLimits,
) -> (Duration, Option<String>) {
    let max = limits.max_timeout;
    let default = limits.default_timeout.min(max);
    match requested {
        None => (default, None),
        Some(ms) if ms <= 0 => (
            default,
            Some(format!(
                "[timeout {ms} ms is not positive; the default of {} ms was used]",
                default.as_millis()
            )),
        ),
        Some(ms) if u128::from(ms.unsigned_abs()) > max.as_millis() => (
            max,
            Some(format!(
                "[timeout {ms} ms is above the maximum; {} ms was used]",
                max.as_millis()
            )),
        ),
        Some(ms) => (Duration::from_millis(ms.unsigned_abs()), None),
    }
}

/// How long a command's result may wait for its spill files to be written out. The queue to a
/// spill file is short, so only a disk that has stopped answering takes this long.
const SPILL_CLOSE_DEADLINE: Duration = Duration::from_secs(2);

/// `/bin/bash`, or `/bin/sh` where there is no bash.
fn pick_shell() -> &'static Path {
    if Path::new("/bin/bash").exists() {
        Path::new("/bin/bash")
    } else {
        Path::new("/bin/sh")
    }
}

/// One output stream being captured by a reader task.
#[derive(Clone)]
struct Capture(Arc<Mutex<CaptureState>>);

struct CaptureState {
    buf: HeadTail,
    /// Reading was cut short: the reader keeps draining the pipe (so a background writer is not
    /// blocked or killed by SIGPIPE) but throws the bytes away.
    detached: bool,
    /// The full output's file, opened at the first byte the capture drops.
    spill: Option<SpillFile>,
}

impl Capture {
    fn new(limits: &ToolLimits, spill: Option<PathBuf>) -> Self {
        let mut buf = HeadTail::new(limits.head_bytes, limits.tail_bytes);
        if let Some(path) = spill {
            buf = buf.with_spill(path);
        }
        Capture(Arc::new(Mutex::new(CaptureState {
            buf,
            detached: false,
            spill: None,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CaptureState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `bytes`; returns where to queue what the spill file needs of them, if anything.
    fn push(&self, bytes: &[u8]) -> Option<(mpsc::Sender<Vec<u8>>, Vec<u8>)> {
        let mut st = self.lock();
        if st.detached {
            return None;
        }
        let for_spill = st.buf.push(bytes)?;
        let path = st.buf.spill_path()?.to_path_buf();
        let file = st.spill.get_or_insert_with(|| SpillFile::create(path));
        Some((file.sender(), for_spill))
    }

    /// Stop keeping bytes, close the spill file (waiting at most `deadline` for the disk) and
    /// return the text kept so far.
    async fn finish(&self, deadline: Duration) -> String {
        let spill = {
            let mut st = self.lock();
            st.detached = true;
            st.spill.take()
        };
        if let Some(file) = spill {
            let report = file.finish(deadline).await;
            self.lock().buf.spill_done(report);
        }
        self.lock().buf.render()
    }
}

async fn pump(
    mut pipe: impl AsyncRead + Unpin,
    capture: Capture,
    mirror: Option<mpsc::Sender<Vec<u8>>>,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Some(m) = &mirror {
                    // A failed live log is only a lost copy: the output is still captured.
                    let _ = m.send(chunk[..n].to_vec()).await;
                }
                if let Some((spill, bytes)) = capture.push(&chunk[..n]) {
                    // A failed file is reported by its writer; the output is still captured.
                    let _ = spill.send(bytes).await;
                }
            }
        }
    }
}

/// Wait for both readers to reach end of file, at most `deadline`. `false` when cut short.
async fn drain(readers: &mut [JoinHandle<()>], deadline: Duration) -> bool {
    let all = async {
        for r in readers.iter_mut() {
            let _ = r.await;
        }
    };
    tokio::time::timeout(deadline, all).await.is_ok()
}

/// A tool_use id made safe as part of a file name: anything but ASCII letters, digits, `-` and
/// `_` becomes `_` (so an id can never name a path).
pub fn file_stem(tool_use_id: &str) -> String {
    tool_use_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn spill_path(limits: &ToolLimits, tool_use_id: &str, pid: u32, stream: &str) -> Option<PathBuf> {
    let dir = limits.spill_dir.as_ref()?;
    let id = file_stem(tool_use_id);
    let stem = if id.is_empty() {
        format!("bash-{pid}")
    } else {
        id
    };
    Some(dir.join(format!("{stem}.{stream}.txt")))
}

/// stdout, then stderr, without trailing newlines.
fn combine(stdout: &str, stderr: &str) -> String {
    let so = stdout.trim_end_matches('\n');
    let se = stderr.trim_end_matches('\n');
    match (so.is_empty(), se.is_empty()) {
        (_, true) => so.to_string(),
        (true, false) => se.to_string(),
        (false, false) => format!("{so}\n{se}"),
    }
}

fn push_line(text: &mut String, line: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(line);
}

async fn run(input: Value, cx: ToolContext) -> ToolOutcome {
    let begun = Instant::now();
    let (inp, shell) = match prepare(&input, &cx, begun).await {
        Ok(ready) => ready,
        Err(outcome) => return outcome,
    };
    let (timeout, timeout_note) = effective_timeout(inp.timeout, &cx.limits);
    // Dropped before it ended (the call's future abandoned), the child kills its whole tree.
    let mut child = match start(shell, &inp.command, &cx) {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    let Some((out, err, mut readers)) = watch(&mut child, &cx) else {
        return ToolOutcome::failed("Could not watch the command: its output is not connected.");
    };
    let end = tokio::select! {
        r = child.wait() => End::Exited(r),
        _ = tokio::time::sleep(timeout) => End::Stopped(CancelReason::Timeout),
        _ = cx.cancel.cancelled() => {
            End::Stopped(cx.cancel.reason().unwrap_or(CancelReason::Shutdown))
        }
    };
    match end {
        End::Stopped(reason) => {
            // The group includes the supervisor, which stops what left the group on our TERM.
            let killed = child.stop(cx.limits.kill_grace).await.saturating_sub(1);
            let complete = drain(&mut readers, cx.limits.drain_deadline).await;
            let (stdout, stderr) = tokio::join!(
                out.finish(SPILL_CLOSE_DEADLINE),
                err.finish(SPILL_CLOSE_DEADLINE)
            );
            let mut partial = combine(&stdout, &stderr);
            if !complete {
                push_line(
                    &mut partial,
                    "[stopped reading output: a process outside the command's group still holds it open]",
                );
            }
            ToolOutcome::Stopped {
                reason,
                started: true,
                partial,
                elapsed: begun.elapsed(),
                processes_killed: killed,
            }
        }
        End::Exited(report) => {
            let complete = drain(&mut readers, cx.limits.drain_deadline).await;
            // Whatever is still running in the group was started in the background on purpose
            // (or holds our pipe): leave it running, but make sure the session can stop it.
            // The group's supervisor stays while it runs (and stops it if keel dies), and it
            // said whether anything is left; without its word, a signal-0 probe decides.
            let pgid = child.pgid();
            if report.running.unwrap_or_else(|| group_alive(pgid)) {
                cx.processes.register(pgid, inp.command.clone());
            }
            child.leave_running();
            let (stdout, stderr) = tokio::join!(
                out.finish(SPILL_CLOSE_DEADLINE),
                err.finish(SPILL_CLOSE_DEADLINE)
            );
            let mut text = combine(&stdout, &stderr);
            let both = (stdout.as_str(), stderr.as_str());
            exited_notes(&mut text, &report, complete, timeout_note, &cx, both);
            finish_exited(report.status, text, stdout, stderr, report.stopped_count)
        }
    }
}

/// How a started command's wait ended.
enum End {
    /// It exited; what its supervisor reported.
    Exited(Report),
    /// It was stopped (timeout, cancellation); why.
    Stopped(CancelReason),
}

/// Bash's input read and checked, and the shell to run it with found, before anything
/// starts; or the outcome the call already ends with.
async fn prepare(
    input: &Value,
    cx: &ToolContext,
    begun: Instant,
) -> Result<(Input, &'static Path), ToolOutcome> {
    let inp: Input = parse_input("Bash", input).map_err(ToolOutcome::from)?;
    if inp.command.trim().is_empty() {
        let rule = "`command` is empty; give the command line to run.";
        return Err(InputError::rule("Bash", rule).into());
    }
    if cx.cancel.is_cancelled() {
        return Err(cx.stopped(false, String::new(), begun.elapsed(), 0));
    }
    // File system checks go to the blocking pool (a hung mount must not stall a worker); the
    // spawn itself stays here, on a long-lived worker thread (see `spawn_shell`).
    let cwd = cx.cwd.clone();
    let probe = off_worker(&cx.cancel, move |_| (cwd.is_dir(), pick_shell())).await;
    match probe {
        Ok((true, shell)) => Ok((inp, shell)),
        Ok((false, _)) => Err(ToolOutcome::failed(format!(
            "Cannot run the command: the working directory {} does not exist or is not a \
             directory.",
            cx.cwd.display()
        ))),
        Err(NotDone::Cancelled) => Err(cx.stopped(false, String::new(), begun.elapsed(), 0)),
        Err(NotDone::Panicked(e)) => {
            Err(ToolOutcome::failed(format!("Internal error in Bash: {e}")))
        }
    }
}

/// Start `command` with `shell` in the working directory (in the sandbox when one is set),
/// in a process group of its own; or the failed outcome saying why it did not start.
fn start(shell: &Path, command: &str, cx: &ToolContext) -> Result<Child, ToolOutcome> {
    let sandbox = cx.limits.sandbox.clone();
    let spawned = Spawn::shell(shell, command)
        .cwd(&cx.cwd)
        .env("KEEL", "1")
        .sandbox(sandbox.clone())
        .spawn();
    spawned.map_err(|e| {
        if sandbox.is_some() {
            ToolOutcome::failed(format!(
                "The command was not run: keel could not put it in the sandbox ({e})."
            ))
        } else {
            ToolOutcome::failed(format!("Could not start {}: {e}", shell.display()))
        }
    })
}

/// Readers for the child's stdout and stderr, each into a bounded capture (spilled to a
/// file when that is set) and the live log; `None` when a pipe is not connected.
fn watch(child: &mut Child, cx: &ToolContext) -> Option<(Capture, Capture, Vec<JoinHandle<()>>)> {
    let pid = child.pgid() as u32;
    let (Some(stdout), Some(stderr)) = (child.take_stdout(), child.take_stderr()) else {
        return None;
    };
    let out = Capture::new(
        &cx.limits,
        spill_path(&cx.limits, &cx.tool_use_id, pid, "stdout"),
    );
    let err = Capture::new(
        &cx.limits,
        spill_path(&cx.limits, &cx.tool_use_id, pid, "stderr"),
    );
    // The live log's writer ends by itself once both readers are done with it.
    let mirror = cx.limits.live_log.clone().map(SpillFile::create);
    let sender = mirror.as_ref().map(SpillFile::sender);
    drop(mirror);
    let readers = vec![
        tokio::spawn(pump(stdout, out.clone(), sender.clone())),
        tokio::spawn(pump(stderr, err.clone(), sender)),
    ];
    Some((out, err, readers))
}

/// The notes an exited command's result ends with: output cut short by a background holder,
/// processes that had left the group, a capped timeout, what the sandbox stopped.
fn exited_notes(
    text: &mut String,
    report: &Report,
    complete: bool,
    timeout_note: Option<String>,
    cx: &ToolContext,
    (stdout, stderr): (&str, &str),
) {
    if !complete {
        push_line(
            text,
            &format!(
                "[stopped reading output after {} ms: a background process still holds \
                 it open; that process was left running]",
                cx.limits.drain_deadline.as_millis()
            ),
        );
    }
    if report.stopped_count > 0 {
        push_line(text, &escaped_note(report));
    }
    if let Some(note) = timeout_note {
        push_line(text, &note);
    }
    if let (Some(sb), Some(ExitStatus::Code(c))) = (&cx.limits.sandbox, report.status) {
        if c != 0 {
            if let Some(note) = crate::sandbox::stopped_note(sb, stderr, stdout) {
                push_line(text, &note);
            }
        }
    }
}

/// What the tool result says about processes that had left the command's group.
fn escaped_note(r: &Report) -> String {
    let named: Vec<String> = r
        .stopped
        .iter()
        .map(|(pid, name)| format!("{name} (pid {pid})"))
        .collect();
    let more = r.stopped_count.saturating_sub(named.len());
    let mut list = named.join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    format!(
        "[keel stopped {} process{} this command had moved out of its process group (setsid, daemonizing): {list}. Commands may not leave processes behind; to keep something running, start it with run_in_background.]",
        r.stopped_count,
        if r.stopped_count == 1 { "" } else { "es" }
    )
}

/// Whether group `pgid` still has members besides its leader (the supervisor, which stays only
/// while there are).
fn finish_exited(
    status: Option<ExitStatus>,
    text: String,
    stdout: String,
    stderr: String,
    escaped_stopped: usize,
) -> ToolOutcome {
    let (code, signal) = match status {
        Some(ExitStatus::Code(c)) => (Some(c), None),
        Some(ExitStatus::Signal(s)) => (
            None,
            Some(
                nix::sys::signal::Signal::try_from(s)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|_| format!("signal {s}")),
            ),
        ),
        None => (None, Some("SIGKILL".to_owned())),
    };
    let mut meta = json!({
        "stdout": stdout,
        "stderr": stderr,
        "interrupted": false,
        "exit_code": code,
    });
    if let Some(sig) = &signal {
        meta["signal"] = json!(sig);
    }
    if escaped_stopped > 0 {
        meta["escaped_processes_stopped"] = json!(escaped_stopped);
    }
    if code == Some(0) {
        let content = if text.is_empty() {
            "(no output)".to_string()
        } else {
            text
        };
        return ToolOutcome::Ok {
            content,
            meta: Some(meta),
        };
    }
    let mut message = text;
    match (code, signal) {
        (Some(code), _) => push_line(&mut message, &format!("Exit code {code}")),
        (None, Some(sig)) => push_line(&mut message, &format!("Killed by signal {sig}")),
        (None, None) => push_line(&mut message, "The command ended without an exit code"),
    }
    ToolOutcome::Failed {
        message,
        meta: Some(meta),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_pinned() {
        crate::input::assert_schema(
            BashTool.input_schema(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command line to run with `bash -c`."
                    },
                    "timeout": {
                        "type": "number",
                        "description": "How long the command may run, in milliseconds (default 120000, at most 600000)."
                    },
                    "description": {
                        "type": "string",
                        "description": "A few words saying what the command does, shown to the user."
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        );
    }

    #[test]
    fn timeout_clamping() {
        let l = ToolLimits::default();
        assert_eq!(
            effective_timeout(None, &l),
            (Duration::from_secs(120), None)
        );
        assert_eq!(
            effective_timeout(Some(5000), &l),
            (Duration::from_secs(5), None)
        );
        let (d, note) = effective_timeout(Some(0), &l);
        assert_eq!(d, Duration::from_secs(120));
        assert!(note.unwrap().contains("not positive"));
        let (d, note) = effective_timeout(Some(900_000), &l);
        assert_eq!(d, Duration::from_secs(600));
        assert!(note.unwrap().contains("above the maximum"));
    }

    #[test]
    fn combine_streams() {
        assert_eq!(combine("a\n", "b\n"), "a\nb");
        assert_eq!(combine("", "b\n"), "b");
        assert_eq!(combine("a\n", ""), "a");
        assert_eq!(combine("", ""), "");
    }

    #[test]
    fn spill_names_are_safe() {
        let l = ToolLimits {
            spill_dir: Some(PathBuf::from("/s")),
            ..ToolLimits::default()
        };
        assert_eq!(
            spill_path(&l, "toolu_01/../x", 7, "stdout"),
            Some(PathBuf::from("/s/toolu_01____x.stdout.txt"))
        );
        assert_eq!(
            spill_path(&l, "", 7, "stderr"),
            Some(PathBuf::from("/s/bash-7.stderr.txt"))
        );
    }
}
