//! The UI's file I/O: custom slash commands read from `.claude/commands`, allow rules
//! written to `.claude/settings.local.json`.

use std::path::PathBuf;

use keel_tools::json_file::{self, JsonFileError};
use serde_json::Value;

/// A command from `.claude/commands/NAME.md` (the project's, then the user's).
pub(super) fn custom_command(cwd: &std::path::Path, name: &str) -> Option<String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == ':')
    {
        return None;
    }
    let file = format!("{}.md", name.replace(':', "/"));
    let mut dirs = vec![cwd.join(".claude/commands")];
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".claude/commands"));
    }
    dirs.into_iter()
        .find_map(|d| {
            // A repository's command file: bounded, regular files only.
            let how = keel_core::repofile::RepoRead::bounded(keel_core::repofile::REPO_FILE_LIMIT);
            keel_core::repofile::read_repo_file(&d.join(&file), &how).ok()
        })
        .map(|f| f.text)
        .map(|s| strip_front_matter(&s).trim().to_owned())
}

pub(super) fn strip_front_matter(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix("---\n") {
        if let Some(end) = rest.find("\n---") {
            let after = &rest[end + 4..];
            return after.strip_prefix('\n').unwrap_or(after);
        }
    }
    s
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
