//! Branched Claude Code transcripts: `--resume` sends the model the branch of the newest
//! message (the `parentUuid` walk from the leaf), as Claude Code does; a compaction starts
//! the history at its boundary; a cycle or a missing parent is told and the history stays
//! well-defined. docs/sessions.md ("Which history a branched file resumes with") describes it.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::common::{Harness, Run};

/// The rewind fixture: a second prompt asked, answered, rewound and asked again.
const REWIND_SID: &str = "b1a2c3d4-0001-4000-8000-000000000001";
/// The compaction fixture.
const COMPACT_SID: &str = "b1a2c3d4-0002-4000-8000-000000000002";
/// The working directory the fixtures name.
const CC_CWD: &str = "/home/user/project";

const ANSWER: &str = r#"{"steps":[{"kind":"text","text":"Resumed."}]}"#;

fn fixture(sid: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-code-branches")
        .join(format!("{sid}.jsonl"));
    std::fs::read_to_string(path).unwrap()
}

/// Write `text` (a fixture, maybe edited) as session `sid` of the harness's directory.
fn install(h: &Harness, sid: &str, text: &str) -> PathBuf {
    let dir = h
        .keel_home()
        .join("projects")
        .join(keel_core::transcript::slug(h.cwd()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{sid}.jsonl"));
    let shown = h.cwd().display().to_string();
    std::fs::write(&path, text.replace(CC_CWD, &shown)).unwrap();
    path
}

async fn resume(h: &Harness, sid: &str) -> Run {
    let run = h
        .run(
            &[
                "-p",
                "what next?",
                "--output-format",
                "stream-json",
                "--verbose",
                "--resume",
                sid,
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    run
}

/// The messages of the first request, without keel's cache markers.
fn sent(h: &Harness) -> Vec<Value> {
    let reqs = h.requests();
    let mut msgs = reqs[0].body["messages"].as_array().unwrap().clone();
    for m in &mut msgs {
        if let Some(blocks) = m["content"].as_array_mut() {
            for b in blocks.iter_mut().filter_map(Value::as_object_mut) {
                b.remove("cache_control");
            }
        }
    }
    msgs
}

fn text(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

/// The first turn both fixtures begin with (Claude Code's own entries).
fn first_turn() -> Vec<Value> {
    vec![
        json!({"role":"user","content":text("Use the Agent tool exactly once with subagent_type 'greeter', prompt 'say hi', and run_in_background set to false. Then reply with the single word DONE.")}),
        json!({"role":"assistant","content":[{"type":"tool_use","id":"toolu_mock_1","name":"Task",
            "input":{"description":"Greet","prompt":"say hi","subagent_type":"greeter","run_in_background":false}}]}),
        json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_mock_1",
            "content":[{"type":"text","text":"Subagent report: Hi there, nice to meet you!"}]}]}),
        json!({"role":"assistant","content":text("DONE")}),
    ]
}

fn warnings<'a>(run: &'a Run, kind: &str) -> Vec<&'a Value> {
    run.frames
        .iter()
        .filter(|f| f["type"] == "system" && f["subtype"] == "warning" && f["kind"] == kind)
        .collect()
}

#[tokio::test]
async fn a_rewound_session_resumes_with_the_newest_branch_only() {
    let h = Harness::from_json(ANSWER).await;
    let path = install(&h, REWIND_SID, &fixture(REWIND_SID));
    let run = resume(&h, REWIND_SID).await;
    let mut want = first_turn();
    want.push(json!({"role":"user","content":text("Now reply with the single word GREEN.")}));
    want.push(json!({"role":"assistant","content":text("GREEN")}));
    want.push(json!({"role":"user","content":text("what next?")}));
    assert_eq!(sent(&h), want, "the GREEN branch, never the BLUE one");
    // What was left out is said, not dropped silently.
    let other = warnings(&run, "other_branches");
    assert_eq!(other.len(), 1, "{:#?}", run.frames);
    assert!(
        other[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("2 messages"),
        "{}",
        other[0]["message"]
    );
    // keel's prompt continues the resumed branch.
    let entries: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let green = entries
        .iter()
        .find(|e| e["message"]["content"] == json!([{"type":"text","text":"GREEN"}]))
        .unwrap();
    let mine = entries
        .iter()
        .find(|e| e["type"] == "user" && e["message"]["content"] == "what next?")
        .expect("keel's prompt in the file");
    assert_eq!(mine["parentUuid"], green["uuid"]);
}

#[tokio::test]
async fn a_compacted_session_resumes_from_its_boundary() {
    let h = Harness::from_json(ANSWER).await;
    install(&h, COMPACT_SID, &fixture(COMPACT_SID));
    let run = resume(&h, COMPACT_SID).await;
    assert_eq!(
        sent(&h),
        [
            json!({"role":"user","content":[
                {"type":"text","text":"This session is being continued from a previous conversation. Summary: the user asked for a greeting through a subagent, then for the word BLUE."},
                {"type":"text","text":"Now reply with the single word RED."}]}),
            json!({"role":"assistant","content":text("RED")}),
            json!({"role":"user","content":text("what next?")}),
        ],
        "the summary and what follows it, nothing from before the boundary"
    );
    // What came before the boundary was compacted, not abandoned.
    assert!(warnings(&run, "other_branches").is_empty());
}

/// The rewind fixture with one entry's `parentUuid` replaced.
fn with_parent(sid: &str, uuid: &str, parent: &str) -> String {
    fixture(sid)
        .lines()
        .map(|l| {
            let mut e: Value = serde_json::from_str(l).unwrap();
            if e["uuid"] == uuid {
                e["parentUuid"] = json!(parent);
            }
            e.to_string() + "\n"
        })
        .collect()
}

/// The GREEN prompt's entry, and the attachment after it.
const GREEN_PROMPT: &str = "5eed0000-0000-4000-8000-000000000004";
const GREEN_ATTACHMENT: &str = "5eed0000-0000-4000-8000-000000000005";

#[tokio::test]
async fn a_cycle_is_told_and_the_history_starts_where_it_closes() {
    let h = Harness::from_json(ANSWER).await;
    // The GREEN prompt names its own attachment as parent: GREEN ← attachment ← prompt ← ...
    install(
        &h,
        REWIND_SID,
        &with_parent(REWIND_SID, GREEN_PROMPT, GREEN_ATTACHMENT),
    );
    let run = resume(&h, REWIND_SID).await;
    assert_eq!(
        sent(&h),
        [
            json!({"role":"user","content":text("Now reply with the single word GREEN.")}),
            json!({"role":"assistant","content":text("GREEN")}),
            json!({"role":"user","content":text("what next?")}),
        ]
    );
    let cycle = warnings(&run, "chain_cycle");
    assert_eq!(cycle.len(), 1, "{:#?}", run.frames);
    assert_eq!(cycle[0]["entry_uuid"], GREEN_PROMPT);
    assert!(cycle[0]["line"].as_u64().is_some());
}

#[tokio::test]
async fn a_dangling_parent_is_told_and_the_history_starts_at_its_entry() {
    let h = Harness::from_json(ANSWER).await;
    install(
        &h,
        REWIND_SID,
        &with_parent(
            REWIND_SID,
            GREEN_PROMPT,
            "00000000-0000-4000-8000-00000000dead",
        ),
    );
    let run = resume(&h, REWIND_SID).await;
    assert_eq!(
        sent(&h),
        [
            json!({"role":"user","content":text("Now reply with the single word GREEN.")}),
            json!({"role":"assistant","content":text("GREEN")}),
            json!({"role":"user","content":text("what next?")}),
        ]
    );
    let dangling = warnings(&run, "dangling_parent");
    assert_eq!(dangling.len(), 1, "{:#?}", run.frames);
    assert_eq!(dangling[0]["entry_uuid"], GREEN_PROMPT);
    assert!(dangling[0]["message"]
        .as_str()
        .unwrap()
        .contains("00000000-0000-4000-8000-00000000dead"));
}
