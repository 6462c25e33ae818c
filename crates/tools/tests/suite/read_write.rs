//! Read and Write.

use keel_tools::{CancelReason, ReadTool, Tool, ToolOutcome, WriteTool};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{cx, put};

async fn read(dir: &std::path::Path, input: serde_json::Value) -> ToolOutcome {
    ReadTool.call(input, cx(dir)).await
}

#[tokio::test]
async fn numbered_lines() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a.txt", "alpha\nbeta\n\tgamma\n");
    let out = read(dir.path(), json!({"file_path": "a.txt"})).await;
    let ToolOutcome::Ok { content, meta } = out else {
        panic!("{out:?}")
    };
    assert_eq!(content, "     1\talpha\n     2\tbeta\n     3\t\tgamma");
    assert_eq!(meta.unwrap()["total_lines"], 3);
}

#[tokio::test]
async fn offset_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    let p = put(dir.path(), "ten.txt", &text);
    let out = read(dir.path(), json!({"file_path": p, "offset": 4, "limit": 3})).await;
    assert_eq!(
        out.text(),
        format!(
            "     4\tline 4\n     5\tline 5\n     6\tline 6\n\n[{} has 10 lines; showing lines 4-6. Use `offset` 7 to read on.]",
            p.display()
        )
    );
    // The end of the file: nothing more to say.
    let out = read(dir.path(), json!({"file_path": p, "offset": 9})).await;
    assert_eq!(out.text(), "     9\tline 9\n    10\tline 10");
    // Past the end.
    let out = read(dir.path(), json!({"file_path": p, "offset": 11})).await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("has 10 lines; offset 11 is past the end")),
        "{out:?}"
    );
}

#[tokio::test]
async fn default_limit_is_2000_lines() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    put(dir.path(), "big.txt", &text);
    let out = read(dir.path(), json!({"file_path": "big.txt"})).await;
    let content = out.text();
    assert!(
        content.contains("  2000\t2000\n\n["),
        "{}",
        &content[content.len() - 200..]
    );
    assert!(!content.contains("  2001\t"));
    assert!(
        content.ends_with("has 2500 lines; showing lines 1-2000. Use `offset` 2001 to read on.]")
    );
}

#[tokio::test]
async fn binary_missing_directory_empty() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("x.bin");
    std::fs::write(&bin, [0x7f, b'E', b'L', b'F', 0, 0, 1, 2]).unwrap();
    let out = read(dir.path(), json!({"file_path": bin})).await;
    assert_eq!(
        out,
        ToolOutcome::failed(format!(
            "{} is a binary file (8 bytes); Read only shows text files.",
            bin.display()
        ))
    );

    let out = read(dir.path(), json!({"file_path": "nope.txt"})).await;
    let missing = dir.path().join("nope.txt");
    assert_eq!(
        out,
        ToolOutcome::failed(format!(
            "File does not exist: {}. Check the path, or use Glob to find the file by name.",
            missing.display()
        ))
    );

    let out = read(dir.path(), json!({"file_path": dir.path()})).await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("is a directory") && message.contains("Glob")),
        "{out:?}"
    );

    put(dir.path(), "empty.txt", "");
    let out = read(dir.path(), json!({"file_path": "empty.txt"})).await;
    assert!(
        matches!(&out, ToolOutcome::Ok { content, .. } if content.contains("is empty")),
        "{out:?}"
    );
}

#[tokio::test]
async fn large_file_streams() {
    let dir = tempfile::tempdir().unwrap();
    let line = "x".repeat(99) + "\n";
    let text = line.repeat(120_000); // 12 MB
    put(dir.path(), "large.txt", &text);
    let out = read(
        dir.path(),
        json!({"file_path": "large.txt", "offset": 119_999}),
    )
    .await;
    let content = out.text();
    assert!(content.starts_with("119999\txxx"), "{}", &content[..40]);
    assert!(content.contains("120000\txxx"));
}

#[tokio::test]
async fn read_is_cancellable_before_start() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "a.txt", "a\n");
    let cx = cx(dir.path());
    cx.cancel.cancel(CancelReason::UserInterrupted);
    let out = ReadTool.call(json!({"file_path": "a.txt"}), cx).await;
    assert!(matches!(
        out,
        ToolOutcome::Stopped {
            reason: CancelReason::UserInterrupted,
            started: false,
            ..
        }
    ));
}

#[tokio::test]
async fn write_creates_then_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("new/deep/file.txt");
    let agent = cx(dir.path());
    let out = WriteTool
        .call(
            json!({"file_path": "new/deep/file.txt", "content": "hello\n"}),
            agent.clone(),
        )
        .await;
    assert_eq!(out.text(), format!("Created {} (6 bytes)", p.display()));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "hello\n");

    // The agent wrote it, so it knows it: overwriting needs no Read.
    let out = WriteTool
        .call(json!({"file_path": p, "content": "bye"}), agent)
        .await;
    assert_eq!(out.text(), format!("Overwrote {} (3 bytes)", p.display()));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "bye");
    // Only the file itself: no temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("file.txt")]);
}

#[tokio::test]
async fn write_is_cancellable_before_start() {
    let dir = tempfile::tempdir().unwrap();
    let cx = cx(dir.path());
    cx.cancel.cancel(CancelReason::UserInterrupted);
    let out = WriteTool
        .call(json!({"file_path": "x.txt", "content": "x"}), cx)
        .await;
    assert!(
        matches!(
            out,
            ToolOutcome::Stopped {
                reason: CancelReason::UserInterrupted,
                started: false,
                ..
            }
        ),
        "{out:?}"
    );
    assert!(!dir.path().join("x.txt").exists());
}

#[tokio::test]
async fn write_to_directory_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = WriteTool
        .call(
            json!({"file_path": dir.path(), "content": "x"}),
            cx(dir.path()),
        )
        .await;
    assert!(
        matches!(&out, ToolOutcome::Failed { message, .. } if message.contains("is a directory")),
        "{out:?}"
    );
}

#[test]
fn read_only_flags() {
    assert!(ReadTool.is_read_only(&json!({})));
    assert!(!WriteTool.is_read_only(&json!({})));
}
