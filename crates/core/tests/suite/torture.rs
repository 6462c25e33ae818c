//! The cancellation torture test: many scripted multi-tool turns, each interrupted at a random
//! moment (while streaming, between tools, inside a tool, during a retry wait). After every run:
//! every tool_use is paired, no process of ours is left, and the next request of the same
//! session is accepted by keel-mock's validator. Replay a failure with KEEL_TORTURE_SEED.

use std::time::Duration;

use keel_core::TurnEnd;
use keel_mock::{Call, Match, OnExhausted, Scenario, Step};
use keel_protocol::ContentBlock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use futures_util::StreamExt;

use super::harness::engine;

fn processes_matching(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmd).contains(needle) {
            out.push(pid);
        }
    }
    out
}

fn random_scenario(rng: &mut StdRng, marker: &str) -> Scenario {
    // The answer to the follow-up turn comes first, selected by its prompt, so leftover steps
    // of an interrupted run never answer it.
    let mut steps =
        vec![Step::text("follow-up answered").when(Match::new().last_user_contains("NEXT-TURN"))];
    for turn in 0..rng.gen_range(1..=3) {
        if rng.gen_bool(0.3) {
            steps.push(Step::error(529));
        }
        let mut calls = Vec::new();
        for i in 0..rng.gen_range(1..=3) {
            let call = match rng.gen_range(0..4) {
                0 => Call::new(
                    "Bash",
                    json!({"command": format!("sleep 0.{}; echo step-{turn}-{i}; : {marker}", rng.gen_range(1..4))}),
                ),
                1 => Call::new("Bash", json!({"command": "cat seed.txt"})),
                2 => Call::new("Read", json!({"file_path": "seed.txt"})),
                _ => Call::new(
                    "Write",
                    json!({"file_path": format!("out-{turn}-{i}.txt"), "content": "x"}),
                ),
            };
            calls.push(call);
        }
        steps.push(if rng.gen_bool(0.5) {
            Step::tool_use_with_text("working", calls)
        } else {
            Step::tool_use(calls)
        });
    }
    steps.push(Step::text("all done"));
    Scenario::new(steps).on_exhausted(OnExhausted::Error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_at_random_moments_every_session_stays_well_formed() {
    let seed: u64 = std::env::var("KEEL_TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let runs: usize = std::env::var("KEEL_TORTURE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    eprintln!("torture: seed {seed} ({runs} runs); replay with KEEL_TORTURE_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    // Every run's scenario and interrupt moment come from the seed first, so a replay runs the
    // same set; the runs then go RUNS_AT_ONCE at a time (each mostly waits: on sleeps in its
    // commands, the interrupt's delay, keel-mock), which keeps the whole test short.
    let plans: Vec<(Scenario, Duration)> = (0..runs)
        .map(|run| {
            let marker = format!("keel-torture-{seed}-{run}");
            let scenario = random_scenario(&mut rng, &marker);
            (scenario, Duration::from_millis(rng.gen_range(0..700)))
        })
        .collect();
    let kinds: Vec<String> = futures_util::stream::iter(plans.into_iter().enumerate())
        .map(|(run, (scenario, delay))| one_run(seed, run, scenario, delay))
        .buffer_unordered(RUNS_AT_ONCE)
        .collect()
        .await;
    let mut ends = std::collections::BTreeMap::<String, usize>::new();
    for kind in kinds {
        *ends.entry(kind).or_default() += 1;
    }
    eprintln!("torture: how the {runs} runs ended: {ends:?}");
    assert!(
        ends.keys().any(|k| k.starts_with("interrupted/Tools")),
        "no run was interrupted inside tools: {ends:?}"
    );
    assert!(
        ends.keys().any(|k| k.starts_with("interrupted/Streaming")),
        "no run was interrupted while streaming: {ends:?}"
    );
}

/// How many runs are in flight at once.
const RUNS_AT_ONCE: usize = 4;

/// One run: `scenario`, interrupted after `delay`; every check of the test on it. Returns how
/// it ended.
async fn one_run(seed: u64, run: usize, scenario: Scenario, delay: Duration) -> String {
    let marker = format!("keel-torture-{seed}-{run}");
    let mut e = engine(scenario, keel_tools::builtin_tools(), &["Bash", "Write"]).await;
    std::fs::write(e.dir.path().join("seed.txt"), "seed\n").unwrap();
    let handle = e.session.handle();
    let (end, _receipt) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(
            e.session.run_turn(vec![ContentBlock::text("do the work")]),
            async {
                tokio::time::sleep(delay).await;
                handle.interrupt().await
            }
        )
    })
    .await
    .unwrap_or_else(|_| panic!("seed {seed} run {run}: the turn did not end"));
    let kind = match &end {
        TurnEnd::Interrupted { phase, .. } => format!("interrupted/{phase:?}"),
        other => format!("{:?}", other.terminal_reason()),
    };
    assert!(
        matches!(end, TurnEnd::Interrupted { .. } | TurnEnd::Completed { .. }),
        "seed {seed} run {run}: unexpected end {end:?}"
    );
    let history = e.session.history();
    assert!(
        history.open_calls().is_empty(),
        "seed {seed} run {run}: open calls {:?}",
        history.open_calls()
    );
    let body = json!({"model": "m", "max_tokens": 10, "messages": history.messages()});
    if let Err(problem) = keel_mock::validate_request(&body) {
        // A history that ends on the user's side is fine before the next prompt is merged in.
        panic!("seed {seed} run {run}: history invalid: {problem}");
    }
    let next = e
        .session
        .run_turn(vec![ContentBlock::text("NEXT-TURN: what happened?")])
        .await;
    assert_eq!(
        next,
        TurnEnd::Completed {
            text: "follow-up answered".into()
        },
        "seed {seed} run {run}: the next request was refused"
    );
    let last = e.mock.requests().into_iter().last().unwrap();
    assert_eq!(last.validation_error, None, "seed {seed} run {run}");
    e.session.shutdown().await;
    let left = processes_matching(&marker);
    assert!(
        left.is_empty(),
        "seed {seed} run {run}: processes left behind: {left:?}"
    );
    kind
}
