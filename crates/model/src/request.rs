//! The body of a Messages API request, and where its prompt-cache breakpoints go.
//!
//! A request's messages are mostly [`EncodedMessage`]s: each history message is serialized once,
//! when it is first sent, and its bytes are reused by every later request, so building a request
//! costs the same at turn 500 as at turn 1. Only the messages that carry a prompt-cache
//! breakpoint are encoded again, with the mark.

use std::sync::Arc;

use keel_protocol::{ApiMessage, ContentBlock, MessageContent, ToolResultContent};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// A message serialized once, shared by every request that sends it.
#[derive(Clone, Debug)]
pub struct EncodedMessage(Arc<Box<RawValue>>);

impl EncodedMessage {
    /// Serialize `m`.
    pub fn new(m: &ApiMessage) -> Self {
        let json = serde_json::to_string(m).unwrap_or_else(|_| "null".to_owned());
        let raw = RawValue::from_string(json).unwrap_or_else(|_| RawValue::NULL.to_owned());
        // `Arc::new` of the box, not `Arc::from`: that would copy the bytes once more.
        Self(Arc::new(raw))
    }

    /// A message already encoded (read back from where keel saved its bytes). The bytes are
    /// sent as they are: they must be what [`new`](Self::new) made of a message.
    pub fn from_raw(raw: Box<RawValue>) -> Self {
        Self(Arc::new(raw))
    }

    /// Which stored message this is: equal for clones of one message, different for two
    /// messages alive at the same time (its address; a cache that keys on it must hold a clone).
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Whether it is empty (never, for a real message).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The message again, typed (`None` only if the bytes were not made by [`new`](Self::new)).
    pub fn decode(&self) -> Option<ApiMessage> {
        serde_json::from_str(self.0.get()).ok()
    }
}

/// One message of a request: already encoded, or to be serialized with the request (a
/// message that carries a cache breakpoint, or one built for this request only).
#[derive(Clone, Debug)]
pub enum RequestMessage {
    /// Sent as its stored bytes.
    Encoded(EncodedMessage),
    /// Serialized with the request.
    Owned(ApiMessage),
}

impl Serialize for RequestMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestMessage::Encoded(e) => e.0.serialize(s),
            RequestMessage::Owned(m) => m.serialize(s),
        }
    }
}

impl RequestMessage {
    fn bytes(&self) -> usize {
        match self {
            RequestMessage::Encoded(e) => e.len(),
            RequestMessage::Owned(m) => message_bytes(m),
        }
    }
}

impl From<ApiMessage> for RequestMessage {
    fn from(m: ApiMessage) -> Self {
        RequestMessage::Owned(m)
    }
}

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
    pub messages: Vec<RequestMessage>,
    /// Tools the model may call (shared: a session offers the same tools to every request).
    #[serde(skip_serializing_if = "no_tools", serialize_with = "shared_tools")]
    pub tools: Arc<Vec<ToolSpec>>,
    /// Whether to stream (set by the client, not the caller).
    pub stream: bool,
    /// Request metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Extended thinking (`{"type": "enabled", "budget_tokens": N}`), when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
}

fn no_tools(t: &Arc<Vec<ToolSpec>>) -> bool {
    t.is_empty()
}

fn shared_tools<S: Serializer>(t: &Arc<Vec<ToolSpec>>, s: S) -> Result<S::Ok, S::Error> {
    t.as_slice().serialize(s)
}

/// A tool as offered to the model.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, in keel's words.
    pub description: String,
    /// JSON schema of its input.
    pub input_schema: Value,
    /// For a tool the provider runs itself (a server tool such as web search): its whole
    /// definition (`{"type": "web_search_20250305", "name": "web_search", ...}`), sent as it
    /// is in place of the name, description and schema.
    pub server: Option<Value>,
}

impl ToolSpec {
    /// A server tool, from its definition (which names it).
    pub fn server_tool(definition: Value) -> Self {
        ToolSpec {
            name: definition
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            description: String::new(),
            input_schema: Value::Null,
            server: Some(definition),
        }
    }
}

impl Serialize for ToolSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if let Some(def) = &self.server {
            return def.serialize(s);
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry("description", &self.description)?;
        m.serialize_entry("input_schema", &self.input_schema)?;
        m.end()
    }
}

/// The most cache breakpoints one request may carry (the API refuses more).
pub const MAX_CACHE_BREAKPOINTS: usize = 4;
/// The shortest prefix worth a breakpoint, in (estimated) tokens: the API does not cache a
/// shorter one, and a breakpoint on it would only use up one of the four.
pub const MIN_CACHEABLE_TOKENS: u64 = 1024;

/// A rough token count: a token is about four bytes of text. Deliberately cheap (no
/// serialization): it only decides whether a prefix is long enough to cache.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

fn block_bytes(b: &ContentBlock) -> usize {
    match b {
        ContentBlock::Text(t) => t.text.len(),
        ContentBlock::ToolUse(u) => u.name.len() + u.id.len() + 16 + approx_value_bytes(&u.input),
        ContentBlock::ToolResult(r) => {
            r.tool_use_id.len()
                + 16
                + match &r.content {
                    ToolResultContent::Text(t) => t.len(),
                    ToolResultContent::Blocks(bs) => bs.iter().map(block_bytes).sum(),
                }
        }
        ContentBlock::Thinking(t) => t.thinking.len() + t.signature.len(),
        ContentBlock::RedactedThinking(r) => r.data.len(),
        // Images are billed by size in pixels, not bytes; count them as a large block.
        ContentBlock::Image(_) => 6000,
        ContentBlock::Other(v) => approx_value_bytes(v),
    }
}

fn approx_value_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(approx_value_bytes).sum::<usize>() + 2,
        Value::Object(o) => {
            o.iter()
                .map(|(k, v)| k.len() + 3 + approx_value_bytes(v))
                .sum::<usize>()
                + 2
        }
        _ => 8,
    }
}

/// A message's tokens, estimated cheaply (see [`estimate_tokens`]).
pub fn message_tokens(m: &ApiMessage) -> u64 {
    estimate_tokens(message_bytes(m))
}

fn message_bytes(m: &ApiMessage) -> usize {
    match &m.content {
        MessageContent::Text(t) => t.len() + 16,
        MessageContent::Blocks(b) => b.iter().map(block_bytes).sum::<usize>() + 16,
    }
}

impl ModelRequest {
    /// An estimate of the request's input tokens (tools, system and messages).
    pub fn estimated_input_tokens(&self) -> u64 {
        let messages: usize = self.messages.iter().map(RequestMessage::bytes).sum();
        estimate_tokens(self.prefix_bytes() + messages)
    }

    /// Roughly how many bytes the tools and the system prompt take.
    fn prefix_bytes(&self) -> usize {
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + approx_value_bytes(&t.input_schema))
            .sum();
        tools + self.system.iter().map(approx_value_bytes).sum::<usize>()
    }

    /// Place prompt-cache breakpoints so that each request reads from cache what the previous
    /// one wrote: one at the end of the system prompt (tools and system, the session's stable
    /// prefix), one at the end of the previous request's conversation (the message before the
    /// last exchange), and one at the end of this request's conversation (what the next
    /// request will read). None goes on a prefix too short to cache; never more than
    /// [`MAX_CACHE_BREAKPOINTS`]. A marked message that was sent as stored bytes is decoded
    /// and sent typed, with its mark (at most two per request). Returns how many were placed.
    pub fn mark_cache_breakpoints(&mut self) -> usize {
        let mut placed = 0;
        let mut prefix = self.prefix_bytes();
        if estimate_tokens(prefix) >= MIN_CACHEABLE_TOKENS {
            if let Some(Value::Object(last)) = self.system.last_mut() {
                last.insert("cache_control".into(), ephemeral());
                placed += 1;
            }
        }
        let n = self.messages.len();
        // The previous request ended two messages before this one's end (an assistant reply
        // and the user message answering it came since).
        let targets = [n.checked_sub(3), n.checked_sub(1)];
        let mut upto = 0;
        for target in targets.into_iter().flatten() {
            if placed >= MAX_CACHE_BREAKPOINTS {
                break;
            }
            if target < upto {
                continue;
            }
            prefix += self.messages[upto..=target]
                .iter()
                .map(RequestMessage::bytes)
                .sum::<usize>();
            upto = target + 1;
            if estimate_tokens(prefix) < MIN_CACHEABLE_TOKENS {
                continue;
            }
            let mut m = match &self.messages[target] {
                RequestMessage::Owned(m) => m.clone(),
                RequestMessage::Encoded(e) => match e.decode() {
                    Some(m) => m,
                    None => continue,
                },
            };
            if mark_message(&mut m) {
                self.messages[target] = RequestMessage::Owned(m);
                placed += 1;
            }
        }
        placed
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Put a breakpoint on the last block of `m` that may carry one (thinking blocks may not).
fn mark_message(m: &mut ApiMessage) -> bool {
    if let MessageContent::Text(t) = &m.content {
        m.content = MessageContent::Blocks(vec![ContentBlock::text(t.clone())]);
    }
    let MessageContent::Blocks(blocks) = &mut m.content else {
        return false;
    };
    for b in blocks.iter_mut().rev() {
        let extra = match b {
            ContentBlock::Text(t) => &mut t.extra,
            ContentBlock::ToolUse(u) => &mut u.extra,
            ContentBlock::ToolResult(r) => &mut r.extra,
            ContentBlock::Image(i) => &mut i.extra,
            ContentBlock::Thinking(_)
            | ContentBlock::RedactedThinking(_)
            | ContentBlock::Other(_) => continue,
        };
        extra.insert("cache_control".into(), ephemeral());
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::Role;

    fn req(turns: usize, text_bytes: usize) -> (ModelRequest, Vec<ApiMessage>) {
        let mut messages = vec![ApiMessage {
            role: Role::User,
            content: MessageContent::Blocks(vec![ContentBlock::text("x".repeat(text_bytes))]),
        }];
        for i in 0..turns {
            messages.push(ApiMessage {
                role: Role::Assistant,
                content: MessageContent::Blocks(vec![ContentBlock::text(format!("a{i}"))]),
            });
            messages.push(ApiMessage {
                role: Role::User,
                content: MessageContent::Blocks(vec![ContentBlock::text(format!("u{i}"))]),
            });
        }
        let r = ModelRequest {
            model: "m".into(),
            max_tokens: 10,
            system: vec![json!({"type": "text", "text": "s".repeat(8000)})],
            messages: messages
                .iter()
                .map(|m| RequestMessage::Encoded(EncodedMessage::new(m)))
                .collect(),
            tools: Default::default(),
            stream: true,
            metadata: None,
            thinking: None,
        };
        (r, messages)
    }

    fn breakpoints(r: &ModelRequest) -> usize {
        serde_json::to_string(r)
            .unwrap()
            .matches("cache_control")
            .count()
    }

    #[test]
    fn breakpoints_follow_the_conversation_and_never_pass_four() {
        let (mut r, _typed) = req(5, 10);
        assert_eq!(r.mark_cache_breakpoints(), 3);
        assert_eq!(breakpoints(&r), 3);
        let n = r.messages.len();
        for i in [n - 1, n - 3] {
            assert!(serde_json::to_string(&r.messages[i])
                .unwrap()
                .contains("cache_control"));
        }
        assert!(r.system[0].get("cache_control").is_some());
    }

    #[test]
    fn short_prefixes_get_no_breakpoint() {
        let (mut r, _typed) = req(1, 10);
        r.system = vec![json!({"type": "text", "text": "short"})];
        assert_eq!(r.mark_cache_breakpoints(), 0);
        assert_eq!(breakpoints(&r), 0);
        // Once the conversation is long enough, its end is marked.
        let (mut r, _typed) = req(1, 6000);
        r.system = vec![json!({"type": "text", "text": "short"})];
        assert_eq!(r.mark_cache_breakpoints(), 2);
    }
}
