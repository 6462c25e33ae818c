//! The UI's file I/O: which custom slash commands exist (the engine's loader), allow rules
//! written to `.claude/settings.local.json`.

use std::path::PathBuf;

use keel_core::extend::commands::Command;
use keel_core::extend::Scope;
use keel_tools::json_file::{self, JsonFileError};
use serde_json::Value;

/// Whether `name` is a custom command of the project or the user (`.claude/commands`), found
/// by the engine's loader. The engine expands `/name args` itself when the prompt reaches it,
/// so the interactive UI, `-p` and the SDKs run the same command the same way.
pub(super) fn custom_command(cwd: &std::path::Path, name: &str) -> Option<Command> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let env = |k: &str| std::env::var(k).ok();
    let user_dir = keel_core::builder::user_config_dir(&env, cwd);
    keel_core::extend::commands::find(cwd, home.as_deref(), user_dir.as_deref(), name)
}

/// Where a custom command comes from, for the line under its prompt: whose it is, its file
/// (relative to the project or to the home directory) and its description.
pub(super) fn command_origin(cwd: &std::path::Path, c: &Command) -> String {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = match (c.scope, home) {
        (Scope::Project, _) if c.path.starts_with(cwd) => c
            .path
            .strip_prefix(cwd)
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        (Scope::User, Some(h)) if c.path.starts_with(&h) => c
            .path
            .strip_prefix(&h)
            .map(|p| format!("~/{}", p.display()))
            .unwrap_or_default(),
        _ => c.path.display().to_string(),
    };
    let whose = match c.scope {
        Scope::Project => "the project's command",
        Scope::User => "your command",
    };
    let mut out = format!("/{} · {whose} ({file})", c.name);
    if let Some(d) = c.description.as_deref().filter(|d| !d.trim().is_empty()) {
        let d: String = d.lines().next().unwrap_or("").chars().take(120).collect();
        out.push_str(&format!(" · {d}"));
    }
    out
}

/// Add allow rules to `.claude/settings.local.json` in `cwd`, keeping everything else in it,
/// through the shared settings writer (locked, atomic, mode kept: other sessions may be
/// writing the same file). A file that is not a JSON object is left alone (the error says why).
pub fn save_rules(cwd: &std::path::Path, rules: &[String]) -> Result<PathBuf, JsonFileError> {
    let path = cwd.join(".claude").join("settings.local.json");
    json_file::update(&path, |root| {
        let refused = |reason: &str| JsonFileError::Refused {
            path: path.clone(),
            reason: reason.to_owned(),
        };
        let perms = root
            .entry("permissions")
            .or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
            .ok_or_else(|| refused("\"permissions\" is not an object"))?;
        let allow = perms
            .entry("allow")
            .or_insert_with(|| serde_json::json!([]))
            .as_array_mut()
            .ok_or_else(|| refused("\"permissions.allow\" is not a list"))?;
        for r in rules {
            if !allow.iter().any(|v| v.as_str() == Some(r)) {
                allow.push(Value::String(r.clone()));
            }
        }
        Ok(())
    })?;
    Ok(path)
}
