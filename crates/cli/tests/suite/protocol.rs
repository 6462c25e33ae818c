//! Protocol parity with what the official SDKs send (issue 32): version, `origin`, offered
//! tools, subagent text, structured output, `/clear`, output styles, the stdin contract and
//! the capability account — through the binary against keel-mock.

use super::common::Harness;

const TEXT: &str = r#"{"steps":[{"kind":"text","text":"unused"}]}"#;

#[tokio::test]
async fn dash_v_and_version_print_the_protocol_version_then_keels() {
    let h = Harness::from_json(TEXT).await;
    for flag in ["-v", "--version", "-V"] {
        let run = h.run(&[flag], &[]).await;
        assert_eq!(run.code, 0, "{flag}: {}", run.stderr);
        let line = run.stdout.trim_end();
        // What version checks parse: a leading X.Y.Z (the protocol keel speaks).
        let (proto, rest) = line.split_once(' ').expect("two parts");
        let parts: Vec<u32> = proto.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(parts.len(), 3, "{line}");
        assert_eq!(proto, keel_core::PROTOCOL_VERSION, "{line}");
        assert_eq!(rest, format!("(keel {})", env!("CARGO_PKG_VERSION")), "{line}");
    }
    assert!(h.requests().is_empty(), "printing the version calls no model");
}
