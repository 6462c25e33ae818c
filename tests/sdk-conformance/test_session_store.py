"""The official Python SDK's session store (`ClaudeAgentOptions(session_store=...)`) on keel:
the SDK starts keel with `--session-mirror`, keeps the `transcript_mirror` frames keel prints,
and resumes from what it kept by writing it into a temporary config directory."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from claude_agent_sdk import InMemorySessionStore, ResultMessage, project_key_for_directory, query

from test_python_sdk import assert_keel_ran, run, texts


def lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def store_env(env) -> dict[str, str]:
    """keel's environment with the config root the SDK reads (`CLAUDE_CONFIG_DIR`) at the place
    keel keeps its transcripts, so the files keel names in its mirror frames lie under the
    projects directory the SDK maps to store keys."""
    e = env.env()
    e["CLAUDE_CONFIG_DIR"] = e["KEEL_HOME"]
    return e


def first_session(env, store) -> tuple[str, list]:
    """One run with the store attached; its session id and messages."""

    async def main():
        opts = env.options(session_store=store)
        opts = replace(opts, env=store_env(env))
        return [m async for m in query(prompt="Remember the word tangerine.", options=opts)]

    messages = run(main)
    assert_keel_ran(env, messages)
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert results and not results[-1].is_error, env.stderr
    return results[-1].session_id, messages


def test_the_store_receives_exactly_the_lines_keel_wrote_subagents_included(start):
    env = start("subagent_text")
    store = InMemorySessionStore()

    async def main():
        opts = replace(env.options(session_store=store), env=store_env(env))
        return [m async for m in query(prompt="MAIN: delegate a greeting", options=opts)]

    messages = run(main)
    assert_keel_ran(env, messages)
    sid = [m for m in messages if isinstance(m, ResultMessage)][-1].session_id
    key = project_key_for_directory(env.cwd)
    projects = Path(store_env(env)["CLAUDE_CONFIG_DIR"]) / "projects" / key
    main_file = projects / f"{sid}.jsonl"
    assert main_file.is_file(), list(projects.parent.rglob("*"))
    # The main transcript, line for line.
    assert store.get_entries({"project_key": key, "session_id": sid}) == lines(main_file)
    # The subagent's file under its subpath, its metadata entry first.
    subkeys = anyio.run(store.list_subkeys, {"project_key": key, "session_id": sid})
    assert len(subkeys) == 1 and subkeys[0].startswith("subagents/agent-"), subkeys
    sub = store.get_entries({"project_key": key, "session_id": sid, "subpath": subkeys[0]})
    assert sub[0]["type"] == "agent_metadata" and sub[0]["toolUseId"] == "toolu_task", sub[0]
    sub_file = projects / sid / f"{subkeys[0]}.jsonl"
    assert sub[1:] == lines(sub_file)


def test_a_directory_the_sdk_materialized_from_the_store_resumes(start):
    """The SDK's own materialization of a store-backed resume, handed to keel as its config
    root: the conversation comes back from the store's copy alone."""
    from claude_agent_sdk._internal.session_resume import materialize_resume_session

    env = start("resume")
    store = InMemorySessionStore()
    sid, _ = first_session(env, store)
    # Nothing of the session stays on this machine but the store's copy.
    shutil.rmtree(store_env(env)["KEEL_HOME"])

    async def second():
        base = env.options(session_store=store, resume=sid)
        materialized = await materialize_resume_session(base)
        assert materialized is not None, "the store holds the session"
        try:
            e = env.env()
            e["KEEL_HOME"] = str(materialized.config_dir)
            e["CLAUDE_CONFIG_DIR"] = str(materialized.config_dir)
            opts = env.options(resume=sid)
            opts = replace(opts, env=e)
            return [m async for m in query(prompt="What was the word?", options=opts)]
        finally:
            await materialized.cleanup()

    resumed = run(second)
    assert texts(resumed) == ["The word was tangerine."], env.stderr
    assert resumed[-1].session_id == sid
    msgs = env.mock.requests()[-1]["body"]["messages"]
    assert "Remember the word tangerine." in str(msgs[0]), "the resumed request carries the old conversation"


def test_a_store_backed_resume_through_the_sdk(start):
    env = start("resume")
    store = InMemorySessionStore()
    sid, _ = first_session(env, store)
    key = project_key_for_directory(env.cwd)
    kept = len(store.get_entries({"project_key": key, "session_id": sid}))
    shutil.rmtree(store_env(env)["KEEL_HOME"])

    async def second():
        opts = env.options(session_store=store, resume=sid)
        return [m async for m in query(prompt="What was the word?", options=opts)]

    resumed = run(second)
    assert texts(resumed) == ["The word was tangerine."], env.stderr
    assert resumed[-1].session_id == sid
    # The resumed run's lines were mirrored into the same session of the store.
    after = store.get_entries({"project_key": key, "session_id": sid})
    assert len(after) > kept
    assert "What was the word?" in json.dumps(after[kept:])
