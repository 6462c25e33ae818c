//! Typed parsing of tool input, with errors that name the field and say what is expected.
//!
//! Each tool declares its fields once ([`Field`]); the same table produces the JSON schema and
//! checks the input before serde turns it into the tool's typed struct. Models sometimes send
//! `"100"` for a number or `"true"` for a boolean; those are accepted. Unknown fields are
//! ignored, and `null` counts as absent.

use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

/// The JSON type of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Str,
    /// An integer; schema type `integer`.
    Int,
    /// An integer given as a JSON `number` in the schema (e.g. milliseconds).
    Num,
    Bool,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Int | Kind::Num => "an integer",
            Kind::Bool => "a boolean",
        }
    }

    fn schema_type(self) -> &'static str {
        match self {
            Kind::Str => "string",
            Kind::Int => "integer",
            Kind::Num => "number",
            Kind::Bool => "boolean",
        }
    }
}

/// One input field of a tool.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    /// Lower-case phrase: what the field is ("the exact text to replace").
    pub what: &'static str,
    /// Allowed values of a string field (empty: any).
    pub one_of: &'static [&'static str],
}

impl Field {
    pub const fn req(name: &'static str, kind: Kind, what: &'static str) -> Self {
        Field {
            name,
            kind,
            required: true,
            what,
            one_of: &[],
        }
    }

    pub const fn opt(name: &'static str, kind: Kind, what: &'static str) -> Self {
        Field {
            name,
            kind,
            required: false,
            what,
            one_of: &[],
        }
    }

    pub const fn one_of(mut self, values: &'static [&'static str]) -> Self {
        self.one_of = values;
        self
    }
}

/// The JSON schema of an input described by `fields`.
pub(crate) fn schema(fields: &[Field]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for f in fields {
        let mut p = json!({ "type": f.kind.schema_type(), "description": sentence(f.what) });
        if !f.one_of.is_empty() {
            p["enum"] = json!(f.one_of);
        }
        props.insert(f.name.to_string(), p);
        if f.required {
            required.push(json!(f.name));
        }
    }
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

fn sentence(what: &str) -> String {
    let mut c = what.chars();
    match c.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), c.as_str()),
        None => String::new(),
    }
}

/// Check `input` against `fields` and deserialize it into `T`.
/// The error is the full message for the model: "Invalid input for Edit: ...".
pub(crate) fn parse<T: DeserializeOwned>(
    tool: &str,
    input: &Value,
    fields: &[Field],
) -> Result<T, String> {
    let fail = |msg: String| format!("Invalid input for {tool}: {msg}");
    let empty = Map::new();
    let obj = match input {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => {
            return Err(fail(format!(
                "expected a JSON object with the fields {}, got {}.",
                field_list(fields),
                type_name(other)
            )))
        }
    };
    let mut clean = Map::new();
    for f in fields {
        let v = match obj.get(f.name) {
            None | Some(Value::Null) => {
                if f.required {
                    return Err(fail(format!(
                        "`{}` is required ({}: {}).",
                        f.name,
                        f.kind.noun(),
                        f.what
                    )));
                }
                continue;
            }
            Some(v) => v,
        };
        let Some(v) = coerce(f.kind, v) else {
            return Err(fail(format!(
                "`{}` must be {} ({}), not {}.",
                f.name,
                f.kind.noun(),
                f.what,
                type_name(v)
            )));
        };
        if let (false, Value::String(s)) = (f.one_of.is_empty(), &v) {
            if !f.one_of.contains(&s.as_str()) {
                let allowed: Vec<String> = f.one_of.iter().map(|o| format!("\"{o}\"")).collect();
                return Err(fail(format!(
                    "`{}` must be one of {}, not \"{s}\".",
                    f.name,
                    allowed.join(", ")
                )));
            }
        }
        clean.insert(f.name.to_string(), v);
    }
    serde_json::from_value(Value::Object(clean)).map_err(|e| fail(format!("{e}.")))
}

fn field_list(fields: &[Field]) -> String {
    let names: Vec<String> = fields.iter().map(|f| format!("`{}`", f.name)).collect();
    names.join(", ")
}

fn type_name(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn coerce(kind: Kind, v: &Value) -> Option<Value> {
    match (kind, v) {
        (Kind::Str, Value::String(_)) => Some(v.clone()),
        (Kind::Bool, Value::Bool(_)) => Some(v.clone()),
        (Kind::Bool, Value::String(s)) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        (Kind::Int | Kind::Num, Value::Number(n)) => {
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
        (Kind::Int | Kind::Num, Value::String(s)) => s.trim().parse::<i64>().ok().map(|i| json!(i)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct T {
        path: String,
        #[serde(default)]
        n: Option<i64>,
        #[serde(rename = "-i", default)]
        i: Option<bool>,
    }

    const F: &[Field] = &[
        Field::req("path", Kind::Str, "the path to use"),
        Field::opt("n", Kind::Int, "how many"),
        Field::opt("-i", Kind::Bool, "ignore case"),
    ];

    #[test]
    fn parses_and_coerces() {
        let t: T = parse(
            "X",
            &json!({"path": "a", "n": "5", "-i": "true", "extra": 1}),
            F,
        )
        .unwrap();
        assert_eq!(
            t,
            T {
                path: "a".into(),
                n: Some(5),
                i: Some(true)
            }
        );
        let t: T = parse("X", &json!({"path": "a", "n": 3.0, "-i": null}), F).unwrap();
        assert_eq!(t.n, Some(3));
        assert_eq!(t.i, None);
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse::<T>("X", &json!({}), F).unwrap_err();
        assert_eq!(
            e,
            "Invalid input for X: `path` is required (a string: the path to use)."
        );
        let e = parse::<T>("X", &json!({"path": 1}), F).unwrap_err();
        assert_eq!(
            e,
            "Invalid input for X: `path` must be a string (the path to use), not a number."
        );
        let e = parse::<T>("X", &json!({"path": "a", "n": "many"}), F).unwrap_err();
        assert!(e.contains("`n` must be an integer"), "{e}");
        let e = parse::<T>("X", &json!("hi"), F).unwrap_err();
        assert!(e.contains("expected a JSON object"), "{e}");
    }

    #[test]
    fn enum_checked() {
        const G: &[Field] = &[Field::opt("mode", Kind::Str, "mode").one_of(&["a", "b"])];
        #[derive(Deserialize)]
        struct M {
            #[allow(dead_code)]
            mode: Option<String>,
        }
        let e = parse::<M>("X", &json!({"mode": "c"}), G).err().unwrap();
        assert_eq!(
            e,
            "Invalid input for X: `mode` must be one of \"a\", \"b\", not \"c\"."
        );
    }

    #[test]
    fn schema_shape() {
        let s = schema(F);
        assert_eq!(s["required"], json!(["path"]));
        assert_eq!(s["properties"]["n"]["type"], "integer");
        assert_eq!(s["properties"]["path"]["description"], "The path to use.");
    }
}
