"""Feed keel's stream-json transcripts through the official Python SDK's own message parser.

Usage: check_parse.py DIR

DIR holds the transcripts run.sh saved: full.jsonl (+ full.exit) and max_turns.jsonl
(+ max_turns.exit). Every line must parse with `claude_agent_sdk`'s `parse_message` into the
class its `type` calls for, with the fields the SDK exposes equal to the raw line; then each
transcript must contain what its scenario scripted (tests/python-sdk/scenario.json).

Prints one summary line, "python-sdk-parse: N passed, M failed"; exits 1 if anything failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

try:
    # The parser the SDK runs on every line the CLI prints (0.1.x and 0.2.x keep it here).
    from claude_agent_sdk._internal.message_parser import parse_message
except ImportError as e:  # pragma: no cover - depends on the installed SDK
    sys.exit(f"python-sdk-parse: cannot import the SDK's message parser: {e}")

import claude_agent_sdk
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk.types import StreamEvent, TaskNotificationMessage, TaskStartedMessage

EXPECTED_CLASS = {
    "system": SystemMessage,
    "assistant": AssistantMessage,
    "user": UserMessage,
    "result": ResultMessage,
    "stream_event": StreamEvent,
}

BLOCK_CLASS = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
}


class Checks:
    """Counts checks; remembers why the failed ones failed."""

    def __init__(self) -> None:
        self.passed = 0
        self.failures: list[str] = []

    def check(self, name: str, problems: list[str] | bool) -> None:
        if isinstance(problems, bool):
            problems = [] if problems else ["expectation not met"]
        if problems:
            self.failures.append(f"{name}: " + "; ".join(problems))
        else:
            self.passed += 1


def diff(label: str, got: Any, want: Any) -> list[str]:
    if got == want:
        return []
    return [f"{label}: SDK has {got!r}, line has {want!r}"]


def block_problems(i: int, block: Any, raw: dict) -> list[str]:
    kind = raw.get("type")
    want = BLOCK_CLASS.get(kind)
    p = [] if want is None else ([] if type(block) is want else [
        f"block {i} ({kind}) parsed as {type(block).__name__}, expected {want.__name__}"
    ])
    if p:
        return p
    if kind == "text":
        p += diff(f"block {i} text", block.text, raw["text"])
    elif kind == "thinking":
        p += diff(f"block {i} thinking", block.thinking, raw["thinking"])
        p += diff(f"block {i} signature", block.signature, raw["signature"])
    elif kind == "tool_use":
        p += diff(f"block {i} id", block.id, raw["id"])
        p += diff(f"block {i} name", block.name, raw["name"])
        p += diff(f"block {i} input", block.input, raw["input"])
    elif kind == "tool_result":
        p += diff(f"block {i} tool_use_id", block.tool_use_id, raw["tool_use_id"])
        p += diff(f"block {i} content", block.content, raw.get("content"))
        p += diff(f"block {i} is_error", block.is_error, raw.get("is_error"))
    return p


def round_trip(msg: Any, raw: dict) -> list[str]:
    """The fields the SDK exposes, compared with the raw line."""
    t = raw["type"]
    p: list[str] = []
    if t == "system":
        p += diff("subtype", msg.subtype, raw["subtype"])
        p += diff("data", msg.data, raw)
    elif t == "assistant":
        m = raw["message"]
        p += diff("model", msg.model, m["model"])
        p += diff("message_id", msg.message_id, m.get("id"))
        p += diff("usage", msg.usage, m.get("usage"))
        p += diff("stop_reason", msg.stop_reason, m.get("stop_reason"))
        p += diff("session_id", msg.session_id, raw.get("session_id"))
        p += diff("uuid", msg.uuid, raw.get("uuid"))
        p += diff("parent_tool_use_id", msg.parent_tool_use_id, raw.get("parent_tool_use_id"))
        p += diff("block count", len(msg.content), len(m["content"]))
        for i, (b, rb) in enumerate(zip(msg.content, m["content"])):
            p += block_problems(i, b, rb)
    elif t == "user":
        content = raw["message"]["content"]
        p += diff("uuid", msg.uuid, raw.get("uuid"))
        p += diff("parent_tool_use_id", msg.parent_tool_use_id, raw.get("parent_tool_use_id"))
        p += diff("tool_use_result", msg.tool_use_result, raw.get("tool_use_result"))
        if isinstance(content, list):
            p += diff("block count", len(msg.content), len(content))
            for i, (b, rb) in enumerate(zip(msg.content, content)):
                p += block_problems(i, b, rb)
        else:
            p += diff("content", msg.content, content)
    elif t == "result":
        for field in (
            "subtype",
            "is_error",
            "num_turns",
            "duration_ms",
            "duration_api_ms",
            "session_id",
        ):
            p += diff(field, getattr(msg, field), raw[field])
        for field in (
            "total_cost_usd",
            "usage",
            "result",
            "permission_denials",
            "errors",
            "stop_reason",
            "terminal_reason",
            "uuid",
            "api_error_status",
        ):
            if hasattr(msg, field):
                p += diff(field, getattr(msg, field), raw.get(field))
        p += diff("model_usage", msg.model_usage, raw.get("modelUsage"))
    elif t == "stream_event":
        p += diff("uuid", msg.uuid, raw["uuid"])
        p += diff("session_id", msg.session_id, raw["session_id"])
        p += diff("event", msg.event, raw["event"])
        p += diff("parent_tool_use_id", msg.parent_tool_use_id, raw.get("parent_tool_use_id"))
    return p


def parse_file(c: Checks, path: Path) -> list[tuple[dict, Any]]:
    """Check every line of one transcript; returns (raw, parsed) pairs."""
    out: list[tuple[dict, Any]] = []
    lines = path.read_text().splitlines()
    c.check(f"{path.name}: has lines", bool(lines))
    for n, line in enumerate(lines, 1):
        where = f"{path.name}:{n}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            c.check(f"{where}: is JSON", [str(e)])
            continue
        t = raw.get("type") if isinstance(raw, dict) else None
        try:
            msg = parse_message(raw)
        except Exception as e:  # noqa: BLE001 - any exception is the finding
            c.check(f"{where} ({t}): parses", [f"{type(e).__name__}: {e}"])
            continue
        want = EXPECTED_CLASS.get(t)
        if want is None:
            c.check(f"{where}: keel only writes known types", [f"unexpected type {t!r}"])
            continue
        if not isinstance(msg, want):
            c.check(
                f"{where} ({t}): class",
                [f"parsed as {type(msg).__name__}, expected {want.__name__}"],
            )
            continue
        c.check(f"{where} ({t}): parses as {want.__name__}, fields round-trip", round_trip(msg, raw))
        out.append((raw, msg))
    return out


def of(msgs: list[tuple[dict, Any]], cls: type) -> list[Any]:
    return [m for _, m in msgs if isinstance(m, cls)]


def blocks(msgs: list[tuple[dict, Any]], cls: type, block_cls: type) -> list[Any]:
    return [b for m in of(msgs, cls) if isinstance(m.content, list) for b in m.content if isinstance(b, block_cls)]


def common(c: Checks, name: str, msgs: list[tuple[dict, Any]], exit_code: int, want_exit: int) -> ResultMessage | None:
    c.check(f"{name}: exit code {want_exit}", exit_code == want_exit or [f"keel exited {exit_code}"])
    first = msgs[0][1] if msgs else None
    c.check(
        f"{name}: starts with SystemMessage(init)",
        isinstance(first, SystemMessage) and first.subtype == "init",
    )
    results = of(msgs, ResultMessage)
    c.check(f"{name}: exactly one ResultMessage, last", len(results) == 1 and msgs[-1][1] is results[0])
    sids = {raw.get("session_id") for raw, _ in msgs}
    c.check(f"{name}: one session_id throughout", len(sids) == 1 and None not in sids)
    if results and first is not None and isinstance(first, SystemMessage):
        c.check(
            f"{name}: init and result agree on session_id",
            diff("session_id", results[0].session_id, first.data.get("session_id")),
        )
    events = {m.event.get("type") for m in of(msgs, StreamEvent)}
    want = {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
    c.check(f"{name}: StreamEvents cover the SSE event types", sorted(want - events) == [] or [f"missing {sorted(want - events)}"])
    return results[0] if results else None


def check_full(c: Checks, msgs: list[tuple[dict, Any]], exit_code: int) -> None:
    name = "full"
    r = common(c, name, msgs, exit_code, 0)
    systems = of(msgs, SystemMessage)
    retries = [s for s in systems if s.subtype == "api_retry"]
    c.check(
        f"{name}: SystemMessage(api_retry) for the scripted 529",
        bool(retries) and retries[0].data.get("error_status") == 529,
    )
    denied = [s for s in systems if s.subtype == "permission_denied"]
    c.check(
        f"{name}: SystemMessage(permission_denied) for Write",
        bool(denied) and denied[0].data.get("tool_name") == "Write",
    )
    c.check(f"{name}: ThinkingBlock", bool(blocks(msgs, AssistantMessage, ThinkingBlock)))
    texts = [b.text for b in blocks(msgs, AssistantMessage, TextBlock)]
    c.check(f"{name}: TextBlocks", "Let me look around first." in texts and any(t.startswith("Done.") for t in texts))
    uses = {b.name: b for b in blocks(msgs, AssistantMessage, ToolUseBlock)}
    c.check(f"{name}: ToolUseBlocks Bash, Read, Write", sorted(uses) == ["Bash", "Read", "Write"] or [f"got {sorted(uses)}"])
    results = {b.tool_use_id: b for b in blocks(msgs, UserMessage, ToolResultBlock)}
    c.check(f"{name}: a ToolResultBlock per ToolUseBlock", sorted(results) == sorted(u.id for u in uses.values()))
    bash = results.get(uses["Bash"].id) if "Bash" in uses else None
    c.check(f"{name}: Bash result", bash is not None and bash.is_error is False and "hello from bash" in str(bash.content))
    read = results.get(uses["Read"].id) if "Read" in uses else None
    c.check(f"{name}: Read result", read is not None and read.is_error is False and "the only line" in str(read.content))
    write = results.get(uses["Write"].id) if "Write" in uses else None
    c.check(f"{name}: denied Write result is an error", write is not None and write.is_error is True)
    bash_user = [m for m in of(msgs, UserMessage) if any(isinstance(b, ToolResultBlock) and bash and b.tool_use_id == bash.tool_use_id for b in m.content)]
    c.check(
        f"{name}: UserMessage.tool_use_result carries Bash stdout",
        bool(bash_user) and isinstance(bash_user[0].tool_use_result, dict) and "hello from bash" in bash_user[0].tool_use_result.get("stdout", ""),
    )
    if r is None:
        return
    c.check(f"{name}: result success", (r.subtype, r.is_error) == ("success", False) or [f"got {(r.subtype, r.is_error)}"])
    c.check(f"{name}: num_turns 3", diff("num_turns", r.num_turns, 3))
    c.check(f"{name}: total_cost_usd > 0", isinstance(r.total_cost_usd, float) and r.total_cost_usd > 0)
    # Input is billed as plain input, cache writes or cache reads (keel marks cache breakpoints).
    input_total = sum(
        (r.usage or {}).get(k, 0) or 0
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    c.check(f"{name}: usage has token counts", isinstance(r.usage, dict) and input_total > 0)
    c.check(
        f"{name}: permission_denials names Write",
        bool(r.permission_denials) and r.permission_denials[0].get("tool_name") == "Write",
    )
    c.check(f"{name}: result text", (r.result or "").startswith("Done."))


def check_max_turns(c: Checks, msgs: list[tuple[dict, Any]], exit_code: int) -> None:
    name = "max_turns"
    r = common(c, name, msgs, exit_code, 3)
    if r is None:
        return
    c.check(
        f"{name}: result error_max_turns",
        (r.subtype, r.is_error) == ("error_max_turns", True) or [f"got {(r.subtype, r.is_error)}"],
    )
    c.check(f"{name}: terminal_reason max_turns", diff("terminal_reason", getattr(r, "terminal_reason", "max_turns"), "max_turns"))
    c.check(f"{name}: errors listed", bool(r.errors))
    c.check(f"{name}: the one allowed tool call ran", bool(blocks(msgs, UserMessage, ToolResultBlock)))


def check_agents(c: Checks, msgs: list[tuple[dict, Any]], exit_code: int) -> None:
    name = "agents"
    r = common(c, name, msgs, exit_code, 0)
    started = of(msgs, TaskStartedMessage)
    done = of(msgs, TaskNotificationMessage)
    c.check(f"{name}: TaskStartedMessage for the subagent and the background shell", len(started) == 2 or [f"got {len(started)}"])
    c.check(f"{name}: TaskNotificationMessage for both", len(done) == 2 or [f"got {len(done)}"])
    c.check(f"{name}: every task completed", all(m.status == "completed" for m in done) or [f"got {[m.status for m in done]}"])
    # A foreground subagent's text stays off the stream unless the host asks for it
    # (initialize.forwardSubagentText, as Claude Code does); its answer reaches the parent
    # as the Task call's result.
    child_text = [
        b.text
        for raw, m in msgs
        if isinstance(m, AssistantMessage) and raw.get("parent_tool_use_id")
        for b in m.content
        if isinstance(b, TextBlock)
    ]
    c.check(f"{name}: the subagent's text is not forwarded by default", not child_text or [f"got {child_text}"])
    answers = [
        b
        for b in blocks(msgs, UserMessage, ToolResultBlock)
        if "notes.txt has one line." in json.dumps(b.content)
    ]
    c.check(f"{name}: the subagent's answer reaches the parent as the Task result", bool(answers))
    if r is not None:
        c.check(f"{name}: result success", (r.subtype, r.is_error) == ("success", False) or [f"got {(r.subtype, r.is_error)}"])


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = Path(sys.argv[1])
    c = Checks()
    cases: list[tuple[str, Callable[[Checks, list, int], None]]] = [
        ("full", check_full),
        ("max_turns", check_max_turns),
        ("agents", check_agents),
    ]
    for name, fn in cases:
        path = d / f"{name}.jsonl"
        if not path.exists():
            c.check(f"{name}: transcript exists", [f"{path} is missing"])
            continue
        exit_code = int((d / f"{name}.exit").read_text().strip())
        msgs = parse_file(c, path)
        fn(c, msgs, exit_code)
    for f in c.failures:
        print(f"FAIL {f}")
    version = getattr(claude_agent_sdk, "__version__", "?")
    print(f"python-sdk-parse: {c.passed} passed, {len(c.failures)} failed (claude-agent-sdk {version})")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
