//! The Messages API's server-sent events.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::{AssistantMessage, ContentBlock};
use crate::tagged::tagged_enum;
use crate::Extra;

/// One SSE event of a streaming Messages API response.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// The response begins; `message` has empty content.
    MessageStart(MessageStart),
    /// A content block begins.
    ContentBlockStart(ContentBlockStart),
    /// A piece of a content block.
    ContentBlockDelta(ContentBlockDelta),
    /// A content block is complete.
    ContentBlockStop(IndexOnly),
    /// Top-level changes: the stop reason and final output token count.
    MessageDelta(MessageDelta),
    /// The response is complete.
    MessageStop(Extra),
    /// Keep-alive.
    Ping(Extra),
    /// The API reports an error inside the stream.
    Error(ErrorEvent),
    /// An event type keel does not model.
    Other(Value),
}

tagged_enum!(StreamEvent, "type", {
    "message_start" => MessageStart,
    "content_block_start" => ContentBlockStart,
    "content_block_delta" => ContentBlockDelta,
    "content_block_stop" => ContentBlockStop,
    "message_delta" => MessageDelta,
    "message_stop" => MessageStop,
    "ping" => Ping,
    "error" => Error,
});

/// `message_start`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageStart {
    /// The message so far.
    pub message: AssistantMessage,
}

/// `content_block_start`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentBlockStart {
    /// Position of the block in the message.
    pub index: usize,
    /// The block, empty.
    pub content_block: ContentBlock,
}

/// `content_block_delta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentBlockDelta {
    /// Position of the block.
    pub index: usize,
    /// The piece.
    pub delta: Delta,
}

/// `content_block_stop`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexOnly {
    /// Position of the block.
    pub index: usize,
}

/// A piece of a content block.
#[derive(Clone, Debug, PartialEq)]
pub enum Delta {
    /// More text.
    TextDelta(TextDelta),
    /// More of a tool input's JSON.
    InputJsonDelta(InputJsonDelta),
    /// More thinking.
    ThinkingDelta(ThinkingDelta),
    /// The thinking block's signature.
    SignatureDelta(SignatureDelta),
    /// A delta type keel does not model.
    Other(Value),
}

tagged_enum!(Delta, "type", {
    "text_delta" => TextDelta,
    "input_json_delta" => InputJsonDelta,
    "thinking_delta" => ThinkingDelta,
    "signature_delta" => SignatureDelta,
});

/// `text_delta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextDelta {
    /// The text.
    pub text: String,
}

/// `input_json_delta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputJsonDelta {
    /// A fragment of JSON text.
    pub partial_json: String,
}

/// `thinking_delta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThinkingDelta {
    /// The thinking text.
    pub thinking: String,
}

/// `signature_delta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignatureDelta {
    /// The signature.
    pub signature: String,
}

/// `message_delta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageDelta {
    /// The stop reason.
    pub delta: MessageDeltaBody,
    /// Final usage (output tokens at least).
    #[serde(default)]
    pub usage: Value,
}

/// The body of `message_delta`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageDeltaBody {
    /// Why the model stopped.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence that matched.
    #[serde(default)]
    pub stop_sequence: Option<String>,
}

/// The `error` event (and the body of an HTTP error response).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// What went wrong.
    pub error: ApiErrorBody,
}

/// The API's error object: `{"type": "overloaded_error", "message": "..."}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// The API's error type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The API's message.
    #[serde(default)]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_real_sequence() {
        let events = [
            json!({"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}),
            json!({"type":"ping"}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}),
            json!({"type":"message_stop"}),
            json!({"type":"brand_new_event","x":1}),
        ];
        let parsed: Vec<StreamEvent> = events
            .iter()
            .map(|e| serde_json::from_value(e.clone()).unwrap())
            .collect();
        assert!(matches!(parsed[0], StreamEvent::MessageStart(_)));
        assert!(matches!(
            parsed[3],
            StreamEvent::ContentBlockDelta(ContentBlockDelta {
                delta: Delta::TextDelta(_),
                ..
            })
        ));
        assert!(matches!(parsed[7], StreamEvent::Other(_)));
        for (p, e) in parsed.iter().zip(events.iter()) {
            let back = serde_json::to_value(p).unwrap();
            assert_eq!(back.get("type"), e.get("type"));
        }
    }
}
