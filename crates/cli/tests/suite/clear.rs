//! `/clear` in stream-json input, through the keel binary against keel-mock: no model request,
//! a `conversation_reset` frame under the old id, then the new session's `init` and a `result`
//! for the local command; the next turn starts from nothing, under the new id, in a new
//! transcript; the old transcript stays whole and resumable; SessionEnd / SessionStart hooks
//! say `clear`; `--session-mirror` follows the new file. Also: `initialize` reports the
//! output style in effect. docs/sessions.md and docs/sdk-protocol.md describe this.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::common::{kinds, Harness, Stream};

const STEPS: &str = r#"{"steps":[
  {"kind":"text","text":"ANSWER-ONE"},
  {"kind":"text","text":"ANSWER-TWO"},
  {"kind":"text","text":"ANSWER-THREE"}
]}"#;

/// The transcript file of session `id` under `$KEEL_HOME/projects`, if there is one.
fn transcript(h: &Harness, id: &str) -> Option<PathBuf> {
    let projects = h.keel_home().join("projects");
    std::fs::read_dir(projects)
        .ok()?
        .filter_map(|d| d.ok())
        .map(|d| d.path().join(format!("{id}.jsonl")))
        .find(|p| p.is_file())
}

fn text_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// The messages of the `i`th request keel-mock received, as text.
fn sent(h: &Harness, i: usize) -> String {
    h.requests()[i].body["messages"].to_string()
}

fn user_line(text: &str, uuid: &str) -> Value {
    json!({"type": "user", "session_id": "", "parent_tool_use_id": null, "uuid": uuid,
           "message": {"role": "user", "content": text}})
}

#[tokio::test]
async fn clear_starts_a_new_session_and_the_old_one_stays_resumable() {
    let h = Harness::from_json(STEPS).await;
    let mut s = Stream::start(&h, &[], &[]);
    s.user("FIRST-PROMPT").await;
    let first = s.result().await;
    assert_eq!(first["subtype"], "success", "{first}");
    let old = first["session_id"].as_str().unwrap().to_owned();

    let clear_uuid = "7f0c2a4e-1b9d-4c3a-8e2f-5a6b7c8d9e0f";
    s.send(user_line("/clear  ", clear_uuid)).await;
    let cleared = s.result().await;
    s.user("SECOND-PROMPT").await;
    let second = s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    // No request for /clear: one for each of the two real prompts.
    assert_eq!(h.requests().len(), 2, "{}", run.stdout);
    let new = cleared["session_id"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_eq!(cleared["subtype"], "success", "{cleared}");
    assert_eq!(cleared["is_error"], false);
    assert_eq!(cleared["num_turns"], 0);
    assert_eq!(cleared["local_command"], "clear");
    assert_eq!(cleared["result"], "");

    // The frames of the /clear turn, in order: the reset under the old id, then the new
    // session's init and the result.
    let frames = &run.frames;
    let reset_at = frames
        .iter()
        .position(|f| f["type"] == "conversation_reset")
        .unwrap_or_else(|| panic!("no conversation_reset: {:?}", kinds(frames)));
    let reset = &frames[reset_at];
    assert_eq!(reset["session_id"], old.as_str(), "{reset}");
    assert_eq!(reset["new_conversation_id"], new.as_str(), "{reset}");
    assert_eq!(reset["uuid"], new.as_str(), "{reset}");
    assert_eq!(reset["trigger"], "clear");
    assert_eq!(reset["user_message_uuid"], clear_uuid);
    assert!(reset["timestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    let after: Vec<&Value> = frames[reset_at + 1..].iter().collect();
    let init = after
        .iter()
        .position(|f| f["type"] == "system" && f["subtype"] == "init")
        .expect("an init after the reset");
    let result = after
        .iter()
        .position(|f| f["type"] == "result")
        .expect("a result after the reset");
    assert!(init < result, "{:?}", kinds(frames));
    assert_eq!(after[init]["session_id"], new.as_str());
    assert!(
        frames[..reset_at]
            .iter()
            .all(|f| f["session_id"].is_null() || f["session_id"] == old.as_str()),
        "only the old id before the reset"
    );
    assert!(
        after
            .iter()
            .all(|f| f["session_id"].is_null() || f["session_id"] == new.as_str()),
        "only the new id after the reset: {after:?}"
    );
    // Exactly one result per turn.
    assert_eq!(run.of("result").len(), 3, "{:?}", kinds(frames));
    assert_eq!(second["session_id"], new.as_str());
    // The new session's results count its own cost, from zero (the SDKs read it that way).
    let cost = |r: &Value| r["total_cost_usd"].as_f64().unwrap();
    assert_eq!(cost(&cleared), 0.0, "{cleared}");
    assert!(cost(&first) > 0.0, "{first}");
    // Two requests of the same size: the second session's total is one of them, not both.
    assert!(cost(&second) < cost(&first) * 1.5, "{first}\n{second}");

    // The next turn saw nothing of the old conversation.
    let req2 = sent(&h, 1);
    assert!(req2.contains("SECOND-PROMPT"), "{req2}");
    assert!(!req2.contains("FIRST-PROMPT"), "{req2}");
    assert!(!req2.contains("ANSWER-ONE"), "{req2}");
    assert!(!req2.contains("/clear"), "{req2}");

    // Two transcripts: the old one whole, the new one with only the new conversation.
    let old_file = transcript(&h, &old).expect("the old transcript");
    let new_file = transcript(&h, &new).expect("the new transcript");
    assert_eq!(old_file.parent(), new_file.parent());
    let (o, n) = (text_of(&old_file), text_of(&new_file));
    assert!(
        o.contains("FIRST-PROMPT") && o.contains("ANSWER-ONE"),
        "{o}"
    );
    assert!(!o.contains("SECOND-PROMPT"), "{o}");
    assert!(
        n.contains("SECOND-PROMPT") && n.contains("ANSWER-TWO"),
        "{n}"
    );
    assert!(
        !n.contains("FIRST-PROMPT") && !n.contains("ANSWER-ONE"),
        "{n}"
    );
    for line in n.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(sid) = v["sessionId"].as_str().or(v["session_id"].as_str()) {
            assert_eq!(sid, new, "{line}");
        }
    }

    // The old session resumes with its own history, and only that.
    let resumed = h.run_stream("THIRD-PROMPT", &["--resume", &old], &[]).await;
    resumed.assert_end("success", false, "completed", 0);
    let req3 = sent(&h, 2);
    assert!(
        req3.contains("FIRST-PROMPT") && req3.contains("ANSWER-ONE"),
        "{req3}"
    );
    assert!(!req3.contains("SECOND-PROMPT"), "{req3}");
}

#[tokio::test]
async fn clear_as_the_first_line_makes_no_request_and_the_run_ends_cleanly() {
    let h = Harness::from_json(STEPS).await;
    let mut s = Stream::start(&h, &[], &[]);
    s.user("/clear").await;
    let cleared = s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(h.requests().is_empty());
    assert_eq!(cleared["local_command"], "clear");
    assert_eq!(run.of("result").len(), 1);
    assert_eq!(run.of("conversation_reset").len(), 1);
    // Words that only start like the command are a prompt.
    let h2 = Harness::from_json(STEPS).await;
    let mut s = Stream::start(&h2, &[], &[]);
    s.user("/clearly a prompt").await;
    let r = s.result().await;
    s.finish().await;
    assert!(r["local_command"].is_null(), "{r}");
    assert_eq!(h2.requests().len(), 1);
}

/// Write the project settings file with `settings`.
fn project_settings(dir: &Path, settings: Value) {
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    std::fs::write(dir.join(".claude/settings.json"), settings.to_string()).unwrap();
}

fn logged(dir: &Path, name: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("log.{name}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn clear_ends_the_old_session_and_starts_the_new_one_in_the_hooks() {
    let h = Harness::from_json(STEPS).await;
    let log = |name: &str, then: &str| {
        json!([{"hooks": [{"type": "command",
            "command": format!("cat >> log.{name}.jsonl; echo >> log.{name}.jsonl; {then}")}]}])
    };
    let context = json!({"hookSpecificOutput": {"hookEventName": "SessionStart",
                         "additionalContext": "CLEAR-CONTEXT"}});
    project_settings(
        h.cwd(),
        json!({"hooks": {
            "SessionStart": log("SessionStart", &format!("tail -n 2 log.SessionStart.jsonl | grep -q '\"source\":\"clear\"' && echo '{context}'; true")),
            "SessionEnd": log("SessionEnd", "true"),
        }}),
    );
    let mut s = Stream::start(&h, &[], &[]);
    s.user("FIRST-PROMPT").await;
    let old = s.result().await["session_id"].as_str().unwrap().to_owned();
    s.user("/clear").await;
    let new = s.result().await["session_id"].as_str().unwrap().to_owned();
    s.user("SECOND-PROMPT").await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let starts = logged(h.cwd(), "SessionStart");
    let sources: Vec<&str> = starts.iter().filter_map(|s| s["source"].as_str()).collect();
    assert_eq!(sources, ["startup", "clear"], "{starts:?}");
    assert_eq!(starts[1]["session_id"], new.as_str());
    assert!(starts[1]["transcript_path"]
        .as_str()
        .is_some_and(|p| p.ends_with(&format!("{new}.jsonl"))));
    let ends = logged(h.cwd(), "SessionEnd");
    assert_eq!(ends[0]["reason"], "clear", "{ends:?}");
    assert_eq!(ends[0]["session_id"], old.as_str());
    // At exit the new session ends too.
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends[1]["session_id"], new.as_str());
    // What the clear SessionStart hook added reaches the new conversation's first request.
    let req2 = sent(&h, 1);
    assert!(req2.contains("CLEAR-CONTEXT"), "{req2}");
    assert!(!sent(&h, 0).contains("CLEAR-CONTEXT"));
}

#[tokio::test]
async fn the_session_mirror_follows_the_new_transcript() {
    let h = Harness::from_json(STEPS).await;
    let mut s = Stream::start(&h, &["--session-mirror"], &[]);
    s.user("FIRST-PROMPT").await;
    let old = s.result().await["session_id"].as_str().unwrap().to_owned();
    s.user("/clear").await;
    let new = s.result().await["session_id"].as_str().unwrap().to_owned();
    s.user("SECOND-PROMPT").await;
    s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut files = Vec::new();
    for f in run.of("transcript_mirror") {
        let path = f["filePath"].as_str().unwrap().to_owned();
        let text = f["entries"].to_string();
        if text.contains("SECOND-PROMPT") {
            assert!(path.ends_with(&format!("{new}.jsonl")), "{f}");
        }
        if text.contains("FIRST-PROMPT") {
            assert!(path.ends_with(&format!("{old}.jsonl")), "{f}");
        }
        files.push(path);
    }
    assert!(files.iter().any(|p| p.ends_with(&format!("{new}.jsonl"))));
    assert!(files.iter().any(|p| p.ends_with(&format!("{old}.jsonl"))));
}

#[tokio::test]
async fn initialize_reports_the_output_style_in_effect() {
    let h = Harness::from_json(STEPS).await;
    project_settings(h.cwd(), json!({"outputStyle": "Explanatory"}));
    std::fs::create_dir_all(h.cwd().join(".claude/output-styles")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/output-styles/terse.md"),
        "---\nname: Terse\ndescription: short answers\n---\nAnswer in one line.\n",
    )
    .unwrap();
    let mut s = Stream::start(&h, &[], &[]);
    let r = s
        .ask("init_1", json!({"subtype": "initialize", "hooks": null}))
        .await;
    s.finish().await;
    let resp = &r["response"];
    assert_eq!(resp["output_style"], "Explanatory", "{r}");
    let available: Vec<&str> = resp["available_output_styles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in ["default", "Explanatory", "Learning", "Terse"] {
        assert!(available.contains(&name), "{available:?}");
    }
}

/// The parts of session `sid` in a `file://` store at `root` (under any project key), joined.
fn stored(root: &Path, sid: &str) -> String {
    for project in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let dir = project.path().join(sid);
        if dir.is_dir() {
            let mut parts: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            parts.sort();
            return parts
                .iter()
                .map(|p| std::fs::read_to_string(p).unwrap())
                .collect();
        }
    }
    String::new()
}

#[tokio::test]
async fn the_object_storage_copy_follows_the_new_session() {
    let h = Harness::from_json(STEPS).await;
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("file://{}", bucket.path().display());
    let mut s = Stream::start(&h, &[], &[("KEEL_TRANSCRIPT_URL", url.as_str())]);
    s.user("FIRST-PROMPT").await;
    let old = s.result().await["session_id"].as_str().unwrap().to_owned();
    s.user("/clear").await;
    let new = s.result().await["session_id"].as_str().unwrap().to_owned();
    s.user("SECOND-PROMPT").await;
    let second = s.result().await;
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(second["transcript_remote_current"], true, "{second}");
    assert!(
        second["transcript_url"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!("/{new}/"))),
        "{second}"
    );
    // Each session's copy is its local file, byte for byte.
    for sid in [&old, &new] {
        let local = text_of(&transcript(&h, sid).unwrap());
        assert_eq!(stored(bucket.path(), sid), local, "session {sid}");
    }
    assert!(stored(bucket.path(), &new).contains("SECOND-PROMPT"));
    assert!(!stored(bucket.path(), &new).contains("FIRST-PROMPT"));
}

#[tokio::test]
async fn a_background_command_of_the_old_conversation_stays_owned_and_is_stopped_at_exit() {
    // A marker no other test's process carries.
    let needle = format!("sleep 3000.{}", std::process::id());
    let steps = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash",
            "input": {"command": needle, "run_in_background": true}}]},
        {"kind": "text", "text": "started it"},
        {"kind": "text", "text": "ANSWER-TWO"}
    ]});
    let h = Harness::from_json(&steps.to_string()).await;
    let mut s = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    s.user("FIRST-PROMPT").await;
    s.result().await;
    assert!(
        super::common::eventually(std::time::Duration::from_secs(30), || {
            !super::common::processes_matching(&needle).is_empty()
        })
        .await,
        "the background command started"
    );
    s.user("/clear").await;
    s.result().await;
    // The command outlives the conversation it was started in...
    assert!(!super::common::processes_matching(&needle).is_empty());
    s.user("SECOND-PROMPT").await;
    s.result().await;
    assert!(!super::common::processes_matching(&needle).is_empty());
    // ...and keel still stops it when it exits.
    let run = s.finish().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        super::common::eventually(std::time::Duration::from_secs(10), || {
            super::common::processes_matching(&needle).is_empty()
        })
        .await,
        "{:?} survived keel",
        super::common::processes_matching(&needle)
    );
}

#[tokio::test]
async fn the_interactive_clear_runs_the_same_engine_path() {
    let h = Harness::from_json(STEPS).await;
    let mut t = super::interactive::start(&h, &[], &[], 30, 100);
    t.wait_text("shift+tab mode").await;
    t.send("FIRST-PROMPT\r");
    t.wait_text("ANSWER-ONE").await;
    t.wait_idle().await;
    t.send("/clear\r");
    t.wait_text("New conversation").await;
    t.wait_idle().await;
    t.send("SECOND-PROMPT\r");
    t.wait_text("ANSWER-TWO").await;
    t.wait_idle().await;
    assert_eq!(t.exit().await, 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2, "no request for /clear");
    let second = reqs[1].body["messages"].to_string();
    assert!(second.contains("SECOND-PROMPT"), "{second}");
    assert!(!second.contains("FIRST-PROMPT"), "{second}");
    // Two sessions on disk, each with its own conversation.
    let projects = h.keel_home().join("projects");
    let files: Vec<PathBuf> = std::fs::read_dir(&projects)
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    let texts: Vec<String> = files.iter().map(|p| text_of(p)).collect();
    assert!(texts
        .iter()
        .any(|t| t.contains("FIRST-PROMPT") && !t.contains("SECOND-PROMPT")));
    assert!(texts
        .iter()
        .any(|t| t.contains("SECOND-PROMPT") && !t.contains("FIRST-PROMPT")));
}
