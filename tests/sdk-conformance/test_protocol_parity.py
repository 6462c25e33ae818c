"""Protocol parity with what the official Python SDK sends and checks (issue 32): the version
check, `origin`, offered tools, subagent text, structured output, `/clear`, output styles, the
stdin contract and the capability account. Each test drives the keel binary against keel-mock
through the SDK itself."""

from __future__ import annotations

import json
import logging
import subprocess

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
