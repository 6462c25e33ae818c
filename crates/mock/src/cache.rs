//! The prompt cache, simulated the way the API bills it: a request's content is a sequence of
//! blocks (tools, then system, then every message's blocks); a block with `cache_control` is a
//! breakpoint. At each breakpoint the server looks back (up to 20 blocks) for the longest
//! prefix it has cached: those tokens are cache reads; the tokens from there to the last
//! breakpoint are written to the cache; the rest is ordinary input. Token counts are a
//! deterministic estimate (a token per four bytes of each block's JSON), so tests and the
//! benchmark can state exact fractions.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The most breakpoints a request may carry.
pub const MAX_BREAKPOINTS: usize = 4;
/// How far back from a breakpoint a cached prefix is looked for, in blocks.
const LOOKBACK: usize = 20;
/// The shortest prefix that is cached, in tokens.
pub const MIN_CACHED_TOKENS: u64 = 1024;
/// How long an entry lives without being used.
const TTL: Duration = Duration::from_secs(300);
/// The most entries kept (the oldest go first).
const MAX_ENTRIES: usize = 100_000;

/// What the cache did for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Input tokens not read from or written to the cache.
    pub input: u64,
    /// Tokens read from the cache.
    pub read: u64,
    /// Tokens written to the cache.
    pub creation: u64,
}

/// The server's prompt cache.
#[derive(Default)]
pub struct PromptCache {
    entries: Mutex<HashMap<u64, Instant>>,
}

/// A request's blocks: the running hash and token count after each one, and which are
/// breakpoints.
struct Walk {
    hashes: Vec<u64>,
    tokens: Vec<u64>,
    breakpoints: Vec<usize>,
}

/// The tokens of one block, estimated from its JSON without `cache_control`.
fn walk(body: &Value) -> Walk {
    let mut w = Walk {
        hashes: Vec::new(),
        tokens: Vec::new(),
        breakpoints: Vec::new(),
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.get("model").and_then(Value::as_str).hash(&mut h);
    let mut total = 0u64;
    let mut push = |block: &Value, w: &mut Walk| {
        let (text, marked) = strip(block);
        text.hash(&mut h);
        total += (text.len() as u64).div_ceil(4);
        if marked {
            w.breakpoints.push(w.hashes.len());
        }
        w.hashes.push(h.finish());
        w.tokens.push(total);
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push(t, &mut w);
    }
    match &body["system"] {
        Value::String(s) => push(&Value::String(s.clone()), &mut w),
        Value::Array(blocks) => blocks.iter().for_each(|b| push(b, &mut w)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::Array(blocks) => blocks.iter().for_each(|b| push(b, &mut w)),
            other => push(other, &mut w),
        }
    }
    w
}

/// A block's JSON without its `cache_control`, and whether it had one.
fn strip(block: &Value) -> (String, bool) {
    match block {
        Value::Object(o) if o.contains_key("cache_control") => {
            let mut o = o.clone();
            o.remove("cache_control");
            (Value::Object(o).to_string(), true)
        }
        other => (other.to_string(), false),
    }
}

/// How many breakpoints a request carries.
pub fn breakpoints(body: &Value) -> usize {
    walk(body).breakpoints.len()
}

impl PromptCache {
    /// Bill `body` against the cache (and remember its breakpoints). The request's input is
    /// the sum of its blocks' tokens (`fallback` when it has no blocks at all), whether or not
    /// it uses the cache, so sessions with and without caching are billed alike.
    pub fn bill(&self, body: &Value, fallback: u64) -> CacheUsage {
        let w = walk(body);
        let total = w.tokens.last().copied().unwrap_or(fallback);
        let Some(&last) = w.breakpoints.last() else {
            return CacheUsage {
                input: total,
                ..CacheUsage::default()
            };
        };
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, used| now.duration_since(*used) < TTL);
        // The longest cached prefix within reach of a breakpoint.
        let mut hit: Option<usize> = None;
        for &bp in &w.breakpoints {
            for pos in (bp.saturating_sub(LOOKBACK - 1)..=bp).rev() {
                if entries.contains_key(&w.hashes[pos]) {
                    if hit.is_none_or(|h| pos > h) {
                        hit = Some(pos);
                    }
                    break;
                }
            }
        }
        let read = hit.map_or(0, |p| w.tokens[p]);
        let upto = w.tokens[last];
        let creation = if upto >= MIN_CACHED_TOKENS {
            upto.saturating_sub(read)
        } else {
            0
        };
        if let Some(p) = hit {
            entries.insert(w.hashes[p], now);
        }
        for &bp in &w.breakpoints {
            if w.tokens[bp] >= MIN_CACHED_TOKENS {
                entries.insert(w.hashes[bp], now);
            }
        }
        if entries.len() > MAX_ENTRIES {
            let mut by_age: Vec<(u64, Instant)> = entries.iter().map(|(k, v)| (*k, *v)).collect();
            by_age.sort_by_key(|(_, t)| *t);
            for (k, _) in by_age.iter().take(entries.len() - MAX_ENTRIES) {
                entries.remove(k);
            }
        }
        CacheUsage {
            input: total.saturating_sub(read + creation),
            read,
            creation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(turns: usize, mark_last: bool) -> Value {
        let mut messages = vec![json!({"role": "user", "content": "start"})];
        for i in 0..turns {
            messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("reply {i} {}", "r".repeat(400))}]}));
            messages.push(
                json!({"role": "user", "content": [{"type": "text", "text": format!("more {i}")}]}),
            );
        }
        if mark_last {
            let last = messages.last_mut().unwrap();
            last["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({
            "model": "m",
            "system": [{"type": "text", "text": "s".repeat(8000), "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
        })
    }

    #[test]
    fn the_second_request_reads_what_the_first_wrote() {
        let c = PromptCache::default();
        let first = c.bill(&body(1, true), 1);
        assert_eq!(first.read, 0);
        assert!(first.creation >= 2000, "{first:?}");
        // The next request extends the conversation; its earlier prefix is read.
        let second = c.bill(&body(2, true), 1);
        assert_eq!(second.read, first.creation, "{second:?}");
        assert!(second.creation > 0 && second.creation < 200, "{second:?}");
    }

    #[test]
    fn more_than_four_breakpoints_are_refused_like_the_api_does() {
        let mark = json!({"type": "ephemeral"});
        let blocks: Vec<Value> = (0..5)
            .map(|i| json!({"type": "text", "text": format!("part {i}"), "cache_control": mark}))
            .collect();
        let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": blocks}]});
        let err = crate::validate_request(&body).unwrap_err();
        assert!(err.contains("at most 4"), "{err}");
        let mut four = body;
        four["messages"][0]["content"][4]
            .as_object_mut()
            .unwrap()
            .remove("cache_control");
        crate::validate_request(&four).unwrap();
    }

    #[test]
    fn without_breakpoints_nothing_is_cached() {
        let c = PromptCache::default();
        let mut b = body(1, false);
        b["system"][0]
            .as_object_mut()
            .unwrap()
            .remove("cache_control");
        let all = c.bill(&b, 1);
        assert_eq!(all.read + all.creation, 0);
        assert!(all.input > 2000, "{all:?}");
        assert_eq!(c.bill(&b, 1).read, 0);
        assert_eq!(breakpoints(&b), 0);
    }
}
