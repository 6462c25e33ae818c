//! The Bash suite again, with every command started through the launcher (as the `keel`
//! binary does), plus what only the launcher can get wrong: whose child the supervisor is, and
//! whether a command gets keel's environment as it is *now*. (What a killed launcher does to
//! running commands is `launcher_death.rs`: it would kill this suite's.)

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "suite/bash.rs"]
mod bash;
#[path = "suite/common.rs"]
#[allow(dead_code)]
mod common;

#[path = "support/launcher.rs"]
mod support;

use support::{chain, run, CHAIN};

/// Runs before `main`, so that every test here, the Bash suite's included, sends its commands
/// through a launcher: this package's test launcher program.
extern "C" fn launcher() {
    keel_tools::launcher::enable(env!("CARGO_BIN_EXE_keel-test-launcher").into());
}

#[used]
#[allow(unsafe_code)]
#[link_section = ".init_array"]
static ENABLE_LAUNCHER: extern "C" fn() = launcher;

#[tokio::test]
async fn commands_go_through_the_launcher() {
    let dir = tempfile::tempdir().unwrap();

    // The supervisor (the shell's parent) is the launcher's child, the launcher this process's.
    let (_, name, grandparent) = chain(&run(dir.path(), CHAIN).await);
    assert!(keel_tools::launcher::running());
    assert_eq!(name, "keel-launcher");
    assert_eq!(grandparent, std::process::id() as i32);

    // The environment is keel's at the time of the call, not the launcher's from start-up.
    // SAFETY: no other thread of this test binary reads or writes the environment now (this
    // binary's other tests do not touch it).
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("KEEL_LAUNCHED_TEST", "set after start");
    }
    let out = run(dir.path(), "echo \"$KEEL_LAUNCHED_TEST|$KEEL\"; pwd").await;
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(out, format!("set after start|1\n{}", cwd.display()));
}
