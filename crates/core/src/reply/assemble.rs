//! One streamed attempt: read the SSE events and assemble the reply, block by block.
//!
//! Every value taken from the stream is range-checked before use: a block index past
//! [`MAX_BLOCKS`] is a protocol error (retried like a dropped stream), never an allocation.

use futures_util::StreamExt;
use keel_model::{ApiError, ApiErrorKind, ModelRequest};
use keel_protocol::content::AssistantMessage;
use keel_protocol::sse::{
    ContentBlockDelta, ContentBlockStart, Delta, IndexOnly, MessageDelta, MessageStart,
};
use keel_protocol::{ContentBlock, Extra, StreamEvent, ToolUseBlock, Usage};
use serde_json::Value;

use super::{AttemptError, CallCx, Reply};
use crate::event::Event;

/// The most content blocks keel accepts in one reply. Replies have a handful; an index past
/// this is a broken stream, not a reason to allocate.
pub(crate) const MAX_BLOCKS: usize = 4096;

/// A content block being streamed.
enum Building {
    Text(String, Extra),
    ToolUse {
        id: String,
        name: String,
        json: String,
        extra: Extra,
    },
    Thinking {
        thinking: String,
        signature: String,
        extra: Extra,
    },
    /// A tool the provider runs itself (`server_tool_use`, e.g. web search): kept as it came,
    /// with its input assembled from the JSON deltas, so it goes back in the history whole.
    ServerToolUse(Value, String),
    Verbatim(ContentBlock),
}

impl Building {
    fn start(block: ContentBlock) -> Self {
        match block {
            ContentBlock::Text(t) => Building::Text(t.text, t.extra),
            ContentBlock::ToolUse(t) => Building::ToolUse {
                id: t.id,
                name: t.name,
                json: String::new(),
                extra: t.extra,
            },
            ContentBlock::Thinking(t) => Building::Thinking {
                thinking: t.thinking,
                signature: t.signature,
                extra: t.extra,
            },
            ContentBlock::Other(v)
                if v.get("type").and_then(Value::as_str) == Some("server_tool_use") =>
            {
                Building::ServerToolUse(v, String::new())
            }
            other => Building::Verbatim(other),
        }
    }

    fn apply(&mut self, delta: Delta) {
        match (self, delta) {
            (Building::Text(s, _), Delta::TextDelta(d)) => s.push_str(&d.text),
            (Building::ToolUse { json, .. }, Delta::InputJsonDelta(d))
            | (Building::ServerToolUse(_, json), Delta::InputJsonDelta(d)) => {
                json.push_str(&d.partial_json)
            }
            (Building::Thinking { thinking, .. }, Delta::ThinkingDelta(d)) => {
                thinking.push_str(&d.thinking)
            }
            (Building::Thinking { signature, .. }, Delta::SignatureDelta(d)) => {
                signature.push_str(&d.signature)
            }
            _ => {}
        }
    }

    fn finish(self) -> ContentBlock {
        match self {
            Building::Text(text, extra) => {
                ContentBlock::Text(keel_protocol::TextBlock { text, extra })
            }
            Building::ToolUse {
                id,
                name,
                json,
                extra,
            } => {
                let input = if json.trim().is_empty() {
                    Value::Object(Default::default())
                } else {
                    // Invalid JSON reaches the tool as an input it will refuse with a clear message.
                    serde_json::from_str(&json).unwrap_or_else(|e| serde_json::json!({ "__invalid_json__": json, "__error__": e.to_string() }))
                };
                ContentBlock::ToolUse(ToolUseBlock {
                    id,
                    name,
                    input,
                    extra,
                })
            }
            Building::Thinking {
                thinking,
                signature,
                extra,
            } => ContentBlock::Thinking(keel_protocol::ThinkingBlock {
                thinking,
                signature,
                extra,
            }),
            Building::ServerToolUse(mut v, json) => {
                if let Ok(input) = serde_json::from_str::<Value>(&json) {
                    v["input"] = input;
                }
                ContentBlock::Other(v)
            }
            Building::Verbatim(b) => b,
        }
    }
}

/// The blocks of one reply as they stream in, by index.
#[derive(Default)]
struct Blocks {
    building: Vec<Option<Building>>,
    done: Vec<(usize, ContentBlock)>,
}

impl Blocks {
    fn check(index: usize) -> Result<usize, ApiError> {
        if index >= MAX_BLOCKS {
            return Err(ApiError::new(
                ApiErrorKind::Protocol,
                format!(
                    "the stream sent content block index {index}, past keel's limit of {MAX_BLOCKS} blocks per reply"
                ),
            ));
        }
        Ok(index)
    }

    fn start(&mut self, index: usize, block: ContentBlock) -> Result<(), ApiError> {
        let index = Self::check(index)?;
        if self.building.len() <= index {
            self.building.resize_with(index + 1, || None);
        }
        self.building[index] = Some(Building::start(block));
        Ok(())
    }

    fn delta(&mut self, index: usize, delta: Delta) {
        if let Some(Some(b)) = self.building.get_mut(index) {
            b.apply(delta);
        }
    }

    fn stop(&mut self, index: usize) {
        if let Some(b) = self.building.get_mut(index).and_then(Option::take) {
            self.done.push((index, b.finish()));
        }
    }

    /// The completed blocks in index order (a block still streaming is dropped).
    fn finished(self) -> Vec<ContentBlock> {
        ordered(self.done)
    }
}

/// A reply being assembled from its stream events.
#[derive(Default)]
pub(crate) struct Assembly {
    message: Option<AssistantMessage>,
    blocks: Blocks,
    request_id: Option<String>,
}

impl Assembly {
    /// Apply one event; `Some(reply)` at message_stop.
    pub(crate) fn apply(&mut self, event: StreamEvent) -> Result<Option<Reply>, ApiError> {
        match event {
            StreamEvent::MessageStart(MessageStart { message: m }) => {
                self.request_id = m
                    .extra
                    .get("request_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or(self.request_id.take());
                self.message = Some(m);
            }
            StreamEvent::ContentBlockStart(ContentBlockStart {
                index,
                content_block,
            }) => self.blocks.start(index, content_block)?,
            StreamEvent::ContentBlockDelta(ContentBlockDelta { index, delta }) => {
                self.blocks.delta(index, delta)
            }
            StreamEvent::ContentBlockStop(IndexOnly { index }) => self.blocks.stop(index),
            StreamEvent::MessageDelta(MessageDelta { delta, usage }) => {
                if let Some(m) = self.message.as_mut() {
                    m.stop_reason = delta.stop_reason;
                    m.stop_sequence = delta.stop_sequence;
                    merge_usage(&mut m.usage, &usage);
                }
            }
            StreamEvent::MessageStop(_) => {
                let Some(mut m) = self.message.take() else {
                    return Err(ApiError::new(
                        ApiErrorKind::Protocol,
                        "the stream ended without message_start",
                    ));
                };
                m.content = std::mem::take(&mut self.blocks).finished();
                return Ok(Some(Reply {
                    message: m,
                    request_id: self.request_id.take(),
                }));
            }
            StreamEvent::Ping(_) | StreamEvent::Error(_) | StreamEvent::Other(_) => {}
        }
        Ok(None)
    }

    /// What had completed, when the attempt is cut short.
    fn partial(self) -> (Option<AssistantMessage>, Option<String>) {
        let blocks = self.blocks;
        (
            self.message.map(|mut m| {
                m.content = blocks.finished();
                m
            }),
            self.request_id,
        )
    }

    fn message_id(&self) -> Option<String> {
        self.message.as_ref().map(|m| m.id.clone())
    }
}

/// Stream one attempt. On cancel, the blocks that had completed are kept.
pub(super) async fn stream_once(
    cx: &mut CallCx<'_>,
    req: &ModelRequest,
) -> Result<Reply, AttemptError> {
    let mut stream = tokio::select! {
        _ = cx.cancel.cancelled() => return Err(AttemptError::Cancelled(None, None)),
        s = cx.client.stream(req) => s.map_err(AttemptError::Api)?,
    };
    let mut asm = Assembly::default();
    loop {
        let next = tokio::select! {
            _ = cx.cancel.cancelled() => {
                let (partial, request_id) = asm.partial();
                return Err(AttemptError::Cancelled(partial, request_id));
            }
            n = stream.next() => n,
        };
        let ev = match next {
            None => {
                return Err(AttemptError::Api(ApiError::new(
                    ApiErrorKind::StreamDropped,
                    "the stream ended before message_stop",
                )))
            }
            Some(Err(e)) => return Err(AttemptError::Api(e)),
            Some(Ok(ev)) => ev,
        };
        if cx.include_partial && !matches!(ev.event, StreamEvent::Ping(_)) {
            cx.emitter
                .emit(Event::StreamEvent {
                    raw: ev.raw.clone(),
                    message_id: asm.message_id(),
                })
                .await
                .map_err(AttemptError::Emit)?;
        }
        if let Some(reply) = asm.apply(ev.event).map_err(AttemptError::Api)? {
            return Ok(reply);
        }
    }
}

fn ordered(mut done: Vec<(usize, ContentBlock)>) -> Vec<ContentBlock> {
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, b)| b).collect()
}

/// `message_delta.usage` carries final counts; any field it has replaces the start's value.
fn merge_usage(u: &mut Usage, delta: &Value) {
    let get = |k: &str| delta.get(k).and_then(Value::as_u64);
    if let Some(v) = get("output_tokens") {
        u.output_tokens = v;
    }
    if let Some(v) = get("input_tokens") {
        u.input_tokens = v;
    }
    if let Some(v) = get("cache_read_input_tokens") {
        u.cache_read_input_tokens = v;
    }
    if let Some(v) = get("cache_creation_input_tokens") {
        u.cache_creation_input_tokens = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_indexes_are_bounded_before_anything_is_allocated() {
        let mut b = Blocks::default();
        let err = b
            .start(usize::MAX, ContentBlock::text(""))
            .expect_err("u64::MAX is refused");
        assert_eq!(err.kind, ApiErrorKind::Protocol);
        assert!(
            err.retryable(),
            "a garbled stream is retried like a dropped one"
        );
        assert!(b.building.is_empty(), "nothing was allocated");
        assert!(b
            .start(10_000_000_000 % (usize::MAX), ContentBlock::text(""))
            .is_err());
        b.start(1, ContentBlock::text("b")).unwrap();
        b.start(0, ContentBlock::text("a")).unwrap();
        b.stop(1);
        b.stop(0);
        b.stop(7); // a stop for a block that never started is ignored
        let texts: Vec<String> = b
            .finished()
            .into_iter()
            .map(|c| match c {
                ContentBlock::Text(t) => t.text,
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts, ["a", "b"]);
    }
}
