"""Protocol parity with what the official Python SDK sends and checks (issue 32): the version
check, `origin`, offered tools, subagent text, structured output, `/clear`, output styles, the
stdin contract and the capability account. Each test drives the keel binary against keel-mock
through the SDK itself."""

from __future__ import annotations

import json
import logging
import subprocess

import pytest

from claude_agent_sdk import ResultMessage, SystemMessage, query
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from conftest import KEEL
from test_python_sdk import assert_keel_ran, run


def test_the_sdks_version_check_reads_dash_v_and_init(start, caplog):
    env = start("text")
    out = subprocess.run([str(KEEL), "-v"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert "(keel " in line, line
    # The SDK's own check, fed keel's `-v` line: with verbatim_prompts it also compares the
    # version with its minimum, and warns when it cannot parse one or finds it too old.
    opts = env.options(verbatim_prompts=True)
    t = SubprocessCLITransport(prompt="x", options=opts)
    with caplog.at_level(logging.WARNING):
        t._check_claude_version({"type": "system", "subtype": "init", "claude_code_version": line})
    assert not caplog.records, [r.getMessage() for r in caplog.records]

    # And the running keel's `system/init` passes the same check during a real query.
    async def main():
        return [m async for m in query(prompt="Say hi.", options=env.options(verbatim_prompts=True))]

    with caplog.at_level(logging.WARNING):
        messages = run(main)
    assert_keel_ran(env, messages)
    init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
    assert line.startswith(init.data["claude_code_version"] + " "), (line, init.data)
    assert not [r for r in caplog.records if "version" in r.getMessage()], caplog.records
    assert isinstance(messages[-1], ResultMessage) and messages[-1].subtype == "success"


SCHEMA = {
    "type": "object",
    "properties": {
        "file_count": {"type": "number"},
        "kind": {"enum": ["python", "rust"]},
        "detail": {"type": "object", "properties": {"has_tests": {"type": "boolean"}}, "required": ["has_tests"]},
    },
    "required": ["file_count", "kind"],
}


def structured_run(env, extra_env=None):
    seen = []

    async def main():
        opts = env.options(
            allowed_tools=["Bash"],
            output_format={"type": "json_schema", "schema": SCHEMA},
        )
        if extra_env:
            opts.env.update(extra_env)
        async for m in query(prompt="Count the files.", options=opts):
            seen.append(m)

    return seen, main


def test_structured_output_after_a_tool_call(start):
    env = start("structured")
    seen, main = structured_run(env)
    run(main)
    assert_keel_ran(env, seen)
    result = seen[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error) == ("success", False)
    want = {"file_count": 3, "kind": "python", "detail": {"has_tests": True}}
    assert result.structured_output == want
    assert json.loads(result.result) == want
    assert len(env.mock.requests()) == 2, "no request after the accepted call"


def test_structured_output_refused_twice_is_a_typed_error(start):
    from claude_agent_sdk import ClaudeSDKError

    env = start("structured_invalid")
    seen, main = structured_run(env, {"MAX_STRUCTURED_OUTPUT_RETRIES": "2"})
    try:
        run(main)
    except ClaudeSDKError:
        pass  # the SDK raises on an error result after yielding it
    result = seen[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error) == ("error_max_structured_output_retries", True)
    assert result.structured_output is None
    assert len(env.mock.requests()) == 2


def test_a_text_answer_is_never_a_structured_success(start):
    from claude_agent_sdk import ClaudeSDKError

    env = start("structured_text")
    seen, main = structured_run(env)
    try:
        run(main)
    except ClaudeSDKError:
        pass
    result = seen[-1]
    assert isinstance(result, ResultMessage)
    assert result.is_error and result.subtype != "success"
    assert result.structured_output is None
    assert "--json-schema" in (result.result or "")


def test_output_style_from_the_settings_files(start):
    env = start("style")
    claude = env.cwd / ".claude"
    (claude / "output-styles").mkdir(parents=True)
    (claude / "output-styles" / "t.md").write_text(
        "---\nname: local-test-style\ndescription: terse\n---\nKEEP-IT-TERSE\n"
    )
    (claude / "settings.local.json").write_text(json.dumps({"outputStyle": "local-test-style"}))
    user = env.home / ".claude"
    user.mkdir()
    (user / "settings.json").write_text(json.dumps({"outputStyle": "Learning"}))

    def init_style(**kw):
        async def main():
            return [m async for m in query(prompt="What is 2 + 2?", options=env.options(**kw))]

        messages = run(main)
        assert_keel_ran(env, messages)
        init = next(m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init")
        return init.data["output_style"]

    assert init_style() == "local-test-style"
    system = json.dumps(env.mock.requests()[-1]["body"].get("system"))
    assert "KEEP-IT-TERSE" in system, system
    # setting_sources leaves the local file out: the user's style applies.
    assert init_style(setting_sources=["user", "project"]) == "Learning"
    assert init_style(setting_sources=["project"]) == "default"


def test_origin_round_trip(start):
    env = start("two_turns")

    async def prompts():
        yield {"type": "user", "message": {"role": "user", "content": "first question"},
               "parent_tool_use_id": None, "session_id": "", "origin": {"kind": "human"}}
        yield {"type": "user", "message": {"role": "user", "content": "second question"},
               "parent_tool_use_id": None, "session_id": ""}

    async def main():
        return [m async for m in query(prompt=prompts(), options=env.options())]

    messages = run(main)
    assert_keel_ran(env, messages)
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert [r.result for r in results] == ["First answer.", "Second answer."]
    assert results[0].origin == {"kind": "human"}
    assert results[1].origin is None


def subagent_assistant_blocks(forward):
    from claude_agent_sdk import AssistantMessage, TextBlock, ToolUseBlock

    def go(env):
        async def main():
            opts = env.options(permission_mode="bypassPermissions")
            if forward is not None:
                opts.forward_subagent_text = forward
            return [m async for m in query(prompt="MAIN", options=opts)]

        messages = run(main)
        assert_keel_ran(env, messages)
        assert messages[-1].result == "main done"
        out = []
        for m in messages:
            if isinstance(m, AssistantMessage) and m.parent_tool_use_id == "toolu_task":
                for b in m.content:
                    if isinstance(b, TextBlock):
                        out.append(("text", b.text))
                    elif isinstance(b, ToolUseBlock):
                        out.append(("tool_use", b.name))
        return out

    return go


@pytest.mark.parametrize(
    "forward,want",
    [
        (None, [("tool_use", "Bash")]),
        (False, [("tool_use", "Bash")]),
        (True, [("text", "SUB-THINKS-ALOUD"), ("tool_use", "Bash"), ("text", "SUB-REPORT")]),
    ],
)
def test_subagent_text_is_forwarded_only_when_asked(start, forward, want):
    assert subagent_assistant_blocks(forward)(start("subagent_text")) == want
