//! The names the model sees for MCP tools: `mcp__<server>__<tool>`.
//!
//! The Messages API takes tool names of at most 64 bytes of `[A-Za-z0-9_-]`. Other characters
//! become `_`; in the server's part, runs of `_` become one and a trailing `_` goes, so that the
//! first `__` after `mcp__` always ends the server's name (permission rules such as
//! `mcp__github` rely on it). A name that is too long keeps its start and ends in `_` and 8 hex
//! digits of a hash of the server and tool names, so that two long names that share a start
//! stay apart; names that still collide get `_2`, `_3`, ... in the order given. The same
//! servers and tools in the same order always get the same names.

/// The longest tool name the API takes.
pub const MAX_NAME_BYTES: usize = 64;

/// `s` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The server's part of its tools' names: sanitized, no `__` inside, no `_` at the end.
pub fn server_part(server: &str) -> String {
    let mut out = String::with_capacity(server.len());
    for c in sanitize(server).chars() {
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str("server");
    }
    out
}

/// The name of `tool` of `server`, at most [`MAX_NAME_BYTES`] bytes.
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{}__{}", server_part(server), sanitize(tool));
    if full.len() <= MAX_NAME_BYTES {
        return full;
    }
    // All ASCII after sanitizing, so any byte index is a character boundary.
    let tag = format!(
        "_{:08x}",
        fnv1a(&[server.as_bytes(), b"\0", tool.as_bytes()])
    );
    format!("{}{tag}", &full[..MAX_NAME_BYTES - tag.len()])
}

/// Names for `tools` (server, tool), in the same order, unique: the first of several that come
/// out the same keeps the name, the next get `_2`, `_3`, ... (shortened to fit when needed).
pub fn assign(tools: &[(String, String)]) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    tools
        .iter()
        .map(|(server, tool)| {
            let base = tool_name(server, tool);
            let mut name = base.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                let suffix = format!("_{n}");
                let keep = base.len().min(MAX_NAME_BYTES - suffix.len());
                name = format!("{}{suffix}", &base[..keep]);
                n += 1;
            }
            name
        })
        .collect()
}

/// FNV-1a, 32 bits: a small stable hash (not for security, only to keep long names apart).
fn fnv1a(parts: &[&[u8]]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(n: &str) -> bool {
        n.len() <= MAX_NAME_BYTES
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn names_are_prefixed_sanitized_and_bounded() {
        assert_eq!(
            tool_name("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(
            tool_name("my server", "do.it/now"),
            "mcp__my_server__do_it_now"
        );
        assert_eq!(tool_name("ünï", "日本"), "mcp___n____");
        // The first `__` after `mcp__` ends the server's name, whatever the server is called.
        assert_eq!(tool_name("a__b", "t"), "mcp__a_b__t");
        assert_eq!(tool_name("a_", "t__u"), "mcp__a__t__u");
        assert_eq!(tool_name("__", "t"), "mcp__server__t");
        let long = tool_name(&"s".repeat(40), &"t".repeat(40));
        assert_eq!(long.len(), MAX_NAME_BYTES);
        assert!(valid(&long), "{long}");
        // Two long names with the same start stay apart, and a name is always the same.
        let other = tool_name(&"s".repeat(40), &format!("{}x", "t".repeat(39)));
        assert_ne!(long, other);
        assert_eq!(long, tool_name(&"s".repeat(40), &"t".repeat(40)));
    }

    #[test]
    fn collisions_get_numbered_in_order_and_stay_valid() {
        let tools: Vec<(String, String)> = [("a.b", "x"), ("a_b", "x"), ("a b", "x"), ("a_b", "y")]
            .iter()
            .map(|(s, t)| (s.to_string(), t.to_string()))
            .collect();
        assert_eq!(
            assign(&tools),
            vec![
                "mcp__a_b__x",
                "mcp__a_b__x_2",
                "mcp__a_b__x_3",
                "mcp__a_b__y"
            ]
        );
        assert_eq!(server_part("a..b"), "a_b");
        // Long names that collide are shortened to fit their number.
        let long: Vec<(String, String)> =
            (0..12).map(|_| ("s".repeat(30), "t".repeat(40))).collect();
        let names = assign(&long);
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        assert!(names.iter().all(|n| valid(n)), "{names:?}");
        assert_eq!(names, assign(&long), "the same input, the same names");
    }
}
