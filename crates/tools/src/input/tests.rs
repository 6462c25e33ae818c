//! Unit tests of the input schema and the lenient parsing.

use super::*;
use pretty_assertions::assert_eq;
use serde::Deserialize;

/// Not part of the schema.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[schemars(deny_unknown_fields)]
struct T {
    /// The path to use, which may be long enough that its description wraps onto a second
    /// line in the source.
    path: String,
    /// How many.
    n: Option<i64>,
    /// Ignore case.
    #[serde(rename = "-i")]
    i: Option<bool>,
    /// How long, in milliseconds.
    #[schemars(extend("type" = "number"))]
    ms: Option<i64>,
    /// A ratio.
    ratio: Option<f64>,
    /// How to do it.
    mode: Option<Mode>,
}

/// The mode's own description, replaced by the field's.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    VerySlow,
}

#[test]
fn compact_schema() {
    assert_eq!(
        input_schema::<T>(),
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The path to use, which may be long enough that its \
                        description wraps onto a second line in the source."
                },
                "n": {"type": "integer", "description": "How many."},
                "-i": {"type": "boolean", "description": "Ignore case."},
                "ms": {"type": "number", "description": "How long, in milliseconds."},
                "ratio": {"type": "number", "description": "A ratio."},
                "mode": {
                    "type": "string",
                    "description": "How to do it.",
                    "enum": ["fast", "very_slow"]
                }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    );
    // Key order is what a model reads, so it is kept stable too.
    let text = input_schema::<T>().to_string();
    assert!(
        text.starts_with(
            r#"{"type":"object","properties":{"path":{"type":"string","description":"#
        ),
        "{text}"
    );
    assert!(
        text.ends_with(r#""required":["path"],"additionalProperties":false}"#),
        "{text}"
    );
}

#[test]
fn no_required_fields_still_says_so() {
    #[derive(Deserialize, JsonSchema)]
    struct Opt {
        /// Maybe.
        #[allow(dead_code)]
        x: Option<String>,
    }
    assert_eq!(
        input_schema::<Opt>(),
        json!({
            "type": "object",
            "properties": {"x": {"type": "string", "description": "Maybe."}},
            "required": []
        })
    );
}

#[test]
fn parses_and_coerces() {
    let t: T = parse_input(
        "X",
        &json!({"path": "a", "n": "5", "-i": "true", "ms": 2.7, "ratio": "0.5",
                "mode": "very_slow", "extra": 1}),
    )
    .unwrap();
    assert_eq!(
        t,
        T {
            path: "a".into(),
            n: Some(5),
            i: Some(true),
            ms: Some(2),
            ratio: Some(0.5),
            mode: Some(Mode::VerySlow),
        }
    );
    let t: T = parse_input("X", &json!({"path": "a", "n": 3.0, "-i": null})).unwrap();
    assert_eq!((t.n, t.i), (Some(3), None));
    let t: T = parse_input("X", &json!({"path": "a", "n": u64::MAX})).unwrap();
    assert_eq!(t.n, Some(i64::MAX));
}

#[test]
fn errors_name_the_tool_the_field_and_what_it_expects() {
    let e = |input: Value| parse_input::<T>("X", &input).unwrap_err().to_string();
    assert_eq!(
        e(json!({})),
        "Invalid input for X: `path` is required (a string: the path to use, which may be \
         long enough that its description wraps onto a second line in the source)."
    );
    assert_eq!(
        e(json!({"path": "a", "n": "many"})),
        "Invalid input for X: `n` must be an integer (how many), not a string."
    );
    assert_eq!(
        e(json!({"path": "a", "ms": true})),
        "Invalid input for X: `ms` must be an integer (how long, in milliseconds), not a \
         boolean."
    );
    assert_eq!(
        e(json!({"path": "a", "ratio": "half"})),
        "Invalid input for X: `ratio` must be a number (a ratio), not a string."
    );
    assert_eq!(
        e(json!({"path": "a", "-i": "yes"})),
        "Invalid input for X: `-i` must be a boolean (ignore case), not a string."
    );
    assert_eq!(
        e(json!({"path": "a", "mode": "slow"})),
        "Invalid input for X: `mode` must be one of \"fast\", \"very_slow\", not \"slow\"."
    );
    assert_eq!(
        e(json!("hi")),
        "Invalid input for X: expected a JSON object with the fields `path`, `n`, `-i`, \
         `ms`, `ratio`, `mode`, got a string."
    );
    // null is an empty input, so the first required field is missing.
    assert!(e(Value::Null).contains("`path` is required"));
}

#[test]
fn typed_problems() {
    let err = parse_input::<T>("X", &json!({"path": 1})).unwrap_err();
    assert_eq!(
        err,
        InputError {
            tool: "X".into(),
            problem: InputProblem::WrongType {
                field: "path".into(),
                expected: "a string",
                what: "the path to use, which may be long enough that its description \
                       wraps onto a second line in the source"
                    .into(),
                got: "a number",
            },
        }
    );
    assert_eq!(
        InputError::rule("Read", "`limit` must be at least 1, not 0.").to_string(),
        "Invalid input for Read: `limit` must be at least 1, not 0."
    );
}

#[test]
fn fields_without_descriptions() {
    #[derive(Debug, Deserialize, JsonSchema)]
    struct Bare {
        #[allow(dead_code)]
        name: String,
        #[allow(dead_code)]
        tags: Option<Vec<String>>,
    }
    let e = |input: Value| parse_input::<Bare>("Y", &input).unwrap_err().to_string();
    assert_eq!(
        e(json!({})),
        "Invalid input for Y: `name` is required (a string)."
    );
    assert_eq!(
        e(json!({"name": "a", "tags": "x"})),
        "Invalid input for Y: `tags` must be an array, not a string."
    );
    assert_eq!(
        e(json!({"name": "a", "tags": [1]})),
        "Invalid input for Y: invalid type: integer `1`, expected a string."
    );
}

#[test]
fn prose() {
    assert_eq!(unfold("a\nb\n\nc"), "a b\n\nc");
    assert_eq!(phrase("The exact text."), "the exact text");
    assert_eq!(phrase("URL to fetch."), "URL to fetch");
    assert_eq!(phrase(""), "");
}
