//! The scripted runs: the one-turn text case, the N-turn tool case, and timing keel through them.

#[allow(unused_imports)]
use super::*;

/// One measured scenario.
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) scenario: String,
    pub(crate) args: Vec<String>,
    /// Tool turns in the scenario (0 for the text run).
    pub(crate) turns: usize,
}

pub(crate) fn text_case() -> Case {
    let scenario = json!({"steps": [{"kind": "text", "text": "Hello from keel-mock."}]});
    Case {
        name: "text",
        scenario: scenario.to_string(),
        args: vec![],
        turns: 0,
    }
}

/// The tool each turn of the long session calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TurnTool {
    /// Bash `true`.
    Bash,
    /// Read of a small file in the working directory.
    Read,
}

impl TurnTool {
    pub(crate) fn label(self) -> &'static str {
        match self {
            TurnTool::Bash => "Bash `true`",
            TurnTool::Read => "Read of a 2 KB file",
        }
    }

    /// Its name on the command line (`--tool`, `--lean-server`).
    pub(crate) fn arg(self) -> &'static str {
        match self {
            TurnTool::Bash => "bash",
            TurnTool::Read => "read",
        }
    }

    pub(crate) fn from_arg(s: &str) -> Result<Self> {
        match s {
            "bash" => Ok(TurnTool::Bash),
            "read" => Ok(TurnTool::Read),
            other => bail!("the tool is bash or read, not {other:?}"),
        }
    }
}

/// The file the Read turns read (written into each run's working directory).
pub(crate) const READ_FILE: &str = "notes.txt";

pub(crate) fn tool_case(turns: usize, tool: TurnTool) -> Case {
    let (call, allow) = match tool {
        TurnTool::Bash => (
            json!({"name": "Bash", "input": {"command": "true"}}),
            "Bash",
        ),
        TurnTool::Read => (
            json!({"name": "Read", "input": {"file_path": READ_FILE}}),
            "Read",
        ),
    };
    let scenario = json!({"steps": [
        {"kind": "tool_use", "calls": [call], "times": turns},
        {"kind": "text", "text": "Done every turn."}
    ]});
    Case {
        name: "tools",
        scenario: scenario.to_string(),
        args: vec!["--allowedTools".into(), allow.into()],
        turns,
    }
}

/// The measurements of one timed run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Timed {
    pub(crate) wall_ms: f64,
    pub(crate) ttfr_ms: f64,
    /// How much `ttfr_ms` may overstate (the server's start-up).
    pub(crate) ttfr_slack_ms: f64,
    /// The model server's own time answering every request (raw-socket replay).
    pub(crate) server_ms: f64,
    /// The same, per request.
    pub(crate) server_each_ms: Vec<f64>,
    /// keel's `duration_api_ms` (waiting on the model, as keel sees it).
    pub(crate) api_ms: f64,
    /// Gaps between consecutive requests (ms).
    pub(crate) gaps_ms: Vec<f64>,
    /// keel's own CPU time (its threads only: not the shell children), read from /proc as
    /// the tool results stream out: (tool turns done, CPU ms). Empty where /proc is not there.
    pub(crate) cpu_marks: Vec<(usize, f64)>,
}

/// keel's CPU time so far in ms, if readable: the time on a CPU of each of its threads
/// (`/proc/PID/task/*/schedstat`, nanoseconds; /proc/PID/stat counts in 10 ms ticks, too
/// coarse for a block of turns). A thread that already exited is not counted (keel's threads
/// live as long as it does).
fn proc_cpu_ms(pid: u32) -> Option<f64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ns = 0u64;
    for t in tasks.flatten() {
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(ns as f64 / 1e6)
}

/// Read keel's stdout as it comes, noting keel's CPU time every `every` tool results; returns
/// the output and the marks.
fn read_marking(
    child: &mut std::process::Child,
    every: usize,
) -> Result<(std::process::Output, Vec<(usize, f64)>)> {
    use std::io::{BufRead, Read};
    let pid = child.id();
    let stdout = child.stdout.take().context("keel's stdout")?;
    let mut stderr = child.stderr.take().context("keel's stderr")?;
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let mut out = Vec::new();
    let mut marks = Vec::new();
    let mut results = 0usize;
    let mut r = std::io::BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.starts_with(br#"{"type":"user""#) {
            results += 1;
            if results.is_multiple_of(every) {
                if let Some(ms) = proc_cpu_ms(pid) {
                    marks.push((results, ms));
                }
            }
        }
        out.extend_from_slice(&line);
    }
    let status = child.wait()?;
    let stderr = err.join().unwrap_or_default();
    Ok((
        std::process::Output {
            status,
            stdout: out,
            stderr,
        },
        marks,
    ))
}

pub(crate) struct Bench<'a> {
    pub(crate) rt: &'a tokio::runtime::Runtime,
    pub(crate) keel: &'a Path,
    /// This binary, re-run as the usage probe.
    pub(crate) me: PathBuf,
    pub(crate) env: &'a [(String, String)],
}

impl Bench<'_> {
    pub(crate) fn start_mock(&self, case: &Case) -> Result<(MockServer, Instant, Instant)> {
        let scenario = Scenario::from_json(&case.scenario).context("bench scenario")?;
        let before = Instant::now();
        let mock = self.rt.block_on(MockServer::start(scenario))?;
        Ok((mock, before, Instant::now()))
    }

    pub(crate) fn command(
        &self,
        prefix: &[String],
        case: &Case,
        base_url: &str,
        dirs: &Dirs,
    ) -> Command {
        let (prog, pre) = match prefix.split_first() {
            Some((p, rest)) => (PathBuf::from(p), rest.to_vec()),
            None => (self.keel.to_path_buf(), vec![]),
        };
        let mut c = Command::new(prog);
        c.args(pre);
        if !prefix.is_empty() {
            c.arg(self.keel);
        }
        c.args(["-p", "bench", "--output-format", "stream-json", "--verbose"])
            .args(&case.args)
            .current_dir(dirs.cwd.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dirs.home.path())
            .env("KEEL_HOME", dirs.home.path().join(".keel"))
            .env("ANTHROPIC_BASE_URL", base_url)
            .env("ANTHROPIC_API_KEY", "bench")
            // Unused unless `--env KEEL_PROVIDER=openai[-chat]` picks an OpenAI API.
            .env("OPENAI_BASE_URL", format!("{base_url}/v1"))
            .env("OPENAI_API_KEY", "bench")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    pub(crate) fn timed(&self, case: &Case) -> Result<Timed> {
        let dirs = Dirs::new()?;
        let (mock, before, started) = self.start_mock(case)?;
        let mut cmd = self.command(&[], case, &mock.base_url(), &dirs);
        let launch = Instant::now();
        let mut child = cmd.spawn()?;
        let (out, cpu_marks) = read_marking(&mut child, crate::report::mark_every(case.turns))?;
        let wall = launch.elapsed();
        let result = check_run(case, &out)?;
        let reqs = messages_requests(&mock);
        mock.shutdown();
        let first = reqs.first().context("keel sent no request")?;
        let offset_ms = (launch - started).as_secs_f64() * 1000.0;
        let gaps_ms = reqs
            .windows(2)
            .map(|w| w[1].elapsed_ms - w[0].elapsed_ms)
            .collect();
        let bodies: Vec<(String, Value)> = reqs
            .iter()
            .map(|r| (r.path.clone(), r.body.clone()))
            .collect();
        let server_each_ms = self.replay(case, &bodies)?;
        Ok(Timed {
            wall_ms: wall.as_secs_f64() * 1000.0,
            ttfr_ms: first.elapsed_ms - offset_ms,
            ttfr_slack_ms: (started - before).as_secs_f64() * 1000.0,
            server_ms: server_each_ms.iter().sum(),
            server_each_ms,
            api_ms: result["duration_api_ms"].as_f64().unwrap_or(0.0),
            gaps_ms,
            cpu_marks,
        })
    }

    /// Peak RSS and CPU time of one run of keel, read by the usage probe.
    pub(crate) fn usage(&self, case: &Case) -> Result<Usage> {
        let dirs = Dirs::new()?;
        let (mock, _, _) = self.start_mock(case)?;
        let file = dirs.home.path().join("usage");
        let prefix = [
            self.me.display().to_string(),
            "--usage-probe".into(),
            file.display().to_string(),
        ];
        let out = self
            .command(&prefix, case, &mock.base_url(), &dirs)
            .spawn()?
            .wait_with_output()?;
        mock.shutdown();
        check_run(case, &out)?;
        let text = std::fs::read_to_string(&file).context("reading the probe's figures")?;
        let n: Vec<f64> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [rss_kb, user_us, sys_us] = n[..] else {
            bail!("the usage probe wrote {text:?}");
        };
        Ok(Usage {
            rss_mb: rss_kb / 1024.0,
            cpu_ms: (user_us + sys_us) / 1000.0,
        })
    }

    /// One run against the lean server (a process of its own, lean.rs).
    pub(crate) fn lean(&self, case: &Case, tool: TurnTool) -> Result<LeanRun> {
        let dirs = Dirs::new()?;
        let server = crate::lean::LeanServer::start(&self.me, case.turns, tool)?;
        let launch = Instant::now();
        let mut child = self.command(&[], case, &server.url, &dirs).spawn()?;
        let (out, marks) = read_marking(&mut child, crate::report::mark_every(case.turns))?;
        let wall_ms = launch.elapsed().as_secs_f64() * 1000.0;
        let log = server.finish()?;
        check_run(case, &out)?;
        if log.len() != case.turns + 1 {
            bail!(
                "the lean server answered {} requests; the run needs {}",
                log.len(),
                case.turns + 1
            );
        }
        Ok(LeanRun {
            marks,
            wall_ms,
            own_ms: crate::lean::own_each_ms(&log),
            gap_ms: crate::lean::gap_each_ms(&log),
            log,
        })
    }

    /// Time the model server needs to answer `bodies`, replayed in order on one keep-alive
    /// connection by a client that does nothing but write bytes and read them back (ms).
    pub(crate) fn replay(&self, case: &Case, bodies: &[(String, Value)]) -> Result<Vec<f64>> {
        let (mock, _, _) = self.start_mock(case)?;
        let total = replay_raw(mock.addr(), bodies);
        mock.shutdown();
        total
    }
}

/// One run against the lean server.
pub(crate) struct LeanRun {
    /// keel's CPU marks: (tool turns done, CPU ms of its threads).
    pub(crate) marks: Vec<(usize, f64)>,
    /// Launch to exit (ms).
    pub(crate) wall_ms: f64,
    /// keel's own share of each tool turn (ms), from the server's log: response i written →
    /// request i+1 read. Index 0 is tool turn 1.
    pub(crate) own_ms: Vec<f64>,
    /// Request to request for each tool turn (ms).
    pub(crate) gap_ms: Vec<f64>,
    /// The server's log.
    pub(crate) log: Vec<crate::lean::Served>,
}

/// A scratch working directory and home for one run.
pub(crate) struct Dirs {
    pub(crate) cwd: tempfile::TempDir,
    pub(crate) home: tempfile::TempDir,
}

impl Dirs {
    pub(crate) fn new() -> Result<Self> {
        let cwd = tempfile::tempdir()?;
        let line = "a line of notes that the Read turns read, again and again\n";
        std::fs::write(cwd.path().join(READ_FILE), line.repeat(2048 / line.len()))?;
        Ok(Dirs {
            cwd,
            home: tempfile::tempdir()?,
        })
    }
}

/// Fail loudly unless the run ended as the scenario says; returns the result frame.
pub(crate) fn check_run(case: &Case, out: &std::process::Output) -> Result<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    let want_turns = case.turns as u64 + 1;
    if !out.status.success()
        || last["subtype"] != "success"
        || last["num_turns"].as_u64() != Some(want_turns)
    {
        bail!(
            "keel did not complete the {} run as scripted (exit {:?}, expected {want_turns} turns)\nlast frame: {last}\nstderr: {stderr}",
            case.name,
            out.status.code()
        );
    }
    Ok(last)
}
