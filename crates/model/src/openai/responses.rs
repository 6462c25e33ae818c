//! The Responses API: the request body, the streamed events, the complete reply.
//!
//! keel sends `store: false` (nothing is kept on the provider's side) and so carries reasoning
//! across turns itself: a reasoning item comes back with its encrypted content, is kept in the
//! history as a thinking block whose signature holds the item, and is sent back, without its
//! id (the API refuses ids of items it did not store), before the calls it led to.

use keel_protocol::content::AssistantMessage;
use keel_protocol::{ApiMessage, ContentBlock, Role};
use serde_json::{json, Map, Value};

use super::{
    assistant, blocks, count, ids, input_of, parse_data, stop_reason, stream_error, system_text,
    usage, Out, Translate, UserPart, UserTurn, MAX_CALLS,
};
use crate::error::{ApiError, ApiErrorKind};
use crate::request::ModelRequest;

/// What starts the signature of a thinking block that holds a reasoning item.
pub const REASONING_SIGNATURE_PREFIX: &str = "keel-openai-reasoning:";

/// The `input` items of one history message.
pub(crate) fn items(m: &ApiMessage) -> Vec<Value> {
    let bs = blocks(&m.content);
    let mut out = Vec::new();
    match m.role {
        Role::User => user_items(&bs, &mut out),
        Role::Assistant => assistant_items(&bs, &mut out),
    }
    out
}

/// The body of `POST /responses` for `req`, without its `input`.
pub(crate) fn head(req: &ModelRequest, stream: bool) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    let system = system_text(req);
    if !system.is_empty() {
        body.insert("instructions".into(), json!(system));
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.input_schema, "strict": false})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("max_output_tokens".into(), json!(req.max_tokens));
    if let Some(effort) = super::reasoning_effort(req) {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
    }
    body.insert("stream".into(), json!(stream));
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    body
}

fn user_items(bs: &[ContentBlock], input: &mut Vec<Value>) {
    let turn = UserTurn::of(bs);
    for (id, text) in turn.results {
        input.push(json!({"type": "function_call_output", "call_id": id, "output": text}));
    }
    if !turn.parts.is_empty() {
        let parts: Vec<Value> = turn
            .parts
            .iter()
            .map(|p| match p {
                UserPart::Text(t) => json!({"type": "input_text", "text": t}),
                UserPart::Image(url) => json!({"type": "input_image", "image_url": url}),
            })
            .collect();
        input.push(json!({"type": "message", "role": "user", "content": parts}));
    }
}

fn assistant_items(bs: &[ContentBlock], input: &mut Vec<Value>) {
    for b in bs {
        match b {
            ContentBlock::Thinking(t) => {
                if let Some(item) = reasoning_item(&t.thinking, &t.signature) {
                    input.push(item);
                }
            }
            ContentBlock::Text(t) if !t.text.is_empty() => input.push(json!({
                "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": t.text}]})),
            ContentBlock::ToolUse(u) => input.push(json!({
                "type": "function_call", "call_id": ids::outbound(&u.id), "name": u.name,
                "arguments": u.input.to_string()})),
            _ => {}
        }
    }
}

/// The reasoning item a thinking block holds (none for another provider's thinking).
fn reasoning_item(summary: &str, signature: &str) -> Option<Value> {
    let held: Value =
        serde_json::from_str(signature.strip_prefix(REASONING_SIGNATURE_PREFIX)?).ok()?;
    let mut item = json!({"type": "reasoning", "summary": []});
    if !summary.is_empty() {
        item["summary"] = json!([{"type": "summary_text", "text": summary}]);
    }
    if let Some(enc) = held.get("encrypted_content").filter(|v| v.is_string()) {
        item["encrypted_content"] = enc.clone();
    }
    Some(item)
}

/// A reasoning item as a thinking block: its summary as the text, the item in the signature.
fn reasoning_block(item: &Value) -> (String, String) {
    let summary = item["summary"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let held =
        json!({"encrypted_content": item.get("encrypted_content").cloned().unwrap_or(Value::Null)});
    (summary, format!("{REASONING_SIGNATURE_PREFIX}{held}"))
}

/// A function call being streamed.
#[derive(Debug, Default)]
struct Call {
    output_index: Option<u64>,
    item_id: Option<String>,
    call_id: Option<String>,
    name: String,
    arguments: String,
    done: bool,
}

/// The streamed events of one reply.
pub(crate) struct Stream {
    model: String,
    id: String,
    calls: Vec<Call>,
    emitted_calls: usize,
    /// The model refused (its refusal text streams as text).
    refused: bool,
}

impl Stream {
    pub(crate) fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            id: String::new(),
            calls: Vec::new(),
            emitted_calls: 0,
            refused: false,
        }
    }

    fn call_at(&mut self, v: &Value) -> Result<usize, ApiError> {
        let index = v.get("output_index").and_then(Value::as_u64);
        let item_id = v
            .get("item_id")
            .or_else(|| v.get("item").and_then(|i| i.get("id")))
            .and_then(Value::as_str);
        if index.is_some_and(|i| i as usize >= MAX_CALLS * 4) {
            return Err(ApiError::new(
                ApiErrorKind::Protocol,
                format!(
                    "the stream sent output index {}, past keel's limit",
                    index.unwrap_or(0)
                ),
            ));
        }
        let found = self.calls.iter().rposition(|c| {
            !c.done
                && ((item_id.is_some() && c.item_id.as_deref() == item_id)
                    || (index.is_some() && c.output_index == index))
        });
        if let Some(at) = found {
            return Ok(at);
        }
        if self.calls.len() >= MAX_CALLS {
            return Err(ApiError::new(
                ApiErrorKind::Protocol,
                format!("the reply has more than {MAX_CALLS} tool calls"),
            ));
        }
        self.calls.push(Call {
            output_index: index,
            item_id: item_id.map(str::to_owned),
            ..Call::default()
        });
        Ok(self.calls.len() - 1)
    }

    fn take_item_fields(c: &mut Call, item: &Value) -> Result<(), ApiError> {
        if let Some(id) = item
            .get("call_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            if id.len() > ids::MAX_INBOUND_ID {
                return Err(ApiError::new(
                    ApiErrorKind::Protocol,
                    format!("the stream sent a call id of {} bytes", id.len()),
                ));
            }
            c.call_id = Some(id.to_owned());
        }
        if let Some(n) = item
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            c.name = n.to_owned();
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Out, response: &Value, cut: bool) -> Result<(), ApiError> {
        // Calls whose item never finished are emitted with what came.
        let pending: Vec<usize> = (0..self.calls.len())
            .filter(|i| !self.calls[*i].done)
            .collect();
        for i in pending {
            self.emit_call(out, i)?;
        }
        let reason = response["incomplete_details"]["reason"]
            .as_str()
            .unwrap_or("");
        let cut = cut && reason != "content_filter";
        let filtered = reason == "content_filter" || self.refused;
        let stop = stop_reason(cut, filtered, self.emitted_calls > 0);
        let u = &response["usage"];
        let u = usage(
            count(&u["input_tokens"]),
            count(&u["input_tokens_details"]["cached_tokens"]),
            count(&u["output_tokens"]),
        );
        out.finish(stop, u)
    }

    fn emit_call(&mut self, out: &mut Out, at: usize) -> Result<(), ApiError> {
        let n = self.emitted_calls;
        let c = &mut self.calls[at];
        c.done = true;
        let id = super::call_id(&c.name, c.call_id.as_deref(), &self.id, n)?;
        self.emitted_calls += 1;
        out.tool_use(&id, &c.name, &c.arguments)
    }
}

impl Translate for Stream {
    fn event(&mut self, _name: &str, data: &str, out: &mut Out) -> Result<bool, ApiError> {
        let v = parse_data(data)?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "error" {
            return Err(stream_error(&v, None));
        }
        if self.id.is_empty() {
            if let Some(r) = v.get("response") {
                self.id = r["id"].as_str().unwrap_or("resp_keel").to_owned();
                if let Some(m) = r["model"].as_str().filter(|m| !m.is_empty()) {
                    self.model = m.to_owned();
                }
            }
        }
        if kind.starts_with("response.") {
            let id = if self.id.is_empty() {
                "resp_keel".to_owned()
            } else {
                self.id.clone()
            };
            out.start(&id, &self.model)?;
        }
        match kind {
            "response.output_text.delta" => out.text(v["delta"].as_str().unwrap_or(""))?,
            "response.refusal.delta" => {
                self.refused = true;
                out.text(v["delta"].as_str().unwrap_or(""))?
            }
            "response.output_item.added" if v["item"]["type"] == "function_call" => {
                let at = self.call_at(&v)?;
                Self::take_item_fields(&mut self.calls[at], &v["item"])?;
                if let Some(a) = v["item"]["arguments"].as_str() {
                    self.calls[at].arguments = a.to_owned();
                }
            }
            "response.function_call_arguments.delta" => {
                let at = self.call_at(&v)?;
                self.calls[at]
                    .arguments
                    .push_str(v["delta"].as_str().unwrap_or(""));
            }
            "response.output_item.done" => {
                let item = &v["item"];
                match item["type"].as_str() {
                    Some("message") => out.close_text()?,
                    Some("function_call") => {
                        let at = self.call_at(&v)?;
                        Self::take_item_fields(&mut self.calls[at], item)?;
                        // The finished item's arguments are the whole; pieces were a preview.
                        if let Some(a) = item["arguments"].as_str() {
                            self.calls[at].arguments = a.to_owned();
                        }
                        self.emit_call(out, at)?;
                    }
                    Some("reasoning") => {
                        let (summary, signature) = reasoning_block(item);
                        out.thinking(&summary, &signature)?;
                    }
                    _ => {}
                }
            }
            "response.completed" => {
                self.finish(out, &v["response"], false)?;
                return Ok(true);
            }
            "response.incomplete" => {
                self.finish(out, &v["response"], true)?;
                return Ok(true);
            }
            "response.failed" => {
                let err = &v["response"]["error"];
                return Err(stream_error(err, None));
            }
            _ => {}
        }
        Ok(false)
    }

    fn eof(&mut self, _out: &mut Out) -> Result<(), ApiError> {
        Ok(())
    }
}

/// A non-streamed reply as a message.
pub(crate) fn complete(v: &Value, model: &str) -> Result<AssistantMessage, ApiError> {
    let output = v["output"]
        .as_array()
        .ok_or_else(|| ApiError::new(ApiErrorKind::Decode, "the reply has no output"))?;
    let id = v["id"].as_str().unwrap_or("resp_keel");
    let mut content = Vec::new();
    let mut calls = 0;
    let mut refused = false;
    for item in output {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    let text = if part["type"] == "refusal" {
                        refused = true;
                        part["refusal"].as_str()
                    } else {
                        part["text"].as_str()
                    };
                    if let Some(t) = text.filter(|t| !t.is_empty()) {
                        content.push(json!({"type": "text", "text": t}));
                    }
                }
            }
            Some("function_call") => {
                let name = item["name"].as_str().unwrap_or("");
                let cid = super::call_id(name, item["call_id"].as_str(), id, calls)?;
                let args = item["arguments"].as_str().unwrap_or("");
                content.push(
                    json!({"type": "tool_use", "id": cid, "name": name, "input": input_of(args)}),
                );
                calls += 1;
            }
            Some("reasoning") => {
                let (summary, signature) = reasoning_block(item);
                content
                    .push(json!({"type": "thinking", "thinking": summary, "signature": signature}));
            }
            _ => {}
        }
    }
    let reason = v["incomplete_details"]["reason"].as_str().unwrap_or("");
    let cut = v["status"] == "incomplete" && reason != "content_filter";
    let stop = stop_reason(cut, reason == "content_filter" || refused, calls > 0);
    let u = &v["usage"];
    let u = usage(
        count(&u["input_tokens"]),
        count(&u["input_tokens_details"]["cached_tokens"]),
        count(&u["output_tokens"]),
    );
    assistant(id, model, content, stop, u)
}
