//! Every line of the captured stream-json output of the reference CLI parses into keel's types,
//! and serializing it back gives the same JSON (nothing modelled or unmodelled is lost).

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use keel_protocol::{Frame, SystemFrame};
use serde_json::Value;

fn fixture_lines() -> Vec<(String, usize, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for path in names {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".jsonl") || name.ends_with(".messages.jsonl") {
            continue; // *.messages.jsonl are the Python SDK's own objects, not CLI frames
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if !line.trim().is_empty() {
                out.push((name.clone(), i + 1, line.to_owned()));
            }
        }
    }
    out
}

/// `0` and `0.0` are the same number on the wire for every consumer; compare them as equal.
fn numbers_as_f64(v: Value) -> Value {
    match v {
        Value::Number(n) => serde_json::json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.into_iter().map(numbers_as_f64).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, numbers_as_f64(v))).collect())
        }
        other => other,
    }
}

#[test]
fn every_fixture_line_round_trips() {
    let lines = fixture_lines();
    assert!(
        lines.len() > 100,
        "expected the fixtures to be present, got {} lines",
        lines.len()
    );
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (file, n, line) in &lines {
        let original: Value = serde_json::from_str(line).unwrap();
        let frame: Frame = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{file}:{n} does not parse: {e}\n{line}"));
        let kind = match &frame {
            Frame::System(s) => match s {
                SystemFrame::Other(v) => format!("system/{} (other)", v["subtype"]),
                _ => format!("system/{}", original["subtype"].as_str().unwrap()),
            },
            Frame::Other(_) => format!("{} (other)", frame.kind()),
            f => f.kind().to_owned(),
        };
        *kinds.entry(kind).or_default() += 1;
        let back = serde_json::to_value(&frame).unwrap();
        // Written straight out, a frame is byte for byte what writing it through a `Value`
        // map gives: the tag first, each key once, in the same order.
        let direct = serde_json::to_string(&frame).unwrap();
        assert_eq!(
            direct,
            serde_json::to_string(&back).unwrap(),
            "{file}:{n} is written differently"
        );
        if !matches!(frame, Frame::Other(_)) {
            assert!(direct.starts_with("{\"type\":"), "{file}:{n}: {direct}");
        }
        assert_eq!(
            numbers_as_f64(back),
            numbers_as_f64(original),
            "{file}:{n} changed in a round trip"
        );
    }
    // The modelled types really were used (not everything fell through to `Other`).
    for k in [
        "system/init",
        "assistant",
        "user",
        "result",
        "stream_event",
        "control_request",
        "control_response",
        "system/api_retry",
        "system/permission_denied",
        "system/model_fallback",
    ] {
        assert!(
            kinds.contains_key(k),
            "no fixture line parsed as {k}: {kinds:?}"
        );
    }
}

#[test]
fn result_frames_expose_the_fields_keel_reads() {
    for (file, n, line) in fixture_lines() {
        if let Frame::Result(r) = serde_json::from_str::<Frame>(&line).unwrap() {
            assert!(!r.session_id.is_empty(), "{file}:{n}");
            assert_eq!(
                r.is_error,
                r.subtype != keel_protocol::ResultSubtype::Success
                    || r.terminal_reason == Some(keel_protocol::TerminalReason::ApiError),
                "{file}:{n}"
            );
        }
    }
}
