//! Chat Completions: the request body, the streamed chunks, the complete reply.

use keel_protocol::content::AssistantMessage;
use keel_protocol::{ApiMessage, ContentBlock, Role};
use serde_json::{json, Map, Value};

use super::{
    assistant, blocks, count, ids, input_of, parse_data, stop_reason, stream_error, system_text,
    usage, OpenAiOptions, Out, Translate, UserPart, UserTurn, MAX_CALLS,
};
use crate::error::{ApiError, ApiErrorKind};
use crate::request::ModelRequest;

/// The `messages` of one history message (tool results become `tool` messages, so a user
/// turn can be several).
pub(crate) fn items(m: &ApiMessage) -> Vec<Value> {
    let bs = blocks(&m.content);
    let mut out = Vec::new();
    match m.role {
        Role::User => user_messages(&bs, &mut out),
        Role::Assistant => out.extend(assistant_message(&bs)),
    }
    out
}

/// The system prompt as the first message, if there is one.
pub(crate) fn system_item(req: &ModelRequest) -> Option<Value> {
    let system = system_text(req);
    (!system.is_empty()).then(|| json!({"role": "system", "content": system}))
}

/// The body of `POST /chat/completions` for `req`, without its `messages`.
pub(crate) fn head(req: &ModelRequest, stream: bool, o: &OpenAiOptions) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert(o.chat_max_tokens_field.clone(), json!(req.max_tokens));
    if let Some(effort) = super::reasoning_effort(req) {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    body.insert("stream".into(), json!(stream));
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    body
}

/// A user turn: tool results first (each its own `tool` message, answering the call before),
/// then the text and images as one `user` message.
fn user_messages(bs: &[ContentBlock], out: &mut Vec<Value>) {
    let turn = UserTurn::of(bs);
    for (id, text) in turn.results {
        out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
    }
    match turn.parts.as_slice() {
        [] => {}
        // One text part goes as a plain string: every compatible server reads that.
        [UserPart::Text(t)] => out.push(json!({"role": "user", "content": t})),
        parts => {
            let parts: Vec<Value> = parts
                .iter()
                .map(|p| match p {
                    UserPart::Text(t) => json!({"type": "text", "text": t}),
                    UserPart::Image(url) => json!({"type": "image_url", "image_url": {"url": url}}),
                })
                .collect();
            out.push(json!({"role": "user", "content": parts}));
        }
    }
}

/// An assistant turn: its text and its tool calls (thinking is not sent back to this API).
fn assistant_message(bs: &[ContentBlock]) -> Option<Value> {
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in bs {
        match b {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::ToolUse(u) => calls.push(json!({
                "id": ids::outbound(&u.id), "type": "function",
                "function": {"name": u.name, "arguments": u.input.to_string()}})),
            _ => {}
        }
    }
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut m = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !calls.is_empty() {
        m["tool_calls"] = Value::Array(calls);
    }
    Some(m)
}

/// A tool call being assembled from streamed pieces.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Call {
    index: Option<u64>,
    pub(crate) id: Option<String>,
    pub(crate) name: String,
    pub(crate) arguments: String,
}

/// The tool calls of one reply, assembled from `delta.tool_calls` pieces. A piece belongs to
/// the call with its id; without an id, to the last call with its index; with neither, to
/// the last call. A piece with a new id starts a new call even if its index repeats (servers
/// that number every call 0). The name may come in any piece, before or after arguments.
#[derive(Debug, Default)]
pub(crate) struct Calls(pub(crate) Vec<Call>);

impl Calls {
    pub(crate) fn apply(&mut self, piece: &Value) -> Result<(), ApiError> {
        let index = piece.get("index").and_then(Value::as_u64);
        if index.is_some_and(|i| i as usize >= MAX_CALLS) {
            return Err(ApiError::new(
                ApiErrorKind::Protocol,
                format!(
                    "the stream sent tool call index {}, past keel's limit of {MAX_CALLS}",
                    index.unwrap_or(0)
                ),
            ));
        }
        let id = piece
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        if let Some(id) = id {
            if id.len() > ids::MAX_INBOUND_ID {
                return Err(ApiError::new(
                    ApiErrorKind::Protocol,
                    format!("the stream sent a tool call id of {} bytes", id.len()),
                ));
            }
        }
        let f = piece.get("function").unwrap_or(&Value::Null);
        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("");
        let by_index = |i: u64, want_id_less: bool| {
            self.0
                .iter()
                .rposition(|c| c.index == Some(i) && (!want_id_less || c.id.is_none()))
        };
        let at = match (id, index) {
            // Its id's call; else a call at its index that came without an id (the arguments
            // arrived before the piece that names the call).
            (Some(id), i) => self
                .0
                .iter()
                .rposition(|c| c.id.as_deref() == Some(id))
                .or_else(|| i.and_then(|i| by_index(i, true))),
            (None, Some(i)) => by_index(i, false),
            (None, None) => self.0.len().checked_sub(1),
        };
        let at = match at {
            Some(at) => at,
            None => {
                if self.0.len() >= MAX_CALLS {
                    return Err(ApiError::new(
                        ApiErrorKind::Protocol,
                        format!("the reply has more than {MAX_CALLS} tool calls"),
                    ));
                }
                self.0.push(Call {
                    index,
                    id: id.map(str::to_owned),
                    ..Call::default()
                });
                self.0.len() - 1
            }
        };
        let c = &mut self.0[at];
        if c.id.is_none() {
            c.id = id.map(str::to_owned);
        }
        if c.index.is_none() {
            c.index = index;
        }
        // Most servers send the name once; some repeat it in every piece.
        if !name.is_empty() && c.name != name {
            c.name.push_str(name);
        }
        c.arguments.push_str(args);
        Ok(())
    }

    /// Emit every call as a tool_use block; a call that never got a name breaks the reply.
    pub(crate) fn emit(&self, out: &mut Out, reply_id: &str) -> Result<(), ApiError> {
        for (n, c) in self.0.iter().enumerate() {
            let (id, name) = checked(c, reply_id, n)?;
            out.tool_use(&id, &name, &c.arguments)?;
        }
        Ok(())
    }
}

/// keel's id and the name of a finished call.
fn checked(c: &Call, reply_id: &str, n: usize) -> Result<(String, String), ApiError> {
    let id = super::call_id(&c.name, c.id.as_deref(), reply_id, n)?;
    Ok((id, c.name.clone()))
}

/// The streamed chunks of one reply.
pub(crate) struct Stream {
    model: String,
    id: String,
    calls: Calls,
    finish: Option<String>,
    usage: Option<Value>,
    /// The model refused (its refusal text streams as text).
    refused: bool,
}

impl Stream {
    pub(crate) fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            id: String::new(),
            calls: Calls::default(),
            finish: None,
            usage: None,
            refused: false,
        }
    }

    fn end(&mut self, out: &mut Out) -> Result<(), ApiError> {
        out.start(&self.id, &self.model)?;
        out.close_text()?;
        self.calls.emit(out, &self.id)?;
        let f = self.finish.as_deref().unwrap_or("stop");
        let filtered = f == "content_filter" || self.refused;
        let stop = stop_reason(f == "length", filtered, !self.calls.0.is_empty());
        let u = self.usage.take().unwrap_or_else(|| usage(0, 0, 0));
        out.finish(stop, u)
    }
}

impl Translate for Stream {
    fn event(&mut self, _name: &str, data: &str, out: &mut Out) -> Result<bool, ApiError> {
        if data.trim() == "[DONE]" {
            self.end(out)?;
            return Ok(true);
        }
        let v = parse_data(data)?;
        if let Some(err) = v.get("error").filter(|e| e.is_object()) {
            return Err(stream_error(err, None));
        }
        if self.id.is_empty() {
            self.id = v
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("chatcmpl-keel")
                .to_owned();
        }
        out.start(&self.id, &self.model)?;
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(
                count(&u["prompt_tokens"]),
                count(&u["prompt_tokens_details"]["cached_tokens"]),
                count(&u["completion_tokens"]),
            ));
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            out.text(t)?;
        }
        // A refusal streams as its own field; shown as text, and the reply stops as refused.
        if let Some(t) = delta.get("refusal").and_then(Value::as_str) {
            self.refused = true;
            out.text(t)?;
        }
        if let Some(pieces) = delta.get("tool_calls").and_then(Value::as_array) {
            for p in pieces {
                self.calls.apply(p)?;
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_owned());
        }
        Ok(false)
    }

    fn eof(&mut self, out: &mut Out) -> Result<(), ApiError> {
        // Some servers close without `[DONE]`; a reply whose finish_reason came is complete.
        if self.finish.is_some() {
            self.end(out)?;
        }
        Ok(())
    }
}

/// A non-streamed reply as a message.
pub(crate) fn complete(v: &Value, model: &str) -> Result<AssistantMessage, ApiError> {
    let choice = v["choices"]
        .get(0)
        .ok_or_else(|| ApiError::new(ApiErrorKind::Decode, "the reply has no choices"))?;
    let msg = &choice["message"];
    let id = v["id"].as_str().unwrap_or("chatcmpl-keel");
    let mut content = Vec::new();
    if let Some(t) = msg["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": t}));
    }
    let mut calls = Calls::default();
    for (i, c) in msg["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut c = c.clone();
        c["index"] = json!(i);
        calls.apply(&c)?;
    }
    for (n, c) in calls.0.iter().enumerate() {
        let (id, name) = checked(c, id, n)?;
        content.push(
            json!({"type": "tool_use", "id": id, "name": name, "input": input_of(&c.arguments)}),
        );
    }
    let f = choice["finish_reason"].as_str().unwrap_or("stop");
    let stop = stop_reason(f == "length", f == "content_filter", !calls.0.is_empty());
    let u = &v["usage"];
    let u = usage(
        count(&u["prompt_tokens"]),
        count(&u["prompt_tokens_details"]["cached_tokens"]),
        count(&u["completion_tokens"]),
    );
    assistant(id, model, content, stop, u)
}
