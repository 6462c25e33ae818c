//! Scenario files: the documented example parses; mistakes are reported by file, step and field.

use keel_mock::{OnExhausted, RawData, RawEnd, Scenario, ScenarioError, StallPhase, StepKind};
use pretty_assertions::assert_eq;

const EXAMPLE: &str = r#"{
  "model": null,
  "on_exhausted": "error",
  "steps": [
    {"kind": "text", "text": "Hello!", "thinking": "optional thinking block emitted first"},
    {"kind": "tool_use", "text": "optional text block before the calls",
     "calls": [{"name": "Bash", "input": {"command": "echo hi"}, "id": "optional explicit id"}]},
    {"kind": "error", "status": 529, "error_type": "overloaded_error", "message": "Overloaded", "headers": {"retry-after": "2"}},
    {"kind": "sse_error", "error_type": "overloaded_error", "message": "Overloaded", "after_events": 1},
    {"kind": "drop", "after_events": 4, "reply": {"kind":"text","text":"this text is being streamed when the connection is cut"}},
    {"kind": "stall", "phase": "before_headers", "ms": 20000, "then": {"kind":"text","text":"late"}},
    {"kind": "stall", "phase": "after_message_start", "ms": 3000},
    {"kind": "raw", "status": 200, "headers": {"x-mock": "raw"},
     "events": [{"event": "content_block_start", "data": {"type": "content_block_start", "index": 18446744073709551615}},
                {"event": "content_block_start", "data_text": "{\"type\":\"content_block_start\",\"index\":1e10}"}],
     "end": "hang"},
    {"kind": "text", "text": "x", "times": 2, "delay_ms": 5, "stop_reason": "max_tokens",
     "usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 4},
     "match": {"system_contains": "a", "last_user_contains": "b", "has_tool": "Bash"}}
  ]
}"#;

#[test]
fn the_documented_example_parses() {
    let s = Scenario::from_json(EXAMPLE).unwrap();
    assert_eq!(s.model, None);
    assert_eq!(s.on_exhausted, OnExhausted::Error);
    assert_eq!(s.steps.len(), 9);
    assert!(matches!(
        s.steps[6].kind,
        StepKind::Stall {
            phase: StallPhase::AfterMessageStart,
            ms: 3000,
            then: None,
            after_events: keel_mock::DEFAULT_STALL_AFTER_EVENTS
        }
    ));
    assert!(matches!(
        &s.steps[7].kind,
        StepKind::Raw { status: 200, end: RawEnd::Hang, events, .. }
            if events[0].data == RawData::Json(serde_json::json!(
                {"type": "content_block_start", "index": u64::MAX}))
    ));
    assert_eq!(s.steps[8].times, 2);
    assert_eq!(
        s.steps[8].when.as_ref().unwrap().has_tool.as_deref(),
        Some("Bash")
    );
    // And it survives a trip through its own JSON form.
    assert_eq!(Scenario::from_value(&s.to_value()).unwrap(), s);
}

#[test]
fn file_errors_name_the_file_step_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(
        &path,
        r#"{"steps":[{"kind":"text","text":"a"},{"kind":"text","text":"b"},{"kind":"text","text":"c"},
           {"kind":"error","status":700}]}"#,
    )
    .unwrap();
    let e = Scenario::from_file(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: step 3 (error): field `status` must be an HTTP status code between 400 and 599, found 700",
            path.display()
        )
    );
    assert!(
        matches!(e, ScenarioError::Invalid { step: Some(3), ref field, .. } if field == "status")
    );

    let missing = dir.path().join("missing.json");
    let e = Scenario::from_file(&missing).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: cannot read", missing.display())),
        "{e}"
    );

    std::fs::write(&path, "{ not json").unwrap();
    let e = Scenario::from_file(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}: the scenario is not valid JSON",
            path.display()
        )),
        "{e}"
    );
}

#[test]
fn unknown_and_missing_fields() {
    let e = |t: &str| Scenario::from_json(t).unwrap_err().to_string();
    assert!(e(r#"{"steps":[{"kind":"text","text":"a","tims":2}]}"#)
        .starts_with("step 0 (text): field `tims` is not known here"));
    assert_eq!(
        e(r#"{"steps":[{"kind":"error"}]}"#),
        "step 0 (error): field `status` is required"
    );
    assert_eq!(
        e(r#"{"steps":[{"kind":"stall","ms":5}]}"#),
        "step 0 (stall): field `phase` is required (\"before_headers\" or \"after_message_start\")"
    );
    assert_eq!(
        e(r#"{"steps":[{"kind":"stall","phase":"before_headers"}]}"#),
        "step 0 (stall): field `ms` is required"
    );
    assert_eq!(
        e(r#"{"steps":[{"text":"a"}]}"#),
        "step 0: field `kind` is required (one of text, tool_use, error, sse_error, drop, stall, raw)"
    );
    assert_eq!(
        e(r#"{"steps":[{"kind":"error","status":500,"headers":{"bad header":"x"}}]}"#),
        "step 0 (error): field `headers.bad header` is not a valid HTTP header name"
    );
}

#[tokio::test]
async fn an_invalid_built_scenario_is_refused_at_start() {
    let s = Scenario::new(vec![keel_mock::Step::error(302)]);
    let e = keel_mock::MockServer::start(s)
        .await
        .err()
        .expect("refused");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        e.to_string().starts_with("step 0 (error): field `status`"),
        "{e}"
    );
}
