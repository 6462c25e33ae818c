//! The task manager's own tests.

use super::*;

use super::log::LOG_KEEP;
use crate::event::Emitted;

fn manager() -> (Arc<TaskManager>, tokio::sync::mpsc::Receiver<Emitted>) {
    let (tx, rx) = tokio::sync::mpsc::channel(100);
    (TaskManager::new(Emitter::new("s", tx), None), rx)
}

#[test]
fn a_long_log_keeps_head_and_tail_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shell_1.log");
    let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, &text).unwrap();
    let out = read_log(&path).unwrap();
    assert!(
        out.starts_with("line 0\n") && out.trim_end().ends_with("line 9999"),
        "head and tail kept"
    );
    assert!(
        out.contains("omitted") && out.contains(&path.display().to_string()),
        "a marker naming the log"
    );
    assert!(out.len() < 2 * LOG_KEEP as usize + 200);
    std::fs::write(&path, "short\n").unwrap();
    assert_eq!(read_log(&path).unwrap(), "short\n");
    assert_eq!(shell_quote("it's"), "'it'\\''s'");
}

#[tokio::test]
async fn output_waits_exactly_and_never_calls_a_finished_task_running() {
    let (m, _rx) = manager();
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    let id = m
        .spawn(
            TaskKind::Shell {
                command: "x".into(),
            },
            "x".into(),
            None,
            |_t| async move {
                let _ = wait.await;
                (TaskStatus::Completed, "done".into())
            },
        )
        .await
        .unwrap();
    let (s, _) = m
        .output(&id, true, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(s, TaskStatus::Running);
    release.send(()).unwrap();
    let (s, out) = m.output(&id, true, Duration::from_secs(10)).await.unwrap();
    assert_eq!((s, out.as_str()), (TaskStatus::Completed, "done"));
    assert!(
        m.take_notifications().is_empty(),
        "already read through TaskOutput"
    );
}

#[tokio::test]
async fn a_dead_worker_is_noticed_and_kill_reports_who() {
    let (m, mut rx) = manager();
    let id = m
        .spawn(
            TaskKind::Shell {
                command: "x".into(),
            },
            "x".into(),
            None,
            |_t| async { panic!("boom") },
        )
        .await
        .unwrap();
    let (s, _) = m.output(&id, true, Duration::from_secs(10)).await.unwrap();
    assert!(
        matches!(s, TaskStatus::Failed(ref r) if r.contains("died")),
        "{s:?}"
    );
    let id2 = m
        .spawn(
            TaskKind::Agent {
                agent_type: "Explore".into(),
            },
            "y".into(),
            None,
            |t| async move {
                t.cancelled().await;
                (TaskStatus::Failed("stopped".into()), "partial".into())
            },
        )
        .await
        .unwrap();
    assert_eq!(
        m.kill(&id2, KilledBy::Parent).await.unwrap(),
        TaskStatus::Killed(KilledBy::Parent)
    );
    // The dead worker was already seen through TaskOutput; only the killed one is news.
    let notes = m.take_notifications();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("agent_2")
            && notes[0].contains("killed{by: parent}")
            && notes[0].contains("partial"),
        "{notes:?}"
    );
    assert!(m.take_notifications().is_empty(), "told once");
    let mut kinds = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::Task(t) = e.event {
            kinds.push(if t.end.is_none() {
                "started"
            } else {
                "notification"
            });
        }
    }
    assert_eq!(
        kinds,
        ["started", "notification", "started", "notification"]
    );
    assert!(m
        .output("nope", false, Duration::ZERO)
        .await
        .unwrap_err()
        .to_string()
        .contains("agent_2"));
}
