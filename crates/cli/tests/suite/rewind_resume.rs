//! Rewind after a resume, through the keel binary as the SDKs drive it: the checkpoint index
//! is kept beside the snapshots, so a resumed session can rewind to a prompt of its earlier
//! run — and an index someone else wrote is refused, never trusted to name other files.

use serde_json::{json, Value};

use super::common::{Harness, Stream};

const ON: (&str, &str) = ("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "true");

fn start(h: &Harness, extra: &[&str]) -> Stream {
    let mut args = vec!["--permission-mode", "acceptEdits", "--replay-user-messages"];
    args.extend_from_slice(extra);
    Stream::start(h, &args, &[ON])
}

/// The first run: one prompt whose turn edits a file and creates another. Returns the
/// prompt's uuid and the session id.
async fn first_run(h: &Harness) -> (String, String) {
    std::fs::write(h.cwd().join("keep.txt"), "line v0\n").unwrap();
    let mut s = start(h, &[]);
    s.user("turn one").await;
    let replay = s
        .wait(|f| f["type"] == "user" && f["isReplay"] == true)
        .await;
    let r = s.result().await;
    assert_eq!(r["subtype"], "success", "{r}");
    s.finish().await;
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("keep.txt")).unwrap(),
        "line v1\n"
    );
    assert!(h.cwd().join("new.txt").exists());
    (
        replay["uuid"].as_str().unwrap().to_owned(),
        r["session_id"].as_str().unwrap().to_owned(),
    )
}

fn scenario() -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Read", "input": {"file_path": "keep.txt"}}]},
        {"kind": "tool_use", "calls": [{"name": "Edit", "input": {"file_path": "keep.txt", "old_string": "v0", "new_string": "v1"}}]},
        {"kind": "tool_use", "calls": [{"name": "Write", "input": {"file_path": "new.txt", "content": "made in run one\n"}}]},
        {"kind": "text", "text": "done"}
    ]})
    .to_string()
}

fn store_dir(h: &Harness, session: &str) -> std::path::PathBuf {
    h.keel_home().join("checkpoints").join(session)
}

#[tokio::test]
async fn a_resumed_session_rewinds_to_a_prompt_of_its_earlier_run() {
    let h = Harness::from_json(&scenario()).await;
    let (uuid, session) = first_run(&h).await;
    let index = store_dir(&h, &session).join("index.json");
    let mode = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode(&index), 0o600, "the index is the user's alone");
    assert_eq!(mode(index.parent().unwrap()), 0o700);

    let mut s = start(&h, &["--resume", &session]);
    let r = s
        .ask(
            "r1",
            json!({"subtype": "rewind_files", "user_message_id": uuid}),
        )
        .await;
    assert_eq!(r["subtype"], "success", "{r}");
    assert_eq!(r["response"]["canRewind"], true, "{r}");
    let changed: Vec<&str> = r["response"]["filesChanged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().rsplit('/').next().unwrap())
        .collect();
    assert_eq!(changed, ["keep.txt", "new.txt"], "{r}");
    s.finish().await;
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("keep.txt")).unwrap(),
        "line v0\n"
    );
    assert!(
        !h.cwd().join("new.txt").exists(),
        "created in run one: deleted"
    );
}

#[tokio::test]
async fn an_index_naming_a_file_outside_the_project_is_refused_on_resume() {
    let h = Harness::from_json(&scenario()).await;
    let (uuid, session) = first_run(&h).await;
    let index = store_dir(&h, &session).join("index.json");
    let victim = tempfile::tempdir().unwrap();
    let target = std::fs::canonicalize(victim.path()).unwrap().join("bashrc");
    std::fs::write(&target, "mine\n").unwrap();
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    let files = v["files"].as_array_mut().unwrap();
    let new = files
        .iter_mut()
        .find(|f| f["path"].as_str().unwrap().ends_with("new.txt"))
        .unwrap();
    // "Delete the file keel created" — pointed at a file of the user's outside the project.
    new["path"] = json!(target);
    std::fs::write(&index, v.to_string()).unwrap();

    let mut s = start(&h, &["--resume", &session]);
    let r = s
        .ask(
            "r1",
            json!({"subtype": "rewind_files", "user_message_id": uuid}),
        )
        .await;
    assert_eq!(r["subtype"], "error", "{r}");
    assert!(r["error"].as_str().unwrap().contains(&uuid), "{r}");
    let run = s.finish().await;
    assert!(
        run.stderr.contains("index.json") && run.stderr.contains("outside"),
        "the refusal is named: {}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine\n");
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("keep.txt")).unwrap(),
        "line v1\n",
        "nothing was rewound"
    );
}
