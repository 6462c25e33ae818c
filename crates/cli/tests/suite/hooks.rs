//! Hooks from the settings files users keep (`.claude/settings.json` here): they run, they
//! block, and when they fail they fail closed.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::common::Harness;

/// Write the project settings file with these hooks (and extra top-level fields).
fn settings(dir: &Path, hooks: Value, extra: Value) {
    let mut v = json!({ "hooks": hooks });
    if let Value::Object(m) = extra {
        for (k, x) in m {
            v[k] = x;
        }
    }
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    std::fs::write(dir.join(".claude/settings.json"), v.to_string()).unwrap();
}

fn pre(matcher: &str, command: &str, more: Value) -> Value {
    let mut h = json!({"type": "command", "command": command});
    if let Value::Object(m) = more {
        for (k, x) in m {
            h[k] = x;
        }
    }
    json!({"PreToolUse": [{"matcher": matcher, "hooks": [h]}]})
}

fn steps(calls: Value) -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": calls},
        {"kind": "text", "text": "done"}
    ]})
    .to_string()
}

async fn run(h: &Harness, extra: &[&str]) -> super::common::Run {
    let mut args = vec!["-p", "go", "--output-format", "stream-json", "--verbose"];
    args.extend_from_slice(extra);
    tokio::time::timeout(Duration::from_secs(120), h.run(&args, &[]))
        .await
        .expect("keel ends")
}

#[tokio::test]
async fn exit_2_blocks_bash_edit_and_task_and_the_model_reads_why() {
    let h = Harness::from_json(&steps(json!([
        {"name": "Bash", "input": {"command": "touch ran.txt"}},
        {"name": "Edit", "input": {"file_path": "a.txt", "old_string": "a", "new_string": "b"}},
        {"name": "Task", "input": {"description": "d", "prompt": "SUB go", "subagent_type": "general-purpose"}}
    ])))
    .await;
    std::fs::write(h.cwd().join("a.txt"), "a").unwrap();
    settings(
        h.cwd(),
        pre(
            "Bash|Edit|Task",
            "cat > /dev/null; echo 'team policy says no' >&2; exit 2",
            json!({}),
        ),
        json!({}),
    );
    let r = run(&h, &["--permission-mode", "bypassPermissions"]).await;
    r.assert_end("success", false, "completed", 0);
    assert!(!h.cwd().join("ran.txt").exists(), "Bash was blocked");
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("a.txt")).unwrap(),
        "a",
        "Edit was blocked"
    );
    let results = r.tool_results();
    assert_eq!(results.len(), 3);
    for res in results {
        assert_eq!(res["is_error"], true, "{res}");
        assert!(
            res["content"].to_string().contains("team policy says no"),
            "{res}"
        );
    }
    // The subagent never ran: only the main agent's two requests reached the model.
    assert_eq!(h.requests().len(), 2);
}

#[tokio::test]
async fn a_hook_that_hangs_is_killed_at_its_deadline_and_blocks() {
    let h = Harness::from_json(&steps(
        json!([{"name": "Bash", "input": {"command": "touch ran.txt"}}]),
    ))
    .await;
    let pidfile = h.cwd().join("hook.pid");
    settings(
        h.cwd(),
        pre(
            "Bash",
            &format!("echo $$ > {}; exec sleep 600", pidfile.display()),
            json!({"timeout": 1}),
        ),
        json!({}),
    );
    let started = std::time::Instant::now();
    let r = run(&h, &["--allowedTools", "Bash"]).await;
    r.assert_end("success", false, "completed", 0);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the deadline held"
    );
    assert!(!h.cwd().join("ran.txt").exists());
    let res = r.tool_results()[0];
    assert!(res["content"].to_string().contains("deadline"), "{res}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        super::common::eventually(Duration::from_secs(10), || !Path::new(&format!(
            "/proc/{pid}"
        ))
        .exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z ")))
        .await,
        "the hung hook was killed"
    );
}

#[tokio::test]
async fn a_hook_that_crashes_or_cannot_start_blocks_unless_it_opts_out() {
    for (cmd, more, blocked) in [
        ("kill -SEGV $$", json!({}), true),
        ("exit 1", json!({}), true),
        ("/nonexistent/guard.sh", json!({}), true),
        ("echo '{not json'", json!({}), true),
        ("exit 1", json!({"onFailure": "allow"}), false),
    ] {
        let h = Harness::from_json(&steps(
            json!([{"name": "Bash", "input": {"command": "touch ran.txt"}}]),
        ))
        .await;
        settings(h.cwd(), pre("Bash", cmd, more.clone()), json!({}));
        let r = run(&h, &["--allowedTools", "Bash"]).await;
        r.assert_end("success", false, "completed", 0);
        assert_eq!(
            !h.cwd().join("ran.txt").exists(),
            blocked,
            "hook {cmd:?} {more}: {}",
            r.tool_results()[0]
        );
        if blocked {
            let text = r.tool_results()[0]["content"].to_string();
            assert!(
                text.contains("fails closed") && text.contains("settings.json"),
                "{text}"
            );
        }
    }
}

#[tokio::test]
async fn an_updated_input_is_judged_again_and_a_hook_allow_never_beats_a_deny_rule() {
    for answer in [
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
               "updatedInput": {"command": "rm victim.txt"}}}),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}),
    ] {
        let first = if answer["hookSpecificOutput"]["updatedInput"].is_null() {
            "rm victim.txt"
        } else {
            "echo harmless"
        };
        let h = Harness::from_json(&steps(
            json!([{"name": "Bash", "input": {"command": first}}]),
        ))
        .await;
        std::fs::write(h.cwd().join("victim.txt"), "keep").unwrap();
        std::fs::write(h.cwd().join("answer.json"), answer.to_string()).unwrap();
        settings(
            h.cwd(),
            pre("Bash", "cat > /dev/null; cat answer.json", json!({})),
            json!({}),
        );
        let r = run(
            &h,
            &["--allowedTools", "Bash", "--disallowedTools", "Bash(rm:*)"],
        )
        .await;
        r.assert_end("success", false, "completed", 0);
        assert!(
            h.cwd().join("victim.txt").exists(),
            "the deny rule held for {answer}"
        );
        assert_eq!(r.tool_results()[0]["is_error"], true);
    }
}

#[tokio::test]
async fn post_tool_use_stop_and_session_hooks_run_with_their_input() {
    let h = Harness::from_json(&steps(
        json!([{"name": "Bash", "input": {"command": "echo out"}}]),
    ))
    .await;
    let log = |event: &str| json!([{"hooks": [{"type": "command", "command": format!("cat >> events.{event}.jsonl; echo >> events.{event}.jsonl")}]}]);
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        json!({"hooks": {
            "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "cat >> events.PostToolUse.jsonl; echo >> events.PostToolUse.jsonl; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", \"additionalContext\": \"checked by the team hook\"}}'"}]}],
            "Stop": log("Stop"),
            "SessionStart": log("SessionStart"),
            "SessionEnd": log("SessionEnd"),
            "UserPromptSubmit": log("UserPromptSubmit"),
        }})
        .to_string(),
    )
    .unwrap();
    let r = run(&h, &[]).await;
    r.assert_end("success", false, "completed", 0);
    let read = |event: &str| -> Vec<Value> {
        std::fs::read_to_string(h.cwd().join(format!("events.{event}.jsonl")))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let post = read("PostToolUse");
    assert_eq!(post.len(), 1, "PostToolUse ran once");
    assert_eq!(post[0]["hook_event_name"], "PostToolUse");
    assert_eq!(post[0]["tool_input"]["command"], "echo out");
    assert!(r.tool_results()[0]["content"]
        .to_string()
        .contains("checked by the team hook"));
    for event in ["Stop", "SessionStart", "SessionEnd", "UserPromptSubmit"] {
        let got = read(event);
        assert_eq!(got.len(), 1, "{event} ran once");
        assert_eq!(got[0]["hook_event_name"], event);
        assert!(got[0]["session_id"].is_string());
    }
    assert_eq!(read("SessionStart")[0]["source"], "startup");
}

#[tokio::test]
async fn a_broken_hooks_setting_names_the_file_and_the_field() {
    let h = Harness::from_json(&steps(
        json!([{"name": "Bash", "input": {"command": "echo x"}}]),
    ))
    .await;
    settings(
        h.cwd(),
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command"}]}]}),
        json!({}),
    );
    let r = run(&h, &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("settings.json")
            && r.stderr.contains("hooks.PreToolUse[0].hooks[0].command"),
        "{}",
        r.stderr
    );
    assert!(h.requests().is_empty(), "nothing ran");
}
