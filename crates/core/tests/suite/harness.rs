//! An in-process session against keel-mock, made the way every front end makes one.

#![allow(dead_code)]

use std::sync::Arc;

use keel_core::retry::RetryPolicy;
use keel_core::{Emitted, Session, SessionBuilder, SessionOptions};
use keel_mock::{MockServer, Scenario};
use keel_model::{AnthropicClient, ClientConfig};
use keel_protocol::Frame;
use keel_tools::Tool;
use tokio::sync::mpsc;

/// A session wired to a mock, with its events collected.
pub struct Engine {
    pub mock: MockServer,
    pub session: Session,
    pub events: mpsc::Receiver<Emitted>,
    pub dir: tempfile::TempDir,
}

pub async fn engine(scenario: Scenario, tools: Vec<Arc<dyn Tool>>, allow: &[&str]) -> Engine {
    let mock = MockServer::start(scenario).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let client = AnthropicClient::new(ClientConfig {
        base_url: mock.base_url(),
        api_key: Some("k".into()),
        ..Default::default()
    })
    .unwrap();
    let retry = RetryPolicy {
        base_delay: std::time::Duration::from_millis(20),
        ..RetryPolicy::default()
    };
    let built = SessionBuilder::new(dir.path())
        // Nothing of the machine's environment: no key, no settings, no memory files.
        .env(Arc::new(|_: &str| None))
        .options(SessionOptions {
            system_prompt: Some("test".into()),
            allowed_tools: keel_core::builder::options::parse_rules(allow)
                .expect("the test's rules parse"),
            // Only the tools the test gives (no built-ins, no agent tools), and no transcript.
            tools: keel_core::builder::options::ToolSet::none(),
            no_session_persistence: true,
            ..SessionOptions::default()
        })
        .extra_tools(tools)
        .model_client(Arc::new(client))
        .retry_policy(retry)
        .build()
        .await
        .expect("the session builds");
    Engine {
        mock,
        session: built.session,
        events: built.events,
        dir,
    }
}

impl Engine {
    /// Frames of the events emitted so far.
    pub fn drain(&mut self) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            out.push(keel_core::wire::frame(&e));
        }
        out
    }
}
