//! Asking someone to approve a tool call the permission rules leave open.
//!
//! When [`PermissionConfig::decide`](crate::permissions::PermissionConfig::decide) answers
//! `Ask`, dispatch hands the call to the session's [`Approver`] (an SDK host answering
//! `can_use_tool`, later a terminal prompt). Without one, a headless run denies the call with a
//! message that says how to allow it. The wait is raced against the turn's cancel token: an
//! interrupt never waits on an approval.

use std::fmt;

use futures_util::future::BoxFuture;
use keel_tools::ToolKind;
use serde_json::{json, Value};

use crate::permissions::{PermissionMode, Rule, RuleSource};

/// What an approver is asked.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRequest {
    /// The tool.
    pub tool_name: String,
    /// The call's id.
    pub tool_use_id: String,
    /// The call's input.
    pub input: Value,
    /// A short description of the call, when the input carries one (`description` of Bash).
    pub description: Option<String>,
    /// The path the call would write, for file tools.
    pub blocked_path: Option<String>,
    /// Permission updates that would allow this call next time (wire shape of
    /// `permission_suggestions`).
    pub suggestions: Vec<Value>,
    /// Why approval is needed (e.g. a PreToolUse hook asked for it).
    pub reason: Option<String>,
    /// The permission mode in force.
    pub mode: PermissionMode,
}

/// The approver's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Approval {
    /// Run the call.
    Allow {
        /// Run it with this input instead of the model's.
        updated_input: Option<Value>,
        /// Rule or mode changes for the rest of the session.
        updates: Vec<PermissionUpdate>,
    },
    /// Do not run it.
    Deny {
        /// Why; the model reads it as the call's error result.
        message: String,
        /// End the turn as interrupted, as if the user had pressed stop.
        interrupt: bool,
    },
}

/// How a permission update's rules behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleBehavior {
    /// Allow matching calls without asking.
    Allow,
    /// Deny matching calls.
    Deny,
    /// Ask about matching calls even where an allow rule or the mode would allow them.
    Ask,
}

/// A change to the session's permissions that an approver grants along with an allow.
#[derive(Clone, Debug, PartialEq)]
pub enum PermissionUpdate {
    /// Add rules (for this session; keel never writes settings files on a host's behalf).
    AddRules {
        /// Allow or deny.
        behavior: RuleBehavior,
        /// The rules.
        rules: Vec<Rule>,
    },
    /// Switch the permission mode.
    SetMode(PermissionMode),
}

/// A permission update (`updatedPermissions`) keel cannot apply, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// `addRules` with a behavior that is not allow, deny or ask.
    #[error("addRules with behavior {0:?} is not a behavior (allow, deny or ask)")]
    UnknownBehavior(String),
    /// A field the update needs is absent.
    #[error("{update} has no {field}")]
    Missing {
        /// The update (or "a rule" of one).
        update: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A rule of `addRules` that cannot be read.
    #[error("{0}")]
    BadRule(#[from] crate::permissions::RuleError),
    /// `setMode` with a mode keel does not know.
    #[error("setMode names an unknown mode {0:?}")]
    UnknownMode(String),
    /// An update type keel does not apply (directories, rule removal, ...).
    #[error("permission updates of type {0:?} are not supported by keel yet")]
    Unsupported(String),
}

impl PermissionUpdate {
    /// Parse one entry of `updatedPermissions`. Updates keel does not apply (directories, rule
    /// removal) are errors that say so.
    pub fn from_wire(v: &Value) -> Result<Self, UpdateError> {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "addRules" => {
                let behavior = match v.get("behavior").and_then(Value::as_str) {
                    Some("allow") => RuleBehavior::Allow,
                    Some("deny") => RuleBehavior::Deny,
                    Some("ask") => RuleBehavior::Ask,
                    Some(other) => return Err(UpdateError::UnknownBehavior(other.to_owned())),
                    None => return Err(missing("addRules", "behavior")),
                };
                let rules = v
                    .get("rules")
                    .and_then(Value::as_array)
                    .ok_or(missing("addRules", "rules"))?
                    .iter()
                    .map(|r| {
                        let tool = r
                            .get("toolName")
                            .and_then(Value::as_str)
                            .ok_or(missing("a rule", "toolName"))?;
                        let text = match r.get("ruleContent").and_then(Value::as_str) {
                            Some(c) if !c.is_empty() => format!("{tool}({c})"),
                            _ => tool.to_owned(),
                        };
                        Ok(Rule::parse(&text, RuleSource::Session)?)
                    })
                    .collect::<Result<Vec<_>, UpdateError>>()?;
                Ok(PermissionUpdate::AddRules { behavior, rules })
            }
            "setMode" => {
                let m = v
                    .get("mode")
                    .and_then(Value::as_str)
                    .ok_or(missing("setMode", "mode"))?;
                PermissionMode::parse(m)
                    .map(PermissionUpdate::SetMode)
                    .ok_or_else(|| UpdateError::UnknownMode(m.to_owned()))
            }
            "" => Err(missing("a permission update", "type")),
            other => Err(UpdateError::Unsupported(other.to_owned())),
        }
    }

    /// Parse every entry; the ones keel cannot apply are returned as messages.
    pub fn parse_all(values: &[Value]) -> (Vec<PermissionUpdate>, Vec<UpdateError>) {
        let mut ok = Vec::new();
        let mut skipped = Vec::new();
        for v in values {
            match Self::from_wire(v) {
                Ok(u) => ok.push(u),
                Err(e) => skipped.push(e),
            }
        }
        (ok, skipped)
    }
}

/// Something that can approve or deny a tool call (an SDK host, a person at a terminal).
pub trait Approver: Send + Sync + fmt::Debug {
    /// Decide `req`. The engine drops the future if the turn is cancelled meanwhile, so an
    /// implementation that asks someone else must withdraw its question when dropped.
    fn approve(&self, req: ApprovalRequest) -> BoxFuture<'_, Approval>;
}

/// The `permission_suggestions` keel offers with a request: a session rule for this exact call,
/// and for file edits the acceptEdits mode.
pub fn suggestions(
    perms: &crate::permissions::PermissionConfig,
    tool: &str,
    kind: ToolKind,
    input: &Value,
) -> Vec<Value> {
    let mut out = Vec::new();
    let rules: Vec<Value> = match kind {
        ToolKind::Bash => {
            let command = input.get("command").and_then(Value::as_str).unwrap_or("");
            perms
                .suggest_bash(tool, command)
                .into_iter()
                .map(|(t, c)| json!({ "toolName": t, "ruleContent": c }))
                .collect()
        }
        ToolKind::Write | ToolKind::Edit | ToolKind::NotebookEdit | ToolKind::Read => {
            match kind
                .path_field()
                .and_then(|f| input.get(f))
                .and_then(Value::as_str)
            {
                Some(p) => {
                    let r = perms.resolve(p);
                    vec![
                        json!({ "toolName": tool, "ruleContent": crate::permissions::exact_path_rule(&r.real) }),
                    ]
                }
                None => Vec::new(),
            }
        }
        // A search outside the project: exactly the directory (or file) it searches.
        ToolKind::Grep | ToolKind::Glob => match perms.judged_path(kind, input) {
            Some(p) => {
                vec![
                    json!({ "toolName": tool, "ruleContent": crate::permissions::exact_path_rule(&p) }),
                ]
            }
            None => Vec::new(),
        },
        // The host the call reaches, never every host.
        ToolKind::WebFetch => match crate::permissions::PermissionConfig::web_suggestion(input) {
            Some(rule) => vec![json!({ "toolName": tool, "ruleContent": rule })],
            None => Vec::new(),
        },
        // A rule naming a resource tool would reach every server's resources.
        _ if crate::permissions::RESOURCE_TOOLS.contains(&tool) => Vec::new(),
        _ => vec![json!({ "toolName": tool })],
    };
    // Never a rule broader than what is being approved: when none can be exact, only the
    // one-time approval is offered.
    if !rules.is_empty() {
        out.push(json!({ "type": "addRules", "rules": rules, "behavior": "allow", "destination": "session" }));
    }
    if kind.edits_files() {
        let inside = input
            .get(kind.path_field().unwrap_or("file_path"))
            .and_then(Value::as_str)
            .is_some_and(|p| perms.inside(&perms.resolve(p)));
        if inside {
            out.push(json!({ "type": "setMode", "mode": "acceptEdits", "destination": "session" }));
        }
    }
    out
}

fn missing(update: &'static str, field: &'static str) -> UpdateError {
    UpdateError::Missing { update, field }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_parse_from_the_wire() {
        let (ok, skipped) = PermissionUpdate::parse_all(&[
            json!({"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch x"}],"behavior":"allow","destination":"session"}),
            json!({"type":"addRules","rules":[{"toolName":"Write"}],"behavior":"deny","destination":"localSettings"}),
            json!({"type":"setMode","mode":"acceptEdits","destination":"session"}),
            json!({"type":"addDirectories","directories":["/tmp"],"destination":"session"}),
            json!({"type":"addRules","rules":[{"toolName":"Bash"}],"behavior":"ask"}),
        ]);
        assert_eq!(ok.len(), 4, "{ok:?}");
        match &ok[0] {
            PermissionUpdate::AddRules { behavior, rules } => {
                assert_eq!(*behavior, RuleBehavior::Allow);
                assert_eq!(rules[0].text(), "Bash(touch x)");
                assert_eq!(rules[0].source, RuleSource::Session);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ok[2],
            PermissionUpdate::SetMode(PermissionMode::AcceptEdits)
        );
        assert!(
            matches!(
                &ok[3],
                PermissionUpdate::AddRules {
                    behavior: RuleBehavior::Ask,
                    ..
                }
            ),
            "{ok:?}"
        );
        assert_eq!(skipped.len(), 1);
        assert_eq!(
            skipped[0],
            UpdateError::Unsupported("addDirectories".into())
        );
    }

    #[test]
    fn suggestions_name_the_call() {
        let perms = crate::permissions::PermissionConfig::new(
            crate::permissions::PermissionMode::Default,
            &std::env::current_dir().unwrap(),
        );
        let s = suggestions(
            &perms,
            "Bash",
            ToolKind::Bash,
            &json!({"command": "touch x"}),
        );
        assert_eq!(s[0]["rules"][0]["ruleContent"], "touch x");
        // A glob (like any word only known at run time) gets no reusable rule: the approval
        // is for this call only.
        let s = suggestions(
            &perms,
            "Bash",
            ToolKind::Bash,
            &json!({"command": "rm -rf build/*"}),
        );
        assert!(s.is_empty(), "{s:?}");
        // A `*` inside quotes is literal, and is approved as written.
        let s = suggestions(
            &perms,
            "Bash",
            ToolKind::Bash,
            &json!({"command": "rm -rf 'build/*'"}),
        );
        assert_eq!(s[0]["rules"][0]["ruleContent"], "rm -rf 'build/*'");
        // Compound lines: one exact rule per command that needs approval.
        let s = suggestions(
            &perms,
            "Bash",
            ToolKind::Bash,
            &json!({"command": "ls && touch a && touch b"}),
        );
        assert_eq!(s[0]["rules"].as_array().unwrap().len(), 2, "{s:?}");
        let s = suggestions(&perms, "Edit", ToolKind::Edit, &json!({"file_path": "a"}));
        assert_eq!(s.len(), 2);
        let want = format!(
            "/{}",
            crate::permissions::paths::real_path(&std::env::current_dir().unwrap())
                .join("a")
                .display()
        );
        assert_eq!(s[0]["rules"][0]["ruleContent"], want.as_str());
        // Not understood: nothing but a one-time approval.
        assert!(suggestions(
            &perms,
            "Bash",
            ToolKind::Bash,
            &json!({"command": "eval \"$X\""})
        )
        .is_empty());
    }
}
