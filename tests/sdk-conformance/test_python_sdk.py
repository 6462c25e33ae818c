"""The official Python SDK (`claude-agent-sdk` from PyPI) drives keel. If these pass, keel is a
drop-in for the CLI the SDK was written for."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    query,
)

TIMEOUT = 90  # seconds per test: generous for a loaded 2-core machine; never hit when green


def run(coro_fn):
    async def bounded():
        with anyio.fail_after(TIMEOUT):
            return await coro_fn()

    return anyio.run(bounded)


def assert_keel_ran(env, messages) -> None:
    """keel answered (not the bundled CLI): keel-mock saw requests and init names keel."""
    assert env.mock.requests(), f"keel-mock received no request; keel stderr: {env.stderr}"
    inits = [m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"]
    assert inits, f"no system/init among {messages}"
    assert "keel_version" in inits[0].data, inits[0].data


def texts(messages) -> list[str]:
    return [
        b.text
        for m in messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, TextBlock)
    ]


def tool_results(messages) -> list[ToolResultBlock]:
    return [
        b
        for m in messages
        if isinstance(m, UserMessage) and isinstance(m.content, list)
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]


def result_text(block: ToolResultBlock) -> str:
    c = block.content
    if isinstance(c, str):
        return c
    return "".join(part.get("text", "") for part in c or [])


def test_plain_query(start):
    env = start("text")

    async def main():
        return [m async for m in query(prompt="Say hi.", options=env.options())]

    messages = run(main)
    assert_keel_ran(env, messages)
    assert texts(messages) == ["Hello from keel-mock."]
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.result) == ("success", False, "Hello from keel-mock.")
    assert result.num_turns == 1
    # The SDK passes --system-prompt "": keel sends no system prompt.
    assert "system" not in env.mock.requests()[0]["body"] or not env.mock.requests()[0]["body"]["system"]


def test_tool_round_trip(start):
    env = start("bash_echo")

    async def main():
        opts = env.options(allowed_tools=["Bash"], max_turns=5)
        return [m async for m in query(prompt="Run echo hi, then tell me what it printed.", options=opts)]

    messages = run(main)
    assert_keel_ran(env, messages)
    uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolUseBlock)]
    assert [u.name for u in uses] == ["Bash"]
    results = tool_results(messages)
    assert len(results) == 1 and result_text(results[0]).strip() == "hi" and not results[0].is_error
    assert texts(messages) == ["I'll run it.", "The command printed: hi"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success" and result.num_turns == 2
    # The second request carried the tool result back to the model.
    second = env.mock.requests()[1]["body"]["messages"]
    assert any(
        b.get("type") == "tool_result" and "hi" in str(b.get("content"))
        for m in second
        if isinstance(m.get("content"), list)
        for b in m["content"]
    )


def test_max_turns_yields_the_result_then_raises(start):
    from claude_agent_sdk import ClaudeSDKError

    env = start("loop_tools")
    seen = []

    async def main():
        opts = env.options(allowed_tools=["Bash"], max_turns=1)
        async for m in query(prompt="Run echo again forever.", options=opts):
            seen.append(m)

    with pytest.raises(ClaudeSDKError) as err:
        run(main)
    assert_keel_ran(env, seen)
    assert "Reached maximum number of turns (1)" in str(err.value), str(err.value)
    result = seen[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error) == ("error_max_turns", True)
    assert result.num_turns == 2  # the first call's tool ran; the second call never happened
    assert len(env.mock.requests()) == 1


def test_can_use_tool_denies(start):
    env = start("touch")
    asked = []

    async def can_use_tool(tool_name, tool_input, context):
        asked.append((tool_name, tool_input, context.tool_use_id))
        return PermissionResultDeny(message="Not in this test, thanks.")

    async def main():
        async with ClaudeSDKClient(options=env.options(can_use_tool=can_use_tool)) as client:
            await client.query("Create made_by_tool.txt with the Bash tool.")
            return [m async for m in client.receive_response()]

    messages = run(main)
    assert_keel_ran(env, messages)
    assert [(a[0], a[1]["command"]) for a in asked] == [("Bash", "touch made_by_tool.txt")]
    assert asked[0][2], "can_use_tool carries the tool_use_id"
    results = tool_results(messages)
    assert len(results) == 1 and results[0].is_error
    assert "Not in this test, thanks." in result_text(results[0])
    assert not (env.cwd / "made_by_tool.txt").exists(), "a denied command must not run"
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success"
    assert [d["tool_name"] for d in result.permission_denials or []] == ["Bash"]
    second = str(env.mock.requests()[1]["body"]["messages"])
    assert "Not in this test, thanks." in second, "the model is told why"


def test_pre_tool_use_hook_blocks(start):
    env = start("touch")
    calls = []

    async def guard(input_data, tool_use_id, context):
        calls.append((input_data["hook_event_name"], input_data["tool_name"], tool_use_id))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "touch is blocked by policy",
            }
        }

    async def main():
        opts = env.options(
            allowed_tools=["Bash"],  # the rules would allow it: only the hook stands in the way
            hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]},
        )
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("Create made_by_tool.txt with the Bash tool.")
            return [m async for m in client.receive_response()]

    messages = run(main)
    assert_keel_ran(env, messages)
    assert len(calls) == 1 and calls[0][:2] == ("PreToolUse", "Bash") and calls[0][2]
    results = tool_results(messages)
    assert len(results) == 1 and results[0].is_error
    assert "touch is blocked by policy" in result_text(results[0])
    assert not (env.cwd / "made_by_tool.txt").exists(), "a blocked command must not run"


def _sleepers() -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = (p / "stat").read_text()
        except OSError:
            continue
        if "sleep 37.25" in cmd and ") Z " not in stat:
            pids.append(int(p.name))
    return pids


def interrupt_the_long_command(env, **options) -> tuple[list, dict]:
    """Run the long_bash scenario, interrupt once the command runs; the messages and timings."""
    state = {}

    async def main():
        async with ClaudeSDKClient(options=env.options(allowed_tools=["Bash"], **options)) as client:
            await client.query("Run the long command.")
            messages = []
            async for m in client.receive_messages():
                messages.append(m)
                if isinstance(m, AssistantMessage) and any(isinstance(b, ToolUseBlock) for b in m.content):
                    break
            # The command has been handed to Bash; wait (bounded) until it is really running.
            marker = env.cwd / "started.txt"
            with anyio.fail_after(30):
                while not marker.exists():
                    await anyio.sleep(0.02)
            state["pids_before"] = _sleepers()
            t0 = time.monotonic()
            await client.interrupt()
            async for m in client.receive_response():
                messages.append(m)
            state["elapsed"] = time.monotonic() - t0
            return messages

    return run(main), state


def assert_interrupted_truthfully(env, messages, state) -> None:
    """The turn ended at once, as an interrupted error, the call's result says so, and the
    command's process is gone."""
    assert_keel_ran(env, messages)
    assert state["pids_before"], "the long command was running before the interrupt"
    assert state["elapsed"] < 20, f"the turn ended {state['elapsed']:.1f} s after the interrupt"
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert result.is_error and result.subtype == "error_during_execution"
    results = tool_results(messages)
    assert len(results) == 1 and results[0].is_error
    assert "interrupted" in result_text(results[0]).lower()
    deadline = time.monotonic() + 10
    while _sleepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _sleepers(), "the interrupted command's process is gone"


def test_interrupt_stops_a_long_bash_call(start):
    env = start("long_bash")
    messages, state = interrupt_the_long_command(env)
    assert_interrupted_truthfully(env, messages, state)


def test_set_permission_mode_and_set_model(start):
    env = start("write_file")

    async def main():
        async with ClaudeSDKClient(options=env.options()) as client:
            await client.set_permission_mode("acceptEdits")
            await client.set_model("claude-keel-test-model")
            with pytest.raises(Exception) as bad:
                await client.set_permission_mode("no-such-mode")
            await client.query("Write written.txt.")
            return bad.value, [m async for m in client.receive_response()]

    bad, messages = run(main)
    assert "Cannot set permission mode" in str(bad)
    assert_keel_ran(env, messages)
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert init.data["permissionMode"] == "acceptEdits"
    assert init.data["model"] == "claude-keel-test-model"
    assert (env.cwd / "written.txt").read_text() == "hello from the model\n", "acceptEdits let Write run"
    assert all(r["body"]["model"] == "claude-keel-test-model" for r in env.mock.requests())


def test_multi_turn_client_conversation(start):
    env = start("two_turns")

    async def main():
        async with ClaudeSDKClient(options=env.options()) as client:
            await client.query("The first question.")
            first = [m async for m in client.receive_response()]
            await client.query("And the second question.")
            second = [m async for m in client.receive_response()]
            return first, second

    first, second = run(main)
    assert_keel_ran(env, first)
    assert texts(first) == ["First answer."] and texts(second) == ["Second answer."]
    r1, r2 = first[-1], second[-1]
    assert isinstance(r1, ResultMessage) and isinstance(r2, ResultMessage)
    assert r1.session_id == r2.session_id
    # The second request carries the whole conversation.
    msgs = env.mock.requests()[1]["body"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert "First answer." in str(msgs[1])


def test_resume_a_session_by_id(start):
    env = start("resume")

    async def first():
        return [m async for m in query(prompt="Remember the word tangerine.", options=env.options())]

    messages = run(first)
    assert_keel_ran(env, messages)
    session_id = messages[-1].session_id

    async def second():
        opts = env.options(resume=session_id)
        return [m async for m in query(prompt="What was the word?", options=opts)]

    resumed = run(second)
    assert texts(resumed) == ["The word was tangerine."], env.stderr
    assert resumed[-1].session_id == session_id
    msgs = env.mock.requests()[1]["body"]["messages"]
    assert "Remember the word tangerine." in str(msgs[0]), "the resumed request carries the old conversation"


def test_a_hook_blocks_a_subagents_tool_call(start):
    """The host's PreToolUse hook is asked about a call a subagent makes, and its block holds:
    subagents read the session's live hooks, not a copy made before the host registered them."""
    env = start("subagent_touch")
    calls = []

    async def guard(input_data, tool_use_id, context):
        calls.append((input_data["tool_name"], tool_use_id))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no files from subagents",
            }
        }

    async def main():
        opts = env.options(
            allowed_tools=["Bash", "Task"],
            hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]},
        )
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("MAIN: delegate the work.")
            return [m async for m in client.receive_response()]

    messages = run(main)
    assert_keel_ran(env, messages)
    assert calls == [("Bash", "toolu_sub_touch")], calls
    sub = [r for r in tool_results(messages) if r.tool_use_id == "toolu_sub_touch"]
    assert len(sub) == 1 and sub[0].is_error, sub
    assert "no files from subagents" in result_text(sub[0])
    assert not (env.cwd / "made_by_sub.txt").exists(), "the subagent's blocked command did not run"
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success"


def test_a_mode_change_binds_a_running_subagent(start):
    """set_permission_mode while a subagent runs: its next call is decided in the new mode."""
    env = start("subagent_wait_then_touch")

    async def main():
        async with ClaudeSDKClient(options=env.options(allowed_tools=["Bash", "Task"])) as client:
            await client.query("MAIN: delegate the work.")
            waiting = env.cwd / "waiting.txt"
            with anyio.fail_after(60):
                while not waiting.exists():
                    await anyio.sleep(0.02)
            await client.set_permission_mode("plan")
            (env.cwd / "go").write_text("")
            return [m async for m in client.receive_response()]

    messages = run(main)
    assert_keel_ran(env, messages)
    denied = [r for r in tool_results(messages) if r.tool_use_id == "toolu_sub_touch"]
    assert len(denied) == 1 and denied[0].is_error, denied
    assert "plan mode" in result_text(denied[0])
    assert not (env.cwd / "made_after_plan.txt").exists()


# ---- Tools the host program defines in-process (create_sdk_mcp_server) ----


def _calc_server(handler):
    from claude_agent_sdk import create_sdk_mcp_server, tool

    add = tool("add", "Adds two numbers.", {"a": float, "b": float})(handler)
    return create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])


def _run_calc(env, handler, **extra_env):
    async def main():
        opts = env.options(
            mcp_servers={"calc": _calc_server(handler)},
            allowed_tools=["mcp__calc__add"],
            max_turns=5,
        )
        opts.env.update(extra_env)
        return [m async for m in query(prompt="Add 2 and 3.", options=opts)]

    return run(main)


def test_an_in_process_tool_is_called_and_answers(start):
    env = start("sdk_tool")

    async def add(args):
        return {"content": [{"type": "text", "text": f"the sum is {args['a'] + args['b']:g}"}]}

    messages = _run_calc(env, add)
    assert_keel_ran(env, messages)
    inits = [m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"]
    assert {"name": "calc", "status": "connected"} in inits[0].data["mcp_servers"], inits[0].data
    assert "mcp__calc__add" in inits[0].data["tools"]
    results = tool_results(messages)
    assert len(results) == 1 and not results[0].is_error, results
    assert result_text(results[0]) == "the sum is 5"
    offered = [t for t in env.mock.requests()[0]["body"]["tools"] if t["name"] == "mcp__calc__add"]
    assert offered and offered[0]["description"] == "Adds two numbers."
    assert "the sum is 5" in str(env.mock.requests()[1]["body"]["messages"])
    assert isinstance(messages[-1], ResultMessage) and messages[-1].subtype == "success"


def test_an_in_process_tool_that_raises_gives_the_model_an_error(start):
    env = start("sdk_tool")

    async def add(args):
        raise ValueError("the host cannot add today")

    messages = _run_calc(env, add)
    assert_keel_ran(env, messages)
    results = tool_results(messages)
    assert len(results) == 1 and results[0].is_error, results
    assert "the host cannot add today" in result_text(results[0])
    assert "the host cannot add today" in str(env.mock.requests()[1]["body"]["messages"])
    assert isinstance(messages[-1], ResultMessage) and messages[-1].subtype == "success"


def test_an_in_process_tool_that_never_answers_hits_the_deadline(start):
    env = start("sdk_tool")

    async def add(args):
        await anyio.sleep(3600)

    t0 = time.monotonic()
    messages = _run_calc(env, add, MCP_TOOL_TIMEOUT="2000")
    assert time.monotonic() - t0 < 60
    results = tool_results(messages)
    assert len(results) == 1 and results[0].is_error, results
    assert "MCP_TOOL_TIMEOUT" in result_text(results[0]), result_text(results[0])
    assert isinstance(messages[-1], ResultMessage) and messages[-1].subtype == "success"


def test_a_host_disables_enables_and_reconnects_its_server(start):
    env = start("sdk_tool")
    calls = []

    async def add(args):
        calls.append(args)
        return {"content": [{"type": "text", "text": f"the sum is {args['a'] + args['b']:g}"}]}

    async def main():
        opts = env.options(
            mcp_servers={"calc": _calc_server(add)}, allowed_tools=["mcp__calc__add"], max_turns=5
        )
        async with ClaudeSDKClient(options=opts) as client:
            await client.toggle_mcp_server("calc", False)
            off = await client.get_mcp_status()
            await client.toggle_mcp_server("calc", True)
            on = await client.get_mcp_status()
            await client.reconnect_mcp_server("calc")
            await client.query("Add 2 and 3.")
            messages = [m async for m in client.receive_response()]
            return off, on, messages

    off, on, messages = run(main)
    state = lambda s: {x["name"]: x["status"] for x in s["mcpServers"]}  # noqa: E731
    assert state(off) == {"calc": "disabled"}, off
    assert state(on) == {"calc": "connected"}, on
    results = tool_results(messages)
    assert len(results) == 1 and result_text(results[0]) == "the sum is 5", results
    assert calls == [{"a": 2, "b": 3}]


# An OpenAI model through keel: the same SDK, the same frames, another provider behind them.
OPENAI_MODELS = ["openai/gpt-5", "openai-chat/gpt-5"]


@pytest.mark.parametrize("model", OPENAI_MODELS)
def test_an_openai_model_does_a_tool_round_trip(start, model):
    env = start("bash_echo", openai=True)

    async def main():
        opts = env.options(allowed_tools=["Bash"], max_turns=5, model=model)
        return [m async for m in query(prompt="Run echo hi, then tell me what it printed.", options=opts)]

    messages = run(main)
    assert_keel_ran(env, messages)
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert (init.data["model"], init.data["provider"]) == (model, model.split("/")[0])
    results = tool_results(messages)
    assert len(results) == 1 and result_text(results[0]).strip() == "hi" and not results[0].is_error
    assert texts(messages) == ["I'll run it.", "The command printed: hi"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success" and result.num_turns == 2
    reqs = env.mock.requests()
    api = "/v1/responses" if model.startswith("openai/") else "/v1/chat/completions"
    assert [r["path"] for r in reqs] == [api, api]
    # The model id went out without keel's provider prefix, and keel-mock's validator for that
    # API accepted the request that carried the tool result back.
    assert reqs[1]["body"]["model"] == "gpt-5"
    assert reqs[1]["status"] == 200 and reqs[1]["validation_error"] is None
    assert "hi" in json.dumps(reqs[1]["view"])


CLOUD_MODELS = {
    "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex": "claude-sonnet-4-5@20250929",
}


@pytest.mark.parametrize("cloud", sorted(CLOUD_MODELS))
def test_a_cloud_model_does_a_tool_round_trip(start, cloud):
    env = start("bash_echo", cloud=cloud)

    async def main():
        opts = env.options(allowed_tools=["Bash"], max_turns=5)
        return [m async for m in query(prompt="Run echo hi, then tell me what it printed.", options=opts)]

    messages = run(main)
    assert_keel_ran(env, messages)
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert (init.data["model"], init.data["provider"]) == (CLOUD_MODELS[cloud], cloud)
    results = tool_results(messages)
    assert len(results) == 1 and result_text(results[0]).strip() == "hi" and not results[0].is_error
    assert texts(messages) == ["I'll run it.", "The command printed: hi"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success" and result.num_turns == 2
    reqs = env.mock.requests()
    assert [r["dialect"] for r in reqs] == [cloud, cloud]
    # The model is named in the URL, not the body; keel-mock checked the cloud's own fields
    # (and, for Bedrock, the shape of the SigV4 signature) and accepted both requests.
    assert all("model" not in r["body"] for r in reqs)
    assert CLOUD_MODELS[cloud] in reqs[1]["path"]
    assert reqs[1]["status"] == 200 and reqs[1]["validation_error"] is None
    assert "hi" in json.dumps(reqs[1]["body"]["messages"])
    if cloud == "bedrock":
        assert reqs[0]["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")


@pytest.mark.parametrize("cloud", sorted(CLOUD_MODELS))
def test_a_cloud_model_is_interrupted_truthfully(start, cloud):
    env = start("long_bash", cloud=cloud)
    messages, state = interrupt_the_long_command(env)
    assert_interrupted_truthfully(env, messages, state)
    assert {r["dialect"] for r in env.mock.requests()} == {cloud}


@pytest.mark.parametrize("model", OPENAI_MODELS)
def test_an_openai_model_is_interrupted_truthfully(start, model):
    env = start("long_bash", openai=True)
    messages, state = interrupt_the_long_command(env, model=model)
    assert_interrupted_truthfully(env, messages, state)
