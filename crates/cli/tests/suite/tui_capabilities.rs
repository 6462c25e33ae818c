//! The interactive UI's rendering of keel's capability tools and events, end to end: the real
//! `keel` binary in a pseudo-terminal against keel-mock. Every wait is on what the screen
//! shows, with a generous deadline; a scripted command holds the turn open where the test
//! needs to look at the live area, and the test releases it by creating a file.

use serde_json::json;

use super::common::Harness;
use super::interactive::start;

const ENTER: &str = "\r";
const UP: &str = "\x1b[A";

#[tokio::test]
async fn the_task_list_is_pinned_while_the_turn_runs_and_updated_when_the_model_rewrites_it() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "TodoWrite", "input": {"todos": [
                {"content": "Write the parser", "status": "in_progress", "activeForm": "Writing the parser"},
                {"content": "Test it", "status": "pending", "activeForm": "Testing it"}]}}]},
            {"kind": "tool_use", "calls": [{"name": "TodoWrite", "input": {"todos": [
                {"content": "Write the parser", "status": "completed", "activeForm": "Writing the parser"},
                {"content": "Test it", "status": "in_progress", "activeForm": "Testing it"}]}}]},
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {
                "command": "while [ ! -e release-33 ]; do sleep 0.1; done; echo released-33"}}]},
            {"kind": "text", "text": "All done with the plan."}
        ]})
        .to_string(),
    )
    .await;
    let mut t = start(
        &h,
        &["--permission-mode", "bypassPermissions"],
        &[],
        40,
        100,
    );
    t.wait_text("shift+tab mode").await;
    t.send(&format!("plan and do it{ENTER}"));
    // The command holds the turn open: the live area shows the list as the second call left
    // it, once, above the spinner.
    let s = t
        .wait_for("the rewritten task list pinned", |s| {
            s.contains("Tasks (1/2 done)") && s.contains("[>] Testing it")
        })
        .await;
    assert!(s.contains("[x] Write the parser"), "{s}");
    assert_eq!(s.matches("Tasks (").count(), 1, "one pinned list:\n{s}");
    assert!(
        !s.contains("Tasks (0/2 done)"),
        "the first list was replaced in place, not stacked:\n{s}"
    );
    // The first version was shown too, in the scrollback, with the first task in progress.
    let all = t.history();
    assert!(all.contains("[>] Write the parser"), "{all}");
    std::fs::write(h.cwd().join("release-33"), "").unwrap();
    t.wait_text("All done with the plan.").await;
    let idle = t.wait_idle().await;
    assert!(
        !idle.contains("Tasks ("),
        "the list is pinned only while a turn runs:\n{idle}"
    );
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn hooks_that_block_or_add_context_get_a_line_naming_event_command_and_outcome_and_quiet_ones_none(
) {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo should-not-run-33"}}]},
            {"kind": "text", "text": "The hook stopped me."}
        ]})
        .to_string(),
    )
    .await;
    // The user's own settings: no folder-trust question stands between the test and the hook.
    let dir = h.home.path().join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    let hooks = json!({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "echo 'no echo today' >&2; exit 2"}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo on-branch-33"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}});
    std::fs::write(dir.join("settings.json"), hooks.to_string()).unwrap();
    let mut t = start(
        &h,
        &["--permission-mode", "bypassPermissions"],
        &[],
        30,
        120,
    );
    t.wait_text("shift+tab mode").await;
    t.send(&format!("say it{ENTER}"));
    t.wait_text("The hook stopped me.").await;
    t.wait_idle().await;
    let all = t.history();
    assert!(
        all.contains("hook PreToolUse:Bash · echo 'no echo today' >&2; exit 2 · blocked the call: no echo today"),
        "{all}"
    );
    assert!(
        all.contains("hook SessionStart · echo on-branch-33 · added context (12 chars)"),
        "{all}"
    );
    assert!(
        !all.contains("hook Stop"),
        "a hook that did nothing stays quiet:\n{all}"
    );
    // The model was told the hook's reason in place of the command's output.
    let reqs = h.requests();
    let sent = reqs.last().unwrap().body["messages"].to_string();
    assert!(sent.contains("no echo today"), "{sent}");
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn rewind_in_the_ui_picks_a_prompt_refuses_naming_the_changed_file_then_puts_files_back() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Write", "input": {"file_path": "a.txt", "content": "a by keel\n"}}]},
            {"kind": "text", "text": "turn one done"},
            {"kind": "tool_use", "calls": [{"name": "Write", "input": {"file_path": "b.txt", "content": "b by keel\n"}}]},
            {"kind": "text", "text": "turn two done"}
        ]})
        .to_string(),
    )
    .await;
    let mut t = start(
        &h,
        &["--permission-mode", "bypassPermissions"],
        &[],
        40,
        160,
    );
    t.wait_text("shift+tab mode").await;
    t.send(&format!("write a{ENTER}"));
    t.wait_text("turn one done").await;
    t.wait_idle().await;
    t.send(&format!("write b{ENTER}"));
    t.wait_text("turn two done").await;
    t.wait_idle().await;
    std::fs::write(h.cwd().join("a.txt"), "a changed by hand\n").unwrap();

    t.send(&format!("/rewind{ENTER}"));
    let picker = t.wait_text("at which prompt?").await;
    assert!(picker.contains("1  write a"), "{picker}");
    assert!(
        picker.contains("❯  2  write b"),
        "the latest is highlighted:\n{picker}"
    );
    t.send(&format!("{UP}{ENTER}"));
    let s = t.wait_text("Cannot rewind to prompt 1").await;
    assert!(
        s.contains("a.txt changed outside keel since keel last wrote it"),
        "the refusal names the file and why:\n{s}"
    );
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("b.txt")).unwrap(),
        "b by keel\n",
        "nothing was put back halfway"
    );

    std::fs::write(h.cwd().join("a.txt"), "a by keel\n").unwrap();
    t.send(&format!("/rewind 1{ENTER}"));
    let s = t.wait_text("Files put back as they were at prompt 1").await;
    assert!(s.contains("0 restored, 2 deleted"), "{s}");
    assert!(!h.cwd().join("a.txt").exists() && !h.cwd().join("b.txt").exists());
    assert_eq!(t.exit().await, 0);
}
