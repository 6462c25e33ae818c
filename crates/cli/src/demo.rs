//! `keel demo`: a complete session, offline, against a scripted model.
//!
//! The model is keel-mock running in-process with a bundled scenario, so no API key and no
//! network are needed. Everything else is real: keel runs each tool call the script asks for
//! (Glob, Read, Grep, Edit, Bash) in a scratch copy of a tiny Python project with a bug.

mod render;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use keel_mock::{MockServer, Scenario};
use keel_model::{AnthropicClient, ClientConfig, Model};
use keel_protocol::ContentBlock;

use crate::args::{Cli, OutputFormat};
use crate::run::{self, Prepared, RunInputs};

/// The script the in-process keel-mock replays.
const SCENARIO: &str = include_str!("demo/scenario.json");

/// The prompt the demo sends.
pub const PROMPT: &str = "mean() in stats.py gives wrong answers: mean([2, 4, 6]) returns 3. \
Find the bug, fix it, and run the checks.";

/// The seeded project: (file name, contents).
const PROJECT: &[(&str, &str)] = &[
    ("README.md", include_str!("demo/project/README.md")),
    ("stats.py", include_str!("demo/project/stats.py")),
    ("test_stats.py", include_str!("demo/project/test_stats.py")),
    ("run_checks.sh", include_str!("demo/project/run_checks.sh")),
];

const USAGE: &str = "\
Usage: keel demo [--keep] [--json] [--dir PATH]

Runs a complete keel session offline: a scripted model (keel-mock, in-process; no API key,
no network) asks keel to find and fix a bug in a tiny Python project, and keel really runs
every tool call (Glob, Read, Grep, Edit, Bash) in a scratch copy of that project.

Options:
  --keep       keep the scratch directory afterwards (default: remove it)
  --json       print the stream-json frames instead of the readable transcript
  --dir PATH   set the project up in PATH (must be empty or absent; never removed)
  -h, --help   show this help";

/// Parsed `keel demo` flags.
#[derive(Debug, Default, PartialEq)]
struct DemoArgs {
    keep: bool,
    json: bool,
    dir: Option<PathBuf>,
    help: bool,
}

fn parse_args(args: &[String]) -> Result<DemoArgs, String> {
    let mut out = DemoArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--keep" => out.keep = true,
            "--json" => out.json = true,
            "-h" | "--help" => out.help = true,
            "--dir" => match it.next() {
                Some(p) if !p.is_empty() => out.dir = Some(PathBuf::from(p)),
                _ => return Err("--dir needs a path".into()),
            },
            s if s.starts_with("--dir=") && s.len() > "--dir=".len() => {
                out.dir = Some(PathBuf::from(&s["--dir=".len()..]))
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(out)
}

/// Run `keel demo` with the arguments after `demo`; returns the exit code.
pub async fn run(args: &[String]) -> i32 {
    let a = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("keel demo: {e}\n\n{USAGE}");
            return 2;
        }
    };
    if a.help {
        println!("{USAGE}");
        return 0;
    }
    if let Some(d) = &a.dir {
        if let Err(e) = check_dir(d) {
            eprintln!("keel demo: {e}");
            return 2;
        }
    }
    let scratch = match Scratch::create(a.dir.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("keel demo: {e}");
            return 1;
        }
    };
    let code = match session(&a, &scratch).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("keel demo: {e}");
            1
        }
    };
    let removed = !a.keep && scratch.remove();
    if !a.json {
        render::scratch_note(&scratch.project, removed, a.dir.is_some());
    }
    code
}

/// Start the scripted model, run the session, and render it.
async fn session(a: &DemoArgs, scratch: &Scratch) -> Result<i32, String> {
    let scenario = Scenario::from_json(SCENARIO)
        .map_err(|e| format!("the bundled scenario is invalid (a keel bug): {e}"))?;
    let mock = MockServer::start(scenario)
        .await
        .map_err(|e| format!("could not start the scripted model on loopback: {e}"))?;
    let client = AnthropicClient::new(ClientConfig {
        base_url: mock.base_url(),
        api_key: Some("demo".into()),
        ..ClientConfig::default()
    })
    .map_err(|e| format!("could not set up the model client: {e}"))?;
    let model: Arc<dyn Model> = Arc::new(client);

    let cli = Cli::try_parse_from([
        "keel",
        "-p",
        PROMPT,
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash",
    ])
    .map_err(|e| format!("the demo's own flags did not parse (a keel bug): {e}"))?;
    let home = scratch.home.clone();
    let keel_home = home.join(".keel");
    // The demo sees none of the user's environment: no key, no settings, no memory files.
    let env: Arc<run::Env> = Arc::new(move |k: &str| match k {
        "HOME" => Some(home.display().to_string()),
        "KEEL_HOME" => Some(keel_home.display().to_string()),
        _ => None,
    });
    let inputs = RunInputs {
        env,
        cwd: scratch.project.clone(),
        model: Some(model),
    };
    let Prepared { mut session, rx } = run::prepare(&cli, inputs).map_err(|e| e.message)?;

    let printer = if a.json {
        tokio::spawn(async move {
            let p = crate::printer::print(rx, OutputFormat::StreamJson, true).await;
            p.write_error.is_none()
        })
    } else {
        render::banner(&scratch.project, PROMPT);
        tokio::spawn(render::render(rx, scratch.project.clone()))
    };
    let signals = run::spawn_signal_handler(session.handle());
    let end = session.run_turn(vec![ContentBlock::text(PROMPT)]).await;
    signals.abort();
    session.shutdown().await;
    drop(session); // closes the frame channel, so the printer finishes
    let printed_ok = printer.await.unwrap_or(false);
    mock.shutdown();
    if !printed_ok && a.json {
        return Ok(1);
    }
    Ok(end.exit_code())
}

/// The scratch directories of one demo run.
struct Scratch {
    /// Holds `home` (and `project`, unless `--dir` put it elsewhere).
    root: PathBuf,
    /// The project the scripted model works on (the session's working directory).
    project: PathBuf,
    /// `HOME` and `KEEL_HOME` of the session, so nothing of the user's is read or written.
    home: PathBuf,
}

impl Scratch {
    fn create(dir: Option<&Path>) -> Result<Self, String> {
        let given = match dir {
            Some(d) => Some(
                std::path::absolute(d)
                    .map_err(|e| format!("cannot resolve --dir {}: {e}", d.display()))?,
            ),
            None => None,
        };
        let root = fresh_dir(
            &std::env::temp_dir(),
            &format!("keel-demo-{}", std::process::id()),
        )?;
        let s = Scratch {
            home: root.join("home"),
            project: given.unwrap_or_else(|| root.join("project")),
            root,
        };
        if let Err(e) = s.seed() {
            s.remove();
            return Err(format!(
                "cannot set up the scratch project in {}: {e}",
                s.project.display()
            ));
        }
        Ok(s)
    }

    fn seed(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.project)?;
        std::fs::create_dir_all(&self.home)?;
        for (name, text) in PROJECT {
            std::fs::write(self.project.join(name), text)?;
        }
        Ok(())
    }

    /// Remove the scratch root (the project too, unless it came from `--dir`). True if gone.
    fn remove(&self) -> bool {
        std::fs::remove_dir_all(&self.root).is_ok()
    }
}

/// `--dir` must be empty or absent: the demo never writes over someone's files.
fn check_dir(d: &Path) -> Result<(), String> {
    match std::fs::read_dir(d) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(format!(
                "--dir {} is not empty; give an empty or new directory",
                d.display()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot use --dir {}: {e}", d.display())),
    }
}

/// Create `base/name`, or `base/name-N` when that exists already (a reused pid).
fn fresh_dir(base: &Path, name: &str) -> Result<PathBuf, String> {
    for n in 0..100 {
        let p = if n == 0 {
            base.join(name)
        } else {
            base.join(format!("{name}-{n}"))
        };
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", p.display())),
        }
    }
    Err(format!(
        "cannot create a scratch directory under {}: {name} and 99 variants exist",
        base.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn flags_parse() {
        assert_eq!(parse_args(&[]).unwrap(), DemoArgs::default());
        let a = parse_args(&s(&["--keep", "--json", "--dir", "/x"])).unwrap();
        assert!(a.keep && a.json && a.dir == Some(PathBuf::from("/x")));
        assert!(parse_args(&s(&["--dir"])).is_err());
        assert!(parse_args(&s(&["--frobnicate"])).is_err());
    }

    #[test]
    fn bundled_scenario_is_valid() {
        let sc = Scenario::from_json(SCENARIO).unwrap();
        sc.validate().unwrap();
    }
}
