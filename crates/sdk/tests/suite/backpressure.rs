//! Bounded queues: a consumer that stops reading holds the CLI back, and control requests still
//! get their answers (or fail within their bound) meanwhile.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use keel_sdk::{execute_streaming, query, Client, Error, ExecEvent, Options};
use serde_json::json;

use super::common::{bounded, wait_gone, Fake};

/// A fake that, on `set_model`, writes `n` assistant messages ("message 1"...) and then answers.
fn floods_before_answering(n: usize) -> Fake {
    Fake::new(&format!(
        r#"init
while next; do
  if [ "$(sub)" = set_model ]; then
    : > "$DIR/flooding"
    for ((i = 1; i <= {n}; i++)); do assistant "message $i"; done
    ok "$(rid)" '{{"model":"m"}}'
  fi
done"#
    ))
}

/// Reads `n` messages and checks they are "message 1".."message n", in order.
async fn read_flood(client: &mut Client, n: usize) {
    for i in 1..=n {
        let m = bounded(client.next_message()).await.unwrap().unwrap();
        assert_eq!(
            m.assistant_text().as_deref(),
            Some(format!("message {i}").as_str())
        );
    }
}

#[tokio::test]
async fn a_control_answer_behind_unread_messages_still_arrives() {
    // Far more messages than the queue to the consumer holds, all written before the answer;
    // the consumer reads none of them until the request is done.
    let fake = floods_before_answering(500);
    let mut client = bounded(Client::connect(fake.options())).await.unwrap();
    let answer = bounded(client.set_model(Some("m"))).await.unwrap();
    assert_eq!(answer, json!({"model": "m"}));
    read_flood(&mut client, 500).await;
    assert_eq!(bounded(client.close()).await.exit_code, Some(0));
}

#[tokio::test]
async fn past_the_read_ahead_cap_a_request_times_out_and_no_message_is_lost() {
    // More than the read-ahead allows (1024 messages, plus what the pipes buffer): the reader
    // stops, the answer stays in the pipe, and the request ends at its control timeout.
    let fake = floods_before_answering(5000);
    let opts = Options {
        control_timeout: Some(Duration::from_secs(1)),
        ..fake.options()
    };
    let mut client = bounded(Client::connect(opts)).await.unwrap();
    match bounded(client.set_model(Some("m"))).await {
        Err(Error::ControlTimeout { subtype, .. }) => assert_eq!(subtype, "set_model"),
        other => panic!("expected ControlTimeout, got {other:?}"),
    }
    read_flood(&mut client, 5000).await;
    assert_eq!(bounded(client.close()).await.exit_code, Some(0));
}

#[tokio::test]
async fn a_request_held_back_by_a_full_read_ahead_fails_at_once_when_the_cli_dies() {
    let fake = floods_before_answering(5000);
    let mut client = bounded(Client::connect(fake.options())).await.unwrap();
    let pid = client.pid();
    let handle = client.handle();
    let request = tokio::spawn(async move {
        let started = Instant::now();
        (handle.set_model(Some("m")).await, started.elapsed())
    });
    fake.wait_file_exists("flooding").await;
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
    let (answer, took) = bounded(request).await.unwrap();
    assert!(
        matches!(answer, Err(Error::Process { exit_code: 137, .. })),
        "{answer:?}"
    );
    // The control timeout is 60 s; "at once" is well before it.
    assert!(took < Duration::from_secs(30), "{took:?}");
    // Everything the CLI wrote before it died is still delivered, then the end.
    let rest: Vec<_> = bounded((&mut client).collect::<Vec<_>>()).await;
    let (last, messages) = rest.split_last().unwrap();
    assert!(
        matches!(last, Err(Error::Process { exit_code: 137, .. })),
        "{last:?}"
    );
    for (i, m) in messages.iter().enumerate() {
        let text = m.as_ref().unwrap().assistant_text();
        assert_eq!(text, Some(format!("message {}", i + 1)));
    }
}

/// A fake that writes `n` lines of about 1 KiB, then marks that it got to the end.
fn writes_a_lot(n: usize) -> Fake {
    Fake::new(&format!(
        r#"pad=$(head -c 1000 /dev/zero | tr '\0' 'x')
for ((i = 1; i <= {n}; i++)); do assistant "message $i $pad"; done
: > "$DIR/wrote-everything"
result_ok "done""#
    ))
}

#[tokio::test]
async fn a_consumer_that_stops_reading_holds_the_cli_back() {
    // 5 MB of messages; the queues and pipes between the CLI and the consumer hold a small part.
    let fake = writes_a_lot(5000);
    let mut stream = query("x", fake.argv_options());
    let first = bounded(stream.next()).await.unwrap().unwrap();
    assert!(first.assistant_text().unwrap().starts_with("message 1 "));
    // Nothing to wait for here: the point is that the CLI cannot get to the end. A pause can
    // only make a broken back-pressure look right, never a working one look wrong.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !fake.dir().join("wrote-everything").exists(),
        "the CLI wrote everything while nobody read"
    );
    let rest: Vec<_> = bounded(stream.collect::<Vec<_>>()).await;
    assert_eq!(rest.len(), 5000, "4999 messages and the result");
    assert!(rest.iter().all(|r| r.is_ok()));
    assert!(fake.dir().join("wrote-everything").exists());
}

#[tokio::test]
async fn the_executor_timeout_kills_the_cli_even_when_nobody_reads_the_events() {
    let fake = Fake::new(
        r#"pad=$(head -c 1000 /dev/zero | tr '\0' 'x')
for ((i = 1; i <= 5000; i++)); do assistant "message $i $pad"; done
exec sleep 1000"#,
    );
    let opts = Options {
        timeout: Some(Duration::from_secs(1)),
        ..fake.argv_options()
    };
    let mut events = execute_streaming("x", opts);
    let pid = match bounded(events.next()).await {
        Some(ExecEvent::Started { pid, .. }) => pid,
        other => panic!("expected Started, got {other:?}"),
    };
    // Read nothing more: the run is stuck on a full event queue when its deadline passes.
    wait_gone(pid).await;
    let rest: Vec<_> = bounded(events.collect::<Vec<_>>()).await;
    assert!(
        matches!(rest.last(), Some(ExecEvent::Finished(r)) if !r.success),
        "{:?}",
        rest.last()
    );
    assert!(
        rest.iter().any(
            |e| matches!(e, ExecEvent::ProcessError { message } if message.contains("timed out"))
        ),
        "no timeout reported"
    );
}
