//! An in-process session against keel-mock.

#![allow(dead_code)]

use std::sync::Arc;

use keel_core::permissions::{PermissionConfig, Rule, RuleSource};
use keel_core::{Emitter, Session, SessionConfig};
use keel_mock::{MockServer, Scenario};
use keel_model::{AnthropicClient, ClientConfig};
use keel_protocol::Frame;
use keel_tools::Tool;
use tokio::sync::mpsc;

/// A session wired to a mock, with its frames collected.
pub struct Engine {
    pub mock: MockServer,
    pub session: Session,
    pub frames: mpsc::Receiver<Frame>,
    pub dir: tempfile::TempDir,
}

pub async fn engine(scenario: Scenario, tools: Vec<Arc<dyn Tool>>, allow: &[&str]) -> Engine {
    let mock = MockServer::start(scenario).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SessionConfig::new(dir.path().to_path_buf());
    cfg.system_prompt = Some("test".into());
    cfg.permissions = PermissionConfig {
        allow: allow
            .iter()
            .map(|r| Rule::parse(r, RuleSource::Flag).unwrap())
            .collect(),
        ..Default::default()
    };
    cfg.retry.base_delay = std::time::Duration::from_millis(20);
    let client = AnthropicClient::new(ClientConfig {
        base_url: mock.base_url(),
        api_key: Some("k".into()),
        ..Default::default()
    })
    .unwrap();
    let (tx, rx) = mpsc::channel(100_000);
    let session = Session::new(
        cfg.clone(),
        Arc::new(client),
        tools,
        Emitter::new(cfg.session_id.clone(), tx),
    );
    Engine {
        mock,
        session,
        frames: rx,
        dir,
    }
}

impl Engine {
    /// Frames emitted so far.
    pub fn drain(&mut self) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Ok(f) = self.frames.try_recv() {
            out.push(f);
        }
        out
    }
}
