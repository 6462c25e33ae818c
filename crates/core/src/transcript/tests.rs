//! Unit tests of the transcript module: write/read round trips, the tolerant reader, repairs,
//! and the store's new/resume/continue/fork paths.

use std::path::{Path, PathBuf};

use keel_protocol::{ContentBlock, Frame, MessageContent, Role};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::*;
use crate::emit::Persist;

const SID: &str = "11111111-1111-4111-8111-111111111111";

fn frame(v: Value) -> Frame {
    serde_json::from_value(v).unwrap()
}

fn init() -> Frame {
    frame(
        json!({"type":"system","subtype":"init","cwd":"/w","session_id":SID,"tools":[],
        "model":"m","permissionMode":"default","uuid":crate::ids::new_uuid()}),
    )
}

fn prompt(text: &str) -> Frame {
    frame(
        json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":text}]},
        "parent_tool_use_id":null,"session_id":SID,"uuid":crate::ids::new_uuid(),"timestamp":TS}),
    )
}

const TS: &str = "2026-01-01T00:00:00.000Z";

fn assistant(msg_id: &str, block: Value) -> Frame {
    frame(
        json!({"type":"assistant","message":{"id":msg_id,"type":"message","role":"assistant",
        "model":"m","content":[block],"stop_reason":null,"stop_sequence":null,"usage":{}},
        "parent_tool_use_id":null,"session_id":SID,"uuid":crate::ids::new_uuid(),"timestamp":TS}),
    )
}

fn text(t: &str) -> Value {
    json!({"type":"text","text":t})
}

fn call(id: &str) -> Value {
    json!({"type":"tool_use","id":id,"name":"Bash","input":{"command":"echo hi"}})
}

fn result_of(id: &str, out: &str) -> Frame {
    frame(json!({"type":"user","message":{"role":"user","content":[
        {"type":"tool_result","tool_use_id":id,"content":out,"is_error":false}]},
        "parent_tool_use_id":null,"session_id":SID,"uuid":crate::ids::new_uuid(),"timestamp":TS}))
}

fn result_frame() -> Frame {
    frame(
        json!({"type":"result","subtype":"success","is_error":false,"duration_ms":1,
        "duration_api_ms":1,"num_turns":1,"result":"done","session_id":SID,"total_cost_usd":0.0,
        "usage":{},"modelUsage":{},"permission_denials":[],"uuid":crate::ids::new_uuid()}),
    )
}

/// A complete exchange: prompt, a reply with text and two calls, their results, a final text.
fn exchange() -> Vec<Frame> {
    vec![
        init(),
        prompt("list the files"),
        assistant("msg_1", text("Let me look.")),
        assistant("msg_1", call("toolu_a")),
        assistant("msg_1", call("toolu_b")),
        result_of("toolu_a", "a.txt"),
        result_of("toolu_b", "b.txt"),
        assistant("msg_2", text("Two files.")),
        result_frame(),
    ]
}

fn writer(path: &Path) -> TranscriptWriter {
    let header = SessionHeader::new(SID, Path::new("/w"), "m");
    TranscriptWriter::create_lazily(path.to_owned(), &header, &[], FsyncMode::Turn).unwrap()
}

pub(super) fn write_all(path: &Path, frames: &[Frame]) {
    let w = writer(path);
    for f in frames {
        w.append_frame(f).unwrap();
    }
    w.sync_now().unwrap();
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn roles(h: &crate::history::History) -> Vec<Role> {
    h.messages().iter().map(|m| m.role).collect()
}

fn project(home: &Path, cwd: &Path) -> PathBuf {
    Store::new(home).project_dir(cwd)
}

fn open_req(cwd: &Path, start: Start) -> OpenRequest<'_> {
    OpenRequest {
        cwd,
        model: "m",
        fsync: FsyncMode::Turn,
        start,
        fork: false,
        session_id: None,
    }
}

#[test]
fn records_round_trip_with_a_header_a_chain_and_no_partial_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p").join(format!("{SID}.jsonl"));
    let w = writer(&path);
    assert!(!path.exists(), "the file is created at the first record");
    let mut frames = exchange();
    frames.insert(
        3,
        frame(
            json!({"type":"stream_event","event":{"type":"ping"},"session_id":SID,
            "parent_tool_use_id":null,"uuid":"e1"}),
        ),
    );
    for f in &frames {
        w.append_frame(f).unwrap();
    }
    w.sync().unwrap();

    let raw = lines(&path);
    assert_eq!(raw[0]["type"], "keel-session");
    assert_eq!(raw[0]["schema"], 2);
    assert_eq!(raw[0]["session_id"], SID);
    assert_eq!(raw[0]["cwd"], "/w");
    assert_eq!(raw[0]["model"], "m");
    assert!(raw[0]["keel_version"].is_string() && raw[0]["created_at"].is_string());
    assert_eq!(raw.len(), 1 + frames.len() - 1, "stream_event is not kept");
    let mut parent = Value::Null;
    for (r, f) in raw[1..]
        .iter()
        .zip(frames.iter().filter(|f| f.kind() != "stream_event"))
    {
        assert!(r["timestamp"].is_string());
        assert_eq!(r["uuid"].as_str(), f.uuid(), "an entry's id is its frame's");
        match f.kind() {
            "user" | "assistant" => {
                // Claude Code's entry: its fields, and a chain of message entries.
                assert_eq!(r["type"], f.kind());
                assert_eq!(r["sessionId"], SID);
                assert_eq!(r["cwd"], "/w");
                assert_eq!(r["isSidechain"], false);
                assert!(r["version"].is_string());
                assert_eq!(r["message"]["role"], f.kind());
                assert_eq!(
                    r["parentUuid"], parent,
                    "each message names the one before it"
                );
                parent = r["uuid"].clone();
            }
            _ => {
                // keel's own facts: a type other readers skip, outside the chain.
                assert_eq!(r["type"], "keel-frame");
                assert_eq!(r["frame"]["type"], f.kind());
                assert!(r.get("parentUuid").is_none());
            }
        }
    }
    // A prompt is the string Claude Code writes.
    assert_eq!(raw[2]["message"]["content"], "list the files");
    assert!(
        raw[6]["message"]["content"].is_array(),
        "tool results stay blocks"
    );

    let loaded = read_file(&path).unwrap();
    assert_eq!(loaded.header.as_ref().unwrap().session_id, SID);
    assert_eq!(loaded.records.len(), frames.len() - 1);
    assert!(loaded.issues.is_empty() && loaded.torn.is_none());
    assert_eq!(loaded.good_len, loaded.file_len);
    let kept: Vec<&Frame> = frames
        .iter()
        .filter(|f| !matches!(f, Frame::StreamEvent(_)))
        .collect();
    let read: Vec<&Frame> = loaded.records.iter().map(|r| &r.frame).collect();
    assert_eq!(read, kept);
}

#[test]
fn blocks_of_one_reply_and_results_of_one_batch_merge_into_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    write_all(&path, &exchange());
    let loaded = read_file(&path).unwrap();
    let r = rebuild(loaded.records, SID);
    assert!(r.repairs.is_empty());
    assert_eq!(r.first_prompt.as_deref(), Some("list the files"));
    let msgs = r.history.messages();
    assert_eq!(
        roles(&r.history),
        [Role::User, Role::Assistant, Role::User, Role::Assistant]
    );
    let kinds: Vec<&str> = msgs[1].content.blocks().iter().map(|b| b.kind()).collect();
    assert_eq!(kinds, ["text", "tool_use", "tool_use"]);
    assert_eq!(msgs[2].content.blocks().len(), 2);
    // A reply without tool calls followed by another reply (an interrupted turn, say) is one
    // assistant message, so roles keep alternating.
    let mut more = exchange();
    more.push(assistant("msg_3", text("Also this.")));
    write_all(&dir.path().join("u.jsonl"), &more);
    let r = rebuild(read_file(&dir.path().join("u.jsonl")).unwrap().records, SID);
    assert_eq!(r.history.len(), 4);
    assert_eq!(r.history.messages()[3].content.blocks().len(), 2);
    // Subagent frames are not part of the main conversation.
    let mut sub = exchange();
    let mut f = serde_json::to_value(assistant("msg_sub", call("toolu_sub"))).unwrap();
    f["parent_tool_use_id"] = json!("toolu_a");
    sub.insert(4, frame(f));
    write_all(&dir.path().join("s.jsonl"), &sub);
    let r = rebuild(read_file(&dir.path().join("s.jsonl")).unwrap().records, SID);
    assert!(r.repairs.is_empty());
    assert_eq!(r.history.len(), 4);
}

#[test]
fn a_torn_tail_is_ignored_reported_and_cut_before_the_next_append() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let dir = project(home.path(), cwd);
    let path = dir.join(format!("{SID}.jsonl"));
    write_all(&path, &exchange());
    let good = std::fs::read(&path).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(br#"{"type":"frame","uuid":"x","frame":{"type":"assist"#);
    std::fs::write(&path, &torn).unwrap();

    let loaded = read_file(&path).unwrap();
    let t = loaded.torn.clone().expect("torn tail found");
    assert_eq!(t.line, 11);
    assert!(t.reason.contains("incomplete"), "{}", t.reason);
    assert!(loaded.issues.is_empty());
    assert_eq!(loaded.good_len, good.len() as u64);

    let opened = Store::new(home.path())
        .open(&open_req(cwd, Start::Resume(SID.into())))
        .unwrap();
    assert_eq!(opened.session_id, SID);
    assert_eq!(opened.history.len(), 4);
    let n = &opened.notices;
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0].kind, NoticeKind::TornTail);
    assert_eq!(n[0].line, Some(11));
    assert!(n[0].message.contains("line 11") && n[0].message.contains("cut off"));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        good,
        "cut back to the last good record"
    );
    opened.writer.append_frame(&prompt("next")).unwrap();
    let raw = lines(&path);
    assert_eq!(raw.len(), 11);
    // The next message hangs off the last message (line 9: the line before is the result).
    assert_eq!(raw[10]["parentUuid"], raw[8]["uuid"]);
}

#[test]
fn a_last_record_without_its_newline_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let path = project(home.path(), cwd).join(format!("{SID}.jsonl"));
    write_all(&path, &exchange());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.pop();
    std::fs::write(&path, &bytes).unwrap();
    let opened = Store::new(home.path())
        .open(&open_req(cwd, Start::Resume(SID.into())))
        .unwrap();
    assert!(opened.notices.is_empty(), "{:?}", opened.notices);
    opened.writer.append_frame(&prompt("next")).unwrap();
    assert_eq!(lines(&path).len(), 11);
}

#[test]
fn a_corrupt_middle_line_is_skipped_and_reported_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    write_all(&path, &exchange());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut ls: Vec<String> = text.lines().map(str::to_owned).collect();
    // Line 4 is the text block of the first reply; line 3 gets zero bytes before its record.
    ls[3] = "{\"type\":\"frame\",\"uuid\":\"broken".into();
    ls[2] = format!("\0\0\0{}", ls[2]);
    std::fs::write(&path, ls.join("\n") + "\n").unwrap();

    let loaded = read_file(&path).unwrap();
    assert_eq!(loaded.issues.len(), 1, "{:?}", loaded.issues);
    assert_eq!(loaded.issues[0].line, 4);
    assert!(loaded.torn.is_none());
    assert_eq!(loaded.records.len(), 8, "every other record is read");
    let r = rebuild(loaded.records, SID);
    assert!(r.repairs.is_empty());
    assert_eq!(r.history.len(), 4);
    let msgs = r.history.messages();
    let kinds: Vec<&str> = msgs[1].content.blocks().iter().map(|b| b.kind()).collect();
    assert_eq!(
        kinds,
        ["tool_use", "tool_use"],
        "only the damaged block is lost"
    );

    // A line that is JSON but not a record, and a record whose frame is malformed.
    ls[3] = "[1,2,3]".into();
    ls[5] = r#"{"type":"frame","uuid":"u","frame":{"type":"assistant","message":7}}"#.into();
    std::fs::write(&path, ls.join("\n") + "\n").unwrap();
    let loaded = read_file(&path).unwrap();
    let bad: Vec<usize> = loaded.issues.iter().map(|i| i.line).collect();
    assert_eq!(bad, [4, 6]);
    assert!(
        loaded.issues[1].reason.contains("frame"),
        "{:?}",
        loaded.issues
    );
}

#[test]
fn a_call_left_open_by_a_crash_is_repaired_reported_and_recorded() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let path = project(home.path(), cwd).join(format!("{SID}.jsonl"));
    // Killed after the first of two results.
    write_all(&path, &exchange()[..6]);
    let opened = Store::new(home.path())
        .open(&open_req(cwd, Start::Resume(SID.into())))
        .unwrap();
    let msgs = opened.history.messages().to_vec();
    assert_eq!(
        roles(&opened.history),
        [Role::User, Role::Assistant, Role::User]
    );
    let results: Vec<(String, String, Option<bool>)> = msgs[2]
        .content
        .blocks()
        .iter()
        .map(|b| match b {
            ContentBlock::ToolResult(r) => (r.tool_use_id.clone(), r.content.as_text(), r.is_error),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(results[0], ("toolu_a".into(), "a.txt".into(), Some(false)));
    assert_eq!(results[1].0, "toolu_b");
    assert!(results[1].1.contains("session ended") && results[1].1.contains("side effects"));
    assert_eq!(results[1].2, Some(true));
    assert_eq!(opened.notices.len(), 1);
    assert_eq!(opened.notices[0].kind, NoticeKind::RepairedToolCalls);
    assert_eq!(opened.notices[0].tool_use_ids, ["toolu_b"]);
    assert!(opened.notices[0].message.contains("recorded"));
    drop(opened);
    // The synthetic result is in the file now: reading it again needs no repair.
    let loaded = read_file(&path).unwrap();
    let last = lines(&path).pop().unwrap();
    assert_eq!(
        last["keel"]["tool_result_meta"][0]["repair"],
        "session_ended"
    );
    let r = rebuild(loaded.records, SID);
    assert!(r.repairs.is_empty());
    let json = |m: &[keel_protocol::ApiMessage]| serde_json::to_value(m).unwrap();
    assert_eq!(json(&r.history.messages()), json(&msgs));
}

#[test]
fn a_result_lost_in_the_middle_is_repaired_where_it_belonged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut frames = exchange();
    frames.remove(6); // toolu_b's result
    frames.push(prompt("and now?"));
    write_all(&path, &frames);
    let r = rebuild(read_file(&path).unwrap().records, SID);
    assert_eq!(r.repairs.len(), 1);
    assert_eq!(r.repairs[0].cause, RepairCause::ResultMissing);
    assert_eq!(
        roles(&r.history),
        [
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User
        ]
    );
    let ids: Vec<String> = r.history.messages()[2]
        .content
        .blocks()
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult(t) => Some(t.tool_use_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["toolu_a", "toolu_b"]);
}

#[test]
fn a_lost_first_prompt_gets_a_placeholder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut frames = exchange();
    frames.remove(1);
    write_all(&path, &frames);
    let r = rebuild(read_file(&path).unwrap().records, SID);
    assert!(r.missing_prompt);
    assert_eq!(r.history.messages()[0].role, Role::User);
    assert!(matches!(&r.history.messages()[0].content, MessageContent::Blocks(b) if b.len() == 1));
}

#[test]
fn fork_copies_the_conversation_and_leaves_the_old_file_alone() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let store = Store::new(home.path());
    let old = store.session_path(cwd, SID);
    write_all(&old, &exchange()[..5]); // the crash left both calls open
    let before = std::fs::read(&old).unwrap();
    let mut req = open_req(cwd, Start::Resume(SID.into()));
    req.fork = true;
    let forked = store.open(&req).unwrap();
    assert_ne!(forked.session_id, SID);
    assert_eq!(forked.resumed_from.as_deref(), Some(SID));
    assert_eq!(forked.history.len(), 3);
    assert_eq!(forked.notices.len(), 1);
    assert!(!forked.writer.is_created());
    forked.writer.append_frame(&prompt("go on")).unwrap();
    assert_eq!(
        std::fs::read(&old).unwrap(),
        before,
        "the old file is untouched"
    );

    let new_path = store.session_path(cwd, &forked.session_id);
    let raw = lines(&new_path);
    assert_eq!(raw[0]["session_id"], forked.session_id.as_str());
    assert_eq!(raw[0]["forked_from"]["session_id"], SID);
    // (The last record is the test's own prompt frame.)
    for r in &raw[1..raw.len() - 1] {
        assert_eq!(r["sessionId"], forked.session_id.as_str());
        if r["type"] == "keel-frame" {
            assert_eq!(r["frame"]["session_id"], forked.session_id.as_str());
        }
    }
    // Self-contained: the copy reads back to the same conversation without any repair.
    let loaded = read_file(&new_path).unwrap();
    let copied = &loaded.records[..loaded.records.len() - 1];
    let r = rebuild(copied.to_vec(), &forked.session_id);
    assert!(r.repairs.is_empty());
    let json = |m: &[keel_protocol::ApiMessage]| serde_json::to_value(m).unwrap();
    assert_eq!(
        json(&r.history.messages()),
        json(&forked.history.messages())
    );

    // --session-id for the fork.
    let id = "22222222-2222-4222-8222-222222222222";
    req.session_id = Some(id.into());
    assert_eq!(store.open(&req).unwrap().session_id, id);
}

#[test]
fn ids_that_exist_or_are_unknown_or_malformed_are_clear_errors() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let store = Store::new(home.path());
    write_all(&store.session_path(cwd, SID), &exchange());

    let mut req = open_req(cwd, Start::New);
    req.session_id = Some(SID.to_uppercase());
    let e = store.open(&req).unwrap_err();
    assert!(matches!(e, OpenError::Exists { .. }), "{e}");
    assert!(e.to_string().contains(SID), "{e}");

    let unknown = "33333333-3333-4333-8333-333333333333";
    let e = store
        .open(&open_req(cwd, Start::Resume(unknown.into())))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(unknown) && msg.contains(&store.project_dir(cwd).display().to_string()),
        "{msg}"
    );

    // Known under another directory: the message says which.
    let e = store
        .open(&open_req(
            Path::new("/elsewhere"),
            Start::Resume(SID.into()),
        ))
        .unwrap_err();
    assert!(e.to_string().contains("belongs to the directory /w"), "{e}");

    let e = store
        .open(&open_req(cwd, Start::Resume("../../etc/passwd".into())))
        .unwrap_err();
    assert!(matches!(e, OpenError::NotAnId { .. }), "{e}");

    let e = store
        .open(&open_req(Path::new("/nothing-here"), Start::Continue))
        .unwrap_err();
    assert!(matches!(e, OpenError::NothingToContinue { .. }), "{e}");
}

#[test]
fn continue_takes_the_most_recent_session_of_the_directory() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let store = Store::new(home.path());
    let ids = [
        "44444444-4444-4444-8444-444444444444",
        SID,
        "55555555-5555-4555-8555-555555555555",
    ];
    for (i, id) in ids.iter().enumerate() {
        let p = store.session_path(cwd, id);
        write_all(&p, &exchange());
        let t =
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }
    // The newest: ids[2]. Touch ids[0] to make it the newest.
    let p0 = store.session_path(cwd, ids[0]);
    std::fs::File::options()
        .write(true)
        .open(&p0)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let opened = store.open(&open_req(cwd, Start::Continue)).unwrap();
    assert_eq!(opened.session_id, ids[0]);
    drop(opened);

    let listed: Vec<String> = store
        .list(Some(cwd))
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(listed, [ids[0], ids[2], ids[1]]);
    let s = &store.list(Some(cwd))[0];
    assert_eq!(s.messages, 4);
    assert!(s.ended_cleanly);
    assert_eq!(s.first_prompt.as_deref(), Some("list the files"));
    assert!(store.list(Some(Path::new("/other"))).is_empty());
    assert_eq!(store.list(None).len(), 3);
}

#[test]
fn a_session_in_use_cannot_be_resumed_twice() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let store = Store::new(home.path());
    write_all(&store.session_path(cwd, SID), &exchange());
    let first = store
        .open(&open_req(cwd, Start::Resume(SID.into())))
        .unwrap();
    let e = store
        .open(&open_req(cwd, Start::Resume(SID.into())))
        .unwrap_err();
    assert!(matches!(e, OpenError::InUse { .. }), "{e}");
    assert!(e.to_string().contains("--fork-session"));
    // A fork only reads it.
    let mut req = open_req(cwd, Start::Resume(SID.into()));
    req.fork = true;
    assert!(store.open(&req).is_ok());
    drop(first);
    assert!(store
        .open(&open_req(cwd, Start::Resume(SID.into())))
        .is_ok());
}

#[test]
fn an_unwritable_location_fails_every_append_naming_the_file_and_the_os_error() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let path = blocker.join("projects").join("s.jsonl");
    let w = writer(&path);
    let e = w.append_frame(&init()).unwrap_err();
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    assert!(e.to_string().contains("Not a directory"), "{e}");
    // The kind survives, for a caller that must tell a full disk from a permission error.
    assert_eq!(e.op, crate::emit::PersistOp::Create);
    assert_eq!(e.io, Some(std::io::ErrorKind::NotADirectory));
    assert_eq!(e.path.as_deref(), Some(path.parent().unwrap()));
    assert!(w.append_frame(&result_frame()).is_err());
}

#[test]
fn a_full_disk_and_a_refused_directory_are_told_apart() {
    // /dev/full accepts the open and refuses every write with ENOSPC.
    let full = std::path::Path::new("/dev/full");
    let e = std::io::Write::write_all(
        &mut std::fs::OpenOptions::new().write(true).open(full).unwrap(),
        b"x",
    )
    .unwrap_err();
    let disk = crate::emit::PersistError::io(crate::emit::PersistOp::Write, full, &e, "full");
    assert_eq!(disk.io, Some(std::io::ErrorKind::StorageFull));
    // A directory the writer may not enter (as root nothing is refused: skip that half).
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
    let w = writer(&locked.join("sub").join("s.jsonl"));
    match w.append_frame(&init()) {
        Err(e) => assert_eq!(e.io, Some(std::io::ErrorKind::PermissionDenied), "{e}"),
        Ok(()) => assert!(
            nix::unistd::geteuid().is_root(),
            "only root may write there"
        ),
    }
}

#[test]
fn slugs_are_deterministic_and_bounded() {
    assert_eq!(slug(Path::new("/work/main")), "-work-main");
    assert_eq!(slug(Path::new("/a b/c.d_e")), "-a-b-c-d-e");
    let long = PathBuf::from(format!("/{}", "x".repeat(400)));
    let s = slug(&long);
    assert!(s.len() < 230);
    assert_eq!(s, slug(&long));
    assert_ne!(s, slug(&PathBuf::from(format!("/{}", "x".repeat(401)))));
    assert_eq!(FsyncMode::parse("message"), Some(FsyncMode::Message));
    assert_eq!(FsyncMode::parse("always"), None);
}

#[test]
fn a_file_torn_inside_its_header_starts_again_with_a_header() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let store = Store::new(home.path());
    let path = store.session_path(cwd, SID);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, br#"{"type":"session","schema":1,"keel_ver"#).unwrap();
    let opened = store
        .open(&open_req(cwd, Start::Resume(SID.into())))
        .unwrap();
    assert!(opened.history.is_empty());
    assert_eq!(opened.notices[0].kind, NoticeKind::TornTail);
    opened.writer.append_frame(&prompt("hello")).unwrap();
    let raw = lines(&path);
    assert_eq!(raw.len(), 2);
    assert_eq!(raw[0]["type"], "keel-session");
    assert_eq!(raw[0]["session_id"], SID);
    assert_eq!(raw[1]["parentUuid"], Value::Null);
}

#[test]
fn a_zero_byte_transcript_is_reported_not_resumed_as_an_empty_session() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let store = Store::new(home.path());
    let path = store.session_path(cwd, SID);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "").unwrap();
    for start in [Start::Resume(SID.into()), Start::Continue] {
        let e = store.open(&open_req(cwd, start)).unwrap_err();
        assert!(matches!(e, OpenError::Empty { .. }), "{e}");
        assert!(
            e.to_string().contains("0 bytes") && e.to_string().contains(SID),
            "{e}"
        );
    }
    let mut fork = open_req(cwd, Start::Resume(SID.into()));
    fork.fork = true;
    assert!(matches!(
        store.open(&fork).unwrap_err(),
        OpenError::Empty { .. }
    ));
}

/// A subagent's frame (not part of the main conversation).
fn sub_frame(parent: &str) -> Frame {
    frame(
        json!({"type":"assistant","message":{"id":"msg_sub","type":"message","role":"assistant",
        "model":"m","content":[text("sub")],"stop_reason":null,"stop_sequence":null,"usage":{}},
        "parent_tool_use_id":parent,"session_id":SID,"uuid":crate::ids::new_uuid()}),
    )
}

/// A varied session: exchanges, a paused reply that goes on, an unanswered call followed by a
/// prompt, a result for an unknown call, a subagent's frame, blank text, and a call left open
/// at the end.
pub(super) fn varied(turns: usize, result_bytes: usize) -> Vec<Frame> {
    let mut out = Vec::new();
    let big = "x".repeat(result_bytes);
    for t in 0..turns {
        out.push(init());
        out.push(prompt(&format!("turn {t}")));
        let m = format!("msg_{t}");
        out.push(assistant(&m, text("Working.")));
        out.push(assistant(&m, call(&format!("t{t}a"))));
        out.push(sub_frame(&format!("t{t}a")));
        out.push(result_of(&format!("t{t}a"), &big));
        match t % 4 {
            0 => out.push(assistant(&format!("{m}_b"), text("Done."))),
            1 => {
                // A reply without calls, continued by another (merged into one message).
                out.push(assistant(&format!("{m}_b"), text("Part one.")));
                out.push(assistant(&format!("{m}_c"), text("Part two.")));
            }
            2 => {
                // A call never answered: the next prompt goes on without it.
                out.push(assistant(&format!("{m}_b"), call(&format!("t{t}lost"))));
                out.push(result_of("nobody-called-this", "stray"));
            }
            _ => out.push(prompt("   ")),
        }
        out.push(result_frame());
        if t == turns / 2 {
            // A compaction: the conversation goes on from its messages.
            out.push(frame(json!({"type":"system","subtype":"compacted_history",
                "messages":[
                    {"role":"user","content":[{"type":"text","text":"summary so far"}]},
                    {"role":"assistant","content":[{"type":"text","text":"noted"}]}],
                "session_id":SID,"uuid":crate::ids::new_uuid()})));
        }
    }
    out.push(prompt("last"));
    out.push(assistant("msg_end", call("t_open")));
    out
}

fn request_bytes(h: &crate::history::History) -> String {
    serde_json::to_string(&h.request_messages()).unwrap()
}

fn record_list(frames: Vec<Frame>) -> Vec<Record> {
    frames
        .into_iter()
        .enumerate()
        .map(|(i, frame)| Record {
            line: i + 2,
            uuid: frame.uuid().unwrap_or_default().to_owned(),
            parent_uuid: None,
            session_id: SID.into(),
            timestamp: None,
            frame,
        })
        .collect()
}

/// A rebuild saved at any record boundary and taken up again gives what one pass gives.
#[test]
fn a_rebuild_taken_up_from_its_state_equals_one_pass() {
    let records = record_list(varied(9, 40));
    let whole = rebuild_history(records.clone(), SID);
    assert!(request_bytes(&whole.history).contains("summary so far"));
    assert!(!request_bytes(&whole.history).contains("turn 0\""));
    let mut saved = 0;
    for k in 0..=records.len() {
        let mut r = Rebuilder::new(SID, false);
        records[..k].iter().cloned().for_each(|rec| r.push(rec));
        let Some(state) = r.state() else { continue };
        saved += 1;
        let mut again = Rebuilder::from_state(SID, state).expect("a state taken up");
        records[k..].iter().cloned().for_each(|rec| again.push(rec));
        let again = again.finish();
        assert_eq!(
            request_bytes(&again.history),
            request_bytes(&whole.history),
            "cut at {k}"
        );
        assert_eq!(again.first_prompt, whole.first_prompt, "cut at {k}");
        assert_eq!(again.missing_prompt, whole.missing_prompt, "cut at {k}");
    }
    assert!(
        saved > 20,
        "states could be saved at {saved} boundaries only"
    );
}

/// A long transcript gets a checkpoint at its first resume; the next resume reads only what came
/// after it and rebuilds the same conversation as a full read; a checkpoint that no longer
/// matches its transcript, or is damaged, is passed over.
#[test]
fn resumes_from_a_checkpoint_equal_full_reads_and_bad_checkpoints_are_ignored() {
    let home = tempfile::tempdir().unwrap();
    let store = Store::new(home.path());
    let cwd = Path::new("/w");
    let path = store.session_path(cwd, SID);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // ~1.4 MB: past the size from which checkpoints are kept.
    let mut frames = varied(41, 35_000);
    frames.truncate(frames.len() - 2);
    write_all(&path, &frames);
    assert!(std::fs::metadata(&path).unwrap().len() >= checkpoint::MIN_TRANSCRIPT);
    let open = || {
        store
            .open(&OpenRequest {
                cwd,
                model: "m",
                fsync: FsyncMode::Turn,
                start: Start::Resume(SID.into()),
                fork: false,
                session_id: None,
            })
            .unwrap()
    };
    let full = |p: &Path| rebuild_history(read_file(p).unwrap().records, SID);
    let first = open();
    assert_eq!(
        request_bytes(&first.history),
        request_bytes(&full(&path).history)
    );
    // The first resume writes its checkpoint in the background: wait for it.
    checkpoint::at_exit();
    let cp = checkpoint::path_for(&path);
    assert!(cp.is_file(), "the first resume left a checkpoint");
    // More records after the checkpoint, ending with a call left open.
    for f in &varied(3, 100) {
        first.writer.append_frame(f).unwrap();
    }
    first.writer.sync_now().unwrap();
    drop(first);
    let expected = full(&path);
    let second = open();
    assert_eq!(
        request_bytes(&second.history),
        request_bytes(&expected.history)
    );
    assert_eq!(second.history.len(), expected.history.len());
    // The open call was repaired from the tail alone.
    assert!(second
        .notices
        .iter()
        .any(|n| n.tool_use_ids.contains(&"t_open".to_string()) || n.message.contains("t_open")));
    drop(second);
    checkpoint::at_exit();

    // A checkpoint whose record is no longer where it says (the file was replaced by another
    // session's) is passed over.
    let saved = std::fs::read_to_string(&cp).unwrap();
    let mut lines: Vec<String> = saved.lines().map(str::to_owned).collect();
    let mut head: Value = serde_json::from_str(&lines[0]).unwrap();
    head["at"]["uuid"] = json!("not-the-record-there");
    lines[0] = head.to_string();
    // Everything else holds together: only the record it names is not there.
    lines[1] = r#"{"role":"user","content":"from a stale checkpoint"}"#.into();
    std::fs::write(&cp, lines.join("\n") + "\n").unwrap();
    let third = open();
    let now = full(&path);
    assert_eq!(request_bytes(&third.history), request_bytes(&now.history));
    assert!(!request_bytes(&third.history).contains("stale checkpoint"));
    drop(third);
    checkpoint::at_exit();
    // A damaged checkpoint too.
    std::fs::write(&cp, b"{\"version\":1,\"session_id\":").unwrap();
    let fourth = open();
    assert_eq!(
        request_bytes(&fourth.history),
        request_bytes(&full(&path).history)
    );
    drop(fourth);
    // That full read left a new checkpoint, and the next resume starts from it (what it holds
    // is what the model is sent: marked here to tell).
    checkpoint::at_exit();
    let text = std::fs::read_to_string(&cp).unwrap();
    assert!(text.contains("summary so far"));
    std::fs::write(&cp, text.replace("summary so far", "summary SO FAR")).unwrap();
    let fifth = open();
    assert!(request_bytes(&fifth.history).contains("summary SO FAR"));
}
