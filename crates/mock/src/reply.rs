//! Turning a `text` or `tool_use` step into an assistant message: the whole JSON message for a
//! non-streaming request, or the SSE events of the real API for a streaming one.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::scenario::{RawData, RawEvent, Step, StepKind, UsageOverride};

/// Counters for the ids the server hands out; unique for the server's life.
#[derive(Default)]
pub(crate) struct Counters {
    message: AtomicU64,
    tool: AtomicU64,
}

impl Counters {
    pub(crate) fn next_message(&self) -> u64 {
        self.message.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn next_tool(&self) -> u64 {
        self.tool.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// What a reply needs to know about the request it answers.
pub(crate) struct ReplyCtx<'a> {
    /// Model name to report.
    pub model: &'a str,
    /// Size of the request body, for the default input_tokens.
    pub request_bytes: usize,
    /// Id counters.
    pub ids: &'a Counters,
    /// How the prompt cache billed the request (when it was billed).
    pub cache: Option<crate::cache::CacheUsage>,
}

pub(crate) enum Block {
    Thinking {
        thinking: String,
        signature: String,
    },
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

pub(crate) struct Usage {
    pub(crate) input: u64,
    pub(crate) output: u64,
    pub(crate) cache_read: u64,
    pub(crate) cache_creation: u64,
}

/// A fully decided assistant message.
pub(crate) struct Reply {
    pub(crate) id: String,
    pub(crate) model: String,
    pub(crate) blocks: Vec<Block>,
    pub(crate) stop_reason: String,
    pub(crate) usage: Usage,
}

/// Build the reply of `step` (a `text` or `tool_use` step); `outer` lends its usage and
/// stop_reason overrides to a nested reply that has none of its own.
pub(crate) fn build(step: &Step, outer: Option<&Step>, ctx: &ReplyCtx<'_>) -> Reply {
    let mut blocks = Vec::new();
    let default_stop = match &step.kind {
        StepKind::Text { text, thinking } => {
            if let Some(t) = thinking {
                blocks.push(Block::Thinking {
                    thinking: t.clone(),
                    signature: crate::validate::signature(t),
                });
            }
            blocks.push(Block::Text(text.clone()));
            "end_turn"
        }
        StepKind::ToolUse {
            thinking,
            text,
            calls,
        } => {
            if let Some(t) = thinking {
                blocks.push(Block::Thinking {
                    thinking: t.clone(),
                    signature: crate::validate::signature(t),
                });
            }
            if let Some(t) = text {
                blocks.push(Block::Text(t.clone()));
            }
            for c in calls {
                let id =
                    c.id.clone()
                        .unwrap_or_else(|| format!("toolu_mock_{}", ctx.ids.next_tool()));
                blocks.push(Block::ToolUse {
                    id,
                    name: c.name.clone(),
                    input: c.input.clone(),
                });
            }
            "tool_use"
        }
        // Callers only pass replies; anything else still yields a well-formed message.
        _ => {
            blocks.push(Block::Text("keel-mock".into()));
            "end_turn"
        }
    };
    let stop_reason = step
        .stop_reason
        .clone()
        .or_else(|| outer.and_then(|o| o.stop_reason.clone()))
        .unwrap_or_else(|| default_stop.to_string());
    let chars: usize = blocks
        .iter()
        .map(|b| match b {
            Block::Thinking { thinking, .. } => thinking.chars().count(),
            Block::Text(t) => t.chars().count(),
            Block::ToolUse { input, name, .. } => name.len() + input.to_string().chars().count(),
        })
        .sum();
    let none = UsageOverride::default();
    let own = step.usage.as_ref().unwrap_or(&none);
    let lent = outer.and_then(|o| o.usage.as_ref()).unwrap_or(&none);
    let pick = |a: Option<u64>, b: Option<u64>, default: u64| a.or(b).unwrap_or(default);
    let billed = ctx.cache.unwrap_or(crate::cache::CacheUsage {
        input: (ctx.request_bytes as u64 + 2) / 4,
        ..Default::default()
    });
    let usage = Usage {
        input: pick(own.input_tokens, lent.input_tokens, billed.input),
        output: pick(own.output_tokens, lent.output_tokens, chars as u64 / 4 + 1),
        cache_read: pick(
            own.cache_read_input_tokens,
            lent.cache_read_input_tokens,
            billed.read,
        ),
        cache_creation: pick(
            own.cache_creation_input_tokens,
            lent.cache_creation_input_tokens,
            billed.creation,
        ),
    };
    Reply {
        id: format!("msg_mock_{}", ctx.ids.next_message()),
        model: ctx.model.to_string(),
        blocks,
        stop_reason,
        usage,
    }
}

impl Reply {
    /// The complete message, as a non-streaming response body.
    pub(crate) fn message_json(&self) -> Value {
        let content: Vec<Value> = self
            .blocks
            .iter()
            .map(|b| match b {
                Block::Thinking {
                    thinking,
                    signature,
                } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                Block::Text(t) => json!({"type": "text", "text": t}),
                Block::ToolUse { id, name, input } => {
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                }
            })
            .collect();
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason,
            "stop_sequence": null,
            "usage": {
                "input_tokens": self.usage.input,
                "cache_creation_input_tokens": self.usage.cache_creation,
                "cache_read_input_tokens": self.usage.cache_read,
                "output_tokens": self.usage.output,
            }
        })
    }

    /// The SSE events of the streamed message, each already framed as `event:`/`data:`.
    pub(crate) fn sse_events(&self) -> Vec<Bytes> {
        let mut out = vec![
            sse_event(
                "message_start",
                &json!({"type": "message_start", "message": {
                    "id": self.id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": {
                        "input_tokens": self.usage.input,
                        "cache_creation_input_tokens": self.usage.cache_creation,
                        "cache_read_input_tokens": self.usage.cache_read,
                        "output_tokens": 1,
                    }
                }}),
            ),
            sse_event("ping", &json!({"type": "ping"})),
        ];
        for (index, b) in self.blocks.iter().enumerate() {
            let (start, deltas): (Value, Vec<Value>) = match b {
                Block::Thinking {
                    thinking,
                    signature,
                } => {
                    let mut d: Vec<Value> = pieces(thinking)
                        .into_iter()
                        .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                        .collect();
                    d.push(json!({"type": "signature_delta", "signature": signature}));
                    (
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                        d,
                    )
                }
                Block::Text(t) => (
                    json!({"type": "text", "text": ""}),
                    pieces(t)
                        .into_iter()
                        .map(|p| json!({"type": "text_delta", "text": p}))
                        .collect(),
                ),
                Block::ToolUse { id, name, input } => (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    pieces(&input.to_string())
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect(),
                ),
            };
            out.push(sse_event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            for delta in deltas {
                out.push(sse_event(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            out.push(sse_event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        out.push(sse_event(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": self.usage.output}
            }),
        ));
        out.push(sse_event("message_stop", &json!({"type": "message_stop"})));
        out
    }
}

/// One SSE event as sent on the wire.
pub(crate) fn sse_event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// One event of a `raw` step as sent on the wire: JSON data as serialized by serde_json (which
/// writes integers as integers, whatever their size), text data byte for byte.
/// With `data_only` (the Chat Completions stream has no event names) only the data line.
pub(crate) fn raw_event(e: &RawEvent, data_only: bool) -> Bytes {
    let data = match &e.data {
        RawData::Json(v) => v.to_string(),
        RawData::Text(t) => t.clone(),
    };
    if data_only {
        Bytes::from(format!("data: {data}\n\n"))
    } else {
        Bytes::from(format!("event: {}\ndata: {data}\n\n", e.event))
    }
}

/// The body of an error response (also the data of an SSE `error` event, without request_id).
pub(crate) fn error_body(error_type: &str, message: &str, request_id: Option<&str>) -> Value {
    let mut v = json!({"type": "error", "error": {"type": error_type, "message": message}});
    if let Some(id) = request_id {
        v["request_id"] = json!(id);
    }
    v
}

/// Split `s` into up to three pieces on character boundaries, so deltas arrive in parts.
pub(crate) fn pieces(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 6 {
        return vec![s.to_string()];
    }
    let size = chars.len().div_ceil(3);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Call;
    use pretty_assertions::assert_eq;

    fn ctx(ids: &Counters) -> ReplyCtx<'_> {
        ReplyCtx {
            model: "m",
            request_bytes: 40,
            ids,
            cache: None,
        }
    }

    #[test]
    fn pieces_keep_multibyte_chars_whole() {
        assert_eq!(pieces("héllo wörld"), vec!["héll", "o wö", "rld"]);
        assert_eq!(pieces("hi"), vec!["hi"]);
    }

    #[test]
    fn message_json_of_tool_use() {
        let ids = Counters::default();
        let step = Step::tool_use(vec![Call::new("Bash", json!({"command": "ls"}))]);
        let v = build(&step, None, &ctx(&ids)).message_json();
        assert_eq!(
            v,
            json!({
                "id": "msg_mock_1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "tool_use", "id": "toolu_mock_1", "name": "Bash", "input": {"command": "ls"}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 6}
            })
        );
    }

    #[test]
    fn outer_overrides_are_lent_to_nested_reply() {
        let ids = Counters::default();
        let outer = Step::drop_after(1).stop_reason("max_tokens");
        let v = build(&Step::text("x"), Some(&outer), &ctx(&ids)).message_json();
        assert_eq!(v["stop_reason"], "max_tokens");
    }
}
