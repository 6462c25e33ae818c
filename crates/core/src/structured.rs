//! Structured output (`--json-schema`, the SDKs' `output_format: json_schema`): the model is
//! offered a `StructuredOutput` tool whose input schema is the caller's schema. A call that
//! matches it is the turn's answer (the turn ends without another request); one that does not
//! gets an error result naming every violation, and the model tries again — up to a bound.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use keel_tools::{Tool, ToolContext, ToolKind, ToolOutcome};
use serde_json::Value;

/// The tool's name, as the SDKs expect it.
pub const TOOL_NAME: &str = "StructuredOutput";
/// Invalid calls allowed in one turn before it ends (`MAX_STRUCTURED_OUTPUT_RETRIES`).
pub const DEFAULT_MAX_RETRIES: u32 = 5;
/// The largest `MAX_STRUCTURED_OUTPUT_RETRIES` keel takes.
pub const MAX_RETRIES_LIMIT: u32 = 100;
/// The longest schema keel takes, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;
/// Violations listed in one error result (the rest are counted).
const MAX_LISTED: usize = 20;

const DESCRIPTION: &str = "Give your final answer by calling this tool once, with an input that matches its schema exactly. The call is your answer: nothing you write after it is read. If the call is refused, read the listed problems and call it again with a corrected input.";

/// What the model is told when it ends its turn in text without calling the tool.
pub const NUDGE: &str = "This session needs your answer as structured data: call the StructuredOutput tool now, with an input that matches its schema. A text reply is not read as the answer.";

/// A `--json-schema` keel cannot use.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The text is not JSON.
    #[error("--json-schema is not JSON: {0}")]
    NotJson(String),
    /// The JSON is not an object.
    #[error("--json-schema must be a JSON object (a JSON Schema), got {0}")]
    NotObject(&'static str),
    /// The schema is too large.
    #[error("--json-schema is {0} bytes; keel takes schemas of at most {MAX_SCHEMA_BYTES} bytes")]
    TooLarge(usize),
    /// `MAX_STRUCTURED_OUTPUT_RETRIES` is not a count keel takes.
    #[error("MAX_STRUCTURED_OUTPUT_RETRIES must be a whole number from 1 to {MAX_RETRIES_LIMIT} (invalid structured-output calls allowed in a turn), got {0:?}")]
    BadRetries(String),
    /// The object is not a valid JSON Schema (or names a draft or reference keel cannot use).
    #[error("--json-schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// What happened to the tool's calls in the current turn.
#[derive(Debug, Default)]
struct State {
    /// The first input that matched the schema.
    accepted: Option<Value>,
    /// Calls refused for not matching.
    invalid: u32,
    /// The violations of the last refused call.
    last_errors: Vec<String>,
}

/// The caller's schema, compiled, and the state of the current turn's calls.
#[derive(Clone)]
pub struct Structured {
    schema: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
    /// Invalid calls allowed in a turn.
    pub max_retries: u32,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Structured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Structured")
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Structured {
    /// Read and compile a schema (draft 2020-12 unless its `$schema` names another, such as
    /// draft 7). References outside the schema are not fetched: such a schema is refused.
    pub fn parse(text: &str, max_retries: u32) -> Result<Self, SchemaError> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge(text.len()));
        }
        let schema: Value =
            serde_json::from_str(text).map_err(|e| SchemaError::NotJson(e.to_string()))?;
        if !schema.is_object() {
            return Err(SchemaError::NotObject(kind_of(&schema)));
        }
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(Self {
            schema: Arc::new(schema),
            validator: Arc::new(validator),
            max_retries,
            state: Arc::default(),
        })
    }

    /// The schema of `--json-schema`, with `MAX_STRUCTURED_OUTPUT_RETRIES` from `env`.
    pub fn from_options(
        json_schema: Option<&str>,
        env: &crate::Env,
    ) -> Result<Option<Self>, SchemaError> {
        let Some(text) = json_schema else {
            return Ok(None);
        };
        let max = match env("MAX_STRUCTURED_OUTPUT_RETRIES") {
            None => DEFAULT_MAX_RETRIES,
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_RETRIES_LIMIT).contains(n))
                .ok_or(SchemaError::BadRetries(v))?,
        };
        Self::parse(text, max).map(Some)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forget the previous turn's calls (each turn needs its own answer).
    pub fn start_turn(&self) {
        *self.lock() = State::default();
    }

    /// The accepted answer of this turn, if the model gave one.
    pub fn accepted(&self) -> Option<Value> {
        self.lock().accepted.clone()
    }

    /// Invalid calls so far this turn, and the last one's violations.
    pub fn invalid(&self) -> (u32, Vec<String>) {
        let s = self.lock();
        (s.invalid, s.last_errors.clone())
    }

    /// The violations of `input` (empty: it matches).
    pub fn violations(&self, input: &Value) -> Vec<String> {
        self.validator
            .iter_errors(input)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    format!("at the top level: {e}")
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect()
    }

    /// The tool the model calls.
    pub fn tool(&self) -> Arc<dyn Tool> {
        Arc::new(StructuredOutputTool {
            inner: self.clone(),
        })
    }
}

struct StructuredOutputTool {
    inner: Structured,
}

impl Tool for StructuredOutputTool {
    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn kind(&self) -> ToolKind {
        ToolKind::External
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        (*self.inner.schema).clone()
    }

    /// It touches nothing: it only hands the answer back.
    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call<'a>(&'a self, input: Value, _cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let violations = self.inner.violations(&input);
            let mut s = self.inner.lock();
            if violations.is_empty() {
                if s.accepted.is_none() {
                    s.accepted = Some(input);
                }
                return ToolOutcome::Ok {
                    content: "Accepted: this input is the structured answer of the turn.".into(),
                    meta: None,
                };
            }
            s.invalid += 1;
            s.last_errors = violations.clone();
            let left = self.inner.max_retries.saturating_sub(s.invalid);
            let mut listed: Vec<String> = violations.iter().take(MAX_LISTED).cloned().collect();
            if violations.len() > MAX_LISTED {
                listed.push(format!("and {} more", violations.len() - MAX_LISTED));
            }
            ToolOutcome::Failed {
                message: format!(
                    "Refused: the input does not match the required schema ({}). Call {TOOL_NAME} again with a corrected input; {left} more refused call{} will end the turn with an error.",
                    listed.join("; "),
                    if left == 1 { "" } else { "s" }
                ),
                meta: None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_are_checked_and_violations_named() {
        assert!(matches!(
            Structured::parse("{nope", 5),
            Err(SchemaError::NotJson(_))
        ));
        assert!(matches!(
            Structured::parse("[1]", 5),
            Err(SchemaError::NotObject("an array"))
        ));
        assert!(matches!(
            Structured::parse(r#"{"type": 5}"#, 5),
            Err(SchemaError::Invalid(_))
        ));
        let s = Structured::parse(
            r#"{"type":"object","properties":{"n":{"type":"number"},"c":{"enum":["red","blue"]}},"required":["n","c"]}"#,
            5,
        )
        .unwrap();
        assert!(s.violations(&json!({"n": 1, "c": "red"})).is_empty());
        let v = s.violations(&json!({"n": "x", "c": "green"}));
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v.iter().any(|m| m.contains("/n")), "{v:?}");
        assert!(v.iter().any(|m| m.contains("/c")), "{v:?}");
        // Draft 7 by its $schema.
        let d7 = Structured::parse(
            r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["a"]}"#,
            5,
        )
        .unwrap();
        assert_eq!(d7.violations(&json!({})).len(), 1);
    }
}
