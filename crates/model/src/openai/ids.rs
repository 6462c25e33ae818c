//! Tool-call ids across APIs.
//!
//! The Messages API accepts ids made of `[A-Za-z0-9_-]`; OpenAI's Chat Completions API accepts
//! at most 40 characters. A session can meet both (a fallback model of the other provider, a
//! resumed session), and a compatible server can send ids with any characters. So every id is
//! mapped, deterministically, in both directions:
//! - [`inbound`]: a provider's id becomes keel's id. An id the Messages API accepts is kept as
//!   it is when [`outbound`] would also send it unchanged; any other (one with other
//!   characters, too long, or that looks like keel's own encoding) is hex-encoded behind
//!   [`ENCODED_PREFIX`], so [`outbound`] can give the provider back exactly what it sent.
//! - [`outbound`]: keel's id becomes the id sent to an OpenAI API. An encoded id is decoded;
//!   an id the API accepts is kept; any other is replaced by a stable digest of it (the same
//!   digest in the assistant's call and in its result, so the pair still matches).

/// What keel puts before an id it had to encode.
pub const ENCODED_PREFIX: &str = "kx_";
/// The longest id keel takes from a provider (a longer one is a broken stream).
pub const MAX_INBOUND_ID: usize = 256;
/// The longest id the Chat Completions API accepts.
pub const MAX_OPENAI_ID: usize = 40;

fn messages_api_accepts(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn openai_accepts(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_OPENAI_ID && id.bytes().all(|b| b.is_ascii_graphic())
}

/// keel's id for an id a provider sent.
pub fn inbound(id: &str) -> String {
    // Kept only when it also goes back out unchanged (so a long id is encoded, not digested).
    if messages_api_accepts(id) && openai_accepts(id) && !id.starts_with(ENCODED_PREFIX) {
        return id.to_owned();
    }
    let mut out = String::with_capacity(ENCODED_PREFIX.len() + id.len() * 2);
    out.push_str(ENCODED_PREFIX);
    for b in id.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The id to send to an OpenAI API for keel's id `id`.
pub fn outbound(id: &str) -> String {
    if let Some(orig) = decode(id) {
        return orig;
    }
    if openai_accepts(id) {
        return id.to_owned();
    }
    format!("call_{:016x}{:016x}", fnv1a(id, 0), fnv1a(id, 1))
}

fn decode(id: &str) -> Option<String> {
    let hex = id.strip_prefix(ENCODED_PREFIX)?;
    if hex.is_empty() || hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// FNV-1a, seeded: stable across runs and builds (unlike the standard library's hasher).
fn fnv1a(s: &str, seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_each_side_sees_only_what_it_accepts() {
        for id in [
            "call_abc123",
            "call:weird/id with spaces",
            "kx_looks_like_ours",
            "fc-ünïcode",
            "x".repeat(200).as_str(),
        ] {
            let ours = inbound(id);
            assert!(messages_api_accepts(&ours), "{ours}");
            assert_eq!(outbound(&ours), id, "round trip of {id:?}");
        }
        // An id from the Messages API (a fallback, a resumed session) goes out within 40.
        let long = "toolu_01A09q90qw90lq917835lq9abcdefghijklmnop";
        let out = outbound(long);
        assert!(openai_accepts(&out) && out == outbound(long), "{out}");
        assert_eq!(outbound("toolu_short"), "toolu_short");
        assert_ne!(outbound(long), outbound(&format!("{long}x")));
    }
}
