//! The OS sandbox for Bash: writes only in the allowed directories, reads everywhere, the
//! network off unless allowed. The tests that need a kernel with Landlock are ignored by
//! default; `.ci/run` runs them (`--ignored`) wherever the kernel offers it.

use std::time::Duration;

use serde_json::json;

use super::common::Harness;

/// An ignored test run where it cannot check anything fails instead of passing.
fn require_landlock() {
    assert!(
        keel_tools::sandbox::landlock_abi() >= 1,
        "this kernel does not offer Landlock: run the sandbox tests on one that does"
    );
}

/// A scratch directory outside every directory the sandbox lets keel write to: not under the
/// working directory or the temp directory (both writable), nor under `/dev`. The first of
/// the target directory, `/var/tmp` and `$HOME` that qualifies; the checkout itself may live
/// under the temp directory, so none is taken for granted. Removed when dropped.
fn outside_every_allowed_root() -> tempfile::TempDir {
    let real = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let tmp = real(&std::env::temp_dir());
    let candidates = [
        Some(std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))),
        Some(std::path::PathBuf::from("/var/tmp")),
        std::env::var_os("HOME").map(std::path::PathBuf::from),
    ];
    for dir in candidates.into_iter().flatten() {
        let dir = real(&dir);
        if dir.starts_with(&tmp) || dir.starts_with("/dev") {
            continue;
        }
        if let Ok(d) = tempfile::Builder::new()
            .prefix(".keel-sandbox-outside-")
            .tempdir_in(&dir)
        {
            return d;
        }
    }
    panic!(
        "no directory outside the temp directory {} to test the sandbox with (tried the \
         target directory, /var/tmp and $HOME)",
        tmp.display()
    );
}

fn one_command(cmd: &str) -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": cmd}}]},
        {"kind": "text", "text": "done"}
    ]})
    .to_string()
}

#[tokio::test]
#[ignore = "needs Landlock"]
async fn writes_outside_the_allowed_directories_fail_and_reads_work() {
    require_landlock();
    // Outside the working directory and outside the temp directory.
    let outside = outside_every_allowed_root();
    std::fs::write(outside.path().join("readable.txt"), "can-read-this").unwrap();
    let cmd = format!(
        "echo in > inside.txt; echo tmp > \"${{TMPDIR:-/tmp}}/keel-sandbox-$$.txt\" && rm \"${{TMPDIR:-/tmp}}/keel-sandbox-$$.txt\"; cat {o}/readable.txt; echo out > {o}/escaped.txt",
        o = outside.path().display()
    );
    let h = Harness::from_json(&one_command(&cmd)).await;
    let run = h
        .run_stream("go", &["--sandbox", "--allowedTools", "Bash"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(
        h.cwd().join("inside.txt").exists(),
        "the working directory is writable"
    );
    assert!(
        !outside.path().join("escaped.txt").exists(),
        "a write outside the allowed directories must fail"
    );
    let result = run.tool_results()[0].to_string();
    assert!(result.contains("can-read-this"), "reads work: {result}");
    assert!(
        result.contains("sandbox"),
        "the result says the sandbox stopped it: {result}"
    );
    assert!(
        !result.contains("tmp: Permission denied"),
        "the temp directory is writable: {result}"
    );
    // Without the sandbox the same write goes through (the check above can fail).
    let h2 = Harness::from_json(&one_command(&format!(
        "echo out > {}/escaped.txt",
        outside.path().display()
    )))
    .await;
    h2.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    assert!(outside.path().join("escaped.txt").exists());
}

#[tokio::test]
#[ignore = "needs Landlock"]
async fn the_network_is_off_unless_allowed() {
    require_landlock();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'");
    for (flags, connects) in [
        (vec!["--sandbox", "--allowedTools", "Bash"], false),
        (
            vec!["--sandbox", "--sandbox-network", "--allowedTools", "Bash"],
            true,
        ),
    ] {
        let h = Harness::from_json(&one_command(&cmd)).await;
        let run = h.run_stream("go", &flags, &[]).await;
        run.assert_end("success", false, "completed", 0);
        let result = run.tool_results()[0].to_string();
        // A connection that was made is already queued: the short wait only decides "none".
        let wait = Duration::from_millis(if connects { 10_000 } else { 500 });
        let accepted = tokio::time::timeout(wait, listener.accept()).await.is_ok();
        assert_eq!(accepted, connects, "{flags:?}: {result}");
        assert_eq!(
            result.contains("connected"),
            connects,
            "{flags:?}: {result}"
        );
        if !connects {
            assert!(result.contains("network is off"), "{result}");
        }
    }
}

#[tokio::test]
#[ignore = "needs Landlock"]
async fn sandbox_settings_are_read_and_checked() {
    require_landlock();
    let outside = outside_every_allowed_root();
    let h = Harness::from_json(&one_command(&format!(
        "echo x > {}/allowed.txt",
        outside.path().display()
    )))
    .await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        json!({"sandbox": {"enabled": true, "writablePaths": [outside.path()]}}).to_string(),
    )
    .unwrap();
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(
        outside.path().join("allowed.txt").exists(),
        "writablePaths widen the sandbox"
    );
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        json!({"sandbox": {"enabled": "yes"}}).to_string(),
    )
    .unwrap();
    let run = h.run_stream("go", &[], &[]).await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("sandbox.enabled"), "{}", run.stderr);
}

/// On a kernel without Landlock the sandbox is an error at start, never a silent no-op
/// (simulated in debug builds, so this runs on every kernel).
#[tokio::test]
async fn without_landlock_the_sandbox_is_an_error_not_a_no_op() {
    let h = Harness::from_json(&one_command("touch ran.txt")).await;
    let run = h
        .run_stream(
            "go",
            &["--sandbox", "--allowedTools", "Bash"],
            &[("KEEL_TEST_FAULT", "no_landlock")],
        )
        .await;
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("needs Landlock"), "{}", run.stderr);
    assert!(run.stdout.trim().is_empty(), "no run: {}", run.stdout);
    assert!(!h.cwd().join("ran.txt").exists(), "nothing ran unsandboxed");
    assert!(h.requests().is_empty(), "no model request was made");
}

/// Without root, the network switch goes through a user namespace; the sandbox must hold
/// the same way. Runs keel as `nobody` (needs root and setpriv to get there).
#[tokio::test]
#[ignore = "needs Landlock, root, setpriv and unprivileged user namespaces"]
async fn an_unprivileged_user_gets_the_same_sandbox() {
    require_landlock();
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (to become nobody with setpriv)"
    );
    use std::os::unix::fs::PermissionsExt;
    let outside = outside_every_allowed_root();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // Without the sandbox nobody can write there, so only the sandbox can stop the write below.
    let probe = outside.path().join("probe.txt");
    let wrote = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "touch"])
        .arg(&probe)
        .status()
        .expect("setpriv runs (needs util-linux's setpriv)");
    assert!(
        wrote.success() && probe.exists(),
        "nobody cannot write to {} even without the sandbox",
        outside.path().display()
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!(
        "echo in > inside.txt; echo out > {}/escaped.txt; bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'; id -u",
        outside.path().display()
    );
    let h = Harness::from_json(&one_command(&cmd)).await;
    for d in [h.cwd(), h.home.path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let mut c = tokio::process::Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(super::common::keel_bin())
        .args([
            "-p",
            "go",
            "--output-format",
            "stream-json",
            "--verbose",
            "--sandbox",
            "--allowedTools",
            "Bash",
        ])
        .current_dir(h.cwd())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", h.home.path())
        .env("KEEL_HOME", h.keel_home())
        .env("ANTHROPIC_BASE_URL", h.mock.base_url())
        .env("ANTHROPIC_API_KEY", "sk-test-keel")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), c.output())
        .await
        .unwrap()
        .unwrap();
    let run = super::common::Run::new(
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    );
    run.assert_end("success", false, "completed", 0);
    let result = run.tool_results()[0].to_string();
    assert!(result.contains("65534"), "it ran as nobody: {result}");
    assert!(h.cwd().join("inside.txt").exists(), "{result}");
    assert!(!outside.path().join("escaped.txt").exists(), "{result}");
    assert!(!result.contains("connected"), "{result}");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), listener.accept())
            .await
            .is_err(),
        "no connection reached the listener"
    );
}

/// With the network off, a sandboxed command cannot reach a Unix socket bound to a path
/// outside the sandbox (a docker.sock, an ssh-agent): `socket(AF_UNIX)` is refused, while
/// `socketpair` still works. Positive control: with the network allowed it connects.
#[tokio::test]
#[ignore = "needs Landlock and perl"]
async fn unix_path_sockets_are_closed_when_the_network_is_off() {
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = outside.path().join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let cmd = format!(
        "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => shift) or die \"connect: $!\\n\"; print \"CONNECTED\\n\"' {p}; \
         perl -MSocket -e 'socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or die \"socketpair: $!\\n\"; print \"PAIR-OK\\n\"'",
        p = path.display()
    );
    for (flags, connects) in [
        (vec!["--sandbox", "--allowedTools", "Bash"], false),
        (
            vec!["--sandbox", "--sandbox-network", "--allowedTools", "Bash"],
            true,
        ),
    ] {
        let h = Harness::from_json(&one_command(&cmd)).await;
        let run = h.run_stream("go", &flags, &[]).await;
        run.assert_end("success", false, "completed", 0);
        let result = run.tool_results()[0].to_string();
        assert_eq!(
            result.contains("CONNECTED"),
            connects,
            "{flags:?}: {result}"
        );
        assert!(result.contains("PAIR-OK"), "{flags:?}: {result}");
        if !connects {
            assert!(result.contains("Permission denied"), "{result}");
        }
    }
}
