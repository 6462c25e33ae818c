//! Unit tests of the history a branched transcript resumes with: the newest message's branch,
//! parallel tool calls kept whole, breaks in the chain told, checkpoints that stay honest.

use std::io::Write;
use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::*;

const SID: &str = "44444444-4444-4444-8444-444444444444";

fn user(uuid: &str, parent: Option<&str>, content: Value) -> String {
    json!({"parentUuid": parent, "isSidechain": false, "type": "user",
        "message": {"role": "user", "content": content}, "uuid": uuid,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w", "sessionId": SID,
        "version": "2.1.332", "userType": "external"})
    .to_string()
}

fn assistant(uuid: &str, parent: Option<&str>, id: &str, block: Value) -> String {
    json!({"parentUuid": parent, "isSidechain": false, "type": "assistant",
        "message": {"id": id, "type": "message", "role": "assistant", "model": "m",
            "content": [block], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}},
        "uuid": uuid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w", "sessionId": SID,
        "version": "2.1.332", "userType": "external"})
    .to_string()
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn call(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}})
}

fn result(id: &str, out: &str) -> Value {
    json!([{"type": "tool_result", "tool_use_id": id, "content": out}])
}

/// A transcript file of `lines` in a fresh store; the store's home is returned to keep it.
fn session(lines: &[String]) -> (tempfile::TempDir, Store, std::path::PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::new(home.path());
    let path = store.session_path(Path::new("/w"), SID);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (home, store, path)
}

fn resume(store: &Store) -> Opened {
    store
        .open(&OpenRequest {
            cwd: Path::new("/w"),
            model: "m",
            fsync: FsyncMode::Turn,
            start: Start::Resume(SID.into()),
            fork: false,
            session_id: None,
        })
        .unwrap()
}

fn texts(h: &crate::history::History) -> Vec<Value> {
    h.messages()
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect()
}

fn kinds(o: &Opened) -> Vec<NoticeKind> {
    o.notices.iter().map(|n| n.kind).collect()
}

#[test]
fn a_rewound_prompt_resumes_its_own_branch_and_keel_appends_to_it() {
    let (_home, store, path) = session(&[
        user("u1", None, json!("first")),
        assistant("a1", Some("u1"), "m1", text("one")),
        user("u2", Some("a1"), json!("second, abandoned")),
        json!({"parentUuid": "u2", "type": "attachment", "uuid": "at", "sessionId": SID,
            "attachment": {"type": "date"}})
        .to_string(),
        assistant("a2", Some("at"), "m2", text("two, abandoned")),
        // The rewind: the prompt typed again, after the first answer.
        user("u3", Some("a1"), json!("second, again")),
        assistant("a3", Some("u3"), "m3", text("three")),
        json!({"type": "file-history-snapshot", "messageId": "u3", "snapshot": {}}).to_string(),
    ]);
    let opened = resume(&store);
    assert_eq!(
        texts(&opened.history),
        [
            json!({"role": "user", "content": [text("first")]}),
            json!({"role": "assistant", "content": [text("one")]}),
            json!({"role": "user", "content": [text("second, again")]}),
            json!({"role": "assistant", "content": [text("three")]}),
        ]
    );
    let other = opened
        .notices
        .iter()
        .find(|n| n.kind == NoticeKind::OtherBranches)
        .expect("the abandoned branch is told");
    assert!(other.message.starts_with("2 messages"), "{}", other.message);
    assert_eq!(other.line, Some(3));
    // keel's next entry continues the resumed branch.
    let prompt: keel_protocol::Frame = serde_json::from_value(json!({"type": "user",
        "message": {"role": "user", "content": [text("next")]},
        "parent_tool_use_id": null, "session_id": SID, "uuid": "k1"}))
    .unwrap();
    opened.writer.append_frame(&prompt).unwrap();
    opened.writer.sync_now().unwrap();
    let last = std::fs::read_to_string(&path).unwrap();
    let last: Value = serde_json::from_str(last.lines().last().unwrap()).unwrap();
    assert_eq!(last["parentUuid"], "a3");
}

#[test]
fn a_parallel_response_is_resumed_whole_without_repairs() {
    // One entry per content block; each result chained to its own call; the next reply
    // chained to the last result: the walk alone would see one call and one result.
    let (_home, store, _path) = session(&[
        user("u1", None, json!("look")),
        assistant("a1", Some("u1"), "m1", call("t1")),
        assistant("a2", Some("a1"), "m1", call("t2")),
        user("r1", Some("a1"), result("t1", "out one")),
        user("r2", Some("a2"), result("t2", "out two")),
        assistant("a3", Some("r2"), "m2", text("both done")),
    ]);
    let opened = resume(&store);
    assert_eq!(
        texts(&opened.history),
        [
            json!({"role": "user", "content": [text("look")]}),
            json!({"role": "assistant", "content": [call("t1"), call("t2")]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "out one"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "out two"}]}),
            json!({"role": "assistant", "content": [text("both done")]}),
        ]
    );
    assert_eq!(kinds(&opened), [], "{:?}", opened.notices);
}

#[test]
fn a_cycle_is_told_and_the_history_starts_after_it() {
    // x and y name each other; the newest message hangs below them.
    let (_home, store, _path) = session(&[
        user("x", Some("y"), json!("x")),
        assistant("y", Some("x"), "m1", text("y")),
        user("u", Some("y"), json!("after the loop")),
        assistant("a", Some("u"), "m2", text("answer")),
    ]);
    let opened = resume(&store);
    assert_eq!(
        texts(&opened.history),
        [
            // The walk a ← u ← y ← x meets y again: x is where the history starts.
            json!({"role": "user", "content": [text("x")]}),
            json!({"role": "assistant", "content": [text("y")]}),
            json!({"role": "user", "content": [text("after the loop")]}),
            json!({"role": "assistant", "content": [text("answer")]}),
        ]
    );
    assert_eq!(kinds(&opened), [NoticeKind::ChainCycle]);
    let n = &opened.notices[0];
    assert_eq!(n.line, Some(1));
    assert_eq!(n.fields()["entry_uuid"], "x");
    assert!(n.message.contains("names as its parent y"), "{}", n.message);

    // A loop with no way out at all still resumes, from the newest message.
    let (_home, store, _path) = session(&[
        user("p", Some("q"), json!("p")),
        assistant("q", Some("p"), "m1", text("q")),
    ]);
    let opened = resume(&store);
    assert_eq!(opened.history.len(), 2);
    assert_eq!(kinds(&opened), [NoticeKind::ChainCycle]);
}

#[test]
fn a_dangling_parent_is_told_and_the_history_starts_at_its_entry() {
    let (_home, store, _path) = session(&[
        user("u0", None, json!("before, cut off")),
        assistant("a0", Some("u0"), "m0", text("old")),
        user("u1", Some("gone"), json!("after a gap")),
        assistant("a1", Some("u1"), "m1", text("answer")),
    ]);
    let opened = resume(&store);
    assert_eq!(
        texts(&opened.history),
        [
            json!({"role": "user", "content": [text("after a gap")]}),
            json!({"role": "assistant", "content": [text("answer")]}),
        ]
    );
    assert_eq!(
        kinds(&opened),
        [NoticeKind::DanglingParent, NoticeKind::OtherBranches]
    );
    let n = &opened.notices[0];
    assert_eq!(
        (n.line, n.fields()["entry_uuid"].clone()),
        (Some(3), json!("u1"))
    );
    assert!(n.message.contains("gone"), "{}", n.message);
}

#[test]
fn a_compaction_on_an_abandoned_branch_does_not_cut_the_resumed_one() {
    let (_home, store, _path) = session(&[
        user("u1", None, json!("first")),
        assistant("a1", Some("u1"), "m1", text("one")),
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "b", "parentUuid": null,
            "logicalParentUuid": "a1", "sessionId": SID})
        .to_string(),
        user("s", Some("b"), json!("summary")),
        assistant("a2", Some("s"), "m2", text("abandoned")),
        // A branch off the first answer, written later: the compaction is not on it.
        user("u3", Some("a1"), json!("other way")),
        assistant("a3", Some("u3"), "m3", text("three")),
    ]);
    let opened = resume(&store);
    assert_eq!(
        texts(&opened.history),
        [
            json!({"role": "user", "content": [text("first")]}),
            json!({"role": "assistant", "content": [text("one")]}),
            json!({"role": "user", "content": [text("other way")]}),
            json!({"role": "assistant", "content": [text("three")]}),
        ]
    );
}

/// A linear chain of `turns` prompt/answer pairs, ~1.4 KB a turn.
fn long_chain(turns: usize) -> Vec<String> {
    let pad = "x".repeat(600);
    let mut lines = Vec::new();
    let mut parent: Option<String> = None;
    for t in 0..turns {
        let (u, a) = (format!("u{t}"), format!("a{t}"));
        lines.push(user(
            &u,
            parent.as_deref(),
            json!(format!("prompt {t} {pad}")),
        ));
        lines.push(assistant(
            &a,
            Some(&u),
            &format!("m{t}"),
            text(&format!("answer {t} {pad}")),
        ));
        parent = Some(a);
    }
    lines
}

fn append(path: &Path, lines: &[String]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
}

#[test]
fn a_checkpoint_serves_a_linear_tail_and_a_rewind_before_it_reads_the_whole_file() {
    let (_home, store, path) = session(&long_chain(1000));
    assert!(std::fs::metadata(&path).unwrap().len() >= checkpoint::MIN_TRANSCRIPT);
    let first = resume(&store);
    assert_eq!(first.history.len(), 2000);
    drop(first);
    checkpoint::at_exit();
    let cp = checkpoint::path_for(&path);
    assert!(cp.is_file(), "the first resume left a checkpoint");
    // Marked, to tell whether the next resume starts from it.
    let saved = std::fs::read_to_string(&cp).unwrap();
    std::fs::write(&cp, saved.replace("prompt 5 ", "PROMPT 5 ")).unwrap();

    // Claude Code goes on from the last answer: the checkpoint holds.
    append(
        &path,
        &[
            user("n1", Some("a999"), json!("more")),
            assistant("n2", Some("n1"), "mn", text("ok")),
        ],
    );
    let second = resume(&store);
    let h = texts(&second.history);
    assert_eq!(h.len(), 2002);
    assert!(
        h[10].to_string().contains("PROMPT 5 "),
        "from the checkpoint"
    );
    assert_eq!(
        h[2001],
        json!({"role": "assistant", "content": [text("ok")]})
    );
    assert_eq!(kinds(&second), []);
    drop(second);
    checkpoint::at_exit();

    // A rewind to turn 10, before the checkpoint: the whole file is read again.
    let saved = std::fs::read_to_string(&cp).unwrap();
    std::fs::write(&cp, saved.replace("prompt 5 ", "PROMPT 5 ")).unwrap();
    append(
        &path,
        &[
            user("w1", Some("a10"), json!("rewound")),
            assistant("w2", Some("w1"), "mw", text("fresh")),
        ],
    );
    let third = resume(&store);
    let h = texts(&third.history);
    assert_eq!(h.len(), 24);
    assert!(
        !h[10].to_string().contains("PROMPT 5 "),
        "not from the checkpoint"
    );
    assert_eq!(h[22], json!({"role": "user", "content": [text("rewound")]}));
    let other = third
        .notices
        .iter()
        .find(|n| n.kind == NoticeKind::OtherBranches)
        .unwrap();
    assert!(
        other.message.starts_with("1980 messages"),
        "{}",
        other.message
    );
    drop(third);
    // The checkpoint that full read saved is the rewound branch's, and tells the branches
    // it covers again.
    checkpoint::at_exit();
    let text_now = std::fs::read_to_string(&cp).unwrap();
    assert!(text_now.contains("rewound"));
    append(
        &path,
        &[
            user("w3", Some("w2"), json!("and on")),
            assistant("w4", Some("w3"), "mw2", text("fine")),
        ],
    );
    let fourth = resume(&store);
    assert_eq!(fourth.history.len(), 26);
    assert_eq!(kinds(&fourth), [NoticeKind::OtherBranches]);
}

#[test]
fn a_parent_lost_with_a_damaged_line_is_bridged_not_a_break() {
    let (_home, store, _path) = session(&[
        user("u1", None, json!("first")),
        assistant("a1", Some("u1"), "m1", text("one")),
        // The entry u2 names as parent, damaged beyond reading.
        r#"{"parentUuid":"a1","isSidechain":false,"type":"assistant","mess"#.to_owned(),
        user("u2", Some("lost"), json!("second")),
        assistant("a3", Some("u2"), "m3", text("three")),
    ]);
    let opened = resume(&store);
    assert_eq!(
        texts(&opened.history),
        [
            json!({"role": "user", "content": [text("first")]}),
            json!({"role": "assistant", "content": [text("one")]}),
            json!({"role": "user", "content": [text("second")]}),
            json!({"role": "assistant", "content": [text("three")]}),
        ]
    );
    assert_eq!(kinds(&opened), [NoticeKind::CorruptLine]);
}

#[test]
fn keels_own_files_resume_as_the_file_order_in_one_pass() {
    // keel's own sessions: compactions, stray results, unanswered calls, subagent frames.
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join(format!("{SID}.jsonl"));
    let frames = super::tests::varied(9, 100);
    super::tests::write_all(&path, &frames);
    let (loaded, walked) = load_file(&path, SID, false).unwrap();
    assert_eq!(
        loaded.chain,
        ChainReport::default(),
        "one linear chain, read once"
    );
    let file_order = rebuild_history(read_file(&path).unwrap().records, SID);
    let bytes = |h: &crate::history::History| serde_json::to_string(&h.request_messages()).unwrap();
    assert_eq!(bytes(&walked.history), bytes(&file_order.history));
    assert!(bytes(&walked.history).contains("summary so far"));
}
