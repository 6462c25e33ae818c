//! `--session-mirror` (the transcript lines a host's session store keeps, as
//! `transcript_mirror` frames) and truncating forks (`--resume-session-at`,
//! `--resume-drops-turn`), through the real binary against keel-mock. docs/sessions.md
//! ("Mirroring to a host, and truncating forks") describes what is tested here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::common::{Harness, Run, Stream};

/// A step answered only to requests whose first user message contains `who`.
fn step(who: &str, mut step: Value) -> Value {
    step["match"] = json!({"first_user_contains": who});
    step
}

/// Every `*.jsonl` under `dir`, recursively.
fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(jsonl_files(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
    out
}

/// Each file's lines, parsed.
fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Entries per file, in order.
type PerFile = BTreeMap<String, Vec<Value>>;

/// The entries the mirror frames carried, per file, in order (`agent_metadata` apart).
fn mirrored(run: &Run) -> (PerFile, Vec<(String, Value)>) {
    let mut files: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut meta = Vec::new();
    for f in run.of("transcript_mirror") {
        let path = f["filePath"].as_str().unwrap().to_owned();
        assert_eq!(
            f.as_object().unwrap().len(),
            3,
            "type, filePath, entries: {f}"
        );
        for e in f["entries"].as_array().unwrap() {
            if e["type"] == "agent_metadata" {
                meta.push((path.clone(), e.clone()));
            } else {
                files.entry(path.clone()).or_default().push(e.clone());
            }
        }
    }
    (files, meta)
}

#[tokio::test]
async fn mirror_frames_equal_the_lines_written_subagents_included_before_the_result() {
    let scenario = json!({"steps": [
        step("PARENT", json!({"kind": "tool_use", "calls": [{"name": "Task", "id": "toolu_task",
            "input": {"description": "Greet", "prompt": "CHILD say hi", "subagent_type": "general-purpose"}}]})),
        step("CHILD", json!({"kind": "text", "text": "hi there"})),
        step("PARENT", json!({"kind": "text", "text": "DONE"})),
    ]});
    let h = Harness::from_json(&scenario.to_string()).await;
    let run = h
        .run_stream("PARENT delegate", &["--session-mirror"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);

    // Every file keel wrote, line for line, equals what was mirrored for it.
    let (files, meta) = mirrored(&run);
    let on_disk = jsonl_files(&h.keel_home().join("projects"));
    assert_eq!(on_disk.len(), 2, "session and subagent files: {on_disk:?}");
    let mut shown: Vec<&String> = files.keys().collect();
    let mut written: Vec<String> = on_disk.iter().map(|p| p.display().to_string()).collect();
    shown.sort();
    written.sort();
    assert_eq!(shown, written.iter().collect::<Vec<_>>());
    for p in &on_disk {
        assert_eq!(
            files[&p.display().to_string()],
            lines_of(p),
            "mirror of {p:?} differs from the file"
        );
    }
    // The subagent's file has its metadata, named by the call that started it; the same
    // fields are in the sidecar beside the file.
    let agent_file = on_disk
        .iter()
        .find(|p| p.to_string_lossy().contains("/subagents/agent-"))
        .unwrap();
    assert_eq!(meta.len(), 1, "{meta:?}");
    assert_eq!(meta[0].0, agent_file.display().to_string());
    assert_eq!(meta[0].1["toolUseId"], "toolu_task");
    assert_eq!(meta[0].1["agentType"], "general-purpose");
    let sidecar: Value =
        serde_json::from_slice(&std::fs::read(agent_file.with_extension("meta.json")).unwrap())
            .unwrap();
    let mut entry = meta[0].1.clone();
    entry.as_object_mut().unwrap().remove("type");
    assert_eq!(sidecar, entry);

    // Each frame's own record was mirrored before the frame was printed... and the last
    // mirror frame comes before the result.
    let idx = |pred: &dyn Fn(&Value) -> bool| run.frames.iter().position(pred).unwrap();
    let last_mirror = run
        .frames
        .iter()
        .rposition(|f| f["type"] == "transcript_mirror")
        .unwrap();
    let result = idx(&|f| f["type"] == "result");
    assert!(last_mirror < result, "mirror after the result");
    assert_eq!(
        run.frames[0]["subtype"], "init",
        "the turn's init comes first"
    );
    let result_uuid = run.result()["uuid"].clone();
    let main = files
        .iter()
        .find(|(k, _)| !k.contains("/subagents/"))
        .unwrap()
        .1;
    assert!(
        main.iter().any(|r| r["uuid"] == result_uuid),
        "the result's own record is mirrored"
    );
}

#[tokio::test]
async fn without_the_flag_nothing_is_mirrored() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"plain"}]}"#).await;
    let run = h.run_stream("hello", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(run.of("transcript_mirror").is_empty(), "{}", run.stdout);
    // Other output formats have no frames to mirror into: said once, not silently ignored.
    let run = h
        .run(
            &["-p", "hello", "--output-format", "json", "--session-mirror"],
            &[],
        )
        .await;
    assert!(!run.stdout.contains("transcript_mirror"), "{}", run.stdout);
    assert!(
        run.stderr.contains("--session-mirror has no effect"),
        "{}",
        run.stderr
    );
}

/// Two turns (prompts "one" and "two") of one stream-json session, and what each printed.
async fn two_turns(h: &Harness) -> (String, Vec<Value>) {
    let mut s = Stream::start(h, &["--max-turns", "1"], &[]);
    s.user("Reply with exactly: one").await;
    s.result().await;
    s.user("Reply with exactly: two").await;
    s.result().await;
    let run = s.finish().await;
    let id = run.frames[0]["session_id"].as_str().unwrap().to_owned();
    (id, run.frames)
}

fn transcript_of(h: &Harness, id: &str) -> PathBuf {
    jsonl_files(&h.keel_home().join("projects"))
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy() == format!("{id}.jsonl"))
        .unwrap()
}

/// The uuid of the prompt record whose text contains `text` (keel's frame records and Claude
/// Code's entries alike: a `user` line, the record's own `uuid`).
fn prompt_uuid(path: &Path, text: &str) -> String {
    lines_of(path)
        .into_iter()
        .find(|r| {
            (r["type"] == "user" || r["frame"]["type"] == "user") && r.to_string().contains(text)
        })
        .and_then(|r| r["uuid"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no prompt {text:?} in {path:?}"))
}

const THREE_TEXTS: &str = r#"{"steps":[
  {"kind":"text","text":"one"},{"kind":"text","text":"two"},{"kind":"text","text":"three"}]}"#;

#[tokio::test]
async fn a_truncating_fork_ends_its_history_at_the_message_and_drops_the_declared_turn() {
    let h = Harness::from_json(THREE_TEXTS).await;
    let (id, frames) = two_turns(&h).await;
    let at = frames
        .iter()
        .find(|f| f["type"] == "assistant" && f["message"]["content"][0]["text"] == "one")
        .unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let source = transcript_of(&h, &id);
    let before = std::fs::read(&source).unwrap();
    let turn = prompt_uuid(&source, "exactly: two");

    let resume = format!("--resume={id}");
    let at_flag = format!("--resume-session-at={at}");
    let drops = format!("--resume-drops-turn={turn}");
    let mut s = Stream::start(
        &h,
        &[
            "--max-turns",
            "1",
            &resume,
            "--fork-session",
            &at_flag,
            &drops,
            "--session-mirror",
        ],
        &[],
    );
    s.user("Reply with exactly: three").await;
    let result = s.result().await;
    let run = s.finish().await;
    assert_eq!(result["subtype"], "success", "{}", run.stderr);
    assert_eq!(run.code, 0);
    let fork = result["session_id"].as_str().unwrap();
    assert_ne!(fork, id, "a fork has its own id");
    // The fork's file, its copied history included, is mirrored whole; the source not at all.
    let (files, _) = mirrored(&run);
    let fork_file = transcript_of(&h, fork);
    assert_eq!(files.len(), 1, "{:?}", files.keys());
    assert_eq!(
        files[&fork_file.display().to_string()],
        lines_of(&fork_file)
    );

    // The model saw "one", its reply, and "three": turn two is gone.
    let reqs = h.requests();
    let texts: Vec<String> = reqs.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let c = &m["content"];
            c.as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| c[0]["text"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    assert_eq!(
        texts,
        vec![
            "Reply with exactly: one",
            "one",
            "Reply with exactly: three"
        ]
    );
    // The source session was not touched, byte for byte.
    assert_eq!(std::fs::read(&source).unwrap(), before);
}

#[tokio::test]
async fn a_drops_turn_that_does_not_match_is_refused_with_an_error_result() {
    let h = Harness::from_json(THREE_TEXTS).await;
    let (id, frames) = two_turns(&h).await;
    let at = frames
        .iter()
        .find(|f| f["type"] == "assistant" && f["message"]["content"][0]["text"] == "one")
        .unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let source = transcript_of(&h, &id);
    let before = std::fs::read(&source).unwrap();
    let files_before = jsonl_files(&h.keel_home().join("projects")).len();
    let requests_before = h.requests().len();

    let resume = format!("--resume={id}");
    let at_flag = format!("--resume-session-at={at}");
    // A turn that is not the one after the cut.
    let drops = "--resume-drops-turn=bb841952-8d37-4fb2-acad-97f883308b46";
    for input in [true, false] {
        let run = if input {
            // keel refuses before it reads stdin: nothing is sent (it may be gone already).
            let s = Stream::start(
                &h,
                &[
                    "--max-turns",
                    "1",
                    &resume,
                    "--fork-session",
                    &at_flag,
                    drops,
                ],
                &[],
            );
            s.finish().await
        } else {
            h.run_stream("three", &[&resume, "--fork-session", &at_flag, drops], &[])
                .await
        };
        run.assert_end("error_during_execution", true, "turn_setup_failed", 1);
        let r = run.result();
        let text = r["result"].as_str().unwrap();
        assert!(
            text.starts_with("Resume rejected by --resume-drops-turn:"),
            "{text}"
        );
        assert_eq!(r["errors"][0].as_str().unwrap(), text);
        assert_eq!(r["num_turns"], 0);
        assert_eq!(run.frames.len(), 1, "only the result: {}", run.stdout);
        assert!(run.stderr.contains("Resume rejected"), "{}", run.stderr);
    }
    // Nothing ran, nothing was written, the source is as it was.
    assert_eq!(h.requests().len(), requests_before);
    assert_eq!(std::fs::read(&source).unwrap(), before);
    assert_eq!(
        jsonl_files(&h.keel_home().join("projects")).len(),
        files_before
    );
}

#[tokio::test]
async fn truncation_flags_are_checked_before_anything_runs() {
    let h = Harness::from_json(THREE_TEXTS).await;
    let id = "0b5c8f3e-8f0e-4a59-b1c4-7f1d2e3a4b5c";
    let resume = format!("--resume={id}");
    let at = "--resume-session-at=5a872f06-72dd-41fc-9e63-e36fac690132";
    for (args, needle) in [
        (vec![resume.as_str(), at], "--fork-session"),
        (
            vec![
                resume.as_str(),
                "--fork-session",
                "--resume-session-at=nope",
            ],
            "uuid",
        ),
        (
            vec![
                resume.as_str(),
                "--fork-session",
                "--resume-drops-turn=5a872f06-72dd-41fc-9e63-e36fac690132",
            ],
            "--resume-session-at",
        ),
    ] {
        let run = h.run_stream("x", &args, &[]).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn the_uuid_a_host_gave_a_prompt_names_the_turn_to_drop() {
    let h = Harness::from_json(THREE_TEXTS).await;
    let (u1, u2) = (
        "11111111-2222-4333-8444-555555555555",
        "66666666-7777-4888-8999-aaaaaaaaaaaa",
    );
    let mut s = Stream::start(&h, &["--max-turns", "1"], &[]);
    for (text, uuid) in [
        ("Reply with exactly: one", u1),
        ("Reply with exactly: two", u2),
    ] {
        s.send(
            json!({"type": "user", "session_id": "", "parent_tool_use_id": null, "uuid": uuid,
                      "message": {"role": "user", "content": text}}),
        )
        .await;
        s.result().await;
    }
    let first = s.finish().await;
    let id = first.frames[0]["session_id"].as_str().unwrap().to_owned();
    let source = transcript_of(&h, &id);
    assert_eq!(prompt_uuid(&source, "exactly: one"), u1);
    assert_eq!(prompt_uuid(&source, "exactly: two"), u2);
    let at = first
        .frames
        .iter()
        .find(|f| f["type"] == "assistant" && f["message"]["content"][0]["text"] == "one")
        .unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_owned();

    let resume = format!("--resume={id}");
    let at_flag = format!("--resume-session-at={at}");
    // Declaring the kept turn's prompt is refused; the dropped one's is accepted.
    let wrong = format!("--resume-drops-turn={u1}");
    let refused = h
        .run_stream("three", &[&resume, "--fork-session", &at_flag, &wrong], &[])
        .await;
    refused.assert_end("error_during_execution", true, "turn_setup_failed", 1);
    let right = format!("--resume-drops-turn={u2}");
    let forked = h
        .run_stream(
            "Reply with exactly: three",
            &[&resume, "--fork-session", &at_flag, &right],
            &[],
        )
        .await;
    forked.assert_end("success", false, "completed", 0);
    let last = h.requests().last().unwrap().body["messages"].to_string();
    assert!(
        !last.contains("exactly: two") && last.contains("exactly: one"),
        "{last}"
    );
}

#[tokio::test]
async fn a_resume_mirrors_exactly_what_it_appends_its_repairs_included() {
    let h = Harness::from_json(
        r#"{"steps":[
          {"kind":"tool_use","calls":[{"name":"Bash","id":"toolu_cut","input":{"command":"echo hi"}}]},
          {"kind":"text","text":"done"},
          {"kind":"text","text":"after"}]}"#,
    )
    .await;
    let first = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    first.assert_end("success", false, "completed", 0);
    let id = first.frames[0]["session_id"].as_str().unwrap().to_owned();
    let path = transcript_of(&h, &id);
    // As if keel died while the call ran: the file ends with the call.
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .scan(false, |done, l| {
            if *done {
                return None;
            }
            *done = l.contains("\"toolu_cut\"") && l.contains("\"tool_use\"");
            Some(l)
        })
        .collect();
    let cut = kept.join("\n") + "\n";
    std::fs::write(&path, &cut).unwrap();

    let resume = format!("--resume={id}");
    let run = h
        .run_stream("again", &[&resume, "--session-mirror"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let (files, _) = mirrored(&run);
    let appended: Vec<Value> = std::fs::read_to_string(&path).unwrap()[cut.len()..]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(files[&path.display().to_string()], appended);
    // (Read without assuming the record format.)
    let repair = appended[0].to_string();
    assert!(
        repair.contains("\"tool_result\"") && repair.contains("toolu_cut"),
        "the repair comes first: {repair}"
    );
}
