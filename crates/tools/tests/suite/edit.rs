//! Edit.

use keel_tools::{EditTool, ReadTool, Tool, ToolOutcome};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{cx, put};

/// Read the file (as the model must), then Edit it, as one agent.
async fn edit(dir: &std::path::Path, input: serde_json::Value) -> ToolOutcome {
    let cx = cx(dir);
    ReadTool
        .call(json!({"file_path": input["file_path"]}), cx.clone())
        .await;
    EditTool.call(input, cx).await
}

#[tokio::test]
async fn unique_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let p = put(dir.path(), "m.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    let out = edit(dir.path(), json!({"file_path": "m.rs", "old_string": "fn b() {}", "new_string": "fn b() {\n    todo!()\n}"})).await;
    assert_eq!(
        out.text(),
        format!(
            "Edited {}: 1 replacement.\n     1\tfn a() {{}}\n     2\tfn b() {{\n     3\t    todo!()\n     4\t}}\n     5\tfn c() {{}}",
            p.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "fn a() {}\nfn b() {\n    todo!()\n}\nfn c() {}\n"
    );
}

#[tokio::test]
async fn not_found_says_to_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = put(dir.path(), "m.txt", "    indented\n");
    let out = edit(
        dir.path(),
        json!({"file_path": "m.txt", "old_string": "  indented\t", "new_string": "x"}),
    )
    .await;
    let ToolOutcome::Failed { message, .. } = out else {
        panic!("{out:?}")
    };
    assert!(
        message.starts_with(&format!(
            "The text to replace was not found in {}.",
            p.display()
        )),
        "{message}"
    );
    assert!(message.contains("Read the file"));
    assert!(message.contains("whitespace"));
}

#[tokio::test]
async fn ambiguous_gives_count() {
    let dir = tempfile::tempdir().unwrap();
    let p = put(dir.path(), "m.txt", "x = 1\nx = 1\nx = 1\n");
    let out = edit(
        dir.path(),
        json!({"file_path": "m.txt", "old_string": "x = 1", "new_string": "x = 2"}),
    )
    .await;
    let ToolOutcome::Failed { message, .. } = out else {
        panic!("{out:?}")
    };
    assert!(message.contains("occurs 3 times"), "{message}");
    assert!(message.contains("replace_all"), "{message}");
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "x = 1\nx = 1\nx = 1\n"
    );
}

#[tokio::test]
async fn replace_all() {
    let dir = tempfile::tempdir().unwrap();
    let p = put(dir.path(), "m.txt", "x = 1\ny\nx = 1\n");
    let out = edit(dir.path(), json!({"file_path": "m.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true})).await;
    assert!(
        out.text()
            .starts_with(&format!("Edited {}: 2 replacements.", p.display())),
        "{}",
        out.text()
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "x = 2\ny\nx = 2\n");
}

#[tokio::test]
async fn same_strings_empty_old_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "m.txt", "abc");
    let out = edit(
        dir.path(),
        json!({"file_path": "m.txt", "old_string": "abc", "new_string": "abc"}),
    )
    .await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("identical")),
        "{out:?}"
    );
    let out = edit(
        dir.path(),
        json!({"file_path": "m.txt", "old_string": "", "new_string": "x"}),
    )
    .await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("`old_string` is empty")),
        "{out:?}"
    );
    let out = edit(
        dir.path(),
        json!({"file_path": "none.txt", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("does not exist") && message.contains("Write")),
        "{out:?}"
    );
}

#[tokio::test]
async fn crlf_files_match_plain_newlines() {
    let dir = tempfile::tempdir().unwrap();
    let p = put(dir.path(), "w.txt", "one\r\ntwo\r\nthree\r\n");
    let out = edit(
        dir.path(),
        json!({"file_path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"}),
    )
    .await;
    assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "1\r\n2\r\nthree\r\n");
}
