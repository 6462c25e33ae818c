//! The object layout of a session in a bucket, shared with the agent SDKs' session stores:
//!
//! ```text
//! <prefix>/<project key>/<session id>/part-<13-digit ms>-<6 hex>.jsonl
//! <prefix>/<project key>/<session id>/subagents/agent-<id>/part-<13-digit ms>-<6 hex>.jsonl
//! ```
//!
//! A part holds whole JSONL lines appended to one transcript file; a file is its parts in name
//! order. A subagent's `.meta.json` sidecar travels as an `{"type":"agent_metadata", …}` line
//! among its parts (the last one wins). This module only names and parses keys: no I/O.

/// The name of a part written at `ms` (milliseconds since the epoch) with the random `tag`.
pub fn part_name(ms: u64, tag: u32) -> String {
    format!(
        "part-{:013}-{:06x}.jsonl",
        ms.min(9_999_999_999_999),
        tag & 0xff_ffff
    )
}

/// Whether `name` is a part's file name (anything else under a session is not read).
pub fn is_part(name: &str) -> bool {
    name.starts_with("part-")
        && name.ends_with(".jsonl")
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// Where a part found under a session's prefix belongs, from the path segments after it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stream {
    /// The session's own transcript.
    Main,
    /// The transcript of subagent `agent-<id>` (the id as found, without `agent-`).
    Subagent(String),
}

/// Classify the segments of a key below `<prefix>/<project>/<session>/`: `Some((stream, part
/// name))` for a part of the main transcript or of a subagent, `None` for anything else.
pub fn classify(rest: &[&str]) -> Option<(Stream, String)> {
    match rest {
        [name] if is_part(name) => Some((Stream::Main, (*name).to_owned())),
        ["subagents", agent, name] if is_part(name) => {
            let id = agent.strip_prefix("agent-")?;
            safe_id(id).then(|| (Stream::Subagent(id.to_owned()), (*name).to_owned()))
        }
        _ => None,
    }
}

/// Whether `id` may name an object or a file: letters, digits, `-` and `_`, 1 to 128 bytes.
pub fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The subagent id of a local subagent transcript name (`agent-<id>.jsonl`).
pub fn subagent_of_file(name: &str) -> Option<&str> {
    let id = name.strip_prefix("agent-")?.strip_suffix(".jsonl")?;
    safe_id(id).then_some(id)
}

/// Whether a JSONL line is an `agent_metadata` entry (the sidecar, not a transcript line).
pub fn is_agent_metadata(line: &[u8]) -> bool {
    // Cheap test first; then a parse, so that a transcript line quoting the words is not taken.
    memchr_contains(line, b"agent_metadata")
        && serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .is_some_and(|v| v["type"] == "agent_metadata")
}

fn memchr_contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_sort_by_time_and_are_recognised() {
        let a = part_name(1_700_000_000_000, 0xabcdef);
        let b = part_name(1_700_000_000_001, 0x000001);
        assert_eq!(a, "part-1700000000000-abcdef.jsonl");
        assert!(a < b);
        assert!(is_part(&a) && is_part(&b));
        for not in [
            "latest.json",
            "part-1.json",
            "../part-1.jsonl",
            "part-a/b.jsonl",
            "",
        ] {
            assert!(!is_part(not), "{not}");
        }
    }

    #[test]
    fn keys_under_a_session_are_classified() {
        let p = "part-0000000000001-000001.jsonl";
        assert_eq!(classify(&[p]), Some((Stream::Main, p.to_owned())));
        assert_eq!(
            classify(&["subagents", "agent-a1", p]),
            Some((Stream::Subagent("a1".into()), p.to_owned()))
        );
        assert_eq!(classify(&["subagents", "agent-", p]), None);
        assert_eq!(classify(&["subagents", "agent-..", p]), None);
        assert_eq!(classify(&["latest.json"]), None);
        assert_eq!(classify(&["other", p]), None);
        assert_eq!(subagent_of_file("agent-x9.jsonl"), Some("x9"));
        assert_eq!(subagent_of_file("agent-x9.meta.json"), None);
    }

    #[test]
    fn metadata_lines_are_told_from_transcript_lines() {
        assert!(is_agent_metadata(
            br#"{"type":"agent_metadata","agentType":"x"}"#
        ));
        assert!(!is_agent_metadata(
            br#"{"type":"user","message":{"content":"agent_metadata"}}"#
        ));
    }
}
