//! The error contract, against fake CLIs that misbehave on purpose.

use keel_protocol::{Frame, SystemFrame};
use keel_sdk::{query, Error, Options};

use super::common::{collect, split, Fake};

/// A fake that speaks stream-json: answers initialize, reads the prompt, then runs `then`.
fn stream_fake(then: &str) -> Fake {
    Fake::new(&format!("init\nnext\n{then}"))
}

#[tokio::test]
async fn error_result_then_nonzero_exit_is_a_result_error_after_the_result() {
    let fake = stream_fake(
        r#"init_frame
assistant "working"
result_err error_max_turns ',"errors":["Reached maximum number of turns (1)"],"terminal_reason":"max_turns"'
echo "keel: stopped at the turn limit" >&2
exit 3"#,
    );
    let items = collect(query("loop", fake.options())).await;
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(
        items[2].as_ref().unwrap().is_result(),
        "the result is yielded first"
    );
    match &items[3] {
        Err(e @ Error::Result(r)) => {
            assert_eq!(e.to_string(), "Reached maximum number of turns (1)");
            assert_eq!(r.subtype, "error_max_turns");
            assert_eq!(r.errors, ["Reached maximum number of turns (1)"]);
            assert_eq!(r.terminal_reason.as_deref(), Some("max_turns"));
            assert_eq!(r.exit_code, 3);
            assert_eq!(e.exit_code(), Some(3));
            assert_eq!(r.session_id, "s1");
            assert!(
                r.stderr.contains("stopped at the turn limit"),
                "{:?}",
                r.stderr
            );
        }
        other => panic!("expected Error::Result, got {other:?}"),
    }
    // The SDK sent initialize, then the prompt.
    let stdin = fake.stdin_frames();
    assert_eq!(stdin[0]["request"]["subtype"], "initialize");
    assert_eq!(stdin[1]["type"], "user");
    assert_eq!(stdin[1]["message"]["content"], "loop");
    assert_eq!(stdin[1]["parent_tool_use_id"], serde_json::Value::Null);
}

async fn result_error_message(extra: &str) -> String {
    let fake = Fake::new(&format!(
        "result_err error_during_execution '{extra}'\nexit 1"
    ));
    let (_, errs) = split(collect(query("x", fake.argv_options())).await);
    match errs.as_slice() {
        [e @ Error::Result(_)] => e.to_string(),
        other => panic!("expected one Error::Result, got {other:?}"),
    }
}

#[tokio::test]
async fn result_error_text_joins_errors_else_result_else_subtype() {
    assert_eq!(
        result_error_message(r#","errors":["first problem","second problem"]"#).await,
        "first problem; second problem"
    );
    assert_eq!(
        result_error_message(r#","result":"API Error: 529 Overloaded","api_error_status":529"#)
            .await,
        "API Error: 529 Overloaded"
    );
    assert_eq!(result_error_message("").await, "error_during_execution");
}

#[tokio::test]
async fn api_error_result_carries_status_and_is_retryable() {
    let fake = Fake::new(
        r#"result_err success ',"result":"API Error: 529 Overloaded","api_error_status":529,"terminal_reason":"api_error"'
exit 4"#,
    );
    let (_, errs) = split(collect(query("x", fake.argv_options())).await);
    match errs.as_slice() {
        [e @ Error::Result(r)] => {
            assert_eq!(r.api_error_status, Some(529));
            assert!(e.is_retryable());
        }
        other => panic!("expected Error::Result, got {other:?}"),
    }
}

fn expect_process_error(errs: &[Error], code: i32, stderr_has: &str) {
    match errs.last() {
        Some(Error::Process { exit_code, stderr }) => {
            assert_eq!(*exit_code, code);
            assert!(stderr.contains(stderr_has), "stderr: {stderr:?}");
        }
        other => panic!("expected Error::Process, got {other:?} (all: {errs:?})"),
    }
    let msg = errs.last().unwrap().to_string();
    assert!(msg.contains(stderr_has), "message carries stderr: {msg}");
}

#[tokio::test]
async fn nonzero_exit_before_any_result_is_a_process_error_with_stderr() {
    let fake = Fake::new(
        r#"init_frame
echo "Error: the model server refused the key" >&2
exit 1"#,
    );
    let (msgs, errs) = split(collect(query("x", fake.argv_options())).await);
    assert_eq!(msgs.len(), 1);
    expect_process_error(&errs, 1, "the model server refused the key");
}

#[tokio::test]
async fn nonzero_exit_after_a_success_result_is_a_process_error() {
    let fake = Fake::new(
        r#"result_ok "done"
echo "crashed while saving the transcript" >&2
exit 1"#,
    );
    let (msgs, errs) = split(collect(query("x", fake.argv_options())).await);
    assert!(msgs[0].is_result());
    expect_process_error(&errs, 1, "crashed while saving");
}

#[tokio::test]
async fn nonzero_exit_after_a_new_turn_began_is_a_process_error() {
    // The error result is followed by the next turn's messages, then a crash.
    let fake = Fake::new(
        r#"result_err error_max_turns ',"errors":["Reached maximum number of turns (1)"]'
init_frame
assistant "second turn"
echo "segfault in turn two" >&2
exit 139"#,
    );
    let (_, errs) = split(collect(query("x", fake.argv_options())).await);
    expect_process_error(&errs, 139, "segfault in turn two");
}

#[tokio::test]
async fn state_frames_after_the_error_result_do_not_reset_it() {
    let fake = Fake::new(
        r#"state running
result_err error_max_budget_usd ',"errors":["Reached maximum budget ($0.005)"]'
state idle
exit 1"#,
    );
    let (msgs, errs) = split(collect(query("x", fake.argv_options())).await);
    assert!(matches!(
        msgs.last().map(|m| m.frame()),
        Some(Frame::System(SystemFrame::SessionStateChanged(_)))
    ));
    match errs.as_slice() {
        [e @ Error::Result(_)] => assert_eq!(e.to_string(), "Reached maximum budget ($0.005)"),
        other => panic!("expected Error::Result, got {other:?}"),
    }
}

#[tokio::test]
async fn exit_zero_after_an_error_result_ends_cleanly() {
    let fake = Fake::new(r#"result_err error_max_turns ',"errors":["x"]'"#);
    let (msgs, errs) = split(collect(query("x", fake.argv_options())).await);
    assert_eq!(msgs.len(), 1);
    assert!(errs.is_empty(), "{errs:?}");
}

#[tokio::test]
async fn huge_lines_unknown_types_and_unknown_fields_pass_through() {
    // A 5 MB assistant text on one line, a message type and fields nobody knows.
    let fake = Fake::new(
        r#"big=$(head -c 5000000 /dev/zero | tr '\0' 'a')
printf '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"},"uuid":"u1","session_id":"s1"}\n'
assistant "$big"
printf '{"type":"system","subtype":"brand_new_subtype","detail":42,"uuid":"u2","session_id":"s1"}\n'
printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":1,"duration_api_ms":1,"num_turns":1,"result":"ok","session_id":"s1","uuid":"u3","future_field":{"x":1}}\n'"#,
    );
    let (msgs, errs) = split(collect(query("x", fake.argv_options())).await);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(msgs.len(), 4);
    assert!(msgs[0].is_unknown());
    assert_eq!(msgs[0].kind(), "rate_limit_event");
    assert_eq!(msgs[0].to_json()["rate_limit_info"]["status"], "allowed");
    assert_eq!(msgs[1].assistant_text().map(|t| t.len()), Some(5_000_000));
    assert_eq!(msgs[2].system_subtype(), Some("brand_new_subtype"));
    let r = msgs[3].as_result().unwrap();
    assert_eq!(r.extra["future_field"]["x"], 1);
}

#[tokio::test]
async fn bad_lines_are_reported_and_the_stream_goes_on() {
    let fake = Fake::new(
        r#"echo "Some banner that is not JSON"
echo '{"type":"assistant", broken'
echo '{"type":"result","subtype":"success"}'
result_ok "fine""#,
    );
    let items = collect(query("x", fake.argv_options())).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(matches!(&items[0], Err(Error::JsonDecode { line, .. }) if line.contains("broken")));
    match &items[1] {
        Err(Error::MessageParse { raw, message }) => {
            assert_eq!(raw["type"], "result");
            assert!(message.contains("result"), "{message}");
        }
        other => panic!("expected MessageParse, got {other:?}"),
    }
    assert!(items[2].as_ref().unwrap().is_result());
}

#[tokio::test]
async fn bytes_that_are_not_utf8_are_reported_and_a_last_line_needs_no_newline() {
    let fake = Fake::new(
        r#"printf 'banner \xff\n'
printf '{"type":"assistant","bad":"\xff\xfe"}\n'
printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":1,"duration_api_ms":1,"num_turns":1,"result":"last","session_id":"s1","uuid":"u-r"}'"#,
    );
    let items = collect(query("x", fake.argv_options())).await;
    assert_eq!(items.len(), 2, "{items:?}");
    match &items[0] {
        Err(Error::JsonDecode { line, .. }) => assert!(line.contains('\u{fffd}'), "{line}"),
        other => panic!("expected JsonDecode, got {other:?}"),
    }
    let r = items[1].as_ref().unwrap().as_result().unwrap();
    assert_eq!(r.result.as_deref(), Some("last"));
}

#[tokio::test]
async fn a_line_over_the_cap_is_skipped_with_an_error() {
    let fake = Fake::new(
        r#"assistant "$(head -c 5000 /dev/zero | tr '\0' 'a')"
result_ok "after""#,
    );
    let opts = Options {
        max_line_bytes: Some(1000),
        ..fake.argv_options()
    };
    let items = collect(query("x", opts)).await;
    assert!(
        matches!(&items[0], Err(Error::LineTooLong { limit: 1000, .. })),
        "{items:?}"
    );
    assert!(items[1].as_ref().unwrap().is_result());
}

#[tokio::test]
async fn a_missing_cli_is_cli_not_found() {
    let opts = Options::default().with_cli_path("/nonexistent/keel-sdk-test/keel");
    let items = collect(query("x", opts)).await;
    match items.as_slice() {
        [Err(Error::CliNotFound { path })] => {
            assert_eq!(path.to_str(), Some("/nonexistent/keel-sdk-test/keel"))
        }
        other => panic!("expected CliNotFound, got {other:?}"),
    }
    let opts = Options::default().with_env("PATH", "/nonexistent/keel-sdk-test");
    let items = collect(query("x", opts)).await;
    assert!(
        matches!(items.as_slice(), [Err(Error::CliNotFound { .. })]),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_file_that_cannot_run_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-executable");
    std::fs::write(&path, "#!/bin/sh\n").unwrap();
    let items = collect(query("x", Options::default().with_cli_path(&path))).await;
    match items.as_slice() {
        [Err(e @ Error::Spawn { command, .. })] => {
            assert!(command.contains("not-executable"), "{command}");
            assert!(e.to_string().contains("ermission denied"), "{e}");
        }
        other => panic!("expected Spawn, got {other:?}"),
    }
}

#[tokio::test]
async fn a_cli_without_stream_json_input_fails_initialize_with_its_stderr() {
    // What an older keel does with --input-format stream-json: a usage error.
    let fake = Fake::new(
        r#"echo "Error: --input-format stream-json is not supported by this build" >&2
exit 2"#,
    );
    let items = collect(query("x", fake.options())).await;
    match items.as_slice() {
        [Err(Error::Process {
            exit_code: 2,
            stderr,
        })] => {
            assert!(stderr.contains("not supported"), "{stderr}")
        }
        other => panic!("expected a Process error, got {other:?}"),
    }
}

#[tokio::test]
async fn stderr_is_kept_as_a_bounded_tail_and_passed_on_live() {
    let fake = Fake::new(
        r#"for i in $(seq 1 200); do echo "stderr line $i" >&2; done
exit 9"#,
    );
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let s2 = seen.clone();
    let opts = Options {
        stderr_ring_bytes: Some(64),
        ..fake.argv_options()
    }
    .with_stderr(move |l| s2.lock().unwrap().push(l.to_owned()));
    let (_, errs) = split(collect(query("x", opts)).await);
    match errs.as_slice() {
        [Error::Process {
            exit_code: 9,
            stderr,
        }] => {
            assert!(stderr.len() <= 64);
            assert!(stderr.ends_with("stderr line 200\n"), "{stderr:?}");
        }
        other => panic!("expected Process, got {other:?}"),
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 200);
    assert_eq!(seen[0], "stderr line 1");
}

#[tokio::test]
async fn env_and_cwd_reach_the_cli() {
    let fake = Fake::new(
        r#"printf '%s\n%s\n%s\n' "$KEEL_SDK_TEST_VAR" "$CLAUDE_CODE_ENTRYPOINT" "$(pwd -P)" > "$DIR/env.log"
result_ok "ok""#,
    );
    let opts = fake
        .argv_options()
        .with_env("KEEL_SDK_TEST_VAR", "hello env");
    let (_, errs) = split(collect(query("x", opts)).await);
    assert!(errs.is_empty(), "{errs:?}");
    let env = std::fs::read_to_string(fake.dir().join("env.log")).unwrap();
    let lines: Vec<&str> = env.lines().collect();
    assert_eq!(lines[0], "hello env");
    assert_eq!(lines[1], "sdk-rust");
    assert_eq!(
        lines[2],
        fake.dir().canonicalize().unwrap().to_str().unwrap()
    );
}
