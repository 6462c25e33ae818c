//! The executor API's events and verdicts, against fake CLIs.

use std::time::Duration;

use futures_util::StreamExt;
use keel_sdk::{execute_prompt, execute_streaming, ExecEvent, Options, PromptResult};

use super::common::{bounded, wait_gone, Fake};

async fn events(opts: Options) -> Vec<ExecEvent> {
    bounded(execute_streaming("do the thing", opts).collect::<Vec<_>>()).await
}

fn finished(events: &[ExecEvent]) -> &PromptResult {
    match events.last() {
        Some(ExecEvent::Finished(r)) => r,
        other => panic!("the last event is not Finished: {other:?}"),
    }
}

#[tokio::test]
async fn a_nonzero_exit_gives_an_error_event_with_command_code_lines_and_stderr() {
    let fake = Fake::new(
        r#"init_frame
assistant "partial"
echo "boom: the tool registry is corrupt" >&2
exit 5"#,
    );
    let ev = events(fake.options()).await;
    assert!(
        matches!(&ev[0], ExecEvent::Started { command, .. } if command.contains("fake-cli -p 'do the thing'")),
        "{ev:?}"
    );
    let message = ev
        .iter()
        .find_map(|e| match e {
            ExecEvent::Error { message } => Some(message.clone()),
            _ => None,
        })
        .expect("an Error event");
    for part in [
        "fake-cli -p 'do the thing'",
        "exited with code 5",
        "after 2 stdout lines",
        "boom: the tool registry is corrupt",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
    let r = finished(&ev);
    assert!(!r.success);
    assert_eq!(r.exit_code, Some(5));
    assert_eq!(
        r.error.as_deref(),
        Some("boom: the tool registry is corrupt")
    );
    assert_eq!(r.output, "partial");
    assert_eq!(r.session_id.as_deref(), Some("s1"));
}

#[tokio::test]
async fn the_error_falls_back_to_the_result_text_then_the_exit_code() {
    let fake = Fake::new(
        r#"result_err error_max_turns ',"errors":["Reached maximum number of turns (1)"]'
exit 3"#,
    );
    let r = bounded(execute_prompt("x", fake.options())).await;
    assert_eq!(
        r.error.as_deref(),
        Some("Reached maximum number of turns (1)")
    );
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.num_turns, 2);
    let fake = Fake::new("exit 6");
    let r = bounded(execute_prompt("x", fake.options())).await;
    assert_eq!(r.error.as_deref(), Some("exit code 6"));
}

#[tokio::test]
async fn exit_zero_without_output_gives_no_output_with_code_cwd_and_stderr() {
    let fake = Fake::new(
        r#"echo "Welcome to some other tool"
echo "warning: no config found" >&2
exit 0"#,
    );
    let ev = events(fake.options()).await;
    let diagnostic = ev
        .iter()
        .find_map(|e| match e {
            ExecEvent::NoOutput { diagnostic } => Some(diagnostic.clone()),
            _ => None,
        })
        .expect("a NoOutput event");
    let cwd = fake.dir().display().to_string();
    for part in [
        "exited with code 0",
        "produced no result",
        cwd.as_str(),
        "warning: no config found",
        "Welcome to some other tool",
    ] {
        assert!(
            diagnostic.contains(part),
            "{part:?} missing from {diagnostic}"
        );
    }
    let r = finished(&ev);
    assert!(!r.success);
    assert_eq!(r.exit_code, Some(0));
    assert!(r.error.is_some());
}

#[tokio::test]
async fn zero_turns_gives_no_turns_naming_the_hook() {
    let fake = Fake::new(
        r#"init_frame
result_ok "Prompt blocked by UserPromptSubmit hook: secrets detected" 0"#,
    );
    let ev = events(fake.options()).await;
    let diagnostic = ev
        .iter()
        .find_map(|e| match e {
            ExecEvent::NoTurns { diagnostic } => Some(diagnostic.clone()),
            _ => None,
        })
        .expect("a NoTurns event");
    for part in [
        "num_turns 0",
        "hook",
        "secrets detected",
        "run the command by hand",
    ] {
        assert!(
            diagnostic.contains(part),
            "{part:?} missing from {diagnostic}"
        );
    }
    let r = finished(&ev);
    assert!(!r.success);
    assert_eq!(r.num_turns, 0);
    assert_eq!(r.exit_code, Some(0));
}

#[tokio::test]
async fn a_missing_binary_gives_process_error_with_command_and_os_error() {
    let opts = Options::default().with_cli_path("/nonexistent/keel-sdk-test/keel");
    let ev = events(opts).await;
    match ev.as_slice() {
        [ExecEvent::ProcessError { message }, ExecEvent::Finished(r)] => {
            assert!(message.contains("/nonexistent/keel-sdk-test/keel -p 'do the thing' --output-format stream-json --verbose"), "{message}");
            assert!(message.contains("No such file or directory"), "{message}");
            assert_eq!(r.exit_code, None);
            assert_eq!(r.error.as_deref(), Some(message.as_str()));
        }
        other => panic!("expected ProcessError then Finished, got {other:?}"),
    }
}

#[tokio::test]
async fn a_timeout_kills_the_process_group_and_gives_process_error() {
    let fake = Fake::new(
        r#"sleep 1000 &
echo $! > "$DIR/grandchild.pid"
init_frame
wait"#,
    );
    let opts = Options {
        timeout: Some(Duration::from_millis(500)),
        ..fake.options()
    };
    let ev = events(opts).await;
    let message = ev
        .iter()
        .find_map(|e| match e {
            ExecEvent::ProcessError { message } => Some(message.clone()),
            _ => None,
        })
        .expect("a ProcessError event");
    assert!(message.contains("timed out after 500ms"), "{message}");
    assert!(message.contains("killed the process group"), "{message}");
    assert!(message.contains("fake-cli -p"), "{message}");
    let r = finished(&ev);
    assert!(!r.success);
    assert_eq!(r.exit_code, Some(137));
    let grandchild: u32 = fake.wait_file("grandchild.pid").await.parse().unwrap();
    wait_gone(grandchild).await;
}

#[tokio::test]
async fn success_reports_the_result() {
    let fake = Fake::new(
        r#"init_frame
assistant "hello"
result_ok "hello""#,
    );
    let r = bounded(execute_prompt("x", fake.options())).await;
    assert!(r.success, "{r:?}");
    assert_eq!(r.output, "hello");
    assert_eq!(r.error, None);
    assert_eq!(r.num_turns, 1);
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.session_id.as_deref(), Some("s1"));
}
