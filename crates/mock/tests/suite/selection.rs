//! Which step answers: order, `times`, `match`, and the three `on_exhausted` modes.

use keel_mock::{Match, MockServer, OnExhausted, Scenario, Step};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{post, request, request_saying, start};

async fn text_of(server: &MockServer, body: &Value) -> Result<String, (u16, String)> {
    let resp = post(server, body).await;
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap();
    if status == 200 {
        Ok(v["content"][0]["text"].as_str().unwrap().to_string())
    } else {
        Err((status, v["error"]["message"].as_str().unwrap().to_string()))
    }
}

#[tokio::test]
async fn steps_in_order_with_times_then_exhausted_error() {
    let server = start(vec![Step::text("one").times(2), Step::text("two")]).await;
    let r = request(false);
    assert_eq!(text_of(&server, &r).await.unwrap(), "one");
    assert_eq!(text_of(&server, &r).await.unwrap(), "one");
    assert_eq!(text_of(&server, &r).await.unwrap(), "two");
    let (status, msg) = text_of(&server, &r).await.unwrap_err();
    assert_eq!(status, 400);
    assert_eq!(
        msg,
        "keel-mock: the scenario has no step left for this request (2 steps were used)"
    );
    let steps: Vec<_> = server.requests().iter().map(|r| r.step).collect();
    assert_eq!(steps, vec![Some(0), Some(0), Some(1), None]);
}

#[tokio::test]
async fn repeat_last_and_loop() {
    let steps = vec![Step::text("a"), Step::text("b")];
    let repeat =
        MockServer::start(Scenario::new(steps.clone()).on_exhausted(OnExhausted::RepeatLast))
            .await
            .unwrap();
    let looping = MockServer::start(Scenario::new(steps).on_exhausted(OnExhausted::Loop))
        .await
        .unwrap();
    let r = request(false);
    let mut got_repeat = Vec::new();
    let mut got_loop = Vec::new();
    for _ in 0..5 {
        got_repeat.push(text_of(&repeat, &r).await.unwrap());
        got_loop.push(text_of(&looping, &r).await.unwrap());
    }
    assert_eq!(got_repeat, vec!["a", "b", "b", "b", "b"]);
    assert_eq!(got_loop, vec!["a", "b", "a", "b", "a"]);
}

#[tokio::test]
async fn match_routes_parallel_conversations() {
    let sub = |name: &str| {
        Match::new()
            .system_contains("subagent")
            .first_user_contains(name)
    };
    let server = start(vec![
        Step::text("main first"),
        Step::text("beta done").when(sub("task beta")),
        Step::text("alpha done").when(sub("task alpha")),
        Step::text("main last").when(Match::new().has_tool("Agent")),
    ])
    .await;
    let with_system = |text: &str| {
        let mut r = request_saying(text, false);
        r["system"] = json!([{"type": "text", "text": "You are a subagent."}]);
        r
    };
    assert_eq!(
        text_of(&server, &request(false)).await.unwrap(),
        "main first"
    );
    // Both subagents ask at once; each gets its own step whatever the arrival order.
    let (alpha, beta) = (with_system("do task alpha"), with_system("do task beta"));
    let (a, b) = tokio::join!(text_of(&server, &alpha), text_of(&server, &beta));
    assert_eq!(
        (a.unwrap(), b.unwrap()),
        ("alpha done".into(), "beta done".into())
    );
    // The last step wants a tool this request lacks: nothing matches.
    let (status, msg) = text_of(&server, &request(false)).await.unwrap_err();
    assert_eq!(status, 400);
    assert!(
        msg.contains("no scenario step matches this request"),
        "{msg}"
    );
    let mut r = request(false);
    r["tools"] = json!([{"name": "Agent", "input_schema": {"type": "object"}}]);
    assert_eq!(text_of(&server, &r).await.unwrap(), "main last");
}

#[tokio::test]
async fn last_user_contains_sees_tool_results() {
    let server = start(vec![
        Step::text("saw it").when(Match::new().last_user_contains("OUTPUT-42")),
        Step::text("fallback"),
    ])
    .await;
    let body = json!({
        "model": "m", "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": [{"type": "text", "text": "OUTPUT-42"}]}]}
        ]
    });
    assert_eq!(text_of(&server, &body).await.unwrap(), "saw it");
    assert_eq!(text_of(&server, &body).await.unwrap(), "fallback");
}

#[tokio::test]
async fn a_replaced_scenario_answers_from_its_first_step_on() {
    let server = start(vec![Step::error(529).times(100)]).await;
    assert_eq!(post(&server, &request(false)).await.status(), 529);
    server
        .replace_scenario(Scenario::new(vec![Step::text("fixed")]))
        .unwrap();
    let resp = post(&server, &request(false)).await;
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["content"][0]["text"], "fixed");
    // An invalid scenario is refused with the reason.
    let bad = Scenario::new(vec![]);
    assert!(server.replace_scenario(bad).is_err());
    assert_eq!(server.requests().len(), 2);
}
