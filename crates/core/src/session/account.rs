//! The capability account: what the session really has — MCP servers and their status, the
//! sandbox, the hooks loaded, the output style, structured output — carried on `system/init`
//! and every `result` as `keel_capabilities` (SDKs ignore fields they do not know), and the
//! check that a capability the run required is there before the model is called.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::Session;

/// What the run asked for that the account reports on.
#[derive(Clone, Debug, Default)]
pub struct Requested {
    /// `--strict-mcp-config`: every configured MCP server is required.
    pub strict_mcp: bool,
    /// The settings files' command hooks, counted per event.
    pub hooks: BTreeMap<String, usize>,
}

impl Session {
    /// Record what the run asked for (the builder does, for the main agent).
    pub fn set_requested(&mut self, requested: Requested) {
        self.requested = requested;
    }

    /// The account; `met` says whether structured output was given (`None` before a turn
    /// ends, or when none was asked for).
    pub(crate) fn capability_account(&self, met: Option<bool>) -> Value {
        let servers: Vec<Value> = self
            .ctx
            .mcp_servers()
            .iter()
            .map(crate::mcp::ServerStatus::to_json)
            .collect();
        let sandbox = match &self.ctx.limits().tools.sandbox {
            Some(sb) => json!({"enabled": true, "network": sb.policy().network}),
            None => json!({"enabled": false}),
        };
        let mut account = json!({
            "mcp_servers": servers,
            "strict_mcp_config": self.requested.strict_mcp,
            "sandbox": sandbox,
            "hooks": self.requested.hooks,
            "output_style": self.output_style.name,
            "structured_output": {
                "requested": self.structured.is_some(),
                "met": met,
            },
        });
        // `skills` and `commands`: what was loaded, from where, and what could not be.
        if let (Some(a), Value::Object(ext)) =
            (account.as_object_mut(), self.ctx.extensions().account())
        {
            a.extend(ext);
        }
        account
    }

    /// A capability the run required that is missing: with `--strict-mcp-config`, a
    /// configured MCP server that did not start. Said before any model call.
    pub(crate) fn missing_capability(&self) -> Option<String> {
        if !self.requested.strict_mcp {
            return None;
        }
        let failed: Vec<String> = self
            .ctx
            .mcp_servers()
            .into_iter()
            .filter(|s| matches!(s.status, "failed" | "needs-auth"))
            .map(|s| match s.error {
                Some(e) => format!("{} ({e})", s.name),
                None => s.name,
            })
            .collect();
        (!failed.is_empty()).then(|| {
            format!(
                "--strict-mcp-config requires every configured MCP server, and {} did not start: {}",
                if failed.len() == 1 { "this one" } else { "these" },
                failed.join("; ")
            )
        })
    }
}
