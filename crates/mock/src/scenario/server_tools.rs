//! Replies that use the API's server tools (run by the provider itself), as the real API
//! streams them: a `server_tool_use` block whose input arrives as JSON deltas, the tool's
//! result block (`web_search_tool_result`), then the model's text. Built as `raw` steps, so a
//! scenario file can hold the same events.

use serde_json::{json, Value};

use super::{RawEvent, Step};

/// One result of a scripted web search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit {
    /// The page title.
    pub title: String,
    /// The page URL.
    pub url: String,
}

impl SearchHit {
    /// A result with this title and URL.
    pub fn new(title: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            url: url.into(),
        }
    }
}

fn block_events(index: usize, start: Value, deltas: Vec<Value>) -> Vec<RawEvent> {
    let mut out = vec![RawEvent::json(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": start}),
    )];
    for d in deltas {
        out.push(RawEvent::json(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": d}),
        ));
    }
    out.push(RawEvent::json(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
    out
}

impl Step {
    /// A reply in which the model ran the server-side web search for `query`, found `hits`,
    /// and wrote `text` (the `web_search_20250305` tool's blocks, streamed as the API does).
    pub fn web_search(query: &str, hits: &[SearchHit], text: &str) -> Step {
        let id = "srvtoolu_mock_1";
        let mut events = vec![RawEvent::json(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_mock_search", "type": "message", "role": "assistant", "model": "keel-mock",
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        )];
        events.extend(block_events(
            0,
            json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {}}),
            vec![json!({"type": "input_json_delta", "partial_json": json!({"query": query}).to_string()})],
        ));
        let results: Vec<Value> = hits
            .iter()
            .map(|h| {
                json!({"type": "web_search_result", "title": h.title, "url": h.url,
                "encrypted_content": "mock-encrypted", "page_age": null})
            })
            .collect();
        events.extend(block_events(
            1,
            json!({"type": "web_search_tool_result", "tool_use_id": id, "content": results}),
            Vec::new(),
        ));
        events.extend(block_events(
            2,
            json!({"type": "text", "text": ""}),
            vec![json!({"type": "text_delta", "text": text})],
        ));
        events.push(RawEvent::json(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 20, "server_tool_use": {"web_search_requests": 1}}}),
        ));
        events.push(RawEvent::json(
            "message_stop",
            json!({"type": "message_stop"}),
        ));
        Step::raw(events)
    }
}
