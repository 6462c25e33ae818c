//! Grep.

use keel_tools::{CancelReason, GrepTool, Tool, ToolOutcome};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{cx, put, set_mtime};

async fn grep(dir: &std::path::Path, input: serde_json::Value) -> ToolOutcome {
    GrepTool.call(input, cx(dir)).await
}

/// A small tree: two Rust files, a Python file, an ignored file and a binary one.
fn tree() -> (tempfile::TempDir, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, ".gitignore", "ignored/\n");
    let a = put(
        d,
        "src/a.rs",
        "fn main() {\n    let needle = 1;\n}\n// Needle again\n",
    );
    let b = put(
        d,
        "src/b.rs",
        "one\ntwo\nneedle three\nfour\nfive\nsix\nseven\nneedle eight\n",
    );
    let c = put(d, "tools/c.py", "needle = True\n");
    put(d, "ignored/x.rs", "needle\n");
    std::fs::write(d.join("src/blob.bin"), b"needle\0\x01\x02").unwrap();
    set_mtime(&a, 100);
    set_mtime(&b, 300);
    set_mtime(&c, 200);
    let s = |p: std::path::PathBuf| p.display().to_string();
    (dir, s(a), s(b), s(c))
}

#[tokio::test]
async fn files_with_matches_newest_first() {
    let (dir, a, b, c) = tree();
    let out = grep(dir.path(), json!({"pattern": "needle"})).await;
    assert_eq!(out.text(), format!("{b}\n{c}\n{a}"));
}

#[tokio::test]
async fn content_mode_with_numbers() {
    let (dir, a, b, _) = tree();
    let out = grep(
        dir.path(),
        json!({"pattern": "needle", "output_mode": "content", "type": "rust"}),
    )
    .await;
    assert_eq!(
        out.text(),
        format!("{a}:2:    let needle = 1;\n{b}:3:needle three\n{b}:8:needle eight")
    );
    let out = grep(
        dir.path(),
        json!({"pattern": "needle", "output_mode": "content", "-n": false, "path": "tools"}),
    )
    .await;
    let c = dir.path().join("tools/c.py");
    assert_eq!(out.text(), format!("{}:needle = True", c.display()));
}

#[tokio::test]
async fn count_mode_and_ignore_case() {
    let (dir, a, b, c) = tree();
    let out = grep(
        dir.path(),
        json!({"pattern": "needle", "output_mode": "count"}),
    )
    .await;
    assert_eq!(out.text(), format!("{a}:1\n{b}:2\n{c}:1"));
    let out = grep(
        dir.path(),
        json!({"pattern": "needle", "output_mode": "count", "-i": true}),
    )
    .await;
    assert_eq!(out.text(), format!("{a}:2\n{b}:2\n{c}:1"));
}

#[tokio::test]
async fn context_lines() {
    let (dir, _, b, _) = tree();
    let out = grep(
        dir.path(),
        json!({"pattern": "needle", "output_mode": "content", "path": "src/b.rs", "-C": 1}),
    )
    .await;
    assert_eq!(
        out.text(),
        format!("{b}-2-two\n{b}:3:needle three\n{b}-4-four\n--\n{b}-7-seven\n{b}:8:needle eight")
    );
    let out = grep(
        dir.path(),
        json!({"pattern": "three", "output_mode": "content", "path": "src/b.rs", "-A": 1, "-B": 0}),
    )
    .await;
    assert_eq!(out.text(), format!("{b}:3:needle three\n{b}-4-four"));
}

#[tokio::test]
async fn glob_and_type_filters() {
    let (dir, a, b, c) = tree();
    let out = grep(dir.path(), json!({"pattern": "needle", "glob": "*.py"})).await;
    assert_eq!(out.text(), c);
    let out = grep(
        dir.path(),
        json!({"pattern": "needle", "glob": "src/**/*.rs", "output_mode": "count"}),
    )
    .await;
    assert_eq!(out.text(), format!("{a}:1\n{b}:2"));
    let out = grep(dir.path(), json!({"pattern": "needle", "type": "py"})).await;
    assert_eq!(out.text(), c);
    let out = grep(dir.path(), json!({"pattern": "needle", "type": "klingon"})).await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("unknown file `type` \"klingon\"")),
        "{out:?}"
    );
}

#[tokio::test]
async fn invalid_regex_and_no_matches() {
    let (dir, ..) = tree();
    let out = grep(dir.path(), json!({"pattern": "fn (main"})).await;
    let ToolOutcome::Failed { message, .. } = out else {
        panic!("{out:?}")
    };
    assert!(
        message.starts_with("Invalid regex `fn (main`:"),
        "{message}"
    );
    assert!(message.contains("unclosed group"), "{message}");
    let out = grep(dir.path(), json!({"pattern": "zebra"})).await;
    assert_eq!(
        out.text(),
        format!("No matches for zebra in {}", dir.path().display())
    );
}

#[tokio::test]
async fn multiline_and_head_limit() {
    let (dir, _, b, _) = tree();
    let out = grep(dir.path(), json!({"pattern": "three.four", "multiline": true, "output_mode": "content", "path": "src"})).await;
    assert_eq!(out.text(), format!("{b}:3:needle three\n{b}:4:four"));
    let out = grep(
        dir.path(),
        json!({"pattern": "three\\nfour", "path": "src"}),
    )
    .await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("multiline")),
        "{out:?}"
    );
    let out = grep(
        dir.path(),
        json!({"pattern": "e", "output_mode": "content", "path": "src/b.rs", "head_limit": 2}),
    )
    .await;
    assert_eq!(
        out.text(),
        format!("{b}:1:one\n{b}:3:needle three\n[output limited to 2 by head_limit]")
    );
}

#[tokio::test]
async fn cancelled_grep_is_stopped() {
    let (dir, ..) = tree();
    let cx = cx(dir.path());
    cx.cancel.cancel(CancelReason::SiblingError);
    let out = GrepTool.call(json!({"pattern": "needle"}), cx).await;
    assert!(matches!(
        out,
        ToolOutcome::Stopped {
            reason: CancelReason::SiblingError,
            ..
        }
    ));
}
