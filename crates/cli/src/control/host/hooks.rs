//! Hooks answered by the host: the matchers registered in `initialize`, and the
//! `hook_callback` requests that run them.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use keel_core::emit::new_uuid;
use keel_core::hooks::{HookDecision, HookEvent, HookInput, Hooks};
use keel_protocol::control::{HookCallbackRequest, HookMatcherConfig, Request};
use keel_protocol::{Extra, Frame};
use serde_json::{json, Value};

use super::{Bridge, RequestError};

/// One hook matcher registered in `initialize`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegisteredHook {
    /// The event.
    pub event: HookEvent,
    /// Tool names (`A|B`), `*`, a regular expression, or none for every tool (for events
    /// without tools: compared with the event's matched field, such as SessionStart's source).
    pub matcher: Option<String>,
    /// The host's callback ids.
    pub callback_ids: Vec<String>,
    /// How long each callback may take.
    pub timeout: Duration,
    /// On failure (error, bad answer, timeout): block (`true`) or go on as if it had no opinion.
    pub fail_closed: bool,
}

/// A hook callback's default deadline.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

impl RegisteredHook {
    /// One matcher entry of `initialize.hooks[event]`, range-checked.
    pub fn from_config(event: HookEvent, c: HookMatcherConfig) -> Result<Self, String> {
        let timeout = match c.timeout {
            None => DEFAULT_HOOK_TIMEOUT,
            Some(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.min(24.0 * 3600.0))
            }
            Some(t) => return Err(format!("timeout {t} is not a positive number of seconds")),
        };
        // Like the reference: unset or "continue" fails open; anything else fails closed.
        let fail_closed = c.on_failure.as_deref().is_some_and(|s| s != "continue");
        if let Some(m) = &c.matcher {
            keel_core::hooks::check_matcher(m).map_err(|e| e.to_string())?;
        }
        Ok(Self {
            event,
            matcher: c.matcher.filter(|s| !s.trim().is_empty()),
            callback_ids: c.hook_callback_ids,
            timeout,
            fail_closed,
        })
    }

    /// Whether this matcher covers `subject` (a tool, or the event's matched field).
    pub fn matches(&self, subject: &str) -> bool {
        keel_core::hooks::matcher_covers(self.matcher.as_deref(), subject)
    }
}

/// Hooks answered by the host through `hook_callback` requests.
#[derive(Debug)]
pub struct HostHooks {
    bridge: Arc<Bridge>,
}

impl HostHooks {
    /// Hooks registered on `bridge`.
    pub fn new(bridge: Arc<Bridge>) -> Self {
        Self { bridge }
    }
}

impl Hooks for HostHooks {
    fn wants(&self, event: HookEvent, subject: Option<&str>) -> bool {
        !self.bridge.matching_hooks(event, subject).is_empty()
    }

    fn run(&self, input: HookInput) -> BoxFuture<'_, HookDecision> {
        Box::pin(async move {
            let hooks = self.bridge.matching_hooks(input.event, input.subject());
            let json_input = input.to_json();
            // Callbacks run side by side, so the wait is the slowest one's, not the sum.
            let calls = hooks
                .iter()
                .flat_map(|h| h.callback_ids.iter().map(move |id| (h, id)))
                .map(|(h, id)| self.callback(h, id, &input, json_input.clone()));
            let decisions = futures_util::future::join_all(calls).await;
            let mut all = HookDecision::proceed();
            for d in decisions {
                all.merge(d);
            }
            all
        })
    }
}

impl HostHooks {
    async fn callback(
        &self,
        hook: &RegisteredHook,
        id: &str,
        input: &HookInput,
        json_input: Value,
    ) -> HookDecision {
        let event = input.event;
        let request = Request::HookCallback(HookCallbackRequest {
            callback_id: id.to_owned(),
            input: json_input,
            tool_use_id: input.tool_use_id().map(str::to_owned),
            extra: Extra::new(),
        });
        let hook_id = new_uuid();
        if self.bridge.hook_events {
            let mut extra = Extra::new();
            extra.insert("hook_id".into(), json!(hook_id));
            extra.insert("hook_name".into(), json!(format!("{event}:{id}")));
            extra.insert("hook_event".into(), json!(event.as_str()));
            self.hook_frame("hook_started", extra).await;
        }
        let answer = self.bridge.request(request, Some(hook.timeout)).await;
        let parsed = match &answer {
            Ok(v) => HookDecision::from_output(event, v)
                .map_err(|e| format!("gave an answer keel cannot use: {e}")),
            Err(e) => Err(e.to_string()),
        };
        if self.bridge.hook_events {
            let mut extra = Extra::new();
            extra.insert("hook_id".into(), json!(hook_id));
            extra.insert("hook_name".into(), json!(format!("{event}:{id}")));
            extra.insert("hook_event".into(), json!(event.as_str()));
            extra.insert(
                "output".into(),
                json!(answer.as_ref().map(|v| v.to_string()).unwrap_or_default()),
            );
            extra.insert("stdout".into(), json!(""));
            extra.insert(
                "stderr".into(),
                json!(parsed.as_ref().err().cloned().unwrap_or_default()),
            );
            let outcome = match (&answer, &parsed) {
                (Err(RequestError::HostGone), _) => "cancelled",
                (_, Ok(_)) => "success",
                _ => "error",
            };
            extra.insert("outcome".into(), json!(outcome));
            self.hook_frame("hook_response", extra).await;
        }
        match parsed {
            Ok(d) => d,
            Err(why) => {
                // Stop hooks cannot block anything by failing: the model has finished.
                // Nor can the events that only inform (a session starting or ending, a
                // compaction, a notification, a subagent starting).
                let block = hook.fail_closed
                    && !matches!(
                        event,
                        HookEvent::Stop
                            | HookEvent::PreCompact
                            | HookEvent::SessionStart
                            | HookEvent::SessionEnd
                            | HookEvent::Notification
                            | HookEvent::SubagentStart
                    );
                let policy = if block {
                    "it is set to block on failure, so the action was blocked"
                } else {
                    "it fails open, so keel went on as if it had no opinion"
                };
                self.bridge
                    .warn(
                        format!("the {event} hook callback {id} {why}; {policy}"),
                        "hook",
                    )
                    .await;
                if block {
                    HookDecision::blocked(format!(
                        "the {event} hook callback {id} {why}, and it is set to block on failure"
                    ))
                } else {
                    HookDecision::proceed()
                }
            }
        }
    }

    async fn hook_frame(&self, subtype: &str, mut extra: Extra) {
        extra.insert("type".into(), json!("system"));
        extra.insert("subtype".into(), json!(subtype));
        extra.insert("uuid".into(), json!(new_uuid()));
        extra.insert("session_id".into(), json!(self.bridge.session_id()));
        let _ = self.bridge.send(Frame::Other(Value::Object(extra))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(matcher: Option<&str>) -> RegisteredHook {
        RegisteredHook {
            event: HookEvent::PreToolUse,
            matcher: matcher.map(str::to_owned),
            callback_ids: vec!["hook_0".into()],
            timeout: DEFAULT_HOOK_TIMEOUT,
            fail_closed: false,
        }
    }

    #[test]
    fn matchers() {
        assert!(hook(None).matches("Bash"));
        assert!(hook(Some("*")).matches("Bash"));
        assert!(hook(Some("Write|Edit")).matches("Edit"));
        assert!(!hook(Some("Write|Edit")).matches("Bash"));
        assert!(hook(Some("Task")).matches("Agent"));
        assert!(hook(Some("mcp__.*")).matches("mcp__fs__read"));
        assert!(!hook(Some("Bash")).matches("BashOutput"));
        assert!(hook(Some("Notebook.*|Web(Fetch|Search)")).matches("WebSearch"));
        assert!(!hook(Some("^Read$")).matches("ReadMany"));
        assert!(hook(Some("")).matches("Anything"));
    }

    #[test]
    fn registration_parses_timeouts_and_policies() {
        let parse = |event, v: Value| {
            RegisteredHook::from_config(
                event,
                serde_json::from_value(v).map_err(|e| e.to_string())?,
            )
        };
        let h = parse(
            HookEvent::PreToolUse,
            json!({"matcher": "Bash", "hookCallbackIds": ["hook_0", "hook_1"], "timeout": 2, "onFailure": "block"}),
        )
        .unwrap();
        assert_eq!(h.timeout, Duration::from_secs(2));
        assert!(h.fail_closed);
        assert_eq!(h.callback_ids.len(), 2);
        let h = parse(
            HookEvent::Stop,
            json!({"matcher": null, "hookCallbackIds": []}),
        )
        .unwrap();
        assert!(!h.fail_closed);
        assert_eq!(h.timeout, DEFAULT_HOOK_TIMEOUT);
        assert!(parse(
            HookEvent::Stop,
            json!({"timeout": -1, "hookCallbackIds": []})
        )
        .is_err());
        let bad = parse(
            HookEvent::PreToolUse,
            json!({"matcher": "Bash(", "hookCallbackIds": []}),
        )
        .unwrap_err();
        assert!(bad.contains("Bash("), "{bad}");
    }
}
