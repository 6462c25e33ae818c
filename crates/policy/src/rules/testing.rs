//! For the tests: rules owned in one place, judged on the real file system with no web judge.

use serde_json::Value;

use super::bash::BashVerdict;
use super::web::NoWeb;
use super::{Decision, Judgement, PathUse, PermissionMode, Policy, Rule};
use crate::fs::RealFs;
use crate::paths::Roots;
use crate::ToolKind;

/// Mode, rules and roots, owned.
#[derive(Clone, Debug, Default)]
pub(crate) struct PermissionConfig {
    pub mode: PermissionMode,
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub roots: Roots,
}

impl PermissionConfig {
    pub fn policy(&self) -> Policy<'_> {
        Policy {
            mode: self.mode,
            allow: &self.allow,
            deny: &self.deny,
            ask: &self.ask,
            roots: &self.roots,
            fs: &RealFs,
            path_var: None,
            web: &NoWeb,
            judged: None,
        }
    }

    pub fn decide(&self, tool: &str, kind: ToolKind, input: &Value, read_only: bool) -> Decision {
        self.policy().decide(tool, kind, input, read_only)
    }

    pub fn headless_denial(
        &self,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        why: Option<&str>,
    ) -> String {
        self.policy().headless_denial(tool, kind, input, why)
    }

    pub fn judge_bash(&self, tool: &str, command: &str) -> (BashVerdict, Vec<String>) {
        self.policy().judge_bash(tool, command)
    }

    pub fn suggest_bash(&self, tool: &str, command: &str) -> Vec<(String, String)> {
        self.policy().suggest_bash(tool, command)
    }

    pub fn judged_path(&self, kind: ToolKind, input: &Value) -> Option<std::path::PathBuf> {
        self.policy().judged_path(kind, input)
    }

    #[allow(dead_code)]
    pub fn path_uses(&self, j: &Judgement) -> Vec<PathUse> {
        self.policy().path_uses(j)
    }
}
