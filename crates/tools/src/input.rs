//! Tool input, declared once: a tool's input struct derives `Deserialize` and `JsonSchema`, and
//! both the schema the model receives and the checking of what the model sends come from it.
//!
//! Field descriptions are the fields' doc comments. Checking is lenient where models slip but
//! mean well: `"100"` for an integer and `"true"` for a boolean are accepted, `null` counts as
//! absent, and unknown fields are ignored. What is refused gets a message that names the tool,
//! the field and what the field expects, so the model can fix its next call.

use std::fmt;

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

/// Why a tool call's input was refused; its text is the whole message the model reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Invalid input for {tool}: {problem}")]
pub struct InputError {
    /// The tool the input was for.
    pub tool: String,
    /// What is wrong with the input.
    pub problem: InputProblem,
}

impl InputError {
    /// An input that breaks a rule of the tool its schema cannot say; `sentence` ends with `.`.
    pub fn rule(tool: impl Into<String>, sentence: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            problem: InputProblem::Rule(sentence.into()),
        }
    }
}

/// What is wrong with a tool call's input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputProblem {
    /// The input is not a JSON object.
    #[error(
        "expected a JSON object with the fields {}, got {got}.",
        Quoted(fields)
    )]
    NotAnObject {
        /// The fields the tool takes.
        fields: Vec<String>,
        /// What came instead ("a string").
        got: &'static str,
    },
    /// A required field is absent or null.
    #[error("`{field}` is required ({expected}{}).", Colon(what))]
    Missing {
        /// The field's name.
        field: String,
        /// The kind of value it takes ("a string").
        expected: &'static str,
        /// What the field is, from its description (may be empty).
        what: String,
    },
    /// A field holds a value of the wrong type.
    #[error("`{field}` must be {expected}{}, not {got}.", Paren(what))]
    WrongType {
        /// The field's name.
        field: String,
        /// The kind of value it takes.
        expected: &'static str,
        /// What the field is, from its description (may be empty).
        what: String,
        /// What came instead.
        got: &'static str,
    },
    /// A field's value is not one of the values it allows.
    #[error("`{field}` must be one of {}, not {got}.", allowed.join(", "))]
    NotAllowed {
        /// The field's name.
        field: String,
        /// The allowed values, as JSON.
        allowed: Vec<String>,
        /// The value that came, as JSON.
        got: String,
    },
    /// A rule of the tool beyond its schema (an empty pattern, a negative offset).
    #[error("{0}")]
    Rule(String),
    /// What the deserializer refused after the checks passed (for field types they do not know).
    #[error("{0}.")]
    Malformed(String),
}

/// Field names in backticks, comma separated.
struct Quoted<'a>(&'a [String]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{name}`")?;
        }
        Ok(())
    }
}

/// `: what`, or nothing when there is no description.
struct Colon<'a>(&'a str);

impl fmt::Display for Colon<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "" => Ok(()),
            what => write!(f, ": {what}"),
        }
    }
}

/// ` (what)`, or nothing when there is no description.
struct Paren<'a>(&'a str);

impl fmt::Display for Paren<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "" => Ok(()),
            what => write!(f, " ({what})"),
        }
    }
}

/// The JSON schema of a tool input type, in the compact form models are given:
/// `{"type":"object","properties":{...},"required":[...]}` with a `type`, a `description` and
/// (for closed sets) an `enum` per field. No meta-schema, no title, no `$defs` (subschemas are
/// inlined; recursive types are not supported), no `format`, no `null` for optional fields. The
/// type's own doc comment is left out: what the tool does is its description's job.
pub fn input_schema<T: JsonSchema + 'static>() -> Value {
    let raw = raw_schema::<T>();
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    let props: Map<String, Value> = properties(&raw)
        .map(|(name, p)| (name.clone(), compact_property(p)))
        .collect();
    out.insert("properties".into(), Value::Object(props));
    // Always present, even when empty, as keel's schemas always were.
    out.insert(
        "required".into(),
        raw.get("required").cloned().unwrap_or_else(|| json!([])),
    );
    // Whatever else the type asks for (`additionalProperties`) is kept; naming and
    // meta-data are not, since a tool has its own name and description.
    const DROPPED: [&str; 3] = ["$schema", "title", "description"];
    for (k, v) in raw.iter() {
        if !out.contains_key(k) && !DROPPED.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// Check `input` against the schema of `T` and deserialize it, leniently (see the module doc).
pub fn parse_input<T: DeserializeOwned + JsonSchema + 'static>(
    tool: &str,
    input: &Value,
) -> Result<T, InputError> {
    let fail = |problem| InputError {
        tool: tool.to_string(),
        problem,
    };
    let fields = fields(&raw_schema::<T>());
    let empty = Map::new();
    let obj = match input {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => {
            return Err(fail(InputProblem::NotAnObject {
                fields: fields.iter().map(|f| f.name.clone()).collect(),
                got: type_name(other),
            }))
        }
    };
    let mut clean = Map::new();
    for f in &fields {
        let v = match obj.get(&f.name) {
            None | Some(Value::Null) if f.required => {
                return Err(fail(InputProblem::Missing {
                    field: f.name.clone(),
                    expected: f.kind.noun(),
                    what: f.what.clone(),
                }))
            }
            None | Some(Value::Null) => continue,
            Some(v) => v,
        };
        let Some(v) = f.kind.coerce(v) else {
            return Err(fail(InputProblem::WrongType {
                field: f.name.clone(),
                expected: f.kind.noun(),
                what: f.what.clone(),
                got: type_name(v),
            }));
        };
        if !f.allowed.is_empty() && !f.allowed.contains(&v) {
            return Err(fail(InputProblem::NotAllowed {
                field: f.name.clone(),
                allowed: f.allowed.iter().map(Value::to_string).collect(),
                got: v.to_string(),
            }));
        }
        clean.insert(f.name.clone(), v);
    }
    serde_json::from_value(Value::Object(clean))
        .map_err(|e| fail(InputProblem::Malformed(e.to_string())))
}

/// The schema as schemars derives it, subschemas inlined, as a JSON object.
/// The generated schema of `T`. Generating one is costly (it walks the type and hashes every
/// name), and tools ask for theirs on every model request and every call, so each type's is
/// made once per process.
fn raw_schema<T: JsonSchema + 'static>() -> std::sync::Arc<Map<String, Value>> {
    use std::any::TypeId;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Schemas = Mutex<HashMap<TypeId, Arc<Map<String, Value>>>>;
    static CACHE: OnceLock<Schemas> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(s) = cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&TypeId::of::<T>())
    {
        return s.clone();
    }
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let made = Arc::new(
        match Value::from(settings.into_generator().into_root_schema_for::<T>()) {
            Value::Object(m) => m,
            _ => Map::new(),
        },
    );
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(TypeId::of::<T>(), made.clone());
    made
}

fn properties(raw: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    raw.get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// One property in the compact form: `type`, `description`, `enum` first, without `format` or
/// `title`, and without the `null` that marks an optional field.
fn compact_property(p: &Value) -> Value {
    let Value::Object(p) = p else {
        return p.clone();
    };
    let mut out = Map::new();
    if let Some(t) = p.get("type") {
        out.insert("type".into(), non_null_type(t));
    }
    if let Some(d) = p.get("description").and_then(Value::as_str) {
        out.insert("description".into(), json!(unfold(d)));
    }
    if let Some(Value::Array(values)) = p.get("enum") {
        let values: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
        out.insert("enum".into(), Value::Array(values));
    }
    for (k, v) in p {
        if out.contains_key(k) || k == "format" || k == "title" {
            continue;
        }
        let v = match (k.as_str(), v) {
            ("items", _) => compact_property(v),
            ("properties", Value::Object(m)) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), compact_property(v)))
                    .collect(),
            ),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// `["integer", "null"]` becomes `"integer"`.
fn non_null_type(t: &Value) -> Value {
    match t {
        Value::Array(types) => {
            let rest: Vec<&Value> = types
                .iter()
                .filter(|v| v.as_str() != Some("null"))
                .collect();
            match rest.as_slice() {
                [one] => (*one).clone(),
                _ => Value::Array(rest.into_iter().cloned().collect()),
            }
        }
        other => other.clone(),
    }
}

/// A doc comment as prose: lines wrapped in the source are joined; paragraphs stay apart.
fn unfold(doc: &str) -> String {
    let paragraphs: Vec<String> = doc
        .split("\n\n")
        .map(|p| {
            let lines: Vec<&str> = p.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            lines.join(" ")
        })
        .filter(|p| !p.is_empty())
        .collect();
    paragraphs.join("\n\n")
}

/// One field of an input, as the checks see it.
struct Field {
    name: String,
    kind: Kind,
    required: bool,
    /// The description as a lower-case phrase, for messages ("the exact text to replace").
    what: String,
    /// The allowed values, if the field has a closed set.
    allowed: Vec<Value>,
}

fn fields(raw: &Map<String, Value>) -> Vec<Field> {
    let required: Vec<&str> = raw
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties(raw)
        .map(|(name, raw)| {
            let p = compact_property(raw);
            Field {
                name: name.clone(),
                kind: Kind::of(raw),
                required: required.contains(&name.as_str()),
                what: phrase(p.get("description").and_then(Value::as_str).unwrap_or("")),
                allowed: p
                    .get("enum")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// "The exact text to replace." as "the exact text to replace" (an initialism keeps its case).
fn phrase(description: &str) -> String {
    let d = description.trim().trim_end_matches('.');
    let mut chars = d.chars();
    match (chars.next(), chars.next()) {
        (Some(first), second) if !second.is_some_and(char::is_uppercase) => {
            format!("{}{}", first.to_lowercase(), &d[first.len_utf8()..])
        }
        _ => d.to_string(),
    }
}

/// The JSON type a field takes, as far as the lenient checks care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Str,
    /// An integer (its schema type may be `number`, e.g. milliseconds, with an integer format).
    Int,
    /// Any number.
    Float,
    Bool,
    Array,
    Object,
    /// No single type: anything is passed on to the deserializer.
    Any,
}

impl Kind {
    /// The kind of a property as schemars derived it (its `format` tells integers apart).
    fn of(raw: &Value) -> Kind {
        let format = raw.get("format").and_then(Value::as_str).unwrap_or("");
        let t = raw.get("type").map(non_null_type);
        match t.as_ref().and_then(Value::as_str) {
            Some("string") => Kind::Str,
            Some("integer") => Kind::Int,
            Some("number") if format.starts_with("int") || format.starts_with("uint") => Kind::Int,
            Some("number") => Kind::Float,
            Some("boolean") => Kind::Bool,
            Some("array") => Kind::Array,
            Some("object") => Kind::Object,
            _ => Kind::Any,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Int => "an integer",
            Kind::Float => "a number",
            Kind::Bool => "a boolean",
            Kind::Array => "an array",
            Kind::Object => "an object",
            Kind::Any => "a value",
        }
    }

    /// The value in the type this kind takes, or `None` if it cannot be read as one.
    fn coerce(self, v: &Value) -> Option<Value> {
        match (self, v) {
            (Kind::Str, Value::String(_))
            | (Kind::Bool, Value::Bool(_))
            | (Kind::Array, Value::Array(_))
            | (Kind::Object, Value::Object(_))
            | (Kind::Any, _) => Some(v.clone()),
            (Kind::Bool, Value::String(s)) => match s.trim() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            (Kind::Int, Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    Some(json!(i))
                } else if n.is_u64() {
                    Some(json!(i64::MAX))
                } else {
                    n.as_f64()
                        .filter(|f| f.is_finite())
                        .map(|f| json!(f.clamp(i64::MIN as f64, i64::MAX as f64) as i64))
                }
            }
            (Kind::Int, Value::String(s)) => s.trim().parse::<i64>().ok().map(|i| json!(i)),
            (Kind::Float, Value::Number(_)) => Some(v.clone()),
            (Kind::Float, Value::String(s)) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| json!(f)),
            _ => None,
        }
    }
}

use keel_protocol::json::type_name;

/// Assert that a tool's schema is exactly `expected`, key order included (it is what the model
/// reads), with a line diff when it is not.
#[cfg(test)]
pub(crate) fn assert_schema(actual: Value, expected: Value) {
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    pretty_assertions::assert_eq!(pretty(&actual), pretty(&expected));
}

#[cfg(test)]
mod tests;
