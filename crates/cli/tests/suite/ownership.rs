//! keel owns every process it starts — daemons that left their group, grandchildren after keel
//! itself is SIGKILLed, and everything after a hang-up — and a closed stdout stops the run.

use std::time::Duration;

use serde_json::{json, Value};

use super::common::{eventually, processes_matching, Harness};

const SIGHUP: i32 = 1;
const SIGKILL: i32 = 9;

fn bash_then_text(command: &str) -> String {
    json!({"steps": [
        {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": command, "timeout": 600000}}]},
        {"kind": "text", "text": "after"}
    ]})
    .to_string()
}

fn is_tool_use(f: &Value) -> bool {
    f["type"] == "assistant" && f["message"]["content"][0]["type"] == "tool_use"
}

async fn none_left(needle: &str) -> bool {
    eventually(Duration::from_secs(10), || {
        processes_matching(needle).is_empty()
    })
    .await
}

#[tokio::test]
async fn daemons_started_with_setsid_do_not_outlive_the_call() {
    for (i, form) in [
        "setsid sleep 300.{m} &",
        "setsid -f sleep 300.{m}",
        "nohup setsid sleep 300.{m} >/dev/null 2>&1 & disown",
        "setsid sh -c 'sleep 300.{m} & exit 0'",
    ]
    .iter()
    .enumerate()
    {
        let needle = format!("sleep 300.5{i}");
        let command = form.replace("{m}", &format!("5{i}"));
        let h = Harness::from_json(&bash_then_text(&command)).await;
        let run = h.run_stream("go", &["--allowedTools", "Bash"], &[]).await;
        run.assert_end("success", false, "completed", 0);
        assert!(
            none_left(&needle).await,
            "{command}: {:?} survived",
            processes_matching(&needle)
        );
        let result = run.tool_results()[0]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            result.contains("keel stopped 1 process"),
            "{command}: {result}"
        );
    }
}

#[tokio::test]
async fn kill_9_of_keel_leaves_nothing_of_its_commands_behind() {
    let marker = "keel-test-marker-kill9";
    // A grandchild in the command's group, and one that left it.
    let command = format!(
        "(sleep 300.61; : {marker}) & setsid sleep 300.62 & touch started; sleep 300.63; : {marker}"
    );
    let h = Harness::from_json(&bash_then_text(&command)).await;
    let mut live = h.live_stream("go", &["--allowedTools", "Bash"], &[]);
    live.wait_for(Duration::from_secs(30), is_tool_use).await;
    let started = h.cwd().join("started");
    assert!(eventually(Duration::from_secs(30), || started.exists()).await);
    assert!(
        eventually(Duration::from_secs(10), || processes_matching(
            "sleep 300.6"
        )
        .len()
            >= 3)
        .await
    );
    live.signal(SIGKILL);
    let _ = live.finish(Duration::from_secs(20)).await;
    assert!(
        none_left("sleep 300.6").await,
        "survived keel's SIGKILL: {:?}",
        processes_matching("sleep 300.6")
    );
}

#[tokio::test]
async fn a_hangup_ends_with_one_result_and_no_leftover() {
    let marker = "keel-test-marker-hup";
    let h = Harness::from_json(&bash_then_text(&format!("sleep 300.71; : {marker}"))).await;
    let mut live = h.live_stream("go", &["--allowedTools", "Bash"], &[]);
    live.wait_for(Duration::from_secs(30), is_tool_use).await;
    assert!(
        eventually(Duration::from_secs(20), || !processes_matching(marker)
            .is_empty())
        .await
    );
    live.signal(SIGHUP);
    let run = live.finish(Duration::from_secs(20)).await;
    assert_eq!(run.of("result").len(), 1, "{:?}", run.frames);
    run.assert_end("error_during_execution", true, "aborted_tools", 130);
    assert!(none_left("sleep 300.71").await);
}

#[tokio::test]
async fn a_closed_stdout_stops_the_run_and_the_transcript_agrees() {
    // The model would call tools forever: only a stop can end this run.
    let h = Harness::from_json(
        &json!({"on_exhausted": "repeat_last", "steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo tick"}}]}
        ]})
        .to_string(),
    )
    .await;
    let keel = super::common::keel_bin();
    let script = format!(
        "'{}' -p go --allowedTools Bash --output-format stream-json --verbose | head -1; exit ${{PIPESTATUS[0]}}",
        keel.display()
    );
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(h.cwd())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", h.home.path())
            .env("KEEL_HOME", h.keel_home())
            .env("ANTHROPIC_BASE_URL", h.mock.base_url())
            .env("ANTHROPIC_API_KEY", "sk-test-keel")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("keel stopped once nobody read its output")
    .unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert_eq!(code, 1, "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.lines().count(), 1, "head saw one line: {printed}");
    let requests = h.requests().len();
    assert!(
        requests <= 3,
        "keel went on calling the model: {requests} requests"
    );
    // The transcript says the same as the exit code.
    let transcript = find_transcript(&h.keel_home()).expect("a transcript");
    let last_result = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|r| r["frame"]["type"] == "result")
        .expect("a result in the transcript");
    let r = &last_result["frame"];
    assert_eq!(r["terminal_reason"], "model_error", "{r}");
    assert!(r["result"].as_str().unwrap().contains("stdout"), "{r}");
}

fn find_transcript(home: &std::path::Path) -> Option<std::path::PathBuf> {
    let projects = home.join("projects");
    for dir in std::fs::read_dir(projects).ok()?.flatten() {
        for f in std::fs::read_dir(dir.path()).ok()?.flatten() {
            if f.path().extension().is_some_and(|e| e == "jsonl") {
                return Some(f.path());
            }
        }
    }
    None
}

/// Bash commands run under a launcher (keel itself, started with a hidden argument): its
/// supervisors are the launcher's children, and run by hand the argument refuses to serve.
#[tokio::test]
async fn commands_run_under_the_launcher_which_refuses_to_run_by_hand() {
    let by_hand = std::process::Command::new(super::common::keel_bin())
        .arg("__keel-launcher")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(by_hand.status.code(), Some(2));
    let err = String::from_utf8_lossy(&by_hand.stderr);
    assert!(err.contains("not for use by hand"), "{err}");

    // The command reports its supervisor's parent's name.
    let chain = "cat /proc/$(awk '{print $4}' /proc/$(awk '{print $4}' /proc/$$/stat)/stat)/comm";
    for (env, parent) in [(None, "keel-launcher"), (Some("off"), "keel")] {
        let h = Harness::from_json(
            &json!({"steps": [
                {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": chain}}]},
                {"kind": "text", "text": "done"}
            ]})
            .to_string(),
        )
        .await;
        let extra: Vec<(&str, &str)> = env.map(|v| vec![("KEEL_LAUNCHER", v)]).unwrap_or_default();
        let run = h
            .run_stream("go", &["--allowedTools", "Bash"], &extra)
            .await;
        let result = run
            .frames
            .iter()
            .find_map(|f| f["tool_use_result"]["stdout"].as_str().map(str::to_owned))
            .unwrap_or_default();
        assert_eq!(result.trim(), parent, "KEEL_LAUNCHER={env:?}");
    }

    // Any other value is an error, before anything runs.
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"done"}]}"#).await;
    let run = h.run_stream("go", &[], &[("KEEL_LAUNCHER", "0")]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("KEEL_LAUNCHER"), "{}", run.stderr);
    assert!(h.requests().is_empty());
}
