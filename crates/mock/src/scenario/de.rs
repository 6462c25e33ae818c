//! A deserializer over an already parsed JSON value whose errors are ours.
//!
//! serde's stock messages ("invalid type: string \"x\", expected u16") speak in Rust types and
//! lose the name of an unknown or missing field to the path. Going through this deserializer
//! gives each failure as a [`Problem`] in the scenario's own terms, while
//! `serde_path_to_error` (wrapped around it by the caller) supplies where it happened.
//! Numbers reach the visitor as the `u64`, `i64` or `f64` JSON parsing produced, so a `Value`
//! read through here keeps `18446744073709551615` an integer.

use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, Expected, IntoDeserializer, Unexpected, Visitor};
use serde_json::Value;

/// What is wrong with one value.
#[derive(Debug)]
pub(super) enum Problem {
    /// A key the type does not have; `allowed` lists the ones it does.
    Unknown {
        /// The key as written.
        field: String,
        /// The keys the object may carry.
        allowed: &'static [&'static str],
    },
    /// A required key is absent.
    Missing(&'static str),
    /// The value itself is wrong; the text says how ("must be ..., found ...").
    Wrong(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Unknown { field, allowed } => write!(
                f,
                "field `{field}` is not known here (allowed: {})",
                allowed.join(", ")
            ),
            Problem::Missing(field) => write!(f, "field `{field}` is required"),
            Problem::Wrong(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for Problem {}

impl de::Error for Problem {
    fn custom<T: fmt::Display>(msg: T) -> Problem {
        Problem::Wrong(msg.to_string())
    }

    fn invalid_type(found: Unexpected<'_>, want: &dyn Expected) -> Problem {
        Problem::Wrong(format!(
            "must be {}, found {}",
            wanted(want),
            found_text(found)
        ))
    }

    fn invalid_value(found: Unexpected<'_>, want: &dyn Expected) -> Problem {
        Problem::invalid_type(found, want)
    }

    fn invalid_length(len: usize, want: &dyn Expected) -> Problem {
        Problem::Wrong(format!("must be {}, found {len} items", wanted(want)))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Problem {
        Problem::Wrong(format!("{} (found \"{variant}\")", one_of(expected)))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Problem {
        Problem::Unknown {
            field: field.to_string(),
            allowed: expected,
        }
    }

    fn missing_field(field: &'static str) -> Problem {
        Problem::Missing(field)
    }
}

/// `must be "a" or "b"` / `must be one of "a", "b", "c"`.
pub(super) fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    match quoted.as_slice() {
        [one] => format!("must be {one}"),
        [a, b] => format!("must be {a} or {b}"),
        _ => format!("must be one of {}", quoted.join(", ")),
    }
}

/// serde describes what it wanted in Rust terms; say it in JSON terms.
fn wanted(want: &dyn Expected) -> String {
    let text = want.to_string();
    match text.as_str() {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative integer".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer".into(),
        "f32" | "f64" => "a number".into(),
        "a sequence" => "an array".into(),
        "a map" => "a JSON object".into(),
        "a boolean" | "a string" => text,
        _ if text.starts_with("struct ") => "a JSON object".into(),
        _ => text,
    }
}

fn found_text(found: Unexpected<'_>) -> String {
    match found {
        Unexpected::Unsigned(n) => n.to_string(),
        Unexpected::Signed(n) => n.to_string(),
        // As JSON writes it (`1e300`), not as Rust's Display spells it out.
        Unexpected::Float(n) => {
            serde_json::Number::from_f64(n).map_or(n.to_string(), |n| n.to_string())
        }
        Unexpected::Bool(_) => "a boolean".into(),
        Unexpected::Str(_) => "a string".into(),
        Unexpected::Unit => "null".into(),
        Unexpected::Map => "an object".into(),
        Unexpected::Seq => "an array".into(),
        other => other.to_string(),
    }
}

/// How a JSON value is named in messages: "a string", "an array", ...
pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Deserializes from a borrowed `Value`, failing with [`Problem`]s.
#[derive(Clone, Copy)]
pub(super) struct De<'a>(pub &'a Value);

impl De<'_> {
    fn unexpected(&self) -> Unexpected<'_> {
        match self.0 {
            Value::Null => Unexpected::Unit,
            Value::Bool(b) => Unexpected::Bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => Unexpected::Unsigned(u),
                (None, Some(i)) => Unexpected::Signed(i),
                (None, None) => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Unexpected::Str(s),
            Value::Array(_) => Unexpected::Seq,
            Value::Object(_) => Unexpected::Map,
        }
    }
}

impl<'de> IntoDeserializer<'de, Problem> for De<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for De<'_> {
    type Error = Problem;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_str(s),
            Value::Array(items) => {
                let mut seq = SeqDeserializer::new(items.iter().map(De));
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Object(map) => {
                let mut access = MapDeserializer::new(map.iter().map(|(k, v)| (k.as_str(), De(v))));
                let out = visitor.visit_map(&mut access)?;
                access.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Problem> {
        visitor.visit_newtype_struct(self)
    }

    // Only objects make structs: serde would also build one from an array, by position.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Problem> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            _ => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
        }
    }

    // The scenario's enums are plain names: a string selects a unit variant.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Problem> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            _ => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Probe {
        n: u16,
        v: Option<Value>,
    }

    fn probe(v: Value) -> Result<Probe, String> {
        Probe::deserialize(De(&v)).map_err(|e| e.to_string())
    }

    #[test]
    fn problems_are_worded_for_json() {
        assert_eq!(
            probe(json!({"n": "x"})).unwrap_err(),
            "must be a non-negative integer, found a string"
        );
        assert_eq!(
            probe(json!({"n": 70000})).unwrap_err(),
            "must be a non-negative integer, found 70000"
        );
        assert_eq!(probe(json!({})).unwrap_err(), "field `n` is required");
        assert_eq!(
            probe(json!({"n": 1, "w": 2})).unwrap_err(),
            "field `w` is not known here (allowed: n, v)"
        );
        assert_eq!(
            probe(json!([1, null])).unwrap_err(),
            "must be a JSON object, found an array"
        );
    }

    #[test]
    fn big_integers_stay_integers() {
        let p = probe(json!({"n": 1, "v": {"i": u64::MAX, "j": i64::MIN}})).unwrap();
        assert_eq!(
            serde_json::to_string(&p.v).unwrap(),
            r#"{"i":18446744073709551615,"j":-9223372036854775808}"#
        );
    }
}
