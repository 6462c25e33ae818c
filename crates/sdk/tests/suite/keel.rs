//! Against the real keel binary and keel-mock: one-shot `-p` runs (`PromptMode::Argv`) and
//! stream-json sessions with control requests and callbacks.
//!
//! The keel binary is found next to this test binary (a workspace build made it), or at
//! `KEEL_BIN`; when neither has one, the tests build it once through cargo, so
//! `cargo test -p keel-sdk` works on a fresh clone.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use keel_mock::{MockServer, Scenario};
use keel_sdk::{
    execute_prompt, query, Client, Error, Escalation, HookMatcher, Options, PermissionResult,
    PromptMode,
};
use serde_json::json;

use super::common::{bounded, collect, split, wait_gone};

fn keel_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(find_or_build_keel).clone()
}

fn find_or_build_keel() -> PathBuf {
    if let Ok(p) = std::env::var("KEEL_BIN") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/all-<hash> → target/<profile>/keel
    let profile_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()));
    let beside = profile_dir.as_ref().map(|d| d.join("keel"));
    if let Some(p) = beside.as_ref().filter(|p| p.is_file()) {
        return p.clone();
    }
    // Not built yet (`cargo test -p keel-sdk` on a fresh clone): build it the same way.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "-p", "keel-cli", "--bin", "keel"])
        .current_dir(&root);
    if let Some(target) = profile_dir.as_ref().and_then(|d| d.parent()) {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    let status = cmd
        .status()
        .expect("running cargo to build the keel binary");
    assert!(
        status.success(),
        "building the keel binary failed: {status}"
    );
    match beside.filter(|p| p.is_file()) {
        Some(p) => p,
        None => panic!("the keel binary is missing after building it; set KEEL_BIN to one"),
    }
}

struct Keel {
    mock: MockServer,
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Keel {
    async fn new(scenario: &str) -> Keel {
        let scenario = Scenario::from_json(scenario).expect("scenario parses");
        Keel {
            mock: MockServer::start(scenario).await.expect("keel-mock starts"),
            dir: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// `-p PROMPT` runs.
    fn options(&self) -> Options {
        Options {
            prompt_mode: Some(PromptMode::Argv),
            ..self.stream_options()
        }
    }

    /// stream-json sessions (the SDK default).
    fn stream_options(&self) -> Options {
        Options::default()
            .with_cli_path(keel_bin())
            .with_cwd(self.dir.path())
            .with_env("HOME", self.home.path().to_string_lossy())
            .with_env("KEEL_HOME", self.home.path().join("keel").to_string_lossy())
            .with_env("ANTHROPIC_BASE_URL", self.mock.base_url())
            .with_env("ANTHROPIC_API_KEY", "sk-test-keel-sdk")
    }
}

const LOOP: &str = r#"{"on_exhausted":"repeat_last","steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"echo hi"}}]}]}"#;

#[tokio::test]
async fn query_streams_a_successful_run() {
    let k = Keel::new(r#"{"steps":[{"kind":"text","text":"hello from the mock"}]}"#).await;
    let (msgs, errs) = split(collect(query("Say hello", k.options())).await);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(msgs.first().and_then(|m| m.system_subtype()), Some("init"));
    let text: String = msgs.iter().filter_map(|m| m.assistant_text()).collect();
    assert_eq!(text, "hello from the mock");
    let r = msgs
        .last()
        .and_then(|m| m.as_result())
        .expect("ends with a result");
    assert!(!r.is_error);
    assert_eq!(r.result.as_deref(), Some("hello from the mock"));
}

#[tokio::test]
async fn max_turns_yields_the_result_then_a_result_error() {
    let k = Keel::new(LOOP).await;
    let opts = Options {
        max_turns: Some(1),
        allowed_tools: vec!["Bash".into()],
        ..k.options()
    };
    let items = collect(query("loop forever", opts)).await;
    let n = items.len();
    assert!(n >= 2, "{items:?}");
    let result = items[n - 2]
        .as_ref()
        .expect("the result message comes first");
    assert_eq!(
        result.as_result().map(|r| r.subtype.as_str()),
        Some("error_max_turns")
    );
    match &items[n - 1] {
        Err(e @ Error::Result(r)) => {
            assert!(
                e.to_string().contains("Reached maximum number of turns"),
                "{e}"
            );
            assert_eq!(r.terminal_reason.as_deref(), Some("max_turns"));
            assert_eq!(r.exit_code, 3);
        }
        other => panic!("expected Error::Result, got {other:?}"),
    }
}

#[tokio::test]
async fn execute_prompt_reports_success() {
    let k = Keel::new(r#"{"steps":[{"kind":"text","text":"four"}]}"#).await;
    let r = execute_prompt("2+2?", k.options()).await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.output, "four");
    assert_eq!(r.num_turns, 1);
    assert_eq!(r.exit_code, Some(0));
    assert!(r.session_id.is_some());
    assert_eq!(k.mock.requests().len(), 1);
}

#[tokio::test]
async fn execute_prompt_reports_the_limit_with_keels_stderr() {
    let k = Keel::new(LOOP).await;
    let opts = Options {
        max_turns: Some(1),
        allowed_tools: vec!["Bash".into()],
        ..k.options()
    };
    let r = execute_prompt("loop forever", opts).await;
    assert!(!r.success);
    assert_eq!(r.exit_code, Some(3));
    let error = r.error.expect("an error");
    assert!(error.contains("turn limit"), "{error}");
    assert!(
        !error.contains("exit code 3"),
        "the real stderr, not the generic line: {error}"
    );
}

#[tokio::test]
async fn a_usage_error_is_a_process_error_with_keels_stderr() {
    let k = Keel::new(r#"{"steps":[{"kind":"text","text":"x"}]}"#).await;
    let opts = Options {
        permission_mode: Some("no-such-mode".into()),
        ..k.options()
    };
    let (_, errs) = split(collect(query("x", opts)).await);
    match errs.as_slice() {
        [Error::Process {
            exit_code: 2,
            stderr,
        }] => {
            assert!(stderr.contains("no-such-mode"), "{stderr}")
        }
        other => panic!("expected Process exit 2, got {other:?}"),
    }
}

#[tokio::test]
async fn stream_json_max_turns_yields_the_result_then_a_result_error() {
    let k = Keel::new(LOOP).await;
    let opts = Options {
        max_turns: Some(1),
        allowed_tools: vec!["Bash".into()],
        ..k.stream_options()
    };
    let items = collect(query("loop forever", opts)).await;
    let n = items.len();
    assert!(items[n - 2].as_ref().unwrap().is_result(), "{items:?}");
    match &items[n - 1] {
        Err(e @ Error::Result(r)) => {
            assert_eq!(e.to_string(), "Reached maximum number of turns (1)");
            assert_eq!(r.exit_code, 3);
            assert!(r.stderr.contains("turn limit"), "{}", r.stderr);
        }
        other => panic!("expected Error::Result, got {other:?}"),
    }
}

#[tokio::test]
async fn a_query_answers_keels_hook_and_permission_questions() {
    let k = Keel::new(
        r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"touch made_by_tool.txt"}}]},{"kind":"text","text":"created it"}]}"#,
    )
    .await;
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (s1, s2) = (seen.clone(), seen.clone());
    let opts = k
        .stream_options()
        .with_hook(
            "PreToolUse",
            HookMatcher::new(Some("Bash")).callback(move |input| {
                let seen = s1.clone();
                async move {
                    let command = input.input["tool_input"]["command"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned();
                    seen.lock().unwrap().push(format!("hook {command}"));
                    Ok(json!({"continue": true}))
                }
            }),
        )
        .with_can_use_tool(move |req| {
            let seen = s2.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(format!("ask {} {}", req.tool_name, req.input["command"]));
                Ok(PermissionResult::allow())
            }
        });
    let (msgs, errs) = split(collect(query("Create made_by_tool.txt", opts)).await);
    assert!(errs.is_empty(), "{errs:?}");
    let r = msgs.last().and_then(|m| m.as_result()).expect("a result");
    assert!(!r.is_error, "{r:?}");
    assert_eq!(r.result.as_deref(), Some("created it"));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "hook touch made_by_tool.txt",
            "ask Bash \"touch made_by_tool.txt\""
        ]
    );
    assert!(k.dir.path().join("made_by_tool.txt").exists());
}

#[tokio::test]
async fn a_denial_reaches_the_model_with_the_hosts_reason() {
    let k = Keel::new(
        r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"touch nope.txt"}}]},{"kind":"text","text":"ok, I will not"}]}"#,
    )
    .await;
    let opts = k.stream_options().with_can_use_tool(|_| async {
        Ok(PermissionResult::deny("the host forbids writing files"))
    });
    let (msgs, errs) = split(collect(query("Create nope.txt", opts)).await);
    assert!(errs.is_empty(), "{errs:?}");
    assert!(msgs.last().unwrap().is_result());
    assert!(!k.dir.path().join("nope.txt").exists());
    let second = &k.mock.requests()[1].body;
    assert!(
        second
            .to_string()
            .contains("the host forbids writing files"),
        "the model was told why: {second}"
    );
}

#[tokio::test]
async fn a_client_interrupts_a_running_tool_then_runs_another_turn() {
    let k = Keel::new(
        r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"sleep 30"}}]},{"kind":"text","text":"second answer"}]}"#,
    )
    .await;
    let opts = Options {
        allowed_tools: vec!["Bash".into()],
        ..k.stream_options()
    };
    let mut client = bounded(Client::connect(opts)).await.expect("connects");
    assert!(client.server_info().is_object());
    client.query("sleep a while").await.unwrap();
    // Wait until the tool call has been made, then interrupt.
    loop {
        let m = bounded(client.next_message()).await.unwrap().unwrap();
        if m.kind() == "assistant" {
            break;
        }
    }
    let receipt = bounded(client.interrupt()).await.unwrap();
    assert!(receipt.get("still_queued").is_some(), "{receipt}");
    let turn: Vec<_> = bounded(client.receive_response().collect::<Vec<_>>()).await;
    let r = turn
        .last()
        .unwrap()
        .as_ref()
        .unwrap()
        .as_result()
        .cloned()
        .unwrap();
    assert!(r.is_error, "an interrupted turn is not a success: {r:?}");

    assert_eq!(
        bounded(client.set_model(Some("claude-other")))
            .await
            .unwrap()["model"],
        "claude-other"
    );
    match bounded(client.set_permission_mode("no-such-mode")).await {
        Err(Error::ControlError { error_code, .. }) => {
            assert_eq!(error_code.as_deref(), Some("invalid_mode"))
        }
        other => panic!("expected ControlError, got {other:?}"),
    }
    assert_eq!(
        bounded(client.set_max_thinking_tokens(Some(2048)))
            .await
            .unwrap()["max_thinking_tokens"],
        2048
    );
    client.query("and now?").await.unwrap();
    let turn: Vec<_> = bounded(client.receive_response().collect::<Vec<_>>()).await;
    let text: String = turn
        .iter()
        .filter_map(|m| m.as_ref().ok().and_then(|m| m.assistant_text()))
        .collect();
    assert_eq!(text, "second answer", "{turn:?}");
    assert_eq!(k.mock.requests()[1].body["model"], "claude-other");
    // The prompt goes into the interrupted call's tool-result message: the request continues
    // a tool loop begun without thinking, where the API refuses it; the budget applies from
    // the next prompt (keel-mock checks this as the API does).
    assert!(
        k.mock.requests()[1].body.get("thinking").is_none(),
        "{}",
        k.mock.requests()[1].body
    );
    let closed = bounded(client.close()).await;
    assert_eq!(closed.escalation, Escalation::None);
}

#[tokio::test]
async fn dropping_a_client_mid_tool_leaves_neither_keel_nor_its_tool_behind() {
    // A distinctive duration, to find the tool's process.
    let k = Keel::new(
        r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":{"command":"sleep 987.654"}}]}]}"#,
    )
    .await;
    let opts = Options {
        allowed_tools: vec!["Bash".into()],
        ..k.stream_options()
    };
    let mut client = bounded(Client::connect(opts)).await.expect("connects");
    let pid = client.pid();
    client.query("sleep").await.unwrap();
    loop {
        let m = bounded(client.next_message()).await.unwrap().unwrap();
        if m.kind() == "assistant" {
            break;
        }
    }
    let tool = bounded(async {
        loop {
            if let Some(p) = find_process("987.654") {
                return p;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    drop(client);
    wait_gone(pid).await;
    wait_gone(tool).await;
}

/// A process whose command line contains `needle`.
fn find_process(needle: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        (cmd.contains(needle) && !super::common::process_gone(pid)).then_some(pid)
    })
}

/// The main agent delegates; its subagent runs `first`, then `second`, then both finish.
fn delegating(first: &str, second: &str) -> String {
    let m = |who: &str| json!({"first_user_contains": who});
    json!({"steps": [
        {"match": m("MAIN"), "kind": "tool_use", "calls": [{"name": "Task", "id": "toolu_task", "input": {
            "description": "delegated", "prompt": "SUB: do it", "subagent_type": "general-purpose"}}]},
        {"match": m("SUB"), "kind": "tool_use", "calls": [{"name": "Bash", "id": "toolu_sub_1", "input": {"command": first}}]},
        {"match": m("SUB"), "kind": "tool_use", "calls": [{"name": "Bash", "id": "toolu_sub_2", "input": {"command": second}}]},
        {"match": m("SUB"), "kind": "text", "text": "sub finished"},
        {"match": m("MAIN"), "kind": "text", "text": "main finished"}
    ]})
    .to_string()
}

/// The tool_result a request to the mock carried for `id`.
fn tool_result(k: &Keel, id: &str) -> serde_json::Value {
    k.mock
        .requests()
        .iter()
        .rev()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("no tool_result for {id}"))
}

#[tokio::test]
async fn a_hosts_hook_and_an_approvals_rule_bind_inside_a_subagent() {
    let k = Keel::new(&delegating("touch first.txt", "rm first.txt")).await;
    let hooked = Arc::new(Mutex::new(Vec::<String>::new()));
    let h = hooked.clone();
    let opts = k
        .stream_options()
        .with_hook(
            "PreToolUse",
            HookMatcher::new(Some("Bash")).callback(move |input| {
                let hooked = h.clone();
                async move {
                    hooked.lock().unwrap().push(
                        input.input["tool_input"]["command"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned(),
                    );
                    Ok(json!({"continue": true}))
                }
            }),
        )
        .with_can_use_tool(|_req| async {
            // Allow this call, and deny every `rm` from now on, for the whole session.
            Ok(PermissionResult::Allow {
                updated_input: None,
                updated_permissions: Some(vec![json!({"type": "addRules", "behavior": "deny",
                    "rules": [{"toolName": "Bash", "ruleContent": "rm:*"}], "destination": "session"})]),
            })
        });
    let (msgs, errs) = split(collect(query("MAIN: delegate it", opts)).await);
    assert!(errs.is_empty(), "{errs:?}");
    let r = msgs.last().and_then(|m| m.as_result()).expect("a result");
    assert_eq!(r.result.as_deref(), Some("main finished"), "{r:?}");
    assert_eq!(
        *hooked.lock().unwrap(),
        ["touch first.txt", "rm first.txt"],
        "the host's hook was asked about both of the subagent's calls"
    );
    let second = tool_result(&k, "toolu_sub_2");
    assert_eq!(second["is_error"], true, "{second}");
    assert!(
        second.to_string().contains("Bash(rm:*)"),
        "the approval's rule denied the subagent's rm: {second}"
    );
    assert!(k.dir.path().join("first.txt").exists(), "rm did not run");
}
