//! Images Read can hand to the model: PNG, JPEG, GIF and WebP, recognized by their first bytes,
//! measured from their headers, and refused with a clear message past what the API accepts.

use base64::Engine as _;

/// Where a tool's `meta` carries an image for the model (`{"media_type", "data"}`); the
/// engine moves it into the tool result and keeps it out of the front ends' detail.
pub const IMAGE_DATA_KEY: &str = "__keel_image";

/// The largest image file sent (its base64 form stays within the API's 5 MB per image).
pub const MAX_IMAGE_BYTES: u64 = 3_750_000;
/// The longest side the API accepts, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 8000;

/// An image's media type, from its first bytes.
pub fn media_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Width and height from the header, when it can be read.
pub fn dimensions(bytes: &[u8], media: &str) -> Option<(u32, u32)> {
    let be32 = |i: usize| {
        bytes
            .get(i..i + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let le16 = |i: usize| {
        bytes
            .get(i..i + 2)
            .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])))
    };
    let be16 = |i: usize| {
        bytes
            .get(i..i + 2)
            .map(|b| u32::from(u16::from_be_bytes([b[0], b[1]])))
    };
    match media {
        "image/png" => Some((be32(16)?, be32(20)?)),
        "image/gif" => Some((le16(6)?, le16(8)?)),
        "image/webp" => match bytes.get(12..16)? {
            b"VP8X" => {
                let le24 = |i: usize| {
                    bytes
                        .get(i..i + 3)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], 0]) + 1)
                };
                Some((le24(24)?, le24(27)?))
            }
            b"VP8L" => {
                let b = bytes.get(21..25)?;
                let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                Some(((v & 0x3fff) + 1, ((v >> 14) & 0x3fff) + 1))
            }
            b"VP8 " => Some((le16(26)? & 0x3fff, le16(28)? & 0x3fff)),
            _ => None,
        },
        "image/jpeg" => {
            // Walk the segments to the first start-of-frame marker.
            let mut i = 2;
            while i + 9 < bytes.len() {
                if bytes[i] != 0xff {
                    return None;
                }
                let marker = bytes[i + 1];
                let len = be16(i + 2)? as usize;
                let sof = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
                if sof {
                    return Some((be16(i + 7)?, be16(i + 5)?));
                }
                i += 2 + len;
            }
            None
        }
        _ => None,
    }
}

/// The image as base64.
pub fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_give_type_and_size() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(media_type(&png), Some("image/png"));
        assert_eq!(dimensions(&png, "image/png"), Some((640, 480)));
        let gif = b"GIF89a\x20\x03\x58\x02";
        assert_eq!(media_type(gif), Some("image/gif"));
        assert_eq!(dimensions(gif, "image/gif"), Some((800, 600)));
        let jpeg = [
            0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x00, 0x00, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x01,
            0xe0, 0x02, 0x80, 0x03,
        ];
        assert_eq!(media_type(&jpeg), Some("image/jpeg"));
        assert_eq!(dimensions(&jpeg, "image/jpeg"), Some((640, 480)));
        assert_eq!(media_type(b"hello"), None);
        assert_eq!(encode(b"hi"), "aGk=");
    }
}
