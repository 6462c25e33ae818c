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

/// Reads at offsets share the agent's line index: each one finds the same lines a scan from
/// the top would, in any order, and the line count once it is known.
#[tokio::test]
async fn reads_at_offsets_agree_with_the_file_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    // About 3 MB of lines of varied length: many index marks.
    let text: String = (1..=200_000)
        .map(|i| format!("{i} {}\n", "y".repeat(i % 23)))
        .collect();
    let p = put(dir.path(), "long.txt", &text);
    let shared = cx(dir.path());
    for offset in [150_000usize, 3, 199_990, 64_001, 150_010, 1, 99_999] {
        let out = ReadTool
            .call(
                json!({"file_path": p, "offset": offset, "limit": 5}),
                shared.clone(),
            )
            .await;
        let ToolOutcome::Ok { content, .. } = &out else {
            panic!("{out:?}")
        };
        let first = content.lines().next().unwrap();
        let want = format!("{offset:>6}\t{offset} {}", "y".repeat(offset % 23));
        assert_eq!(first, want, "offset {offset}");
    }
    // Past the end, from the index: the exact count.
    let out = ReadTool
        .call(json!({"file_path": p, "offset": 200_001}), shared.clone())
        .await;
    assert!(
        out.text()
            .contains("has 200000 lines; offset 200001 is past the end"),
        "{out:?}"
    );
}

/// A file that changed between two Reads (its size, its modification time, or a new file
/// under the same name) is indexed anew: never a line from the old version.
#[tokio::test]
async fn a_changed_file_is_never_read_through_a_stale_index() {
    let dir = tempfile::tempdir().unwrap();
    let shared = cx(dir.path());
    let old: String = (1..=100_000).map(|i| format!("old {i}\n")).collect();
    let p = put(dir.path(), "f.txt", &old);
    let at = |n: usize| json!({"file_path": p, "offset": n, "limit": 1});
    let out = ReadTool.call(at(90_000), shared.clone()).await;
    assert!(out.text().starts_with(" 90000\told 90000"), "{out:?}");

    // Same size, new content, new modification time: lines of other lengths.
    let same_size: String = {
        let mut s: String = (1..=100_000).map(|i| format!("new {i}\n")).collect();
        s.truncate(old.len());
        s
    };
    assert_eq!(same_size.len(), old.len());
    std::fs::write(&p, &same_size).unwrap();
    super::common::set_mtime(&p, 1_000_000);
    let out = ReadTool.call(at(90_000), shared.clone()).await;
    assert!(out.text().starts_with(" 90000\tnew 90000"), "{out:?}");

    // Another size: shorter lines, so the old marks would land mid-line.
    let shorter: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(&p, &shorter).unwrap();
    let out = ReadTool.call(at(90_000), shared.clone()).await;
    assert!(out.text().starts_with(" 90000\t90000"), "{out:?}");

    // A new file (another inode) renamed over it, same size and time as before.
    let replacement: String = (1..=100_000).map(|i| format!("{}\n", i % 7)).collect();
    let tmp = put(dir.path(), "f.new", &replacement);
    std::fs::rename(&tmp, &p).unwrap();
    let out = ReadTool.call(at(90_000), shared.clone()).await;
    assert_eq!(out.text().lines().next(), Some(" 90000\t1"), "{out:?}");
}
