//! The table and the JSON line.

#[allow(unused_imports)]
use super::*;

pub(crate) fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

pub(crate) fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// Medians (and ranges) of everything measured.
pub(crate) struct Report {
    pub(crate) runs: usize,
    pub(crate) turns: usize,
    pub(crate) tool: TurnTool,
    pub(crate) text_wall: Vec<f64>,
    pub(crate) text_ttfr: Vec<f64>,
    pub(crate) ttfr_slack: f64,
    pub(crate) text_rss_mb: Vec<f64>,
    pub(crate) text_cpu: Vec<f64>,
    pub(crate) tools_wall: Vec<f64>,
    pub(crate) tools_ttfr: Vec<f64>,
    pub(crate) tools_server: Vec<f64>,
    pub(crate) tools_api: Vec<f64>,
    pub(crate) tools_cpu: Vec<f64>,
    pub(crate) turn_own: Vec<f64>,
    pub(crate) turn_issue: Vec<f64>,
    pub(crate) gap_first: f64,
    pub(crate) gap_last: f64,
    pub(crate) tools_rss_mb: Vec<f64>,
    pub(crate) shell: Shell,
    /// Per block of turns: (first turn, last turn, request-to-request ms per turn, the same
    /// minus the model server's replayed time, keel's own CPU ms per turn without the shell),
    /// medians over the runs.
    pub(crate) blocks: Vec<(usize, usize, f64, f64, f64)>,
    /// The same CPU figure against the lean server (see lean.rs): (first, last, ms per turn of
    /// each run).
    pub(crate) lean_blocks: Vec<(usize, usize, Vec<f64>)>,
    /// Against the lean server: each run's wall time per tool turn (ms).
    pub(crate) lean_turn_ms: Vec<f64>,
    /// Against the lean server: each run's mean of keel's own share per tool turn, the server's
    /// logged time subtracted per request (ms).
    pub(crate) lean_own_ms: Vec<f64>,
}

/// The block size for the per-turn rows: 100 turns when there are at least 200, else a fifth.
pub(crate) fn block_size(turns: usize) -> usize {
    if turns >= 200 {
        100
    } else {
        (turns / 5).max(1)
    }
}

/// How often keel's CPU time is read as tool results stream out: at every block's end, and in
/// long sessions every 20 turns too, for the table's flatness windows (turns 1–20, 181–200).
pub(crate) fn mark_every(turns: usize) -> usize {
    if turns >= 200 {
        crate::flat::WINDOW
    } else {
        block_size(turns)
    }
}

/// keel's CPU per turn over the turns `range`, from each run's marks (tool turns done, CPU ms
/// so far), for each run that has marks for the block.
fn block_cpu_each(runs: &[&[(usize, f64)]], range: std::ops::Range<usize>) -> Vec<f64> {
    let size = range.len() as f64;
    runs.iter()
        .filter_map(|marks| {
            let at = |n: usize| marks.iter().find(|(k, _)| *k == n).map(|(_, ms)| *ms);
            let start = if range.start == 0 {
                Some(0.0)
            } else {
                at(range.start)
            };
            Some((at(range.end)? - start?) / size)
        })
        .collect()
}

/// Per block of turns against the lean server: (first turn, last turn, keel's CPU ms per turn
/// of each run).
pub(crate) fn lean_blocks(
    turns: usize,
    runs: &[Vec<(usize, f64)>],
) -> Vec<(usize, usize, Vec<f64>)> {
    let size = block_size(turns);
    let marks: Vec<&[(usize, f64)]> = runs.iter().map(Vec::as_slice).collect();
    (0..turns / size)
        .map(|b| {
            let range = b * size..(b + 1) * size;
            (range.start + 1, range.end, block_cpu_each(&marks, range))
        })
        .collect()
}

impl Report {
    pub(crate) fn new(
        o: &Opts,
        t1: &[Timed],
        r1: &[Usage],
        t2: &[Timed],
        r2: &[Usage],
        shell: Shell,
    ) -> Self {
        let n = o.turns as f64;
        let col = |v: &[Timed], f: fn(&Timed) -> f64| v.iter().map(f).collect::<Vec<f64>>();
        let window = o.turns.clamp(1, 10);
        let gaps = |first: bool| {
            let per_run: Vec<f64> = t2
                .iter()
                .map(|t| {
                    // gaps_ms[i] is the time from request i to request i+1: tool turn i+1.
                    let g = &t.gaps_ms[..o.turns.min(t.gaps_ms.len())];
                    let part = if first {
                        &g[..window.min(g.len())]
                    } else {
                        &g[g.len().saturating_sub(window)..]
                    };
                    median(part)
                })
                .collect();
            median(&per_run)
        };
        let size = block_size(o.turns);
        let blocks = (0..o.turns / size)
            .map(|b| {
                let range = b * size..(b + 1) * size;
                let per_run = |own: bool| {
                    let v: Vec<f64> = t2
                        .iter()
                        .filter(|t| t.gaps_ms.len() >= range.end)
                        .map(|t| {
                            let gap: f64 = t.gaps_ms[range.clone()].iter().sum();
                            // gaps_ms[i] includes the server answering request i.
                            let server: f64 = if own {
                                t.server_each_ms[range.clone()].iter().sum()
                            } else {
                                0.0
                            };
                            (gap - server) / size as f64
                        })
                        .collect();
                    median(&v)
                };
                // keel's CPU over the block, from the marks taken as results streamed out.
                let marks: Vec<&[(usize, f64)]> =
                    t2.iter().map(|t| t.cpu_marks.as_slice()).collect();
                // (NaN when no run has marks for the block.)
                let cpu = median(&block_cpu_each(&marks, range.clone()));
                (
                    range.start + 1,
                    range.end,
                    per_run(false),
                    per_run(true),
                    cpu,
                )
            })
            .collect();
        Report {
            blocks,
            lean_blocks: Vec::new(),
            lean_turn_ms: Vec::new(),
            lean_own_ms: Vec::new(),
            tool: o.tool,
            runs: o.runs,
            turns: o.turns,
            text_wall: col(t1, |t| t.wall_ms),
            text_ttfr: col(t1, |t| t.ttfr_ms),
            ttfr_slack: median(&col(t1, |t| t.ttfr_slack_ms)),
            text_rss_mb: r1.iter().map(|u| u.rss_mb).collect(),
            text_cpu: r1.iter().map(|u| u.cpu_ms).collect(),
            tools_wall: col(t2, |t| t.wall_ms),
            tools_ttfr: col(t2, |t| t.ttfr_ms),
            tools_server: col(t2, |t| t.server_ms),
            tools_api: col(t2, |t| t.api_ms),
            tools_cpu: r2.iter().map(|u| u.cpu_ms).collect(),
            turn_own: t2
                .iter()
                .map(|t| (t.wall_ms - t.ttfr_ms - t.server_ms) / n)
                .collect(),
            turn_issue: t2.iter().map(|t| (t.wall_ms - t.ttfr_ms) / n).collect(),
            gap_first: gaps(true),
            gap_last: gaps(false),
            tools_rss_mb: r2.iter().map(|u| u.rss_mb).collect(),
            shell,
        }
    }

    /// CPU time per tool turn (keel and its shell child): the session's CPU time minus a
    /// one-turn run's (start-up and exit), spread over the turns.
    pub(crate) fn cpu_per_turn(&self) -> f64 {
        (median(&self.tools_cpu) - median(&self.text_cpu)) / self.turns as f64
    }

    pub(crate) fn print_table(&self) {
        let row = |label: &str, v: &[f64], unit: &str, note: &str| {
            let (lo, hi) = min_max(v);
            println!(
                "  {label:<48} {:>8.2} {unit:<3} ({lo:.2}–{hi:.2})  {note}",
                median(v)
            );
        };
        let one = |label: &str, x: f64, unit: &str, note: &str| {
            println!("  {label:<48} {x:>8.2} {unit:<3} {note}");
        };
        let verdict = |ok: bool| if ok { "meets" } else { "MISSES" };
        let ttfr = median(&self.text_ttfr);
        let rss1 = median(&self.text_rss_mb);
        let own = median(&self.turn_own);
        let rss2 = median(&self.tools_rss_mb);
        println!("\nkeel bench — medians of {} runs (min–max)", self.runs);
        println!("\none-turn text run");
        row(
            "launch → first request at the model server",
            &self.text_ttfr,
            "ms",
            &format!(
                "{} target < {TARGET_TTFR_MS} ms; incumbent ~{INCUMBENT_TTFR_MS} ms (overstates by ≤ {:.2} ms)",
                verdict(ttfr < TARGET_TTFR_MS),
                self.ttfr_slack
            ),
        );
        row("launch → exit", &self.text_wall, "ms", "");
        row("CPU time (user + system)", &self.text_cpu, "ms", "");
        row(
            "peak RSS",
            &self.text_rss_mb,
            "MB",
            &format!(
                "{} target < {TARGET_RSS_MB} MB; incumbent ~{INCUMBENT_RSS_MB} MB",
                verdict(rss1 < TARGET_RSS_MB)
            ),
        );
        println!(
            "\n{}-turn tool session ({} each turn, then text)",
            self.turns,
            self.tool.label()
        );
        row("launch → exit", &self.tools_wall, "ms", "");
        row("launch → first request", &self.tools_ttfr, "ms", "");
        row(
            "model server answering, all requests (replayed)",
            &self.tools_server,
            "ms",
            "",
        );
        row(
            "keel's duration_api_ms (waiting on the model)",
            &self.tools_api,
            "ms",
            "",
        );
        row(
            "keel's own time per tool turn",
            &self.turn_own,
            "ms",
            &format!(
                "{} target < {TARGET_TURN_MS} ms; incumbent ~{INCUMBENT_TURN_MS} ms",
                verdict(own < TARGET_TURN_MS)
            ),
        );
        row(
            "(wall − launch→first request) / turns",
            &self.turn_issue,
            "ms",
            "the issue's definition",
        );
        if self.tool == TurnTool::Bash {
            one(
                "  the shell child alone (bash -c true from Rust)",
                self.shell.wall_ms,
                "ms",
                "included in both figures above",
            );
            one(
                "keel's own time per tool turn, shell excluded",
                own - self.shell.wall_ms,
                "ms",
                "",
            );
            one(
                "CPU time per tool turn (keel + shell)",
                self.cpu_per_turn(),
                "ms",
                &format!("of which the shell alone ~{:.2} ms", self.shell.cpu_ms),
            );
        } else {
            one("CPU time per tool turn", self.cpu_per_turn(), "ms", "");
        }
        println!(
            "  {:<48} {:>8.2} ms → {:.2} ms  request to request, median of the first vs the last 10 turns",
            "turn time, early → late (flatness)", self.gap_first, self.gap_last
        );
        if let (Some(first), Some(last)) = (self.blocks.first(), self.blocks.last()) {
            for (a, b, gap, own, cpu) in &self.blocks {
                println!(
                    "  {:<48} {gap:>8.2} ms  wall, {own:.2} ms without the server's time; keel's CPU {cpu:.2} ms",
                    format!("turns {a}–{b}, per turn")
                );
            }
            println!(
                "  {:<48} {:>+7.1} %   keel's CPU per turn (shell not counted), turns {}–{} vs {}–{}",
                "growth, first block → last",
                (last.4 / first.4 - 1.0) * 100.0,
                first.0,
                first.1,
                last.0,
                last.1
            );
        }
        if let (Some(first), Some(last)) = (self.lean_blocks.first(), self.lean_blocks.last()) {
            println!(
                "  against a lean server (reads each request whole, parses and keeps nothing):"
            );
            row(
                "keel's own time per tool turn (wall)",
                &self.lean_turn_ms,
                "ms",
                &format!(
                    "{} target < {TARGET_TURN_MS} ms (the server costs next to nothing here)",
                    verdict(median(&self.lean_turn_ms) < TARGET_TURN_MS)
                ),
            );
            row(
                "keel's own share per turn (server's time out)",
                &self.lean_own_ms,
                "ms",
                &format!(
                    "{} target < {TARGET_TURN_MS} ms (per request, from the server's log)",
                    verdict(median(&self.lean_own_ms) < TARGET_TURN_MS)
                ),
            );
            for (a, b, cpu) in &self.lean_blocks {
                row(
                    &format!("turns {a}–{b}, keel's CPU per turn"),
                    cpu,
                    "ms",
                    "",
                );
            }
            let growth = (median(&last.2) / median(&first.2) - 1.0) * 100.0;
            println!(
                "  {:<48} {growth:>+7.1} %   turns {}–{} vs {}–{}, medians; {} target within 15 %",
                "growth, first block → last",
                first.0,
                first.1,
                last.0,
                last.1,
                verdict(growth <= 15.0)
            );
        }
        row(
            "peak RSS",
            &self.tools_rss_mb,
            "MB",
            &format!(
                "{} target < {TARGET_RSS_MB} MB, flat",
                verdict(rss2 < TARGET_RSS_MB)
            ),
        );
        println!();
    }

    pub(crate) fn json(&self) -> String {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        let m = |v: &[f64]| r(median(v));
        json!({
            "bench": "keel",
            "runs": self.runs,
            "turns": self.turns,
            "tool": format!("{:?}", self.tool).to_lowercase(),
            "text": {
                "ttfr_ms": m(&self.text_ttfr),
                "ttfr_max_overstatement_ms": r(self.ttfr_slack),
                "wall_ms": m(&self.text_wall),
                "cpu_ms": m(&self.text_cpu),
                "peak_rss_mb": m(&self.text_rss_mb),
            },
            "tools": {
                "wall_ms": m(&self.tools_wall),
                "ttfr_ms": m(&self.tools_ttfr),
                "server_ms": m(&self.tools_server),
                "duration_api_ms": m(&self.tools_api),
                "keel_ms_per_turn": m(&self.turn_own),
                "wall_minus_ttfr_ms_per_turn": m(&self.turn_issue),
                "shell_spawn_ms": r(self.shell.wall_ms),
                "keel_ms_per_turn_excl_shell": r(median(&self.turn_own) - self.shell.wall_ms),
                "cpu_ms": m(&self.tools_cpu),
                "cpu_ms_per_turn": r(self.cpu_per_turn()),
                "shell_cpu_ms": r(self.shell.cpu_ms),
                "turn_gap_first_ms": r(self.gap_first),
                "turn_gap_last_ms": r(self.gap_last),
                "peak_rss_mb": m(&self.tools_rss_mb),
                "blocks": self.blocks.iter().map(|(a, b, gap, own, cpu)| json!({
                    "turns": [a, b], "gap_ms": r(*gap), "wall_minus_server_ms": r(*own),
                    "keel_cpu_ms": r(*cpu)
                })).collect::<Vec<_>>(),
                "lean_blocks": self.lean_blocks.iter().map(|(a, b, cpu)| json!({
                    "turns": [a, b], "keel_cpu_ms": m(cpu)
                })).collect::<Vec<_>>(),
                "lean_keel_ms_per_turn": m(&self.lean_turn_ms),
                "lean_own_ms_per_turn": m(&self.lean_own_ms),
            },
            "targets": {"ttfr_ms": TARGET_TTFR_MS, "keel_ms_per_turn": TARGET_TURN_MS, "peak_rss_mb": TARGET_RSS_MB},
        })
        .to_string()
    }
}
