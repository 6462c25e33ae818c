//! `keel demo`: a complete session, offline, against a scripted model.
//!
//! The model is keel-mock running in-process with a bundled scenario, so no API key and no
//! network are needed. Everything else is real: keel runs each tool call the script asks for
//! (Glob, Read, Grep, Edit, Bash) in a scratch copy of a tiny Python project with a bug.

mod render;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use keel_core::permissions::PermissionMode;
use keel_core::{Built, Env, SessionBuilder, SessionOptions};
use keel_mock::{MockServer, Scenario};
use keel_protocol::ContentBlock;

use crate::args::OutputFormat;

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

/// Runs a complete keel session offline: a scripted model (keel-mock, in-process; no API key,
/// no network) asks keel to find and fix a bug in a tiny Python project, and keel really runs
/// every tool call (Glob, Read, Grep, Edit, Bash) in a scratch copy of that project.
#[derive(Debug, Default, PartialEq, Parser)]
#[command(name = "keel demo")]
struct DemoArgs {
    /// Keep the scratch directory afterwards (default: remove it).
    #[arg(long)]
    keep: bool,
    /// Print the stream-json frames instead of the readable transcript.
    #[arg(long)]
    json: bool,
    /// Set the project up in PATH (must be empty or absent; never removed).
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
}

/// Run `keel demo` with the arguments after `demo`; returns the exit code.
pub async fn run(args: &[String]) -> i32 {
    let argv = std::iter::once("keel demo".to_owned()).chain(args.iter().cloned());
    let a: DemoArgs = match crate::parse_args(argv) {
        Ok(a) => a,
        Err(code) => return code,
    };
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
    let home = scratch.home.clone();
    let keel_home = home.join(".keel");
    let base_url = mock.base_url();
    // The demo sees none of the user's environment: no key, no settings, no memory files.
    let env: Arc<Env> = Arc::new(move |k: &str| match k {
        "HOME" => Some(home.display().to_string()),
        "KEEL_HOME" => Some(keel_home.display().to_string()),
        "ANTHROPIC_BASE_URL" => Some(base_url.clone()),
        // A token, not a key: apiKeySource stays "none", since the user gave keel no key.
        "ANTHROPIC_AUTH_TOKEN" => Some("demo".into()),
        _ => None,
    });
    let options = SessionOptions {
        permission_mode: Some(PermissionMode::AcceptEdits),
        allowed_tools: keel_core::builder::options::parse_rules(&["Bash"])
            .map_err(|e| format!("the demo's rule is invalid (a keel bug): {e}"))?,
        ..SessionOptions::default()
    };
    let Built {
        mut session,
        events,
        ..
    } = SessionBuilder::new(scratch.project.clone())
        .env(env)
        .options(options)
        .build()
        .await
        .map_err(|e| e.to_string())?;
    let printer = if a.json {
        tokio::spawn(async move {
            let p = crate::printer::print(
                events,
                None,
                None,
                OutputFormat::StreamJson,
                true,
                None,
                None,
            )
            .await;
            p.write_error.is_none()
        })
    } else {
        render::banner(&scratch.project, PROMPT);
        tokio::spawn(render::render(events, scratch.project.clone()))
    };
    let signals = crate::run::spawn_signal_handler(session.handle());
    let end = session.run_turn(vec![ContentBlock::text(PROMPT)]).await;
    signals.abort();
    session.shutdown().await;
    drop(session); // closes the event channel, so the printer finishes
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

    fn parse(v: &[&str]) -> Result<DemoArgs, clap::Error> {
        DemoArgs::try_parse_from(std::iter::once("keel demo").chain(v.iter().copied()))
    }

    #[test]
    fn flags_parse() {
        assert_eq!(parse(&[]).unwrap(), DemoArgs::default());
        let a = parse(&["--keep", "--json", "--dir", "/x"]).unwrap();
        assert!(a.keep && a.json && a.dir == Some(PathBuf::from("/x")));
        assert!(parse(&["--dir"]).is_err());
        assert!(parse(&["--frobnicate"]).is_err());
    }

    #[test]
    fn bundled_scenario_is_valid() {
        let sc = Scenario::from_json(SCENARIO).unwrap();
        sc.validate().unwrap();
    }
}
