//! Command hooks and MCP stdio servers are owned the way Bash commands are (ownership.rs):
//! what they daemonize (setsid, a double fork) does not outlive them, and nothing of theirs
//! outlives keel — not after a SIGKILL, not after a hang-up.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::common::{eventually, mcp_test_server, processes_matching, Harness};

const SIGHUP: i32 = 1;
const SIGKILL: i32 = 9;

/// Everything matching `needle` is gone within a generous bound.
async fn none_left(needle: &str) -> bool {
    eventually(Duration::from_secs(20), || {
        processes_matching(needle).is_empty()
    })
    .await
}

/// What the processes matching `needle` are (command line and stat), for a failure message.
fn described(needle: &str) -> Vec<String> {
    processes_matching(needle)
        .into_iter()
        .map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            format!(
                "{p}: {} [{stat}]",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            )
        })
        .collect()
}

/// The project settings file with a PreToolUse hook on Bash running `command`.
fn hook_on_bash(dir: &Path, command: &str) {
    let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": command, "timeout": 600}
    ]}]}});
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    std::fs::write(dir.join(".claude/settings.json"), hooks.to_string()).unwrap();
}

/// A shell line that starts a daemon (`setsid -f`: a fork, a new session, the parent gone)
/// running `sleep <secs>`, its pid appended to `pidfile` (a restarted server adds a line), no
/// pipe of its starter held; the line ends once the pid file is written.
fn daemon(secs: &str, pidfile: &str) -> String {
    format!(
        "setsid -f sh -c 'echo $$ >> {pidfile}; exec sleep {secs}' </dev/null >/dev/null 2>&1; while [ ! -s {pidfile} ]; do sleep 0.01; done"
    )
}

/// A Bash command that waits (bounded) for the first process in `pidfile` to be gone and says
/// whether it went: keel is still running then, so it is keel's doing, not its exit's.
fn report_gone(pidfile: &str) -> String {
    format!(
        "p=$(head -n 1 {pidfile}); [ -n \"$p\" ] || {{ echo 'no pid file'; exit 0; }}; i=0; while kill -0 $p 2>/dev/null && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; if kill -0 $p 2>/dev/null; then echo \"daemon $p still running\"; else echo \"daemon $p gone\"; fi"
    )
}

fn steps(calls: Vec<Value>) -> String {
    let mut steps: Vec<Value> = calls
        .into_iter()
        .map(|c| json!({"kind": "tool_use", "calls": [c]}))
        .collect();
    steps.push(json!({"kind": "text", "text": "after"}));
    json!({ "steps": steps }).to_string()
}

fn bash(command: &str) -> Value {
    json!({"name": "Bash", "input": {"command": command, "timeout": 600000}})
}

fn is_tool_use(f: &Value) -> bool {
    f["type"] == "assistant" && f["message"]["content"][0]["type"] == "tool_use"
}

fn text_of(result: &Value) -> String {
    match &result["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An MCP config whose server `t` is the test server started through a shell wrapper (as
/// `npx` is) that first runs `before`; `tag` marks the server's command line.
fn wrapped_server(before: &str, mode: &str, tag: &str) -> String {
    let line = format!(
        "{before}; exec {} --mode {mode} --tag {tag}",
        mcp_test_server().display()
    );
    json!({"mcpServers": {"t": {"command": "/bin/sh", "args": ["-c", line]}}}).to_string()
}

#[tokio::test]
async fn a_daemon_a_hook_starts_is_gone_when_the_hook_ends() {
    let h = Harness::from_json(&steps(vec![bash(&report_gone("hook-daemon.pid"))])).await;
    hook_on_bash(
        h.cwd(),
        &format!("{}; exit 0", daemon("300.811", "hook-daemon.pid")),
    );
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let result = text_of(run.tool_results()[0]);
    assert!(result.contains("gone"), "{result}");
    assert!(none_left("sleep 300.811").await);
}

#[tokio::test]
async fn kill_9_of_keel_takes_a_running_hooks_whole_tree() {
    let h = Harness::from_json(&steps(vec![bash("echo unreachable")])).await;
    // A grandchild in the hook's group, one that left it, and the hook itself, all waiting.
    hook_on_bash(
        h.cwd(),
        &format!(
            "(sleep 300.821 &); {}; touch hook-started; sleep 300.823",
            daemon("300.822", "hook-daemon.pid")
        ),
    );
    let mut live = h.live_stream("go", &["--allowedTools", "Bash"], &[]);
    live.wait_for(Duration::from_secs(30), is_tool_use).await;
    let started = h.cwd().join("hook-started");
    assert!(eventually(Duration::from_secs(30), || started.exists()).await);
    assert!(
        eventually(Duration::from_secs(20), || processes_matching(
            "sleep 300.82"
        )
        .len()
            >= 3)
        .await,
        "{:?}",
        processes_matching("sleep 300.82")
    );
    live.signal(SIGKILL);
    let _ = live.finish(Duration::from_secs(20)).await;
    assert!(
        none_left("sleep 300.82").await,
        "survived keel's SIGKILL: {:?}",
        processes_matching("sleep 300.82")
    );
}

#[tokio::test]
async fn a_hangup_during_a_hook_ends_with_one_result_and_no_leftover() {
    let h = Harness::from_json(&steps(vec![bash("echo unreachable")])).await;
    hook_on_bash(
        h.cwd(),
        &format!(
            "{}; touch hook-started; sleep 300.832",
            daemon("300.831", "hook-daemon.pid")
        ),
    );
    let mut live = h.live_stream("go", &["--allowedTools", "Bash"], &[]);
    live.wait_for(Duration::from_secs(30), is_tool_use).await;
    let started = h.cwd().join("hook-started");
    assert!(eventually(Duration::from_secs(30), || started.exists()).await);
    live.signal(SIGHUP);
    let run = live.finish(Duration::from_secs(30)).await;
    assert_eq!(run.of("result").len(), 1, "{:?}", run.frames);
    assert_eq!(run.result()["is_error"], true, "{:?}", run.result());
    assert_ne!(run.code, 0);
    assert!(!h.cwd().join("unreachable").exists());
    assert!(
        none_left("sleep 300.83").await,
        "{:?}",
        processes_matching("sleep 300.83")
    );
}

#[tokio::test]
async fn a_daemon_an_mcp_server_started_dies_with_the_server() {
    let tag = format!("keel-test-{}-mcp-daemon-crash", std::process::id());
    let h = Harness::from_json(&steps(vec![
        json!({"name": "mcp__t__echo", "input": {"text": "x"}}),
        bash(&report_gone("mcp-daemon.pid")),
    ]))
    .await;
    let cfg = wrapped_server(&daemon("300.911", "mcp-daemon.pid"), "crash-on-call", &tag);
    let run = h
        .run_stream(
            "go",
            &["--mcp-config", &cfg, "--allowedTools", "mcp__t Bash"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let results = run.tool_results();
    assert_eq!(results.len(), 2, "{:?}", run.frames);
    // The server crashed in the call; what it daemonized went with it while keel ran on (keel
    // restarts a crashed server once: the restart's daemon is the second line of the file).
    assert!(
        text_of(results[0]).contains("exit status 7"),
        "{}",
        text_of(results[0])
    );
    let second = text_of(results[1]);
    assert!(second.contains("gone"), "{second}");
    assert!(none_left("sleep 300.911").await);
}

#[tokio::test]
async fn a_daemon_an_mcp_server_started_is_gone_when_the_session_ends() {
    let tag = format!("keel-test-{}-mcp-daemon-end", std::process::id());
    let h = Harness::from_json(&steps(vec![json!(
        {"name": "mcp__t__echo", "input": {"text": "x"}}
    )]))
    .await;
    let cfg = wrapped_server(&daemon("300.921", "mcp-daemon.pid"), "normal", &tag);
    let run = h
        .run_stream(
            "go",
            &["--mcp-config", &cfg, "--allowedTools", "mcp__t"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(h.cwd().join("mcp-daemon.pid").exists());
    assert!(
        none_left("sleep 300.921").await,
        "{:?}",
        described("sleep 300.921")
    );
    assert!(none_left(&tag).await, "{:?}", described(&tag));
}

/// keel with a connected MCP server whose wrapper daemonized a sleep, stopped while a Bash
/// call runs; `sig` is then sent to keel.
async fn mcp_server_then_signal(sig: i32, secs: &str, tag: &str) -> (Harness, super::common::Run) {
    let h = Harness::from_json(&steps(vec![bash("touch bash-started; sleep 300.99")])).await;
    let cfg = wrapped_server(&daemon(secs, "mcp-daemon.pid"), "normal", tag);
    let mut live = h.live_stream(
        "go",
        &["--mcp-config", &cfg, "--allowedTools", "mcp__t Bash"],
        &[],
    );
    live.wait_for(Duration::from_secs(60), is_tool_use).await;
    let started = h.cwd().join("bash-started");
    assert!(eventually(Duration::from_secs(30), || started.exists()).await);
    // keel's own command line holds both strings (in its --mcp-config): not counted.
    let keel = live.pid();
    let others = |needle: &str| -> Vec<i32> {
        processes_matching(needle)
            .into_iter()
            .filter(|p| *p != keel)
            .collect()
    };
    assert!(
        eventually(Duration::from_secs(20), || {
            !others(&format!("sleep {secs}")).is_empty() && !others(tag).is_empty()
        })
        .await
    );
    live.signal(sig);
    let run = live.finish(Duration::from_secs(30)).await;
    (h, run)
}

#[tokio::test]
async fn kill_9_of_keel_takes_an_mcp_servers_whole_tree() {
    let tag = format!("keel-test-{}-mcp-kill9", std::process::id());
    let (_h, _run) = mcp_server_then_signal(SIGKILL, "300.931", &tag).await;
    assert!(
        none_left("sleep 300.931").await,
        "survived keel's SIGKILL: {:?}",
        processes_matching("sleep 300.931")
    );
    assert!(none_left(&tag).await, "the server survived keel's SIGKILL");
}

#[tokio::test]
async fn a_hangup_ends_with_one_result_and_no_mcp_leftover() {
    let tag = format!("keel-test-{}-mcp-hup", std::process::id());
    let (_h, run) = mcp_server_then_signal(SIGHUP, "300.941", &tag).await;
    assert_eq!(run.of("result").len(), 1, "{:?}", run.frames);
    run.assert_end("error_during_execution", true, "aborted_tools", 130);
    assert!(none_left("sleep 300.941").await);
    assert!(none_left(&tag).await);
}
