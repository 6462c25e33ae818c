//! The request validator: the rules the real Messages API enforces that a client can break.
//!
//! Messages name the offending place the way the real API does (`messages.3.content.0: ...`),
//! in our own words.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// Check a `POST /v1/messages` body; `Err` carries the message of the 400 the server sends.
pub fn validate_request(body: &Value) -> Result<(), String> {
    let obj = body
        .as_object()
        .ok_or("the request body must be a JSON object")?;
    match obj.get("model") {
        None => return Err("model: field required".into()),
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        Some(_) => return Err("model: must be a non-empty string".into()),
    }
    match obj.get("max_tokens") {
        None => return Err("max_tokens: field required".into()),
        Some(v) if v.as_u64().is_some_and(|n| n > 0) => {}
        Some(v) => return Err(format!("max_tokens: must be a positive integer, found {v}")),
    }
    if let Some(stream) = obj.get("stream") {
        if !stream.is_boolean() && !stream.is_null() {
            return Err("stream: must be a boolean".into());
        }
    }
    if let Some(system) = obj.get("system") {
        check_system(system)?;
    }
    if let Some(tools) = obj.get("tools") {
        check_tools(tools)?;
    }
    let marks = crate::cache::breakpoints(body);
    if marks > crate::cache::MAX_BREAKPOINTS {
        return Err(format!(
            "cache_control: at most {} blocks may carry cache_control, found {marks}",
            crate::cache::MAX_BREAKPOINTS
        ));
    }
    let messages = match obj.get("messages") {
        None => return Err("messages: field required".into()),
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => return Err("messages: at least one message is required".into()),
        Some(_) => return Err("messages: must be an array of messages".into()),
    };
    check_messages(messages)?;
    check_thinking_kept(body)
}

fn check_system(system: &Value) -> Result<(), String> {
    match system {
        Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (i, b) in blocks.iter().enumerate() {
                let at = format!("system.{i}");
                let b = b
                    .as_object()
                    .ok_or_else(|| format!("{at}: must be a text block object"))?;
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(format!(
                        "{at}: only blocks of type \"text\" are allowed in system"
                    ));
                }
                check_text(b, &at)?;
            }
            Ok(())
        }
        _ => Err("system: must be a string or an array of text blocks".into()),
    }
}

fn check_tools(tools: &Value) -> Result<(), String> {
    let list = tools.as_array().ok_or("tools: must be an array")?;
    let mut names = HashSet::new();
    for (i, t) in list.iter().enumerate() {
        let t = t
            .as_object()
            .ok_or_else(|| format!("tools.{i}: must be an object"))?;
        let name = match t.get("name") {
            Some(Value::String(s)) if !s.is_empty() => s,
            _ => {
                return Err(format!(
                    "tools.{i}.name: field required (a non-empty string)"
                ))
            }
        };
        // Server tools (`type` other than "custom") carry no schema.
        let custom = matches!(t.get("type"), None | Some(Value::Null))
            || t.get("type").and_then(Value::as_str) == Some("custom");
        if custom && !t.get("input_schema").is_some_and(Value::is_object) {
            return Err(format!(
                "tools.{i}.input_schema: field required (a JSON schema object) for tool `{name}`"
            ));
        }
        if !names.insert(name.as_str()) {
            return Err(format!(
                "tools: tool names must be unique; `{name}` appears more than once"
            ));
        }
    }
    Ok(())
}

fn check_text(block: &Map<String, Value>, at: &str) -> Result<(), String> {
    match block.get("text") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(()),
        Some(Value::String(_)) => Err(format!(
            "{at}: text content blocks must contain non-whitespace text"
        )),
        _ => Err(format!("{at}.text: field required (a string)")),
    }
}

/// What the previous assistant message asked for: its index and its tool_use ids.
struct Pending {
    index: usize,
    ids: Vec<String>,
}

fn check_messages(messages: &[Value]) -> Result<(), String> {
    let mut seen_ids: HashSet<String> = HashSet::new();
    let mut prev: Option<(usize, &str)> = None;
    let mut pending: Option<Pending> = None;

    for (i, m) in messages.iter().enumerate() {
        let m = m
            .as_object()
            .ok_or_else(|| format!("messages.{i}: each message must be an object"))?;
        let role = message_role(m, i)?;
        let blocks = content_blocks(m, i)?;

        if role == "system" {
            check_system_message(&blocks, i)?;
            continue;
        }

        if let Some((j, prev_role)) = prev {
            if prev_role == role {
                return Err(format!(
                    "messages.{i}: messages.{j} and messages.{i} both use the \"{role}\" role; \
                     roles must alternate between \"user\" and \"assistant\""
                ));
            }
        }

        let (tool_uses, results) = check_blocks(&blocks, i, role, pending.as_ref(), &mut seen_ids)?;

        if let Some(p) = pending.take() {
            let missing: Vec<&str> = p
                .ids
                .iter()
                .map(String::as_str)
                .filter(|id| !results.contains(id))
                .collect();
            if !missing.is_empty() {
                return Err(unpaired(p.index, &missing));
            }
        }
        if !tool_uses.is_empty() {
            pending = Some(Pending {
                index: i,
                ids: tool_uses,
            });
        }
        prev = Some((i, role));
    }
    if let Some(p) = pending {
        let ids: Vec<&str> = p.ids.iter().map(String::as_str).collect();
        return Err(unpaired(p.index, &ids));
    }
    Ok(())
}

/// The role of message `i`: user, assistant or system, and user for the first.
fn message_role(m: &Map<String, Value>, i: usize) -> Result<&str, String> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some(r @ ("user" | "assistant" | "system")) => r,
        Some(other) => {
            return Err(format!(
                "messages.{i}.role: must be \"user\" or \"assistant\", found \"{other}\""
            ))
        }
        None => return Err(format!("messages.{i}.role: field required")),
    };
    if i == 0 && role != "user" {
        return Err(format!(
            "messages.0: the first message must use the \"user\" role, found \"{role}\""
        ));
    }
    Ok(role)
}

/// A mid-conversation `role: "system"` message, as the real CLI sends (an environment block):
/// text only, and it takes no part in alternation or tool pairing.
fn check_system_message(blocks: &[Map<String, Value>], i: usize) -> Result<(), String> {
    for (k, b) in blocks.iter().enumerate() {
        if b.get("type").and_then(Value::as_str) != Some("text") {
            return Err(format!(
                "messages.{i}.content.{k}: system messages may only contain text blocks"
            ));
        }
    }
    Ok(())
}

/// Check the blocks of message `i` (from `role`); returns the tool_use ids it asks for and the
/// tool_use ids its tool_result blocks answer.
fn check_blocks<'b>(
    blocks: &'b [Map<String, Value>],
    i: usize,
    role: &str,
    pending: Option<&Pending>,
    seen_ids: &mut HashSet<String>,
) -> Result<(Vec<String>, HashSet<&'b str>), String> {
    let mut tool_uses = Vec::new();
    let mut results: HashSet<&str> = HashSet::new();
    for (k, b) in blocks.iter().enumerate() {
        let at = format!("messages.{i}.content.{k}");
        match b.get("type").and_then(Value::as_str) {
            Some("text") => check_text(b, &at)?,
            Some("tool_use") => tool_uses.push(check_tool_use(b, &at, role, seen_ids)?),
            Some("tool_result") => {
                let id = check_tool_result(b, &at, role, pending)?;
                if !results.insert(id) {
                    return Err(format!(
                        "{at}: each tool_use must have a single result; found more than one \
                         tool_result for {id}"
                    ));
                }
            }
            Some("thinking") => check_thinking(b, &at, role)?,
            Some("image") => {
                if role != "user" {
                    return Err(format!(
                        "{at}: image blocks may only appear in user messages"
                    ));
                }
                check_image(b, &at)?;
            }
            Some("redacted_thinking") => {
                if !matches!(b.get("data"), Some(Value::String(d)) if !d.is_empty()) {
                    return Err(format!("{at}.data: field required"));
                }
            }
            Some(_) => {}
            None => return Err(format!("{at}.type: field required")),
        }
    }
    Ok((tool_uses, results))
}

/// A tool_use block: in an assistant message, with a fresh id, a name and an object input.
/// Returns its id, now remembered in `seen_ids`.
fn check_tool_use(
    b: &Map<String, Value>,
    at: &str,
    role: &str,
    seen_ids: &mut HashSet<String>,
) -> Result<String, String> {
    if role != "assistant" {
        return Err(format!(
            "{at}: tool_use blocks may only appear in assistant messages"
        ));
    }
    let id = match b.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(format!("{at}.id: field required (a non-empty string)")),
    };
    if !matches!(b.get("name"), Some(Value::String(s)) if !s.is_empty()) {
        return Err(format!("{at}.name: field required (a non-empty string)"));
    }
    if !b.get("input").is_some_and(Value::is_object) {
        return Err(format!("{at}.input: must be a JSON object"));
    }
    if !seen_ids.insert(id.clone()) {
        return Err(format!(
            "{at}: tool_use ids must be unique; `{id}` is used more than once"
        ));
    }
    Ok(id)
}

/// A tool_result block: in a user message, answering a tool_use of the previous message, its
/// content text and image blocks. Returns the tool_use id it answers.
fn check_tool_result<'b>(
    b: &'b Map<String, Value>,
    at: &str,
    role: &str,
    pending: Option<&Pending>,
) -> Result<&'b str, String> {
    if role != "user" {
        return Err(format!(
            "{at}: tool_result blocks may only appear in user messages"
        ));
    }
    let id = match b.get("tool_use_id") {
        Some(Value::String(s)) if !s.is_empty() => s.as_str(),
        _ => {
            return Err(format!(
                "{at}.tool_use_id: field required (a non-empty string)"
            ))
        }
    };
    let expected = pending.is_some_and(|p| p.ids.iter().any(|x| x == id));
    if !expected {
        return Err(format!(
            "{at}: unexpected tool_use_id found in tool_result blocks: {id}. \
             Each tool_result block must answer a tool_use block of the \
             previous message."
        ));
    }
    if let Some(Value::Array(inner)) = b.get("content") {
        for (n, c) in inner.iter().enumerate() {
            let at = format!("{at}.content.{n}");
            let c = c
                .as_object()
                .ok_or_else(|| format!("{at}: must be an object"))?;
            match c.get("type").and_then(Value::as_str) {
                Some("text") => check_text(c, &at)?,
                Some("image") => check_image(c, &at)?,
                other => {
                    return Err(format!(
                        "{at}.type: tool results may hold text and image blocks, found {other:?}"
                    ))
                }
            }
        }
    }
    Ok(id)
}

/// A thinking block: in an assistant message, with a signature that (when keel-mock wrote
/// it) still matches the text.
fn check_thinking(b: &Map<String, Value>, at: &str, role: &str) -> Result<(), String> {
    if role != "assistant" {
        return Err(format!(
            "{at}: thinking blocks may only appear in assistant messages"
        ));
    }
    let thinking = b
        .get("thinking")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match b.get("signature").and_then(Value::as_str) {
        Some(sig) if sig.starts_with(SIGNATURE_PREFIX) && sig != signature(thinking) => {
            Err(format!(
                "{at}.signature: invalid signature in thinking block: the thinking \
                 text or its signature was changed since the model wrote it"
            ))
        }
        Some(sig) if !sig.is_empty() => Ok(()),
        _ => Err(format!("{at}.signature: field required")),
    }
}

/// How keel-mock signs the thinking it writes, so that a changed thinking block is caught.
const SIGNATURE_PREFIX: &str = "kmsig-";

/// The signature keel-mock gives `thinking` (FNV-1a over its bytes).
pub fn signature(thinking: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in thinking.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{SIGNATURE_PREFIX}{h:016x}")
}

/// With thinking on, the last assistant message of a tool-use loop must still start with its
/// thinking block, as the API requires (dropping it is an error there, so here too).
fn check_thinking_kept(body: &Value) -> Result<(), String> {
    if body
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        != Some("enabled")
    {
        return Ok(());
    }
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Ok(());
    };
    let Some((i, last)) = messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| m.get("role").and_then(Value::as_str) == Some("assistant"))
    else {
        return Ok(());
    };
    let blocks = last
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let uses_tools = blocks
        .iter()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
    let first = blocks
        .first()
        .and_then(|b| b.get("type"))
        .and_then(Value::as_str);
    let answered = messages.get(i + 1).is_some();
    if uses_tools && answered && !matches!(first, Some("thinking" | "redacted_thinking")) {
        return Err(format!(
            "messages.{i}.content.0: with thinking enabled, an assistant message with tool_use \
             must start with its thinking block (sent back unchanged), found {}",
            first.unwrap_or("nothing")
        ));
    }
    Ok(())
}

/// An image block: base64 data of a type the API takes, within its size limit.
fn check_image(b: &Map<String, Value>, at: &str) -> Result<(), String> {
    let src = b
        .get("source")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{at}.source: field required"))?;
    match src.get("type").and_then(Value::as_str) {
        Some("base64") => {}
        Some("url") => return Ok(()),
        other => {
            return Err(format!(
                "{at}.source.type: expected \"base64\" or \"url\", found {other:?}"
            ))
        }
    }
    let media = src.get("media_type").and_then(Value::as_str).unwrap_or("");
    if !["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&media) {
        return Err(format!(
            "{at}.source.media_type: expected image/png, image/jpeg, image/gif or image/webp, found {media:?}"
        ));
    }
    let data = src.get("data").and_then(Value::as_str).unwrap_or("");
    if data.is_empty() {
        return Err(format!("{at}.source.data: field required"));
    }
    if data.len() > 5 * 1024 * 1024 {
        return Err(format!(
            "{at}.source.data: image exceeds 5 MB maximum: {} bytes",
            data.len()
        ));
    }
    Ok(())
}

fn unpaired(index: usize, ids: &[&str]) -> String {
    format!(
        "messages.{index}: tool_use ids were found without tool_result blocks immediately after: \
         {}. Each tool_use block must have a corresponding tool_result block in the next message.",
        ids.join(", ")
    )
}

/// The content of message `i` as blocks; a string becomes one text block.
fn content_blocks(m: &Map<String, Value>, i: usize) -> Result<Vec<Map<String, Value>>, String> {
    match m.get("content") {
        Some(Value::String(s)) => {
            if s.trim().is_empty() {
                return Err(format!(
                    "messages.{i}.content: must not be empty (non-whitespace text is required)"
                ));
            }
            let mut b = Map::new();
            b.insert("type".into(), Value::String("text".into()));
            b.insert("text".into(), Value::String(s.clone()));
            Ok(vec![b])
        }
        Some(Value::Array(list)) => {
            if list.is_empty() {
                return Err(format!(
                    "messages.{i}.content: must not be empty (at least one content block is required)"
                ));
            }
            list.iter()
                .enumerate()
                .map(|(k, b)| {
                    b.as_object().cloned().ok_or_else(|| {
                        format!("messages.{i}.content.{k}: each content block must be an object")
                    })
                })
                .collect()
        }
        Some(_) => Err(format!(
            "messages.{i}.content: must be a string or an array of content blocks"
        )),
        None => Err(format!("messages.{i}.content: field required")),
    }
}

#[cfg(test)]
mod tests {
    use super::validate_request;
    use serde_json::{json, Value};

    fn req(messages: Value) -> Value {
        json!({"model": "m", "max_tokens": 10, "messages": messages})
    }

    fn tool_turn(id: &str) -> Value {
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "running"},
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}
        ]})
    }

    fn result(id: &str) -> Value {
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]})
    }

    #[test]
    fn accepts_a_full_tool_conversation() {
        let body = req(json!([
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "environment: linux"},
            tool_turn("a"),
            result("a"),
            {"role": "assistant", "content": "done"}
        ]));
        assert_eq!(validate_request(&body), Ok(()));
    }

    #[test]
    fn top_level_rules() {
        let e = |v: Value| validate_request(&v).unwrap_err();
        assert_eq!(e(json!([])), "the request body must be a JSON object");
        assert_eq!(
            e(json!({"max_tokens": 1, "messages": []})),
            "model: field required"
        );
        assert!(e(json!({"model": "m", "max_tokens": 0, "messages": []})).starts_with("max_tokens"));
        assert_eq!(
            e(json!({"model": "m", "max_tokens": 1, "messages": []})),
            "messages: at least one message is required"
        );
        let mut v = req(json!([{"role": "user", "content": "x"}]));
        v["system"] = json!(42);
        assert_eq!(
            e(v.clone()),
            "system: must be a string or an array of text blocks"
        );
        v["system"] = json!([{"type": "text", "text": "ok"}]);
        v["tools"] = json!([{"name": "Bash"}]);
        assert!(e(v.clone()).starts_with("tools.0.input_schema"));
        v["tools"] = json!([{"name": "web_search", "type": "web_search_20250305"}]);
        assert_eq!(validate_request(&v), Ok(()));
    }

    #[test]
    fn message_rules() {
        let e = |m: Value| validate_request(&req(m)).unwrap_err();
        assert!(
            e(json!([{"role": "assistant", "content": "x"}])).starts_with("messages.0: the first")
        );
        assert!(
            e(json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]))
                .starts_with("messages.1: messages.0 and messages.1 both use the \"user\" role")
        );
        assert!(e(json!([{"role": "bot", "content": "x"}])).starts_with("messages.0.role"));
        assert!(e(json!([{"role": "user", "content": ""}]))
            .starts_with("messages.0.content: must not be empty"));
        assert!(e(json!([{"role": "user", "content": []}]))
            .starts_with("messages.0.content: must not be empty"));
        assert_eq!(
            e(json!([{"role": "user", "content": [{"type": "text", "text": " "}]}])),
            "messages.0.content.0: text content blocks must contain non-whitespace text"
        );
        assert_eq!(
            e(json!([{"role": "user", "content": "a"}, tool_turn("t1"), {"role": "user", "content": "no"}])),
            "messages.1: tool_use ids were found without tool_result blocks immediately after: t1. \
             Each tool_use block must have a corresponding tool_result block in the next message."
        );
        assert!(
            e(json!([{"role": "user", "content": "a"}, tool_turn("t1")]))
                .starts_with("messages.1: tool_use ids")
        );
        assert_eq!(
            e(json!([{"role": "user", "content": "a"}, tool_turn("t1"), result("zz")])),
            "messages.2.content.0: unexpected tool_use_id found in tool_result blocks: zz. \
             Each tool_result block must answer a tool_use block of the previous message."
        );
        assert!(e(json!([
            {"role": "user", "content": "a"}, tool_turn("t1"), result("t1"), tool_turn("t1"), result("t1")
        ]))
        .contains("tool_use ids must be unique"));
        assert!(e(json!([result("t1")])).contains("unexpected tool_use_id"));
    }
}
