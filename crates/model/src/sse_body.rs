//! What every SSE reply body goes through, whatever the API: a bound on how much one event may
//! hold, the error a broken body becomes, and reading the rest of a finished body so that its
//! connection is kept.

use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};

use crate::error::{ApiError, ApiErrorKind};

/// The most one event may hold, in bytes, before its end (a blank line) has come. An event of
/// a real reply is far smaller (the largest, the Responses API's `response.completed`, holds
/// the whole reply: under 1 MB at the largest output caps); a server that sends more without
/// ending the event would otherwise grow keel's memory without bound. The bound also bounds
/// the parser's work: it reads a line that has not ended again from its start at each new
/// piece of the body, so one endless line costs time as the square of its length.
pub(crate) const MAX_EVENT_BYTES: usize = 8 << 20;

/// Why a body stopped giving bytes.
#[derive(Debug)]
pub(crate) enum BodyError<E> {
    /// The connection or the HTTP layer failed.
    Transport(E),
    /// One event grew past [`MAX_EVENT_BYTES`] without ending.
    EventTooBig,
}

impl<E: std::fmt::Display> std::fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Transport(e) => e.fmt(f),
            BodyError::EventTooBig => write!(
                f,
                "one event grew past {} MiB without ending; keel stopped reading it",
                MAX_EVENT_BYTES >> 20
            ),
        }
    }
}

/// Counts the bytes of the event under way and resets at each blank line (`\n\n`, `\r\r` or
/// `\r\n\r\n`, as SSE ends an event).
struct EventBound {
    limit: usize,
    pending: usize,
    line_ends: u8,
    after_cr: bool,
    over: bool,
}

impl EventBound {
    fn new(limit: usize) -> Self {
        EventBound {
            limit,
            pending: 0,
            line_ends: 0,
            after_cr: false,
            over: false,
        }
    }

    /// Whether `chunk` keeps every event within the limit.
    fn take(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            match b {
                // The \n of a \r\n ends the same line as its \r.
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' => self.line_ends += 1,
                b'\r' => {
                    self.line_ends += 1;
                    self.after_cr = true;
                }
                _ => {
                    self.line_ends = 0;
                    self.after_cr = false;
                }
            }
            if self.line_ends >= 2 {
                self.pending = 0;
                self.line_ends = 0;
            } else {
                self.pending += 1;
                if self.pending > self.limit {
                    self.over = true;
                    return false;
                }
            }
        }
        true
    }
}

/// The SSE events of a body, each bounded to `limit` bytes.
pub(crate) fn events<S, E>(
    bytes: S,
    limit: usize,
) -> impl Stream<Item = Result<eventsource_stream::Event, EventStreamError<BodyError<E>>>> + Send + Unpin
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin,
    E: Send,
{
    let mut bound = EventBound::new(limit);
    bytes
        .map(move |item| match item {
            Err(e) => Err(BodyError::Transport(e)),
            Ok(_) if bound.over => Err(BodyError::EventTooBig),
            Ok(chunk) if bound.take(&chunk) => Ok(chunk),
            Ok(_) => Err(BodyError::EventTooBig),
        })
        .eventsource()
}

/// The error a broken body is: a transport failure is a lost connection; an event over the
/// bound, or one that is not text, is the server not speaking the protocol.
pub(crate) fn fault<E: std::fmt::Display>(e: EventStreamError<BodyError<E>>) -> ApiError {
    match e {
        EventStreamError::Transport(BodyError::Transport(e)) => ApiError::new(
            ApiErrorKind::ConnectionLost,
            format!("the stream broke: {e}"),
        ),
        EventStreamError::Transport(too_big @ BodyError::EventTooBig) => ApiError::new(
            ApiErrorKind::Protocol,
            format!("the stream broke: {too_big}"),
        ),
        other => ApiError::new(ApiErrorKind::Protocol, format!("the stream broke: {other}")),
    }
}

/// The most a whole (non-streamed) reply may hold: a full reply at the largest output cap is a
/// few MB. A bigger body is not a reply keel can use, and is not read into memory.
pub(crate) const MAX_REPLY_BYTES: usize = 64 << 20;

/// A whole reply body, read up to `limit` bytes: a declared or actual length over it is a
/// protocol error (retried like a garbled stream), a transport failure a lost connection.
pub(crate) async fn read_whole(resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_big = || {
        ApiError::new(
            ApiErrorKind::Protocol,
            format!(
                "the reply is over {} MiB; keel stopped reading it",
                limit >> 20
            ),
        )
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_big());
    }
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| crate::error::transport_error(&e))?;
        if body.len() + chunk.len() > limit {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// How long, and how many events, the rest of a body is read after its reply is complete.
const DRAIN_TIME: Duration = Duration::from_secs(2);
const DRAIN_EVENTS: usize = 16;

/// Read what is left of a reply's body after its reply is complete (normally only the end of
/// the chunked body, which may arrive in a packet of its own) in the background, so that the
/// connection goes back to the pool: a body dropped before its end closes its connection, and
/// the next request would pay for a new one (and a new TLS handshake). Bounded in time and in
/// events; outside a runtime the rest is simply dropped.
pub(crate) fn drain_in_background<S>(mut rest: S)
where
    S: Stream + Send + Unpin + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let _ = tokio::time::timeout(DRAIN_TIME, async {
            let mut left = DRAIN_EVENTS;
            while left > 0 && rest.next().await.is_some() {
                left -= 1;
            }
        })
        .await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(chunks: &[&[u8]]) -> impl Stream<Item = Result<bytes::Bytes, String>> + Send + Unpin {
        let owned: Vec<Result<bytes::Bytes, String>> = chunks
            .iter()
            .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
            .collect();
        futures_util::stream::iter(owned)
    }

    async fn collect(chunks: &[&[u8]], limit: usize) -> Vec<Result<String, String>> {
        events(body(chunks), limit)
            .map(|r| r.map(|e| e.data).map_err(|e| fault(e).message))
            .collect()
            .await
    }

    #[tokio::test]
    async fn events_under_the_bound_pass_whatever_their_line_ends() {
        // (The parser keeps a body's final \r until it knows no \n follows, so the \r\r
        // event is not the last.)
        let got = collect(
            &[
                b"data: ABCDEFGHIJ\r\r",
                b"data: abcdefghij\r\n\r\n",
                b"data: 0123456789\n\n",
            ],
            20,
        )
        .await;
        assert_eq!(
            got,
            vec![
                Ok("ABCDEFGHIJ".to_owned()),
                Ok("abcdefghij".to_owned()),
                Ok("0123456789".to_owned())
            ]
        );
    }

    #[tokio::test]
    async fn the_bound_is_per_event_not_per_body() {
        let one: &[u8] = b"data: 0123456789\n\n";
        let many: Vec<&[u8]> = std::iter::repeat_n(one, 50).collect();
        let got = collect(&many, 20).await;
        assert_eq!(got.len(), 50);
        assert!(got.iter().all(Result::is_ok));
    }

    #[tokio::test]
    async fn an_event_that_grows_past_the_bound_ends_the_stream_with_a_protocol_error() {
        // Many data lines, never a blank one: the event never ends.
        let line: &[u8] = b"data: 0123456789\n";
        let many: Vec<&[u8]> = std::iter::repeat_n(line, 50).collect();
        let mut stream = events(body(&many), 100);
        let first = stream.next().await.expect("an item");
        let err = fault(first.expect_err("the event is over the bound"));
        assert_eq!(err.kind, ApiErrorKind::Protocol);
        assert!(
            err.message.contains("grew past"),
            "the message says what happened: {}",
            err.message
        );
    }

    /// A response from a one-shot raw HTTP server that answers with `head` then `body`.
    async fn response(head: &'static str, body: Vec<u8>) -> reqwest::Response {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(&body).await;
        });
        reqwest::get(url).await.unwrap()
    }

    #[tokio::test]
    async fn a_whole_reply_under_the_bound_is_read_whole() {
        let resp = response(
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
            b"hello".to_vec(),
        )
        .await;
        assert_eq!(read_whole(resp, 5).await.unwrap(), b"hello");
    }

    #[tokio::test]
    async fn a_whole_reply_over_the_bound_is_refused_declared_or_not() {
        // Declared too long: refused before a byte is read.
        let resp = response("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n", Vec::new()).await;
        let err = read_whole(resp, 10).await.unwrap_err();
        assert_eq!(err.kind, ApiErrorKind::Protocol);
        // Not declared (the body ends when the connection closes): refused once past the bound.
        let resp = response(
            "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n",
            vec![b'x'; 100],
        )
        .await;
        let err = read_whole(resp, 10).await.unwrap_err();
        assert_eq!(err.kind, ApiErrorKind::Protocol);
        assert!(err.message.contains("stopped reading"), "{}", err.message);
    }

    #[tokio::test]
    async fn a_transport_failure_is_a_lost_connection() {
        let items: Vec<Result<bytes::Bytes, String>> = vec![
            Ok(bytes::Bytes::from_static(b"data: x\n\n")),
            Err("reset by peer".to_owned()),
        ];
        let got: Vec<_> = events(futures_util::stream::iter(items), 100)
            .collect()
            .await;
        assert_eq!(got.len(), 2);
        let err = fault(got.into_iter().nth(1).unwrap().unwrap_err());
        assert_eq!(err.kind, ApiErrorKind::ConnectionLost);
        assert!(err.message.contains("reset by peer"));
    }
}
