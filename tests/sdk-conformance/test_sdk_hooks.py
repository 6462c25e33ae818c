"""Hook callbacks registered through the official Python SDK (`HookMatcher`) for several
events: keel asks the host with `hook_callback` for each, sends the input fields Claude Code
sends, and applies the answers (context, a permission answer, the model sent back to work)."""

from __future__ import annotations

from claude_agent_sdk import ClaudeSDKClient, HookMatcher, ResultMessage

from test_python_sdk import assert_keel_ran, result_text, run, tool_results


def test_hook_callbacks_for_many_events(start):
    env = start("hook_events")
    seen: list[tuple[str, dict]] = []

    def record(answer):
        async def cb(input_data, tool_use_id, context):
            seen.append((input_data["hook_event_name"], dict(input_data)))
            return answer(input_data) if callable(answer) else answer

        return cb

    def stop_answer(input_data):
        if not input_data.get("stop_hook_active"):
            return {"decision": "block", "reason": "check the file once more"}
        return {}

    hooks = {
        "UserPromptSubmit": [HookMatcher(hooks=[record({
            "hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                   "additionalContext": "context from the SDK host"}})])],
        "PostToolUseFailure": [HookMatcher(matcher="Read|Grep", hooks=[record({
            "hookSpecificOutput": {"hookEventName": "PostToolUseFailure",
                                   "additionalContext": "the host saw the failure"}})])],
        "PermissionRequest": [HookMatcher(matcher="^Bash$", hooks=[record({
            "hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                   "decision": {"behavior": "allow"}}})])],
        "PostToolUse": [HookMatcher(matcher="Bash", hooks=[record({})])],
        "Stop": [HookMatcher(hooks=[record(stop_answer)])],
    }

    async def main():
        async with ClaudeSDKClient(options=env.options(hooks=hooks)) as client:
            await client.query("Read the file, then create asked.txt.")
            return [m async for m in client.receive_response()]

    messages = run(main)
    assert_keel_ran(env, messages)
    events = [e for e, _ in seen]
    assert events == [
        "UserPromptSubmit", "PostToolUseFailure", "PermissionRequest", "PostToolUse", "Stop", "Stop",
    ], events
    by = {}
    for e, data in seen:
        by.setdefault(e, []).append(data)
    assert by["UserPromptSubmit"][0]["prompt"] == "Read the file, then create asked.txt."
    failure = by["PostToolUseFailure"][0]
    assert failure["tool_name"] == "Read" and failure["error"], failure
    assert by["PermissionRequest"][0]["tool_input"]["command"] == "touch asked.txt"
    assert (env.cwd / "asked.txt").exists(), "the host's PermissionRequest answer allowed the call"
    assert [s["stop_hook_active"] for s in by["Stop"]] == [False, True]
    requests = env.mock.requests()
    assert len(requests) == 4, len(requests)
    assert "context from the SDK host" in str(requests[0]["body"]["messages"])
    assert "check the file once more" in str(requests[3]["body"]["messages"])
    results = tool_results(messages)
    assert "the host saw the failure" in result_text(results[0])
    result = [m for m in messages if isinstance(m, ResultMessage)][-1]
    assert result.subtype == "success" and not result.is_error


def test_a_blocked_prompt_ends_successfully_without_a_model_call(start):
    env = start("hook_events")

    async def block(input_data, tool_use_id, context):
        return {"decision": "block", "reason": "that prompt names a secret"}

    async def main():
        opts = env.options(hooks={"UserPromptSubmit": [HookMatcher(hooks=[block])]})
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("print the vault token")
            return [m async for m in client.receive_response()]

    messages = run(main)
    assert not env.mock.requests(), "the model was not called"
    result = [m for m in messages if isinstance(m, ResultMessage)][-1]
    assert result.subtype == "success" and not result.is_error
    assert "that prompt names a secret" in (result.result or "")
