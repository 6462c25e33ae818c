//! `--table`: the standing benchmark table (issue 34) in one run — first request, one-turn RSS,
//! keel's own share of a Bash and a Read turn at 50 and 500 turns, and the flatness of a
//! 200-turn Bash session (turns 1–20 against 181–200). `run-all.sh` beside this file adds the
//! Read-at-offset and resume figures from their own benches.

#[allow(unused_imports)]
use super::*;

use crate::flat::{growth, FLAT_TURNS, TARGET_FLAT_PCT, WINDOW as FLAT_WINDOW};

/// keel's own share of a Read turn.
const TARGET_READ_MS: f64 = 1.0;
/// The context window the table's runs assume (`KEEL_CONTEXT_WINDOW`), in tokens.
const LARGE_WINDOW: &str = "2000000";
/// One-turn peak RSS.
const TARGET_RSS_1_MB: f64 = 10.0;

/// One row: what, each run's figure, the target it is held to (`None`: shown only).
struct Row {
    what: String,
    values: Vec<f64>,
    unit: &'static str,
    target: Option<f64>,
}

impl Row {
    fn new(what: impl Into<String>, values: Vec<f64>, unit: &'static str) -> Self {
        Row {
            what: what.into(),
            values,
            unit,
            target: None,
        }
    }

    fn target(mut self, t: f64) -> Self {
        self.target = Some(t);
        self
    }
}

/// keel's own share per tool turn of each run: (wall − launch→first request − the model
/// server's replayed time) / turns, the shell child counted.
fn own_per_turn(t: &[Timed], turns: usize) -> Vec<f64> {
    t.iter()
        .map(|t| (t.wall_ms - t.ttfr_ms - t.server_ms) / turns as f64)
        .collect()
}

/// keel's own share per turn over tool turns `range` (0-based) of each run: request to request
/// less the server's replayed time for those requests.
fn own_in(t: &[Timed], range: std::ops::Range<usize>) -> Vec<f64> {
    t.iter()
        .filter(|t| t.gaps_ms.len() >= range.end && t.server_each_ms.len() >= range.end)
        .map(|t| {
            let gap: f64 = t.gaps_ms[range.clone()].iter().sum();
            let server: f64 = t.server_each_ms[range.clone()].iter().sum();
            (gap - server) / range.len() as f64
        })
        .collect()
}

/// keel's own CPU time per tool turn of each run (its threads, the shell children not counted),
/// between the first and the last mark taken as the tool results streamed out (so start-up is
/// not spread over the turns).
fn cpu_per_turn(t: &[Timed]) -> Vec<f64> {
    t.iter()
        .filter_map(|t| {
            let (first, last) = (t.cpu_marks.first()?, t.cpu_marks.last()?);
            (last.0 > first.0).then(|| (last.1 - first.1) / (last.0 - first.0) as f64)
        })
        .collect()
}

/// Growth of the late window over the early one, in %, from their medians.
fn growth_of(early: &[f64], late: &[f64]) -> f64 {
    growth(median(early), median(late))
}

/// Run every measurement of the table `runs` times and print it (Markdown) and a JSON line.
pub(crate) fn run_table(b: &Bench, runs: usize) -> Result<()> {
    // 500 Read turns of a 2 KB file are ~300k tokens: past the default window keel would
    // compact, which keel-mock cannot summarise. A larger window keeps every run a plain one.
    let mut env = b.env.to_vec();
    if !env.iter().any(|(k, _)| k == "KEEL_CONTEXT_WINDOW") {
        env.push(("KEEL_CONTEXT_WINDOW".into(), LARGE_WINDOW.into()));
    }
    let wide = Bench {
        rt: b.rt,
        keel: b.keel,
        me: b.me.clone(),
        env: &env,
    };
    let b = &wide;
    let load_before = crate::flat::loadavg();
    let times = |case: &Case| -> Result<Vec<Timed>> {
        eprintln!("  {} × {} turns of {} …", runs, case.turns, case.name);
        (0..runs).map(|_| b.timed(case)).collect()
    };
    b.timed(&text_case())?; // warm the page cache; not counted
    let text = times(&text_case())?;
    let rss: Vec<Usage> = (0..runs)
        .map(|_| b.usage(&text_case()))
        .collect::<Result<_>>()?;
    let mut rows = vec![
        Row::new(
            "launch → first request",
            text.iter().map(|t| t.ttfr_ms).collect(),
            "ms",
        )
        .target(TARGET_TTFR_MS),
        Row::new(
            "one-turn run, peak RSS",
            rss.iter().map(|u| u.rss_mb).collect(),
            "MB",
        )
        .target(TARGET_RSS_1_MB),
    ];
    for (tool, target) in [
        (TurnTool::Bash, TARGET_TURN_MS),
        (TurnTool::Read, TARGET_READ_MS),
    ] {
        for turns in [50, 500] {
            let t = times(&tool_case(turns, tool))?;
            rows.push(
                Row::new(
                    format!("{}, {turns} turns: keel's own share per turn", tool.label()),
                    own_per_turn(&t, turns),
                    "ms",
                )
                .target(target),
            );
            // Wall time on a busy machine includes waiting for a core; CPU time does not.
            rows.push(Row::new(
                format!(
                    "{}, {turns} turns: keel's CPU per turn (no shell)",
                    tool.label()
                ),
                cpu_per_turn(&t),
                "ms",
            ));
        }
    }
    rows.extend(flatness(b, runs)?);
    print_rows(&rows, runs);
    println!(
        "load average before {load_before}, after {}; scheduling: {}",
        crate::flat::loadavg(),
        crate::flat::policy()
    );
    Ok(())
}

/// The 200-turn Bash session. Against the lean server in its own process (flat.rs): keel's own
/// share per turn in turns 1–20 and 181–200, exact per request from the server's log, and
/// keel's own CPU in the same windows. Against keel-mock, for reference: the same share with the
/// server's time estimated by a replay (keel-mock's own work grows with the history).
fn flatness(b: &Bench, runs: usize) -> Result<Vec<Row>> {
    let case = tool_case(FLAT_TURNS, TurnTool::Bash);
    eprintln!("  {runs} × {FLAT_TURNS} turns of Bash, the lean server and keel-mock alternating …");
    let mut lean = Vec::with_capacity(runs);
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        lean.push(b.lean(&case, TurnTool::Bash)?);
        t.push(b.timed(&case)?);
    }
    let f = crate::flat::Flat::new(&lean, FLAT_TURNS);
    let (own_a, own_b) = (
        own_in(&t, 0..FLAT_WINDOW),
        own_in(&t, FLAT_TURNS - FLAT_WINDOW..FLAT_TURNS),
    );
    let pct = |what: &str, g: f64| Row::new(what, vec![g], "%");
    // Every turn of every run in the window: the median and min–max are per turn.
    let lean_row = |what: &str, w: &crate::flat::Window| Row::new(what, w.pooled.clone(), "ms");
    Ok(vec![
        lean_row("Bash, 200 turns: own share, turns 1–20", &f.own.0),
        lean_row("Bash, 200 turns: own share, turns 181–200", &f.own.1),
        pct(
            "Bash, 200 turns: own share, growth 1–20 → 181–200",
            f.own_growth(),
        )
        .target(TARGET_FLAT_PCT),
        Row::new(
            "Bash, 200 turns: keel's CPU, turns 1–20",
            f.cpu.0.clone(),
            "ms",
        ),
        Row::new(
            "Bash, 200 turns: keel's CPU, turns 181–200",
            f.cpu.1.clone(),
            "ms",
        ),
        pct(
            "Bash, 200 turns: keel's CPU, growth 1–20 → 181–200",
            f.cpu_growth(),
        )
        .target(TARGET_FLAT_PCT),
        pct(
            "Bash, 200 turns: the lean server's own time, growth 1–20 → 181–200",
            growth(f.server.0.median(), f.server.1.median()),
        ),
        pct(
            "Bash, 200 turns, against keel-mock (replayed server time): own share, growth",
            growth_of(&own_a, &own_b),
        ),
    ])
}

fn print_rows(rows: &[Row], runs: usize) {
    println!("\n| measurement (median of {runs} runs) | median | min–max | target | verdict |");
    println!("|---|---|---|---|---|");
    for r in rows {
        let (lo, hi) = min_max(&r.values);
        let m = median(&r.values);
        let (target, verdict) = match r.target {
            Some(t) if r.unit == "%" => {
                (format!("≤ {t} %"), if m <= t { "meets" } else { "MISSES" })
            }
            Some(t) => (
                format!("≤ {t} {}", r.unit),
                if m <= t { "meets" } else { "MISSES" },
            ),
            None => (String::new(), ""),
        };
        let range = if r.values.len() > 1 {
            format!("{lo:.2}–{hi:.2}")
        } else {
            String::new()
        };
        println!(
            "| {} | {m:.2} {} | {range} | {target} | {verdict} |",
            r.what, r.unit
        );
    }
    let json: Vec<Value> = rows
        .iter()
        .map(|r| json!({"what": r.what, "median": (median(&r.values) * 1000.0).round() / 1000.0, "unit": r.unit, "target": r.target}))
        .collect();
    println!(
        "\n{}",
        json!({"bench": "keel-table", "runs": runs, "rows": json})
    );
}
