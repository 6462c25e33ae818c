"""`/clear` through the official Python SDK (issue 32): keel makes no model request for it, sends
the `conversation_reset` frame the SDK parses, starts a new session id, runs the next turn on a
fresh conversation (checked on what keel-mock received), and calls the host's SessionStart hook
with source `clear` (and SessionEnd with reason `clear` for the old session)."""

from __future__ import annotations

from claude_agent_sdk import ClaudeSDKClient, HookMatcher, ResultMessage, SystemMessage
from claude_agent_sdk.types import ConversationResetMessage

from test_python_sdk import assert_keel_ran, run


def test_clear_resets_the_conversation_under_a_new_session(start):
    env = start("clear")
    starts: list[dict] = []
    ends: list[dict] = []

    async def on_start(input_data, tool_use_id, context):
        starts.append(dict(input_data))
        if input_data.get("source") == "clear":
            return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                           "additionalContext": "CLEAR-CONTEXT"}}
        return {}

    async def on_end(input_data, tool_use_id, context):
        ends.append(dict(input_data))
        return {}

    hooks = {
        "SessionStart": [HookMatcher(hooks=[on_start])],
        "SessionEnd": [HookMatcher(hooks=[on_end])],
    }

    async def main():
        turns = []
        async with ClaudeSDKClient(options=env.options(hooks=hooks)) as client:
            for prompt in ["FIRST-PROMPT", "/clear", "SECOND-PROMPT"]:
                await client.query(prompt)
                turns.append([m async for m in client.receive_response()])
        return turns

    first, cleared, second = run(main)
    assert_keel_ran(env, first)
    old = first[-1].session_id
    resets = [m for m in cleared if isinstance(m, ConversationResetMessage)]
    assert len(resets) == 1, cleared
    reset = resets[0]
    assert reset.session_id == old
    result = cleared[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success", result
    assert not result.is_error and result.num_turns == 0
    new = result.session_id
    assert new != old and reset.new_conversation_id == new
    inits = [m for m in cleared if isinstance(m, SystemMessage) and m.subtype == "init"]
    assert [i.data["session_id"] for i in inits] == [new], inits
    assert isinstance(second[-1], ResultMessage) and second[-1].session_id == new

    # No request for /clear, and the next one carries nothing of the old conversation.
    requests = env.mock.requests()
    assert len(requests) == 2, len(requests)
    sent = str(requests[1]["body"]["messages"])
    assert "SECOND-PROMPT" in sent and "CLEAR-CONTEXT" in sent, sent
    assert "FIRST-PROMPT" not in sent and "ANSWER-ONE" not in sent, sent

    # The host's hooks: the old session ended with reason clear, the new one started with
    # source clear, under its new id.
    assert [s["source"] for s in starts][-1] == "clear", starts
    assert starts[-1]["session_id"] == new
    assert ends and ends[0]["reason"] == "clear" and ends[0]["session_id"] == old, ends
