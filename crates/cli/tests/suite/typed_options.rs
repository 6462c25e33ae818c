//! The flags whose value is a closed set or a number are parsed once, by the cli, into
//! keel-core's typed options: a bad value stops `keel` before anything starts (exit 2, one
//! `Error:` line naming the flag and the value, nothing on stdout, no request), and a good one
//! reaches the model request as it was written.

use super::common::Harness;

/// Each bad value, and the exact sentence keel prints for it.
const BAD: &[(&[&str], &str)] = &[
    (
        &["--permission-mode", "yolo"],
        "Error: --permission-mode \"yolo\" is not a mode; use one of acceptEdits, bypassPermissions, default, dontAsk, plan",
    ),
    (
        &["--thinking", "sometimes"],
        "Error: --thinking \"sometimes\" is not valid: expected enabled, adaptive or disabled",
    ),
    (
        &["--max-thinking-tokens", "1023"],
        "Error: --max-thinking-tokens \"1023\" is not valid: expected 0 (no thinking) or a whole number from 1024 to 31999 (below the output limit)",
    ),
    (
        &["--max-thinking-tokens", "32000"],
        "Error: --max-thinking-tokens \"32000\" is not valid: expected 0 (no thinking) or a whole number from 1024 to 31999 (below the output limit)",
    ),
    (
        &["--max-budget-usd", "0"],
        "Error: --max-budget-usd must be a positive number of dollars, got 0",
    ),
    (
        &["--setting-sources", "user,team"],
        "Error: --setting-sources names \"team\"; the sources are user, project and local",
    ),
    (
        &["--tools", "Bash,Telepathy"],
        "Error: --tools names \"Telepathy\", which is not a keel tool; the tools are ",
    ),
    (
        &["--provider", "gemini"],
        "Error: --provider names the provider \"gemini\", which keel does not speak; it speaks ",
    ),
    (
        &["--session-id", "not-a-uuid"],
        "Error: --session-id must be a UUID (like 123e4567-e89b-12d3-a456-426614174000), got \"not-a-uuid\"",
    ),
    (
        &["--disallowedTools", "Bash(rm"],
        "Error: permission rule \"Bash(rm\" has an opening parenthesis but does not end with ')'",
    ),
];

#[tokio::test]
async fn a_bad_flag_value_stops_keel_before_anything_starts_naming_the_flag() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    for (flags, sentence) in BAD {
        // Headless text, and the stream-json server the SDKs run: the same error either way.
        for mode in [
            &["-p", "hi"][..],
            &[
                "--output-format",
                "stream-json",
                "--verbose",
                "--input-format",
                "stream-json",
            ][..],
        ] {
            let mut args = mode.to_vec();
            args.extend_from_slice(flags);
            let run = h.run(&args, &[]).await;
            assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
            assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
            assert!(
                run.stderr.lines().any(|l| l.starts_with(sentence)),
                "{args:?}: {}",
                run.stderr
            );
        }
    }
    assert!(
        h.requests().is_empty(),
        "no model request for a usage error"
    );
    // Nothing was written either: no session was opened.
    assert!(!h.keel_home().join("projects").exists());
}

#[tokio::test]
async fn permissions_check_reads_its_flags_with_the_same_parsers() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"unused"}]}"#).await;
    let run = h
        .run(
            &[
                "permissions",
                "check",
                "--permission-mode",
                "yolo",
                "--",
                "ls",
            ],
            &[],
        )
        .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("Error: --permission-mode \"yolo\" is not a mode"),
        "{}",
        run.stderr
    );
    let run = h
        .run(
            &[
                "permissions",
                "check",
                "--setting-sources",
                "everywhere",
                "--",
                "ls",
            ],
            &[],
        )
        .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--setting-sources names \"everywhere\""),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn typed_tools_and_thinking_reach_the_request() {
    let h = Harness::from_json(
        r#"{"steps":[{"kind":"text","text":"one"},{"kind":"text","text":"two"}]}"#,
    )
    .await;
    let run = h
        .run_stream(
            "hi",
            &[
                "--tools",
                " Read, Bash ",
                "--thinking",
                "enabled",
                "--max-thinking-tokens",
                " 4096 ",
                "--setting-sources",
                "",
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    // Thinking disabled wins over a budget.
    let off = h
        .run_stream(
            "hi",
            &[
                "--tools",
                "",
                "--thinking",
                "disabled",
                "--max-thinking-tokens",
                "4096",
            ],
            &[],
        )
        .await;
    off.assert_end("success", false, "completed", 0);
    let requests = h.requests();
    assert_eq!(requests.len(), 2);
    let names = |i: usize| -> Vec<String> {
        requests[i].body["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut first = names(0);
    first.sort();
    assert_eq!(first, ["Bash", "Read"]);
    assert_eq!(requests[0].body["thinking"]["budget_tokens"], 4096);
    assert!(names(1).is_empty(), "--tools \"\" offers no tool");
    assert!(requests[1]
        .body
        .get("thinking")
        .is_none_or(|t| t["type"] == "disabled"));
}
