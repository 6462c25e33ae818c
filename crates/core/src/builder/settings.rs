//! Permission settings users already keep: `~/.claude/settings.json` (user),
//! `.claude/settings.json` (project), `.claude/settings.local.json` (local) and `--settings`
//! (a JSON object or a file). keel reads their `permissions` — `allow`, `deny`, `ask`, `defaultMode` —
//! and remembers where each rule came from, so a denial can name it.

use std::path::{Path, PathBuf};

use keel_tools::repofile::{read_repo_file, RepoFileError, RepoRead, REPO_FILE_LIMIT};
use serde_json::Value;

use super::options::{SettingSource, SettingSources};
use super::BuildError;
use crate::permissions::{PermissionMode, Rule, RuleSource};

/// The variables a settings file's `env` may set (the process environment still wins).
pub const SETTINGS_ENV: &[&str] = &[
    "DISABLE_PROMPT_CACHING",
    "DISABLE_AUTO_COMPACT",
    "KEEL_CONTEXT_WINDOW",
    "KEEL_COMPACT_THRESHOLD_TOKENS",
    "MAX_THINKING_TOKENS",
    "KEEL_SEARCH_THREADS",
    "KEEL_FILE_TOOL_TIMEOUT_MS",
    "KEEL_BASH_DEFAULT_TIMEOUT_MS",
    "KEEL_MAX_RETRIES",
    "CLAUDE_CODE_MAX_RETRIES",
    "KEEL_RETRY_BUDGET_MS",
    "KEEL_STREAM_IDLE_TIMEOUT_MS",
    "KEEL_CONNECT_TIMEOUT_MS",
];

/// Which project MCP servers the user approved.
#[derive(Debug, Default, Clone)]
pub struct McpApprovals {
    /// `enableAllProjectMcpServers`.
    pub all: bool,
    /// `enabledMcpjsonServers`.
    pub enabled: Vec<String>,
    /// `disabledMcpjsonServers` (wins over both).
    pub disabled: Vec<String>,
}

impl McpApprovals {
    /// Whether the project's server `name` may start.
    pub fn allows(&self, name: &str) -> bool {
        !self.disabled.iter().any(|d| d == name)
            && (self.all || self.enabled.iter().any(|e| e == name))
    }

    fn read(&mut self, v: &Value, where_: &str) -> Result<(), BuildError> {
        match v.get("enableAllProjectMcpServers") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => self.all = *b,
            Some(other) => {
                return Err(BuildError::Usage(format!(
                    "Error: settings {where_}: enableAllProjectMcpServers must be true or false, not {other}"
                )))
            }
        }
        for (key, list) in [
            ("enabledMcpjsonServers", &mut self.enabled),
            ("disabledMcpjsonServers", &mut self.disabled),
        ] {
            match v.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    for i in items {
                        match i {
                            Value::String(s) => list.push(s.clone()),
                            other => {
                                return Err(BuildError::Usage(format!(
                                    "Error: settings {where_}: {key} must be a list of server names, and {other} is not one"
                                )))
                            }
                        }
                    }
                }
                Some(other) => {
                    return Err(BuildError::Usage(format!(
                    "Error: settings {where_}: {key} must be a list of server names, not {other}"
                )))
                }
            }
        }
        Ok(())
    }
}

/// Rules and a default mode gathered from settings.
#[derive(Debug, Default)]
pub struct SettingsRules {
    /// Allow rules, each with its source.
    pub allow: Vec<Rule>,
    /// Deny rules, each with its source.
    pub deny: Vec<Rule>,
    /// Ask rules, each with its source.
    pub ask: Vec<Rule>,
    /// `defaultMode` of the most specific source that sets one.
    pub default_mode: Option<PermissionMode>,
    /// `additionalDirectories` of every source, as written (`~/x`, relative to the project).
    pub additional_directories: Vec<String>,
    /// The `additionalDirectories` the sandbox makes writable: every source's, or only the
    /// user's own when the sandbox is the user's ([`hold_back_repository`] decides).
    pub sandbox_directories: Vec<String>,
    /// `hooks` of every source (all of them run).
    pub hooks: Vec<crate::command_hooks::CommandHook>,
    /// Hooks accepted but never run (events keel does not fire), to report.
    pub hook_notes: Vec<String>,
    /// `sandbox.enabled` of the most specific source that sets it.
    pub sandbox_enabled: Option<bool>,
    /// `sandbox.network` of the most specific source that sets it (true: allowed).
    pub sandbox_network: Option<bool>,
    /// `sandbox.writablePaths` of every source, as written.
    pub sandbox_writable: Vec<String>,
    /// `env`: variables for keel's own settings (`DISABLE_PROMPT_CACHING`, ...); the most
    /// specific source wins, and the process environment wins over all of them.
    pub env: std::collections::BTreeMap<String, String>,
    /// Each file's `mcpServers`, in the order read (later files win).
    pub mcp_servers: Vec<(std::path::PathBuf, Value)>,
    /// MCP servers of the project (`.mcp.json`, the project's settings files) the user's own
    /// settings approve: `enableAllProjectMcpServers`, `enabledMcpjsonServers`, less
    /// `disabledMcpjsonServers`. Read from the user's settings file and `--settings` only: a
    /// repository cannot approve its own servers.
    pub mcp_approvals: McpApprovals,
    /// The user's settings file, if it was read.
    pub user_file: Option<std::path::PathBuf>,
    /// `provider` of the most specific source that sets one, with where it was set.
    pub provider: Option<(String, String)>,
    /// What the user's own sources (their settings file, `--settings`) said of the mode and
    /// the sandbox: what a repository's files may not weaken.
    pub user_said: UserSaid,
    /// The repository file (project or local settings) that chose `default_mode`, when the
    /// choice is a repository's.
    pub repo_mode: Option<String>,
}

/// The mode and sandbox settings of the user's own sources only.
#[derive(Clone, Debug, Default)]
pub struct UserSaid {
    /// `defaultMode`.
    pub default_mode: Option<PermissionMode>,
    /// `sandbox.enabled`.
    pub sandbox_enabled: Option<bool>,
    /// `sandbox.network`.
    pub sandbox_network: Option<bool>,
    /// `sandbox.writablePaths`.
    pub sandbox_writable: Vec<String>,
    /// `permissions.additionalDirectories`.
    pub additional_directories: Vec<String>,
}

impl UserSaid {
    /// Take what one of the user's own documents says (later documents win).
    fn read(&mut self, v: &Value, where_: &str) -> Result<(), BuildError> {
        let mut one = SettingsRules::default();
        apply(&mut one, v, where_, RuleSource::Settings(where_.to_owned()))?;
        self.default_mode = one.default_mode.or(self.default_mode);
        self.sandbox_enabled = one.sandbox_enabled.or(self.sandbox_enabled);
        self.sandbox_network = one.sandbox_network.or(self.sandbox_network);
        self.sandbox_writable.extend(one.sandbox_writable);
        self.additional_directories
            .extend(one.additional_directories);
        Ok(())
    }
}

/// A repository's settings files may make a run stricter, never weaker than the user made
/// it: a `defaultMode` of bypassPermissions from them applies only when keel was launched
/// allowing bypass (`launched_bypass`), and a sandbox the user enabled (`sandbox_flag`, or
/// their own settings) is not switched off, opened to the network or given more writable
/// paths by them. What was held back is said in `warnings`.
pub fn hold_back_repository(
    s: &mut SettingsRules,
    launched_bypass: bool,
    sandbox_flag: bool,
    warnings: &mut Vec<String>,
) {
    if let (Some(PermissionMode::BypassPermissions), Some(file), false) =
        (s.default_mode, &s.repo_mode, launched_bypass)
    {
        warnings.push(format!(
            "{file} asks for permission mode bypassPermissions; a repository's settings cannot switch permission checks off, so it is not applied (start keel with --permission-mode bypassPermissions or --allow-dangerously-skip-permissions if you mean it)"
        ));
        s.default_mode = s.user_said.default_mode;
    }
    s.sandbox_directories = s.additional_directories.clone();
    if !(sandbox_flag || s.user_said.sandbox_enabled == Some(true)) {
        return; // no sandbox of the user's to protect
    }
    // A repository's additionalDirectories widen where the permission rules let keel work;
    // they do not make more of the disk writable inside the user's sandbox.
    if s.additional_directories.len() > s.user_said.additional_directories.len() {
        warnings.push("a repository's settings add directories (additionalDirectories); the sandbox you enabled does not make them writable".into());
    }
    s.sandbox_directories = s.user_said.additional_directories.clone();
    if s.sandbox_enabled == Some(false) {
        warnings.push(
            "a repository's settings turn the sandbox off; you enabled it, so it stays on".into(),
        );
        s.sandbox_enabled = Some(true);
    }
    if s.sandbox_network == Some(true) && s.user_said.sandbox_network != Some(true) {
        warnings.push(
            "a repository's settings open the sandbox to the network; you did not, so it stays off"
                .into(),
        );
    }
    s.sandbox_network = s.user_said.sandbox_network;
    if s.sandbox_writable.len() > s.user_said.sandbox_writable.len() {
        warnings.push("a repository's settings add writable paths to the sandbox you enabled; they are not applied".into());
    }
    s.sandbox_writable = std::mem::take(&mut s.user_said.sandbox_writable);
}

/// The settings files to read for `sources`, least specific first.
fn files(sources: SettingSources, cwd: &Path, user_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for source in sources.iter() {
        match source {
            SettingSource::User => out.extend(user_dir.map(|h| h.join("settings.json"))),
            SettingSource::Project => out.push(cwd.join(".claude/settings.json")),
            SettingSource::Local => out.push(cwd.join(".claude/settings.local.json")),
        }
    }
    out
}

/// Read the settings that apply to a run in `cwd`; `user_dir` is the user's config directory
/// (`$CLAUDE_CONFIG_DIR`, else `~/.claude`), which holds the user's `settings.json`.
pub fn load(
    flag: Option<&str>,
    sources: SettingSources,
    cwd: &Path,
    user_dir: Option<&Path>,
) -> Result<SettingsRules, BuildError> {
    let mut out = SettingsRules::default();
    let user_file = user_dir.map(|h| h.join("settings.json"));
    for path in files(sources, cwd, user_dir) {
        let text = match read_repo_file(&path, &RepoRead::bounded(REPO_FILE_LIMIT)) {
            Ok(f) => f.text,
            Err(RepoFileError::Missing { .. }) => continue,
            Err(e) => {
                return Err(BuildError::Usage(format!(
                    "Error: cannot use settings file: {e}"
                )))
            }
        };
        let where_ = path.display().to_string();
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            BuildError::Usage(format!(
                "Error: settings file {where_} is not valid JSON ({e})"
            ))
        })?;
        must_be_object(&v, &format!("settings file {where_}"))?;
        apply(&mut out, &v, &where_, RuleSource::Settings(where_.clone()))?;
        if user_file.as_ref() == Some(&path) {
            out.user_said.read(&v, &where_)?;
        } else if v.pointer("/permissions/defaultMode").is_some() {
            out.repo_mode = Some(where_.clone());
        }
        if let Some(servers) = v.get("mcpServers") {
            out.mcp_servers.push((path.clone(), servers.clone()));
        }
        if user_file.as_ref() == Some(&path) {
            out.mcp_approvals.read(&v, &where_)?;
            read_provider(&mut out, &v, &where_)?;
            out.user_file = Some(path.clone());
        } else if v.get("provider").is_some_and(|p| !p.is_null()) {
            out.hook_notes.push(format!(
                "settings {where_}: `provider` is ignored here; which company receives your code is yours to choose, in your user settings, --settings, --provider or KEEL_PROVIDER"
            ));
        }
    }
    if let Some(flag) = flag.filter(|f| !f.trim().is_empty()) {
        let (v, where_) = if flag.trim_start().starts_with('{') {
            let v = serde_json::from_str(flag).map_err(|e| {
                BuildError::Usage(format!("Error: --settings is not valid JSON ({e})"))
            })?;
            (v, "--settings".to_owned())
        } else {
            let text = read_repo_file(Path::new(flag), &RepoRead::bounded(REPO_FILE_LIMIT))
                .map_err(|e| BuildError::Usage(format!("Error: cannot use --settings file: {e}")))?
                .text;
            let v = serde_json::from_str(&text).map_err(|e| {
                BuildError::Usage(format!(
                    "Error: --settings file {flag} is not valid JSON ({e})"
                ))
            })?;
            (v, flag.to_owned())
        };
        let what = if where_ == "--settings" {
            "--settings".to_owned()
        } else {
            format!("--settings file {where_}")
        };
        must_be_object(&v, &what)?;
        let source = if where_ == "--settings" {
            RuleSource::Flag
        } else {
            RuleSource::Settings(where_.clone())
        };
        apply(&mut out, &v, &where_, source)?;
        out.user_said.read(&v, &where_)?;
        if v.pointer("/permissions/defaultMode").is_some() {
            out.repo_mode = None; // the user's own choice, made last
        }
        out.mcp_approvals.read(&v, &where_)?;
        read_provider(&mut out, &v, &where_)?;
    }
    Ok(out)
}

/// A settings document is a JSON object; anything else (`null`, a list, a number) would be
/// read as "no settings" and silently drop the deny rules its author meant, so it is an error.
fn must_be_object(v: &Value, what: &str) -> Result<(), BuildError> {
    let found = match v {
        Value::Object(_) => return Ok(()),
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
    };
    Err(BuildError::Usage(format!(
        "Error: {what} must hold a JSON object of settings, found {found}"
    )))
}

/// `provider`: only from the user's own settings and `--settings` — a repository does not get
/// to choose which company its readers' code and prompts are sent to.
fn read_provider(out: &mut SettingsRules, v: &Value, where_: &str) -> Result<(), BuildError> {
    match v.get("provider") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(p)) => {
            out.provider = Some((p.clone(), where_.to_owned()));
            Ok(())
        }
        Some(other) => Err(BuildError::Usage(format!(
            "Error: settings {where_}: provider must be a string, found {other}"
        ))),
    }
}

/// Read one settings document `v` (from `where_`) into `out`: env, hooks, sandbox, permissions.
fn apply(
    out: &mut SettingsRules,
    v: &Value,
    where_: &str,
    source: RuleSource,
) -> Result<(), BuildError> {
    apply_env(out, v, where_)?;
    if let Some(h) = v.get("hooks") {
        let (hooks, notes) = crate::command_hooks::parse_settings_hooks(h, where_)
            .map_err(|e| BuildError::Usage(format!("Error: settings {e}")))?;
        out.hooks.extend(hooks);
        out.hook_notes.extend(notes);
    }
    apply_sandbox(out, v, where_)?;
    apply_permissions(out, v, where_, source)
}

/// `env`: the variables among keel's own tuning knobs; any value must be a scalar.
fn apply_env(out: &mut SettingsRules, v: &Value, where_: &str) -> Result<(), BuildError> {
    match v.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Object(vars)) => {
            for (k, val) in vars {
                let val = match val {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(BuildError::Usage(format!(
                            "Error: settings {where_}: env.{k} must be a string, found {other}"
                        )))
                    }
                };
                // Only keel's own tuning knobs: a project's settings file comes with the
                // repository, and must not be able to move the API key to another server
                // (ANTHROPIC_BASE_URL), swap credentials or loosen a safety check.
                if SETTINGS_ENV.contains(&k.as_str()) {
                    out.env.insert(k.clone(), val);
                }
            }
        }
        Some(other) => {
            return Err(BuildError::Usage(format!(
                "Error: settings {where_}: env must be an object of variables, found {other}"
            )))
        }
    }
    Ok(())
}

/// `sandbox`: a switch, or an object of enabled, network and writablePaths.
fn apply_sandbox(out: &mut SettingsRules, v: &Value, where_: &str) -> Result<(), BuildError> {
    match v.get("sandbox") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => out.sandbox_enabled = Some(*b),
        Some(Value::Object(sb)) => {
            match sb.get("enabled") {
                None | Some(Value::Null) => {}
                Some(Value::Bool(b)) => out.sandbox_enabled = Some(*b),
                Some(other) => {
                    return Err(BuildError::Usage(format!(
                        "Error: {where_}: `sandbox.enabled` must be true or false, found {}",
                        json_kind(other)
                    )))
                }
            }
            match sb.get("network") {
                None | Some(Value::Null) => {}
                Some(Value::Bool(b)) => out.sandbox_network = Some(*b),
                // Another agent's domain allow-list: keel's switch cannot honour a list, so
                // it takes the closed side.
                Some(Value::Object(_)) => {
                    tracing::warn!("{where_}: `sandbox.network` is an object (a list of allowed hosts); keel's sandbox has only on or off, so the network stays off");
                    out.sandbox_network = Some(false);
                }
                Some(other) => {
                    return Err(BuildError::Usage(format!(
                        "Error: {where_}: `sandbox.network` must be true (allowed) or false, found {}",
                        json_kind(other)
                    )))
                }
            }
            match sb.get("writablePaths") {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    for i in items {
                        let p = i.as_str().filter(|p| !p.trim().is_empty()).ok_or_else(|| {
                            BuildError::Usage(format!(
                                "Error: {where_}: `sandbox.writablePaths` must be a list of paths"
                            ))
                        })?;
                        out.sandbox_writable.push(p.to_owned());
                    }
                }
                Some(other) => {
                    return Err(BuildError::Usage(format!(
                        "Error: {where_}: `sandbox.writablePaths` must be a list of paths, found {}",
                        json_kind(other)
                    )))
                }
            }
        }
        Some(other) => {
            return Err(BuildError::Usage(format!(
                "Error: {where_}: `sandbox` must be an object (enabled, network, writablePaths), found {}",
                json_kind(other)
            )))
        }
    }
    Ok(())
}

/// `permissions`: allow, deny and ask rules, additional directories and the default mode.
fn apply_permissions(
    out: &mut SettingsRules,
    v: &Value,
    where_: &str,
    source: RuleSource,
) -> Result<(), BuildError> {
    let perms = match v.get("permissions") {
        None | Some(Value::Null) => return Ok(()),
        Some(p @ Value::Object(_)) => p,
        // Refused, never skipped: ignoring it would drop the user's deny rules.
        Some(other) => {
            return Err(BuildError::Usage(format!(
                "Error: {where_}: `permissions` must be an object with allow, deny and defaultMode, found {}",
                json_kind(other)
            )))
        }
    };
    let bad = |what: &str| {
        BuildError::Usage(format!(
            "Error: {where_}: `permissions.{what}` must be a list of rule strings"
        ))
    };
    for (key, list) in [
        ("allow", &mut out.allow),
        ("deny", &mut out.deny),
        ("ask", &mut out.ask),
    ] {
        match perms.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    let text = item.as_str().ok_or_else(|| bad(key))?;
                    list.push(
                        Rule::parse(text, source.clone())
                            .map_err(|e| BuildError::Usage(format!("Error: {where_}: {e}")))?,
                    );
                }
            }
            Some(_) => return Err(bad(key)),
        }
    }
    match perms.get("additionalDirectories") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                let d = item.as_str().filter(|d| !d.trim().is_empty()).ok_or_else(|| {
                    BuildError::Usage(format!(
                        "Error: {where_}: `permissions.additionalDirectories` must be a list of directory paths"
                    ))
                })?;
                out.additional_directories.push(d.to_owned());
            }
        }
        Some(other) => {
            return Err(BuildError::Usage(format!(
                "Error: {where_}: `permissions.additionalDirectories` must be a list of directory paths, found {}",
                json_kind(other)
            )))
        }
    }
    match perms.get("defaultMode") {
        None | Some(Value::Null) => {}
        Some(Value::String(m)) => {
            out.default_mode = Some(PermissionMode::parse(m).ok_or_else(|| {
                BuildError::Usage(format!("Error: {where_}: `permissions.defaultMode` {m:?} is not a mode (acceptEdits, bypassPermissions, default, dontAsk, plan)"))
            })?);
        }
        Some(other) => {
            return Err(BuildError::Usage(format!(
                "Error: {where_}: `permissions.defaultMode` must be a mode name, found {}",
                json_kind(other)
            )))
        }
    }
    Ok(())
}

/// Read one settings document as [`load`] reads a file (for the fuzz target and tests).
pub fn parse_one(text: &str, where_: &str) -> Result<SettingsRules, BuildError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        BuildError::Usage(format!(
            "Error: settings file {where_} is not valid JSON ({e})"
        ))
    })?;
    let mut out = SettingsRules::default();
    apply(
        &mut out,
        &v,
        where_,
        RuleSource::Settings(where_.to_owned()),
    )?;
    Ok(out)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings from the user's file `user` and the project's file `project`, held back as a
    /// run without launch flags (`sandbox_flag`: `--sandbox`) would.
    fn held(user: &str, project: &str, sandbox_flag: bool) -> (SettingsRules, Vec<String>) {
        let cwd = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::fs::create_dir_all(cwd.path().join(".claude")).unwrap();
        std::fs::write(home.path().join(".claude/settings.json"), user).unwrap();
        std::fs::write(cwd.path().join(".claude/settings.json"), project).unwrap();
        let mut r = load(
            None,
            SettingSources::ALL,
            cwd.path(),
            Some(&home.path().join(".claude")),
        )
        .unwrap();
        let mut w = Vec::new();
        hold_back_repository(&mut r, false, sandbox_flag, &mut w);
        (r, w)
    }

    #[test]
    fn a_repository_cannot_weaken_the_sandbox_the_user_enabled() {
        let weaker = r#"{"sandbox": {"enabled": false, "network": true, "writablePaths": ["/"]}}"#;
        // Enabled in the user's settings, or by --sandbox: the project's weakening is refused.
        for (user, flag) in [(r#"{"sandbox": {"enabled": true}}"#, false), ("{}", true)] {
            let (r, w) = held(user, weaker, flag);
            assert!(flag || r.sandbox_enabled == Some(true), "{user}");
            assert_ne!(r.sandbox_network, Some(true), "{user}");
            assert!(
                r.sandbox_writable.is_empty(),
                "{user}: {:?}",
                r.sandbox_writable
            );
            assert_eq!(w.len(), 3, "each weakening is said: {w:?}");
        }
        // The user's own network and paths stay theirs.
        let (r, _) = held(
            r#"{"sandbox": {"enabled": true, "network": true, "writablePaths": ["~/.cache"]}}"#,
            weaker,
            false,
        );
        assert_eq!(r.sandbox_network, Some(true));
        assert_eq!(r.sandbox_writable, vec!["~/.cache".to_owned()]);
        // No sandbox of the user's: a project may still set up its own as it likes.
        let (r, w) = held(
            "{}",
            r#"{"sandbox": {"enabled": true, "network": true}}"#,
            false,
        );
        assert_eq!(
            (r.sandbox_enabled, r.sandbox_network),
            (Some(true), Some(true))
        );
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn a_repositorys_additional_directories_are_not_writable_in_the_users_sandbox() {
        let project = r#"{"permissions": {"additionalDirectories": ["/", "~"]}}"#;
        let (r, w) = held(r#"{"sandbox": {"enabled": true}}"#, project, false);
        assert_eq!(
            r.additional_directories,
            vec!["/".to_owned(), "~".to_owned()]
        );
        assert!(
            r.sandbox_directories.is_empty(),
            "{:?}",
            r.sandbox_directories
        );
        assert_eq!(w.len(), 1, "{w:?}");
        // The user's own stay writable; without a sandbox of the user's nothing is held back.
        let (r, _) = held(
            r#"{"sandbox": {"enabled": true}, "permissions": {"additionalDirectories": ["~/data"]}}"#,
            project,
            false,
        );
        assert_eq!(r.sandbox_directories, vec!["~/data".to_owned()]);
        let (r, w) = held("{}", project, false);
        assert_eq!(r.sandbox_directories.len(), 2);
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn a_repository_bypass_mode_falls_back_to_the_users_mode() {
        let bypass = r#"{"permissions": {"defaultMode": "bypassPermissions"}}"#;
        let (r, w) = held(
            r#"{"permissions": {"defaultMode": "acceptEdits"}}"#,
            bypass,
            false,
        );
        assert_eq!(r.default_mode, Some(PermissionMode::AcceptEdits));
        assert_eq!(w.len(), 1, "{w:?}");
        // The user's own bypass is theirs to choose.
        let (r, w) = held(bypass, "{}", false);
        assert_eq!(r.default_mode, Some(PermissionMode::BypassPermissions));
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn rules_from_every_source_keep_their_origin() {
        let cwd = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::fs::create_dir_all(cwd.path().join(".claude")).unwrap();
        std::fs::write(
            home.path().join(".claude/settings.json"),
            r#"{"permissions": {"deny": ["Task(Explore)"], "defaultMode": "plan"}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".claude/settings.json"),
            r#"{"permissions": {"allow": ["Bash(git status:*)"], "defaultMode": "acceptEdits"}}"#,
        )
        .unwrap();
        let r = load(
            Some(r#"{"permissions": {"deny": ["Write"], "ask": ["Bash(git push:*)"]}}"#),
            SettingSources::ALL,
            cwd.path(),
            Some(&home.path().join(".claude")),
        )
        .unwrap();
        assert_eq!(r.ask[0].text(), "Bash(git push:*)");
        let err = load(
            Some(r#"{"permissions": {"ask": "Bash"}}"#),
            SettingSources::ALL,
            cwd.path(),
            Some(&home.path().join(".claude")),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("permissions.ask"), "{err}");
        assert_eq!(
            r.default_mode,
            Some(PermissionMode::AcceptEdits),
            "the project wins over the user"
        );
        assert_eq!(r.allow[0].text(), "Bash(git status:*)");
        assert!(
            matches!(&r.deny[0].source, RuleSource::Settings(p) if p.ends_with(".claude/settings.json"))
        );
        assert_eq!(r.deny[1].source, RuleSource::Flag);
        let only_project = load(
            None,
            "project".parse().unwrap(),
            cwd.path(),
            Some(&home.path().join(".claude")),
        )
        .unwrap();
        assert!(only_project.deny.is_empty());
        std::fs::write(cwd.path().join(".claude/settings.local.json"), "{oops").unwrap();
        let err = load(
            None,
            SettingSources::ALL,
            cwd.path(),
            Some(&home.path().join(".claude")),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("settings.local.json") && err.contains("not valid JSON"),
            "{err}"
        );
        std::fs::write(
            cwd.path().join(".claude/settings.local.json"),
            r#"{"permissions": ["Bash(rm:*)"]}"#,
        )
        .unwrap();
        let err = load(
            None,
            SettingSources::ALL,
            cwd.path(),
            Some(&home.path().join(".claude")),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("settings.local.json") && err.contains("`permissions` must be an object"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod document_tests {
    use super::*;

    #[test]
    fn a_settings_document_must_be_an_object() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
        for (doc, found) in [("null", "null"), ("[]", "a list"), ("7", "a number")] {
            std::fs::write(dir.path().join(".claude/settings.json"), doc).unwrap();
            let e = load(None, SettingSources::ALL, dir.path(), None)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("settings.json") && e.contains(found),
                "{doc}: {e}"
            );
        }
        std::fs::write(dir.path().join(".claude/settings.json"), "{}").unwrap();
        assert!(load(None, SettingSources::ALL, dir.path(), None).is_ok());
    }

    #[test]
    fn a_settings_file_linked_to_dev_zero_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(".claude/settings.json")).unwrap();
        let e = load(None, SettingSources::ALL, dir.path(), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("settings.json") && e.contains("character device"),
            "{e}"
        );
    }
}
