//! Fresh ids and timestamps for events and transcript entries. A leaf: the emitter, the wire
//! and the transcript all stamp what they write.

/// A fresh event id.
pub fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Now, as RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
