//! The web tools' part of the decision. Their rules name hosts, and judging a host needs
//! URL parsing and address classes that live with the tools; the policy takes that judge as
//! a [`WebRules`] and checks only a rule's spelling itself.

use serde_json::Value;

use super::{Decision, Rule};
use crate::ToolKind;

/// Judges WebFetch and WebSearch calls against the rules (keel-core's permission layer).
pub trait WebRules: Send + Sync {
    /// The deny or ask rule among `rules` that reaches this WebFetch call (and the host).
    fn rule_hit<'r>(
        &'r self,
        rules: &'r [Rule],
        tool: &str,
        kind: ToolKind,
        input: &Value,
    ) -> Option<(&'r Rule, String)>;
    /// Decide a WebFetch call no deny rule stopped.
    fn decide_fetch(&self, tool: &str, input: &Value) -> Decision;
    /// Decide a WebSearch call no deny rule stopped.
    fn decide_search(&self, tool: &str, kind: ToolKind, input: &Value) -> Decision;
    /// The rule pattern that would allow this WebFetch call (`domain:host`).
    fn suggestion(&self, input: &Value) -> Option<String>;
}

/// No web judge: every rule of the tool reaches a call, and nothing is allowed without
/// asking (for judging without the tools, as `keel permissions check` on a Bash line does).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoWeb;

impl WebRules for NoWeb {
    fn rule_hit<'r>(
        &'r self,
        rules: &'r [Rule],
        tool: &str,
        kind: ToolKind,
        _input: &Value,
    ) -> Option<(&'r Rule, String)> {
        rules
            .iter()
            .find(|r| kind.answers_to(&r.tool, tool))
            .map(|r| (r, String::new()))
    }

    fn decide_fetch(&self, _tool: &str, _input: &Value) -> Decision {
        Decision::Ask
    }

    fn decide_search(&self, _tool: &str, _kind: ToolKind, _input: &Value) -> Decision {
        Decision::Ask
    }

    fn suggestion(&self, _input: &Value) -> Option<String> {
        None
    }
}

/// Whether a WebFetch rule's pattern, checked when the rule is read, names a host: only
/// `domain:HOST[:PORT]`, the host of letters, digits, `.-_*:` (an IPv6 address in brackets),
/// the port a number.
pub(super) fn pattern_ok(pattern: &str) -> bool {
    domain_ok(pattern).is_some()
}

fn domain_ok(pattern: &str) -> Option<()> {
    let spec = pattern
        .trim()
        .strip_prefix("domain:")?
        .trim()
        .to_ascii_lowercase();
    let host = if let Some(rest) = spec.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        match after.strip_prefix(':') {
            Some(p) => {
                p.parse::<u16>().ok()?;
            }
            None if after.is_empty() => {}
            None => return None,
        }
        h.to_owned()
    } else if spec.matches(':').count() == 1 {
        let (h, p) = spec.split_once(':')?;
        p.parse::<u16>().ok()?;
        h.to_owned()
    } else {
        spec
    };
    let host = host.trim_end_matches('.');
    (!host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '*' | ':')))
    .then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_rule_spellings() {
        for ok in [
            "domain:example.com",
            "domain:*.example.com",
            "domain:127.0.0.1:8080",
            "domain:[::1]:80",
        ] {
            assert!(pattern_ok(ok), "{ok}");
        }
        for bad in [
            "example.com",
            "domain:",
            "domain:a.com:99999",
            "domain:a/b",
            "domain:[::1]x",
        ] {
            assert!(!pattern_ok(bad), "{bad}");
        }
    }
}
