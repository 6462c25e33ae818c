//! Folder trust: before the interactive UI applies a folder's own settings that run commands or
//! widen what keel may do (hooks, allow rules, a permission mode, MCP servers, the sandbox off,
//! environment), it asks whether the user trusts the folder. The answer is kept per folder in
//! the user's state file (`~/.claude.json`, or `$CLAUDE_CONFIG_DIR/.claude.json`), as
//! `projects.<path>.hasTrustDialogAccepted`, the field Claude Code keeps there too. Headless runs do not ask (nobody could answer); what a repository can never
//! do, trusted or not, is choose bypassPermissions or weaken the user's sandbox (see
//! [`super::settings::hold_back_repository`]).

use std::path::{Path, PathBuf};

use keel_tools::json_file::{self, JsonFileError};
use keel_tools::repofile::{read_repo_file, RepoFileError, RepoRead, REPO_FILE_LIMIT};
use serde_json::{Map, Value};

/// The project's own settings files, in the order they apply.
const PROJECT_FILES: [&str; 2] = [".claude/settings.json", ".claude/settings.local.json"];

/// What a folder's settings would do that needs the user's trust: one line per thing, naming
/// the file. Files that cannot be read or parsed are named too (the run reports them in full).
pub fn project_risks(cwd: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for rel in PROJECT_FILES {
        let path = cwd.join(rel);
        let text = match read_repo_file(&path, &RepoRead::bounded(REPO_FILE_LIMIT)) {
            Ok(f) => f.text,
            Err(RepoFileError::Missing { .. }) => continue,
            Err(e) => {
                out.push(format!("{rel}: cannot be read ({e})"));
                continue;
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(v)) => out.extend(
                risks_of(&v)
                    .into_iter()
                    .map(|r| format!("{rel}: {}", printable(&r))),
            ),
            Ok(_) | Err(_) => out.push(format!("{rel}: is not a JSON object")),
        }
    }
    out
}

/// The risky parts of one settings document.
fn risks_of(v: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::Object(hooks)) = v.get("hooks") {
        let events: Vec<&str> = hooks
            .iter()
            .filter(|(_, m)| m.as_array().is_some_and(|a| !a.is_empty()))
            .map(|(k, _)| k.as_str())
            .collect();
        if !events.is_empty() {
            out.push(format!("runs commands as hooks ({})", events.join(", ")));
        }
    }
    let perms = v.get("permissions");
    let allow: Vec<&str> = perms
        .and_then(|p| p.get("allow"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !allow.is_empty() {
        out.push(format!("allows without asking: {}", shorten(&allow)));
    }
    if let Some(mode) = perms
        .and_then(|p| p.get("defaultMode"))
        .and_then(Value::as_str)
        .filter(|m| *m != "default")
    {
        out.push(format!("sets the permission mode to {mode}"));
    }
    if let Some(Value::Array(dirs)) = perms.and_then(|p| p.get("additionalDirectories")) {
        if !dirs.is_empty() {
            out.push("adds directories keel may work in".to_owned());
        }
    }
    if let Some(Value::Object(servers)) = v.get("mcpServers") {
        if !servers.is_empty() {
            let names: Vec<&str> = servers.keys().map(String::as_str).collect();
            out.push(format!("starts MCP servers: {}", shorten(&names)));
        }
    }
    if v.get("enableAllProjectMcpServers") == Some(&Value::Bool(true))
        || v.get("enabledMcpjsonServers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    {
        out.push("approves the MCP servers of its own .mcp.json".to_owned());
    }
    // `"sandbox": false` is the short form settings also take.
    if v.get("sandbox") == Some(&Value::Bool(false))
        || v.get("sandbox").and_then(|s| s.get("enabled")) == Some(&Value::Bool(false))
    {
        out.push("turns the sandbox off".to_owned());
    }
    if let Some(Value::Object(env)) = v.get("env") {
        if !env.is_empty() {
            let names: Vec<&str> = env.keys().map(String::as_str).collect();
            out.push(format!("sets environment variables: {}", shorten(&names)));
        }
    }
    out
}

/// `text` with every control character written as an escape, so that a repository's strings
/// (rule texts, server names, variable names, a folder's name) cannot move the cursor or erase
/// lines of the question they are shown in.
pub fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

fn shorten(items: &[&str]) -> String {
    const SHOWN: usize = 6;
    let mut s = items
        .iter()
        .take(SHOWN)
        .map(|i| i.chars().take(80).collect::<String>())
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    s
}

/// The key a folder's answer is kept under: its absolute path, links resolved.
fn folder_key(cwd: &Path) -> String {
    std::fs::canonicalize(cwd)
        .unwrap_or_else(|_| cwd.to_path_buf())
        .display()
        .to_string()
}

/// Whether the user's state file `state` (see [`super::claude_json`]) says they trust `cwd`
/// (or a folder above it).
pub fn is_trusted(state: &Path, cwd: &Path) -> bool {
    let Ok(f) = read_repo_file(state, &RepoRead::bounded(16 << 20)) else {
        return false;
    };
    let Ok(Value::Object(state)) = serde_json::from_str::<Value>(&f.text) else {
        return false;
    };
    let Some(Value::Object(projects)) = state.get("projects") else {
        return false;
    };
    let key = PathBuf::from(folder_key(cwd));
    key.ancestors().any(|dir| {
        projects
            .get(&dir.display().to_string())
            .and_then(|p| p.get("hasTrustDialogAccepted"))
            == Some(&Value::Bool(true))
    })
}

/// Remember in the user's state file `state` that they trust `cwd` (a locked, atomic update
/// that keeps everything else in it).
pub fn remember_trust(state: &Path, cwd: &Path) -> Result<(), JsonFileError> {
    let key = folder_key(cwd);
    json_file::update(state, |state| {
        let projects = state
            .entry("projects")
            .or_insert_with(|| Value::Object(Map::new()));
        if !projects.is_object() {
            *projects = Value::Object(Map::new());
        }
        if let Value::Object(projects) = projects {
            let entry = projects
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(e) = entry {
                e.insert("hasTrustDialogAccepted".into(), Value::Bool(true));
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risky_settings_are_named_and_harmless_ones_are_not() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".claude")).unwrap();
        assert!(
            project_risks(d.path()).is_empty(),
            "no files, nothing to ask"
        );
        std::fs::write(
            d.path().join(".claude/settings.json"),
            r#"{"permissions": {"deny": ["Read(./.env)"], "defaultMode": "default"}}"#,
        )
        .unwrap();
        assert!(project_risks(d.path()).is_empty(), "deny rules only narrow");
        std::fs::write(
            d.path().join(".claude/settings.local.json"),
            r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}]},
                "permissions": {"allow": ["Bash(npm:*)"], "defaultMode": "acceptEdits"},
                "mcpServers": {"s": {"command": "y"}}, "sandbox": {"enabled": false},
                "env": {"KEEL_MAX_RETRIES": "9"}, "enableAllProjectMcpServers": true}"#,
        )
        .unwrap();
        let r = project_risks(d.path()).join("\n");
        for needle in [
            "hooks (SessionStart)",
            "Bash(npm:*)",
            "acceptEdits",
            "MCP servers: s",
            "sandbox off",
            "KEEL_MAX_RETRIES",
            "its own .mcp.json",
        ] {
            assert!(r.contains(needle), "{needle} in {r}");
        }
        assert!(
            r.lines()
                .all(|l| l.starts_with(".claude/settings.local.json: ")),
            "{r}"
        );
        // A repository's strings cannot draw on the terminal.
        std::fs::write(
            d.path().join(".claude/settings.local.json"),
            "{\"permissions\": {\"allow\": [\"Read\\u001b[1A\\u001b[2K\"]}, \"sandbox\": false}",
        )
        .unwrap();
        let r = project_risks(d.path()).join("\n");
        assert!(!r.contains('\u{1b}'), "{r:?}");
        assert!(r.contains("Read\\u{1b}[1A"), "{r}");
        assert!(r.contains("sandbox off"), "{r}");
    }

    #[test]
    fn trust_is_remembered_per_folder_and_covers_folders_below() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let sub = work.path().join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let file = home.path().join(".claude.json");
        std::fs::write(&file, r#"{"mcpServers": {"keep": {}}}"#).unwrap();
        assert!(!is_trusted(&file, work.path()));
        remember_trust(&file, work.path()).unwrap();
        assert!(is_trusted(&file, work.path()));
        assert!(is_trusted(&file, &sub));
        assert!(!is_trusted(&file, home.path()));
        let state: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            state["mcpServers"]["keep"],
            serde_json::json!({}),
            "the rest is kept"
        );
    }
}
