//! The control requests the SDK has sent and is still waiting on, by request id.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{oneshot, Notify};

use keel_protocol::{ControlResponse, ControlResponseFrame};

use super::{lock, Ended};
use crate::error::{Error, Result};

/// Who waits for which answer; once the CLI has ended, why no answer will come.
#[derive(Default)]
pub(super) struct PendingTable {
    inner: Mutex<Inner>,
    /// Wakes the reader when a request starts: a reader held back by a slow consumer must read
    /// ahead again, or the answer would be stuck behind unread messages.
    started: Notify,
}

#[derive(Default)]
struct Inner {
    /// Request id → (subtype, the waiting caller).
    map: HashMap<String, (String, oneshot::Sender<Result<Value>>)>,
    ended: Option<Ended>,
}

impl PendingTable {
    /// Registers request `id`; fails at once if the CLI has already ended.
    pub(super) fn insert(
        &self,
        id: &str,
        subtype: &str,
    ) -> Result<oneshot::Receiver<Result<Value>>> {
        let mut p = lock(&self.inner);
        if let Some(ended) = &p.ended {
            return Err(ended.error_for(subtype));
        }
        let (tx, rx) = oneshot::channel();
        p.map.insert(id.to_owned(), (subtype.to_owned(), tx));
        drop(p);
        // A stored permit if the reader is not waiting yet: it cannot miss this start.
        self.started.notify_one();
        Ok(rx)
    }

    /// Whether any caller waits for an answer.
    pub(super) fn is_waiting(&self) -> bool {
        !lock(&self.inner).map.is_empty()
    }

    /// Completes when a request has started (possibly one that started earlier: check
    /// [`is_waiting`](Self::is_waiting) after).
    pub(super) async fn started(&self) {
        self.started.notified().await
    }

    /// Removes request `id` when its caller is done with it, however that ended: the returned
    /// guard does it on drop.
    pub(super) fn entry<'a>(&'a self, id: &'a str) -> Entry<'a> {
        Entry { table: self, id }
    }

    /// Routes a `control_response` to the caller waiting for it, if any still is.
    pub(super) fn answer(&self, v: Value) {
        let Some(id) = v.pointer("/response/request_id").and_then(Value::as_str) else {
            return;
        };
        let Some((subtype, tx)) = lock(&self.inner).map.remove(id) else {
            return; // an answer nobody waits for any more (timed out)
        };
        let answer = match ControlResponseFrame::deserialize(&v) {
            Ok(f) => match f.response {
                ControlResponse::Success(s) => Ok(s.response.unwrap_or(Value::Null)),
                ControlResponse::Error(e) => Err(Error::ControlError {
                    subtype,
                    error: e.error,
                    error_code: e.error_code,
                }),
                ControlResponse::Other(o) => Err(Error::ControlError {
                    subtype,
                    error: format!("unexpected control response: {o}"),
                    error_code: None,
                }),
            },
            Err(e) => Err(Error::MessageParse {
                message: format!("a control_response: {e}"),
                raw: v,
            }),
        };
        let _ = tx.send(answer);
    }

    /// The CLI has ended: fails every waiting caller with how it ended, and refuses new ones.
    pub(super) fn end(&self, ended: &Ended) {
        let mut p = lock(&self.inner);
        p.ended = Some(ended.clone());
        for (_, (subtype, tx)) in p.map.drain() {
            let _ = tx.send(Err(ended.error_for(&subtype)));
        }
    }
}

/// Removes a pending request when dropped.
pub(super) struct Entry<'a> {
    table: &'a PendingTable,
    id: &'a str,
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        lock(&self.table.inner).map.remove(self.id);
    }
}
