//! The hand-off from the reader to the consumer of messages.
//!
//! The channel is bounded, and the reader reads the CLI's stdout only when the consumer has
//! taken what was read before: a consumer that stops reading stops the reader, whose stopping
//! fills the pipe and blocks the CLI. The one exception is a control request waiting for its
//! answer: its answer may sit behind messages nobody is reading yet, so the reader reads ahead
//! into a bounded backlog, delivered in order later. Past the backlog's cap the reader stops
//! again and the request ends at its control timeout.

use std::collections::VecDeque;

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::error::Result;
use crate::message::Message;

/// Messages in the channel between the reader and the consumer.
pub(super) const QUEUE: usize = 32;
/// The read-ahead allowed while a control request waits: items...
const BACKLOG_ITEMS: usize = 1024;
/// ...and bytes of the lines they were read from.
const BACKLOG_BYTES: usize = 64 * 1024 * 1024;

type Item = Result<Message>;

/// The reader's end of the message channel, with the read-ahead that has not fit in it yet.
pub(super) struct Outbox {
    tx: mpsc::Sender<Item>,
    backlog: Backlog,
}

/// Items in stdout order, each with the size of its line.
#[derive(Default)]
struct Backlog {
    items: VecDeque<(Item, usize)>,
    bytes: usize,
}

impl Backlog {
    fn pop(&mut self) -> Option<Item> {
        let (item, size) = self.items.pop_front()?;
        self.bytes -= size;
        Some(item)
    }

    fn clear(&mut self) {
        self.items.clear();
        self.bytes = 0;
    }
}

impl Outbox {
    pub(super) fn new(tx: mpsc::Sender<Item>) -> Outbox {
        Outbox {
            tx,
            backlog: Backlog::default(),
        }
    }

    /// Queues an item (read from a line of `size` bytes) behind the ones already waiting, and
    /// hands over what the channel has room for.
    pub(super) fn push(&mut self, item: Item, size: usize) {
        if self.tx.is_closed() {
            return; // nobody reads any more: the reader only goes on for control answers and the end
        }
        self.backlog.items.push_back((item, size));
        self.backlog.bytes += size;
        self.flush();
    }

    /// Hands over, without waiting, what the channel has room for.
    pub(super) fn flush(&mut self) {
        while !self.backlog.items.is_empty() {
            match self.tx.try_reserve() {
                Ok(permit) => {
                    if let Some(item) = self.backlog.pop() {
                        permit.send(item);
                    }
                }
                Err(TrySendError::Full(())) => return,
                Err(TrySendError::Closed(())) => return self.backlog.clear(),
            }
        }
    }

    /// Waits until the consumer has room, then hands over the oldest item. Cancel-safe: nothing
    /// leaves the backlog before the room is there.
    pub(super) async fn deliver_one(&mut self) {
        match self.tx.reserve().await {
            Ok(permit) => {
                if let Some(item) = self.backlog.pop() {
                    permit.send(item);
                }
            }
            Err(_) => self.backlog.clear(),
        }
    }

    /// Hands everything over, waiting for the consumer as long as it takes (or until it is gone).
    pub(super) async fn drain(&mut self) {
        while !self.backlog.items.is_empty() {
            self.deliver_one().await;
        }
    }

    /// Whether everything read has been handed over.
    pub(super) fn is_empty(&self) -> bool {
        self.backlog.items.is_empty()
    }

    /// Whether the read-ahead may grow.
    pub(super) fn has_room(&self) -> bool {
        self.backlog.items.len() < BACKLOG_ITEMS && self.backlog.bytes < BACKLOG_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn item(n: usize) -> Item {
        Err(Error::LineTooLong { len: n, limit: 0 })
    }

    fn number(i: Item) -> usize {
        match i {
            Err(Error::LineTooLong { len, .. }) => len,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn order_is_kept_across_the_channel_and_the_backlog() {
        let (tx, mut rx) = mpsc::channel(2);
        let mut out = Outbox::new(tx);
        for n in 0..5 {
            out.push(item(n), 10);
        }
        assert!(!out.is_empty(), "3 wait behind a full channel");
        assert_eq!(number(rx.recv().await.unwrap()), 0);
        out.deliver_one().await;
        out.flush();
        assert_eq!(number(rx.recv().await.unwrap()), 1);
        assert_eq!(number(rx.recv().await.unwrap()), 2);
        out.drain().await;
        drop(out);
        let rest: Vec<usize> = std::iter::from_fn(|| rx.try_recv().ok().map(number)).collect();
        assert_eq!(rest, [3, 4]);
    }

    #[tokio::test]
    async fn the_backlog_is_capped_and_dropped_once_nobody_reads() {
        let (tx, rx) = mpsc::channel(1);
        let mut out = Outbox::new(tx);
        out.push(item(0), 0);
        for n in 0..BACKLOG_ITEMS {
            assert!(out.has_room());
            out.push(item(n), 1);
        }
        assert!(!out.has_room());
        drop(rx);
        out.flush();
        assert!(out.is_empty());
        out.push(item(0), 1);
        assert!(
            out.is_empty(),
            "nothing is kept for a consumer that is gone"
        );
    }
}
