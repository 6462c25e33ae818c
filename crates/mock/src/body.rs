//! The response body: a script of byte chunks, pauses and an optional cut.
//!
//! Dropping the body (client gone, server shut down) drops any pending pause with it, so a
//! stalled answer never outlives its connection.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

/// One instruction of a body script.
pub(crate) enum Piece {
    /// Send these bytes as one chunk, flushed on its own.
    Data(Bytes),
    /// Send nothing for this long.
    Pause(Duration),
    /// Abort the connection without finishing the body.
    Cut,
    /// Send nothing more, ever: the body ends only when hyper drops it (client gone or server
    /// shut down), so the connection stays open without holding any timer.
    Hang,
}

/// The error a body yields to make hyper abort the connection.
#[derive(Debug)]
pub(crate) struct CutConnection;

impl fmt::Display for CutConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("keel-mock cut the connection as scripted")
    }
}

impl std::error::Error for CutConnection {}

/// A response body played from a list of pieces.
pub(crate) struct ScriptBody {
    pieces: VecDeque<Piece>,
    pause: Option<Pin<Box<Sleep>>>,
    /// Set after a chunk went out: the next poll returns `Pending` once so hyper flushes it.
    yield_once: bool,
    exact_len: Option<u64>,
}

impl ScriptBody {
    /// A body from a script; its length is unknown (chunked, or a content-length header).
    /// The headers are flushed before the first piece plays.
    pub(crate) fn script(pieces: Vec<Piece>) -> ScriptBody {
        ScriptBody {
            pieces: pieces.into(),
            pause: None,
            yield_once: true,
            exact_len: None,
        }
    }

    /// A complete body of known length.
    pub(crate) fn full(data: impl Into<Bytes>) -> ScriptBody {
        let data = data.into();
        let len = data.len() as u64;
        ScriptBody {
            pieces: vec![Piece::Data(data)].into(),
            pause: None,
            yield_once: false,
            exact_len: Some(len),
        }
    }

    /// An empty body.
    pub(crate) fn empty() -> ScriptBody {
        ScriptBody::full(Bytes::new())
    }
}

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = CutConnection;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, CutConnection>>> {
        let this = self.get_mut();
        loop {
            if this.yield_once {
                // Returning Pending makes hyper flush what it has buffered before asking again,
                // so each event reaches the client as its own write, and a cut comes after the
                // events that precede it have been written.
                this.yield_once = false;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if let Some(pause) = this.pause.as_mut() {
                if pause.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.pause = None;
            }
            match this.pieces.pop_front() {
                None => return Poll::Ready(None),
                Some(Piece::Data(bytes)) => {
                    if bytes.is_empty() {
                        continue;
                    }
                    this.yield_once = true;
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                Some(Piece::Pause(d)) => this.pause = Some(Box::pin(tokio::time::sleep(d))),
                Some(Piece::Cut) => return Poll::Ready(Some(Err(CutConnection))),
                Some(Piece::Hang) => {
                    // Stay at the front so every later poll lands here again.
                    this.pieces.push_front(Piece::Hang);
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.exact_len == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact_len {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
