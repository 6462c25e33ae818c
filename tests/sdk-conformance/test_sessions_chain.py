"""Claude-Code-style readers reconstruct keel's sessions: after a keel session with several
turns, a tool call, a subagent, a `--resume-session-at` fork and a resume, the official SDK's
`get_session_messages` (which walks the `parentUuid` chain from the newest message, as Claude
Code does) returns exactly the conversation keel sent the model in its last request."""

from __future__ import annotations

import json
import subprocess

from claude_agent_sdk import get_session_messages

from conftest import KEEL

TIMEOUT = 120


def keel(env, *args: str) -> list[dict]:
    """One headless keel run; its stream-json frames."""
    proc = subprocess.run(
        [str(KEEL), "--output-format", "stream-json", "--verbose",
         "--allowedTools=Bash,Task", *args],
        cwd=env.cwd, env=env.env(), capture_output=True, text=True, timeout=TIMEOUT,
    )
    frames = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
    assert proc.returncode == 0, (proc.stderr, frames[-1:] if frames else proc.stdout)
    result = frames[-1]
    assert result["type"] == "result" and result["subtype"] == "success", result
    return frames


def blocks(content) -> list[dict]:
    """A message's content as API blocks, without the cache markers requests carry."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in content]


def merged(messages: list[tuple[str, list[dict]]]) -> list[dict]:
    """Consecutive messages of one role as one: what a request carries."""
    out: list[dict] = []
    for role, bs in messages:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(bs)
        else:
            out.append({"role": role, "content": list(bs)})
    return out


def test_the_sdk_reads_back_exactly_the_history_keel_sent(start, monkeypatch):
    env = start("sessions_chain")
    # The SDK's reader looks where keel writes: $CLAUDE_CONFIG_DIR/projects.
    config = env.tmp / "config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    base_env = env.env

    def with_config():
        e = base_env()
        e.pop("KEEL_HOME")
        e["CLAUDE_CONFIG_DIR"] = str(config)
        return e

    env.env = with_config

    first = keel(env, "-p", "MAIN: first question")
    sid = first[-1]["session_id"]
    keel(env, "-p", "second question", "--resume", sid)
    second_answer = [
        f for f in keel(env, "-p", "third question", "--resume", sid)
        if f["type"] == "assistant"
    ]
    assert second_answer, "the third turn answered"
    # Fork at the second turn's answer: the third turn is left out of the fork.
    msgs = get_session_messages(sid, directory=str(env.cwd))
    at = next(m.uuid for m in msgs if m.type == "assistant"
              and blocks(m.message["content"]) == [{"type": "text", "text": "second answer"}])
    forked = keel(env, "-p", "forked question", "--resume", sid,
                  "--resume-session-at", at, "--fork-session")
    fork_sid = forked[-1]["session_id"]
    assert fork_sid != sid
    keel(env, "-p", "final question", "--resume", fork_sid)

    sent = env.mock.requests()[-1]["body"]["messages"]
    want = [{"role": m["role"], "content": blocks(m["content"])} for m in sent]
    got = get_session_messages(fork_sid, directory=str(env.cwd))
    assert got[-1].type == "assistant"
    assert blocks(got[-1].message["content"]) == [{"type": "text", "text": "final answer"}]
    read_back = merged([(m.type, blocks(m.message["content"])) for m in got[:-1]])
    assert read_back == want, json.dumps({"sdk": read_back, "sent": want}, indent=1)
    texts = json.dumps(want)
    for turn in ["MAIN: first question", "main-ran", "second answer", "forked question",
                 "final question"]:
        assert turn in texts, turn
    assert "third question" not in texts, "the fork left the third turn out"
    assert "SUB-REPORT" in texts, "the subagent's report came back as the Task result"
    assert "echo sub-ran" not in texts, "the subagent's own conversation is not the main one"
