//! `keel sessions`: list the sessions of this directory (or of every directory with `--all`),
//! most recent first, as a table or (`--json`) as JSON.

use std::io::Write;
use std::path::Path;

use clap::Parser;
use keel_core::transcript::{SessionSummary, Store};
use serde_json::{json, Value};

use keel_core::builder::keel_home;

/// `keel sessions` flags.
#[derive(Debug, Parser)]
#[command(
    name = "keel sessions",
    about = "List keel sessions, most recent first: id, last activity, messages, whether the last run ended properly, and the first prompt. Resume one with `keel -p PROMPT --resume ID`."
)]
struct SessionsCli {
    /// Every directory's sessions, not only this directory's.
    #[arg(long)]
    all: bool,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// Run `keel sessions ARGS`; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let argv = std::iter::once("keel sessions".to_owned()).chain(args.iter().cloned());
    let cli: SessionsCli = match crate::parse_args(argv) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let cwd = match crate::working_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let env = |k: &str| std::env::var(k).ok();
    let Some(home) = keel_home(&env, &cwd) else {
        eprintln!("Error: neither KEEL_HOME nor HOME is set, so keel does not know where sessions are kept");
        return 1;
    };
    let store = Store::from_env(&env, &cwd, Some(home.clone())).unwrap_or_else(|| Store::new(home));
    let sessions = store.list((!cli.all).then_some(cwd.as_path()));
    let out = if cli.json {
        let all: Vec<Value> = sessions.iter().map(to_json).collect();
        format!("{}\n", Value::Array(all))
    } else {
        table(&sessions, cli.all, &store, &cwd)
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`keel sessions | head`) is not worth an error message.
    match stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("keel: writing to stdout failed: {e}");
            1
        }
    }
}

fn to_json(s: &SessionSummary) -> Value {
    json!({
        "session_id": s.session_id,
        "cwd": s.cwd,
        "path": s.path.display().to_string(),
        "created_at": s.created_at,
        "last_activity": chrono::DateTime::<chrono::Utc>::from(s.last_activity)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "first_prompt": s.first_prompt,
        "messages": s.messages,
        "ended_cleanly": s.ended_cleanly,
        "last_result": s.last_result,
        "damaged_lines": s.damaged_lines,
        "forked_from": s.forked_from,
        "format": s.format,
    })
}

fn table(sessions: &[SessionSummary], all: bool, store: &Store, cwd: &Path) -> String {
    if sessions.is_empty() {
        return if all {
            format!(
                "No sessions yet (looked in {}).\n",
                store.projects_dir().display()
            )
        } else {
            format!(
                "No sessions yet for {} (looked in {}). `keel sessions --all` lists every directory's.\n",
                cwd.display(),
                store.project_dir(cwd).display()
            )
        };
    }
    let mut out = String::new();
    let dir_col = if all { "DIRECTORY  " } else { "" };
    out.push_str(&format!(
        "{:<36}  {:<19}  {:>5}  {:<5}  {:<11}  {dir_col}FIRST PROMPT\n",
        "SESSION", "LAST ACTIVITY", "MSGS", "ENDED", "FORMAT"
    ));
    for s in sessions {
        let when = chrono::DateTime::<chrono::Local>::from(s.last_activity)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        let ended = if s.ended_cleanly { "yes" } else { "no" };
        let dir = if all {
            format!("{}  ", s.cwd.as_deref().unwrap_or("?"))
        } else {
            String::new()
        };
        let prompt = s.first_prompt.as_deref().map(one_line).unwrap_or_default();
        let damaged = match s.damaged_lines {
            0 => String::new(),
            n => format!(" [{n} damaged line{}]", if n == 1 { "" } else { "s" }),
        };
        out.push_str(&format!(
            "{:<36}  {:<19}  {:>5}  {:<5}  {:<11}  {dir}{prompt}{damaged}\n",
            s.session_id, when, s.messages, ended, s.format
        ));
    }
    out
}

/// The prompt on one line, cut to a readable length.
fn one_line(s: &str) -> String {
    const MAX: usize = 60;
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX {
        flat
    } else {
        let cut: String = flat.chars().take(MAX - 1).collect();
        format!("{cut}…")
    }
}
