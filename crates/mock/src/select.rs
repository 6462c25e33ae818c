//! Choosing the step that answers a request: the first unused step whose `match` fits.

use serde_json::Value;

use crate::scenario::{Match, OnExhausted, Scenario};

/// How much of each step is left.
pub(crate) struct Cursor {
    remaining: Vec<usize>,
}

/// The outcome of choosing.
#[derive(Debug, PartialEq)]
pub(crate) enum Pick {
    /// This step answers.
    Step(usize),
    /// No step answers; the message explains why.
    Nothing(String),
}

impl Cursor {
    pub(crate) fn new(scenario: &Scenario) -> Cursor {
        Cursor {
            remaining: scenario.steps.iter().map(|s| s.times.max(1)).collect(),
        }
    }

    /// Choose (and consume) the step that answers `body`.
    pub(crate) fn pick(&mut self, scenario: &Scenario, body: &Value) -> Pick {
        if let Some(i) = self.first_fit(scenario, body) {
            self.remaining[i] -= 1;
            return Pick::Step(i);
        }
        let left = self.remaining.iter().filter(|r| **r > 0).count();
        let n = scenario.steps.len();
        if left > 0 {
            return Pick::Nothing(format!(
                "keel-mock: no scenario step matches this request ({left} of {n} steps are left, \
                 each with a `match` condition this request does not meet)"
            ));
        }
        let exhausted = format!(
            "keel-mock: the scenario has no step left for this request ({n} {} used)",
            if n == 1 { "step was" } else { "steps were" }
        );
        match scenario.on_exhausted {
            OnExhausted::Error => Pick::Nothing(exhausted),
            OnExhausted::RepeatLast => scenario
                .steps
                .iter()
                .rposition(|s| fits(s.when.as_ref(), body))
                .map_or(Pick::Nothing(exhausted), Pick::Step),
            OnExhausted::Loop => {
                self.remaining = Cursor::new(scenario).remaining;
                match self.first_fit(scenario, body) {
                    Some(i) => {
                        self.remaining[i] -= 1;
                        Pick::Step(i)
                    }
                    None => Pick::Nothing(exhausted),
                }
            }
        }
    }

    fn first_fit(&self, scenario: &Scenario, body: &Value) -> Option<usize> {
        scenario
            .steps
            .iter()
            .enumerate()
            .position(|(i, s)| self.remaining[i] > 0 && fits(s.when.as_ref(), body))
    }
}

/// Whether a request body meets a step's `match` (no `match` fits everything).
pub(crate) fn fits(when: Option<&Match>, body: &Value) -> bool {
    let Some(m) = when else { return true };
    let contains = |want: &Option<String>, have: Option<String>| match want {
        None => true,
        Some(w) => have.is_some_and(|h| h.contains(w.as_str())),
    };
    contains(&m.system_contains, Some(system_text(body)))
        && contains(&m.last_user_contains, user_text(body, true))
        && contains(&m.first_user_contains, user_text(body, false))
        && m.has_tool.as_ref().is_none_or(|name| {
            body["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"].as_str() == Some(name)))
        })
}

fn system_text(body: &Value) -> String {
    match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => texts(blocks),
        _ => String::new(),
    }
}

/// Text of the last (or first) user message: text blocks and tool_result contents.
fn user_text(body: &Value, last: bool) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let is_user = |m: &&Value| m["role"] == "user";
    let msg = if last {
        messages.iter().rev().find(is_user)
    } else {
        messages.iter().find(is_user)
    }?;
    Some(content_text(&msg["content"]))
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            let mut out = Vec::new();
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => out.push(b["text"].as_str().unwrap_or_default().to_string()),
                    Some("tool_result") => out.push(content_text(&b["content"])),
                    _ => {}
                }
            }
            out.join("\n")
        }
        _ => String::new(),
    }
}

fn texts(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Step;
    use serde_json::json;

    fn body(system: &str, user: &str) -> Value {
        json!({"system": [{"type": "text", "text": system}],
               "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
               "tools": [{"name": "Bash"}]})
    }

    #[test]
    fn match_conditions() {
        let b = body("you are a subagent", "task A");
        assert!(fits(Some(&Match::new().system_contains("subagent")), &b));
        assert!(!fits(Some(&Match::new().system_contains("main")), &b));
        assert!(fits(Some(&Match::new().last_user_contains("task A")), &b));
        assert!(fits(
            Some(&Match::new().first_user_contains("A").has_tool("Bash")),
            &b
        ));
        assert!(!fits(Some(&Match::new().has_tool("Read")), &b));
    }

    #[test]
    fn first_unused_matching_step_wins() {
        let s = Scenario::new(vec![
            Step::text("b").when(Match::new().last_user_contains("B")),
            Step::text("any"),
            Step::text("a")
                .when(Match::new().last_user_contains("A"))
                .times(2),
        ]);
        let mut c = Cursor::new(&s);
        assert_eq!(c.pick(&s, &body("", "A")), Pick::Step(1));
        assert_eq!(c.pick(&s, &body("", "A")), Pick::Step(2));
        assert_eq!(c.pick(&s, &body("", "B")), Pick::Step(0));
        assert_eq!(c.pick(&s, &body("", "A")), Pick::Step(2));
        assert!(
            matches!(c.pick(&s, &body("", "A")), Pick::Nothing(m) if m.contains("3 steps were used"))
        );
    }
}
