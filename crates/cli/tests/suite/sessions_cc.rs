//! Sessions in Claude Code's transcript format: a session Claude Code wrote resumes in keel
//! with the same history; keel's own sessions are Claude Code's entries; old keel-format
//! transcripts still resume and list; `CLAUDE_CONFIG_DIR` is the config root.
//! docs/sessions.md describes the behaviour tested here.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::common::Harness;

/// The session in tests/fixtures/claude-code-session (Claude Code 2.1.332's own lines; its
/// prompt texts are left out).
const CC_SID: &str = "e04bb3ab-c193-4b1f-aaec-031b7a322b2d";
/// The working directory those lines name.
const CC_CWD: &str = "/home/user/project";
/// The last message entry of that session.
const CC_LEAF: &str = "ed895276-365d-43c1-b744-c63620b21fe3";

const TEXTS: &str = r#"{"steps":[
  {"kind":"text","text":"Resumed."},
  {"kind":"text","text":"Again."},
  {"kind":"text","text":"Third."}
]}"#;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code-session")
}

/// Copy the fixture session into `projects` as a session of `cwd` (the file names the
/// directory it was recorded in; it becomes `cwd`).
fn install_cc_session(projects: &Path, cwd: &Path) -> PathBuf {
    let dir = projects.join(keel_core::transcript::slug(cwd));
    std::fs::create_dir_all(dir.join(CC_SID).join("subagents")).unwrap();
    let shown = cwd.display().to_string();
    for rel in [
        format!("{CC_SID}.jsonl"),
        format!("{CC_SID}/subagents/agent-a3b67f0cd069493cf.jsonl"),
        format!("{CC_SID}/subagents/agent-a3b67f0cd069493cf.meta.json"),
    ] {
        let text = std::fs::read_to_string(fixture_dir().join(&rel)).unwrap();
        std::fs::write(dir.join(&rel), text.replace(CC_CWD, &shown)).unwrap();
    }
    dir.join(format!("{CC_SID}.jsonl"))
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A message as the model got it, without the cache markers keel adds.
fn plain(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(blocks) = m["content"].as_array_mut() {
        for b in blocks {
            if let Some(o) = b.as_object_mut() {
                o.remove("cache_control");
            }
        }
    }
    m
}

/// The history Claude Code sends for the fixture session: its prompt, the Task call, the
/// call's result, the final text (its attachments are Claude Code's own context).
fn cc_history() -> Vec<Value> {
    vec![
        json!({"role":"user","content":[{"type":"text","text":"Use the Agent tool exactly once with subagent_type 'greeter', prompt 'say hi', and run_in_background set to false. Then reply with the single word DONE."}]}),
        json!({"role":"assistant","content":[{"type":"tool_use","id":"toolu_mock_1","name":"Task",
            "input":{"description":"Greet","prompt":"say hi","subagent_type":"greeter","run_in_background":false}}]}),
        json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_mock_1",
            "content":[{"type":"text","text":"Subagent report: Hi there, nice to meet you!"}]}]}),
        json!({"role":"assistant","content":[{"type":"text","text":"DONE"}]}),
    ]
}

#[tokio::test]
async fn a_session_claude_code_wrote_resumes_with_the_history_claude_code_sends() {
    let h = Harness::from_json(TEXTS).await;
    let path = install_cc_session(&h.keel_home().join("projects"), h.cwd());
    let before = std::fs::read(&path).unwrap();
    let run = h
        .run(
            &[
                "-p",
                "what next?",
                "--output-format",
                "stream-json",
                "--verbose",
                "--resume",
                CC_SID,
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    let sent = reqs[0].body["messages"].as_array().unwrap();
    let got: Vec<Value> = sent.iter().map(plain).collect();
    let mut want = cc_history();
    assert_eq!(
        got[..4],
        want[..],
        "the history of the session, as Claude Code sends it"
    );
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(got[4]["content"].to_string().contains("what next?"));

    // What keel does not send is said, by entry type, never dropped silently.
    let warnings: Vec<&Value> = run
        .frames
        .iter()
        .filter(|f| f["type"] == "system" && f["subtype"] == "warning")
        .filter(|f| f["kind"] == "unmapped_entry")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0]["entry_type"], "attachment");
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap()
            .contains("11 `attachment` entries"),
        "{}",
        warnings[0]["message"]
    );

    // The file is appended to, not rewritten: Claude Code's lines stay as they were, and
    // keel's first message hangs off Claude Code's last one.
    let after = std::fs::read(&path).unwrap();
    assert_eq!(after[..before.len()], before[..]);
    let added: Vec<Value> = lines(&path)[lines_of(&before)..].to_vec();
    let messages: Vec<&Value> = added
        .iter()
        .filter(|e| e["type"] == "user" || e["type"] == "assistant")
        .collect();
    assert_eq!(messages.len(), 2, "{added:#?}");
    assert_eq!(messages[0]["parentUuid"], CC_LEAF);
    assert_eq!(messages[0]["message"]["content"], "what next?");
    assert_eq!(messages[1]["parentUuid"], messages[0]["uuid"]);
    assert_eq!(messages[1]["sessionId"], CC_SID);

    // --continue finds it too, and sends everything so far.
    let run = h
        .run(
            &[
                "-p",
                "and then?",
                "--output-format",
                "stream-json",
                "--verbose",
                "--continue",
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let sent: Vec<Value> = h.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(plain)
        .collect();
    want.push(got[4].clone());
    want.push(json!({"role":"assistant","content":[{"type":"text","text":"Resumed."}]}));
    assert_eq!(sent[..6], want[..]);
    assert_eq!(run.result()["session_id"], CC_SID);
}

fn lines_of(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count()
}

/// A transcript keel wrote before it used Claude Code's format: header schema 1 and
/// `{"type":"frame"}` records.
fn old_format_session(cwd: &Path, sid: &str) -> String {
    let header = json!({"type":"session","schema":1,"keel_version":"0.9.0","session_id":sid,
        "cwd":cwd.display().to_string(),"model":"claude-sonnet-4-5","created_at":"2026-01-01T00:00:00.000Z"});
    let frames = [
        json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":"old question"}]},
            "parent_tool_use_id":null,"session_id":sid,"uuid":"00000000-0000-4000-8000-000000000001"}),
        json!({"type":"assistant","message":{"id":"msg_old","type":"message","role":"assistant",
            "model":"m","content":[{"type":"text","text":"old answer"}],"stop_reason":"end_turn",
            "stop_sequence":null,"usage":{}},"parent_tool_use_id":null,"session_id":sid,
            "uuid":"00000000-0000-4000-8000-000000000002"}),
        json!({"type":"result","subtype":"success","is_error":false,"duration_ms":1,
            "duration_api_ms":1,"num_turns":1,"result":"old answer","session_id":sid,
            "total_cost_usd":0.0,"usage":{},"modelUsage":{},"permission_denials":[],
            "uuid":"00000000-0000-4000-8000-000000000003"}),
    ];
    let mut out = format!("{header}\n");
    let mut parent = Value::Null;
    for f in frames {
        let uuid = f["uuid"].clone();
        out.push_str(&format!(
            "{}\n",
            json!({"type":"frame","uuid":uuid,"parent_uuid":parent,"session_id":sid,
                "timestamp":"2026-01-01T00:00:01.000Z","frame":f})
        ));
        parent = uuid;
    }
    out
}

#[tokio::test]
async fn an_old_keel_transcript_resumes_in_its_own_format_and_lists_as_keel_v1() {
    let h = Harness::from_json(TEXTS).await;
    let sid = "22222222-2222-4222-8222-222222222222";
    // Where keel kept it: $KEEL_HOME/projects, which is not the config root once
    // CLAUDE_CONFIG_DIR is set.
    let dir = h
        .keel_home()
        .join("projects")
        .join(keel_core::transcript::slug(h.cwd()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{sid}.jsonl"));
    let old = old_format_session(h.cwd(), sid);
    std::fs::write(&path, &old).unwrap();
    let config = h.home.path().join("config");
    let cfg = config.display().to_string();
    let env = [("CLAUDE_CONFIG_DIR", cfg.as_str())];

    let run = h
        .run(
            &[
                "-p",
                "new question",
                "--output-format",
                "stream-json",
                "--verbose",
                "--resume",
                sid,
            ],
            &env,
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let sent: Vec<Value> = h.requests()[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(plain)
        .collect();
    assert_eq!(
        sent[..2],
        [
            json!({"role":"user","content":[{"type":"text","text":"old question"}]}),
            json!({"role":"assistant","content":[{"type":"text","text":"old answer"}]}),
        ]
    );
    // Nothing rewritten in place; what was added is in the file's own format.
    let now = std::fs::read_to_string(&path).unwrap();
    assert!(now.starts_with(&old));
    let added: Vec<Value> = now[old.len()..]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!added.is_empty());
    assert!(added.iter().all(|r| r["type"] == "frame"), "{added:#?}");
    assert!(
        !config
            .join("projects")
            .join(keel_core::transcript::slug(h.cwd()))
            .join(format!("{sid}.jsonl"))
            .exists(),
        "no copy was made"
    );

    // A new session goes under the config root, in Claude Code's format; both are listed,
    // each with its format.
    let run = h
        .run(&["-p", "fresh", "--output-format", "json"], &env)
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let new_id = run.result()["session_id"].as_str().unwrap().to_owned();
    let new_path = config
        .join("projects")
        .join(keel_core::transcript::slug(h.cwd()))
        .join(format!("{new_id}.jsonl"));
    assert!(
        new_path.is_file(),
        "the new session is under CLAUDE_CONFIG_DIR"
    );
    let entries = lines(&new_path);
    let prompt = entries.iter().find(|e| e["type"] == "user").unwrap();
    assert_eq!(prompt["message"]["content"], "fresh");
    assert_eq!(prompt["parentUuid"], Value::Null);
    let listed = h.run(&["sessions", "--json"], &env).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let all: Value = serde_json::from_str(&listed.stdout).unwrap();
    let format_of = |id: &str| {
        all.as_array()
            .unwrap()
            .iter()
            .find(|s| s["session_id"] == id)
            .map(|s| s["format"].clone())
    };
    assert_eq!(format_of(sid), Some(json!("keel-v1")), "{all:#}");
    assert_eq!(format_of(&new_id), Some(json!("claude-code")), "{all:#}");
    let table = h.run(&["sessions"], &env).await;
    assert!(
        table.stdout.contains("FORMAT") && table.stdout.contains("keel-v1"),
        "{}",
        table.stdout
    );
}

#[tokio::test]
async fn claude_config_dir_holds_the_users_settings_and_state_file() {
    let h = Harness::from_json(TEXTS).await;
    let config = h.home.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    // The user's settings there apply (and ~/.claude/settings.json does not).
    std::fs::write(
        config.join("settings.json"),
        r#"{"permissions": {"deny": ["Bash"]}}"#,
    )
    .unwrap();
    let cfg = config.display().to_string();
    let run = h
        .run(
            &[
                "-p",
                "hi",
                "--output-format",
                "json",
                "--allowedTools",
                "Bash",
            ],
            &[("CLAUDE_CONFIG_DIR", cfg.as_str())],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let offered = |i: usize| -> Vec<String> {
        h.requests()[i].body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(!offered(0).contains(&"Bash".to_owned()), "{:?}", offered(0));
    let run = h
        .run(
            &[
                "-p",
                "hi",
                "--output-format",
                "json",
                "--allowedTools",
                "Bash",
            ],
            &[],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        offered(1).contains(&"Bash".to_owned()),
        "without it, the settings are not read"
    );
}
