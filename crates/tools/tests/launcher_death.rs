//! A killed launcher: the commands it started go with it (as they would with keel), and the
//! next command still runs, forked by keel itself. A binary of its own: the kill would stop any
//! other test's commands.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

#[path = "support/launcher.rs"]
mod support;

use keel_tools::{BashTool, Tool, ToolOutcome};
use serde_json::json;
use support::{chain, run, CHAIN};

/// Commands go through a launcher: this package's test launcher program.
fn launcher() {
    keel_tools::launcher::enable(env!("CARGO_BIN_EXE_keel-test-launcher").into());
}

#[tokio::test]
async fn a_killed_launcher_takes_its_commands_and_keel_carries_on() {
    launcher();
    let dir = tempfile::tempdir().unwrap();
    let (launcher, name, _) = chain(&run(dir.path(), CHAIN).await);
    assert_eq!(name, "keel-launcher");

    // A command still running, with a background job and a process that left its group.
    let pids = dir.path().join("pids");
    let cmd = format!(
        "sleep 300 > /dev/null 2>&1 & echo $! > {p}; \
         setsid sh -c 'echo $$ >> {p}; exec sleep 301' > /dev/null 2>&1 & \
         sleep 302",
        p = pids.display()
    );
    let cx = keel_tools::ToolContext::new(dir.path(), keel_tools::CancelToken::new());
    let call = tokio::spawn(async move { BashTool.call(json!({ "command": cmd }), cx).await });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let held: Vec<i32> = loop {
        let text = std::fs::read_to_string(&pids).unwrap_or_default();
        let held: Vec<i32> = text.lines().filter_map(|p| p.trim().parse().ok()).collect();
        if held.len() == 2 {
            break held;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    for &p in &held {
        assert!(alive(p), "{p}");
    }

    // The launcher is killed: what it started goes with it (as it would with keel).
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(launcher),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while held.iter().any(|p| alive(*p)) {
        assert!(
            std::time::Instant::now() < deadline,
            "still running 30 s after the launcher died: {:?}",
            held.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The call ends (its supervisor is gone), and says the command did not finish normally.
    let outcome = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the call ends once its processes are gone")
        .unwrap();
    assert!(!matches!(outcome, ToolOutcome::Ok { .. }), "{outcome:?}");

    // The next command still runs: keel forks it itself from now on.
    assert_eq!(run(dir.path(), "echo after").await, "after");
    assert!(!keel_tools::launcher::running());
    // And the dead launcher was reaped, not left a zombie.
    assert!(
        !std::path::Path::new(&format!("/proc/{launcher}")).exists(),
        "the dead launcher {launcher} is still in the process table"
    );
    let (parent, _, _) = chain(&run(dir.path(), CHAIN).await);
    assert_eq!(parent, std::process::id() as i32, "forked by this process");
}

/// Whether `pid` runs (a zombie does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            s.rsplit(") ").next().and_then(|r| r.chars().next()),
            Some('Z')
        ),
        Err(_) => false,
    }
}
