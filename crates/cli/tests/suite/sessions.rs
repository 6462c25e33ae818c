//! Durable sessions: transcripts written ahead of stdout, resume / continue / fork /
//! session-id, the tolerant reader, repairs, persistence failures, `keel sessions`, and a
//! seeded SIGKILL crash loop. docs/sessions.md describes the behaviour tested here.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::common::{Harness, Live, Run};

/// A run with a reply that calls two tools, then a final text; later runs get the texts after.
const TOOLS_THEN_TEXTS: &str = r#"{"steps":[
  {"kind":"tool_use","text":"I'll look.","calls":[
     {"name":"Bash","input":{"command":"echo one"}},
     {"name":"Bash","input":{"command":"echo two"}}]},
  {"kind":"text","text":"Listed."},
  {"kind":"text","text":"Second answer."},
  {"kind":"text","text":"Third answer."},
  {"kind":"text","text":"Fourth answer."}
]}"#;

const BASH: &[&str] = &["--allowedTools", "Bash"];

fn session_id(run: &Run) -> String {
    run.frames[0]["session_id"].as_str().unwrap().to_owned()
}

/// The transcript of `id`, wherever under `KEEL_HOME` it is.
fn transcript(h: &Harness, id: &str) -> PathBuf {
    find_transcript(&h.keel_home(), id).unwrap_or_else(|| panic!("no transcript for {id}"))
}

fn find_transcript(home: &Path, id: &str) -> Option<PathBuf> {
    std::fs::read_dir(home.join("projects"))
        .ok()?
        .flatten()
        .map(|d| d.path().join(format!("{id}.jsonl")))
        .find(|p| p.is_file())
}

/// Every line of a transcript that parses.
fn records(path: &Path) -> Vec<Value> {
    String::from_utf8_lossy(&std::fs::read(path).unwrap())
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn record_uuids(path: &Path) -> HashSet<String> {
    records(path)
        .iter()
        .filter_map(|r| r["uuid"].as_str().map(str::to_owned))
        .collect()
}

/// The uuids of the message frames (assistant, user) a run printed.
fn message_uuids(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["type"] == "assistant" || f["type"] == "user")
        .map(|f| f["uuid"].as_str().unwrap().to_owned())
        .collect()
}

/// The text of the last user message of a logged request.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// The logged request whose last user message contains `needle` (the first such).
fn request_with(h: &Harness, needle: &str) -> Value {
    h.requests()
        .into_iter()
        .find(|r| last_user_text(&r.body).contains(needle))
        .unwrap_or_else(|| panic!("no request carries {needle:?}"))
        .body
}

/// The messages of a request without their prompt-cache marks (which move as the
/// conversation grows): the conversation itself.
fn plain(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), plain(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(plain).collect()),
        other => other.clone(),
    }
}

fn user(text: &str) -> Value {
    json!({"role":"user","content":[{"type":"text","text":text}]})
}

fn assistant_text(text: &str) -> Value {
    json!({"role":"assistant","content":[{"type":"text","text":text}]})
}

#[tokio::test]
async fn resume_and_continue_send_the_whole_conversation_back() {
    let h = Harness::from_json(TOOLS_THEN_TEXTS).await;
    let first = h.run_stream("first prompt", BASH, &[]).await;
    first.assert_end("success", false, "completed", 0);
    let id = session_id(&first);
    let path = transcript(&h, &id);
    let on_disk = record_uuids(&path);
    for u in message_uuids(&first.frames) {
        assert!(
            on_disk.contains(&u),
            "{u} was printed but is not in {path:?}"
        );
    }

    // --resume=ID, the form the SDKs pass.
    let resume_flag = format!("--resume={id}");
    let second = h
        .run_stream(
            "second prompt",
            &["--allowedTools", "Bash", &resume_flag],
            &[],
        )
        .await;
    second.assert_end("success", false, "completed", 0);
    assert_eq!(session_id(&second), id, "a resumed session keeps its id");
    assert!(second.of("system/warning").is_empty(), "{}", second.stdout);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 3);
    let mut expected = plain(&reqs[1].body["messages"]).as_array().unwrap().clone();
    expected.push(assistant_text("Listed."));
    expected.push(user("second prompt"));
    assert_eq!(
        plain(&reqs[2].body["messages"]),
        Value::Array(expected.clone())
    );
    keel_mock::validate_request(&reqs[2].body).unwrap();
    // The tool calls and their results are in it.
    let sent = reqs[2].body["messages"].to_string();
    for needle in [
        "\"tool_use\"",
        "echo one",
        "echo two",
        "\"tool_result\"",
        "\"content\":\"one\"",
        "\"content\":\"two\"",
        "I'll look.",
    ] {
        assert!(sent.contains(needle), "{needle} missing from {sent}");
    }

    // -c: the most recent session of this directory.
    let third = h.run_stream("third prompt", &["-c"], &[]).await;
    third.assert_end("success", false, "completed", 0);
    assert_eq!(session_id(&third), id);
    let reqs = h.requests();
    expected.push(assistant_text("Second answer."));
    expected.push(user("third prompt"));
    assert_eq!(plain(&reqs[3].body["messages"]), Value::Array(expected));
    keel_mock::validate_request(&reqs[3].body).unwrap();

    // One file, one header, one unbroken parentUuid chain of messages (Claude Code's).
    let recs = records(&path);
    assert_eq!(
        recs.iter().filter(|r| r["type"] == "keel-session").count(),
        1
    );
    let chain: Vec<&Value> = recs
        .iter()
        .filter(|r| r["type"] == "user" || r["type"] == "assistant")
        .collect();
    assert_eq!(chain[0]["parentUuid"], Value::Null);
    for w in chain.windows(2) {
        assert_eq!(w[1]["parentUuid"], w[0]["uuid"]);
    }
    let results = recs
        .iter()
        .filter(|r| r["frame"]["type"] == "result")
        .count();
    assert_eq!(results, 3);
}

/// keel in stream-json input mode: send `prompts` as user lines, close stdin, wait for exit.
async fn stream_input(h: &Harness, extra: &[&str], prompts: &[&str]) -> Run {
    use tokio::io::AsyncWriteExt;
    let mut args = vec![
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
    ];
    args.extend_from_slice(extra);
    let mut cmd = h.command(&args, &[]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("keel starts");
    let mut stdin = child.stdin.take().unwrap();
    for p in prompts {
        let line = json!({"type":"user","session_id":"","parent_tool_use_id":null,
            "message":{"role":"user","content":p}});
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("keel finished")
        .unwrap();
    Run::new(
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[tokio::test]
async fn stream_json_input_sessions_are_the_same_files_and_resume_the_same_way() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"A"},{"kind":"text","text":"B"},
            {"kind":"text","text":"C"},{"kind":"text","text":"D"}]}"#,
    )
    .await;
    let first = stream_input(&h, &[], &["one via stdin", "two via stdin"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.of("result").len(), 2);
    let id = session_id(&first);

    let p = h.run_stream("three via -p", &["--resume", &id], &[]).await;
    p.assert_end("success", false, "completed", 0);
    let body = request_with(&h, "three via -p");
    keel_mock::validate_request(&body).unwrap();
    let texts = |body: &Value| -> Vec<String> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| match &m["content"] {
                Value::String(s) => s.clone(),
                c => c[0]["text"].as_str().unwrap_or("").to_owned(),
            })
            .collect()
    };
    assert_eq!(
        texts(&body),
        ["one via stdin", "A", "two via stdin", "B", "three via -p"]
    );

    let again = stream_input(&h, &[&format!("--resume={id}")], &["four via stdin"]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(session_id(&again), id);
    let body = request_with(&h, "four via stdin");
    keel_mock::validate_request(&body).unwrap();
    assert_eq!(texts(&body).len(), 7);
    assert_eq!(texts(&body)[5], "C");
    let recs = records(&transcript(&h, &id));
    assert_eq!(
        recs.iter().filter(|r| r["type"] == "keel-session").count(),
        1
    );
}

#[tokio::test]
async fn fork_session_branches_off_and_leaves_the_old_file_byte_identical() {
    let h = Harness::from_json(TOOLS_THEN_TEXTS).await;
    let first = h.run_stream("first prompt", BASH, &[]).await;
    let id = session_id(&first);
    let old = transcript(&h, &id);
    let before = std::fs::read(&old).unwrap();

    let fork = h
        .run_stream("fork prompt", &["--resume", &id, "--fork-session"], &[])
        .await;
    fork.assert_end("success", false, "completed", 0);
    let fork_id = session_id(&fork);
    assert_ne!(fork_id, id);
    assert_eq!(fork.result()["session_id"], fork_id.as_str());
    assert_eq!(
        std::fs::read(&old).unwrap(),
        before,
        "the old transcript is untouched"
    );
    let body = request_with(&h, "fork prompt");
    keel_mock::validate_request(&body).unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 5);

    // The fork's file is self-contained: it resumes without the old one.
    let fork_path = transcript(&h, &fork_id);
    let recs = records(&fork_path);
    assert_eq!(recs[0]["forked_from"]["session_id"], id.as_str());
    std::fs::remove_file(&old).unwrap();
    let again = h
        .run_stream("after the fork", &["--resume", &fork_id], &[])
        .await;
    again.assert_end("success", false, "completed", 0);
    let body = request_with(&h, "after the fork");
    keel_mock::validate_request(&body).unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 7);

    // --session-id names the fork.
    let chosen = "6f1f7e2a-53a4-4c1e-9d7e-2f0c1b9a8e77";
    let named = h
        .run_stream(
            "named fork",
            &[
                "--continue",
                "--fork-session",
                &format!("--session-id={chosen}"),
            ],
            &[],
        )
        .await;
    named.assert_end("success", false, "completed", 0);
    assert_eq!(session_id(&named), chosen);
}

#[tokio::test]
async fn session_id_names_a_new_session_and_refuses_one_that_exists() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    let id = "0b5c8f3e-8f0e-4a59-b1c4-7f1d2e3a4b5c";
    let first = h.run_stream("hi", &["--session-id", id], &[]).await;
    first.assert_end("success", false, "completed", 0);
    assert_eq!(session_id(&first), id);
    assert!(transcript(&h, id).is_file());

    let again = h.run_stream("hi", &["--session-id", id], &[]).await;
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stdout.is_empty(), "{}", again.stdout);
    assert!(
        again.stderr.contains(id) && again.stderr.contains("already exists"),
        "{}",
        again.stderr
    );

    let bad = h
        .run_stream("hi", &["--session-id", "not-a-uuid"], &[])
        .await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("UUID"), "{}", bad.stderr);
    assert_eq!(
        h.requests().len(),
        1,
        "failed starts send nothing to the model"
    );
}

#[tokio::test]
async fn unknown_sessions_and_bad_flag_combinations_are_clear_errors() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"ok"}]}"#).await;
    let unknown = "9d5ed678-fe57-4cca-a4e6-1b2c3d4e5f60";
    let run = h.run_stream("hi", &["--resume", unknown], &[]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let projects = h.keel_home().join("projects").display().to_string();
    assert!(
        run.stderr.contains(unknown) && run.stderr.contains(&projects),
        "{}",
        run.stderr
    );

    let run = h.run_stream("hi", &["--resume", "garbage"], &[]).await;
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{}", run.stderr);
    assert!(
        run.stderr.contains("\"garbage\" is not a session id"),
        "{}",
        run.stderr
    );

    let run = h.run_stream("hi", &["--continue"], &[]).await;
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{}", run.stderr);
    assert!(
        run.stderr.contains("no session to continue"),
        "{}",
        run.stderr
    );

    for (args, needle) in [
        (vec!["--fork-session"], "--fork-session"),
        (vec!["--resume", unknown, "--continue"], "not both"),
        (
            vec!["--resume", unknown, "--session-id", unknown],
            "--fork-session",
        ),
    ] {
        let run = h.run_stream("hi", &args, &[]).await;
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (2, ""),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
    let run = h
        .run_stream("hi", &[], &[("KEEL_FSYNC", "sometimes")])
        .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("KEEL_FSYNC"), "{}", run.stderr);
    assert!(h.requests().is_empty());
}

#[tokio::test]
async fn a_damaged_middle_line_and_a_torn_tail_are_reported_and_nothing_else_is_lost() {
    let h = Harness::from_json(TOOLS_THEN_TEXTS).await;
    let first = h.run_stream("first prompt", BASH, &[]).await;
    first.assert_end("success", false, "completed", 0);
    let id = session_id(&first);
    let path = transcript(&h, &id);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // header, init, prompt, "I'll look.", tool_use, tool_use, result, result, "Listed.", result
    assert_eq!(lines.len(), 10, "{text}");
    assert!(lines[3].contains("I'll look."), "{}", lines[3]);
    lines[3] = r#"{"type":"frame","uuid":"c0ffee","frame":{"type":"assistant","mess"#.into();
    let mut damaged = lines.join("\n") + "\n";
    damaged.push_str(r#"{"type":"frame","uuid":"torn","frame":{"type":"user","message":{"ro"#);
    std::fs::write(&path, &damaged).unwrap();

    let run = h
        .run_stream("after the damage", &["--resume", &id], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let warnings = run.of("system/warning");
    let kinds: Vec<(&str, u64)> = warnings
        .iter()
        .map(|w| (w["kind"].as_str().unwrap(), w["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [("corrupt_line", 4), ("torn_tail", 11)],
        "{}",
        run.stdout
    );
    for w in &warnings {
        assert_eq!(w["source"], "transcript");
        assert_eq!(w["path"], path.display().to_string());
    }
    assert!(
        run.frames[1]["subtype"] == "warning",
        "warnings come right after init"
    );
    assert!(
        run.stderr.contains("line 4 of the transcript"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("(line 11,"), "{}", run.stderr);

    // Everything but the damaged text block went back to the model.
    let body = request_with(&h, "after the damage");
    keel_mock::validate_request(&body).unwrap();
    let full = plain(&h.requests()[1].body["messages"])
        .as_array()
        .unwrap()
        .clone();
    let mut expected = full;
    expected[1]["content"].as_array_mut().unwrap().remove(0); // "I'll look."
    expected.push(assistant_text("Listed."));
    expected.push(user("after the damage"));
    assert_eq!(plain(&body["messages"]), Value::Array(expected));

    // The torn tail was cut before appending; the damaged line stays (it is evidence).
    let after = std::fs::read_to_string(&path).unwrap();
    let bad: Vec<usize> = after
        .lines()
        .enumerate()
        .filter(|(_, l)| serde_json::from_str::<Value>(l).is_err())
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(bad, [4]);
    assert!(!after.contains("\"torn\""));
    assert!(after.ends_with('\n'));
}

#[tokio::test]
async fn a_call_left_running_by_a_kill_gets_a_truthful_result_on_resume() {
    let h = Harness::from_json(
        r#"{"steps":[
          {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"sleep 600"}}]},
          {"kind":"text","text":"Resumed fine."}
        ]}"#,
    )
    .await;
    let mut live = h.live_stream("start", &["--allowedTools", "Bash"], &[]);
    let call = live
        .wait_for(Duration::from_secs(30), |f| {
            f["type"] == "assistant" && f["message"]["content"][0]["type"] == "tool_use"
        })
        .await;
    let call_id = call["message"]["content"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = live.frames[0]["session_id"].as_str().unwrap().to_owned();
    live.child.start_kill().unwrap();
    live.child.wait().await.unwrap();

    let run = h
        .run_stream("are you there?", &["--resume", &id], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let w = run.of("system/warning");
    assert_eq!(w.len(), 1, "{}", run.stdout);
    assert_eq!(w[0]["kind"], "repaired_tool_calls");
    assert_eq!(w[0]["tool_use_ids"], json!([call_id]));
    let body = request_with(&h, "are you there?");
    keel_mock::validate_request(&body).unwrap();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let result = &last["content"][0];
    assert_eq!(
        (
            result["type"].as_str(),
            result["tool_use_id"].as_str(),
            result["is_error"].as_bool()
        ),
        (Some("tool_result"), Some(call_id.as_str()), Some(true))
    );
    let says = result["content"].as_str().unwrap();
    assert!(
        says.contains("session ended") && says.contains("side effects"),
        "{says}"
    );
    // The repair is recorded in the file itself.
    let recs = records(&transcript(&h, &id));
    assert!(recs
        .iter()
        .any(|r| r["keel"]["tool_result_meta"][0]["repair"] == "session_ended"));
}

#[tokio::test]
async fn an_unwritable_transcript_ends_the_run_with_an_honest_error() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"never asked"}]}"#).await;
    // Running as root, permission bits do not stop writes: a regular file where a directory
    // must be does.
    let blocker = h.home.path().join("blocker");
    std::fs::write(&blocker, "").unwrap();
    let home = blocker.join("keel");
    let env = [("KEEL_HOME", home.to_str().unwrap())];
    let run = h.run_stream("hi", &[], &env).await;
    run.assert_end("error_during_execution", true, "model_error", 1);
    assert_eq!(
        run.frames[0]["subtype"], "init",
        "the run still starts visibly"
    );
    let text = run.result()["result"].as_str().unwrap();
    assert!(
        text.starts_with("keel failed: could not create the transcript directory"),
        "{text}"
    );
    assert!(
        text.contains(&blocker.display().to_string()) && text.contains("Not a directory"),
        "{text}"
    );
    assert!(
        h.requests().is_empty(),
        "nothing unrecorded is sent to the model"
    );

    let plain = h.run(&["-p", "hi"], &env).await;
    assert_eq!((plain.code, plain.stdout.as_str()), (1, ""));
    assert!(plain.stderr.contains("Not a directory"), "{}", plain.stderr);
}

/// A tmpfs mount, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test]
#[ignore = "needs root (to mount a small tmpfs)"]
async fn a_full_disk_mid_run_ends_with_the_honest_error_and_loses_nothing_shown() {
    let mnt = tempfile::tempdir().unwrap();
    let _tmpfs = Tmpfs::mount(mnt.path(), "256k").expect("needs root to mount a tmpfs");
    // Fill the file system, then free 3 pages: room for the start of the run, not its end.
    let filler = mnt.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![b'x'; 4096];
        while f.write_all(&chunk).is_ok() {}
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(3 * 4096)).unwrap();
    }
    let big = "x".repeat(3000);
    let scenario = json!({"steps": [
        {"kind":"tool_use","text":"Printing.","calls":[
            {"name":"Bash","input":{"command":format!("echo {big}")}},
            {"name":"Bash","input":{"command":format!("echo {big}")}},
            {"name":"Bash","input":{"command":format!("echo {big}")}}]},
        {"kind":"text","text":"Done."}
    ]});
    let h = Harness::new(keel_mock::Scenario::from_value(&scenario).unwrap()).await;
    let home = mnt.path().join("keel");
    let run = h
        .run_stream("fill it", BASH, &[("KEEL_HOME", home.to_str().unwrap())])
        .await;
    run.assert_end("error_during_execution", true, "model_error", 1);
    let text = run.result()["result"].as_str().unwrap();
    assert!(text.contains("No space left on device"), "{text}");
    let id = session_id(&run);
    let path = find_transcript(&home, &id).unwrap();
    assert!(text.contains(&path.display().to_string()), "{text}");
    // Write-ahead: every message shown is on disk, and the file holds whole records only.
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.ends_with(b"\n"));
    let on_disk = record_uuids(&path);
    for u in message_uuids(&run.frames) {
        assert!(on_disk.contains(&u), "{u} was shown but not persisted");
    }
    for l in String::from_utf8_lossy(&bytes).lines() {
        serde_json::from_str::<Value>(l).unwrap();
    }
}

#[tokio::test]
async fn fsync_per_message_works_the_same() {
    let h = Harness::from_json(TOOLS_THEN_TEXTS).await;
    let run = h
        .run_stream("first prompt", BASH, &[("KEEL_FSYNC", "message")])
        .await;
    run.assert_end("success", false, "completed", 0);
    let on_disk = record_uuids(&transcript(&h, &session_id(&run)));
    for u in message_uuids(&run.frames) {
        assert!(on_disk.contains(&u));
    }
}

#[tokio::test]
async fn keel_sessions_lists_this_directory_newest_first_and_all_with_all() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    let empty = h.run(&["sessions"], &[]).await;
    assert_eq!(empty.code, 0);
    assert!(
        empty.stdout.starts_with("No sessions yet"),
        "{}",
        empty.stdout
    );

    let a = session_id(
        &h.run_stream("the first session\nwith two lines", &[], &[])
            .await,
    );
    let b = session_id(&h.run_stream("the second session", &[], &[]).await);
    // A session elsewhere, and a damaged tail on `a`.
    let other = tempfile::tempdir().unwrap();
    let mut cmd = h.command(
        &[
            "-p",
            "somewhere else",
            "--output-format",
            "stream-json",
            "--verbose",
        ],
        &[],
    );
    cmd.current_dir(other.path());
    let c = session_id(&Live::spawn(cmd).finish(Duration::from_secs(60)).await);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(transcript(&h, &a))
            .unwrap();
        f.write_all(b"{\"type\":\"frame\",\"uu").unwrap();
    }
    // `a` was just written to, so it is the most recent now.
    let list = h.run(&["sessions"], &[]).await;
    assert_eq!(list.code, 0, "{}", list.stderr);
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", list.stdout);
    assert!(lines[0].starts_with("SESSION") && lines[0].contains("FIRST PROMPT"));
    assert!(
        lines[1].starts_with(&a) && lines[2].starts_with(&b),
        "{}",
        list.stdout
    );
    assert!(
        lines[1].contains("the first session with two lines"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains(" no ") && lines[1].contains("[1 damaged line]"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains(" yes "), "{}", lines[2]);

    let json = h.run(&["sessions", "--json"], &[]).await;
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    let all = v.as_array().unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1]["session_id"], b.as_str());
    assert_eq!(all[1]["messages"], 2);
    assert_eq!(all[1]["ended_cleanly"], true);
    assert_eq!(all[1]["last_result"], "success");
    assert_eq!(all[1]["first_prompt"], "the second session");
    assert_eq!(all[1]["cwd"], h.cwd().display().to_string());
    assert_eq!(all[0]["ended_cleanly"], false);
    assert_eq!(all[0]["damaged_lines"], 1);

    let every = h.run(&["sessions", "--all", "--json"], &[]).await;
    let ids: Vec<String> = serde_json::from_str::<Value>(&every.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.contains(&c));
    let table = h.run(&["sessions", "--all"], &[]).await;
    assert!(
        table.stdout.contains("DIRECTORY")
            && table.stdout.contains(&other.path().display().to_string())
    );

    let bad = h.run(&["sessions", "--bogus"], &[]).await;
    assert_eq!(bad.code, 2);
}

/// The first session `keel sessions --json` lists.
async fn list(h: &Harness) -> Value {
    let out = h.run(&["sessions", "--json"], &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v.as_array().unwrap()[0].clone()
}

/// `keel sessions` keeps summaries in a cache keyed by size and modification time: an unchanged
/// transcript is not read again, a changed one is, and a damaged cache is only a cost.
#[tokio::test]
async fn keel_sessions_reads_again_only_what_changed() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    let id = session_id(&h.run_stream("the prompt", &[], &[]).await);
    let first = list(&h).await;
    assert_eq!(first["messages"], 2);
    assert_eq!(first["first_prompt"], "the prompt");
    let dir = transcript(&h, &id).parent().unwrap().to_owned();
    let index = dir.join(".sessions-index.json");
    let text = std::fs::read_to_string(&index).expect("the listing wrote its cache");
    // Unchanged transcripts are taken from the cache (edited here to tell the two apart).
    std::fs::write(&index, text.replace("the prompt", "from the cache")).unwrap();
    assert_eq!(list(&h).await["first_prompt"], "from the cache");
    // A resumed session changed: it is read again.
    let again = h.run_stream("more", &["--resume", id.as_str()], &[]).await;
    again.assert_end("success", false, "completed", 0);
    let after = list(&h).await;
    assert_eq!(after["messages"], 4);
    assert_eq!(after["first_prompt"], "the prompt");
    // A damaged cache is ignored and replaced.
    std::fs::write(&index, b"{not json").unwrap();
    assert_eq!(list(&h).await["messages"], 4);
    assert!(serde_json::from_slice::<Value>(&std::fs::read(&index).unwrap()).is_ok());
}

/// A long session leaves a resume checkpoint when keel exits; a resume from it sends the model
/// exactly the conversation a resume that reads the whole transcript sends.
#[tokio::test]
async fn a_resume_from_a_checkpoint_sends_what_a_full_read_sends() {
    let big = "a long answer. ".repeat(90_000); // ~1.3 MB: a transcript that gets a checkpoint
    let scenario = json!({"on_exhausted": "repeat_last", "steps": [
        {"kind": "text", "text": big},
        {"kind": "text", "text": "ok"},
    ]});
    let h = Harness::from_json(&scenario.to_string()).await;
    // The conversation is larger than a context window: no compaction, to compare it whole.
    let env = [("DISABLE_AUTO_COMPACT", "1")];
    let first = h.run_stream("write a lot", &[], &env).await;
    first.assert_end("success", false, "completed", 0);
    let id = session_id(&first);
    let path = transcript(&h, &id);
    let cp = path.with_extension("").join("resume-checkpoint.jsonl");
    assert!(
        cp.is_file(),
        "keel left no checkpoint for a long transcript"
    );
    let saved = std::fs::read(&path).unwrap();

    let last_messages = |h: &Harness| {
        let reqs = h.requests();
        let body = &reqs.last().expect("a request").body;
        body["messages"].clone()
    };
    let from_checkpoint = h
        .run_stream("and now?", &["--resume", id.as_str()], &env)
        .await;
    from_checkpoint.assert_end("success", false, "completed", 0);
    let with_cp = last_messages(&h);

    // The same resume again, from the same transcript, with no checkpoint to start from.
    std::fs::write(&path, &saved).unwrap();
    std::fs::remove_file(&cp).unwrap();
    let whole = h
        .run_stream("and now?", &["--resume", id.as_str()], &env)
        .await;
    whole.assert_end("success", false, "completed", 0);
    let without = last_messages(&h);
    assert_eq!(with_cp, without);
    assert_eq!(with_cp.as_array().map(Vec::len), Some(3));
    assert!(with_cp[1]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.len() == big.len()));
}

/// splitmix64: a seeded generator without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const CRASH_SCENARIO: &str = r#"{"on_exhausted":"repeat_last","steps":[
  {"kind":"tool_use","text":"Step one.","calls":[{"name":"Bash","input":{"command":"echo step 1"}}]},
  {"kind":"tool_use","calls":[
     {"name":"Bash","input":{"command":"echo step 2a"}},
     {"name":"Bash","input":{"command":"echo step 2b"}}]},
  {"kind":"tool_use","text":"Step three.","calls":[{"name":"Bash","input":{"command":"echo step 3"}}]},
  {"kind":"text","text":"All steps done."}
]}"#;

/// Frames of one complete run of CRASH_SCENARIO: init, then 11 messages, then the result.
const CRASH_FRAMES: u64 = 13;

#[tokio::test]
async fn crash_loop_every_message_shown_before_a_sigkill_survives_and_resumes_well_formed() {
    let seed = std::env::var("KEEL_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let runs: usize = std::env::var("KEEL_CRASH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    println!("crash test: seed {seed}, {runs} runs (rerun with KEEL_CRASH_SEED={seed})");
    let mut rng = Rng(seed);
    let started = std::time::Instant::now();
    let mut repaired = 0;
    for i in 0..runs {
        let h = Harness::from_json(CRASH_SCENARIO).await;
        let frames_before_kill = 1 + rng.below(CRASH_FRAMES);
        let jitter_us = if rng.below(2) == 0 {
            0
        } else {
            rng.below(3000)
        };
        let ctx = format!(
            "seed {seed}, run {i}: kill after {frames_before_kill} frames + {jitter_us} µs"
        );

        let mut live = h.live_stream("do the steps", &["--allowedTools", "Bash"], &[]);
        let seen = std::cell::Cell::new(0);
        live.wait_for(Duration::from_secs(60), |_| {
            seen.set(seen.get() + 1);
            seen.get() == frames_before_kill
        })
        .await;
        if jitter_us > 0 {
            // Not for correctness: lands some kills mid-tool or mid-write.
            tokio::time::sleep(Duration::from_micros(jitter_us)).await;
        }
        let _ = live.child.start_kill();
        tokio::time::timeout(Duration::from_secs(30), live.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{ctx}: keel did not die"))
            .unwrap();

        let id = live.frames[0]["session_id"].as_str().unwrap().to_owned();
        let path = find_transcript(&h.keel_home(), &id)
            .unwrap_or_else(|| panic!("{ctx}: init was shown but there is no transcript"));
        let on_disk = record_uuids(&path);
        for u in message_uuids(&live.frames) {
            assert!(
                on_disk.contains(&u),
                "{ctx}: {u} was shown but is not in {path:?}"
            );
        }

        let run = h
            .run_stream(
                "resume now",
                &["--resume", &id, "--allowedTools", "Bash"],
                &[],
            )
            .await;
        assert_eq!(
            run.code, 0,
            "{ctx}: resume failed\n{}\n{}",
            run.stdout, run.stderr
        );
        assert_eq!(session_id(&run), id);
        repaired += run.of("system/warning").len();
        let body = request_with(&h, "resume now");
        keel_mock::validate_request(&body)
            .unwrap_or_else(|e| panic!("{ctx}: the resumed request is malformed: {e}\n{body}"));
        // Every block shown before the kill went back to the model.
        let sent = body["messages"].to_string();
        for f in live
            .frames
            .iter()
            .filter(|f| f["type"] == "assistant" || f["type"] == "user")
        {
            let block = &f["message"]["content"][0];
            let key = match block["type"].as_str().unwrap() {
                "text" => block["text"].to_string(),
                "tool_use" => block["id"].to_string(),
                "tool_result" => format!("\"tool_use_id\":{}", block["tool_use_id"]),
                other => panic!("{ctx}: unexpected block {other}"),
            };
            assert!(
                sent.contains(&key),
                "{ctx}: {key} was shown but not resumed\n{sent}"
            );
        }
    }
    println!(
        "crash test: {runs} kills and resumes in {:.1} s; {repaired} repair/damage warnings",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn no_session_persistence_writes_no_transcript() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"not kept"}]}"#).await;
    let run = h.run_stream("hi", &["--no-session-persistence"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(
        !h.keel_home().join("projects").exists(),
        "nothing was written under KEEL_HOME"
    );
    assert!(
        !run.stderr.contains("not supported"),
        "the flag is honoured: {}",
        run.stderr
    );
    let bad = h
        .run_stream("hi", &["--no-session-persistence", "--continue"], &[])
        .await;
    assert_eq!(bad.code, 2);
    assert!(bad.stdout.is_empty() && bad.stderr.contains("--no-session-persistence"));
}

#[tokio::test]
async fn a_3_mb_one_line_file_is_edited_with_a_bounded_result_and_the_session_resumes() {
    // A minified file: 3 MB on one line, with the text to change in the middle.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bundle.min.js");
    let half = "x".repeat(1_500_000);
    std::fs::write(&file, format!("{half}OLD_NAME{half}")).unwrap();
    let path = file.to_str().unwrap();
    let scenario = json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Read", "input": {"file_path": path}}]},
        {"kind": "tool_use", "calls": [{"name": "Edit",
            "input": {"file_path": path, "old_string": "OLD_NAME", "new_string": "NEW_NAME"}}]},
        {"kind": "text", "text": "Renamed."},
        {"kind": "text", "text": "Still here."}
    ]});
    let h = Harness::from_json(&scenario.to_string()).await;
    let first = h
        .run_stream("rename it", &["--allowedTools", "Read,Edit"], &[])
        .await;
    first.assert_end("success", false, "completed", 0);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text, format!("{half}NEW_NAME{half}"), "the edit was made");
    let id = session_id(&first);

    // Every request stayed small, and the Edit's result says what changed in a bounded snippet.
    let reqs = h.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        let size = r.body.to_string().len();
        assert!(size < 600_000, "request {} is {size} bytes", r.seq);
    }
    let edit_result = reqs[2].body["messages"].as_array().unwrap().last().unwrap()["content"][0]
        ["content"]
        .to_string();
    assert!(
        edit_result.len() < 8_000,
        "the Edit result is {} bytes",
        edit_result.len()
    );
    assert!(edit_result.contains("NEW_NAME"), "{edit_result}");

    // The session resumes, and what it sends back is as small.
    let again = h
        .run_stream("and now?", &[&format!("--resume={id}")], &[])
        .await;
    again.assert_end("success", false, "completed", 0);
    let reqs = h.requests();
    assert_eq!(reqs.len(), 4);
    let size = reqs[3].body.to_string().len();
    assert!(size < 600_000, "the resumed request is {size} bytes");
    keel_mock::validate_request(&reqs[3].body).unwrap();
}
