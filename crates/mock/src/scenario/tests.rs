//! What reading a scenario file reports: each mistake by step, kind and field.

use super::{RawData, Scenario, StepKind};
use pretty_assertions::assert_eq;

fn err(text: &str) -> String {
    Scenario::from_json(text).unwrap_err().to_string()
}

#[test]
fn names_step_and_field() {
    let cases = [
        (
            r#"{"steps":[{"kind":"text","text":"a"},{"kind":"text","text":"b"},{"kind":"text","text":"c"},{"kind":"error","status":200}]}"#,
            "step 3 (error): field `status` must be an HTTP status code between 400 and 599, found 200",
        ),
        (
            r#"{"steps":[{"kind":"error","status":"529"}]}"#,
            "step 0 (error): field `status` must be a JSON number, found a string",
        ),
        (
            r#"{"steps":[{"kind":"text","txt":"a"}]}"#,
            "step 0 (text): field `txt` is not known here (allowed: kind, times, usage, stop_reason, delay_ms, match, text, thinking)",
        ),
        (
            r#"{"steps":[{"kind":"tool_use"}]}"#,
            "step 0 (tool_use): field `calls` is required",
        ),
        (
            r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash","input":[1]}]}]}"#,
            "step 0 (tool_use): field `calls.0.input` must be a JSON object, found an array",
        ),
        (
            r#"{"steps":[{"kind":"tool_use","calls":[{"name":"Bash"},{"nme":"Bash"}]}]}"#,
            "step 0 (tool_use): field `calls.1.nme` is not known here (allowed: name, input, id)",
        ),
        (
            r#"{"steps":[{"kind":"tool_use","calls":[{"name":7}]}]}"#,
            "step 0 (tool_use): field `calls.0.name` must be a string, found 7",
        ),
        (
            r#"{"steps":[{"kind":"stall","phase":"later","ms":1}]}"#,
            "step 0 (stall): field `phase` must be \"before_headers\" or \"after_message_start\" (found \"later\")",
        ),
        (
            r#"{"steps":[{"kind":"stall","phase":"after_message_start","ms":1,"then":{"kind":"error","status":500}}]}"#,
            "step 0 (stall): field `then.kind` must be \"text\" or \"tool_use\" here (found \"error\")",
        ),
        (
            r#"{"steps":[{"kind":"stall","phase":"after_message_start","ms":1,"then":{"kind":"txt"}}]}"#,
            "step 0 (stall): field `then.kind` must be \"text\" or \"tool_use\" here (found \"txt\")",
        ),
        (
            r#"{"steps":[{"kind":"drop","reply":{"kind":"text"}}]}"#,
            "step 0 (drop): field `reply.text` is required",
        ),
        (
            r#"{"steps":[{"kind":"drop","reply":{"kind":"text","text":"a","delay_ms":1}}]}"#,
            "step 0 (drop): field `reply.delay_ms` is not known here (allowed: kind, usage, stop_reason, text, thinking)",
        ),
        (
            r#"{"steps":[{"kind":"drop","reply":{"kind":"text","text":"a","usage":{"input_tokens":-1}}}]}"#,
            "step 0 (drop): field `reply.usage.input_tokens` must be a non-negative integer, found -1",
        ),
        (
            r#"{"steps":[{"kind":"drop","reply":"text"}]}"#,
            "step 0 (drop): field `reply` must be a JSON object, found a string",
        ),
        (
            r#"{"steps":[{"kind":"text","text":"a","times":0}]}"#,
            "step 0 (text): field `times` must be at least 1, found 0",
        ),
        (
            r#"{"steps":[{"kind":"txt"}]}"#,
            "step 0: field `kind` must be one of \"text\", \"tool_use\", \"error\", \"sse_error\", \"drop\", \"stall\", \"raw\" (found \"txt\")",
        ),
        (
            r#"{"steps":[{"kind":3}]}"#,
            "step 0: field `kind` must be a string, found 3",
        ),
        (
            r#"{"steps":[{"kind":"text","text":"a","match":{"has_tools":"Bash"}}]}"#,
            "step 0 (text): field `match.has_tools` is not known here (allowed: system_contains, last_user_contains, first_user_contains, has_tool)",
        ),
        (
            r#"{"steps":[], "on_exhausted":"error"}"#,
            "field `steps` must contain at least one step",
        ),
        (
            r#"{"steps":[{"kind":"text","text":"a"}], "on_exhausted":"again"}"#,
            "field `on_exhausted` must be one of \"error\", \"repeat_last\", \"loop\" (found \"again\")",
        ),
        (
            r#"{"steps":[{"kind":"text","text":"a"}], "on_exhaust":"loop"}"#,
            "field `on_exhaust` is not known here (allowed: model, on_exhausted, steps)",
        ),
        (r#"{"model":"m"}"#, "field `steps` is required"),
        (
            r#"{"steps":[{"kind":"text","text":"a"}, 7]}"#,
            "step 1: a step must be a JSON object, found a number",
        ),
        (r#"[1]"#, "the scenario must be a JSON object, found an array"),
        (
            r#"{"steps":[{"kind":"text","text":"  "}]}"#,
            "step 0 (text): field `text` must not be empty (the real API rejects blank text)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(err(text), want, "for {text}");
    }
}

#[test]
fn numbers_from_the_file_are_bounded() {
    let cases = [
        (
            r#"{"steps":[{"kind":"text","text":"a","times":18446744073709551615}]}"#,
            "step 0 (text): field `times` must be at most 1000000 (keel-mock's limit), found 18446744073709551615",
        ),
        (
            r#"{"steps":[{"kind":"text","text":"a","times":1e300}]}"#,
            "step 0 (text): field `times` must be a non-negative integer, found 1e+300",
        ),
        (
            r#"{"steps":[{"kind":"text","text":"a","delay_ms":86400001}]}"#,
            "step 0 (text): field `delay_ms` must be at most 86400000 (keel-mock's limit), found 86400001",
        ),
        (
            r#"{"steps":[{"kind":"stall","phase":"before_headers","ms":1e3}]}"#,
            "step 0 (stall): field `ms` must be a non-negative integer, found 1000.0",
        ),
        (
            r#"{"steps":[{"kind":"stall","phase":"before_headers","ms":99999999999}]}"#,
            "step 0 (stall): field `ms` must be at most 86400000 (keel-mock's limit), found 99999999999",
        ),
        (
            r#"{"steps":[{"kind":"stall","phase":"after_message_start","ms":1,"after_events":0}]}"#,
            "step 0 (stall): field `after_events` must be at least 1, found 0",
        ),
        (
            r#"{"steps":[{"kind":"drop","after_events":100001}]}"#,
            "step 0 (drop): field `after_events` must be at most 100000 (keel-mock's limit), found 100001",
        ),
        (
            r#"{"steps":[{"kind":"sse_error","after_events":-3}]}"#,
            "step 0 (sse_error): field `after_events` must be a non-negative integer, found -3",
        ),
        (
            r#"{"steps":[{"kind":"error","status":4294967697}]}"#,
            "step 0 (error): field `status` must be an HTTP status code between 400 and 599, found 4294967697",
        ),
        (
            r#"{"steps":[{"kind":"raw","status":199,"events":[]}]}"#,
            "step 0 (raw): field `status` must be an HTTP status code between 200 and 599, found 199",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(err(text), want, "for {text}");
    }
}

#[test]
fn raw_steps_are_checked() {
    let cases = [
        (
            r#"{"steps":[{"kind":"raw"}]}"#,
            "step 0 (raw): field `events` is required",
        ),
        (
            r#"{"steps":[{"kind":"raw","events":[{"event":"x"}]}]}"#,
            "step 0 (raw): field `events.0.data` is required (or `data_text` for text sent verbatim)",
        ),
        (
            r#"{"steps":[{"kind":"raw","events":[{"event":"x","data":1,"data_text":"1"}]}]}"#,
            "step 0 (raw): field `events.0.data_text` cannot be given together with `data` (one event has one data line)",
        ),
        (
            r#"{"steps":[{"kind":"raw","events":[{"event":"a\nb","data":1}]}]}"#,
            "step 0 (raw): field `events.0.event` must be a non-empty name on one line (no line breaks)",
        ),
        (
            r#"{"steps":[{"kind":"raw","events":[{"event":"x","dat":1}]}]}"#,
            "step 0 (raw): field `events.0.dat` is not known here (allowed: event, data, data_text)",
        ),
        (
            r#"{"steps":[{"kind":"raw","events":[],"end":"later"}]}"#,
            "step 0 (raw): field `end` must be \"close\" or \"hang\" (found \"later\")",
        ),
        (
            r#"{"steps":[{"kind":"raw","events":[],"headers":{"x":"a\nb"}}]}"#,
            "step 0 (raw): field `headers.x` is not a valid HTTP header value (line breaks and other control characters cannot be sent)",
        ),
        (
            r#"{"steps":[{"kind":"raw","events":[],"headers":{"x":[]}}]}"#,
            "step 0 (raw): field `headers.x` must be a string, found an array",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(err(text), want, "for {text}");
    }
    // `"data": null` is the JSON null, not a missing field.
    let s =
        Scenario::from_json(r#"{"steps":[{"kind":"raw","events":[{"event":"x","data":null}]}]}"#)
            .unwrap();
    assert!(matches!(
        &s.steps[0].kind,
        StepKind::Raw { events, .. }
            if events[0].data == RawData::Json(serde_json::Value::Null)
    ));
}

#[test]
fn header_values_are_kept_verbatim() {
    let s = Scenario::from_json(
        r#"{"steps":[{"kind":"error","status":529,"headers":{"Retry-After":"1e30","x-n":18446744073709551615,"x-utf8":"café"}}]}"#,
    )
    .unwrap();
    let StepKind::Error { headers, .. } = &s.steps[0].kind else {
        panic!("an error step")
    };
    assert_eq!(headers["retry-after"], "1e30");
    assert_eq!(headers["x-n"], "18446744073709551615");
    assert_eq!(headers["x-utf8"], "café");
}

#[test]
fn null_means_absent() {
    let s = Scenario::from_json(
        r#"{"model":null,"on_exhausted":null,"steps":[
            {"kind":"tool_use","text":null,"times":null,"match":null,"calls":[{"name":"Bash","input":null,"id":null}]}
        ]}"#,
    )
    .unwrap();
    assert_eq!(
        s,
        Scenario::new(vec![super::Step::tool_use(vec![super::Call::new(
            "Bash",
            serde_json::json!({})
        )])])
    );
}

#[test]
fn syntax_error_is_reported() {
    assert!(err("{").starts_with("the scenario is not valid JSON:"));
}
