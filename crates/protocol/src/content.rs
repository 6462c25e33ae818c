//! Messages API content blocks and messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tagged::tagged_enum;
use crate::Extra;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user (prompts and tool results).
    User,
    /// The model.
    Assistant,
}

/// One content block of a message. Unknown block types are kept as `Other`.
#[derive(Clone, Debug, PartialEq)]
pub enum ContentBlock {
    /// Plain text.
    Text(TextBlock),
    /// A call the model asks keel to make.
    ToolUse(ToolUseBlock),
    /// The answer to a `ToolUse`.
    ToolResult(ToolResultBlock),
    /// The model's visible reasoning.
    Thinking(ThinkingBlock),
    /// Reasoning the API returns encrypted.
    RedactedThinking(RedactedThinkingBlock),
    /// An image.
    Image(ImageBlock),
    /// Any block type keel does not model, kept verbatim.
    Other(Value),
}

tagged_enum!(ContentBlock, "type", {
    "text" => Text,
    "tool_use" => ToolUse,
    "tool_result" => ToolResult,
    "thinking" => Thinking,
    "redacted_thinking" => RedactedThinking,
    "image" => Image,
});

/// The text blocks of `blocks`, joined by newlines (what a reader of the message sees).
pub fn text_of(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextBlock {
            text: text.into(),
            extra: Extra::new(),
        })
    }

    /// A tool result block.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        ContentBlock::ToolResult(ToolResultBlock {
            tool_use_id: tool_use_id.into(),
            content: ToolResultContent::Text(content.into()),
            is_error: Some(is_error),
            extra: Extra::new(),
        })
    }

    /// The block's `type` tag.
    pub fn kind(&self) -> &str {
        match self {
            ContentBlock::Text(_) => "text",
            ContentBlock::ToolUse(_) => "tool_use",
            ContentBlock::ToolResult(_) => "tool_result",
            ContentBlock::Thinking(_) => "thinking",
            ContentBlock::RedactedThinking(_) => "redacted_thinking",
            ContentBlock::Image(_) => "image",
            ContentBlock::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }
}

/// A text block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Fields keel does not model (citations, cache_control, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUseBlock {
    /// The call id; the matching `tool_result` carries it as `tool_use_id`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The tool's input.
    pub input: Value,
    /// Fields keel does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The answer to a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// The id of the `tool_use` this answers.
    pub tool_use_id: String,
    /// What the model reads.
    #[serde(default)]
    pub content: ToolResultContent,
    /// Whether the call failed (or did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Fields keel does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool result's content: a string or a list of blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Plain text.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<ContentBlock>),
}

impl Default for ToolResultContent {
    fn default() -> Self {
        ToolResultContent::Text(String::new())
    }
}

impl ToolResultContent {
    /// All text in the content, blocks joined by newlines.
    pub fn as_text(&self) -> String {
        match self {
            ToolResultContent::Text(t) => t.clone(),
            ToolResultContent::Blocks(b) => b
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A thinking block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThinkingBlock {
    /// The reasoning text.
    pub thinking: String,
    /// The API's signature over it (must be sent back unchanged).
    #[serde(default)]
    pub signature: String,
    /// Fields keel does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A redacted thinking block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedactedThinkingBlock {
    /// Opaque data to send back unchanged.
    pub data: String,
    /// Fields keel does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An image block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageBlock {
    /// Where the image comes from (base64 data or a URL).
    pub source: Value,
    /// Fields keel does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A message's content: a string or a list of blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content blocks.
    Blocks(Vec<ContentBlock>),
}

impl MessageContent {
    /// The content as blocks (a string becomes one text block).
    pub fn into_blocks(self) -> Vec<ContentBlock> {
        match self {
            MessageContent::Text(t) => vec![ContentBlock::text(t)],
            MessageContent::Blocks(b) => b,
        }
    }

    /// The content's blocks, borrowed; a plain string yields none.
    pub fn blocks(&self) -> &[ContentBlock] {
        match self {
            MessageContent::Text(_) => &[],
            MessageContent::Blocks(b) => b,
        }
    }
}

/// A message as sent to the Messages API (`role` + `content`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiMessage {
    /// Who wrote it.
    pub role: Role,
    /// What it says.
    pub content: MessageContent,
}

/// A Messages API response message (also the `message` of stream-json `assistant` frames).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The API's message id (`msg_...`).
    pub id: String,
    /// Always `"message"`.
    #[serde(rename = "type", default = "message_type")]
    pub kind: String,
    /// Always `assistant`.
    pub role: Role,
    /// The model that answered.
    pub model: String,
    /// The content blocks.
    pub content: Vec<ContentBlock>,
    /// Why the model stopped (`end_turn`, `tool_use`, `max_tokens`, ...).
    pub stop_reason: Option<String>,
    /// The stop sequence that matched, if any.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Token counts.
    #[serde(default)]
    pub usage: Usage,
    /// Fields keel does not model (context_management, ...).
    #[serde(flatten)]
    pub extra: Extra,
}

fn message_type() -> String {
    "message".to_owned()
}

/// Token counts of one API response (or a sum of several).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not read from or written to the cache.
    #[serde(default)]
    pub input_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Fields keel does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Usage {
    /// Add another usage's counts to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn blocks_round_trip_and_unknown_kept() {
        let v = json!([
            {"type": "text", "text": "hi", "citations": null},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": false},
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
        ]);
        let blocks: Vec<ContentBlock> = serde_json::from_value(v.clone()).unwrap();
        assert!(matches!(blocks[1], ContentBlock::ToolUse(ref t) if t.name == "Bash"));
        assert!(matches!(blocks[4], ContentBlock::Other(_)));
        assert_eq!(blocks[4].kind(), "server_tool_use");
        assert_eq!(serde_json::to_value(&blocks).unwrap(), v);
    }

    #[test]
    fn a_parsed_block_equals_the_one_built_in_memory() {
        let parsed: ContentBlock =
            serde_json::from_value(json!({"type": "text", "text": "hi"})).unwrap();
        assert_eq!(parsed, ContentBlock::text("hi"));
    }

    #[test]
    fn known_block_with_bad_shape_is_an_error_naming_it() {
        let err = serde_json::from_value::<ContentBlock>(json!({"type": "tool_use", "id": 3}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("type tool_use"), "{err}");
    }
}
