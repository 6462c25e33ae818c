//! The interactive UI end to end: the real `keel` binary in a pseudo-terminal, drawing on a
//! terminal emulator (vt100, with scrollback) against keel-mock. Keys are written to the
//! terminal as a user's keyboard would; every wait is on what the screen shows, with a
//! generous deadline.

use std::time::{Duration, Instant};

use keel_mock::Scenario;
use portable_pty::CommandBuilder;
use serde_json::{json, Value};

use super::common::{eventually, keel_bin, processes_matching, Harness};
use super::pty::{Tty, DEADLINE};

const ESC: &str = "\x1b";
const ENTER: &str = "\r";

/// keel in a pseudo-terminal, with this test's harness environment.
pub(super) fn start(h: &Harness, args: &[&str], env: &[(&str, &str)], rows: u16, cols: u16) -> Tty {
    let mut cmd = CommandBuilder::new(keel_bin());
    cmd.args(args);
    cmd.cwd(h.cwd());
    cmd.env_clear();
    for (k, v) in [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", h.home.path().display().to_string()),
        ("KEEL_HOME", h.keel_home().display().to_string()),
        ("ANTHROPIC_BASE_URL", h.mock.base_url()),
        ("ANTHROPIC_API_KEY", "sk-test-keel".into()),
        ("IS_SANDBOX", "1".into()),
        ("TERM", "xterm-256color".into()),
    ] {
        cmd.env(k, v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    Tty::spawn(cmd, rows, cols)
}

fn text_steps(n: usize) -> String {
    let steps: Vec<Value> = (1..=n)
        .map(|i| json!({"kind": "text", "text": format!("reply {i:02} begins\n- point {i:02}a\n- point {i:02}b\nreply {i:02} ends"), "delay_ms": 1}))
        .collect();
    json!({ "steps": steps }).to_string()
}

#[tokio::test]
async fn a_prompt_streams_and_the_scrollback_holds_each_message_once_after_a_resize() {
    let h = Harness::from_json(&text_steps(50)).await;
    let mut t = start(&h, &[], &[], 24, 80);
    t.wait_text("shift+tab mode").await;
    for i in 1..=50 {
        t.send(&format!("prompt {i:02}{ENTER}"));
        t.wait_text(&format!("reply {i:02} ends")).await;
        t.wait_idle().await;
        if i == 25 {
            t.resize(30, 100);
        }
    }
    let all = t.history();
    assert_each_once(
        &all,
        (1..=50).flat_map(|i| {
            [
                format!("> prompt {i:02}"),
                format!("reply {i:02} begins"),
                format!("• point {i:02}a"),
                format!("reply {i:02} ends"),
            ]
        }),
    );
    // The live area is not in the scrollback: one input box, one status line.
    assert_eq!(all.matches("shift+tab mode").count(), 1, "{all}");
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn esc_during_a_long_command_interrupts_it_kills_its_group_and_the_session_goes_on() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo started-31; sleep 31.17", "timeout": 600000}}]},
            {"kind": "text", "text": "the second answer"}
        ]})
        .to_string(),
    )
    .await;
    let mut t = start(&h, &[], &[], 30, 100);
    t.wait_text("shift+tab mode").await;
    t.send(&format!("run the long one{ENTER}"));
    t.wait_text("Bash(echo started-31").await;
    assert!(eventually(DEADLINE, || !processes_matching("sleep 31.17").is_empty()).await);
    let from = t.raw_len();
    t.send(ESC);
    let s = t.wait_text("Interrupted after").await;
    assert!(s.contains("interrupted after"), "{s}");
    assert!(
        s.contains("started-31"),
        "the partial output is shown:\n{s}"
    );
    assert!(
        eventually(DEADLINE, || processes_matching("sleep 31.17").is_empty()).await,
        "the command's process group is gone"
    );
    t.wait_idle().await;
    let since = t.raw_since(from);
    assert!(
        !since.contains("Retry now?"),
        "an interrupt never offers a retry"
    );
    assert!(!since.contains("API Error"), "an interrupt is not an error");
    t.send(&format!("and now{ENTER}"));
    t.wait_text("the second answer").await;
    // The same session: the second request carries the first prompt and the stopped call.
    let reqs = h.requests();
    let last = &reqs.last().unwrap().body["messages"];
    let text = last.to_string();
    assert!(
        text.contains("run the long one") && text.contains("and now"),
        "{text}"
    );
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn overload_countdown_then_the_retry_prompt_resumes_the_same_session_and_gives_up_after_four()
{
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo ran >> ran-once.txt"}}]},
            {"kind": "error", "status": 529, "times": 1000}
        ]})
        .to_string(),
    )
    .await;
    let mut t = start(
        &h,
        &["--permission-mode", "bypassPermissions"],
        &[("KEEL_MAX_RETRIES", "1")],
        30,
        110,
    );
    t.wait_text("shift+tab mode").await;
    t.send(&format!("do the thing{ENTER}"));
    t.wait_text("retrying in").await;
    let s = t.wait_text("Retry now?").await;
    assert!(s.contains("try 1 of 4"), "{s}");
    // The server recovers; Yes continues the same session.
    let failed = h.requests().last().unwrap().body["messages"].clone();
    h.mock
        .replace_scenario(
            Scenario::from_json(
                r#"{"steps": [{"kind": "text", "text": "picked up where it stopped"}]}"#,
            )
            .unwrap(),
        )
        .unwrap();
    t.send(ENTER);
    t.wait_text("picked up where it stopped").await;
    t.wait_idle().await;
    let resumed = h.requests().last().unwrap().body["messages"].clone();
    let (failed, resumed) = (failed.as_array().unwrap(), resumed.as_array().unwrap());
    assert_eq!(resumed.len(), failed.len(), "the same history");
    assert_eq!(resumed[..failed.len() - 1], failed[..failed.len() - 1]);
    let last = resumed.last().unwrap().to_string();
    assert!(
        last.contains("tool_result") && last.contains("Continue from where you left off"),
        "{last}"
    );
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("ran-once.txt")).unwrap(),
        "ran\n",
        "no completed tool is run again"
    );
    // Now the server stays down: four prompted retries, then keel gives up without a fifth.
    h.mock
        .replace_scenario(
            Scenario::from_json(r#"{"steps": [{"kind": "error", "status": 529, "times": 1000}]}"#)
                .unwrap(),
        )
        .unwrap();
    t.send(&format!("again{ENTER}"));
    for n in 1..=4 {
        t.wait_text(&format!("try {n} of 4")).await;
        t.send("y");
        t.wait_for("the retry to start", |s| {
            !s.contains(&format!("try {n} of 4"))
        })
        .await;
    }
    let s = t.wait_text("has not recovered").await;
    t.wait_idle().await;
    assert!(!s.contains("Retry now?"), "no fifth prompt:\n{s}");
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn a_401_offers_no_retry_and_names_the_key() {
    let h = Harness::from_json(r#"{"steps": [{"kind": "error", "status": 401}]}"#).await;
    let mut t = start(&h, &[], &[], 30, 120);
    t.wait_text("shift+tab mode").await;
    let from = t.raw_len();
    t.send(&format!("hello{ENTER}"));
    t.wait_text("HTTP 401").await;
    let s = t.wait_idle().await;
    assert!(s.contains("ANTHROPIC_API_KEY"), "{s}");
    assert!(!t.raw_since(from).contains("Retry now?"));
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn dont_ask_again_writes_the_rule_and_the_same_call_then_runs_without_asking() {
    let call = json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch made-by-keel"}}]});
    let h = Harness::from_json(
        &json!({"steps": [call, {"kind": "text", "text": "first done"}, call, {"kind": "text", "text": "second done"}]})
            .to_string(),
    )
    .await;
    let mut t = start(&h, &[], &[], 30, 120);
    t.wait_text("shift+tab mode").await;
    t.send(&format!("touch it{ENTER}"));
    let s = t.wait_text("Allow Bash?").await;
    assert!(
        s.contains("touch made-by-keel") && s.contains("don't ask again"),
        "{s}"
    );
    t.send("2");
    t.wait_text("first done").await;
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(h.cwd().join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        settings["permissions"]["allow"],
        json!(["Bash(touch made-by-keel)"])
    );
    t.wait_idle().await;
    let from = t.raw_len();
    t.send(&format!("once more{ENTER}"));
    t.wait_text("second done").await;
    assert!(!t.raw_since(from).contains("Allow Bash?"), "asked again");
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn ctrl_b_moves_a_long_command_to_the_background_and_the_turn_goes_on() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo bg-started; sleep 41.3; echo bg-done", "timeout": 600000}}]},
            {"kind": "text", "text": "carried on without it"}
        ]})
        .to_string(),
    )
    .await;
    let mut t = start(&h, &[], &[], 30, 120);
    t.wait_text("shift+tab mode").await;
    t.send(&format!("start it{ENTER}"));
    t.wait_text("ctrl+b to background").await;
    assert!(eventually(DEADLINE, || !processes_matching("sleep 41.3").is_empty()).await);
    t.send("\x02");
    let s = t.wait_text("carried on without it").await;
    assert!(s.contains("moved to the background as shell_1"), "{s}");
    // The model was told, with the task id; the command still runs, writing to its task log.
    let told = h.requests().last().unwrap().body["messages"].to_string();
    assert!(told.contains("background shell shell_1"), "{told}");
    assert!(
        !processes_matching("sleep 41.3").is_empty(),
        "it keeps running"
    );
    t.wait_idle().await;
    assert!(t.screen().contains("◇ shell_1"), "shown as a running task");
    assert_eq!(t.exit().await, 0);
    assert!(
        eventually(DEADLINE, || processes_matching("sleep 41.3").is_empty()).await,
        "the background command ends with the session"
    );
}

#[tokio::test]
async fn ctrl_b_moves_a_foreground_subagent_to_the_background_with_its_command() {
    let main = |extra: Value| {
        let mut v = extra;
        v["match"] = json!({"first_user_contains": "start the agent"});
        v
    };
    let sub = |extra: Value| {
        let mut v = extra;
        v["match"] = json!({"first_user_contains": "SUBAGENT-BRIEF"});
        v
    };
    let h = Harness::from_json(
        &json!({"steps": [
            main(json!({"kind": "tool_use", "calls": [{"name": "Task", "input": {"description": "slow research", "prompt": "SUBAGENT-BRIEF: look around", "subagent_type": "general-purpose"}}]})),
            sub(json!({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "sleep 43.7", "timeout": 600000}}]})),
            main(json!({"kind": "text", "text": "main carried on"})),
            sub(json!({"kind": "text", "text": "the subagent finished"}))
        ]})
        .to_string(),
    )
    .await;
    let mut t = start(&h, &[], &[], 30, 120);
    t.wait_text("shift+tab mode").await;
    t.send(&format!("start the agent{ENTER}"));
    t.wait_text("Task(slow research)").await;
    assert!(eventually(DEADLINE, || !processes_matching("sleep 43.7").is_empty()).await);
    t.send("\x02");
    let s = t.wait_text("main carried on").await;
    assert!(s.contains("moved to the background as a"), "{s}");
    // The subagent went with its command: the command is still running, inside it.
    assert!(!processes_matching("sleep 43.7").is_empty());
    let s = t.wait_idle().await;
    assert!(
        s.contains("slow research · running"),
        "listed as a running task:\n{s}"
    );
    assert_eq!(t.exit().await, 0);
    assert!(
        eventually(DEADLINE, || processes_matching("sleep 43.7").is_empty()).await,
        "the subagent's command ends with the session"
    );
}

#[tokio::test]
async fn keys_that_arrive_with_a_resize_are_not_lost() {
    let h = Harness::from_json(r#"{"steps": [{"kind": "text", "text": "x"}]}"#).await;
    let mut t = start(&h, &[], &[], 24, 80);
    t.wait_text("shift+tab mode").await;
    let mut typed = String::from("> ");
    for i in 0..60u16 {
        // The key goes out right behind the resize's signal, as when someone types while
        // dragging the window's edge; each must show up on its own.
        t.resize(24 + i % 3, 80 + i % 7);
        let c = (b'a' + (i % 26) as u8) as char;
        t.send(&c.to_string());
        typed.push(c);
        let want = typed.clone();
        t.wait_for(&format!("{want:?} in the input box"), |s| s.contains(&want))
            .await;
    }
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn a_ten_thousand_line_paste_is_accepted_at_once_and_sent_whole() {
    let h = Harness::from_json(r#"{"steps": [{"kind": "text", "text": "got it"}]}"#).await;
    let mut t = start(&h, &[], &[], 30, 100);
    t.wait_text("shift+tab mode").await;
    assert!(t.term.lock().unwrap().parser.screen().bracketed_paste());
    let body: String = (0..10_000).map(|i| format!("pasted line {i}\n")).collect();
    let started = Instant::now();
    t.send(&format!("\x1b[200~{body}\x1b[201~"));
    t.wait_text("[Pasted text #1 +10000 lines]").await;
    // How fast is measured by bench_tui (tens of milliseconds in a release build); here, a
    // paste that hangs — what other agents do with large pastes — fails.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "the paste took {took:?}");
    t.send(ENTER);
    t.wait_text("got it").await;
    let sent = h.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("pasted line 0\\n") && sent.contains("pasted line 9999"),
        "the whole paste is sent"
    );
    assert_eq!(t.exit().await, 0);
}

#[tokio::test]
async fn without_a_terminal_keel_says_to_use_print() {
    let h = Harness::from_json(r#"{"steps": [{"kind": "text", "text": "x"}]}"#).await;
    let run = h.run(&["hello"], &[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("needs a terminal"), "{}", run.stderr);
    assert!(run.stderr.contains("keel -p"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(h.requests().is_empty());
}

/// A tmux server of this test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn history(&self) -> String {
        String::from_utf8_lossy(
            &self
                .cmd(&["capture-pane", "-p", "-J", "-S", "-", "-t", "k"])
                .stdout,
        )
        .into_owned()
    }

    /// Wait until no turn runs (what is on the screen now, not the scrollback).
    async fn wait_idle(&self) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen =
                String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "k"]).stdout)
                    .into_owned();
            if screen.contains("shift+tab mode") && !screen.contains("esc to interrupt") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "tmux never showed an idle prompt:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_text(&self, text: &str) {
        let deadline = Instant::now() + DEADLINE;
        while !self.history().contains(text) {
            assert!(
                Instant::now() < deadline,
                "tmux never showed {text:?}:\n{}",
                self.history()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// vt100 does not re-flow rows when its width shrinks; tmux does, as most terminals do. In
/// tmux, narrowing and widening the window in the middle of a session leaves every finished
/// message in the scrollback exactly once.
#[tokio::test]
#[ignore = "needs tmux (a terminal that re-flows on resize)"]
async fn in_a_reflowing_terminal_resizes_both_ways_keep_the_scrollback_whole() {
    let tmux_runs = std::process::Command::new("tmux").arg("-V").output();
    assert!(
        tmux_runs.is_ok_and(|o| o.status.success()),
        "needs tmux: this test needs a terminal that re-flows on resize"
    );
    let h = Harness::from_json(&text_steps(30)).await;
    let socket = format!("keel-test-{}", std::process::id());
    let tmux = Tmux { socket };
    let command = format!(
        "env -i PATH={path} HOME={home} KEEL_HOME={keel_home} ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY=sk-test-keel TERM=screen {keel}; sleep 600",
        path = std::env::var("PATH").unwrap_or_default(),
        home = h.home.path().display(),
        keel_home = h.keel_home().display(),
        url = h.mock.base_url(),
        keel = keel_bin().display(),
    );
    let cwd = h.cwd().display().to_string();
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "k",
        "-x",
        "120",
        "-y",
        "20",
        "-c",
        &cwd,
        &command,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tmux.wait_text("shift+tab mode").await;
    for i in 1..=30 {
        tmux.cmd(&["send-keys", "-t", "k", &format!("prompt {i:02}"), "Enter"]);
        tmux.wait_text(&format!("reply {i:02} ends")).await;
        tmux.wait_idle().await;
        match i {
            10 => tmux.cmd(&["resize-window", "-t", "k", "-x", "70", "-y", "20"]),
            20 => tmux.cmd(&["resize-window", "-t", "k", "-x", "100", "-y", "26"]),
            _ => continue,
        };
    }
    let all = tmux.history();
    assert_each_once(
        &all,
        (1..=30).flat_map(|i| {
            [
                format!("> prompt {i:02}\n"),
                format!("reply {i:02} begins"),
                format!("reply {i:02} ends"),
            ]
        }),
    );
    assert_eq!(all.matches("shift+tab mode").count(), 1, "{all}");
    // Nothing of an earlier live area is left behind either: its two rules, once each.
    let rules = all
        .lines()
        .filter(|l| !l.trim().is_empty() && l.trim().chars().all(|c| c == '─'))
        .count();
    assert_eq!(
        rules, 2,
        "pieces of an old live area were left behind:\n{all}"
    );
}

/// Each of `needles` appears in the scrollback `all` exactly once.
fn assert_each_once(all: &str, needles: impl IntoIterator<Item = String>) {
    for needle in needles {
        assert_eq!(
            all.matches(&needle).count(),
            1,
            "{needle:?} should be in the scrollback exactly once:\n{all}"
        );
    }
}
