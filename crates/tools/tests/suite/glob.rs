//! Glob.

use keel_tools::{CancelReason, GlobTool, Tool, ToolOutcome};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{cx, put, set_mtime};

async fn glob(dir: &std::path::Path, input: serde_json::Value) -> ToolOutcome {
    GlobTool.call(input, cx(dir)).await
}

#[tokio::test]
async fn newest_first_and_gitignore_respected() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, ".gitignore", "target/\n*.gen.rs\n");
    let old = put(d, "src/old.rs", "");
    let new = put(d, "src/new.rs", "");
    let mid = put(d, "lib.rs", "");
    put(d, "src/skip.gen.rs", "");
    put(d, "target/debug/build.rs", "");
    put(d, ".hidden/secret.rs", "");
    put(d, "src/notes.txt", "");
    set_mtime(&old, 1_000);
    set_mtime(&mid, 2_000);
    set_mtime(&new, 3_000);
    let out = glob(d, json!({"pattern": "**/*.rs"})).await;
    let want = [new, mid, old].map(|p| p.display().to_string()).join("\n");
    assert_eq!(out.text(), want);
}

#[tokio::test]
async fn star_stays_in_one_level_and_path_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let top = put(d, "src/a.ts", "");
    put(d, "src/deep/b.ts", "");
    let tsx = put(d, "src/c.tsx", "");
    set_mtime(&top, 10);
    set_mtime(&tsx, 20);
    let out = glob(d, json!({"pattern": "*.{ts,tsx}", "path": "src"})).await;
    assert_eq!(out.text(), format!("{}\n{}", tsx.display(), top.display()));
    // An absolute pattern searches from its own directory.
    let pat = format!("{}/src/*.ts", d.display());
    let out = glob(&d.join("elsewhere"), json!({ "pattern": pat })).await;
    assert_eq!(out.text(), top.display().to_string());
}

#[tokio::test]
async fn no_match_and_bad_path() {
    let dir = tempfile::tempdir().unwrap();
    let out = glob(dir.path(), json!({"pattern": "**/*.zig"})).await;
    assert_eq!(
        out.text(),
        format!("No files matched **/*.zig under {}", dir.path().display())
    );
    let out = glob(dir.path(), json!({"pattern": "*", "path": "missing"})).await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("does not exist")),
        "{out:?}"
    );
    let out = glob(dir.path(), json!({"pattern": "a[b"})).await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.starts_with("Invalid glob pattern `a[b`")),
        "{out:?}"
    );
}

#[tokio::test]
async fn capped_at_200() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..230 {
        put(dir.path(), &format!("f{i}.txt"), "");
    }
    let out = glob(dir.path(), json!({"pattern": "*.txt"})).await;
    let text = out.text();
    assert_eq!(text.lines().count(), 201);
    assert!(text.ends_with("[30 more files not shown; narrow the pattern or the path]"));
}

#[tokio::test]
async fn cancelled_glob_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let cx = cx(dir.path());
    cx.cancel.cancel(CancelReason::UserInterrupted);
    let out = GlobTool.call(json!({"pattern": "**/*"}), cx).await;
    assert!(matches!(
        out,
        ToolOutcome::Stopped {
            reason: CancelReason::UserInterrupted,
            ..
        }
    ));
}
