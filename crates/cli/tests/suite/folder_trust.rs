//! Folder trust in the interactive UI: a folder whose own settings would run commands or widen
//! permissions is asked about before anything of them applies; the answer is kept per folder.

use std::time::Duration;

use serde_json::Value;

use super::common::Harness;
use super::interactive::start;

#[tokio::test]
async fn a_new_folders_hooks_and_rules_wait_for_the_users_trust() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"hello one"},{"kind":"text","text":"hello two"}]}"#,
    )
    .await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch trust-marker"}]}]},
            "permissions": {"allow": ["Bash(touch:*)"]}}"#,
    )
    .unwrap();
    let marker = h.cwd().join("trust-marker");
    let state = h.home.path().join(".claude.json");

    // No: the UI starts without the folder's settings; its hook never ran.
    let mut t = start(&h, &[], &[], 30, 120);
    let s = t.wait_text("Do you trust the files").await;
    assert!(s.contains("runs commands as hooks (SessionStart)"), "{s}");
    assert!(s.contains("allows without asking: Bash(touch:*)"), "{s}");
    assert!(
        !marker.exists(),
        "nothing of the folder's settings ran before the answer"
    );
    t.send("n\r");
    t.wait_text("shift+tab mode").await;
    // A turn runs (a session's start hooks have run by the time its first reply shows).
    t.send("hi\r");
    t.wait_text("hello one").await;
    assert!(!marker.exists(), "declined: the hook did not run");
    assert_eq!(t.exit().await, 0);
    assert!(
        !state.exists()
            || !std::fs::read_to_string(&state)
                .unwrap()
                .contains("hasTrustDialogAccepted")
    );

    // Yes: the hook runs, and the answer is kept.
    let mut t = start(&h, &[], &[], 30, 120);
    t.wait_text("Do you trust the files").await;
    t.send("y\r");
    t.wait_text("shift+tab mode").await;
    t.send("hi\r");
    t.wait_text("hello two").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !marker.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(marker.exists(), "trusted: the SessionStart hook ran");
    assert_eq!(t.exit().await, 0);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let key = std::fs::canonicalize(h.cwd())
        .unwrap()
        .display()
        .to_string();
    assert_eq!(
        kept["projects"][&key]["hasTrustDialogAccepted"], true,
        "{kept}"
    );

    // Asked once: the next start goes straight to the UI.
    let t = start(&h, &[], &[], 30, 120);
    let s = t.wait_text("shift+tab mode").await;
    assert!(!s.contains("Do you trust"), "{s}");
    assert_eq!(t.exit().await, 0);
}
