"""File checkpoints through the official Python SDK: `enable_file_checkpointing`, the replayed
user messages' uuids, and `ClaudeSDKClient.rewind_files`."""

from __future__ import annotations

import anyio
import pytest
from claude_agent_sdk import ClaudeSDKClient, TextBlock, UserMessage

TIMEOUT = 90  # seconds: generous for a loaded machine; never hit when green


def run(coro_fn):
    async def bounded():
        with anyio.fail_after(TIMEOUT):
            return await coro_fn()

    return anyio.run(bounded)


def prompt_uuid(messages, text: str) -> str:
    """The uuid keel gave the replayed prompt `text`."""
    for m in messages:
        if isinstance(m, UserMessage) and m.uuid and isinstance(m.content, list):
            if any(isinstance(b, TextBlock) and b.text == text for b in m.content):
                return m.uuid
    raise AssertionError(f"no replayed prompt {text!r} among {messages}")


def test_rewind_files_restores_edits_and_deletes_created_files(start):
    env = start("rewind")
    notes, extra = env.cwd / "notes.txt", env.cwd / "extra.txt"

    async def main():
        opts = env.options(
            enable_file_checkpointing=True,
            permission_mode="acceptEdits",
            extra_args={"replay-user-messages": None},
        )
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("Write the notes.")
            first = [m async for m in client.receive_response()]
            await client.query("Change the notes.")
            second = [m async for m in client.receive_response()]
            assert notes.read_text() == "two\n" and extra.exists()
            await client.rewind_files(prompt_uuid(second, "Change the notes."))
            after_second = (notes.read_text(), extra.exists())
            await client.rewind_files(prompt_uuid(first, "Write the notes."))
            after_first = notes.exists()
            with pytest.raises(Exception) as unknown:
                await client.rewind_files("00000000-0000-4000-8000-000000000000")
            return after_second, after_first, str(unknown.value)

    after_second, after_first, unknown = run(main)
    assert after_second == ("one\n", False), after_second
    assert after_first is False, "notes.txt was created after the first prompt"
    assert "no checkpoint" in unknown, unknown


def test_rewind_files_refuses_a_file_changed_outside_keel(start):
    env = start("rewind")
    notes = env.cwd / "notes.txt"

    async def main():
        opts = env.options(
            enable_file_checkpointing=True,
            permission_mode="acceptEdits",
            extra_args={"replay-user-messages": None},
        )
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("Write the notes.")
            first = [m async for m in client.receive_response()]
            notes.write_text("edited by hand\n")
            with pytest.raises(Exception) as refused:
                await client.rewind_files(prompt_uuid(first, "Write the notes."))
            return str(refused.value)

    refused = run(main)
    assert "notes.txt changed outside keel" in refused, refused
    assert notes.read_text() == "edited by hand\n", "nothing was restored"


def test_rewind_files_without_checkpointing_says_so(start):
    env = start("rewind")

    async def main():
        opts = env.options(permission_mode="acceptEdits", extra_args={"replay-user-messages": None})
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("Write the notes.")
            first = [m async for m in client.receive_response()]
            with pytest.raises(Exception) as off:
                await client.rewind_files(prompt_uuid(first, "Write the notes."))
            return str(off.value)

    off = run(main)
    assert "checkpointing is off" in off, off
    assert (env.cwd / "notes.txt").read_text() == "one\n"


def test_rewind_files_after_a_resume_reaches_the_earlier_run(start):
    """The checkpoint index outlives the process: a client that resumes the session rewinds to
    a prompt of the first client's run."""
    env = start("rewind")
    notes, extra = env.cwd / "notes.txt", env.cwd / "extra.txt"

    def opts(**kw):
        return env.options(
            enable_file_checkpointing=True,
            permission_mode="acceptEdits",
            extra_args={"replay-user-messages": None},
            **kw,
        )

    async def first_run():
        async with ClaudeSDKClient(options=opts()) as client:
            await client.query("Write the notes.")
            first = [m async for m in client.receive_response()]
            await client.query("Change the notes.")
            [m async for m in client.receive_response()]
            session = next(m.session_id for m in first if hasattr(m, "session_id") and m.session_id)
            return prompt_uuid(first, "Write the notes."), session

    uuid, session = run(first_run)
    assert notes.read_text() == "two\n" and extra.exists()

    async def resumed():
        async with ClaudeSDKClient(options=opts(resume=session)) as client:
            await client.rewind_files(uuid)

    run(resumed)
    assert not notes.exists(), "created after the first prompt: deleted"
    assert not extra.exists()
