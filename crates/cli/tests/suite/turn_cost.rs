//! What a tool turn costs must not come from work it does not need: one connection to the
//! model for the whole run, and commands that still start with every signal at its default
//! now that the launcher resets dispositions once instead of each supervisor resetting all.

use std::time::Duration;

use serde_json::json;

use super::common::{Harness, Run};

/// `turns` Bash calls of `command`, then a text answer.
fn bash_turns(command: &str, turns: usize) -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": command}}], "times": turns},
        {"kind": "text", "text": "done"}
    ]})
    .to_string()
}

#[tokio::test]
async fn every_model_request_of_a_run_goes_over_one_connection() {
    let h = Harness::from_json(&bash_turns("true", 3)).await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(h.requests().len(), 4, "three tool turns and the answer");
    assert_eq!(
        h.mock.accepted_connections(),
        1,
        "keel opened a new connection for a request instead of reusing its keep-alive one"
    );
}

/// Signals 32 and 33 are glibc's own (thread cancellation, set*id): its `posix_spawn` leaves
/// them ignored in every child it starts, keel or not, and no program can send them usefully.
const GLIBC_INTERNAL: u64 = (1 << 31) | (1 << 32);

/// The signals the command's own process ignores (its `SigIgn` mask, one bit per signal,
/// signal n at bit n−1), glibc's internal ones left out, from its tool result.
fn ignored_mask(run: &Run) -> u64 {
    let text = run.tool_results()[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|hex| u64::from_str_radix(hex.trim(), 16))
        .unwrap_or_else(|| panic!("no SigIgn line in the tool result: {text:?}"))
        .unwrap_or_else(|e| panic!("SigIgn is not a hex mask ({e}): {text:?}"))
        & !GLIBC_INTERNAL
}

#[tokio::test]
async fn a_command_ignores_no_signal_even_when_keel_was_started_ignoring_some() {
    // The launcher ignores SIGINT, SIGTERM, SIGHUP, SIGPIPE and more for itself; keel here is
    // started the way `nohup` or a service manager would, with SIGHUP, SIGUSR2 and a real-time
    // signal ignored. The command must see none of that: every signal at its default.
    let h = Harness::from_json(&bash_turns("grep SigIgn /proc/$$/status", 1)).await;
    let keel = h.command(
        &[
            "-p",
            "go",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash",
        ],
        &[],
    );
    let std = keel.as_std();
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("trap '' HUP USR2 40 && exec \"$0\" \"$@\"")
        .arg(std.get_program())
        .args(std.get_args())
        .current_dir(h.cwd())
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in std.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("keel finished within 60 s")
        .expect("keel ran");
    let run = Run::new(
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    );
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        ignored_mask(&run),
        0,
        "the command inherited ignored signals (bit n-1 is signal n)"
    );
}

#[tokio::test]
async fn a_command_in_a_plain_run_ignores_no_signal() {
    let h = Harness::from_json(&bash_turns("grep SigIgn /proc/$$/status", 1)).await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(ignored_mask(&run), 0, "bit n-1 is signal n");
}
