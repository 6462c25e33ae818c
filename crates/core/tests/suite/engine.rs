//! Engine behaviour that needs a tool keel does not ship (one that panics, one that ignores
//! its cancel token).

use std::sync::Arc;
use std::time::Duration;

use keel_core::TurnEnd;
use keel_mock::{Call, Scenario, Step};
use keel_protocol::{ContentBlock, Frame};
use keel_tools::{BoxFuture, Tool, ToolContext, ToolOutcome};
use serde_json::{json, Value};

use super::harness::engine;

struct Panics;

impl Tool for Panics {
    fn name(&self) -> &'static str {
        "Panics"
    }
    fn kind(&self) -> keel_tools::ToolKind {
        keel_tools::ToolKind::External
    }
    fn description(&self) -> &'static str {
        "always panics"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_read_only(&self, _: &Value) -> bool {
        true
    }
    fn call<'a>(&'a self, _: Value, _: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async { panic!("deliberate test panic") })
    }
}

/// A tool that never looks at its token.
struct Stubborn;

impl Tool for Stubborn {
    fn name(&self) -> &'static str {
        "Stubborn"
    }
    fn kind(&self) -> keel_tools::ToolKind {
        keel_tools::ToolKind::External
    }
    fn description(&self) -> &'static str {
        "ignores cancellation"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_read_only(&self, _: &Value) -> bool {
        true
    }
    fn call<'a>(&'a self, _: Value, _: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            ToolOutcome::ok("never")
        })
    }
}

fn results(frames: &[Frame]) -> Vec<(String, bool)> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::User(u) => Some(u.message.content.blocks().to_vec()),
            _ => None,
        })
        .flatten()
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some((r.content.as_text(), r.is_error == Some(true))),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result_and_the_loop_goes_on() {
    let scenario = Scenario::new(vec![
        Step::tool_use(vec![Call::new("Panics", json!({}))]),
        Step::text("recovered"),
    ]);
    let mut e = engine(scenario, vec![Arc::new(Panics)], &[]).await;
    let end = e.session.run_turn(vec![ContentBlock::text("go")]).await;
    assert_eq!(
        end,
        TurnEnd::Completed {
            text: "recovered".into()
        }
    );
    let r = results(&e.drain());
    assert_eq!(r.len(), 1);
    assert!(
        r[0].1 && r[0].0.contains("crashed") && r[0].0.contains("deliberate test panic"),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_tool_that_ignores_its_token_cannot_hold_an_interrupt_hostage() {
    let scenario = Scenario::new(vec![
        Step::tool_use(vec![Call::new("Stubborn", json!({}))]),
        Step::text("unused"),
    ]);
    let mut e = engine(scenario, vec![Arc::new(Stubborn)], &[]).await;
    let handle = e.session.handle();
    let turn = e.session.run_turn(vec![ContentBlock::text("go")]);
    let interrupter = async {
        // Wait until the call is running, then interrupt.
        while handle.running_calls().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        handle.interrupt().await
    };
    let (end, receipt) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(turn, interrupter)
    })
    .await
    .expect("the turn ended");
    assert!(matches!(end, TurnEnd::Interrupted { .. }), "{end:?}");
    assert!(receipt.was_running && receipt.turn_ended, "{receipt:?}");
    let r = results(&e.drain());
    assert_eq!(r.len(), 1);
    assert!(r[0].1 && r[0].0.contains("abandoned"), "{r:?}");
}
