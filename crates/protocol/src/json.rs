//! Small helpers for JSON values read from outside.

use serde_json::Value;

/// How a JSON value is named in error messages: "null", "a boolean", "a number", "a string",
/// "an array", "an object".
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
