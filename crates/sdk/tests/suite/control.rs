//! The control protocol and the process lifecycle of a `Client`, against fake CLIs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use keel_sdk::{query, Client, Error, Escalation, HookMatcher, Options, PermissionResult};
use serde_json::{json, Value};

use super::common::{bounded, collect, split, wait_gone, Fake};

fn find(frames: &[Value], pred: impl Fn(&Value) -> bool) -> &Value {
    frames
        .iter()
        .find(|f| pred(f))
        .unwrap_or_else(|| panic!("no such frame in {frames:#?}"))
}

fn response_to<'a>(frames: &'a [Value], id: &str) -> &'a Value {
    find(frames, |f| {
        f["type"] == "control_response" && f["response"]["request_id"] == id
    })
}

#[tokio::test]
async fn hooks_and_permission_callbacks_are_registered_and_answered() {
    let fake = Fake::new(
        r#"init
next   # the prompt
printf '{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback","callback_id":"hook_0","tool_use_id":"t1","input":{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}}}\n'
next
printf '{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"t1","permission_suggestions":[]}}\n'
next
printf '{"type":"control_request","request_id":"p2","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"/etc/passwd"},"tool_use_id":"t2"}}\n'
next
printf '{"type":"control_request","request_id":"e1","request":{"subtype":"elicitation","message":"?"}}\n'
next
result_ok "done"
while next; do :; done"#,
    );
    let opts = fake
        .options()
        .with_hook(
            "PreToolUse",
            HookMatcher::new(Some("Bash"))
                .timeout(Duration::from_secs(30))
                .callback(|input| async move {
                    assert_eq!(input.event(), Some("PreToolUse"));
                    assert_eq!(input.tool_use_id.as_deref(), Some("t1"));
                    Ok(json!({"continue": true, "reason": format!("saw {}", input.tool_name().unwrap_or("?"))}))
                }),
        )
        .with_can_use_tool(|req| async move {
            Ok(if req.tool_name == "Bash" {
                PermissionResult::allow()
            } else {
                PermissionResult::deny(format!("no writes to {}", req.input["file_path"]))
            })
        });
    let mut client = bounded(Client::connect(opts)).await.expect("connects");
    assert_eq!(client.server_info()["commands"], json!([]));
    client.query("go").await.unwrap();
    let turn: Vec<_> = bounded(client.receive_response().collect::<Vec<_>>()).await;
    assert!(turn.last().unwrap().as_ref().unwrap().is_result());
    let closed = bounded(client.close()).await;
    assert_eq!(closed.escalation, Escalation::None);
    assert_eq!(closed.exit_code, Some(0));

    let argv = fake.argv();
    assert!(
        argv.windows(2)
            .any(|w| w == ["--permission-prompt-tool", "stdio"]),
        "{argv:?}"
    );
    assert_eq!(argv[argv.len() - 2..], ["--input-format", "stream-json"]);

    let stdin = fake.stdin_frames();
    let init = &stdin[0];
    assert_eq!(init["type"], "control_request");
    assert!(init["request_id"].as_str().unwrap().starts_with("req_1_"));
    assert_eq!(
        init["request"],
        json!({"subtype": "initialize", "hooks": {"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0"], "timeout": 30}]}})
    );
    assert_eq!(
        response_to(&stdin, "h1")["response"],
        json!({"subtype": "success", "request_id": "h1", "response": {"continue": true, "reason": "saw Bash"}})
    );
    assert_eq!(
        response_to(&stdin, "p1")["response"]["response"],
        json!({"behavior": "allow", "updatedInput": {"command": "ls"}})
    );
    assert_eq!(
        response_to(&stdin, "p2")["response"]["response"],
        json!({"behavior": "deny", "message": "no writes to \"/etc/passwd\""})
    );
    let e1 = &response_to(&stdin, "e1")["response"];
    assert_eq!(e1["subtype"], "error");
    assert_eq!(
        e1["error"],
        "Unsupported control request subtype: elicitation"
    );
}

#[tokio::test]
async fn a_request_with_bad_fields_is_refused_naming_the_field() {
    let fake = Fake::new(
        r#"init
next   # the prompt
printf '{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool","input":{}}}\n'
next
printf '{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback","callback_id":7}}\n'
next
printf '{"type":"control_request","request_id":"h2","request":{"subtype":"hook_callback","callback_id":"hook_9"}}\n'
next
result_ok "done"
while next; do :; done"#,
    );
    let opts = fake
        .options()
        .with_can_use_tool(|_| async { Ok(PermissionResult::allow()) })
        .with_hook(
            "PreToolUse",
            HookMatcher::new(None).callback(|_| async { Ok(json!({})) }),
        );
    let (_, errs) = split(collect(query("x", opts)).await);
    assert!(errs.is_empty(), "{errs:?}");
    let stdin = fake.stdin_frames();
    let error_of = |id: &str| {
        let r = &response_to(&stdin, id)["response"];
        assert_eq!(r["subtype"], "error", "{r}");
        r["error"].as_str().unwrap().to_owned()
    };
    let p1 = error_of("p1");
    assert!(p1.starts_with("Invalid can_use_tool request"), "{p1}");
    assert!(p1.contains("tool_name"), "{p1}");
    let h1 = error_of("h1");
    assert!(
        h1.starts_with("Invalid hook_callback request: field `callback_id`"),
        "{h1}"
    );
    assert_eq!(
        error_of("h2"),
        r#"no hook callback is registered as "hook_9""#
    );
}

#[tokio::test]
async fn set_model_set_permission_mode_and_interrupt_return_the_answers() {
    let fake = Fake::new(
        r#"init
while next; do
  case "$(sub)" in
    set_model) ok "$(rid)" '{"model":"claude-x"}' ;;
    set_permission_mode) err "$(rid)" "Cannot set permission mode: must be one of acceptEdits, default" invalid_mode ;;
    interrupt) ok "$(rid)" '{"still_queued":[]}' ;;
  esac
done"#,
    );
    let client = bounded(Client::connect(fake.options())).await.unwrap();
    assert_eq!(
        bounded(client.set_model(Some("claude-x"))).await.unwrap(),
        json!({"model": "claude-x"})
    );
    match bounded(client.set_permission_mode("nope")).await {
        Err(Error::ControlError {
            subtype,
            error,
            error_code,
        }) => {
            assert_eq!(subtype, "set_permission_mode");
            assert!(error.starts_with("Cannot set permission mode"));
            assert_eq!(error_code.as_deref(), Some("invalid_mode"));
        }
        other => panic!("expected ControlError, got {other:?}"),
    }
    let handle = client.handle();
    let receipt = bounded(tokio::spawn(async move { handle.interrupt().await }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(receipt, json!({"still_queued": []}));
    let stdin = fake.stdin_frames();
    assert_eq!(
        stdin[1]["request"],
        json!({"subtype": "set_model", "model": "claude-x"})
    );
    assert_eq!(
        stdin[2]["request"],
        json!({"subtype": "set_permission_mode", "mode": "nope"})
    );
    assert_eq!(bounded(client.close()).await.exit_code, Some(0));
}

/// A fake that dies (with a message on stderr) when it receives `subtype`.
fn dies_on(subtype: &str, how: &str) -> Fake {
    Fake::new(&format!(
        r#"init
while next; do
  if [ "$(sub)" = "{subtype}" ]; then {how}; fi
done"#
    ))
}

#[tokio::test]
async fn a_pending_interrupt_fails_fast_with_the_process_error_when_the_cli_dies() {
    let fake = dies_on(
        "interrupt",
        r#"echo "fatal: lost the model connection" >&2; exit 7"#,
    );
    let client = bounded(Client::connect(fake.options())).await.unwrap();
    let started = Instant::now();
    match bounded(client.interrupt()).await {
        Err(Error::Process { exit_code, stderr }) => {
            assert_eq!(exit_code, 7);
            assert!(stderr.contains("lost the model connection"), "{stderr}");
        }
        other => panic!("expected Process, got {other:?}"),
    }
    // The default control timeout is 60 s; failing "at once" means well before it.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // Later requests fail at once with the same error.
    assert!(matches!(
        bounded(client.set_model(None)).await,
        Err(Error::Process { exit_code: 7, .. })
    ));
    // And writing a prompt says the process is gone.
    match bounded(client.query("more")).await {
        Err(Error::Connection { message }) => {
            assert!(message.contains("exited with code 7"), "{message}")
        }
        other => panic!("expected Connection, got {other:?}"),
    }
}

#[tokio::test]
async fn a_pending_set_model_fails_fast_when_the_cli_is_killed() {
    let fake = dies_on("set_model", r#"echo "about to be killed" >&2; kill -9 $$"#);
    let mut client = bounded(Client::connect(fake.options())).await.unwrap();
    let started = Instant::now();
    match bounded(client.set_model(Some("other"))).await {
        Err(Error::Process { exit_code, stderr }) => {
            assert_eq!(exit_code, 128 + 9);
            assert!(stderr.contains("about to be killed"));
        }
        other => panic!("expected Process, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    // The message stream ends with the same error.
    let rest: Vec<_> = bounded((&mut client).collect::<Vec<_>>()).await;
    assert!(
        matches!(
            rest.last(),
            Some(Err(Error::Process { exit_code: 137, .. }))
        ),
        "{rest:?}"
    );
}

#[tokio::test]
async fn an_unanswered_control_request_times_out() {
    let fake = Fake::new("init\nwhile next; do :; done");
    let opts = Options {
        control_timeout: Some(Duration::from_millis(300)),
        ..fake.options()
    };
    let client = bounded(Client::connect(opts)).await.unwrap();
    match bounded(client.set_model(Some("m"))).await {
        Err(e @ Error::ControlTimeout { .. }) => {
            assert_eq!(
                e.to_string(),
                "control request timeout: set_model (no answer within 300ms)"
            );
        }
        other => panic!("expected ControlTimeout, got {other:?}"),
    }
}

#[tokio::test]
async fn an_error_result_then_a_new_user_turn_then_a_crash_is_a_process_error() {
    let fake = Fake::new(
        r#"init
next
result_err error_max_turns ',"errors":["Reached maximum number of turns (1)"]'
next   # the second prompt
echo "died starting turn two" >&2
exit 1"#,
    );
    let mut client = bounded(Client::connect(fake.options())).await.unwrap();
    client.query("one").await.unwrap();
    let first: Vec<_> = bounded(client.receive_response().collect::<Vec<_>>()).await;
    assert!(first[0].as_ref().unwrap().is_result());
    client.query("two").await.unwrap();
    let rest: Vec<_> = bounded((&mut client).collect::<Vec<_>>()).await;
    match rest.as_slice() {
        [Err(Error::Process {
            exit_code: 1,
            stderr,
        })] => assert!(stderr.contains("turn two")),
        other => panic!("expected Process, got {other:?}"),
    }
}

#[tokio::test]
async fn a_cancel_request_aborts_the_pending_callback() {
    let fake = Fake::new(
        r#"init
next   # the prompt
printf '{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{}}}\n'
next   # set_model: the callback has started
printf '{"type":"control_cancel_request","request_id":"p1"}\n'
ok "$(rid)" '{"model":"m"}'
result_ok "done"
while next; do :; done"#,
    );
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
    struct OnDrop(Option<tokio::sync::oneshot::Sender<()>>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }
    let started_tx = Arc::new(std::sync::Mutex::new(Some(started_tx)));
    let dropped_tx = Arc::new(std::sync::Mutex::new(Some(dropped_tx)));
    let opts = fake.options().with_can_use_tool(move |_req| {
        let started = started_tx.lock().unwrap().take();
        let guard = OnDrop(dropped_tx.lock().unwrap().take());
        async move {
            let _guard = guard;
            if let Some(s) = started {
                let _ = s.send(());
            }
            std::future::pending::<()>().await;
            Ok(PermissionResult::allow())
        }
    });
    let mut client = bounded(Client::connect(opts)).await.unwrap();
    client.query("go").await.unwrap();
    bounded(started_rx).await.unwrap();
    bounded(client.set_model(Some("m"))).await.unwrap();
    bounded(dropped_rx).await.expect("the callback was dropped");
    let turn: Vec<_> = bounded(client.receive_response().collect::<Vec<_>>()).await;
    assert!(turn.last().unwrap().as_ref().unwrap().is_result());
    bounded(client.close()).await;
    let stdin = fake.stdin_frames();
    assert!(
        !stdin.iter().any(|f| f["response"]["request_id"] == "p1"),
        "no answer is sent for a cancelled request: {stdin:#?}"
    );
}

#[tokio::test]
async fn dropping_a_client_mid_run_leaves_no_process_behind() {
    // The fake starts a grandchild (as a tool would) and keeps running.
    let fake = Fake::new(
        r#"sleep 1000 &
echo $! > "$DIR/grandchild.pid"
init
next
assistant "thinking..."
while next; do :; done"#,
    );
    let mut client = bounded(Client::connect(fake.options())).await.unwrap();
    let pid = client.pid();
    let grandchild: u32 = fake.wait_file("grandchild.pid").await.parse().unwrap();
    client.query("work").await.unwrap();
    let first = bounded(client.next_message()).await.unwrap().unwrap();
    assert_eq!(first.assistant_text().as_deref(), Some("thinking..."));
    drop(client);
    wait_gone(pid).await;
    wait_gone(grandchild).await;
}

#[tokio::test]
async fn dropping_a_query_stream_kills_the_cli() {
    let fake = Fake::new(
        r#"init
next
assistant "streaming"
exec sleep 1000"#,
    );
    let mut stream = query("x", fake.options());
    let first = bounded(stream.next()).await.unwrap().unwrap();
    assert!(first.assistant_text().is_some());
    let pid = stream.pid().unwrap();
    drop(stream);
    wait_gone(pid).await;
}

#[tokio::test]
async fn close_escalates_to_sigkill_for_a_cli_that_ignores_eof_and_sigterm() {
    let fake = Fake::new(
        r#"trap '' TERM
init
while next; do :; done
exec sleep 1000"#,
    );
    let opts = Options {
        close_grace: Some(Duration::from_millis(300)),
        ..fake.options()
    };
    let client = bounded(Client::connect(opts)).await.unwrap();
    let pid = client.pid();
    let closed = bounded(client.close()).await;
    assert_eq!(closed.escalation, Escalation::Killed);
    assert_eq!(closed.exit_code, Some(137));
    wait_gone(pid).await;
}

#[tokio::test]
async fn close_uses_sigterm_when_eof_is_not_enough() {
    let fake = Fake::new("init\nwhile next; do :; done\nexec sleep 1000");
    let opts = Options {
        close_grace: Some(Duration::from_millis(300)),
        ..fake.options()
    };
    let client = bounded(Client::connect(opts)).await.unwrap();
    let closed = bounded(client.close()).await;
    assert_eq!(closed.escalation, Escalation::Terminated);
    assert_eq!(closed.exit_code, Some(128 + 15));
}

#[tokio::test]
async fn a_one_shot_query_without_callbacks_ends_its_input_after_the_prompt() {
    // The fake answers only after stdin EOF, as the real CLI may.
    let fake = Fake::new(
        r#"init
next
while next; do :; done
assistant "hi"
result_ok "hi""#,
    );
    let (msgs, errs) = split(collect(query("x", fake.options())).await);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(msgs.len(), 2);
}

#[tokio::test]
async fn a_one_shot_query_with_callbacks_ends_its_input_after_the_result() {
    let fake = Fake::new(
        r#"init
next
printf '{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"}}}\n'
next
result_ok "done"
while next; do :; done
state idle"#,
    );
    let opts = fake
        .options()
        .with_can_use_tool(|_| async { Ok(PermissionResult::allow()) });
    let (msgs, errs) = split(collect(query("x", opts)).await);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(msgs.len(), 2);
    assert_eq!(
        fake.stdin_frames()[2]["response"]["response"]["behavior"],
        "allow"
    );
}

#[tokio::test]
async fn callbacks_are_refused_in_argv_mode() {
    let fake = Fake::new("exit 0");
    let opts = fake
        .argv_options()
        .with_can_use_tool(|_| async { Ok(PermissionResult::allow()) });
    let items = collect(query("x", opts)).await;
    assert!(
        matches!(items.as_slice(), [Err(Error::InvalidOptions { .. })]),
        "{items:?}"
    );
}

#[tokio::test]
async fn leftovers_in_the_cli_group_die_with_it_and_do_not_hold_the_stream_open() {
    // A child that inherited stdout and outlives the CLI.
    let fake = Fake::new(
        r#"sleep 1000 &
echo $! > "$DIR/grandchild.pid"
result_ok "done"
exit 0"#,
    );
    let (msgs, errs) = split(collect(query("x", fake.argv_options())).await);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(msgs.len(), 1);
    let grandchild: u32 = fake.wait_file("grandchild.pid").await.parse().unwrap();
    wait_gone(grandchild).await;
}

#[tokio::test]
async fn an_escaped_process_holding_stdout_cannot_hold_the_stream_open() {
    // In its own session, out of the SDK's reach: the stream still ends once the CLI has exited
    // (after a bounded drain).
    let fake = Fake::new(
        r#"setsid bash -c 'echo $$ > "$1/escaped.tmp"; mv "$1/escaped.tmp" "$1/escaped.pid"; exec sleep 1000' _ "$DIR" &
while [ ! -e "$DIR/escaped.pid" ]; do sleep 0.01; done
result_ok "done"
exit 0"#,
    );
    let items = collect(query("x", fake.argv_options())).await;
    let escaped = fake.wait_file("escaped.pid").await;
    assert!(!super::common::process_gone(escaped.parse().unwrap()));
    let _ = std::process::Command::new("kill").arg(&escaped).status();
    let (msgs, errs) = split(items);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(msgs.len(), 1);
}
