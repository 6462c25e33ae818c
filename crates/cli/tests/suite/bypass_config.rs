//! Bypasses through what keel reads before the first request: memory files, settings files,
//! agent definitions and the permission mode. Each case runs the real binary against
//! keel-mock with a marker (a secret that must not reach the model, a mode that must not be
//! entered) and a positive control showing the marker would be seen.

use std::os::unix::fs::symlink;

use serde_json::Value;

use super::common::Harness;

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
