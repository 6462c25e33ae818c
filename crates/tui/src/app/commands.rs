//! The UI's file I/O: custom slash commands read from `.claude/commands`, allow rules
//! written to `.claude/settings.local.json`.

use std::path::PathBuf;

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
        .find_map(|d| std::fs::read_to_string(d.join(&file)).ok())
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

/// Add allow rules to `.claude/settings.local.json` in `cwd`, keeping everything else in it.
/// A file that is not a JSON object is left alone (an error says why).
pub fn save_rules(cwd: &std::path::Path, rules: &[String]) -> Result<PathBuf, String> {
    let path = cwd.join(".claude").join("settings.local.json");
    let mut root: Value = match std::fs::read_to_string(&path) {
        Ok(s) if s.trim().is_empty() => serde_json::json!({}),
        Ok(s) => serde_json::from_str(&s).map_err(|e| {
            format!(
                "{} is not valid JSON ({e}); it was left as it is",
                path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let obj = root.as_object_mut().ok_or_else(|| {
        format!(
            "{} is not a JSON object; it was left as it is",
            path.display()
        )
    })?;
    let perms = obj
        .entry("permissions")
        .or_insert_with(|| serde_json::json!({}));
    let perms = perms.as_object_mut().ok_or_else(|| {
        format!(
            "\"permissions\" in {} is not an object; it was left as it is",
            path.display()
        )
    })?;
    let allow = perms
        .entry("allow")
        .or_insert_with(|| serde_json::json!([]));
    let allow = allow.as_array_mut().ok_or_else(|| {
        format!(
            "\"permissions.allow\" in {} is not a list; it was left as it is",
            path.display()
        )
    })?;
    for r in rules {
        if !allow.iter().any(|v| v.as_str() == Some(r)) {
            allow.push(Value::String(r.clone()));
        }
    }
    let dir = path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let body = serde_json::to_string_pretty(&root).map_err(|e| e.to_string())? + "\n";
    let tmp = dir.join(format!(".settings.local.json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, body)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", path.display())
        })?;
    Ok(path)
}
