//! Bash: output, exit codes, deadlines, cancellation and the process tree.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools::{BashTool, CancelReason, Tool, ToolLimits, ToolOutcome};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{cx, group_gone, quick_cx, wait_for_pid};

async fn bash(dir: &std::path::Path, command: &str) -> ToolOutcome {
    BashTool.call(json!({ "command": command }), cx(dir)).await
}

#[tokio::test]
async fn echo_ok_with_meta() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash(dir.path(), "echo hello").await;
    assert_eq!(
        out,
        ToolOutcome::Ok {
            content: "hello".into(),
            meta: Some(
                json!({"stdout": "hello\n", "stderr": "", "interrupted": false, "exit_code": 0})
            ),
        }
    );
}

#[tokio::test]
async fn stdout_then_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash(dir.path(), "echo out; echo err >&2").await;
    let ToolOutcome::Ok { content, meta } = out else {
        panic!("{out:?}")
    };
    assert_eq!(content, "out\nerr");
    assert_eq!(meta.unwrap()["stderr"], "err\n");
}

#[tokio::test]
async fn nonzero_exit_is_failed_with_code() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash(dir.path(), "echo some output; echo oops >&2; exit 3").await;
    let ToolOutcome::Failed { message, meta } = out else {
        panic!("{out:?}")
    };
    assert_eq!(message, "some output\noops\nExit code 3");
    assert_eq!(meta.unwrap()["exit_code"], 3);
    let out = bash(dir.path(), "false").await;
    assert_eq!(out.text(), "Exit code 1");
}

#[tokio::test]
async fn killed_by_signal_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash(dir.path(), "kill -KILL $$").await;
    let ToolOutcome::Failed { message, meta } = out else {
        panic!("{out:?}")
    };
    assert!(message.contains("Killed by signal SIGKILL"), "{message}");
    assert_eq!(meta.unwrap()["exit_code"], json!(null));
}

#[tokio::test]
async fn environment_cwd_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(bash(dir.path(), "echo $KEEL").await.text(), "1");
    let real = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        bash(dir.path(), "pwd -P").await.text(),
        real.display().to_string()
    );
    // stdin is /dev/null: `cat` sees end of file at once instead of waiting for input.
    assert_eq!(bash(dir.path(), "cat").await.text(), "(no output)");
    // No terminal.
    assert_eq!(
        bash(dir.path(), "[ -t 0 ] || [ -t 1 ] || echo no-tty")
            .await
            .text(),
        "no-tty"
    );
    // Its own session and group, led by its supervisor (the shell's parent).
    assert_eq!(
        bash(
            dir.path(),
            "[ \"$(ps -o pgid= -p $$ | tr -d ' ')\" = \"$PPID\" ] && [ \"$(ps -o sid= -p $$ | tr -d ' ')\" = \"$PPID\" ] && echo leader"
        )
        .await
        .text(),
        "leader"
    );
}

#[tokio::test]
async fn progress_lines_collapsed() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash(dir.path(), "printf '10%%\\r50%%\\r100%%\\ndone\\r\\n'").await;
    assert_eq!(out.text(), "100%\ndone");
}

#[tokio::test]
async fn timeout_stops_the_group_and_keeps_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let cmd = format!(
        "echo $$ > {}; echo partial-out; sleep 1000",
        pidfile.display()
    );
    let out = BashTool
        .call(
            json!({"command": cmd, "timeout": 1500}),
            quick_cx(dir.path()),
        )
        .await;
    let ToolOutcome::Stopped {
        reason,
        started,
        partial,
        elapsed,
        processes_killed,
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(reason, CancelReason::Timeout);
    assert!(started);
    assert_eq!(partial, "partial-out");
    assert!(elapsed >= Duration::from_millis(1500));
    assert!(processes_killed >= 1);
    let pgid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(group_gone(pgid).await, "process group {pgid} still alive");
}

#[tokio::test]
async fn cancel_kills_background_and_foreground() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let cx = quick_cx(dir.path());
    let token = cx.cancel.clone();
    let cmd = format!("sleep 1000 & echo $$ > {}; sleep 1000", pidfile.display());
    let call = tokio::spawn(async move { BashTool.call(json!({ "command": cmd }), cx).await });
    let pgid = wait_for_pid(&pidfile).await;
    token.cancel(CancelReason::UserInterrupted);
    let out = call.await.unwrap();
    let ToolOutcome::Stopped {
        reason,
        started,
        processes_killed,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(reason, CancelReason::UserInterrupted);
    assert!(started);
    assert!(processes_killed >= 2, "killed {processes_killed}");
    assert!(group_gone(pgid).await, "process group {pgid} still alive");
}

#[tokio::test]
async fn term_trapping_command_is_killed_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let cx = quick_cx(dir.path());
    let token = cx.cancel.clone();
    let cmd = format!("trap '' TERM; echo $$ > {}; sleep 1000", pidfile.display());
    let call = tokio::spawn(async move { BashTool.call(json!({ "command": cmd }), cx).await });
    let pgid = wait_for_pid(&pidfile).await;
    token.cancel(CancelReason::SiblingError);
    let out = call.await.unwrap();
    let ToolOutcome::Stopped {
        reason, elapsed, ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(reason, CancelReason::SiblingError);
    assert!(
        elapsed >= Duration::from_millis(300),
        "no grace before SIGKILL: {elapsed:?}"
    );
    assert!(
        group_gone(pgid).await,
        "process group {pgid} survived SIGKILL"
    );
}

#[tokio::test]
async fn already_cancelled_never_starts() {
    let dir = tempfile::tempdir().unwrap();
    let cx = cx(dir.path());
    cx.cancel.cancel(CancelReason::Shutdown);
    let out = BashTool.call(json!({"command": "touch x"}), cx).await;
    assert!(matches!(
        out,
        ToolOutcome::Stopped {
            started: false,
            reason: CancelReason::Shutdown,
            ..
        }
    ));
    assert!(!dir.path().join("x").exists());
}

#[tokio::test]
async fn grandchild_holding_stdout_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let cx = quick_cx(dir.path());
    let registry = cx.processes.clone();
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        BashTool.call(json!({"command": "sleep 30 & echo started"}), cx),
    )
    .await
    .expect("the call hung on a pipe held by a grandchild");
    let ToolOutcome::Ok { content, .. } = out else {
        panic!("{out:?}")
    };
    assert!(content.starts_with("started\n"), "{content}");
    assert!(content.contains("stopped reading output"), "{content}");
    // Left running on purpose, but tracked for the end of the session.
    let live = registry.live();
    assert_eq!(live.len(), 1, "{live:?}");
    let pgid = live[0].pgid;
    assert!(keel_tools::process::group_alive(pgid));
    assert!(registry.kill_all(Duration::from_millis(300)).await >= 1);
    assert!(group_gone(pgid).await);
}

#[tokio::test]
async fn quiet_background_job_is_tracked() {
    let dir = tempfile::tempdir().unwrap();
    let cx = quick_cx(dir.path());
    let registry = cx.processes.clone();
    let out = BashTool
        .call(json!({"command": "sleep 30 >/dev/null 2>&1 & echo bg"}), cx)
        .await;
    assert_eq!(out.text(), "bg");
    let live = registry.live();
    assert_eq!(live.len(), 1);
    let pgid = live[0].pgid;
    // Dropping the session's registry stops what is left.
    drop(registry);
    assert!(group_gone(pgid).await);
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let cmd = format!("echo $$ > {}; sleep 1000", pidfile.display());
    let cx = cx(dir.path());
    let call = tokio::spawn(async move { BashTool.call(json!({ "command": cmd }), cx).await });
    let pgid = wait_for_pid(&pidfile).await;
    call.abort();
    let _ = call.await;
    assert!(group_gone(pgid).await);
}

#[tokio::test]
async fn huge_output_keeps_head_and_tail_and_spills() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let limits = ToolLimits {
        spill_dir: Some(spill.clone()),
        ..ToolLimits::default()
    };
    let budget = limits.head_bytes + limits.tail_bytes;
    let cx = cx(dir.path()).with_limits(Arc::new(limits));
    let out = BashTool
        .call(json!({"command": "yes | head -c 5000000"}), cx)
        .await;
    let ToolOutcome::Ok { content, meta } = out else {
        panic!("{out:?}")
    };
    assert!(content.len() < budget + 500, "kept {} bytes", content.len());
    assert!(content.starts_with("y\ny\n"));
    assert!(content.ends_with("y\ny"));
    let file = spill.join("toolu_test.stdout.txt");
    assert!(
        content.contains(&format!(
            "bytes omitted; full output saved to {} ...]",
            file.display()
        )),
        "{}",
        &content[14_900..15_200.min(content.len())]
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 5_000_000);
    assert!(meta.unwrap()["stdout"].as_str().unwrap().len() < budget + 500);
}

#[tokio::test]
async fn huge_output_without_spill_dir_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash(dir.path(), "seq 1 1000000").await;
    let content = out.text();
    assert!(content.starts_with("1\n2\n3\n"));
    assert!(content.ends_with("999999\n1000000"));
    assert!(content.contains("bytes omitted; the full output was not kept ...]"));
    assert!(content.len() < 31_000);
}

#[tokio::test]
async fn timeout_is_clamped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let out = BashTool
        .call(
            json!({"command": "echo hi", "timeout": 99_999_999}),
            cx(dir.path()),
        )
        .await;
    assert_eq!(
        out.text(),
        "hi\n[timeout 99999999 ms is above the maximum; 600000 ms was used]"
    );
    let out = BashTool
        .call(json!({"command": "echo hi", "timeout": -5}), cx(dir.path()))
        .await;
    assert!(out.text().contains("not positive"), "{}", out.text());
}

#[tokio::test]
async fn missing_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = bash(&dir.path().join("nope"), "echo hi").await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("does not exist")),
        "{out:?}"
    );
}

#[test]
fn read_only_follows_the_command() {
    assert!(BashTool.is_read_only(&json!({"command": "git status && ls"})));
    assert!(!BashTool.is_read_only(&json!({"command": "echo > f"})));
    assert!(!BashTool.is_read_only(&json!({"command": 5})));
    assert!(!BashTool.is_read_only(&json!({})));
}

/// Live processes whose command line contains `needle`.
fn alive(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true);
        if !zombie
            && String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains(needle)
        {
            out.push(pid);
        }
    }
    out
}

#[tokio::test]
async fn daemons_that_leave_the_group_are_stopped_when_the_call_ends() {
    let dir = tempfile::tempdir().unwrap();
    let forms = [
        ("setsid sleep 300.11 &", "sleep 300.11"),
        ("setsid -f sleep 300.12", "sleep 300.12"),
        (
            "nohup setsid sleep 300.13 >/dev/null 2>&1 & disown",
            "sleep 300.13",
        ),
        (
            "setsid sh -c 'sleep 300.14 & echo started' ",
            "sleep 300.14",
        ),
    ];
    for (command, needle) in forms {
        let out = bash(dir.path(), command).await;
        let text = out.text().to_owned();
        // The call has returned: nothing it started may be left.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !alive(needle).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            alive(needle).is_empty(),
            "{command}: still running: {:?}",
            alive(needle)
        );
        assert!(
            text.contains("keel stopped") && text.contains("run_in_background"),
            "{command}: the result says what was stopped: {text}"
        );
    }
}
