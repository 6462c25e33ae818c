//! The file tools with real files: nothing is overwritten unread or stale, a file keeps its
//! identity, nothing hangs, and text that is not UTF-8 is said to be so.

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use keel_tools::{EditTool, ReadTool, Tool, ToolOutcome, WriteTool};
use serde_json::json;

use super::common::{cx, put};

fn failed(out: &ToolOutcome) -> &str {
    match out {
        ToolOutcome::Failed { message, .. } => message,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn write_refuses_an_unread_file_and_one_changed_since_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = put(dir.path(), "notes.txt", "precious\n");
    let agent = cx(dir.path());
    let out = WriteTool
        .call(
            json!({"file_path": "notes.txt", "content": "oops"}),
            agent.clone(),
        )
        .await;
    assert!(failed(&out).contains("has not been read"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "precious\n");

    ReadTool
        .call(json!({"file_path": "notes.txt"}), agent.clone())
        .await;
    // Someone else changes it after the read.
    std::fs::write(&p, "precious, and more\n").unwrap();
    let out = WriteTool
        .call(
            json!({"file_path": "notes.txt", "content": "oops"}),
            agent.clone(),
        )
        .await;
    assert!(failed(&out).contains("changed on disk"), "{out:?}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "precious, and more\n");
    let out = EditTool
        .call(
            json!({"file_path": "notes.txt", "old_string": "more", "new_string": "less"}),
            agent.clone(),
        )
        .await;
    assert!(failed(&out).contains("changed on disk"), "{out:?}");

    // Read again: now it may be written. A new file never needs a read.
    ReadTool
        .call(json!({"file_path": "notes.txt"}), agent.clone())
        .await;
    let out = WriteTool
        .call(
            json!({"file_path": "notes.txt", "content": "fine\n"}),
            agent.clone(),
        )
        .await;
    assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    let out = WriteTool
        .call(json!({"file_path": "fresh.txt", "content": "new\n"}), agent)
        .await;
    assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    // Another agent (its own ledger) has read nothing.
    let other = cx(dir.path());
    let out = WriteTool
        .call(json!({"file_path": "notes.txt", "content": "x"}), other)
        .await;
    assert!(failed(&out).contains("has not been read"), "{out:?}");
}

#[tokio::test]
#[ignore = "needs root (to own a file as another user)"]
async fn edit_as_root_keeps_another_users_owner_and_hard_links() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root to own a file as another user"
    );
    let dir = tempfile::tempdir().unwrap();
    let linked = put(dir.path(), "linked.txt", "alpha\n");
    let twin = dir.path().join("twin.txt");
    std::fs::hard_link(&linked, &twin).unwrap();
    let single = put(dir.path(), "single.txt", "alpha\n");
    for p in [&linked, &single] {
        std::os::unix::fs::chown(p, Some(4242), Some(4343)).unwrap();
    }
    let agent = cx(dir.path());
    for name in ["linked.txt", "single.txt"] {
        ReadTool
            .call(json!({"file_path": name}), agent.clone())
            .await;
        let out = EditTool
            .call(
                json!({"file_path": name, "old_string": "alpha", "new_string": "beta"}),
                agent.clone(),
            )
            .await;
        assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    }
    for p in [&linked, &single] {
        let m = std::fs::metadata(p).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (4242, 4343),
            "{} keeps its owner",
            p.display()
        );
        assert_eq!(std::fs::read_to_string(p).unwrap(), "beta\n");
    }
    assert_eq!(
        std::fs::read_to_string(&twin).unwrap(),
        "beta\n",
        "the hard link still shares the file"
    );
    assert_eq!(std::fs::metadata(&linked).unwrap().nlink(), 2);
}

#[tokio::test]
async fn a_huge_one_line_file_edits_with_a_bounded_result() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!(
        "var a={};var b=2;{}",
        "1".repeat(1_500_000),
        "x".repeat(1_500_000)
    );
    put(dir.path(), "min.js", &line);
    let agent = cx(dir.path());
    ReadTool
        .call(json!({"file_path": "min.js"}), agent.clone())
        .await;
    let out = EditTool
        .call(
            json!({"file_path": "min.js", "old_string": "var b=2;", "new_string": "var b=3;"}),
            agent,
        )
        .await;
    let ToolOutcome::Ok { content, .. } = &out else {
        panic!("{out:?}")
    };
    assert!(
        content.len() < 2000,
        "the result is {} bytes",
        content.len()
    );
    assert!(
        content.contains("var b=3;") && content.contains("characters cut"),
        "{content}"
    );
}

#[tokio::test]
async fn fifos_devices_and_stdin_are_refused_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let agent = cx(dir.path());
    for path in [fifo.to_str().unwrap(), "/dev/zero", "/dev/stdin"] {
        let t = Instant::now();
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            ReadTool.call(json!({"file_path": path}), agent.clone()),
        )
        .await
        .expect("Read returned");
        assert!(matches!(out, ToolOutcome::Failed { .. }), "{path}: {out:?}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{path} took {:?}",
            t.elapsed()
        );
        let out = EditTool
            .call(
                json!({"file_path": path, "old_string": "a", "new_string": "b"}),
                agent.clone(),
            )
            .await;
        assert!(matches!(out, ToolOutcome::Failed { .. }), "{path}: {out:?}");
    }
    let out = WriteTool
        .call(json!({"file_path": fifo, "content": "x"}), agent)
        .await;
    assert!(failed(&out).contains("named pipe"), "{out:?}");
}

#[tokio::test]
async fn pseudo_files_of_size_zero_are_read() {
    let out = ReadTool
        .call(
            json!({"file_path": "/proc/self/status"}),
            cx(std::path::Path::new("/")),
        )
        .await;
    let ToolOutcome::Ok { content, .. } = &out else {
        panic!("{out:?}")
    };
    assert!(content.contains("Name:"), "{content}");
}

#[tokio::test]
async fn latin1_text_is_read_with_a_note_and_edited_back_as_latin1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("menu.txt"), b"caf\xe9 cr\xe8me\n").unwrap();
    let agent = cx(dir.path());
    let out = ReadTool
        .call(json!({"file_path": "menu.txt"}), agent.clone())
        .await;
    let text = out.text();
    assert!(
        text.contains("café crème") && text.contains("Latin-1"),
        "{text}"
    );
    let out = EditTool
        .call(
            json!({"file_path": "menu.txt", "old_string": "crème", "new_string": "brûlée"}),
            agent,
        )
        .await;
    assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    assert_eq!(
        std::fs::read(dir.path().join("menu.txt")).unwrap(),
        b"caf\xe9 br\xfbl\xe9e\n"
    );
}
