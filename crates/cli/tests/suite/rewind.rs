//! File checkpoints and `rewind_files` through the keel binary against keel-mock, driven as
//! the SDKs drive it (stream-json, `--replay-user-messages`, the checkpointing variable).

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};

use super::common::{Harness, Stream};

const ON: (&str, &str) = ("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "true");
const NOTEBOOK: &str = "{\n \"cells\": [\n  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"m1\",\n   \"metadata\": {},\n   \"source\": \"# Before\"\n  }\n ],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n";

fn start(h: &Harness, env: &[(&str, &str)]) -> Stream {
    Stream::start(
        h,
        &["--permission-mode", "acceptEdits", "--replay-user-messages"],
        env,
    )
}

/// Send a prompt; return the uuid its replay carries (after the turn's result).
async fn prompt(s: &mut Stream, text: &str) -> String {
    s.user(text).await;
    let replay = s
        .wait(|f| {
            f["type"] == "user"
                && f["isReplay"] == true
                && f["message"]["content"][0]["text"] == text
        })
        .await;
    let r = s.result().await;
    assert_eq!(r["subtype"], "success", "{r}");
    replay["uuid"]
        .as_str()
        .expect("the replay has a uuid")
        .to_owned()
}

fn read(h: &Harness, name: &str) -> Option<String> {
    std::fs::read_to_string(h.cwd().join(name)).ok()
}

#[tokio::test]
async fn rewind_restores_write_edit_and_notebookedit_and_deletes_created_files() {
    let h = Harness::from_json(
        r##"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Read","input":{"file_path":"keep.txt"}},{"name":"Read","input":{"file_path":"nb.ipynb"}}]},
            {"kind":"tool_use","calls":[{"name":"Edit","input":{"file_path":"keep.txt","old_string":"v0","new_string":"v1"}}]},
            {"kind":"tool_use","calls":[{"name":"Write","input":{"file_path":"new.txt","content":"created in turn 1\n"}}]},
            {"kind":"tool_use","calls":[{"name":"NotebookEdit","input":{"notebook_path":"nb.ipynb","cell_id":"m1","new_source":"# After"}}]},
            {"kind":"text","text":"turn 1 done"},
            {"kind":"tool_use","calls":[{"name":"Write","input":{"file_path":"keep.txt","content":"line v2\nanother\n"}}]},
            {"kind":"tool_use","calls":[{"name":"Write","input":{"file_path":"sub/other.txt","content":"created in turn 2\n"}}]},
            {"kind":"text","text":"turn 2 done"}]}"##,
    )
    .await;
    std::fs::write(h.cwd().join("keep.txt"), "line v0\n").unwrap();
    std::fs::set_permissions(
        h.cwd().join("keep.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    std::fs::write(h.cwd().join("nb.ipynb"), NOTEBOOK).unwrap();
    let mut s = start(&h, &[ON]);
    let first = prompt(&mut s, "turn one").await;
    let second = prompt(&mut s, "turn two").await;
    assert_ne!(first, second);
    assert_eq!(read(&h, "keep.txt").unwrap(), "line v2\nanother\n");
    assert!(read(&h, "nb.ipynb").unwrap().contains("# After"));

    // A dry run says what would change and changes nothing.
    let r = s
        .ask(
            "d1",
            json!({"subtype": "rewind_files", "user_message_id": second, "dry_run": true}),
        )
        .await;
    assert_eq!(r["subtype"], "success", "{r}");
    assert_eq!(r["response"]["canRewind"], true);
    assert_eq!(
        r["response"]["filesChanged"].as_array().unwrap().len(),
        2,
        "{r}"
    );
    assert!(read(&h, "sub/other.txt").is_some());

    let r = s
        .ask(
            "r1",
            json!({"subtype": "rewind_files", "user_message_id": second}),
        )
        .await;
    assert_eq!(r["subtype"], "success", "{r}");
    assert_eq!(r["response"]["canRewind"], true);
    assert_eq!(
        read(&h, "keep.txt").unwrap(),
        "line v1\n",
        "back to turn 2's start"
    );
    assert_eq!(
        read(&h, "sub/other.txt"),
        None,
        "created in turn 2: deleted"
    );
    assert_eq!(read(&h, "new.txt").unwrap(), "created in turn 1\n");

    let r = s
        .ask(
            "r2",
            json!({"subtype": "rewind_files", "user_message_id": first}),
        )
        .await;
    assert_eq!(r["subtype"], "success", "{r}");
    let changed: Vec<String> = r["response"]["filesChanged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().rsplit('/').next().unwrap().to_owned())
        .collect();
    assert_eq!(changed, ["keep.txt", "nb.ipynb", "new.txt"], "{r}");
    assert_eq!(read(&h, "keep.txt").unwrap(), "line v0\n");
    let mode = std::fs::metadata(h.cwd().join("keep.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640, "the mode comes back too");
    assert_eq!(read(&h, "nb.ipynb").unwrap(), NOTEBOOK, "byte for byte");
    assert_eq!(read(&h, "new.txt"), None);
    let left: Vec<String> = std::fs::read_dir(h.cwd())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("keel"))
        .collect();
    assert!(left.is_empty(), "no staging files are left: {left:?}");
    // The snapshots live under KEEL_HOME, not in the repository.
    assert!(h.keel_home().join("checkpoints").is_dir());
    let run = s.finish().await;
    assert_eq!(run.code, 0);
    // Kept at exit, with their index, for a resume (suite::rewind_resume).
    let stores: Vec<_> = h
        .keel_home()
        .join("checkpoints")
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(stores.len(), 1, "{stores:?}");
    assert!(stores[0].join("index.json").is_file());
}

#[tokio::test]
async fn rewind_refuses_honestly_and_restores_none_halfway() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Write","input":{"file_path":"a.txt","content":"a by keel\n"}},{"name":"Write","input":{"file_path":"b.txt","content":"b by keel\n"}},{"name":"Write","input":{"file_path":"c.txt","content":"c by keel\n"}}]},
            {"kind":"text","text":"done"}]}"#,
    )
    .await;
    let mut s = start(&h, &[ON]);
    let first = prompt(&mut s, "write three").await;
    std::fs::write(h.cwd().join("b.txt"), "b changed by hand\n").unwrap();
    std::fs::remove_file(h.cwd().join("c.txt")).unwrap();
    let r = s
        .ask(
            "r1",
            json!({"subtype": "rewind_files", "user_message_id": first}),
        )
        .await;
    assert_eq!(r["subtype"], "error", "{r}");
    assert_eq!(r["error_code"], "rewind_refused");
    let why = r["error"].as_str().unwrap();
    assert!(why.contains("b.txt changed outside keel"), "{why}");
    assert!(
        why.contains("c.txt was deleted since keel wrote it"),
        "{why}"
    );
    assert!(!why.contains("a.txt"), "a.txt could be restored: {why}");
    assert_eq!(
        read(&h, "a.txt").unwrap(),
        "a by keel\n",
        "nothing restored halfway"
    );

    // A dry run answers the question instead of failing.
    let r = s
        .ask(
            "d1",
            json!({"subtype": "rewind_files", "user_message_id": first, "dry_run": true}),
        )
        .await;
    assert_eq!(r["subtype"], "success", "{r}");
    assert_eq!(r["response"]["canRewind"], false);
    assert!(r["response"]["error"].as_str().unwrap().contains("b.txt"));

    let r = s
        .ask("r2", json!({"subtype": "rewind_files", "user_message_id": "00000000-0000-4000-8000-000000000000"}))
        .await;
    assert_eq!(r["subtype"], "error");
    assert_eq!(r["error_code"], "unknown_message", "{r}");
    let run = s.finish().await;
    assert_eq!(run.code, 0);
}

#[tokio::test]
async fn without_checkpointing_rewind_says_it_is_off() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"ok"}]}"#).await;
    let mut s = start(&h, &[]);
    let first = prompt(&mut s, "hello").await;
    let r = s
        .ask(
            "r1",
            json!({"subtype": "rewind_files", "user_message_id": first}),
        )
        .await;
    assert_eq!(r["subtype"], "error");
    assert_eq!(r["error_code"], "checkpointing_disabled", "{r}");
    assert!(r["error"]
        .as_str()
        .unwrap()
        .contains("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING"));
    // Without --replay-user-messages no prompt is echoed.
    let h2 = Harness::from_json(r#"{"steps":[{"kind":"text","text":"ok"}]}"#).await;
    let mut s2 = Stream::start(&h2, &[], &[]);
    s2.user("quiet").await;
    s2.result().await;
    let run = s2.finish().await;
    let replays: Vec<&Value> = run
        .of("user")
        .into_iter()
        .filter(|f| f["isReplay"] == true)
        .collect();
    assert!(replays.is_empty(), "{replays:?}");
    s.finish().await;
}

#[tokio::test]
async fn a_rewind_while_a_turn_runs_is_refused_as_busy() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Write","input":{"file_path":"a.txt","content":"a\n"}}]},
            {"kind":"text","text":"first done"},
            {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"while [ ! -f go ]; do sleep 0.05; done"}}]},
            {"kind":"text","text":"second done"}]}"#,
    )
    .await;
    let mut s = Stream::start(
        &h,
        &[
            "--permission-mode",
            "acceptEdits",
            "--replay-user-messages",
            "--allowedTools",
            "Bash",
        ],
        &[ON],
    );
    let first = prompt(&mut s, "write a").await;
    s.user("wait").await;
    s.wait(|f| {
        f["type"] == "assistant"
            && f["message"]["content"][0]["type"] == "tool_use"
            && f["message"]["content"][0]["name"] == "Bash"
    })
    .await;
    let r = s
        .ask(
            "r1",
            json!({"subtype": "rewind_files", "user_message_id": first}),
        )
        .await;
    assert_eq!(r["error_code"], "busy", "{r}");
    assert_eq!(read(&h, "a.txt").unwrap(), "a\n");
    std::fs::write(h.cwd().join("go"), "").unwrap();
    assert_eq!(s.result().await["subtype"], "success");
    let r = s
        .ask(
            "r2",
            json!({"subtype": "rewind_files", "user_message_id": first}),
        )
        .await;
    assert_eq!(r["subtype"], "success", "{r}");
    assert_eq!(read(&h, "a.txt"), None);
    s.finish().await;
}
