//! Requests the real API would reject get a 400 naming the place, and consume no step.

use keel_mock::{validate_request, Step};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{post, start};

fn body(messages: Value) -> Value {
    json!({"model": "m", "max_tokens": 10, "messages": messages})
}

fn tool_call(id: &str) -> Value {
    json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]})
}

fn tool_result(id: &str) -> Value {
    json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]})
}

#[tokio::test]
async fn invalid_requests_are_rejected_without_consuming_a_step() {
    let server = start(vec![Step::text("only step")]).await;
    let cases: Vec<(Value, &str)> = vec![
        (
            body(json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])),
            "messages.1: messages.0 and messages.1 both use the \"user\" role",
        ),
        (
            body(json!([
                {"role": "user", "content": "a"}, tool_call("toolu_x"), {"role": "user", "content": "no result"}
            ])),
            "messages.1: tool_use ids were found without tool_result blocks immediately after: toolu_x.",
        ),
        (
            body(json!([{"role": "user", "content": "a"}, tool_call("toolu_x"), tool_result("toolu_y")])),
            "messages.2.content.0: unexpected tool_use_id found in tool_result blocks: toolu_y.",
        ),
        (body(json!([{"role": "user", "content": []}])), "messages.0.content: must not be empty"),
        (
            body(json!([{"role": "user", "content": [{"type": "text", "text": ""}]}])),
            "messages.0.content.0: text content blocks must contain non-whitespace text",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "a"}]}),
            "max_tokens: field required",
        ),
    ];
    for (i, (b, want)) in cases.iter().enumerate() {
        let resp = post(&server, b).await;
        assert_eq!(resp.status(), 400, "case {i}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.starts_with(want),
            "case {i}: got {msg:?}, want {want:?}"
        );
        assert_eq!(
            validate_request(b).unwrap_err(),
            msg,
            "the library validator agrees"
        );
    }
    // The step is still there for a valid request.
    let good = body(
        json!([{"role": "user", "content": "a"}, tool_call("toolu_x"), tool_result("toolu_x")]),
    );
    assert_eq!(validate_request(&good), Ok(()));
    let v: Value = post(&server, &good).await.json().await.unwrap();
    assert_eq!(v["content"][0]["text"], "only step");

    let recs = server.requests();
    assert_eq!(recs.len(), cases.len() + 1);
    for r in &recs[..cases.len()] {
        assert_eq!((r.step, r.status), (None, 400));
        assert!(r.validation_error.is_some());
    }
    assert_eq!(recs[cases.len()].step, Some(0));
    assert_eq!(recs[cases.len()].validation_error, None);
}

#[tokio::test]
async fn a_body_that_is_not_json_is_rejected() {
    let server = start(vec![Step::text("x")]).await;
    let resp = super::client()
        .post(format!("{}/v1/messages", server.base_url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let rec = &server.requests()[0];
    assert_eq!(rec.body, Value::Null);
    assert_eq!(
        rec.validation_error.as_deref(),
        Some("the request body is not valid JSON")
    );
}
