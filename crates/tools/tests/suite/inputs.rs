//! Invalid input: every tool names the field and what it expects.

use keel_tools::{builtin_tools, ToolOutcome};
use serde_json::{json, Value};

use super::common::cx;

async fn failure(tool: &str, input: Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let tools = builtin_tools();
    let t = tools.iter().find(|t| t.name() == tool).unwrap();
    match t.call(input, cx(dir.path())).await {
        ToolOutcome::Failed { message, .. } => message,
        other => panic!("{tool}: expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn missing_required_fields_are_named() {
    let cases = [
        ("Bash", json!({}), "Invalid input for Bash: `command` is required (a string:"),
        ("Read", json!({"offset": 3}), "Invalid input for Read: `file_path` is required (a string:"),
        ("Write", json!({"file_path": "x"}), "Invalid input for Write: `content` is required (a string:"),
        (
            "Edit",
            json!({"file_path": "x", "new_string": "y"}),
            "Invalid input for Edit: `old_string` is required (a string: the exact text to replace).",
        ),
        ("Glob", json!({"path": "."}), "Invalid input for Glob: `pattern` is required (a string:"),
        ("Grep", json!({"glob": "*.rs"}), "Invalid input for Grep: `pattern` is required (a string:"),
    ];
    for (tool, input, want) in cases {
        let msg = failure(tool, input).await;
        assert!(msg.starts_with(want), "{tool}: {msg}");
    }
}

#[tokio::test]
async fn wrong_types_are_named() {
    let cases = [
        (
            "Bash",
            json!({"command": ["ls"]}),
            "`command` must be a string",
        ),
        (
            "Bash",
            json!({"command": "ls", "timeout": "soon"}),
            "`timeout` must be an integer",
        ),
        (
            "Read",
            json!({"file_path": "x", "limit": true}),
            "`limit` must be an integer",
        ),
        (
            "Write",
            json!({"file_path": "x", "content": 5}),
            "`content` must be a string",
        ),
        (
            "Edit",
            json!({"file_path": "x", "old_string": "a", "new_string": "b", "replace_all": "yes"}),
            "`replace_all` must be a boolean",
        ),
        ("Glob", json!({"pattern": 1}), "`pattern` must be a string"),
        (
            "Grep",
            json!({"pattern": "x", "output_mode": "lines"}),
            "`output_mode` must be one of \"content\", \"files_with_matches\", \"count\"",
        ),
        (
            "Grep",
            json!({"pattern": "x", "-A": "two"}),
            "`-A` must be an integer",
        ),
        ("Read", json!("just a string"), "expected a JSON object"),
    ];
    for (tool, input, want) in cases {
        let msg = failure(tool, input).await;
        assert!(msg.contains(want), "{tool}: {msg}");
    }
}

#[test]
fn schemas_describe_every_tool() {
    let tools = builtin_tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "Bash",
            "Read",
            "Write",
            "Edit",
            "Glob",
            "Grep",
            "NotebookEdit",
            "TodoWrite"
        ]
    );
    for t in &tools {
        let s = t.input_schema();
        assert_eq!(s["type"], "object", "{}", t.name());
        assert!(
            !s["required"].as_array().unwrap().is_empty(),
            "{}",
            t.name()
        );
        assert!(!t.description().is_empty());
    }
    let grep = tools
        .iter()
        .find(|t| t.name() == "Grep")
        .unwrap()
        .input_schema();
    assert!(grep["properties"]["-i"].is_object());
    assert_eq!(
        grep["properties"]["output_mode"]["enum"],
        json!(["content", "files_with_matches", "count"])
    );
}
