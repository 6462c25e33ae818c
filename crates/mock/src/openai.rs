//! OpenAI's two APIs: the same scenario steps and faults, answered in the Responses API's or
//! the Chat Completions API's shape, and a validator for each that refuses what the real API
//! refuses (an unanswered tool call, a result for an unknown call, bad roles, ids too long,
//! reasoning items sent back wrongly).
//!
//! Each request is also turned into its Messages API equivalent ([`view`]) so that `match`
//! conditions, the recorded `view` and tests read every dialect alike.

use std::collections::HashSet;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::reply::{pieces, Block, Reply};

pub use crate::dialect::Dialect;

/// An error body as OpenAI sends it, for a scenario's Messages API error type.
pub fn error_body(error_type: &str, message: &str) -> Value {
    let (kind, code) = match error_type {
        "invalid_request_error" => ("invalid_request_error", Value::Null),
        "authentication_error" => ("invalid_request_error", json!("invalid_api_key")),
        "permission_error" => ("invalid_request_error", json!("permission_denied")),
        "not_found_error" => ("invalid_request_error", json!("model_not_found")),
        "request_too_large" => ("invalid_request_error", json!("request_too_large")),
        "context_length_exceeded" => ("invalid_request_error", json!("context_length_exceeded")),
        "rate_limit_error" => ("requests", json!("rate_limit_exceeded")),
        "overloaded_error" => ("server_error", json!("server_is_overloaded")),
        "api_error" => ("server_error", Value::Null),
        other => (other, json!(other)),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The data of an error reported inside a stream.
pub(crate) fn stream_error(d: Dialect, error_type: &str, message: &str) -> Bytes {
    let body = error_body(error_type, message);
    match d {
        Dialect::Responses => {
            let e = &body["error"];
            let code = if e["code"].is_null() {
                e["type"].clone()
            } else {
                e["code"].clone()
            };
            event(
                "error",
                &json!({"type": "error", "code": code, "message": message, "param": null}),
            )
        }
        _ => data(&body),
    }
}

fn data(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn event(name: &str, v: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {v}\n\n"))
}

fn call_id(id: &str) -> String {
    match id.strip_prefix("toolu_mock_") {
        Some(n) => format!("call_mock_{n}"),
        None => id.to_owned(),
    }
}

fn finish_reason(stop: &str) -> &'static str {
    match stop {
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

fn chat_usage(r: &Reply) -> Value {
    let prompt = r.usage.input + r.usage.cache_read;
    json!({"prompt_tokens": prompt, "completion_tokens": r.usage.output,
           "total_tokens": prompt + r.usage.output,
           "prompt_tokens_details": {"cached_tokens": r.usage.cache_read}})
}

fn responses_usage(r: &Reply) -> Value {
    let input = r.usage.input + r.usage.cache_read;
    json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": r.usage.cache_read},
           "output_tokens": r.usage.output, "output_tokens_details": {"reasoning_tokens": 0},
           "total_tokens": input + r.usage.output})
}

/// The chunks of a streamed Chat Completions reply, ending with `[DONE]`.
pub(crate) fn chat_events(r: &Reply, include_usage: bool) -> Vec<Bytes> {
    let chunk = |delta: Value, finish: Value| {
        data(
            &json!({"id": r.id, "object": "chat.completion.chunk", "created": 0,
                     "model": r.model, "choices": [{"index": 0, "delta": delta,
                     "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut k = 0;
    for b in &r.blocks {
        match b {
            Block::Text(t) => {
                for p in pieces(t) {
                    out.push(chunk(json!({"content": p}), Value::Null));
                }
            }
            Block::ToolUse { id, name, input } => {
                out.push(chunk(
                    json!({"tool_calls": [{"index": k, "id": call_id(id), "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for p in pieces(&input.to_string()) {
                    out.push(chunk(
                        json!({"tool_calls": [{"index": k, "function": {"arguments": p}}]}),
                        Value::Null,
                    ));
                }
                k += 1;
            }
            Block::Thinking { .. } => {}
        }
    }
    out.push(chunk(json!({}), json!(finish_reason(&r.stop_reason))));
    if include_usage {
        out.push(data(
            &json!({"id": r.id, "object": "chat.completion.chunk", "created": 0,
                              "model": r.model, "choices": [], "usage": chat_usage(r)}),
        ));
    }
    out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    out
}

/// A whole Chat Completions reply.
pub(crate) fn chat_json(r: &Reply) -> Value {
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in &r.blocks {
        match b {
            Block::Text(t) => text.push_str(t),
            Block::ToolUse { id, name, input } => calls.push(json!({
                "id": call_id(id), "type": "function",
                "function": {"name": name, "arguments": input.to_string()}})),
            Block::Thinking { .. } => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({"id": r.id, "object": "chat.completion", "created": 0, "model": r.model,
           "choices": [{"index": 0, "message": message,
                        "finish_reason": finish_reason(&r.stop_reason)}],
           "usage": chat_usage(r)})
}

/// The output items of a Responses reply, complete.
fn output_items(r: &Reply) -> Vec<Value> {
    r.blocks
        .iter()
        .enumerate()
        .map(|(i, b)| match b {
            Block::Thinking {
                thinking,
                signature,
            } => json!({"id": format!("rs_mock_{i}"), "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": thinking}],
                        "encrypted_content": signature}),
            Block::Text(t) => json!({"id": format!("msg_mock_{i}"), "type": "message",
                                     "role": "assistant", "status": "completed",
                                     "content": [text_part(r, t)]}),
            Block::ToolUse { id, name, input } => json!({
                "id": format!("fc_mock_{i}"), "type": "function_call", "status": "completed",
                "call_id": call_id(id), "name": name, "arguments": input.to_string()}),
        })
        .collect()
}

/// A text block's content part: `output_text`, or `refusal` when the step's stop reason is
/// `refusal` (the Responses API has no refusal stop reason; the part says it).
fn text_part(r: &Reply, t: &str) -> Value {
    if r.stop_reason == "refusal" {
        json!({"type": "refusal", "refusal": t})
    } else {
        json!({"type": "output_text", "text": t, "annotations": []})
    }
}

fn response_obj(r: &Reply, status: &str, output: Vec<Value>, usage: Option<Value>) -> Value {
    let cut = r.stop_reason == "max_tokens";
    json!({"id": r.id.replacen("msg_", "resp_", 1), "object": "response", "created_at": 0,
           "status": status, "model": r.model, "output": output,
           "incomplete_details": if cut && status != "in_progress" { json!({"reason": "max_output_tokens"}) } else { Value::Null },
           "usage": usage.unwrap_or(Value::Null)})
}

/// The events of a streamed Responses reply, numbered by `sequence_number` as they are added.
struct Numbered {
    next: u64,
    out: Vec<Bytes>,
}

impl Numbered {
    /// Add event `name` with body `v`, stamped with its type and the next sequence number.
    fn push(&mut self, name: &str, mut v: Value) {
        v["type"] = json!(name);
        v["sequence_number"] = json!(self.next);
        self.next += 1;
        self.out.push(event(name, &v));
    }
}

/// The events of a streamed Responses reply.
pub(crate) fn responses_events(r: &Reply) -> Vec<Bytes> {
    let mut ev = Numbered {
        next: 0,
        out: Vec::new(),
    };
    ev.push(
        "response.created",
        json!({"response": response_obj(r, "in_progress", vec![], None)}),
    );
    ev.push(
        "response.in_progress",
        json!({"response": response_obj(r, "in_progress", vec![], None)}),
    );
    let items = output_items(r);
    for (i, (b, item)) in r.blocks.iter().zip(&items).enumerate() {
        let item_id = item["id"].clone();
        match b {
            Block::Thinking { .. } => ev.push(
                "response.output_item.added",
                json!({"output_index": i,
                "item": {"id": item_id, "type": "reasoning", "summary": []}}),
            ),
            Block::Text(t) => text_item_events(&mut ev, r, i, &item_id, t),
            Block::ToolUse { .. } => call_item_events(&mut ev, i, item),
        }
        ev.push(
            "response.output_item.done",
            json!({"output_index": i, "item": item}),
        );
    }
    let (name, status) = if r.stop_reason == "max_tokens" {
        ("response.incomplete", "incomplete")
    } else {
        ("response.completed", "completed")
    };
    let done = response_obj(r, status, items, Some(responses_usage(r)));
    ev.push(name, json!({"response": done}));
    ev.out
}

/// A message item's events up to (not including) its output_item.done: the text in pieces.
fn text_item_events(ev: &mut Numbered, r: &Reply, i: usize, item_id: &Value, t: &str) {
    ev.push(
        "response.output_item.added",
        json!({"output_index": i,
        "item": {"id": item_id, "type": "message", "role": "assistant",
                 "status": "in_progress", "content": []}}),
    );
    let kind = if r.stop_reason == "refusal" {
        "refusal"
    } else {
        "output_text"
    };
    ev.push(
        "response.content_part.added",
        json!({"item_id": item_id,
        "output_index": i, "content_index": 0, "part": text_part(r, "")}),
    );
    for p in pieces(t) {
        ev.push(
            &format!("response.{kind}.delta"),
            json!({"item_id": item_id,
            "output_index": i, "content_index": 0, "delta": p}),
        );
    }
    ev.push(
        &format!("response.{kind}.done"),
        json!({"item_id": item_id,
        "output_index": i, "content_index": 0, kind: t}),
    );
    ev.push(
        "response.content_part.done",
        json!({"item_id": item_id,
        "output_index": i, "content_index": 0, "part": text_part(r, t)}),
    );
}

/// A function call item's events up to (not including) its output_item.done: the arguments
/// in pieces.
fn call_item_events(ev: &mut Numbered, i: usize, item: &Value) {
    let item_id = &item["id"];
    let mut added = item.clone();
    added["arguments"] = json!("");
    added["status"] = json!("in_progress");
    ev.push(
        "response.output_item.added",
        json!({"output_index": i, "item": added}),
    );
    let args = item["arguments"].as_str().unwrap_or_default();
    for p in pieces(args) {
        ev.push(
            "response.function_call_arguments.delta",
            json!({
            "item_id": item_id, "output_index": i, "delta": p}),
        );
    }
    ev.push(
        "response.function_call_arguments.done",
        json!({
        "item_id": item_id, "output_index": i, "arguments": args}),
    );
}

/// A whole Responses reply.
pub(crate) fn responses_json(r: &Reply) -> Value {
    let status = if r.stop_reason == "max_tokens" {
        "incomplete"
    } else {
        "completed"
    };
    response_obj(r, status, output_items(r), Some(responses_usage(r)))
}

// ---------------------------------------------------------------------------------------------
// Validation

fn tool_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_model(obj: &Map<String, Value>) -> Result<(), String> {
    match obj.get("model") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(()),
        None => Err("Missing required parameter: 'model'.".into()),
        Some(_) => Err("Invalid type for 'model': expected a non-empty string.".into()),
    }
}

fn check_positive(obj: &Map<String, Value>, field: &str) -> Result<(), String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(()),
        Some(v) if v.as_u64().is_some_and(|n| n > 0) => Ok(()),
        Some(v) => Err(format!(
            "Invalid '{field}': expected a positive integer, got {v}."
        )),
    }
}

/// `tools`: an array whose function tools have valid, unique names (`name_of` reads one,
/// `field` is where it sits). Chat Completions takes function tools only; the Responses API
/// has built-in tools of other types, which are not checked.
fn check_tools(
    obj: &Map<String, Value>,
    field: &str,
    name_of: impl Fn(&Value) -> &str,
) -> Result<(), String> {
    let Some(tools) = obj.get("tools") else {
        return Ok(());
    };
    let list = tools
        .as_array()
        .ok_or("Invalid 'tools': expected an array.")?;
    let chat = field.starts_with("function.");
    let mut names = HashSet::new();
    for (i, t) in list.iter().enumerate() {
        if t["type"] != "function" {
            if chat {
                return Err(format!(
                    "Invalid value for 'tools[{i}].type': expected 'function'."
                ));
            }
            continue;
        }
        let name = name_of(t);
        if !tool_name_ok(name) {
            return Err(format!(
                "Invalid 'tools[{i}].{field}': '{name}' does not match '^[a-zA-Z0-9_-]{{1,64}}$'."
            ));
        }
        if !names.insert(name.to_owned()) {
            return Err(format!("Duplicate tool name '{name}' in 'tools'."));
        }
    }
    Ok(())
}

/// Check a `POST /v1/chat/completions` body.
pub fn validate_chat(body: &Value) -> Result<(), String> {
    let obj = body
        .as_object()
        .ok_or("The request body must be a JSON object.")?;
    check_model(obj)?;
    check_positive(obj, "max_tokens")?;
    check_positive(obj, "max_completion_tokens")?;
    let stream = obj.get("stream").and_then(Value::as_bool) == Some(true);
    if obj.contains_key("stream_options") && !stream {
        return Err(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.".into(),
        );
    }
    // Chat Completions nests each function under `function` and takes nothing else.
    check_tools(obj, "function.name", |t| {
        t["function"]["name"].as_str().unwrap_or("")
    })?;
    let messages = match obj.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => {
            return Err("Invalid 'messages': empty array. Expected at least one message.".into())
        }
        None => return Err("Missing required parameter: 'messages'.".into()),
        Some(_) => return Err("Invalid 'messages': expected an array.".into()),
    };
    // Calls of the last assistant message that no tool message has answered yet.
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = m["role"].as_str().unwrap_or("");
        if role != "tool" && !open.is_empty() {
            return Err(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                open.join(", ")
            ));
        }
        match role {
            "system" | "developer" => check_chat_text(&m["content"], &at, false)?,
            "user" => check_chat_text(&m["content"], &at, true)?,
            "assistant" => {
                let calls = m.get("tool_calls").and_then(Value::as_array);
                if calls.is_none_or(|c| c.is_empty()) && m["content"].is_null() {
                    return Err(format!("Invalid '{at}': an assistant message needs 'content' or 'tool_calls'."));
                }
                if !m["content"].is_null() {
                    check_chat_text(&m["content"], &at, false)?;
                }
                for (j, c) in calls.into_iter().flatten().enumerate() {
                    let id = c["id"].as_str().unwrap_or("");
                    if id.is_empty() {
                        return Err(format!("Missing required parameter: '{at}.tool_calls[{j}].id'."));
                    }
                    if id.len() > 40 {
                        return Err(format!("Invalid '{at}.tool_calls[{j}].id': string too long. Expected a string with maximum length 40, but got a string with length {} instead.", id.len()));
                    }
                    if c["type"] != "function" || c["function"]["name"].as_str().is_none_or(str::is_empty) || !c["function"]["arguments"].is_string() {
                        return Err(format!("Invalid '{at}.tool_calls[{j}]': expected a function call with a name and string arguments."));
                    }
                    open.push(id.to_owned());
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                match open.iter().position(|o| o == id) {
                    Some(k) => {
                        open.remove(k);
                    }
                    None => return Err(format!("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. ('{at}.tool_call_id' is '{id}')")),
                }
                check_chat_text(&m["content"], &at, false)?;
            }
            other => return Err(format!("Invalid value: '{other}'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'. ('{at}.role')")),
        }
    }
    if !open.is_empty() {
        return Err(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            open.join(", ")
        ));
    }
    Ok(())
}

fn check_chat_text(content: &Value, at: &str, images: bool) -> Result<(), String> {
    match content {
        Value::String(_) => Ok(()),
        Value::Array(parts) => {
            for (k, p) in parts.iter().enumerate() {
                match p["type"].as_str() {
                    Some("text") if p["text"].is_string() => {}
                    Some("image_url") if images && p["image_url"]["url"].is_string() => {}
                    _ => {
                        return Err(format!(
                            "Invalid '{at}.content[{k}]': not a content part this role may send."
                        ))
                    }
                }
            }
            Ok(())
        }
        _ => Err(format!(
            "Invalid '{at}.content': expected a string or an array of content parts."
        )),
    }
}

/// Check a `POST /v1/responses` body.
pub fn validate_responses(body: &Value) -> Result<(), String> {
    let obj = body
        .as_object()
        .ok_or("The request body must be a JSON object.")?;
    check_model(obj)?;
    check_positive(obj, "max_output_tokens")?;
    if obj
        .get("instructions")
        .is_some_and(|i| !i.is_string() && !i.is_null())
    {
        return Err("Invalid 'instructions': expected a string.".into());
    }
    check_tools(obj, "name", |t| t["name"].as_str().unwrap_or(""))?;
    let stored = obj.get("store").and_then(Value::as_bool) != Some(false);
    let items = match obj.get("input") {
        Some(Value::String(_)) => return Ok(()),
        Some(Value::Array(a)) => a,
        None => return Err("Missing required parameter: 'input'.".into()),
        Some(_) => return Err("Invalid 'input': expected a string or an array of items.".into()),
    };
    // Each call id with whether an output answered it yet.
    let mut calls: Vec<(String, bool)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = item["type"]
            .as_str()
            .unwrap_or(if item.get("role").is_some() {
                "message"
            } else {
                ""
            });
        match kind {
            "message" => check_input_message(item, &at)?,
            "function_call" => {
                let id = item["call_id"].as_str().unwrap_or("");
                if id.is_empty()
                    || item["name"].as_str().is_none_or(str::is_empty)
                    || !item["arguments"].is_string()
                {
                    return Err(format!(
                        "Invalid '{at}': a function_call needs call_id, name and string arguments."
                    ));
                }
                calls.push((id.to_owned(), false));
            }
            "function_call_output" => check_call_output(item, &at, &mut calls)?,
            "reasoning" => check_reasoning(item, items.get(i + 1), &at, stored)?,
            other => return Err(format!("Invalid value: '{other}'. ('{at}.type')")),
        }
    }
    if let Some((id, _)) = calls.iter().find(|(_, answered)| !answered) {
        return Err(format!("No tool output found for function call {id}."));
    }
    Ok(())
}

/// A `message` input item: a known role, and content parts that role may send.
fn check_input_message(item: &Value, at: &str) -> Result<(), String> {
    let role = item["role"].as_str().unwrap_or("");
    let allowed: &[&str] = match role {
        "user" | "system" | "developer" => &["input_text", "input_image"],
        "assistant" => &["output_text", "refusal"],
        other => return Err(format!("Invalid value: '{other}'. Supported values are: 'user', 'assistant', 'system' and 'developer'. ('{at}.role')")),
    };
    match &item["content"] {
        Value::String(_) => Ok(()),
        Value::Array(parts) => {
            for (k, p) in parts.iter().enumerate() {
                let t = p["type"].as_str().unwrap_or("");
                if !allowed.contains(&t) {
                    return Err(format!("Invalid value: '{t}'. Supported values for role '{role}' are: {}. ('{at}.content[{k}].type')", allowed.join(", ")));
                }
            }
            Ok(())
        }
        _ => Err(format!(
            "Invalid '{at}.content': expected a string or an array."
        )),
    }
}

/// A `function_call_output` item: it answers an earlier call (marked answered) with output.
fn check_call_output(item: &Value, at: &str, calls: &mut [(String, bool)]) -> Result<(), String> {
    let id = item["call_id"].as_str().unwrap_or("");
    match calls.iter_mut().find(|(c, _)| c == id) {
        Some(c) => c.1 = true,
        None => {
            return Err(format!(
                "No tool call found for function call output with call_id {id}."
            ))
        }
    }
    if !item["output"].is_string() && !item["output"].is_array() {
        return Err(format!("Invalid '{at}.output': expected a string."));
    }
    Ok(())
}

/// A `reasoning` item: sent back whole (its encrypted content matching its summary) and
/// followed (`next`) by the item it led to.
fn check_reasoning(
    item: &Value,
    next: Option<&Value>,
    at: &str,
    stored: bool,
) -> Result<(), String> {
    if !stored {
        if let Some(id) = item.get("id").and_then(Value::as_str) {
            return Err(format!("Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."));
        }
    }
    let summary: String = item["summary"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    match item["encrypted_content"].as_str() {
        Some(enc) if enc == crate::validate::signature(&summary) => {}
        Some(_) => {
            return Err(format!(
                "The encrypted content for item {at} could not be verified."
            ))
        }
        None => {
            return Err(format!(
            "Invalid '{at}': a reasoning item sent back without store needs its encrypted_content."
        ))
        }
    }
    if next.is_none_or(|n| n["type"] == "reasoning") {
        return Err(format!(
            "Item '{at}' of type 'reasoning' was provided without its required following item."
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The Messages API view

/// The request in the Messages API's shape: system, messages (text, tool_use, tool_result and
/// thinking blocks, roles alternating as the Messages API has them), tool names, model.
pub fn view(d: Dialect, body: &Value) -> Value {
    let mut parts = ViewParts::default();
    let tools: Vec<Value> = match d {
        Dialect::Messages | Dialect::Vertex | Dialect::Bedrock => return body.clone(),
        Dialect::Chat => {
            for m in body["messages"].as_array().into_iter().flatten() {
                parts.chat_message(m);
            }
            body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| json!({"name": t["function"]["name"]}))
                .collect()
        }
        Dialect::Responses => {
            if let Some(i) = body["instructions"].as_str() {
                parts.system.push(json!({"type": "text", "text": i}));
            }
            let input = match &body["input"] {
                Value::String(s) => vec![json!({"type": "message", "role": "user", "content": s})],
                Value::Array(a) => a.clone(),
                _ => vec![],
            };
            for item in &input {
                parts.responses_item(item);
            }
            body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| json!({"name": t["name"]}))
                .collect()
        }
    };
    let mut v = json!({"model": body["model"], "system": parts.system,
                       "messages": parts.messages, "stream": body["stream"]});
    if !tools.is_empty() {
        v["tools"] = Value::Array(tools);
    }
    v
}

/// The system blocks and messages of a view, built up one request message or item at a time.
#[derive(Default)]
struct ViewParts {
    system: Vec<Value>,
    messages: Vec<Value>,
}

/// The texts of a content value: a string, or the `text` of each part of an array.
fn text_of(c: &Value) -> Vec<String> {
    match c {
        Value::String(s) => vec![s.clone()],
        Value::Array(ps) => ps
            .iter()
            .filter_map(|p| p["text"].as_str().map(str::to_owned))
            .collect(),
        _ => vec![],
    }
}

impl ViewParts {
    /// Add a block to the last message when it has this role, else start a message with it.
    fn push(&mut self, role: &str, block: Value) {
        match self.messages.last_mut() {
            Some(m) if m["role"] == role => {
                if let Some(c) = m["content"].as_array_mut() {
                    c.push(block);
                }
            }
            _ => self
                .messages
                .push(json!({"role": role, "content": [block]})),
        }
    }

    /// Add the texts of `content` as system blocks.
    fn system_texts(&mut self, content: &Value) {
        for t in text_of(content) {
            self.system.push(json!({"type": "text", "text": t}));
        }
    }

    /// Add the texts of `content` as text blocks of `role`.
    fn texts(&mut self, role: &str, content: &Value) {
        for t in text_of(content) {
            self.push(role, json!({"type": "text", "text": t}));
        }
    }

    /// Add one Chat Completions message.
    fn chat_message(&mut self, m: &Value) {
        match m["role"].as_str().unwrap_or("") {
            "system" | "developer" => self.system_texts(&m["content"]),
            "user" => self.texts("user", &m["content"]),
            "assistant" => {
                self.texts("assistant", &m["content"]);
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let args = c["function"]["arguments"].as_str().unwrap_or("{}");
                    self.push(
                        "assistant",
                        json!({"type": "tool_use", "id": c["id"],
                        "name": c["function"]["name"],
                        "input": serde_json::from_str::<Value>(args).unwrap_or(Value::Null)}),
                    );
                }
            }
            "tool" => self.push(
                "user",
                json!({"type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": text_of(&m["content"]).join("\n")}),
            ),
            _ => {}
        }
    }

    /// Add one Responses input item.
    fn responses_item(&mut self, item: &Value) {
        match item["type"].as_str().unwrap_or("message") {
            "message" => match item["role"].as_str() {
                Some("assistant") => self.texts("assistant", &item["content"]),
                Some("system" | "developer") => self.system_texts(&item["content"]),
                _ => self.texts("user", &item["content"]),
            },
            "function_call" => {
                let args = item["arguments"].as_str().unwrap_or("{}");
                self.push(
                    "assistant",
                    json!({"type": "tool_use", "id": item["call_id"],
                    "name": item["name"],
                    "input": serde_json::from_str::<Value>(args).unwrap_or(Value::Null)}),
                );
            }
            "function_call_output" => self.push(
                "user",
                json!({"type": "tool_result",
                "tool_use_id": item["call_id"], "content": text_of(&item["output"]).join("\n")}),
            ),
            "reasoning" => self.push(
                "assistant",
                json!({"type": "thinking",
                "thinking": item["summary"][0]["text"], "signature": item["encrypted_content"]}),
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(messages: Value) -> Value {
        json!({"model": "gpt", "messages": messages})
    }

    fn call(id: &str) -> Value {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]})
    }

    #[test]
    fn chat_validator_refuses_what_the_api_refuses() {
        let user = json!({"role": "user", "content": "hi"});
        let ok =
            chat(json!([user, call("c1"), {"role": "tool", "tool_call_id": "c1", "content": "x"}]));
        assert_eq!(validate_chat(&ok), Ok(()));
        let unanswered = chat(json!([user, call("c1"), user]));
        assert!(validate_chat(&unanswered).unwrap_err().contains("c1"));
        let unknown =
            chat(json!([user, call("c1"), {"role": "tool", "tool_call_id": "c9", "content": "x"}]));
        assert!(validate_chat(&unknown).unwrap_err().contains("c9"));
        let role = chat(json!([{"role": "robot", "content": "x"}]));
        assert!(validate_chat(&role).unwrap_err().contains("robot"));
        let long = "c".repeat(41);
        let too_long = chat(
            json!([user, call(&long), {"role": "tool", "tool_call_id": long, "content": "x"}]),
        );
        assert!(validate_chat(&too_long)
            .unwrap_err()
            .contains("maximum length 40"));
        let mut opts = ok;
        opts["stream_options"] = json!({"include_usage": true});
        assert!(
            validate_chat(&opts).is_err(),
            "stream_options without stream"
        );
    }

    #[test]
    fn responses_validator_refuses_what_the_api_refuses() {
        let fc = json!({"type": "function_call", "call_id": "call_1", "name": "Bash", "arguments": "{}"});
        let out = json!({"type": "function_call_output", "call_id": "call_1", "output": "x"});
        let body = |input: Value| json!({"model": "gpt", "input": input, "store": false});
        assert_eq!(validate_responses(&body(json!([fc, out]))), Ok(()));
        assert!(validate_responses(&body(json!([fc])))
            .unwrap_err()
            .contains("No tool output found"));
        assert!(validate_responses(&body(json!([out])))
            .unwrap_err()
            .contains("No tool call found"));
        let sig = crate::validate::signature("why");
        let reasoning = json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "why"}],
                               "encrypted_content": sig});
        assert_eq!(
            validate_responses(&body(json!([reasoning, fc, out]))),
            Ok(())
        );
        let mut with_id = reasoning.clone();
        with_id["id"] = json!("rs_1");
        assert!(validate_responses(&body(json!([with_id, fc, out])))
            .unwrap_err()
            .contains("not persisted"));
        let mut forged = reasoning.clone();
        forged["encrypted_content"] = json!("made-up");
        assert!(validate_responses(&body(json!([forged, fc, out]))).is_err());
        assert!(validate_responses(&body(json!([reasoning])))
            .unwrap_err()
            .contains("required following item"));
    }

    #[test]
    fn views_read_every_dialect_alike() {
        let c = chat(json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task A"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
        ]));
        let v = view(Dialect::Chat, &c);
        assert_eq!(v["system"][0]["text"], "sys");
        assert_eq!(v["messages"][1]["content"][0]["input"]["command"], "ls");
        assert_eq!(v["messages"][2]["content"][0]["type"], "tool_result");
        let r = json!({"model": "gpt", "instructions": "sys", "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task A"}]}]});
        let v = view(Dialect::Responses, &r);
        assert_eq!(v["messages"][0]["content"][0]["text"], "task A");
        assert_eq!(v["system"][0]["text"], "sys");
    }
}
