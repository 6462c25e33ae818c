//! Permission modes and allow/deny rules, and the one function that decides a tool call.
//!
//! Decisions are made on what a call really touches: paths are resolved before path rules
//! match ([`paths`]), and Bash command lines are lowered to the commands they would run
//! ([`bash`]). Whatever cannot be understood is never allowed without asking.

mod bash;
mod judgement;
#[cfg(test)]
mod kernel_tests;
mod needs;
mod rule;
mod web;

use std::ffi::OsStr;
use std::fmt;
use std::path::Path;

pub use bash::PathUse;
pub use judgement::Judgement;
pub use needs::{exact_path_rule, NeedsApproval};
pub use rule::{split_rule_list, PermissionMode, Rule, RuleError, RuleErrorKind, RuleSource};
pub use web::{NoWeb, WebRules};

#[cfg(test)]
mod fake_fs_tests;
#[cfg(test)]
mod testing;

use crate::fs::FsView;
use crate::paths::{PathPattern, Resolved, Roots, Use};
use crate::ToolKind;
use serde_json::Value;

/// Mode and rules, with what they are judged against: the session's roots, the file system
/// as the policy sees it, the `PATH` commands are looked up in, and the judge of web rules.
/// A borrowed view, cheap to make for each call.
#[derive(Clone, Copy)]
pub struct Policy<'p> {
    /// The mode.
    pub mode: PermissionMode,
    /// Rules that allow.
    pub allow: &'p [Rule],
    /// Rules that deny (they win over everything).
    pub deny: &'p [Rule],
    /// Rules that ask even where an allow rule, a mode or the read-only list would allow
    /// (denied headless and in dontAsk mode).
    pub ask: &'p [Rule],
    /// The working directory, added directories and home: where paths are resolved and
    /// where acceptEdits applies.
    pub roots: &'p Roots,
    /// The file system, for resolving paths as the kernel will.
    pub fs: &'p dyn FsView,
    /// The `PATH` a command word is looked up in (`None`: nothing is found on it).
    pub path_var: Option<&'p OsStr>,
    /// WebFetch and WebSearch rules, judged by their owner.
    pub web: &'p dyn WebRules,
    /// The judgement of the Bash call being decided, computed once (see
    /// [`Policy::with_judgement`]); `None`: each step judges the line itself.
    pub judged: Option<&'p Judgement>,
}

impl fmt::Debug for Policy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("mode", &self.mode)
            .field("allow", &self.allow)
            .field("deny", &self.deny)
            .field("ask", &self.ask)
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
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
    /// As `Ask`, with the reason the rules could not allow it (shown with the question, and
    /// in the headless denial).
    AskWhy(String),
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

/// For an MCP tool's name of the longest length (64 bytes), which may have been cut to fit
/// (and then ends in a hash, and perhaps a collision number): the start that surely comes from
/// the full name. `None` for shorter names, which are whole.
fn mcp_cut(tool: &str) -> Option<&str> {
    (tool.len() >= 64).then(|| tool.get(..50)).flatten()
}

/// A deny or ask rule against an MCP tool's name: `mcp__server` (every tool of the server),
/// `mcp__server__*` and other wildcards, erring towards a match: a rule reaches a tool whose
/// name starts with it and goes on with `_`, and any tool whose name was cut short where the
/// rule could have gone on.
fn mcp_rule_restricts(rule: &str, tool: &str) -> bool {
    if !rule.starts_with("mcp__") || !tool.starts_with("mcp__") {
        return false;
    }
    let cut = mcp_cut(tool);
    if rule.contains('*') {
        let head = rule.split('*').next().unwrap_or("");
        return wildcard_with(rule, tool, "*")
            || cut.is_some_and(|c| head.starts_with(c) || c.starts_with(head));
    }
    tool.strip_prefix(rule)
        .is_some_and(|rest| rest.starts_with('_'))
        || cut.is_some_and(|c| rule.starts_with(c))
}

/// An allow rule against an MCP tool's name: `mcp__server` reaches the tools of that server
/// only (a server's part of a name holds no `__`, so the first `__` ends it), a wildcard the
/// names it matches.
fn mcp_rule_allows(rule: &str, tool: &str) -> bool {
    if !rule.starts_with("mcp__") || !tool.starts_with("mcp__") {
        return false;
    }
    if rule.contains('*') {
        return wildcard_with(rule, tool, "*");
    }
    let server = &rule["mcp__".len()..];
    !server.is_empty()
        && !server.contains("__")
        && tool
            .strip_prefix(rule)
            .is_some_and(|rest| rest.starts_with("__") && rest.len() > 2)
}

/// The input field a rule pattern is matched against, for calls of `kind`.
pub fn subject_field(kind: ToolKind) -> Option<&'static str> {
    match kind {
        ToolKind::Bash => Some("command"),
        ToolKind::Read | ToolKind::Write | ToolKind::Edit | ToolKind::NotebookEdit => {
            kind.path_field()
        }
        ToolKind::Glob | ToolKind::Grep => Some("path"),
        ToolKind::Task => Some("subagent_type"),
        // `Skill(name)` names one skill.
        ToolKind::Skill => Some("skill"),
        ToolKind::WebFetch => Some("url"),
        ToolKind::WebSearch => Some("query"),
        ToolKind::TaskOutput
        | ToolKind::TaskStop
        | ToolKind::KillShell
        | ToolKind::TodoWrite
        | ToolKind::External => None,
    }
}

/// What a rule pattern is matched against for a call.
fn subject(kind: ToolKind, input: &Value) -> Option<String> {
    input
        .get(subject_field(kind)?)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The tools that read an MCP server's resources, naming the server in their input.
pub const RESOURCE_TOOLS: [&str; 2] = ["ListMcpResourcesTool", "ReadMcpResourceTool"];

fn is_resource_tool(tool: &str) -> bool {
    RESOURCE_TOOLS.contains(&tool)
}

/// The name rules see for a resource tool's call on `server`: as if it were one of the
/// server's tools, so that `mcp__server` (deny or allow) and `mcp__*` reach it.
fn resource_subject(input: &Value) -> Option<String> {
    input
        .get("server")
        .and_then(Value::as_str)
        .map(|s| format!("mcp__{s}__resources"))
}

/// The rule text that would allow reading `p`: its directory (or itself, for a directory)
/// by an absolute Read rule, or added to the session.
fn read_suggestion(fs: &dyn FsView, p: &Resolved) -> String {
    let dir = if fs.is_dir(&p.real) {
        p.real.clone()
    } else {
        p.real.parent().unwrap_or(Path::new("/")).to_path_buf()
    };
    let body = exact_path_rule(&dir);
    let body = if body == "//" { "/".to_owned() } else { body };
    format!(
        "--allowedTools \"Read({body}/**)\", or --add-dir {} (or permissions.additionalDirectories)",
        dir.display()
    )
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

/// `*` matches any run of characters, `\*` a literal star, everything else itself.
pub fn wildcard_escaped(pattern: &str, text: &str) -> bool {
    // Split on unescaped stars; unescape the pieces.
    let mut parts = vec![String::new()];
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'*') => {
                chars.next();
                if let Some(part) = parts.last_mut() {
                    part.push('*');
                }
            }
            '*' => parts.push(String::new()),
            _ => {
                if let Some(part) = parts.last_mut() {
                    part.push(c);
                }
            }
        }
    }
    if parts.len() == 1 {
        return parts[0] == text;
    }
    let mut rest = text;
    let last = parts.len() - 1;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part.as_str()) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == last {
            return rest.ends_with(part.as_str());
        } else {
            match rest.find(part.as_str()) {
                Some(j) => rest = &rest[j + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// The tools whose path rules cover calls of `kind`: `Read(…)` covers every tool that reads
/// files, `Edit(…)`/`Write(…)` every tool that writes them.
fn path_family(kind: ToolKind) -> &'static [&'static str] {
    match kind {
        ToolKind::Read | ToolKind::Grep | ToolKind::Glob => &["Read"],
        ToolKind::Write | ToolKind::Edit | ToolKind::NotebookEdit => &["Edit", "Write"],
        _ => &[],
    }
}

impl<'p> Policy<'p> {
    /// Whether a deny rule without a pattern removes `tool` wholly (`Bash`, `mcp__server`,
    /// `mcp__server__*`): such a tool is not offered to the model at all. A rule with a
    /// pattern (`Bash(rm:*)`) denies some calls only, so the tool stays offered.
    pub fn withholds(&self, tool: &str) -> bool {
        self.deny
            .iter()
            .any(|r| r.pattern.is_none() && (r.tool == tool || mcp_rule_restricts(&r.tool, tool)))
    }

    /// The path a call of a path tool touches, as written: its `file_path`/`path`, or for
    /// Glob the directory it really searches (an absolute pattern names its own).
    fn path_subject(&self, kind: ToolKind, input: &Value) -> Option<String> {
        match kind {
            ToolKind::Glob => crate::globdir::search_dir(input),
            _ => subject(kind, input),
        }
    }

    /// The file a call of a path tool was judged on, resolved as the kernel resolves it: the
    /// dispatcher hands it to the tool, which opens it rather than resolving the path again.
    /// `None` for other tools, for a call with no path (the working directory), and for a
    /// path that cannot be resolved (the tool's own open then fails).
    pub fn judged_path(&self, kind: ToolKind, input: &Value) -> Option<std::path::PathBuf> {
        if path_family(kind).is_empty() {
            return None;
        }
        let p = self
            .roots
            .resolve(self.fs, &self.path_subject(kind, input)?);
        p.broken.is_none().then_some(p.real)
    }

    fn names(rule: &Rule, tool: &str, kind: ToolKind, family: bool) -> bool {
        kind.answers_to(&rule.tool, tool)
            || (family && path_family(kind).contains(&rule.tool.as_str()))
    }

    /// Whether a deny or ask rule (`names` aside) reaches the MCP tool `tool`: erring towards
    /// yes, so that no spelling of a name slips past a rule meant to stop it.
    fn mcp_restricts(rule: &Rule, tool: &str, kind: ToolKind) -> bool {
        kind == ToolKind::External && rule.pattern.is_none() && mcp_rule_restricts(&rule.tool, tool)
    }

    /// Whether an allow rule (`names` aside) reaches the MCP tool `tool`: only when it surely
    /// names its server (or the tool matches its wildcard), never by a guess.
    fn mcp_allows(rule: &Rule, tool: &str, kind: ToolKind) -> bool {
        kind == ToolKind::External && rule.pattern.is_none() && mcp_rule_allows(&rule.tool, tool)
    }

    /// The compiled patterns of the Read deny rules.
    fn read_deny_patterns(&self) -> Vec<(&'p Rule, Option<PathPattern>)> {
        self.deny
            .iter()
            .filter(|r| r.tool == "Read")
            .map(|r| {
                // None: a rule with no pattern, or one that cannot be compiled, covers every
                // path (as for the file tools' check in `path_hit`).
                let pat = r
                    .pattern
                    .as_deref()
                    .and_then(|p| PathPattern::new(self.fs, p, self.roots, Use::Deny).ok());
                (r, pat)
            })
            .collect()
    }

    /// The patterns of the Read deny rules, for searches that walk directories to pass over
    /// the files they protect. Empty when no Read deny rule names a path.
    pub fn read_deny_paths(&self) -> Vec<PathPattern> {
        // A rule that covers every path needs no hiding: the search itself is denied.
        self.read_deny_patterns()
            .into_iter()
            .filter_map(|(_, p)| p)
            .collect()
    }

    /// The deny rule of one of `tools` that covers path `p` (a rule with no pattern covers
    /// every path; a pattern that cannot be compiled covers every path too).
    fn path_denied(&self, tools: &[&str], p: &Resolved) -> Option<&'p Rule> {
        Self::path_hit(self.fs, self.deny, self.roots, tools, p)
    }

    /// The rule among `rules` of one of `tools` that covers path `p`, matched as deny rules
    /// are (the lexical and the real spelling; a bad pattern covers every path).
    fn path_hit<'a>(
        fs: &dyn FsView,
        rules: &'a [Rule],
        roots: &Roots,
        tools: &[&str],
        p: &Resolved,
    ) -> Option<&'a Rule> {
        rules.iter().find(|r| {
            tools.contains(&r.tool.as_str())
                && match r.pattern.as_deref() {
                    None => true,
                    Some(pat) => PathPattern::new(fs, pat, roots, Use::Deny)
                        .map(|m| m.matches(p))
                        .unwrap_or(true),
                }
        })
    }

    /// The allow rule of one of `tools` that covers path `p` (the real file it touches).
    fn path_allowed(&self, tools: &[&str], p: &Resolved) -> Option<&'p Rule> {
        self.allow.iter().find(|r| {
            tools.contains(&r.tool.as_str())
                && match r.pattern.as_deref() {
                    None => true,
                    Some(pat) => PathPattern::new(self.fs, pat, self.roots, Use::Allow)
                        .map(|m| m.matches_real(p))
                        .unwrap_or(false),
                }
        })
    }

    /// The deny rule that matches this call, if any (and the part of it that it names).
    pub fn denied_by(
        &self,
        tool: &str,
        kind: ToolKind,
        input: &Value,
    ) -> Option<(&'p Rule, String)> {
        if kind == ToolKind::Bash {
            // Deny rules also cover what a command writes through a redirection.
            let command = subject(kind, input).unwrap_or_default();
            return match self.judge_bash(tool, &command).0 {
                bash::BashVerdict::Denied(rule, part) => {
                    self.deny.iter().find(|x| **x == rule).map(|r| (r, part))
                }
                _ => None,
            };
        }
        self.rule_hit(self.deny, tool, kind, input)
    }

    /// The ask rule that matches this call, if any (and the part of it that it names).
    pub fn asked_by(
        &self,
        tool: &str,
        kind: ToolKind,
        input: &Value,
    ) -> Option<(&'p Rule, String)> {
        self.rule_hit(self.ask, tool, kind, input)
    }

    /// The rule among `rules` that matches this call as a deny rule would: for Bash, one
    /// that matches any command it runs or any wrapper; for paths, the resolved path.
    fn rule_hit(
        &self,
        rules: &'p [Rule],
        tool: &str,
        kind: ToolKind,
        input: &Value,
    ) -> Option<(&'p Rule, String)> {
        let subj = if path_family(kind).is_empty() {
            subject(kind, input)
        } else {
            self.path_subject(kind, input)
        };
        match kind {
            ToolKind::Bash => self.bash_rule_hit(rules, tool, subj.as_deref().unwrap_or("")),
            ToolKind::WebFetch => self.web.rule_hit(rules, tool, kind, input),
            _ if is_resource_tool(tool) => self.resource_rule_hit(rules, tool, input),
            _ if !path_family(kind).is_empty() => {
                let p = self.roots.resolve(self.fs, subj.as_deref().unwrap_or("."));
                let shown = subj.unwrap_or_else(|| ".".to_owned());
                if let Some(r) = rules
                    .iter()
                    .find(|r| r.pattern.is_none() && Self::names(r, tool, kind, false))
                {
                    return Some((r, shown));
                }
                let mut family: Vec<&str> = path_family(kind).to_vec();
                family.push(tool);
                Self::path_hit(self.fs, rules, self.roots, &family, &p).map(|r| (r, shown))
            }
            _ => rules
                .iter()
                .find(|r| {
                    Self::mcp_restricts(r, tool, kind)
                        || Self::names(r, tool, kind, false)
                            && match (&r.pattern, &subj) {
                                (None, _) => true,
                                (Some(p), Some(s)) => wildcard_escaped(p, s),
                                (Some(_), None) => false,
                            }
                })
                .map(|r| (r, subj.clone().unwrap_or_default())),
        }
    }

    /// Decide one call. `read_only` is the tool's own judgement of this input.
    ///
    /// Deny rules win; then an ask rule turns any allow into a question; then in dontAsk
    /// mode every question is a denial.
    pub fn decide(&self, tool: &str, kind: ToolKind, input: &Value, read_only: bool) -> Decision {
        let mut d = self.decide_rules(tool, kind, input, read_only);
        if matches!(d, Decision::Allow(_)) {
            if let Some((rule, part)) = self.asked_by(tool, kind, input) {
                let what = if kind == ToolKind::Bash {
                    format!(" (it runs `{}`)", truncate(&part, 120))
                } else {
                    String::new()
                };
                d = Decision::AskWhy(format!(
                    "the rule `{}` from {} asks about it{what}",
                    rule.text(),
                    rule.source
                ));
            }
        }
        if self.mode == PermissionMode::DontAsk {
            let why = match &d {
                Decision::Ask => "no rule allows it".to_owned(),
                Decision::AskWhy(why) => why.clone(),
                _ => return d,
            };
            return Decision::Deny {
                message: format!(
                    "{tool} was not run: the session is in dontAsk mode, where what would be asked about is denied instead, and {why}. An allow rule (--allowedTools or permissions.allow) lets it run."
                ),
            };
        }
        d
    }

    fn decide_rules(&self, tool: &str, kind: ToolKind, input: &Value, read_only: bool) -> Decision {
        // A Bash line's verdict covers its deny rules too: judged once, not once for the
        // deny rules and again for the rest.
        let bash = (kind == ToolKind::Bash).then(|| {
            self.judge_bash(tool, &subject(kind, input).unwrap_or_default())
                .0
        });
        let denied = match &bash {
            Some(bash::BashVerdict::Denied(rule, part)) => Some((rule, part.clone())),
            Some(_) => None,
            None => self.denied_by(tool, kind, input),
        };
        if let Some((rule, part)) = denied {
            let what = if kind == ToolKind::Bash {
                format!(" (it runs `{}`)", truncate(&part, 120))
            } else {
                String::new()
            };
            return Decision::Deny {
                message: format!(
                    "{tool} was not run: it is denied by the rule `{}` from {}{what}.",
                    rule.text(),
                    rule.source
                ),
            };
        }
        let subj = if path_family(kind).is_empty() {
            subject(kind, input)
        } else {
            self.path_subject(kind, input)
        };
        match kind {
            ToolKind::Bash => {
                let Some(v) = bash else {
                    return unreachable_deny(tool);
                };
                match v {
                    bash::BashVerdict::Denied(..) => unreachable_deny(tool),
                    bash::BashVerdict::Allowed(Some(rule)) => {
                        Decision::Allow(AllowedBy::Rule(rule))
                    }
                    bash::BashVerdict::Allowed(None) => {
                        Decision::Allow(if self.mode == PermissionMode::BypassPermissions {
                            AllowedBy::Mode(self.mode)
                        } else {
                            AllowedBy::ReadOnly
                        })
                    }
                    bash::BashVerdict::Ask(why) => {
                        if self.mode == PermissionMode::Plan {
                            Decision::Deny {
                                message: format!("{tool} was not run: the session is in plan mode, where only commands that read may run, and {why}. Present the plan instead; the user can leave plan mode to carry it out."),
                            }
                        } else {
                            Decision::AskWhy(why)
                        }
                    }
                }
            }
            _ if !path_family(kind).is_empty() => {
                self.decide_path(tool, kind, subj.as_deref(), read_only)
            }
            ToolKind::WebFetch => self.web.decide_fetch(tool, input),
            ToolKind::WebSearch => self.web.decide_search(tool, kind, input),
            _ if is_resource_tool(tool) => self.decide_resource(tool, kind, input),
            _ => self.decide_other(tool, kind, subj.as_deref(), read_only),
        }
    }

    /// A deny or ask rule that reaches a resource tool's call: one naming the tool, or one
    /// naming the server its input names as a whole (`mcp__srv`, `mcp__*`). A listing of
    /// every server is reached by any rule on a whole server, since it would read that one.
    fn resource_rule_hit(
        &self,
        rules: &'p [Rule],
        tool: &str,
        input: &Value,
    ) -> Option<(&'p Rule, String)> {
        let server = resource_subject(input);
        let shown = input
            .get("server")
            .and_then(Value::as_str)
            .map(|s| format!("the resources of MCP server {s}"))
            .unwrap_or_else(|| "the resources of every MCP server".to_owned());
        rules
            .iter()
            .find(|r| {
                r.tool == tool
                    || (r.pattern.is_none()
                        && match &server {
                            Some(name) => mcp_rule_restricts(&r.tool, name),
                            None => r.tool.starts_with("mcp__") && !r.tool[5..].contains("__"),
                        })
            })
            .map(|r| (r, shown))
    }

    /// A resource tool's call that no deny rule stopped: it reads what a server holds, so it
    /// is asked about unless bypassPermissions, a rule naming the tool, or an allow rule on
    /// the server it names (`mcp__srv`, `mcp__*`) allows it.
    fn decide_resource(&self, tool: &str, kind: ToolKind, input: &Value) -> Decision {
        if self.mode == PermissionMode::BypassPermissions {
            return Decision::Allow(AllowedBy::Mode(self.mode));
        }
        let server = resource_subject(input);
        if let Some(rule) = self.allow.iter().find(|r| {
            Self::names(r, tool, kind, false) && r.pattern.is_none()
                || (r.pattern.is_none()
                    && match &server {
                        Some(name) => mcp_rule_allows(&r.tool, name),
                        None => r.tool == "mcp__*",
                    })
        }) {
            return Decision::Allow(AllowedBy::Rule(rule.text()));
        }
        Decision::AskWhy(match input.get("server").and_then(Value::as_str) {
            Some(s) => {
                format!("it reads what MCP server {s} holds, and no rule allows that server")
            }
            None => "it reads what every MCP server holds, and no rule allows them all".to_owned(),
        })
    }

    fn decide_path(
        &self,
        tool: &str,
        kind: ToolKind,
        subj: Option<&str>,
        read_only: bool,
    ) -> Decision {
        let p = self.roots.resolve(self.fs, subj.unwrap_or("."));
        let writes = kind.edits_files();
        if self.mode == PermissionMode::Plan && (writes || !read_only) {
            return plan_denial(tool);
        }
        if self.mode == PermissionMode::BypassPermissions {
            return Decision::Allow(AllowedBy::Mode(self.mode));
        }
        let mut family: Vec<&str> = path_family(kind).to_vec();
        family.push(tool);
        if let Some(rule) = self.path_allowed(&family, &p) {
            return Decision::Allow(AllowedBy::Rule(rule.text()));
        }
        if !writes {
            // Reads inside the working directory and the added directories need no rule (a
            // search there passes over the files a Read deny rule protects, see
            // `read_filter`); reads anywhere else are asked about, as writes are.
            if !read_only {
                return Decision::Ask;
            }
            if self.roots.readable(self.fs, &p) {
                return Decision::Allow(AllowedBy::ReadOnly);
            }
            return Decision::AskWhy(outside_read_why(subj.unwrap_or("."), &p));
        }
        if self.mode == PermissionMode::AcceptEdits {
            if self.roots.contains(self.fs, &p) {
                return Decision::Allow(AllowedBy::Mode(self.mode));
            }
            return Decision::AskWhy(format!(
                "`{}` is outside the working directory and the added directories, where acceptEdits does not apply",
                subj.unwrap_or("")
            ));
        }
        Decision::Ask
    }

    fn decide_other(
        &self,
        tool: &str,
        kind: ToolKind,
        subj: Option<&str>,
        read_only: bool,
    ) -> Decision {
        if self.mode == PermissionMode::Plan && !read_only {
            return plan_denial(tool);
        }
        if self.mode == PermissionMode::BypassPermissions {
            return Decision::Allow(AllowedBy::Mode(self.mode));
        }
        if let Some(rule) = self.allow.iter().find(|r| {
            Self::mcp_allows(r, tool, kind)
                || Self::names(r, tool, kind, false)
                    && match (&r.pattern, subj) {
                        (None, _) => true,
                        (Some(p), Some(s)) => wildcard_escaped(p, s),
                        (Some(_), None) => false,
                    }
        }) {
            return Decision::Allow(AllowedBy::Rule(rule.text()));
        }
        if read_only {
            return Decision::Allow(AllowedBy::ReadOnly);
        }
        Decision::Ask
    }

    /// How a Bash command line is parsed, lowered and judged (`keel permissions check`).
    pub fn explain_bash(&self, command: &str) -> (Decision, Judgement) {
        let mut j = self.judge(command);
        let with = self.with_judgement(&j);
        let decision = with.decide(
            "Bash",
            ToolKind::Bash,
            &serde_json::json!({ "command": command }),
            false,
        );
        let (_, parts) = with.judge_bash("Bash", command);
        j.parts = parts;
        (decision, j)
    }

    /// The denial text for a call that would need approval in a session nobody can approve in.
    pub fn headless_denial(
        &self,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        why: Option<&str>,
    ) -> String {
        let subj = subject(kind, input);
        let suggestion = match (kind, &subj) {
            (ToolKind::Bash, Some(cmd)) => {
                let rules: Vec<String> = self
                    .suggest_bash(tool, cmd)
                    .into_iter()
                    .map(|(t, c)| format!("\"{t}({c})\""))
                    .collect();
                if rules.is_empty() {
                    "a rule that names the commands it runs, such as --allowedTools \"Bash(git status:*)\" (keel could not suggest an exact one)".to_owned()
                } else {
                    format!(
                        "--allowedTools {} for exactly this command",
                        rules.join(" ")
                    )
                }
            }
            (k, Some(path)) if k.edits_files() => {
                let p = self.roots.resolve(self.fs, path);
                if self.roots.contains(self.fs, &p) {
                    format!("--allowedTools \"{tool}({path})\" or --permission-mode acceptEdits")
                } else {
                    // Where the kernel goes (a link may lead out), not the spelling.
                    format!(
                        "--add-dir {} (then --permission-mode acceptEdits), or --allowedTools \"{tool}({})\"",
                        p.real.parent().unwrap_or(Path::new("/")).display(),
                        exact_path_rule(&p.real)
                    )
                }
            }
            (ToolKind::Read | ToolKind::Grep | ToolKind::Glob, _) => {
                let p = self.roots.resolve(
                    self.fs,
                    &self.path_subject(kind, input).unwrap_or_else(|| ".".into()),
                );
                read_suggestion(self.fs, &p)
            }
            (ToolKind::WebFetch, _) => match self.web.suggestion(input) {
                Some(rule) => format!("--allowedTools \"{tool}({rule})\" (that host only)"),
                None => format!("--allowedTools {tool}"),
            },
            _ if is_resource_tool(tool) => match input.get("server").and_then(Value::as_str) {
                Some(server) => format!(
                    "--allowedTools \"mcp__{server}\" (every tool and resource of that server)"
                ),
                None => {
                    "--allowedTools \"mcp__*\" (every MCP server), or name one server in `server`"
                        .to_owned()
                }
            },
            _ => format!("--allowedTools {tool}"),
        };
        let what = match (kind, &subj) {
            (ToolKind::Bash, Some(cmd)) => format!("Bash command `{}`", truncate(cmd, 120)),
            (_, Some(s)) => format!("{tool} on {}", truncate(s, 120)),
            _ => tool.to_owned(),
        };
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        format!(
            "Permission denied: the {what} needs approval{why}, and nobody can approve it in this non-interactive run (permission mode {}). It was not run. To allow it, rerun with {suggestion}.",
            self.mode.as_str()
        )
    }
}

/// Why a read is asked about: where it really leads, when a link took it there.
fn outside_read_why(shown: &str, p: &Resolved) -> String {
    if let Some(b) = &p.broken {
        return format!("`{shown}` cannot be resolved ({b})");
    }
    let via = if p.real != p.lexical {
        format!(" (it leads to {})", p.real.display())
    } else {
        String::new()
    };
    format!("`{shown}`{via} is outside the working directory and the added directories, where reads need a rule")
}

fn plan_denial(tool: &str) -> Decision {
    Decision::Deny {
        message: format!(
            "{tool} was not run: the session is in plan mode, where only read-only tools may run. Present the plan instead; the user can leave plan mode to carry it out."
        ),
    }
}

/// `denied_by` ran first and found nothing; a deny verdict here would mean the two disagree,
/// which fails closed.
fn unreachable_deny(tool: &str) -> Decision {
    Decision::Deny {
        message: format!("{tool} was not run: a deny rule names part of it."),
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
mod tests;
