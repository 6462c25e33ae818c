//! The queue between stdin and the turns of a stream-json session: user messages waiting for
//! their turn, and the changes to the session a host asked for, in arrival order. A leaf: the
//! reader, the control host and the turn loop all use it.

use std::collections::VecDeque;
use std::sync::Mutex;

use keel_protocol::ContentBlock;
use tokio::sync::Notify;

/// Most user messages that may wait for their turn.
pub const MAX_QUEUED: usize = 1000;

/// A change to the session applied between turns, in arrival order with the messages.
pub enum Edit {
    /// The system prompt of the host's `initialize` (TS SDK).
    SystemPrompt {
        /// `Some(text)` replaces keel's prompt ("" sends none); `None` keeps it.
        prompt: Option<Option<String>>,
        /// Appended to the prompt.
        append: Option<String>,
    },
    /// Whether subagents' text reaches the stream (`initialize.forwardSubagentText`).
    ForwardSubagentText(bool),
}

pub(crate) enum Item {
    Turn {
        uuid: Option<String>,
        blocks: Vec<ContentBlock>,
        origin: Option<serde_json::Value>,
    },
    Edit(Edit),
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Item>,
    /// stdin is closed: run what is queued, then stop.
    eof: bool,
    /// A signal: stop after the turn in progress, drop the rest.
    stop: bool,
    /// A message was taken for a turn that is starting or running.
    active: bool,
}

/// Messages waiting for their turn (one consumer: the main loop).
#[derive(Default)]
pub struct Queue {
    state: Mutex<QueueState>,
    notify: Notify,
}

pub(crate) enum Next {
    Turn(Vec<ContentBlock>, Option<serde_json::Value>, Option<String>),
    Edit(Edit),
    Done,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn push(&self, item: Item) -> Result<(), String> {
        {
            let mut s = self.lock();
            let turns = s
                .items
                .iter()
                .filter(|i| matches!(i, Item::Turn { .. }))
                .count();
            if matches!(item, Item::Turn { .. }) && turns >= MAX_QUEUED {
                return Err(format!(
                    "{MAX_QUEUED} messages are already waiting for their turn"
                ));
            }
            s.items.push_back(item);
        }
        self.notify.notify_one();
        Ok(())
    }

    /// Queue an edit of the session (applied before the next queued turn).
    pub fn push_edit(&self, edit: Edit) {
        let _ = self.push(Item::Edit(edit));
    }

    pub(crate) fn set_eof(&self) {
        self.lock().eof = true;
        self.notify.notify_one();
    }

    pub(crate) fn stop(&self) {
        let mut s = self.lock();
        s.stop = true;
        s.items.clear();
        drop(s);
        self.notify.notify_one();
    }

    pub(crate) fn turn_done(&self) {
        self.lock().active = false;
    }

    /// Whether a message was taken for a turn (that may not have armed its cancel token yet).
    pub fn is_starting(&self) -> bool {
        self.lock().active
    }

    /// The uuids of queued messages; with `cancel`, drop them and report them as cancelled.
    pub fn interrupt_snapshot(&self, cancel: bool) -> (Vec<String>, Vec<String>) {
        let mut s = self.lock();
        let uuids: Vec<String> = s
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Turn { uuid, .. } => uuid.clone(),
                Item::Edit(_) => None,
            })
            .collect();
        if !cancel {
            return (uuids, Vec::new());
        }
        s.items.retain(|i| matches!(i, Item::Edit(_)));
        (Vec::new(), uuids)
    }

    pub(crate) async fn next(&self) -> Next {
        loop {
            {
                let mut s = self.lock();
                if s.stop {
                    return Next::Done;
                }
                match s.items.pop_front() {
                    Some(Item::Turn {
                        blocks,
                        origin,
                        uuid,
                    }) => {
                        s.active = true;
                        return Next::Turn(blocks, origin, uuid);
                    }
                    Some(Item::Edit(e)) => return Next::Edit(e),
                    None if s.eof => return Next::Done,
                    None => {}
                }
            }
            // One consumer: a notify_one that raced ahead of this wait left a permit.
            self.notify.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_queue_runs_out_at_eof_and_reports_uuids() {
        let q = Queue::default();
        q.push(Item::Turn {
            uuid: Some("a".into()),
            blocks: vec![ContentBlock::text("x")],
            origin: None,
        })
        .unwrap();
        q.push(Item::Turn {
            uuid: None,
            blocks: vec![ContentBlock::text("y")],
            origin: None,
        })
        .unwrap();
        assert_eq!(q.interrupt_snapshot(false), (vec!["a".to_owned()], vec![]));
        q.set_eof();
        assert!(matches!(q.next().await, Next::Turn(..)));
        assert!(q.is_starting());
        q.turn_done();
        assert_eq!(q.interrupt_snapshot(true), (vec![], vec![]));
        assert!(matches!(q.next().await, Next::Done));
    }
}
