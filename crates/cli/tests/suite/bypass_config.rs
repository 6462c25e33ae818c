//! Bypasses through what keel reads before the first request: memory files, settings files,
//! agent definitions and the permission mode. Each case runs the real binary against
//! keel-mock with a marker (a secret that must not reach the model, a mode that must not be
//! entered) and a positive control showing the marker would be seen.

use std::os::unix::fs::symlink;

use serde_json::{json, Value};

use super::common::{Harness, Stream};

const TEXT: &str = r#"{"steps": [{"kind": "text", "text": "ok"}]}"#;

/// The system prompt of every request keel-mock received, as one string.
fn system_prompts(h: &Harness) -> String {
    h.requests()
        .iter()
        .map(|r| r.body["system"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn warnings(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["type"] == "system" && f["subtype"] == "warning")
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_memory_file_linked_to_a_secret_is_not_sent_to_the_model() {
    let h = Harness::from_json(TEXT).await;
    let ssh = h.home.path().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_rsa"), "FAKE-PRIVATE-KEY-7f3a").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("token"), "FAKE-TOKEN-91c2").unwrap();
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    symlink(ssh.join("id_rsa"), h.cwd().join("CLAUDE.md")).unwrap();
    symlink(
        elsewhere.path().join("token"),
        h.cwd().join(".claude/CLAUDE.md"),
    )
    .unwrap();
    let run = h.run_stream("hi", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let system = system_prompts(&h);
    assert!(!system.contains("FAKE-PRIVATE-KEY-7f3a"), "{system}");
    assert!(!system.contains("FAKE-TOKEN-91c2"), "{system}");
    let w = warnings(&run.frames);
    assert!(
        w.contains("CLAUDE.md") && w.contains(".ssh"),
        "the user is told: {w}"
    );
}

#[tokio::test]
async fn a_memory_file_linked_into_proc_is_not_sent_to_the_model() {
    let h = Harness::from_json(TEXT).await;
    symlink("/proc/self/environ", h.cwd().join("CLAUDE.md")).unwrap();
    let run = h.run_stream("hi", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let system = system_prompts(&h);
    assert!(
        !system.contains("sk-test-keel"),
        "keel's API key leaked: {system}"
    );
    assert!(warnings(&run.frames).contains("/proc"), "{}", run.stdout);
}

/// Positive control: a memory file that is a regular file, or a link inside the project, is
/// read — the checks above would see a leak.
#[tokio::test]
async fn control_memory_files_inside_the_project_are_read() {
    let h = Harness::from_json(TEXT).await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(h.cwd().join("AGENTS.md"), "MARKER-NOTES-55aa").unwrap();
    symlink(h.cwd().join("AGENTS.md"), h.cwd().join("CLAUDE.md")).unwrap();
    std::fs::write(h.cwd().join(".claude/CLAUDE.md"), "MARKER-PLAIN-66bb").unwrap();
    let run = h.run_stream("hi", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let system = system_prompts(&h);
    assert!(system.contains("MARKER-NOTES-55aa"), "{system}");
    assert!(system.contains("MARKER-PLAIN-66bb"), "{system}");
    assert_eq!(warnings(&run.frames), "");
}

const TOUCH_MARKER: &str = r#"{"steps": [
    {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch bypass-marker.txt"}}]},
    {"kind": "text", "text": "done"}
]}"#;

/// `set_permission_mode` to bypassPermissions under `flags`: the response, and whether the
/// marker command then ran (headless: outside bypass it is denied).
async fn switch_to_bypass(flags: &[&str]) -> (Value, bool) {
    let h = Harness::from_json(TOUCH_MARKER).await;
    let mut s = Stream::start(&h, flags, &[]);
    let answer = s
        .ask(
            "m1",
            json!({"subtype": "set_permission_mode", "mode": "bypassPermissions"}),
        )
        .await;
    s.user("make the marker").await;
    let result = s.result().await;
    assert_eq!(result["subtype"], "success", "{result}");
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    (answer, h.cwd().join("bypass-marker.txt").exists())
}

#[tokio::test]
async fn bypass_at_run_time_needs_the_launch_flag() {
    let (answer, ran) = switch_to_bypass(&[]).await;
    assert_eq!(answer["subtype"], "error", "{answer}");
    let why = answer["error"].as_str().unwrap();
    assert!(
        why.contains("--allow-dangerously-skip-permissions"),
        "the refusal names the flag: {why}"
    );
    assert!(!ran, "the mode stayed default: the command was denied");
}

/// Positive control: launched with bypass allowed, the same switch works and the marker is
/// made — so the refusal above is what stopped it.
#[tokio::test]
async fn control_bypass_at_run_time_with_the_allow_flag() {
    for flags in [
        &["--allow-dangerously-skip-permissions"][..],
        &["--permission-mode", "bypassPermissions"][..],
    ] {
        let (answer, ran) = switch_to_bypass(flags).await;
        assert_eq!(answer["subtype"], "success", "{flags:?}: {answer}");
        assert!(ran, "{flags:?}: the command ran in bypass");
    }
}

#[tokio::test]
async fn dangerously_skip_permissions_starts_in_bypass() {
    let h = Harness::from_json(TOUCH_MARKER).await;
    let run = h
        .run_stream("make the marker", &["--dangerously-skip-permissions"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.of("system")[0]["permissionMode"], "bypassPermissions");
    assert!(h.cwd().join("bypass-marker.txt").exists());
}

/// A host's `can_use_tool` answer carrying `setMode: bypassPermissions` goes through the
/// same gate: without the launch flag the next call is asked again, and the user is told.
async fn set_mode_in_an_approval(flags: &[&str]) -> (usize, bool, String) {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch first.txt"}}]},
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch second.txt"}}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    let mut args = vec!["--permission-prompt-tool", "stdio"];
    args.extend_from_slice(flags);
    let mut s = Stream::start(&h, &args, &[]);
    s.user("make files").await;
    let req = s.keel_request("can_use_tool").await;
    s.answer(
        req["request_id"].as_str().unwrap(),
        json!({"behavior": "allow", "updatedPermissions": [
            {"type": "setMode", "mode": "bypassPermissions", "destination": "session"}]}),
    )
    .await;
    let next = s
        .wait(|f| {
            f["type"] == "result"
                || (f["type"] == "control_request" && f["request"]["subtype"] == "can_use_tool")
        })
        .await;
    if next["type"] == "control_request" {
        s.answer(
            next["request_id"].as_str().unwrap(),
            json!({"behavior": "deny", "message": "no"}),
        )
        .await;
        s.result().await;
    }
    let run = s.finish().await;
    let asked = run
        .frames
        .iter()
        .filter(|f| f["type"] == "control_request" && f["request"]["subtype"] == "can_use_tool")
        .count();
    (
        asked,
        h.cwd().join("second.txt").exists(),
        warnings(&run.frames),
    )
}

#[tokio::test]
async fn set_mode_bypass_in_an_approval_needs_the_launch_flag() {
    let (asked, second, warned) = set_mode_in_an_approval(&[]).await;
    assert_eq!(asked, 2, "the second call was asked again");
    assert!(!second, "and, denied, did not run");
    assert!(
        warned.contains("bypassPermissions"),
        "the user is told: {warned}"
    );
}

/// Positive control: with the allow flag the approval's mode applies and the second call runs
/// unasked.
#[tokio::test]
async fn control_set_mode_bypass_in_an_approval_with_the_allow_flag() {
    let (asked, second, _) =
        set_mode_in_an_approval(&["--allow-dangerously-skip-permissions"]).await;
    assert_eq!(asked, 1);
    assert!(second);
}

fn mkfifo(path: &std::path::Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// A settings file that is a link to /dev/zero or a FIFO stops the run at once, naming the
/// file (before: read until memory ran out, or waited forever for a writer).
#[tokio::test]
async fn a_settings_file_that_is_a_device_or_a_fifo_stops_the_run() {
    for (name, make) in [("settings.json", "zero"), ("settings.local.json", "fifo")] {
        let h = Harness::from_json(TEXT).await;
        std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
        let p = h.cwd().join(".claude").join(name);
        match make {
            "zero" => symlink("/dev/zero", &p).unwrap(),
            _ => mkfifo(&p),
        }
        let run = h.run_stream("hi", &[], &[]).await;
        assert_eq!(run.code, 2, "{name}: {}", run.stderr);
        assert!(
            run.stderr.contains(name) && run.stderr.contains("not a regular file"),
            "{name}: {}",
            run.stderr
        );
        assert!(h.requests().is_empty(), "no request was made");
    }
    // The same for a --settings file.
    let h = Harness::from_json(TEXT).await;
    let fifo = h.cwd().join("flag-settings.json");
    mkfifo(&fifo);
    let run = h
        .run_stream("hi", &["--settings", fifo.to_str().unwrap()], &[])
        .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("flag-settings.json"), "{}", run.stderr);
}

/// An agent file linked to /dev/zero is skipped with a warning naming it; the others load.
#[tokio::test]
async fn an_agent_file_that_is_a_device_is_skipped_with_a_warning() {
    let h = Harness::from_json(TEXT).await;
    let agents = h.cwd().join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    symlink("/dev/zero", agents.join("zero.md")).unwrap();
    mkfifo(&agents.join("fifo.md"));
    std::fs::write(
        agents.join("reviewer.md"),
        "---\nname: reviewer\ndescription: reviews\n---\nReview the change.\n",
    )
    .unwrap();
    let run = h.run_stream("hi", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let w = warnings(&run.frames);
    assert!(
        w.contains("zero.md") && w.contains("character device"),
        "{w}"
    );
    assert!(w.contains("fifo.md") && w.contains("FIFO"), "{w}");
    // Positive control: the regular file next to them is an agent type.
    let init = run.of("system")[0];
    assert!(
        init["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "reviewer"),
        "{init}"
    );
}

/// A settings document that is not an object (its deny rules would be dropped) stops the run,
/// naming the file, before anything runs.
#[tokio::test]
async fn a_settings_document_that_is_not_an_object_stops_the_run() {
    let deny = json!({"permissions": {"deny": ["Bash(touch:*)"]}});
    for (doc, found) in [
        (json!([deny.clone()]), "a list"),
        (Value::Null, "null"),
        (json!(42), "a number"),
    ] {
        let h = Harness::from_json(TOUCH_MARKER).await;
        std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
        std::fs::write(h.cwd().join(".claude/settings.json"), doc.to_string()).unwrap();
        let run = h
            .run_stream("go", &["--permission-mode", "bypassPermissions"], &[])
            .await;
        assert_eq!(run.code, 2, "{doc}: {}", run.stderr);
        assert!(
            run.stderr.contains("settings.json") && run.stderr.contains(found),
            "{doc}: {}",
            run.stderr
        );
        assert!(!h.cwd().join("bypass-marker.txt").exists(), "{doc}");
        // And as a --settings file.
        let flag = h.cwd().join("flag.json");
        std::fs::write(&flag, doc.to_string()).unwrap();
        std::fs::remove_file(h.cwd().join(".claude/settings.json")).unwrap();
        let run = h
            .run_stream("go", &["--settings", flag.to_str().unwrap()], &[])
            .await;
        assert_eq!(run.code, 2, "{doc}: {}", run.stderr);
        assert!(run.stderr.contains("flag.json"), "{}", run.stderr);
    }
}

/// Positive control: the same deny rule in an object holds, and without it the marker is made.
#[tokio::test]
async fn control_a_settings_object_applies_its_deny_rules() {
    for (deny, made) in [(true, false), (false, true)] {
        let h = Harness::from_json(TOUCH_MARKER).await;
        std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
        let rules = if deny {
            json!(["Bash(touch:*)"])
        } else {
            json!([])
        };
        std::fs::write(
            h.cwd().join(".claude/settings.json"),
            json!({"permissions": {"deny": rules}}).to_string(),
        )
        .unwrap();
        let run = h
            .run_stream("go", &["--permission-mode", "bypassPermissions"], &[])
            .await;
        run.assert_end("success", false, "completed", 0);
        assert_eq!(
            h.cwd().join("bypass-marker.txt").exists(),
            made,
            "deny: {deny}"
        );
    }
}

/// A run in a project whose `.claude/<file>` asks for bypassPermissions, launched with
/// `flags`: the mode init reports, the warnings, and whether the marker command ran.
async fn in_a_bypass_repository(file: &str, flags: &[&str]) -> (Value, String, bool) {
    let h = Harness::from_json(TOUCH_MARKER).await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude").join(file),
        r#"{"permissions": {"defaultMode": "bypassPermissions"}}"#,
    )
    .unwrap();
    let run = h.run_stream("make the marker", flags, &[]).await;
    let mode = run.of("system")[0]["permissionMode"].clone();
    (
        mode,
        warnings(&run.frames),
        h.cwd().join("bypass-marker.txt").exists(),
    )
}

/// A repository's own settings cannot start keel in bypassPermissions (issue 29, item 15's
/// headless rule): a cloned project whose `.claude/settings.json` (or `settings.local.json`)
/// says so runs in the user's mode, is told why, and its command is denied headless.
#[tokio::test]
async fn a_repository_cannot_choose_bypass_for_itself() {
    for file in ["settings.json", "settings.local.json"] {
        let (mode, w, ran) = in_a_bypass_repository(file, &[]).await;
        assert_eq!(mode, "default", "{file}");
        assert!(
            w.contains("bypassPermissions") && w.contains(file),
            "{file}: {w}"
        );
        assert!(!ran, "{file}: the command ran without a check");
        // Control: launched allowing bypass, the project's choice applies and the marker is made.
        let (mode, _, ran) =
            in_a_bypass_repository(file, &["--allow-dangerously-skip-permissions"]).await;
        assert_eq!(mode, "bypassPermissions", "{file}");
        assert!(ran, "{file}");
    }
}
