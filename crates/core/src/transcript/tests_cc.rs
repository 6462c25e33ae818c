//! Unit tests of Claude Code's format: project keys as the SDKs compute them, entries Claude
//! Code wrote, entries keel cannot map, and a crash at every point of a transcript.

use std::path::Path;

use keel_protocol::{ContentBlock, Role};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::*;

const SID: &str = "33333333-3333-4333-8333-333333333333";

/// `[path, key]` pairs computed by the Python SDK's own project-key function.
const KEYS: &str = include_str!("testdata/project-keys.json");

#[test]
fn project_keys_equal_the_sdks_for_long_and_non_ascii_paths() {
    let table: Vec<(String, String)> = serde_json::from_str(KEYS).unwrap();
    assert!(table.len() >= 8);
    for (path, key) in table {
        assert_eq!(slug(Path::new(&path)), key, "{path}");
    }
}

#[test]
fn the_string_hash_is_javascripts() {
    // Values of `h = (h << 5) - h + c | 0`, absolute, base 36.
    assert_eq!(string_hash(""), "0");
    assert_eq!(string_hash("a"), "2p");
    assert_eq!(string_hash("hello"), "1n1e4y");
}

/// One Claude Code entry line.
fn cc(kind: &str, uuid: &str, parent: Option<&str>, message: Value) -> String {
    json!({"parentUuid": parent, "isSidechain": false, "type": kind, "message": message,
        "uuid": uuid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w", "sessionId": SID,
        "version": "2.1.332", "userType": "external"})
    .to_string()
}

/// A session as Claude Code writes it: bookkeeping entries, attachments between messages, a
/// prompt as a string, one entry per content block, a tool result with blocks.
fn cc_session() -> String {
    let lines = [
        json!({"type":"queue-operation","operation":"enqueue","sessionId":SID}).to_string(),
        cc(
            "user",
            "u1",
            None,
            json!({"role":"user","content":"list files"}),
        ),
        json!({"parentUuid":"u1","isSidechain":false,"type":"attachment","uuid":"at1",
            "attachment":{"type":"date","date":"2026-01-01"},"sessionId":SID})
        .to_string(),
        cc(
            "assistant",
            "a1",
            Some("at1"),
            json!({"id":"msg_1","type":"message","role":"assistant",
            "model":"m","content":[{"type":"text","text":"Looking."}],"stop_reason":null,
            "stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}),
        ),
        cc(
            "assistant",
            "a2",
            Some("a1"),
            json!({"id":"msg_1","type":"message","role":"assistant",
            "model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}],
            "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}),
        ),
        cc(
            "user",
            "u2",
            Some("a2"),
            json!({"role":"user","content":[{"type":"tool_result",
            "tool_use_id":"toolu_1","content":[{"type":"text","text":"a.txt"}]}]}),
        ),
        json!({"type":"system","subtype":"informational","uuid":"s0","parentUuid":"u2",
            "content":"something Claude Code showed","sessionId":SID})
        .to_string(),
        cc(
            "assistant",
            "a3",
            Some("s0"),
            json!({"id":"msg_2","type":"message","role":"assistant",
            "model":"m","content":[{"type":"text","text":"One file."}],"stop_reason":"end_turn",
            "stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}),
        ),
        // A compaction: the model sees the summary and what follows, not what came before.
        json!({"type":"system","subtype":"compact_boundary","uuid":"s1","parentUuid":null,
            "logicalParentUuid":"a3","content":"Conversation compacted","sessionId":SID})
        .to_string(),
        cc(
            "user",
            "u3",
            Some("s1"),
            json!({"role":"user","content":"Summary: one file, a.txt."}),
        ),
        cc(
            "assistant",
            "a4",
            Some("u3"),
            json!({"id":"msg_3","type":"message","role":"assistant",
            "model":"m","content":[{"type":"text","text":"Noted."}],"stop_reason":"end_turn",
            "stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}),
        ),
        json!({"type":"last-prompt","lastPrompt":"list files","sessionId":SID}).to_string(),
    ];
    lines.join("\n") + "\n"
}

fn open_resume(store: &Store, cwd: &Path) -> Opened {
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
}

#[test]
fn a_session_claude_code_wrote_rebuilds_to_its_messages_and_names_what_it_skipped() {
    let home = tempfile::tempdir().unwrap();
    let cwd = Path::new("/w");
    let store = Store::new(home.path());
    let path = store.session_path(cwd, SID);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, cc_session()).unwrap();
    let opened = open_resume(&store, cwd);
    let msgs: Vec<Value> = opened
        .history
        .messages()
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect();
    assert_eq!(
        msgs,
        vec![
            json!({"role":"user","content":[{"type":"text","text":"Summary: one file, a.txt."}]}),
            json!({"role":"assistant","content":[{"type":"text","text":"Noted."}]}),
        ]
    );
    // Before the compaction: the messages as Claude Code had them.
    let loaded = read_file(&path).unwrap();
    let upto: Vec<Record> = loaded
        .records
        .into_iter()
        .take_while(|r| r.uuid != "s1")
        .collect();
    let msgs: Vec<Value> = rebuild(upto, SID)
        .history
        .messages()
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect();
    assert_eq!(
        msgs,
        vec![
            json!({"role":"user","content":[{"type":"text","text":"list files"}]}),
            json!({"role":"assistant","content":[{"type":"text","text":"Looking."},
                {"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}),
            json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",
                "content":[{"type":"text","text":"a.txt"}]}]}),
            json!({"role":"assistant","content":[{"type":"text","text":"One file."}]}),
        ]
    );
    let unmapped: Vec<(&str, Option<usize>)> = opened
        .notices
        .iter()
        .filter(|n| n.kind == NoticeKind::UnmappedEntry)
        .map(|n| (n.entry_type.as_deref().unwrap(), n.line))
        .collect();
    assert_eq!(unmapped, [("attachment", Some(3)), ("system", Some(7))]);
    assert_eq!(opened.notices.len(), 2, "{:?}", opened.notices);
    let f = opened.notices[0].fields();
    assert_eq!(f["entry_type"], "attachment");
    assert_eq!(f["kind"], "unmapped_entry");

    // keel goes on in the same chain: its first message hangs off Claude Code's last.
    let before = std::fs::read(&path).unwrap();
    let prompt: keel_protocol::Frame = serde_json::from_value(json!({"type":"user",
        "message":{"role":"user","content":[{"type":"text","text":"next"}]},
        "parent_tool_use_id":null,"session_id":SID,"uuid":"k1"}))
    .unwrap();
    opened.writer.append_frame(&prompt).unwrap();
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after[..before.len()], before[..], "nothing rewritten");
    let last: Value = serde_json::from_slice(after[before.len()..].trim_ascii()).unwrap();
    assert_eq!(last["parentUuid"], "a4");
    assert_eq!(last["message"]["content"], "next");
}

/// Write `n` turns the way keel does: a prompt, a reply with a call, its result, a text.
fn keel_session(path: &Path, turns: usize) {
    let header = SessionHeader::new(SID, Path::new("/w"), "m");
    let w =
        TranscriptWriter::create_lazily(path.to_owned(), &header, &[], FsyncMode::Turn).unwrap();
    let f = |v: Value| -> keel_protocol::Frame { serde_json::from_value(v).unwrap() };
    for t in 0..turns {
        let u = |s: &str| format!("{s}-{t}");
        w.append_frame(&f(json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":u("prompt")}]},
            "parent_tool_use_id":null,"session_id":SID,"uuid":u("p")})))
            .unwrap();
        w.append_frame(&f(json!({"type":"assistant","message":{"id":u("m1"),"type":"message","role":"assistant",
            "model":"m","content":[{"type":"tool_use","id":u("call"),"name":"Bash","input":{"command":"ls"}}],
            "stop_reason":"tool_use","stop_sequence":null,"usage":{}},"parent_tool_use_id":null,"session_id":SID,"uuid":u("a1")})))
            .unwrap();
        w.append_frame(&f(json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":u("call"),"content":"ok"}]},
            "parent_tool_use_id":null,"session_id":SID,"uuid":u("r")})))
            .unwrap();
        w.append_frame(&f(json!({"type":"assistant","message":{"id":u("m2"),"type":"message","role":"assistant",
            "model":"m","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{}},
            "parent_tool_use_id":null,"session_id":SID,"uuid":u("a2")})))
            .unwrap();
        w.append_frame(&f(
            json!({"type":"result","subtype":"success","is_error":false,"duration_ms":1,
            "duration_api_ms":1,"num_turns":1,"result":"done","session_id":SID,"total_cost_usd":0.0,
            "usage":{},"modelUsage":{},"permission_denials":[],"uuid":u("res")}),
        ))
        .unwrap();
    }
    w.sync_now().unwrap();
}

#[test]
fn a_crash_at_any_point_of_a_transcript_still_resumes_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let full_path = dir.path().join("full.jsonl");
    keel_session(&full_path, 2);
    let full = std::fs::read(&full_path).unwrap();
    // Every record boundary, and the middle of every record (a torn append).
    let mut cuts = vec![full.len()];
    let mut start = 0;
    for (i, b) in full.iter().enumerate() {
        if *b == b'\n' {
            cuts.push(start + (i - start) / 2);
            cuts.push(i + 1);
            start = i + 1;
        }
    }
    let cwd = Path::new("/w");
    for cut in cuts {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let path = store.session_path(cwd, SID);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &full[..cut]).unwrap();
        if cut == 0 {
            continue;
        }
        let opened = open_resume(&store, cwd);
        let roles: Vec<Role> = opened.history.messages().iter().map(|m| m.role).collect();
        if let Some(first) = roles.first() {
            assert_eq!(*first, Role::User, "cut {cut}");
        }
        assert!(
            roles.windows(2).all(|w| w[0] != w[1]),
            "cut {cut}: {roles:?}"
        );
        // Every call has its result (a real one, or the repair that says the session ended).
        let msgs = opened.history.messages();
        for (i, m) in msgs.iter().enumerate() {
            for b in m.content.blocks() {
                if let ContentBlock::ToolUse(t) = b {
                    let answered = msgs.get(i + 1).is_some_and(|n| {
                        n.content.blocks().iter().any(
                            |b| matches!(b, ContentBlock::ToolResult(r) if r.tool_use_id == t.id),
                        )
                    });
                    assert!(answered, "cut {cut}: call {} unanswered", t.id);
                }
            }
        }
        // The file reads back clean after the next append, and the chain holds.
        let next: keel_protocol::Frame = serde_json::from_value(json!({"type":"user",
            "message":{"role":"user","content":[{"type":"text","text":"again"}]},
            "parent_tool_use_id":null,"session_id":SID,"uuid":"again"}))
        .unwrap();
        opened.writer.append_frame(&next).unwrap();
        drop(opened);
        let loaded = read_file(&path).unwrap();
        assert!(
            loaded.issues.is_empty() && loaded.torn.is_none(),
            "cut {cut}"
        );
        let entries: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|e: &Value| e["type"] == "user" || e["type"] == "assistant")
            .collect();
        for w in entries.windows(2) {
            assert_eq!(w[1]["parentUuid"], w[0]["uuid"], "cut {cut}");
        }
    }
}
