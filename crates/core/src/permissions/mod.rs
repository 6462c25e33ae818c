//! Permission modes and allow/deny rules, and the one function that decides a tool call.
//!
//! The judgement itself lives in `keel-policy` (shell lowering, the read-only table, paths as
//! the kernel resolves them, rules and the decision); this module holds a session's rules
//! ([`PermissionConfig`]), hands them to the policy with the real file system and the
//! process's `PATH`, and judges the web tools' rules ([`web`]), which need the tools' URL and
//! address code.

mod web;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use keel_policy::paths;
pub use keel_policy::rules::{
    exact_path_rule, subject_field, wildcard_escaped, Judgement, PathUse, RESOURCE_TOOLS,
};
pub use keel_policy::{
    split_rule_list, wildcard_with, AllowedBy, Decision, PermissionMode, Rule, RuleError,
    RuleSource,
};
pub use paths::{Resolved, Roots};

use keel_policy::{Policy, RealFs, ToolKind, WebRules};
use serde_json::Value;

/// Mode and rules.
#[derive(Clone, Debug, Default)]
pub struct PermissionConfig {
    /// The mode.
    pub mode: PermissionMode,
    /// Rules that allow.
    pub allow: Vec<Rule>,
    /// Rules that deny (they win over everything).
    pub deny: Vec<Rule>,
    /// Rules that ask even where an allow rule, a mode or the read-only list would allow
    /// (denied headless and in dontAsk mode).
    pub ask: Vec<Rule>,
    /// The working directory, added directories and home: where paths are resolved and
    /// where acceptEdits applies.
    pub roots: Roots,
}

/// The `PATH` keel was started with, read once: where a command given by its path is checked
/// to be the program a rule names.
fn process_path() -> Option<&'static OsStr> {
    static PATH: OnceLock<Option<OsString>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var_os("PATH")).as_deref()
}

impl PermissionConfig {
    /// A configuration for `mode` with no rules, rooted at `cwd` (home from `HOME`).
    pub fn new(mode: PermissionMode, cwd: &Path) -> Self {
        PermissionConfig {
            mode,
            allow: Vec::new(),
            deny: Vec::new(),
            ask: Vec::new(),
            roots: Roots {
                cwd: cwd.to_path_buf(),
                dirs: Vec::new(),
                home: std::env::var_os("HOME").map(Into::into),
                readable: Vec::new(),
            },
        }
    }

    /// The rules as the policy judges them: on the real file system, with keel's `PATH`, the
    /// web tools' rules judged here.
    pub fn policy(&self) -> Policy<'_> {
        Policy {
            mode: self.mode,
            allow: &self.allow,
            deny: &self.deny,
            ask: &self.ask,
            roots: &self.roots,
            fs: &RealFs,
            path_var: process_path(),
            web: self,
            judged: None,
        }
    }

    /// Resolve a path given to a tool as the kernel would, relative to the working directory.
    pub fn resolve(&self, path: &str) -> Resolved {
        self.roots.resolve(&RealFs, path)
    }

    /// Whether `p` is inside the working directory or an added directory.
    pub fn inside(&self, p: &Resolved) -> bool {
        self.roots.contains(&RealFs, p)
    }

    /// Whether a deny rule without a pattern removes `tool` wholly: it is not offered at all.
    pub fn withholds(&self, tool: &str) -> bool {
        self.policy().withholds(tool)
    }

    /// The file a call of a path tool was judged on (see [`Policy::judged_path`]).
    pub fn judged_path(&self, kind: ToolKind, input: &Value) -> Option<PathBuf> {
        self.policy().judged_path(kind, input)
    }

    /// A test for the files Read deny rules protect, for searches that walk directories to
    /// pass over them. None when no Read deny rule names a path.
    pub fn read_filter(&self) -> Option<keel_tools::PathFilter> {
        let pats = self.policy().read_deny_paths();
        if pats.is_empty() {
            return None;
        }
        let roots = self.roots.clone();
        Some(keel_tools::PathFilter::new(move |p: &Path| {
            let r = roots.resolve(&RealFs, &p.to_string_lossy());
            pats.iter().any(|pat| pat.matches(&r))
        }))
    }

    /// The deny rule that matches this call, if any (and the part of it that it names).
    pub fn denied_by(&self, tool: &str, kind: ToolKind, input: &Value) -> Option<(&Rule, String)> {
        self.policy().denied_by(tool, kind, input)
    }

    /// The ask rule that matches this call, if any (and the part of it that it names).
    pub fn asked_by(&self, tool: &str, kind: ToolKind, input: &Value) -> Option<(&Rule, String)> {
        self.policy().asked_by(tool, kind, input)
    }

    /// Judge a call once, with the session's roots: for Bash, what its line runs, reads and
    /// writes (`None` for other tools). Hand it to [`Self::decide_judged`] and use its
    /// [`Judgement::read_only`] for batching, so the line is parsed once.
    pub fn judge_call(&self, kind: ToolKind, input: &Value) -> Option<Judgement> {
        (kind == ToolKind::Bash).then(|| {
            let command = input.get("command").and_then(Value::as_str).unwrap_or("");
            self.policy().judge(command)
        })
    }

    /// Decide one call on a judgement made by [`Self::judge_call`] (`None`: judge here).
    pub fn decide_judged(
        &self,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        read_only: bool,
        judgement: Option<&Judgement>,
    ) -> Decision {
        match judgement {
            Some(j) => self
                .policy()
                .with_judgement(j)
                .decide(tool, kind, input, read_only),
            None => self.decide(tool, kind, input, read_only),
        }
    }

    /// Decide one call (see [`Policy::decide`]).
    pub fn decide(&self, tool: &str, kind: ToolKind, input: &Value, read_only: bool) -> Decision {
        self.policy().decide(tool, kind, input, read_only)
    }

    /// How a Bash command line is parsed, lowered and judged (`keel permissions check`).
    pub fn explain_bash(&self, command: &str) -> (Decision, Judgement) {
        self.policy().explain_bash(command)
    }

    /// The files the commands of a judged line read and write, resolved as the kernel would.
    pub fn path_uses(&self, j: &Judgement) -> Vec<PathUse> {
        self.policy().path_uses(j)
    }

    /// Rules that would allow exactly this command line next time (see
    /// [`Policy::suggest_bash`]).
    pub fn suggest_bash(&self, tool: &str, command: &str) -> Vec<(String, String)> {
        self.policy().suggest_bash(tool, command)
    }

    /// The denial text for a call that would need approval in a session nobody can approve in.
    pub fn headless_denial(
        &self,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        why: Option<&str>,
    ) -> String {
        self.policy().headless_denial(tool, kind, input, why)
    }
}

impl WebRules for PermissionConfig {
    fn rule_hit<'r>(
        &'r self,
        rules: &'r [Rule],
        tool: &str,
        kind: ToolKind,
        input: &Value,
    ) -> Option<(&'r Rule, String)> {
        self.web_rule_hit(rules, tool, kind, input)
    }

    fn decide_fetch(&self, tool: &str, input: &Value) -> Decision {
        self.decide_web_fetch(tool, input)
    }

    fn decide_search(&self, tool: &str, kind: ToolKind, input: &Value) -> Decision {
        self.decide_web_search(tool, kind, input)
    }

    fn suggestion(&self, input: &Value) -> Option<String> {
        Self::web_suggestion(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_tools::ToolKind;
    use serde_json::json;

    /// MCP rules as users keep them: a whole server, a wildcard, one tool. Deny reaches every
    /// spelling that could be the server's (long names cut to 64 bytes too); allow reaches only
    /// what it surely names.
    #[test]
    fn mcp_rules_name_servers_and_tools_and_deny_errs_towards_denying() {
        let call = |c: &PermissionConfig, tool: &str| {
            c.decide(tool, ToolKind::External, &json!({}), false)
        };
        let allowed =
            |c: &PermissionConfig, tool: &str| matches!(call(c, tool), Decision::Allow(_));
        let denied =
            |c: &PermissionConfig, tool: &str| matches!(call(c, tool), Decision::Deny { .. });

        let server = cfg(PermissionMode::Default, &["mcp__github"], &[]);
        assert!(allowed(&server, "mcp__github__create_issue"));
        assert!(
            allowed(&server, "mcp__github__a__b"),
            "a tool whose own name has __"
        );
        assert!(!allowed(&server, "mcp__github_enterprise__create_issue"));
        assert!(!allowed(&server, "mcp__githubx__t"));
        let star = cfg(PermissionMode::Default, &["mcp__github__*"], &[]);
        assert!(allowed(&star, "mcp__github__create_issue"));
        assert!(!allowed(&star, "mcp__gitlab__create_issue"));
        let one = cfg(PermissionMode::Default, &["mcp__github__list"], &[]);
        assert!(allowed(&one, "mcp__github__list"));
        assert!(!allowed(&one, "mcp__github__list_2"));
        assert!(!allowed(&one, "mcp__github__delete"));
        let all = cfg(PermissionMode::Default, &["mcp__*"], &[]);
        assert!(allowed(&all, "mcp__anything__t"));
        assert!(!allowed(&all, "Bash"));

        // Deny wins over allow, in every form, and in bypass mode too.
        for rule in ["mcp__github", "mcp__github__*", "mcp__*"] {
            let c = cfg(
                PermissionMode::BypassPermissions,
                &["mcp__github__list"],
                &[rule],
            );
            assert!(denied(&c, "mcp__github__list"), "{rule}");
            assert!(denied(&c, "mcp__github__a__b"), "{rule}");
        }
        let c = cfg(PermissionMode::BypassPermissions, &[], &["mcp__github"]);
        assert!(!denied(&c, "mcp__gitlab__t"));
        // A long server name is cut to fit 64 bytes: a rule naming the whole server still denies.
        let long = "s".repeat(70);
        let cut = keel_mcp::tool_name(&long, "delete_everything");
        assert_eq!(cut.len(), 64);
        let c = cfg(
            PermissionMode::BypassPermissions,
            &[],
            &[&format!("mcp__{long}")],
        );
        assert!(denied(&c, &cut), "{cut}");
        let c = cfg(
            PermissionMode::BypassPermissions,
            &[],
            &[&format!("mcp__{long}__*")],
        );
        assert!(denied(&c, &cut), "{cut}");
        // ... while an allow rule that names it does not guess.
        let c = cfg(PermissionMode::Default, &[&format!("mcp__{long}")], &[]);
        assert!(!allowed(&c, &cut));
        // `*` is part of a name only in MCP rules.
        assert!(Rule::parse("Bash*", RuleSource::Flag).is_err());
        assert!(Rule::parse("mcp__x__*", RuleSource::Flag).is_ok());
    }

    fn cfg(mode: PermissionMode, allow: &[&str], deny: &[&str]) -> PermissionConfig {
        PermissionConfig {
            mode,
            allow: allow
                .iter()
                .map(|r| Rule::parse(r, RuleSource::Flag).unwrap())
                .collect(),
            deny: deny
                .iter()
                .map(|r| Rule::parse(r, RuleSource::Flag).unwrap())
                .collect(),
            ask: Vec::new(),
            roots: Roots {
                cwd: std::env::current_dir().unwrap(),
                dirs: Vec::new(),
                home: Some("/nonexistent-home".into()),
                readable: Vec::new(),
            },
        }
    }
}
