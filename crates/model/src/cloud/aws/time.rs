//! The timestamps AWS credential sources write (`2026-11-27T06:00:00Z`, with or without
//! fractional seconds, with an offset, or — in old SSO caches — a `UTC` suffix), read with
//! every field range-checked.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest timestamp believed (anything longer is not one).
const MAX_LEN: usize = 40;

/// Days from 1970-01-01 to the civil date `y-m-d` (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn num(s: &str, lo: i64, hi: i64) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok().filter(|n| (lo..=hi).contains(n))
}

/// The instant an RFC 3339 timestamp names, or `None` when it is not one (or lies before
/// 1970 or after 9999).
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let s = s.trim();
    if s.len() > MAX_LEN || !s.is_ascii() {
        return None;
    }
    let (date, rest) = (s.get(..10)?, s.get(10..)?);
    let sep = rest.chars().next()?;
    if !matches!(sep, 'T' | 't' | ' ') {
        return None;
    }
    let rest = &rest[1..];
    let y = num(date.get(..4)?, 1970, 9999)?;
    let m = num(date.get(5..7)?, 1, 12)?;
    let d = num(date.get(8..10)?, 1, 31)?;
    if date.as_bytes()[4] != b'-' || date.as_bytes()[7] != b'-' {
        return None;
    }
    let time = rest.get(..8)?;
    let (hh, mm, ss) = (
        num(time.get(..2)?, 0, 23)?,
        num(time.get(3..5)?, 0, 59)?,
        num(time.get(6..8)?, 0, 60)?,
    );
    if time.as_bytes()[2] != b':' || time.as_bytes()[5] != b':' {
        return None;
    }
    let mut tail = &rest[8..];
    if let Some(frac) = tail.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 9 {
            return None;
        }
        tail = &frac[n..];
    }
    let offset = match tail {
        "Z" | "z" | "UTC" | "+00:00" | "-00:00" => 0,
        t if t.len() == 6 && (t.starts_with('+') || t.starts_with('-')) => {
            if t.as_bytes()[3] != b':' {
                return None;
            }
            let secs = num(&t[1..3], 0, 23)? * 3600 + num(&t[4..6], 0, 59)? * 60;
            if t.starts_with('+') {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset;
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// `t` as `2026-11-27T06:00:00Z`, for messages.
pub fn format_rfc3339(t: SystemTime) -> String {
    let s = super::super::sigv4::amz_date(t);
    // amz_date is YYYYMMDDTHHMMSSZ.
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &s[..4],
        &s[4..6],
        &s[6..8],
        &s[9..11],
        &s[11..13],
        &s[13..15]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> Option<u64> {
        parse_rfc3339(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs())
    }

    #[test]
    fn timestamps_in_every_shape_aws_writes() {
        assert_eq!(secs("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(secs("2026-11-27T06:00:00Z"), Some(1_795_759_200));
        assert_eq!(secs("2026-11-27T06:00:00.123456Z"), Some(1_795_759_200));
        assert_eq!(secs("2026-11-27T06:00:00UTC"), Some(1_795_759_200));
        assert_eq!(secs("2026-11-27T08:00:00+02:00"), Some(1_795_759_200));
        assert_eq!(secs("2024-02-29T00:00:00Z"), Some(1_709_164_800));
        assert_eq!(
            format_rfc3339(parse_rfc3339("2026-11-27T06:00:00Z").unwrap()),
            "2026-11-27T06:00:00Z"
        );
        for bad in [
            "",
            "2026-11-27",
            "2026-13-01T00:00:00Z",
            "2026-11-27T24:00:00Z",
            "2026-11-27T06:00:00",
            "2026-11-27T06:00:00.Z",
            "2026-11-27T06:00:00+0200",
            "1969-12-31T23:59:59Z",
            "+2026-11-27T06:00:00Z",
            "2026-11-27T06:00:00Z and a very long tail of text",
            "２026-11-27T06:00:00Z",
        ] {
            assert_eq!(secs(bad), None, "{bad:?}");
        }
    }
}
