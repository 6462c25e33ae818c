//! The body of a Messages API request.

use keel_protocol::ApiMessage;
use serde::Serialize;
use serde_json::Value;

/// A Messages API request body.
#[derive(Clone, Debug, Serialize)]
pub struct ModelRequest {
    /// The model id.
    pub model: String,
    /// Output token cap.
    pub max_tokens: u32,
    /// The system prompt, as text blocks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<Value>,
    /// The conversation.
    pub messages: Vec<ApiMessage>,
    /// Tools the model may call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Whether to stream (set by the client, not the caller).
    pub stream: bool,
    /// Request metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// A tool as offered to the model.
#[derive(Clone, Debug, Serialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, in keel's words.
    pub description: String,
    /// JSON schema of its input.
    pub input_schema: Value,
}
