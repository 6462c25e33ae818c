//! The foundation's end-to-end behaviour: text replies, each tool, permissions, limits, and
//! what keel-mock received.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::Harness;

/// The tool_result blocks of a logged request's messages, by tool_use id.
fn results_in(body: &Value) -> Vec<(String, String, bool)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let content = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (
                b["tool_use_id"].as_str().unwrap().to_owned(),
                content,
                b["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[tokio::test]
async fn text_reply_prints_init_assistant_result_and_sends_a_real_request() {
    let h =
        Harness::from_json(r#"{"steps":[{"kind":"text","text":"Hello from the mock."}]}"#).await;
    let run = h
        .run_stream("Say hi.", &["--model", "claude-sonnet-4-5"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.frames[0]["type"], "system");
    assert_eq!(run.frames[0]["subtype"], "init");
    assert_eq!(run.frames[0]["cwd"], h.cwd().display().to_string());
    let texts: Vec<&str> = run
        .of("assistant")
        .iter()
        .map(|f| f["message"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Hello from the mock."]);
    let r = run.result();
    assert_eq!(r["result"], "Hello from the mock.");
    assert_eq!(r["num_turns"], 1);
    assert!(r["total_cost_usd"].as_f64().unwrap() > 0.0);
    for k in [
        "duration_ms",
        "duration_api_ms",
        "session_id",
        "usage",
        "permission_denials",
        "uuid",
    ] {
        assert!(r.get(k).is_some(), "result lacks {k}: {r}");
    }
    assert!(run.stderr.is_empty(), "stderr: {}", run.stderr);

    let reqs = h.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(
        req.headers.get("x-api-key").map(String::as_str),
        Some("sk-test-keel")
    );
    assert!(req.headers.contains_key("anthropic-version"));
    assert_eq!(req.body["model"], "claude-sonnet-4-5");
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["messages"][0]["content"][0]["text"], "Say hi.");
    let system = req.body["system"][0]["text"].as_str().unwrap();
    assert!(
        system.contains(&h.cwd().display().to_string()),
        "the system prompt names the working directory"
    );
    let tools: Vec<&str> = req.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "Bash",
            "Read",
            "Write",
            "Edit",
            "Glob",
            "Grep",
            "NotebookEdit",
            "TodoWrite",
            "WebFetch",
            "WebSearch",
            "Task",
            "TaskOutput",
            "KillShell",
            "TaskStop"
        ]
    );
}

#[tokio::test]
async fn text_and_json_output_formats() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"plain answer"}]}"#,
    )
    .await;
    let text = h.run(&["-p", "hi"], &[]).await;
    assert_eq!((text.code, text.stdout.as_str()), (0, "plain answer\n"));
    let json = h.run(&["-p", "hi", "--output-format", "json"], &[]).await;
    let v: Value = serde_json::from_str(json.stdout.trim()).expect("one JSON object");
    assert_eq!(
        (v["type"].as_str(), v["result"].as_str()),
        (Some("result"), Some("plain answer"))
    );
    let verbose = h
        .run(&["-p", "hi", "--output-format", "json", "--verbose"], &[])
        .await;
    let all: Vec<Value> = serde_json::from_str(verbose.stdout.trim()).expect("a JSON array");
    assert_eq!(all.first().unwrap()["subtype"], "init");
    assert_eq!(all.last().unwrap()["type"], "result");
    // The prompt can come on stdin.
    let mut cmd = h.command(&["-p"], &[]);
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"prompt from stdin").await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "plain answer\n");
    let last = h.requests().pop().unwrap();
    assert_eq!(
        last.body["messages"][0]["content"][0]["text"],
        "prompt from stdin"
    );
}

#[tokio::test]
async fn bash_round_trip_runs_the_command_and_sends_its_output() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","text":"Running it.","calls":[{"name":"Bash","input":{"command":"echo made > proof.txt && echo printed-by-bash"}}]},
            {"kind":"text","text":"Done."}]}"#,
    )
    .await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("proof.txt")).unwrap(),
        "made\n",
        "the command really ran"
    );
    let results = run.tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0]["content"]
        .as_str()
        .unwrap()
        .contains("printed-by-bash"));
    let reqs = h.requests();
    assert_eq!(reqs.len(), 2);
    let sent = results_in(&reqs[1].body);
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].1.contains("printed-by-bash") && !sent[0].2,
        "{sent:?}"
    );
    // Order: assistant text, assistant tool_use, user tool_result, assistant text, result.
    let kinds: Vec<String> = run
        .frames
        .iter()
        .skip(1)
        .map(|f| f["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["assistant", "assistant", "user", "assistant", "result"]
    );
}

#[tokio::test]
async fn edit_changes_a_file() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Read","input":{"file_path":"greeting.txt"}}]},
            {"kind":"tool_use","calls":[{"name":"Edit","input":{"file_path":"greeting.txt","old_string":"hello world","new_string":"hello keel"}}]},
            {"kind":"text","text":"Edited."}]}"#,
    )
    .await;
    std::fs::write(h.cwd().join("greeting.txt"), "say: hello world\n").unwrap();
    let run = h
        .run_stream("edit it", &["--permission-mode", "acceptEdits"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("greeting.txt")).unwrap(),
        "say: hello keel\n"
    );
    let sent = results_in(&h.requests()[2].body);
    assert!(!sent.last().unwrap().2, "the edit succeeded: {sent:?}");
}

#[tokio::test]
async fn glob_and_grep_find_what_they_should() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[
                {"name":"Glob","input":{"pattern":"**/*.rs"}},
                {"name":"Grep","input":{"pattern":"fn needle","output_mode":"files_with_matches"}}]},
            {"kind":"text","text":"Found."}]}"#,
    )
    .await;
    let src = h.cwd().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.rs"), "fn needle() {}\n").unwrap();
    std::fs::write(src.join("b.rs"), "fn other() {}\n").unwrap();
    std::fs::write(h.cwd().join("notes.md"), "fn needle in markdown\n").unwrap();
    std::fs::create_dir_all(h.cwd().join("target")).unwrap();
    std::fs::write(h.cwd().join("target/ignored.rs"), "fn needle() {}\n").unwrap();
    std::fs::write(h.cwd().join(".gitignore"), "target/\n").unwrap();
    // The ignore rules apply inside a git repository.
    std::fs::create_dir_all(h.cwd().join(".git")).unwrap();
    let run = h.run_stream("look", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let sent = results_in(&h.requests()[1].body);
    let (glob, grep) = (&sent[0].1, &sent[1].1);
    assert!(glob.contains("a.rs") && glob.contains("b.rs"), "{glob}");
    assert!(
        !glob.contains("ignored.rs") && !glob.contains("notes.md"),
        "{glob}"
    );
    assert!(grep.contains("a.rs") && grep.contains("notes.md"), "{grep}");
    assert!(
        !grep.contains("b.rs") && !grep.contains("ignored.rs"),
        "{grep}"
    );
}

#[tokio::test]
async fn two_read_only_calls_in_one_reply_run_in_parallel() {
    // Two FIFOs, and a writer that feeds the second before the first: if the reads ran one
    // after the other, the first would wait forever for a writer that waits for the second.
    // (`cat` through Bash: the Read tool refuses FIFOs, which could hang it.)
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[
                {"name":"Bash","input":{"command":"cat one.fifo"}},
                {"name":"Bash","input":{"command":"cat two.fifo"}}]},
            {"kind":"text","text":"Read both."}]}"#,
    )
    .await;
    for f in ["one.fifo", "two.fifo"] {
        assert!(std::process::Command::new("mkfifo")
            .arg(h.cwd().join(f))
            .status()
            .unwrap()
            .success());
    }
    let (one, two) = (h.cwd().join("one.fifo"), h.cwd().join("two.fifo"));
    let writer = std::thread::spawn(move || {
        let fed_second_first = write_when_read(&two, "second file\n", Duration::from_secs(30));
        // Feed the first regardless, so a sequential keel is not left hanging.
        write_when_read(&one, "first file\n", Duration::from_secs(30));
        if !fed_second_first {
            write_when_read(&two, "second file\n", Duration::from_secs(30));
        }
        fed_second_first
    });
    let run = h.run_stream("read both", &[], &[]).await;
    assert!(
        writer.join().unwrap(),
        "the second Read was not reading while the first waited: the Reads did not run in parallel"
    );
    run.assert_end("success", false, "completed", 0);
    let sent = results_in(&h.requests()[1].body);
    assert!(
        sent[0].1.contains("first file") && sent[1].1.contains("second file"),
        "{sent:?}"
    );
}

/// Open a FIFO for writing once somebody reads it (non-blocking, so it can give up), then write.
fn write_when_read(path: &std::path::Path, text: &str, timeout: Duration) -> bool {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(path)
        {
            Ok(mut f) => {
                f.write_all(text.as_bytes()).unwrap();
                return true;
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("{e}"),
        }
    }
    false
}

#[tokio::test]
async fn an_invented_tool_gets_an_error_result_and_the_loop_goes_on() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"TeleportFile","input":{"to":"mars"}}]},
            {"kind":"text","text":"Sorry."}]}"#,
    )
    .await;
    let run = h.run_stream("go", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let sent = results_in(&h.requests()[1].body);
    assert!(sent[0].2, "is_error");
    assert!(
        sent[0].1.contains("TeleportFile") && sent[0].1.contains("Bash"),
        "names the tool and lists real ones: {}",
        sent[0].1
    );
}

#[tokio::test]
async fn a_schema_violation_gets_an_error_result_naming_the_field() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Read","input":{"path":"x.txt"}}]},
            {"kind":"text","text":"Oops."}]}"#,
    )
    .await;
    let run = h.run_stream("go", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let sent = results_in(&h.requests()[1].body);
    assert!(sent[0].2 && sent[0].1.contains("file_path"), "{sent:?}");
}

#[tokio::test]
async fn a_denied_tool_shows_in_permission_denials() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"touch made_by_tool.txt"}}]},
            {"kind":"text","text":"I could not."}]}"#,
    )
    .await;
    let run = h.run_stream("make a file", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(
        !h.cwd().join("made_by_tool.txt").exists(),
        "the denied command did not run"
    );
    let denied = run.of("system/permission_denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["tool_name"], "Bash");
    let r = run.result();
    assert_eq!(r["permission_denials"].as_array().unwrap().len(), 1);
    assert_eq!(
        r["permission_denials"][0]["tool_input"]["command"],
        "touch made_by_tool.txt"
    );
    let sent = results_in(&h.requests()[1].body);
    assert!(
        sent[0].2 && sent[0].1.contains("--allowedTools"),
        "says how to allow it: {}",
        sent[0].1
    );
    // A read-only command needs no rule.
    let h2 = Harness::from_json(r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo fine"}}]},{"kind":"text","text":"ok"}]}"#).await;
    let run2 = h2.run_stream("echo", &[], &[]).await;
    assert!(run2.of("system/permission_denied").is_empty());
    assert!(!results_in(&h2.requests()[1].body)[0].2);
}

#[tokio::test]
async fn max_turns_ends_with_error_max_turns_and_a_limit_exit_code() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo again"}}]}]}"#,
    )
    .await;
    let run = h.run_stream("loop", &["--max-turns", "1"], &[]).await;
    run.assert_end("error_max_turns", true, "max_turns", 3);
    let r = run.result();
    assert_eq!(r["errors"], json!(["Reached maximum number of turns (1)"]));
    assert_eq!(r["num_turns"], 2);
    assert_eq!(
        h.requests().len(),
        1,
        "the run stopped before a second model call"
    );
    assert_eq!(run.tool_results().len(), 1, "the first call's tool ran");
    assert!(
        run.stderr.contains("turn limit"),
        "one clear stderr line: {}",
        run.stderr
    );
}

#[tokio::test]
async fn keel_mock_rejects_an_unpaired_tool_use() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"never"}]}"#).await;
    let body = json!({
        "model": "m", "max_tokens": 10, "stream": false,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": "no result here"}
        ]
    });
    let resp = reqwest_post(&format!("{}/v1/messages", h.mock.base_url()), &body).await;
    assert_eq!(resp.0, 400);
    assert!(resp.1.contains("toolu_1"), "{}", resp.1);
    assert!(keel_mock::validate_request(&body).is_err());
}

async fn reqwest_post(url: &str, body: &Value) -> (u16, String) {
    // A tiny HTTP/1.1 client over a raw socket keeps the CLI's test deps small.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let path = format!(
        "/{}",
        url.trim_start_matches("http://").split_once('/').unwrap().1
    );
    let payload = body.to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let req = format!("POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, text)
}

#[tokio::test]
async fn argument_errors_are_clear_and_print_nothing_on_stdout() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let cases: [(&[&str], &str); 4] = [
        (
            &["-p", "x", "--output-format", "stream-json"],
            "requires --verbose",
        ),
        (&["-p"], "Input must be provided"),
        (&["-p", "x", "--no-such-flag"], "--no-such-flag"),
        (&["-p", "x", "--permission-mode", "yolo"], "yolo"),
    ];
    for (args, needle) in cases {
        let run = h.run(args, &[]).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(
            run.stdout.is_empty(),
            "{args:?} printed on stdout: {}",
            run.stdout
        );
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
    assert!(h.requests().is_empty());
    // Without a key (and without a gateway URL), keel says how to get one.
    let mut cmd = h.command(&["-p", "x"], &[]);
    cmd.env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL");
    let out = cmd.output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        err.contains("ANTHROPIC_API_KEY") && err.contains("keel demo"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_environment_agents_and_settings_are_usage_errors_that_name_their_source() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    std::fs::create_dir_all(h.cwd().join(".claude")).unwrap();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (
            &["-p", "x"],
            &[("KEEL_BASH_DEFAULT_TIMEOUT_MS", "0")],
            "KEEL_BASH_DEFAULT_TIMEOUT_MS=\"0\"",
        ),
        (
            &["-p", "x"],
            &[("KEEL_SUBAGENT_MAX_CONCURRENCY", "lots")],
            "KEEL_SUBAGENT_MAX_CONCURRENCY",
        ),
        (
            &["-p", "x"],
            &[("KEEL_STREAM_IDLE_TIMEOUT_MS", "-5")],
            "KEEL_STREAM_IDLE_TIMEOUT_MS",
        ),
        (&["-p", "x", "--agents", "{bad"], &[], "--agents"),
        (
            &["-p", "x"],
            &[("ANTHROPIC_BASE_URL", "not a url")],
            "ANTHROPIC_BASE_URL",
        ),
    ];
    for (args, env, needle) in cases {
        let run = h.run(args, env).await;
        assert_eq!(run.code, 2, "{env:?} {args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(needle), "{env:?}: {}", run.stderr);
    }
    // A settings file whose `permissions` has the wrong type is refused, never skipped: its
    // deny rules would silently stop applying.
    std::fs::write(
        h.cwd().join(".claude/settings.json"),
        r#"{"permissions": ["Bash(rm:*)"]}"#,
    )
    .unwrap();
    let run = h.run(&["-p", "x"], &[]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("settings.json") && run.stderr.contains("`permissions`"),
        "{}",
        run.stderr
    );
    assert!(h.requests().is_empty(), "no run started");
}

#[tokio::test]
async fn long_output_keeps_head_and_tail_and_saves_the_whole_beside_the_session() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"seq 1 200000"}}]},
            {"kind":"text","text":"long"}]}"#,
    )
    .await;
    let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let sent = &results_in(&h.requests()[1].body)[0].1;
    assert!(
        sent.starts_with("1\n2\n3\n") && sent.trim_end().ends_with("200000"),
        "head and tail are kept"
    );
    assert!(
        sent.len() < 100_000,
        "the model gets a bounded text ({} bytes)",
        sent.len()
    );
    let marker = sent
        .lines()
        .find(|l| l.contains("omitted"))
        .expect("an explicit marker");
    let path = marker
        .split("saved to ")
        .nth(1)
        .expect("the marker names the file")
        .trim_end_matches(" ...]")
        .to_owned();
    assert!(
        path.starts_with(&h.keel_home().display().to_string()),
        "{path}"
    );
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full.lines().count(), 200_000, "the whole output was saved");
}
