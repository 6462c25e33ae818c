"""Skills and custom slash commands through the official Python SDK: what a script that
calls them by name sees (`system/init`) and what the model received."""

from __future__ import annotations

import json

import anyio
from claude_agent_sdk import ClaudeSDKClient, ResultMessage, SystemMessage, query

TIMEOUT = 90  # seconds per test: generous for a loaded 2-core machine


def run(coro_fn):
    async def bounded():
        with anyio.fail_after(TIMEOUT):
            return await coro_fn()

    return anyio.run(bounded)


def init_of(messages):
    inits = [m for m in messages if isinstance(m, SystemMessage) and m.subtype == "init"]
    assert inits, f"no system/init among {messages}"
    assert "keel_version" in inits[0].data, "keel answered, not the bundled CLI"
    return inits[0].data


def sent_texts(request) -> list[str]:
    out = []
    for m in request["body"]["messages"]:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for b in content:
            if "text" in b:
                out.append(b["text"])
            c = b.get("content")
            if isinstance(c, str):
                out.append(c)
            elif isinstance(c, list):
                out.extend(p.get("text", "") for p in c)
    return out


def test_a_custom_command_is_listed_and_expanded(start):
    env = start("command_text")
    commands = env.cwd / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "greet.md").write_text(
        "---\ndescription: Greet someone\nargument-hint: NAME\n---\nGreet $1 warmly.\n"
    )

    async def main():
        async with ClaudeSDKClient(options=env.options()) as client:
            info = await client.get_server_info()
            await client.query("/greet Bob")
            return info, [m async for m in client.receive_response()]

    info, messages = run(main)
    listed = {c["name"]: c for c in info["commands"]}
    assert listed["greet"]["description"] == "Greet someone", info["commands"]
    assert listed["greet"]["argumentHint"] == "NAME"
    init = init_of(messages)
    assert "greet" in init["slash_commands"], init["slash_commands"]
    assert "greet" not in init["skills"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success"
    sent = sent_texts(env.mock.requests()[0])
    assert "Greet Bob warmly." in sent, sent
    assert not any(t == "/greet Bob" for t in sent), sent
    assert any("<command-name>/greet</command-name>" in t for t in sent), sent


def test_a_skill_is_listed_and_its_body_sent_when_loaded(start):
    env = start("skill_load")
    skill = env.cwd / ".claude" / "skills" / "changelog"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: changelog\ndescription: Write the changelog for a release\n---\n"
        "List every change since $ARGUMENTS.\n"
    )

    async def main():
        opts = env.options(max_turns=4)
        return [m async for m in query(prompt="Write the changelog.", options=opts)]

    messages = run(main)
    init = init_of(messages)
    assert init["skills"] == ["changelog"], init["skills"]
    assert "Skill" in init["tools"]
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success", result
    first, second = env.mock.requests()[:2]
    tools = {t["name"]: t for t in first["body"]["tools"]}
    assert "- changelog: Write the changelog for a release" in tools["Skill"]["description"]
    assert "List every change" not in json.dumps(first["body"]), "no body before use"
    assert "List every change since v2.0." in "\n".join(sent_texts(second))
