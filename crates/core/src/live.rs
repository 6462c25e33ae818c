//! Settings a host may change while a turn runs: the model, the permission mode, and rules
//! granted along with an approval.
//!
//! Control requests arrive concurrently with a running turn, which holds the session mutably.
//! So changes land here, behind the [`SessionHandle`](crate::SessionHandle)'s lock, as pending
//! values: the session takes them into its configuration at the start of a turn and before each
//! model call, and dispatch overlays them on every permission decision. Nothing is applied
//! twice: taking empties the pending values, and an overlay only reads them.

use crate::approval::{PermissionUpdate, RuleBehavior};
use crate::config::SessionConfig;
use crate::permissions::{PermissionConfig, PermissionMode, Rule};

/// Pending changes plus the values a host sees now.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pending_model: Option<String>,
    pending_mode: Option<PermissionMode>,
    pending_allow: Vec<Rule>,
    pending_deny: Vec<Rule>,
    /// The model requests will use from the next call on.
    model: String,
    /// The mode decisions use from now on.
    mode: PermissionMode,
}

impl Live {
    pub(crate) fn new(cfg: &SessionConfig) -> Self {
        Self {
            model: cfg.model.clone(),
            mode: cfg.permissions.mode,
            ..Self::default()
        }
    }

    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    pub(crate) fn mode(&self) -> PermissionMode {
        self.mode
    }

    /// A host changed the model.
    pub(crate) fn set_model(&mut self, model: String) {
        self.model = model.clone();
        self.pending_model = Some(model);
    }

    /// A host changed the mode.
    pub(crate) fn set_mode(&mut self, mode: PermissionMode) {
        self.mode = mode;
        self.pending_mode = Some(mode);
    }

    /// The session itself changed the model (directly, or by falling back).
    pub(crate) fn note_model(&mut self, model: &str) {
        self.model = model.to_owned();
        self.pending_model = None;
    }

    /// Apply updates granted with an approval.
    pub(crate) fn apply(&mut self, updates: &[PermissionUpdate]) {
        for u in updates {
            match u {
                PermissionUpdate::AddRules {
                    behavior: RuleBehavior::Allow,
                    rules,
                } => self.pending_allow.extend(rules.iter().cloned()),
                PermissionUpdate::AddRules {
                    behavior: RuleBehavior::Deny,
                    rules,
                } => self.pending_deny.extend(rules.iter().cloned()),
                PermissionUpdate::SetMode(m) => self.set_mode(*m),
            }
        }
    }

    /// `base` with the pending changes on top, for one permission decision.
    pub(crate) fn overlay(&self, base: &PermissionConfig) -> PermissionConfig {
        let mut p = base.clone();
        if let Some(m) = self.pending_mode {
            p.mode = m;
        }
        p.allow.extend(self.pending_allow.iter().cloned());
        p.deny.extend(self.pending_deny.iter().cloned());
        p
    }

    /// Move the pending changes into the session's configuration.
    pub(crate) fn take_into(&mut self, cfg: &mut SessionConfig) {
        if let Some(m) = self.pending_model.take() {
            cfg.model = m;
        }
        if let Some(m) = self.pending_mode.take() {
            cfg.permissions.mode = m;
        }
        cfg.permissions.allow.append(&mut self.pending_allow);
        cfg.permissions.deny.append(&mut self.pending_deny);
        self.model = cfg.model.clone();
        self.mode = cfg.permissions.mode;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::{Decision, RuleSource};
    use serde_json::json;

    #[test]
    fn pending_changes_overlay_then_merge_once() {
        let mut cfg = SessionConfig::new(std::env::temp_dir());
        let mut live = Live::new(&cfg);
        live.set_model("m2".into());
        live.apply(&[PermissionUpdate::AddRules {
            behavior: RuleBehavior::Allow,
            rules: vec![Rule::parse("Bash(touch:*)", RuleSource::Session).unwrap()],
        }]);
        let cmd = json!({"command": "touch x"});
        assert!(matches!(
            live.overlay(&cfg.permissions).decide("Bash", &cmd, false),
            Decision::Allow(_)
        ));
        assert_eq!(cfg.permissions.decide("Bash", &cmd, false), Decision::Ask);
        live.take_into(&mut cfg);
        live.take_into(&mut cfg);
        assert_eq!(cfg.model, "m2");
        assert_eq!(cfg.permissions.allow.len(), 1);
        live.set_mode(PermissionMode::Plan);
        assert_eq!(live.mode(), PermissionMode::Plan);
        assert_eq!(cfg.permissions.mode, PermissionMode::Default);
        live.take_into(&mut cfg);
        assert_eq!(cfg.permissions.mode, PermissionMode::Plan);
    }
}
