//! The environment as the engine sees it ([`Env`]: a lookup, so tests, the demo and embedders
//! can supply their own) and the directories it names: keel's home and the user's config
//! directory. A leaf: the builder and a live session both find their files through it.

use std::path::{Path, PathBuf};

/// Environment lookups go through this, so tests, the demo and embedders can supply their own.
pub type Env = dyn Fn(&str) -> Option<String> + Send + Sync;

/// `$KEEL_HOME`, else `$HOME/.keel`. A relative `KEEL_HOME` is taken from `cwd`.
pub fn keel_home(env: &Env, cwd: &Path) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let home = match nonempty("KEEL_HOME") {
        Some(h) => PathBuf::from(h),
        None => PathBuf::from(nonempty("HOME")?).join(".keel"),
    };
    Some(if home.is_absolute() {
        home
    } else {
        cwd.join(home)
    })
}

/// The user's config directory, as Claude Code has it: `$CLAUDE_CONFIG_DIR`, else
/// `$HOME/.claude` (user `settings.json`). A relative value is taken from `cwd`.
pub fn user_config_dir(env: &Env, cwd: &Path) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty()).map(PathBuf::from);
    let dir = nonempty("CLAUDE_CONFIG_DIR").or_else(|| Some(nonempty("HOME")?.join(".claude")))?;
    Some(if dir.is_absolute() {
        dir
    } else {
        cwd.join(dir)
    })
}
