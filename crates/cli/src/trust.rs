//! The folder-trust question the interactive UI asks before it starts, when the folder's own
//! settings would run commands or widen what keel may do (see `keel_core::builder::trust`).
//! Asked on the terminal before the session is built, so that nothing of those settings (a
//! SessionStart hook, an MCP server) has run when the user answers.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use keel_core::builder::options::SettingSource;
use keel_core::builder::trust;
use keel_core::SessionOptions;

/// Ask whether the user trusts `cwd` if its settings need it and no answer is remembered; a
/// "no" (or no answer) starts the session without the folder's settings (project and local).
/// `Err(code)` only when the terminal itself fails.
pub fn ask_if_needed(cwd: &Path, options: &mut SessionOptions) -> Result<(), i32> {
    let sources = options.setting_sources;
    if !sources.contains(SettingSource::Project) && !sources.contains(SettingSource::Local) {
        return Ok(());
    }
    // The user's state file, where Claude Code keeps its answer too:
    // `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
    let env = |k: &str| std::env::var(k).ok();
    let state = keel_core::builder::claude_json(&env, cwd);
    let risks = trust::project_risks(cwd);
    if risks.is_empty() || state.as_deref().is_some_and(|f| trust::is_trusted(f, cwd)) {
        return Ok(());
    }
    // Without a terminal the UI does not start (it says to use -p): nothing to ask.
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok(());
    }
    let mut err = std::io::stderr().lock();
    let shown = risks
        .iter()
        .map(|r| format!("  - {r}\n"))
        .collect::<String>();
    let asked = write!(
        err,
        "This folder's settings would change what keel may do here:\n{shown}\
         Do you trust the files in {}? Only say yes if you know where they came from. [y/N] ",
        trust::printable(&cwd.display().to_string())
    )
    .and_then(|_| err.flush());
    if let Err(e) = asked {
        eprintln!("keel: cannot ask on the terminal: {e}");
        return Err(1);
    }
    let mut answer = String::new();
    if let Err(e) = std::io::stdin().lock().read_line(&mut answer) {
        eprintln!("keel: cannot read the answer: {e}");
        return Err(1);
    }
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        match state {
            Some(f) => {
                if let Err(e) = trust::remember_trust(&f, cwd) {
                    eprintln!("keel: trusted for this run; the answer could not be kept ({e})");
                }
            }
            None => {
                eprintln!("keel: trusted for this run; HOME is not set, so the answer is not kept")
            }
        }
        return Ok(());
    }
    options.setting_sources = sources
        .without(SettingSource::Project)
        .without(SettingSource::Local);
    eprintln!(
        "keel starts without this folder's settings (.claude/settings.json and .claude/settings.local.json); it will ask again next time"
    );
    Ok(())
}
