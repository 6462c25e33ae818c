//! Hooks from the settings files users keep: `hooks` in the user, project, local and
//! `--settings` files, each a shell command that gets the event as JSON on stdin.
//!
//! A command hook is started the way a Bash command is (keel-tools' one spawner: its own
//! process group under a supervisor that also holds what it daemonizes, and dies with keel),
//! with a deadline the parent enforces (everything it started is killed when it passes, when
//! the turn is interrupted, or when the hook ends), and its output is bounded. Exit 0 with JSON on stdout is a decision (`decision`, `permissionDecision`,
//! `updatedInput`, `additionalContext`, `continue`, …); exit 0 with plain text adds context
//! to a prompt; exit 2 blocks, and its stderr is the reason the model reads. Anything else —
//! it cannot start, it times out, it exits with another code, it prints JSON keel cannot
//! read — is a failure, and a PreToolUse, UserPromptSubmit or PermissionRequest hook that
//! fails **blocks** (unless it says `"onFailure": "allow"`): a guard that silently stops
//! guarding is worse than one that stops the work.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, BoxFuture};
use keel_tools::spawn::{ExitStatus, Spawn};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::hooks::{
    matcher_covers, HookDecision, HookEvent, HookInput, HookObserver, HookProgress, HookRunEnd,
    Hooks,
};

/// How much of a hook's stdout and stderr is kept (each).
const OUTPUT_CAP: usize = 64 * 1024;
/// A hook's deadline when its settings do not give one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest deadline a hook may ask for.
const MAX_TIMEOUT_SECS: f64 = 3600.0;

/// One command hook from a settings file.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandHook {
    /// The event it listens for.
    pub event: HookEvent,
    /// For tool events: which tools (`Bash`, `Edit|Write`, `*`).
    pub matcher: Option<String>,
    /// The shell command.
    pub command: String,
    /// Its deadline.
    pub timeout: Duration,
    /// `"onFailure": "allow"`: a failure of this hook does not block.
    pub fail_open: bool,
    /// The settings file it came from.
    pub source: String,
}

/// Events that Claude Code settings files may name and keel does not fire; hooks for them
/// are accepted and reported as inactive instead of refusing the file.
const NOT_FIRED: &[&str] = &["Setup"];

/// A settings file's `hooks` that cannot be used: the file, the field and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: `{field}` {problem}")]
pub struct HooksError {
    /// The settings file (or flag) the hooks came from.
    pub file: String,
    /// The field, e.g. `hooks.Stop[0].hooks[1].timeout`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Parse the `hooks` object of a settings file. Wrong shapes are errors that name the file
/// and the field; `Ok` also returns notes about hooks keel accepts but never runs.
pub fn parse_settings_hooks(
    v: &Value,
    where_: &str,
) -> Result<(Vec<CommandHook>, Vec<String>), HooksError> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let obj = match v {
        Value::Null => return Ok((out, notes)),
        Value::Object(o) => o,
        _ => {
            let problem = "must be an object of events".into();
            return Err(hooks_error(where_, "hooks", problem));
        }
    };
    for (name, groups) in obj {
        let event = hook_event(name, where_, &mut notes)?;
        let Value::Array(groups) = groups else {
            return Err(hooks_error(
                where_,
                &format!("hooks.{name}"),
                "must be a list of {matcher, hooks} objects".into(),
            ));
        };
        for (gi, g) in groups.iter().enumerate() {
            let field = format!("hooks.{name}[{gi}]");
            parse_group(g, &field, where_, event, &mut out)?;
        }
    }
    Ok((out, notes))
}

/// A settings file's hooks error: the file, the field and what is wrong with it.
fn hooks_error(file: &str, field: &str, problem: String) -> HooksError {
    HooksError {
        file: file.to_owned(),
        field: field.to_owned(),
        problem,
    }
}

/// The event a `hooks` key names: `None` (with a note) for one keel accepts but never fires,
/// an error for a name that is no event.
fn hook_event(
    name: &str,
    where_: &str,
    notes: &mut Vec<String>,
) -> Result<Option<HookEvent>, HooksError> {
    match HookEvent::parse(name) {
        Some(e) => Ok(Some(e)),
        None if NOT_FIRED.contains(&name) => {
            notes.push(format!(
                "{where_}: hooks for {name} are not run by keel (it has no such event)"
            ));
            Ok(None)
        }
        None => Err(hooks_error(
            where_,
            &format!("hooks.{name}"),
            format!(
                "is not a hook event ({})",
                HookEvent::ALL.map(|e| e.as_str()).join(", ")
            ),
        )),
    }
}

/// One `{matcher, hooks}` group at `field`; its hooks go into `out` when `event` is one keel
/// fires (they are checked all the same).
fn parse_group(
    g: &Value,
    field: &str,
    where_: &str,
    event: Option<HookEvent>,
    out: &mut Vec<CommandHook>,
) -> Result<(), HooksError> {
    let bad = |field: &str, problem: String| hooks_error(where_, field, problem);
    let Value::Object(g) = g else {
        return Err(bad(field, "must be an object".into()));
    };
    let matcher = match g.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => {
            crate::hooks::check_matcher(m)
                .map_err(|e| bad(&format!("{field}.matcher"), format!("is not usable: {e}")))?;
            Some(m.clone())
        }
        Some(_) => return Err(bad(&format!("{field}.matcher"), "must be a string".into())),
    };
    let Some(Value::Array(hooks)) = g.get("hooks") else {
        return Err(bad(
            &format!("{field}.hooks"),
            "must be a list of hooks".into(),
        ));
    };
    for (hi, h) in hooks.iter().enumerate() {
        let (command, timeout, fail_open) = parse_hook(h, &format!("{field}.hooks[{hi}]"), where_)?;
        if let Some(event) = event {
            out.push(CommandHook {
                event,
                matcher: matcher.clone(),
                command,
                timeout,
                fail_open,
                source: where_.to_owned(),
            });
        }
    }
    Ok(())
}

/// One hook at `hf`: its command, its deadline and whether a failure lets the work go on.
fn parse_hook(h: &Value, hf: &str, where_: &str) -> Result<(String, Duration, bool), HooksError> {
    let bad = |field: &str, problem: String| hooks_error(where_, field, problem);
    let Value::Object(h) = h else {
        return Err(bad(hf, "must be an object".into()));
    };
    match h.get("type").and_then(Value::as_str) {
        Some("command") => {}
        Some(other) => {
            return Err(bad(
                &format!("{hf}.type"),
                format!("{other:?} is not supported (keel runs \"command\" hooks)"),
            ))
        }
        None => return Err(bad(&format!("{hf}.type"), "must be \"command\"".into())),
    }
    let command = h
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| {
            bad(
                &format!("{hf}.command"),
                "must be a non-empty string".into(),
            )
        })?;
    let timeout = match h.get("timeout") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT,
        Some(Value::Number(n)) => {
            let s = n.as_f64().unwrap_or(-1.0);
            if !(s > 0.0 && s <= MAX_TIMEOUT_SECS) {
                return Err(bad(
                    &format!("{hf}.timeout"),
                    format!("must be between 0 and {MAX_TIMEOUT_SECS} seconds, found {n}"),
                ));
            }
            Duration::from_secs_f64(s)
        }
        Some(_) => {
            return Err(bad(
                &format!("{hf}.timeout"),
                "must be a number of seconds".into(),
            ))
        }
    };
    let fail_open = match h.get("onFailure") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "allow" => true,
        Some(Value::String(s)) if s == "block" => false,
        Some(other) => {
            return Err(bad(
                &format!("{hf}.onFailure"),
                format!("must be \"block\" or \"allow\", found {other}"),
            ))
        }
    };
    Ok((command.to_owned(), timeout, fail_open))
}

/// The command hooks of a session.
#[derive(Debug)]
pub struct CommandHooks {
    hooks: Vec<CommandHook>,
    project_dir: PathBuf,
    /// `--include-hook-events`: report every event's hooks, not only SessionStart's.
    all_frames: bool,
}

impl CommandHooks {
    /// Hooks that run in `project_dir`; `all_frames`: every hook gets `hook_started` /
    /// `hook_response` frames (SessionStart's always do, as in Claude Code).
    pub fn new(hooks: Vec<CommandHook>, project_dir: PathBuf, all_frames: bool) -> Arc<Self> {
        Arc::new(Self {
            hooks,
            project_dir,
            all_frames,
        })
    }

    fn run_reporting<'a>(
        &'a self,
        input: HookInput,
        observer: Option<&'a dyn HookObserver>,
    ) -> BoxFuture<'a, HookDecision> {
        Box::pin(async move {
            let stdin = input.to_json().to_string();
            let observer =
                observer.filter(|_| self.all_frames || input.event == HookEvent::SessionStart);
            let hooks: Vec<&CommandHook> = self.matching(input.event, input.subject()).collect();
            let decisions = join_all(
                hooks
                    .iter()
                    .map(|h| run_reported(h, &stdin, &self.project_dir, observer)),
            )
            .await;
            let mut all = HookDecision::proceed();
            for d in decisions {
                all.merge(d);
            }
            all
        })
    }

    fn matching<'a>(
        &'a self,
        event: HookEvent,
        subject: Option<&'a str>,
    ) -> impl Iterator<Item = &'a CommandHook> + 'a {
        self.hooks.iter().filter(move |h| {
            h.event == event && subject.is_none_or(|s| matcher_covers(h.matcher.as_deref(), s))
        })
    }
}

impl Hooks for CommandHooks {
    fn wants(&self, event: HookEvent, subject: Option<&str>) -> bool {
        self.matching(event, subject).next().is_some()
    }

    fn run(&self, input: HookInput) -> BoxFuture<'_, HookDecision> {
        self.run_reporting(input, None)
    }

    fn run_observed<'a>(
        &'a self,
        input: HookInput,
        observer: &'a dyn HookObserver,
    ) -> BoxFuture<'a, HookDecision> {
        self.run_reporting(input, Some(observer))
    }
}

/// Run one hook, reporting its start and end to `observer` (when frames are wanted).
async fn run_reported(
    h: &CommandHook,
    stdin: &str,
    dir: &PathBuf,
    observer: Option<&dyn HookObserver>,
) -> HookDecision {
    let Some(observer) = observer else {
        return run_one(h, stdin, dir, None).await;
    };
    let hook_id = crate::emit::new_uuid();
    let hook_name = match h.matcher.as_deref().filter(|m| !m.is_empty()) {
        Some(m) => format!("{}:{m}", h.event),
        None => h.event.as_str().to_owned(),
    };
    let command = short_command(&h.command);
    let progress = |end| HookProgress {
        hook_id: hook_id.clone(),
        hook_name: hook_name.clone(),
        command: command.clone(),
        event: h.event,
        end,
    };
    observer.report(progress(None)).await;
    let mut end = None;
    let d = run_one(h, stdin, dir, Some(&mut end)).await;
    observer.report(progress(end)).await;
    d
}

/// How one run of a hook ended.
enum Outcome {
    Exited {
        code: i32,
        stdout: String,
        stderr: String,
    },
    Failed(String),
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(mut r: R) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut dropped = false;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped |= n > room;
            }
        }
    }
    let mut s = String::from_utf8_lossy(&kept).into_owned();
    if dropped {
        s.push_str("\n[output cut at 64 KiB]");
    }
    s
}

async fn execute(h: &CommandHook, stdin: &str, dir: &PathBuf) -> Outcome {
    // Started like a Bash command (its own group under a supervisor that holds whatever it
    // daemonizes, dead with keel); dropping `child` — the deadline passed, the turn was
    // interrupted, the hook ended — kills everything it left behind.
    let spawn = Spawn::shell("/bin/sh", &h.command)
        .cwd(dir)
        .env("CLAUDE_PROJECT_DIR", dir)
        .env("KEEL_PROJECT_DIR", dir)
        .stdin_piped();
    // Without a launcher the supervisor's parent-death signal follows the thread that forks:
    // fork from a runtime worker (long-lived), never from a blocking-pool thread.
    let started = tokio::spawn(async move { spawn.spawn().map_err(|e| e.to_string()) })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    let mut child = match started {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("could not start ({e})")),
    };
    let mut input = child.take_stdin();
    let stdout = child.take_stdout();
    let stderr = child.take_stderr();
    let body = stdin.to_owned();
    let work = async {
        // A hook that does not read its input must not block on a full pipe: write in the
        // background, ignoring a closed pipe.
        let writer = async move {
            if let Some(mut i) = input.take() {
                let _ = i.write_all(body.as_bytes()).await;
                let _ = i.shutdown().await;
            }
        };
        let out = async move {
            match stdout {
                Some(s) => read_capped(s).await,
                None => String::new(),
            }
        };
        let err = async move {
            match stderr {
                Some(s) => read_capped(s).await,
                None => String::new(),
            }
        };
        let ((), stdout, stderr, report) = tokio::join!(writer, out, err, child.wait());
        (stdout, stderr, report.status)
    };
    match tokio::time::timeout(h.timeout, work).await {
        Err(_) => Outcome::Failed(format!(
            "did not finish within its {} s deadline and was stopped",
            h.timeout.as_secs_f64()
        )),
        Ok((stdout, stderr, Some(ExitStatus::Code(code)))) => Outcome::Exited {
            code,
            stdout,
            stderr,
        },
        Ok((_, stderr, Some(ExitStatus::Signal(sig)))) => Outcome::Failed(format!(
            "was killed by a signal (signal {sig}){}",
            tail(&stderr)
        )),
        Ok((_, stderr, None)) => Outcome::Failed(format!(
            "was stopped before it could say how it ended{}",
            tail(&stderr)
        )),
    }
}

fn tail(stderr: &str) -> String {
    let t = stderr.trim();
    if t.is_empty() {
        String::new()
    } else {
        let last: String = t
            .chars()
            .rev()
            .take(400)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!(": {last}")
    }
}

fn short_command(c: &str) -> String {
    if c.chars().count() <= 80 {
        c.to_owned()
    } else {
        format!("{}…", c.chars().take(80).collect::<String>())
    }
}

/// Run one hook and read its answer; `report`, when given, receives how the run ended.
async fn run_one(
    h: &CommandHook,
    stdin: &str,
    dir: &PathBuf,
    report: Option<&mut Option<HookRunEnd>>,
) -> HookDecision {
    let outcome = execute(h, stdin, dir).await;
    if let Some(r) = report {
        *r = Some(run_end(&outcome));
    }
    match outcome {
        Outcome::Failed(why) => failure(h, why),
        Outcome::Exited {
            code: 0, stdout, ..
        } => exited_zero(h, &stdout),
        Outcome::Exited {
            code: 2, stderr, ..
        } => exited_two(h, &stderr),
        Outcome::Exited { code, stderr, .. } => {
            failure(h, format!("exited with code {code}{}", tail(&stderr)))
        }
    }
}

/// How a hook's run ended, as the hook observer is told.
fn run_end(outcome: &Outcome) -> HookRunEnd {
    match outcome {
        Outcome::Exited {
            code,
            stdout,
            stderr,
        } => HookRunEnd {
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            exit_code: Some(*code),
            outcome: if *code == 0 { "success" } else { "error" },
        },
        Outcome::Failed(why) => HookRunEnd {
            stdout: String::new(),
            stderr: why.clone(),
            exit_code: None,
            outcome: "error",
        },
    }
}

/// The decision after hook `h` failed (`why`): a guard hook blocks unless it said
/// `"onFailure": "allow"`; any other warns and lets the work go on.
fn failure(h: &CommandHook, why: String) -> HookDecision {
    let who = format!(
        "the {} hook `{}` from {}",
        h.event,
        short_command(&h.command),
        h.source
    );
    if h.event.guards() && !h.fail_open {
        HookDecision::blocked(format!(
            "{who} {why}. keel fails closed when a guard hook fails; fix the hook, or give it \"onFailure\": \"allow\""
        ))
    } else {
        tracing::warn!("{who} {why}");
        HookDecision {
            system_message: Some(format!("{who} {why}")),
            ..HookDecision::proceed()
        }
    }
}

/// The decision of a hook that exited 0: its JSON answer, or its plain text as context for
/// the events that take it.
fn exited_zero(h: &CommandHook, stdout: &str) -> HookDecision {
    let t = stdout.trim();
    if t.starts_with('{') {
        match serde_json::from_str::<Value>(t) {
            Ok(v) => match HookDecision::from_output(h.event, &v) {
                Ok(d) => d,
                Err(e) => failure(h, format!("printed an answer keel cannot use ({e})")),
            },
            Err(e) => failure(h, format!("printed JSON that does not parse ({e})")),
        }
    } else if !t.is_empty()
        && matches!(
            h.event,
            HookEvent::UserPromptSubmit | HookEvent::SessionStart
        )
    {
        HookDecision {
            additional_context: vec![t.to_owned()],
            ..HookDecision::proceed()
        }
    } else {
        HookDecision::proceed()
    }
}

/// The decision of a hook that exited 2: its stderr is the reason, which blocks where the
/// event can be blocked and is shown to the user elsewhere.
fn exited_two(h: &CommandHook, stderr: &str) -> HookDecision {
    let reason = match stderr.trim() {
        "" => format!(
            "the {} hook `{}` exited with 2",
            h.event,
            short_command(&h.command)
        ),
        s => s.to_owned(),
    };
    match h.event {
        // These events can stop or redirect something, and the reason goes to the
        // model (or, for PermissionRequest, is the denial's message).
        HookEvent::PreToolUse
        | HookEvent::PostToolUse
        | HookEvent::PostToolUseFailure
        | HookEvent::UserPromptSubmit
        | HookEvent::PermissionRequest
        | HookEvent::Stop
        | HookEvent::SubagentStop => HookDecision::blocked(reason),
        // The rest cannot block: the user sees the reason.
        _ => HookDecision {
            system_message: Some(reason),
            ..HookDecision::proceed()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_shapes_are_checked() {
        let ok = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x", "timeout": 5, "onFailure": "allow"}]}],
                        "PermissionRequest": [{"matcher": "Web.*", "hooks": [{"type": "command", "command": "y"}]}],
                        "Setup": [{"hooks": [{"type": "command", "command": "z"}]}]});
        let (hooks, notes) = parse_settings_hooks(&ok, "s.json").unwrap();
        assert_eq!(hooks.len(), 2);
        assert_eq!(hooks[0].timeout, Duration::from_secs(5));
        assert!(hooks[0].fail_open);
        assert_eq!(notes.len(), 1);
        for (bad, field) in [
            (json!([]), "hooks"),
            (json!({"Bogus": []}), "hooks.Bogus"),
            (json!({"Stop": {}}), "hooks.Stop"),
            (
                json!({"PreToolUse": [{"matcher": "Bash(", "hooks": []}]}),
                "hooks.PreToolUse[0].matcher",
            ),
            (
                json!({"Stop": [{"hooks": [{"type": "command"}]}]}),
                "hooks.Stop[0].hooks[0].command",
            ),
            (
                json!({"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": -1}]}]}),
                "timeout",
            ),
            (
                json!({"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": 1e9}]}]}),
                "timeout",
            ),
            (
                json!({"Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]}),
                "type",
            ),
            (
                json!({"Stop": [{"hooks": [{"type": "command", "command": "x", "onFailure": "maybe"}]}]}),
                "onFailure",
            ),
        ] {
            let e = parse_settings_hooks(&bad, "s.json").unwrap_err();
            assert!(e.file == "s.json" && e.field.contains(field), "{e}");
        }
    }
}
