//! Permission modes, rules and where they came from.

use std::fmt;

use super::web;

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

/// What is wrong with a permission rule that cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleErrorKind {
    /// `Tool(pattern` without the closing `)`.
    UnclosedParen,
    /// The text before `(` is not a tool name (empty, or characters a name cannot have).
    NoToolName,
    /// A `WebFetch(...)` pattern that does not name a host as `domain:HOST[:PORT]`.
    WebFetchPattern,
}

/// A permission rule that cannot be read: what is wrong, the rule as written and where it
/// came from (the sentence shown to users names the rule; callers add the place).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct RuleError {
    /// What is wrong with it.
    pub kind: RuleErrorKind,
    /// The rule as written (trimmed).
    pub text: String,
    /// Where the rule came from.
    pub origin: RuleSource,
}

impl RuleError {
    fn new(kind: RuleErrorKind, text: &str, origin: RuleSource) -> Self {
        RuleError {
            kind,
            text: text.to_owned(),
            origin,
        }
    }

    fn describe(&self) -> String {
        let text = &self.text;
        match self.kind {
            RuleErrorKind::UnclosedParen => format!(
                "permission rule {text:?} has an opening parenthesis but does not end with ')'"
            ),
            RuleErrorKind::NoToolName => {
                format!("permission rule {text:?} does not start with a tool name")
            }
            RuleErrorKind::WebFetchPattern => format!(
                "permission rule {text:?}: a WebFetch rule names a host, as WebFetch(domain:example.com), WebFetch(domain:*.example.com) or WebFetch(domain:127.0.0.1:8080)"
            ),
        }
    }
}

impl Rule {
    /// Parse `Tool` or `Tool(pattern)`.
    pub fn parse(text: &str, source: RuleSource) -> Result<Self, RuleError> {
        let text = text.trim();
        let (tool, pattern) = match text.find('(') {
            None => (text, None),
            Some(i) => {
                if !text.ends_with(')') {
                    return Err(RuleError::new(RuleErrorKind::UnclosedParen, text, source));
                }
                (
                    &text[..i],
                    Some(text[i + 1..text.len() - 1].trim().to_owned()),
                )
            }
        };
        // `*` is part of a name only in MCP rules (`mcp__server__*`, `mcp__*`).
        let star_ok = tool.starts_with("mcp__");
        if tool.is_empty()
            || !tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || (star_ok && c == '*'))
        {
            return Err(RuleError::new(RuleErrorKind::NoToolName, text, source));
        }
        if let (true, Some(p)) = (tool == "WebFetch", pattern.as_deref()) {
            if !p.is_empty() && p != "*" && !web::pattern_ok(p) {
                return Err(RuleError::new(RuleErrorKind::WebFetchPattern, text, source));
            }
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
