//! What the model is offered: each built-in tool's name, kind, description, input schema and
//! whether a call is read-only, compared with a recorded copy. Any change here changes what every
//! model sees (and what a prompt cache holds), so it must be deliberate: re-record with
//! `KEEL_RECORD_OFFERED=1 cargo test -p keel-tools --test all -- suite::offered` and review the diff.

use keel_tools::builtin_tools;
use serde_json::{json, Value};

const RECORDED: &str = include_str!("../fixtures/offered_tools.json");

fn offered() -> Value {
    let tools: Vec<Value> = builtin_tools()
        .iter()
        .map(|t| {
            json!({
                "name": t.name(),
                "kind": format!("{:?}", t.kind()),
                "description": t.description(),
                "input_schema": t.input_schema(),
                "read_only": t.is_read_only(&json!({})),
            })
        })
        .collect();
    Value::Array(tools)
}

#[test]
fn builtin_tools_are_offered_as_recorded() {
    let now = offered();
    if std::env::var_os("KEEL_RECORD_OFFERED").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/offered_tools.json");
        let text = serde_json::to_string_pretty(&now).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
        return;
    }
    let recorded: Value = serde_json::from_str(RECORDED).unwrap();
    let (now, recorded) = (now.as_array().unwrap(), recorded.as_array().unwrap());
    assert_eq!(
        now.len(),
        recorded.len(),
        "the number of built-in tools changed"
    );
    for (n, r) in now.iter().zip(recorded) {
        assert_eq!(n, r, "tool {} is offered differently", r["name"]);
    }
}
