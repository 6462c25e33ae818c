//! Permission modes and allow/deny rules, and the one function that decides a tool call.

use std::fmt;

use keel_tools::ToolKind;
use serde_json::Value;

/// The permission mode (`--permission-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PermissionMode {
    /// Ask for anything that is not read-only or allowed by a rule (headless: deny).
    #[default]
    Default,
    /// File edits (Write, Edit) are allowed without asking.
    AcceptEdits,
    /// Everything is allowed except what a deny rule names.
    BypassPermissions,
    /// Nothing that changes anything may run: the agent plans.
    Plan,
    /// Never ask: anything not allowed by a rule or read-only is denied.
    DontAsk,
}

impl PermissionMode {
    /// All modes, for help and error texts.
    pub const ALL: [PermissionMode; 5] = [
        PermissionMode::AcceptEdits,
        PermissionMode::BypassPermissions,
        PermissionMode::Default,
        PermissionMode::DontAsk,
        PermissionMode::Plan,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::Plan => "plan",
            PermissionMode::DontAsk => "dontAsk",
        }
    }

    /// Parse a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// Where a rule came from, so a denial can say so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleSource {
    /// `--allowedTools` / `--disallowedTools`.
    Flag,
    /// A settings file (project, local or user), by path.
    Settings(String),
    /// Inherited from the parent agent.
    Parent,
    /// Granted during this session (by a host's approval).
    Session,
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleSource::Flag => f.write_str("the command line"),
            RuleSource::Settings(p) => write!(f, "settings file {p}"),
            RuleSource::Parent => f.write_str("the parent agent's rules"),
            RuleSource::Session => f.write_str("a rule granted earlier in this session"),
        }
    }
}

/// One rule: a tool name, optionally with a pattern (`Bash(git status:*)`, `Edit(src/**)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The tool name (`Agent` is accepted as a name for `Task`).
    pub tool: String,
    /// The pattern inside the parentheses, if any.
    pub pattern: Option<String>,
    /// Where it came from.
    pub source: RuleSource,
}

/// A permission rule that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

impl Rule {
    /// Parse `Tool` or `Tool(pattern)`.
    pub fn parse(text: &str, source: RuleSource) -> Result<Self, RuleError> {
        Self::parse_text(text, source).map_err(RuleError)
    }

    fn parse_text(text: &str, source: RuleSource) -> Result<Self, String> {
        let text = text.trim();
        let (tool, pattern) = match text.find('(') {
            None => (text, None),
            Some(i) => {
                if !text.ends_with(')') {
                    return Err(format!("permission rule {text:?} has an opening parenthesis but does not end with ')'"));
                }
                (
                    &text[..i],
                    Some(text[i + 1..text.len() - 1].trim().to_owned()),
                )
            }
        };
        if tool.is_empty()
            || !tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "permission rule {text:?} does not start with a tool name"
            ));
        }
        let tool = if tool == "Agent" {
            "Task".to_owned()
        } else {
            tool.to_owned()
        };
        Ok(Rule {
            tool,
            pattern: pattern.filter(|p| !p.is_empty() && p != "*"),
            source,
        })
    }

    /// The rule as written.
    pub fn text(&self) -> String {
        match &self.pattern {
            Some(p) => format!("{}({p})", self.tool),
            None => self.tool.clone(),
        }
    }
}

/// Split a `--allowedTools` value: commas or whitespace separate rules, except inside parentheses.
pub fn split_rule_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_owned());
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// Mode and rules.
#[derive(Clone, Debug, Default)]
pub struct PermissionConfig {
    /// The mode.
    pub mode: PermissionMode,
    /// Rules that allow.
    pub allow: Vec<Rule>,
    /// Rules that deny (they win over everything).
    pub deny: Vec<Rule>,
}

/// The decision for one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Run it.
    Allow(AllowedBy),
    /// Do not run it; `message` tells the model (and the user) why and how to allow it.
    Deny {
        /// Why, and how to allow it.
        message: String,
    },
    /// A person (or the host) would have to approve it.
    Ask,
}

/// Why a call was allowed (reported in `tool_result_meta`).
#[derive(Clone, Debug, PartialEq)]
pub enum AllowedBy {
    /// The call only reads.
    ReadOnly,
    /// A rule (its text).
    Rule(String),
    /// The permission mode.
    Mode(PermissionMode),
    /// The session's approver (an SDK host's `can_use_tool`).
    Approver,
    /// A PreToolUse hook.
    Hook,
}

/// The input field a rule pattern is matched against, for calls of `kind`.
pub(crate) fn subject_field(kind: ToolKind) -> Option<&'static str> {
    match kind {
        ToolKind::Bash => Some("command"),
        ToolKind::Read | ToolKind::Write | ToolKind::Edit => Some("file_path"),
        ToolKind::Glob | ToolKind::Grep => Some("path"),
        ToolKind::Task => Some("subagent_type"),
        ToolKind::TaskOutput | ToolKind::TaskStop | ToolKind::KillShell | ToolKind::External => {
            None
        }
    }
}

/// What a rule pattern is matched against for a call.
fn subject(kind: ToolKind, input: &Value) -> Option<String> {
    input
        .get(subject_field(kind)?)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// `*` matches any run of characters; everything else literally.
fn wildcard(pattern: &str, text: &str) -> bool {
    wildcard_with(pattern, text, "*")
}

/// Whether `text` matches `pattern`, where `star` stands for any run of characters and
/// everything else is literal (`*` for rules, `.*` for hook matchers).
pub fn wildcard_with(pattern: &str, text: &str, star: &str) -> bool {
    let parts: Vec<&str> = pattern.split(star).collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(j) => rest = &rest[j + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// Whether a Bash pattern matches one simple command (argv joined by spaces).
fn bash_pattern_matches(pattern: &str, command: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix(":*") {
        let prefix = prefix.trim();
        return command == prefix || command.starts_with(&format!("{prefix} "));
    }
    wildcard(pattern, command)
}

impl PermissionConfig {
    fn rule_matches(
        rule: &Rule,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        all_parts: bool,
    ) -> bool {
        if !kind.answers_to(&rule.tool, tool) {
            return false;
        }
        let Some(pattern) = &rule.pattern else {
            return true;
        };
        let Some(subj) = subject(kind, input) else {
            return false;
        };
        if kind != ToolKind::Bash {
            return wildcard(pattern, &subj);
        }
        // A compound command matches an allow rule only if every part does; a deny rule
        // matches if any part does (or the whole text, when it cannot be split safely).
        match keel_tools::split_commands(&subj) {
            Some(parts) if !parts.is_empty() => {
                let joined: Vec<String> = parts.iter().map(|argv| argv.join(" ")).collect();
                if all_parts {
                    joined.iter().all(|c| bash_pattern_matches(pattern, c))
                } else {
                    joined.iter().any(|c| bash_pattern_matches(pattern, c))
                        || bash_pattern_matches(pattern, subj.trim())
                }
            }
            _ => !all_parts && bash_pattern_matches(pattern, subj.trim()),
        }
    }

    /// The deny rule that matches this call, if any.
    pub fn denied_by(&self, tool: &str, kind: ToolKind, input: &Value) -> Option<&Rule> {
        self.deny
            .iter()
            .find(|r| Self::rule_matches(r, tool, kind, input, false))
    }

    /// Decide one call. `read_only` is the tool's own judgement of this input.
    pub fn decide(&self, tool: &str, kind: ToolKind, input: &Value, read_only: bool) -> Decision {
        if let Some(rule) = self.denied_by(tool, kind, input) {
            return Decision::Deny {
                message: format!(
                    "{tool} was not run: it is denied by the rule `{}` from {}.",
                    rule.text(),
                    rule.source
                ),
            };
        }
        if self.mode == PermissionMode::Plan && !read_only {
            return Decision::Deny {
                message: format!(
                    "{tool} was not run: the session is in plan mode, where only read-only tools may run. Present the plan instead; the user can leave plan mode to carry it out."
                ),
            };
        }
        if self.mode == PermissionMode::BypassPermissions {
            return Decision::Allow(AllowedBy::Mode(self.mode));
        }
        if let Some(rule) = self
            .allow
            .iter()
            .find(|r| Self::rule_matches(r, tool, kind, input, true))
        {
            return Decision::Allow(AllowedBy::Rule(rule.text()));
        }
        if read_only {
            return Decision::Allow(AllowedBy::ReadOnly);
        }
        if self.mode == PermissionMode::AcceptEdits && kind.edits_files() {
            return Decision::Allow(AllowedBy::Mode(self.mode));
        }
        Decision::Ask
    }

    /// The denial text for a call that would need approval in a session nobody can approve in.
    pub fn headless_denial(&self, tool: &str, kind: ToolKind, input: &Value) -> String {
        let subj = subject(kind, input);
        let suggestion = match (kind, &subj) {
            (ToolKind::Bash, Some(cmd)) => {
                let first = keel_tools::split_commands(cmd)
                    .and_then(|p| p.into_iter().next())
                    .and_then(|argv| argv.into_iter().next())
                    .unwrap_or_else(|| "command".to_owned());
                format!("--allowedTools \"Bash({first}:*)\" (or \"Bash\" to allow every command)")
            }
            (k, _) if k.edits_files() => {
                format!("--allowedTools {tool} or --permission-mode acceptEdits")
            }
            _ => format!("--allowedTools {tool}"),
        };
        let what = match (kind, &subj) {
            (ToolKind::Bash, Some(cmd)) => format!("Bash command `{}`", truncate(cmd, 120)),
            (_, Some(s)) => format!("{tool} on {}", truncate(s, 120)),
            _ => tool.to_owned(),
        };
        format!(
            "Permission denied: the {what} needs approval, and nobody can approve it in this non-interactive run (permission mode {}). It was not run. To allow it, rerun with {suggestion}.",
            self.mode.as_str()
        )
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        }
    }

    fn bash(c: &str) -> Value {
        json!({ "command": c })
    }

    #[test]
    fn rule_lists_split_outside_parentheses() {
        assert_eq!(
            split_rule_list("Bash(git status:*), Edit Read"),
            vec!["Bash(git status:*)", "Edit", "Read"]
        );
        assert!(Rule::parse("Bash(git", RuleSource::Flag).is_err());
        assert_eq!(
            Rule::parse("Agent(Explore)", RuleSource::Flag)
                .unwrap()
                .tool,
            "Task"
        );
    }

    #[test]
    fn bash_prefix_rules_cover_every_part() {
        let c = cfg(PermissionMode::Default, &["Bash(git status:*)"], &[]);
        assert!(matches!(
            c.decide("Bash", ToolKind::Bash, &bash("git status --short"), false),
            Decision::Allow(_)
        ));
        assert_eq!(
            c.decide("Bash", ToolKind::Bash, &bash("git statusx"), false),
            Decision::Ask
        );
        assert_eq!(
            c.decide(
                "Bash",
                ToolKind::Bash,
                &bash("git status && rm -rf x"),
                false
            ),
            Decision::Ask
        );
    }

    #[test]
    fn deny_wins_everywhere() {
        let c = cfg(
            PermissionMode::BypassPermissions,
            &["Bash"],
            &["Bash(rm:*)"],
        );
        assert!(matches!(
            c.decide("Bash", ToolKind::Bash, &bash("ls && rm -rf /tmp/x"), false),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            c.decide("Bash", ToolKind::Bash, &bash("touch x"), false),
            Decision::Allow(_)
        ));
    }

    #[test]
    fn modes() {
        let plan = cfg(PermissionMode::Plan, &["Write"], &[]);
        assert!(matches!(
            plan.decide("Write", ToolKind::Write, &json!({"file_path": "a"}), false),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            plan.decide("Read", ToolKind::Read, &json!({"file_path": "a"}), true),
            Decision::Allow(AllowedBy::ReadOnly)
        ));
        let edits = cfg(PermissionMode::AcceptEdits, &[], &[]);
        assert!(matches!(
            edits.decide("Edit", ToolKind::Edit, &json!({}), false),
            Decision::Allow(_)
        ));
        assert_eq!(
            edits.decide("Bash", ToolKind::Bash, &bash("touch x"), false),
            Decision::Ask
        );
        let msg = edits.headless_denial("Bash", ToolKind::Bash, &bash("touch x"));
        assert!(msg.contains("Bash(touch:*)"), "{msg}");
    }
}
