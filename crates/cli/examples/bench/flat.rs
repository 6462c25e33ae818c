//! Flatness: does a turn cost keel more late in a long session than early? keel's own share of
//! each Bash `true` turn, exact per request from the lean server's log (lean.rs), in windows of
//! turns (1–20 against the last 20), and keel's own CPU in the same windows.
//!
//! `--flat [--versus PATH]` runs only this measurement; with `--versus` the runs alternate
//! between the two binaries (A, B, A, B, …) so a busy machine's drift falls on both alike.
//! `KEEL_BENCH_FLAT_DUMP=FILE` also writes every run's per-turn series there (JSON).

#[allow(unused_imports)]
use super::*;

/// Turns per window (turns 1–20 against the last 20).
pub(crate) const WINDOW: usize = 20;
/// The session the acceptance row is about.
pub(crate) const FLAT_TURNS: usize = 200;
/// The most a late window may cost over the first one, in %.
pub(crate) const TARGET_FLAT_PCT: f64 = 15.0;

/// One binary's figures over one window of turns, from every run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Window {
    /// Every per-turn value of every run in the window (ms).
    pub(crate) pooled: Vec<f64>,
    /// Each run's median over the window (ms).
    pub(crate) per_run: Vec<f64>,
}

impl Window {
    /// From each run's per-turn series, the turns `range` (0-based; index 0 is tool turn 1).
    pub(crate) fn of(series: &[&[f64]], range: std::ops::Range<usize>) -> Self {
        let mut w = Window::default();
        for s in series {
            if let Some(part) = s.get(range.clone()) {
                w.pooled.extend_from_slice(part);
                w.per_run.push(median(part));
            }
        }
        w
    }

    pub(crate) fn median(&self) -> f64 {
        median(&self.pooled)
    }

    pub(crate) fn min(&self) -> f64 {
        min_max(&self.pooled).0
    }
}

/// Growth of `late` over `early`, in %, from their medians.
pub(crate) fn growth(early: f64, late: f64) -> f64 {
    (late / early - 1.0) * 100.0
}

/// keel's own CPU per turn (its threads; the shell children not counted) over the turns
/// `range` of each run, from the marks taken every [`WINDOW`] tool results.
pub(crate) fn cpu_in(runs: &[LeanRun], range: std::ops::Range<usize>) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| {
            let at = |n: usize| r.marks.iter().find(|(k, _)| *k == n).map(|(_, ms)| *ms);
            let start = if range.start == 0 {
                Some(0.0)
            } else {
                at(range.start)
            };
            Some((at(range.end)? - start?) / range.len() as f64)
        })
        .collect()
}

/// The flatness figures of one binary over its runs.
pub(crate) struct Flat {
    pub(crate) turns: usize,
    pub(crate) own: (Window, Window),
    pub(crate) gap: (Window, Window),
    pub(crate) server: (Window, Window),
    pub(crate) cpu: (Vec<f64>, Vec<f64>),
    /// Body bytes of the first and the last request (median over the runs).
    pub(crate) bytes: (f64, f64),
    /// keel's own share per turn, median over each window of [`WINDOW`] turns in order.
    pub(crate) profile: Vec<f64>,
}

impl Flat {
    pub(crate) fn new(runs: &[LeanRun], turns: usize) -> Self {
        let early = 0..WINDOW.min(turns);
        let late = turns.saturating_sub(WINDOW)..turns;
        let own: Vec<&[f64]> = runs.iter().map(|r| r.own_ms.as_slice()).collect();
        let gap: Vec<&[f64]> = runs.iter().map(|r| r.gap_ms.as_slice()).collect();
        let server_ms: Vec<Vec<f64>> = runs
            .iter()
            .map(|r| r.log.iter().map(|s| s.server_ms()).collect())
            .collect();
        let server: Vec<&[f64]> = server_ms.iter().map(Vec::as_slice).collect();
        let both = |s: &[&[f64]]| (Window::of(s, early.clone()), Window::of(s, late.clone()));
        let bytes = |last: bool| {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| if last { r.log.last() } else { r.log.first() })
                .map(|s| s.bytes as f64)
                .collect();
            median(&v)
        };
        Flat {
            turns,
            own: both(&own),
            gap: both(&gap),
            server: both(&server),
            cpu: (cpu_in(runs, early.clone()), cpu_in(runs, late.clone())),
            bytes: (bytes(false), bytes(true)),
            profile: (0..turns / WINDOW)
                .map(|w| Window::of(&own, w * WINDOW..(w + 1) * WINDOW).median())
                .collect(),
        }
    }

    pub(crate) fn own_growth(&self) -> f64 {
        growth(self.own.0.median(), self.own.1.median())
    }

    pub(crate) fn cpu_growth(&self) -> f64 {
        growth(median(&self.cpu.0), median(&self.cpu.1))
    }

    /// Window labels, e.g. ("1–20", "181–200").
    pub(crate) fn labels(&self) -> (String, String) {
        let w = WINDOW.min(self.turns);
        (
            format!("1–{w}"),
            format!("{}–{}", self.turns - w + 1, self.turns),
        )
    }

    pub(crate) fn print(&self, name: &str) {
        let (a, b) = self.labels();
        let win = |what: &str, w: &(Window, Window)| {
            let (lo, hi) = (&w.0, &w.1);
            println!(
                "  {what:<44} {:>7.3} ms (min {:.3}) → {:>7.3} ms (min {:.3})   {:+.1} %",
                lo.median(),
                lo.min(),
                hi.median(),
                hi.min(),
                growth(lo.median(), hi.median())
            );
        };
        println!("\n{name}: {} turns of Bash `true`, lean server in its own process; turns {a} → {b}, per turn, median of every turn of every run", self.turns);
        win("keel's own share (server's time subtracted)", &self.own);
        win("request to request", &self.gap);
        win("the server's own time per request", &self.server);
        let (c0, c1) = (&self.cpu.0, &self.cpu.1);
        println!(
            "  {:<44} {:>7.3} ms ({:.3}–{:.3}) → {:>7.3} ms ({:.3}–{:.3})   {:+.1} %",
            "keel's CPU, shell not counted (per run)",
            median(c0),
            min_max(c0).0,
            min_max(c0).1,
            median(c1),
            min_max(c1).0,
            min_max(c1).1,
            self.cpu_growth()
        );
        let (r0, r1) = (&self.own.0.per_run, &self.own.1.per_run);
        println!(
            "  {:<44} {:.3}–{:.3} → {:.3}–{:.3} ms",
            "own share, each run's window median",
            min_max(r0).0,
            min_max(r0).1,
            min_max(r1).0,
            min_max(r1).1
        );
        println!(
            "  {:<44} {:.0} → {:.0} bytes",
            "request body, first → last", self.bytes.0, self.bytes.1
        );
        let profile: Vec<String> = self.profile.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "  {:<44} {}",
            format!("own share by {WINDOW} turns (ms)"),
            profile.join(" ")
        );
        let g = self.own_growth();
        println!(
            "  {:<44} {g:+.1} %  {} (target within {TARGET_FLAT_PCT} %)",
            "growth of keel's own share",
            if g <= TARGET_FLAT_PCT {
                "meets"
            } else {
                "MISSES"
            }
        );
    }

    pub(crate) fn json(&self) -> Value {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        let w = |p: &(Window, Window)| {
            json!({"early_ms": r(p.0.median()), "early_min_ms": r(p.0.min()),
                "late_ms": r(p.1.median()), "late_min_ms": r(p.1.min()),
                "growth_pct": r(growth(p.0.median(), p.1.median()))})
        };
        json!({
            "turns": self.turns, "window": WINDOW,
            "own": w(&self.own), "gap": w(&self.gap), "server": w(&self.server),
            "cpu": {"early_ms": r(median(&self.cpu.0)), "late_ms": r(median(&self.cpu.1)),
                "growth_pct": r(self.cpu_growth())},
            "bytes": [self.bytes.0, self.bytes.1],
            "profile_ms": self.profile.iter().map(|x| r(*x)).collect::<Vec<_>>(),
        })
    }
}

/// The load average (1, 5, 15 min), as /proc says it.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The scheduling policy the bench (and so keel, which inherits it) runs under: on a machine
/// busy with other work a turn under the normal policy often waits a whole time slice for a
/// core (2 ms turns become 10–15 ms ones, whatever the nice value); `chrt -f 10` takes that out.
pub(crate) fn policy() -> &'static str {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Field 41 (`policy`); the fields after the command name's closing parenthesis start at 3.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    match after.split_whitespace().nth(41 - 3) {
        Some("0") => "normal (SCHED_OTHER)",
        Some("1") => "SCHED_FIFO",
        Some("2") => "SCHED_RR",
        Some("3") => "SCHED_BATCH",
        Some("5") => "SCHED_IDLE",
        _ => "unknown",
    }
}

/// `--flat`: the flatness runs alone, for one binary or two alternating.
pub(crate) fn run_flat(b: &Bench, versus: Option<&Path>, runs: usize, turns: usize) -> Result<()> {
    let case = tool_case(turns, TurnTool::Bash);
    let bins: Vec<&Path> = std::iter::once(b.keel).chain(versus).collect();
    let load_before = loadavg();
    eprintln!(
        "load average before: {load_before}; scheduling: {}",
        policy()
    );
    b.timed(&text_case())?; // warm the page cache; not counted
    let mut each: Vec<Vec<LeanRun>> = bins.iter().map(|_| Vec::new()).collect();
    for i in 0..runs {
        for (k, bin) in bins.iter().enumerate() {
            let bk = Bench {
                rt: b.rt,
                keel: bin,
                me: b.me.clone(),
                env: b.env,
            };
            eprintln!(
                "  run {}/{runs}, {} …",
                i + 1,
                if k == 0 { "A" } else { "B" }
            );
            each[k].push(bk.lean(&case, TurnTool::Bash)?);
        }
    }
    let load_after = loadavg();
    if let Some(path) = std::env::var_os("KEEL_BENCH_FLAT_DUMP") {
        // Every run's per-turn series, for a closer look (one JSON document).
        let dump: Vec<Value> = each
            .iter()
            .flatten()
            .map(|r| json!({"own_ms": r.own_ms, "marks": r.marks}))
            .collect();
        std::fs::write(path, Value::Array(dump).to_string())?;
    }
    let mut out = Vec::new();
    for (k, bin) in bins.iter().enumerate() {
        let f = Flat::new(&each[k], turns);
        let name = format!("{} {}", if k == 0 { "A" } else { "B" }, bin.display());
        f.print(&name);
        out.push(json!({"keel": bin.display().to_string(), "flat": f.json()}));
    }
    println!(
        "\nload average before {load_before}, after {load_after}; {runs} runs per binary; scheduling: {}",
        policy()
    );
    println!(
        "{}",
        json!({"bench": "keel-flat", "runs": runs, "load_before": load_before,
            "load_after": load_after, "policy": policy(), "binaries": out})
    );
    Ok(())
}
