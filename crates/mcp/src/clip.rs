//! Cutting text a server sent down to a size fit for a message. A leaf: the connections, the
//! SDK route and OAuth all quote what a server said.

/// At most `max` bytes of `s` (cut at a character boundary), marked when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
