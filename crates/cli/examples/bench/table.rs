//! `--table`: the standing benchmark table (issue 34) in one run — first request, one-turn RSS,
//! keel's own share of a Bash and a Read turn at 50 and 500 turns, and the flatness of a
//! 200-turn Bash session (turns 1–20 against 181–200). `run-all.sh` beside this file adds the
//! Read-at-offset and resume figures from their own benches.

#[allow(unused_imports)]
use super::*;

/// Turns per flatness window (turns 1–20 against the last 20).
pub(crate) const FLAT_WINDOW: usize = 20;
/// The session whose flatness is measured.
const FLAT_TURNS: usize = 200;
/// The most a late window may cost over the first one.
const TARGET_FLAT_PCT: f64 = 15.0;
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

/// keel's own CPU per turn (its threads, not the shell) over tool turns `range` of each run.
fn cpu_in(marks: &[Vec<(usize, f64)>], range: std::ops::Range<usize>) -> Vec<f64> {
    marks
        .iter()
        .filter_map(|m| {
            let at = |n: usize| m.iter().find(|(k, _)| *k == n).map(|(_, ms)| *ms);
            let start = if range.start == 0 {
                Some(0.0)
            } else {
                at(range.start)
            };
            Some((at(range.end)? - start?) / range.len() as f64)
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
fn growth(early: &[f64], late: &[f64]) -> f64 {
    (median(late) / median(early) - 1.0) * 100.0
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
    Ok(())
}

/// The 200-turn Bash session: keel's own share per turn at turns 1–20 and 181–200 against
/// keel-mock, and keel's own CPU per turn in the same windows against the lean server.
fn flatness(b: &Bench, runs: usize) -> Result<Vec<Row>> {
    let case = tool_case(FLAT_TURNS, TurnTool::Bash);
    eprintln!("  {runs} × {FLAT_TURNS} turns of Bash, keel-mock and the lean server …");
    let t: Vec<Timed> = (0..runs).map(|_| b.timed(&case)).collect::<Result<_>>()?;
    let lean: Vec<Vec<(usize, f64)>> = (0..runs)
        .map(|_| b.lean(&case, TurnTool::Bash).map(|(m, _)| m))
        .collect::<Result<_>>()?;
    let early = 0..FLAT_WINDOW;
    let late = FLAT_TURNS - FLAT_WINDOW..FLAT_TURNS;
    let (own_a, own_b) = (own_in(&t, early.clone()), own_in(&t, late.clone()));
    let (cpu_a, cpu_b) = (cpu_in(&lean, early), cpu_in(&lean, late));
    let flat = |what: &str, a: &[f64], b: &[f64]| {
        Row::new(what, vec![growth(a, b)], "%").target(TARGET_FLAT_PCT)
    };
    Ok(vec![
        Row::new(
            "Bash, 200 turns: own share, turns 1–20",
            own_a.clone(),
            "ms",
        ),
        Row::new(
            "Bash, 200 turns: own share, turns 181–200",
            own_b.clone(),
            "ms",
        ),
        flat(
            "Bash, 200 turns: own share, growth 1–20 → 181–200",
            &own_a,
            &own_b,
        ),
        Row::new(
            "Bash, 200 turns: keel's CPU, turns 1–20 (lean server)",
            cpu_a.clone(),
            "ms",
        ),
        Row::new(
            "Bash, 200 turns: keel's CPU, turns 181–200 (lean server)",
            cpu_b.clone(),
            "ms",
        ),
        flat(
            "Bash, 200 turns: keel's CPU, growth 1–20 → 181–200",
            &cpu_a,
            &cpu_b,
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
