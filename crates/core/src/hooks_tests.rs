//! Unit tests of hook inputs, answers and matchers.
use super::*;

#[test]
fn outputs_parse() {
    let pre = HookEvent::PreToolUse;
    assert_eq!(
        HookDecision::from_output(pre, &json!({"continue": true})).unwrap(),
        HookDecision::proceed()
    );
    let d = HookDecision::from_output(
        pre,
        &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm"}}),
    )
    .unwrap();
    assert_eq!(d.block.as_deref(), Some("no rm"));
    let d =
        HookDecision::from_output(pre, &json!({"decision": "block", "reason": "nope"})).unwrap();
    assert_eq!(d.block.as_deref(), Some("nope"));
    let d = HookDecision::from_output(
        pre,
        &json!({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}}}),
    )
    .unwrap();
    assert!(d.allow);
    assert_eq!(d.updated_input, Some(json!({"command": "ls"})));
    let d = HookDecision::from_output(pre, &json!({"continue": false, "stopReason": "enough"}))
        .unwrap();
    assert_eq!(d.stop.as_deref(), Some("enough"));
    assert!(HookDecision::from_output(pre, &Value::Null).is_err());
    assert!(HookDecision::from_output(
        pre,
        &json!({"hookSpecificOutput": {"permissionDecision": "Deny"}})
    )
    .is_err());
    assert!(HookDecision::from_output(pre, &json!({"decision": "maybe"})).is_err());
    let post = HookDecision::from_output(
        HookEvent::PostToolUse,
        &json!({"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "checked"}}),
    )
    .unwrap();
    assert_eq!(post.additional_context, vec!["checked"]);
}

#[test]
fn matchers_follow_claude_code() {
    for (m, subject, covers) in [
        (None, "Bash", true),
        (Some(""), "Bash", true),
        (Some("*"), "Bash", true),
        (Some("Bash"), "Bash", true),
        (Some("Bash"), "BashOutput", false),
        (Some("Edit|Write"), "Write", true),
        (Some("Edit | Write"), "Edit", true),
        (Some("Edit|Write"), "Read", false),
        (Some("Task"), "Agent", true),
        (Some("mcp__.*"), "mcp__fs__read", true),
        (Some("mcp__.*"), "Bash", false),
        (Some("Notebook.*"), "NotebookEdit", true),
        (Some("^Read$"), "ReadMany", false),
        (Some("^(startup|resume)$"), "compact", false),
        (Some("^(startup|resume)$"), "resume", true),
    ] {
        assert_eq!(matcher_covers(m, subject), covers, "{m:?} vs {subject}");
    }
    assert!(check_matcher("Bash(").is_err());
    assert!(check_matcher("Edit|Write").is_ok());
    assert!(check_matcher(".*").is_ok());
}

#[test]
fn permission_request_answers_parse() {
    let ev = HookEvent::PermissionRequest;
    let allow = HookDecision::from_output(
        ev,
        &json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}),
    )
    .unwrap();
    assert!(allow.allow && allow.block.is_none());
    let deny = HookDecision::from_output(
        ev,
        &json!({"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "not here", "interrupt": true}}}),
    )
    .unwrap();
    assert_eq!(deny.block.as_deref(), Some("not here"));
    assert_eq!(deny.stop.as_deref(), Some("not here"));
    assert!(HookDecision::from_output(
        ev,
        &json!({"hookSpecificOutput": {"decision": {"behavior": "maybe"}}})
    )
    .is_err());
}

#[test]
fn the_matched_subject_depends_on_the_event() {
    let mut input = HookInput {
        event: HookEvent::SessionStart,
        session_id: "s".into(),
        cwd: "/w".into(),
        permission_mode: "default".into(),
        transcript_path: String::new(),
        tool: None,
        prompt: None,
        stop_hook_active: false,
        last_assistant_message: None,
        compact: None,
        extra: vec![("source".into(), json!("compact"))],
    };
    assert_eq!(input.subject(), Some("compact"));
    input.event = HookEvent::Stop;
    assert_eq!(input.subject(), None);
    input.event = HookEvent::SubagentStart;
    input.extra = vec![("agent_type".into(), json!("Explore"))];
    assert_eq!(input.subject(), Some("Explore"));
    input.event = HookEvent::PreCompact;
    input.compact = Some(("manual".into(), "keep it short".into()));
    assert_eq!(input.subject(), Some("manual"));
}

#[test]
fn merging_keeps_the_strictest() {
    let mut d = HookDecision {
        allow: true,
        ..HookDecision::default()
    };
    d.merge(HookDecision::blocked("a"));
    d.merge(HookDecision::blocked("b"));
    assert_eq!(d.block.as_deref(), Some("a; b"));
}

#[test]
fn inputs_have_the_wire_shape() {
    let input = HookInput {
        event: HookEvent::PreToolUse,
        session_id: "s".into(),
        cwd: "/w".into(),
        permission_mode: "default".into(),
        transcript_path: String::new(),
        tool: Some(ToolHookInput {
            name: "Bash".into(),
            input: json!({"command": "ls"}),
            tool_use_id: "t1".into(),
            response: None,
        }),
        prompt: None,
        stop_hook_active: false,
        last_assistant_message: None,
        compact: None,
        extra: Vec::new(),
    };
    assert_eq!(
        input.to_json(),
        json!({"session_id": "s", "transcript_path": "", "cwd": "/w", "permission_mode": "default",
               "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t1"})
    );
}
