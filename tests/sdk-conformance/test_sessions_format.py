"""The official Python SDK's session helpers read the sessions keel writes: keel's transcripts
are Claude Code's, under `$CLAUDE_CONFIG_DIR/projects` (else `~/.claude/projects`), in the
directory the SDK's own project key names."""

from __future__ import annotations

import json
import os
import subprocess
import unicodedata
from pathlib import Path

import pytest
from claude_agent_sdk import (
    get_session_messages,
    get_subagent_messages,
    list_sessions,
    list_subagents,
    query,
)
from claude_agent_sdk._internal.sessions import _sanitize_path

from conftest import KEEL
from test_python_sdk import assert_keel_ran, run

PROMPT = "MAIN: ask a helper to greet"


def keel_env(env, config_dir: Path | None) -> dict[str, str]:
    """The environment of the keel runs: with `config_dir`, CLAUDE_CONFIG_DIR; without it,
    no KEEL_HOME either, so keel uses `~/.claude` as Claude Code does."""
    e = env.env()
    if config_dir is None:
        e.pop("KEEL_HOME")
    else:
        e["CLAUDE_CONFIG_DIR"] = str(config_dir)
    return e


@pytest.mark.parametrize("with_config_dir", [True, False], ids=["CLAUDE_CONFIG_DIR", "home"])
def test_the_sdks_session_helpers_read_keels_sessions_and_subagents(start, monkeypatch, with_config_dir):
    env = start("subagent_text")
    config_dir = env.tmp / "config" if with_config_dir else None
    # The SDK's helpers look where Claude Code writes: the test process sees what keel sees.
    monkeypatch.setenv("HOME", str(env.home))
    monkeypatch.delenv("KEEL_HOME", raising=False)
    if config_dir is None:
        monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    else:
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config_dir))

    async def go():
        from claude_agent_sdk import ClaudeAgentOptions

        opts = ClaudeAgentOptions(
            cli_path=str(KEEL),
            cwd=str(env.cwd),
            env=keel_env(env, config_dir),
            stderr=env.stderr.append,
            allowed_tools=["Bash", "Task"],
        )
        return [m async for m in query(prompt=PROMPT, options=opts)]

    messages = run(go)
    assert_keel_ran(env, messages)
    sid = messages[-1].session_id
    root = config_dir if config_dir is not None else env.home / ".claude"
    key = _sanitize_path(unicodedata.normalize("NFC", os.path.realpath(env.cwd)))
    assert (root / "projects" / key / f"{sid}.jsonl").is_file(), list((root / "projects").rglob("*"))
    assert not (env.tmp / "keel-home" / "projects").exists(), "nothing under keel's own home"

    sessions = list_sessions(directory=str(env.cwd))
    assert [s.session_id for s in sessions] == [sid], sessions
    assert sessions[0].first_prompt == PROMPT
    assert sessions[0].cwd == str(env.cwd)

    msgs = get_session_messages(sid, directory=str(env.cwd))
    kinds = [m.type for m in msgs]
    assert kinds == ["user", "assistant", "user", "assistant"], [(m.type, m.message) for m in msgs]
    assert msgs[0].message["content"] == PROMPT
    call = msgs[1].message["content"][0]
    assert call["type"] == "tool_use" and call["name"] == "Task"
    result = msgs[2].message["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == call["id"]
    assert "SUB-REPORT" in json.dumps(result["content"])
    assert msgs[3].message["content"] == [{"type": "text", "text": "main done"}]
    assert all(m.session_id == sid for m in msgs)

    agents = list_subagents(sid, directory=str(env.cwd))
    assert len(agents) == 1, agents
    sub = get_subagent_messages(sid, agents[0], directory=str(env.cwd))
    sub_texts = json.dumps([m.message for m in sub])
    assert "SUB-THINKS-ALOUD" in sub_texts and "SUB-REPORT" in sub_texts, sub_texts
    assert "sub-ran" in sub_texts, "the subagent's tool result is in its transcript"
    assert all(m.parent_tool_use_id == call["id"] for m in sub), [m.parent_tool_use_id for m in sub]
    assert "main done" not in sub_texts, "the main conversation stays in the main file"


# Paths whose project keys exercise the cut at 200 characters, the hash, and characters
# outside ASCII (each one a component under 255 bytes, so the directories can exist).
KEY_PATHS = [
    "plain",
    "with space.and-dots_and_underscores",
    "ünïcödé-名前",
    "x" * 120 + "/" + "y" * 120,
    "ä" * 100 + "/" + "ö" * 100,
    "long-" + "z" * 190 + "/名前" + "q" * 30,
    "\U0001F642" * 60 + "/" + "x" * 150,
]


def test_project_keys_equal_the_sdks_for_long_and_non_ascii_paths(start):
    env = start("session_keys")
    config_dir = env.tmp / "config"
    for rel in KEY_PATHS:
        cwd = env.tmp / "k" / rel
        cwd.mkdir(parents=True)
        e = keel_env(env, config_dir)
        proc = subprocess.run(
            [str(KEEL), "-p", "hi", "--output-format", "json"],
            cwd=cwd, env=e, capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        sid = json.loads(proc.stdout)["session_id"]
        key = _sanitize_path(unicodedata.normalize("NFC", os.path.realpath(cwd)))
        found = [p.parent.name for p in (config_dir / "projects").glob(f"*/{sid}.jsonl")]
        assert found == [key], (rel, found, key)
