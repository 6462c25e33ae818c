"""keel's object-storage layout against the official Python SDK's session-store readers.

A minimal S3 session store written after the SDK's documented key layout
(`<prefix>/<project key>/<session>/part-<13-digit ms>-<6 hex>.jsonl`, subagents under
`subagents/agent-<id>/`) runs over boto3 against moto's S3 server on loopback. keel uploads a
session with KEEL_TRANSCRIPT_URL; the SDK's store-backed helpers list and read it. Then a session
the store holds (appended through the adapter, as the SDK's session mirror does) is resumed by
keel on a machine that never saw it.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import time
import uuid
from pathlib import Path

import boto3
import pytest
from claude_agent_sdk import (
    get_session_messages_from_store,
    list_sessions_from_store,
    project_key_for_directory,
)

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
KEEL = Path(os.environ.get("KEEL_BIN", TARGET / "debug" / "keel"))
KEEL_MOCK = Path(os.environ.get("KEEL_MOCK_BIN", TARGET / "debug" / "keel-mock"))
MOTO = Path(os.environ["KEEL_TEST_MOTO_SERVER"])
BUCKET, PREFIX = "keel-sdk-store", "sessions"


class S3SessionStore:
    """The SDK's SessionStore protocol over S3, in the SDK stores' key layout."""

    def __init__(self, client, bucket: str, prefix: str):
        self.s3, self.bucket, self.prefix = client, bucket, prefix.strip("/")

    def _dir(self, key) -> str:
        parts = [self.prefix, key["project_key"], key["session_id"]]
        if key.get("subpath"):
            parts.append(key["subpath"])
        return "/".join(parts) + "/"

    def _keys(self, prefix: str) -> list[dict]:
        out, token = [], None
        while True:
            kw = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            page = self.s3.list_objects_v2(**kw)
            out += page.get("Contents", [])
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]

    async def append(self, key, entries) -> None:
        name = f"part-{int(time.time() * 1000):013d}-{secrets.token_hex(3)}.jsonl"
        body = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
        self.s3.put_object(Bucket=self.bucket, Key=self._dir(key) + name, Body=body.encode())
        await asyncio.sleep(0.002)  # part names are ms-ordered

    async def load(self, key):
        d = self._dir(key)
        parts = sorted(o["Key"] for o in self._keys(d) if "/" not in o["Key"][len(d):])
        if not parts:
            return None
        entries = []
        for k in parts:
            body = self.s3.get_object(Bucket=self.bucket, Key=k)["Body"].read().decode()
            entries += [json.loads(l) for l in body.splitlines() if l.strip()]
        return entries

    async def list_sessions(self, project_key: str):
        d = f"{self.prefix}/{project_key}/"
        seen: dict[str, int] = {}
        for o in self._keys(d):
            rest = o["Key"][len(d):].split("/")
            if len(rest) == 2 and rest[1].startswith("part-"):
                mtime = int(o["LastModified"].timestamp() * 1000)
                seen[rest[0]] = max(seen.get(rest[0], 0), mtime)
        return [{"session_id": s, "mtime": m} for s, m in seen.items()]

    async def list_subkeys(self, key):
        d = self._dir({**key, "subpath": None})
        subs = {"/".join(o["Key"][len(d):].split("/")[:-1]) for o in self._keys(d)}
        return sorted(s for s in subs if s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    port = free_port()
    server = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                          aws_secret_access_key="test", region_name="us-east-1")
    deadline = time.time() + 60
    while True:
        try:
            client.create_bucket(Bucket=BUCKET)
            break
        except Exception:
            if time.time() > deadline:
                server.kill()
                raise
            time.sleep(0.1)
    yield endpoint, client
    server.terminate()
    server.wait(10)


class Mock:
    def __init__(self, steps: list, tmp: Path):
        scenario = tmp / "scenario.json"
        scenario.write_text(json.dumps({"steps": steps}))
        self.log = tmp / "mock.jsonl"
        self.proc = subprocess.Popen([str(KEEL_MOCK), "--scenario", str(scenario), "--log", str(self.log)],
                                     stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http"), self.url

    def bodies(self) -> list[str]:
        return [json.dumps(json.loads(l).get("body")) for l in self.log.read_text().splitlines() if l.strip()]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def run_keel(args: list[str], cwd: Path, home: Path, mock: Mock, endpoint: str) -> dict:
    env = dict(os.environ, ANTHROPIC_BASE_URL=mock.url, ANTHROPIC_API_KEY="sk-test-keel",
               HOME=str(home), KEEL_HOME=str(home / "keel"), KEEL_MAX_RETRIES="0",
               KEEL_TRANSCRIPT_URL=f"s3://{BUCKET}/{PREFIX}", AWS_ENDPOINT_URL=endpoint,
               AWS_ALLOW_HTTP="true", AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    env.pop("CLAUDE_CONFIG_DIR", None)
    out = subprocess.run([str(KEEL), *args, "--output-format", "stream-json", "--verbose"],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    frames = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    result = [f for f in frames if f.get("type") == "result"]
    assert out.returncode == 0 and result, (out.returncode, out.stderr[-2000:])
    return result[-1]


def test_a_session_keel_uploaded_is_listed_and_read_by_the_sdk_store_helpers(s3, tmp_path):
    endpoint, client = s3
    cwd = (tmp_path / "project").resolve()
    cwd.mkdir()
    mock = Mock([{"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "echo store-marker-7"}}]},
                 {"kind": "text", "text": "done with the marker"}], tmp_path)
    try:
        result = run_keel(["-p", "say the marker", "--allowedTools", "Bash"], cwd, tmp_path / "a", mock, endpoint)
    finally:
        mock.stop()
    sid = result["session_id"]
    assert result["transcript_remote_current"] is True, result
    store = S3SessionStore(client, BUCKET, PREFIX)
    listed = asyncio.run(list_sessions_from_store(store, directory=str(cwd)))
    assert sid in [s.session_id for s in listed], (listed, project_key_for_directory(str(cwd)))
    messages = asyncio.run(get_session_messages_from_store(store, sid, directory=str(cwd)))
    text = json.dumps([m.message for m in messages])
    assert "say the marker" in text and "done with the marker" in text, text


def test_a_session_the_store_holds_is_resumed_by_keel_on_a_fresh_machine(s3, tmp_path):
    endpoint, client = s3
    cwd = (tmp_path / "elsewhere").resolve()
    cwd.mkdir()
    sid = str(uuid.uuid4())
    u1, a1 = str(uuid.uuid4()), str(uuid.uuid4())
    now = "2026-11-27T00:00:00.000Z"
    entries = [
        {"type": "user", "uuid": u1, "parentUuid": None, "isSidechain": False, "sessionId": sid,
         "cwd": str(cwd), "timestamp": now, "version": "2.1.332",
         "message": {"role": "user", "content": "remember the word heliotrope-55"}},
        {"type": "assistant", "uuid": a1, "parentUuid": u1, "isSidechain": False, "sessionId": sid,
         "cwd": str(cwd), "timestamp": now, "version": "2.1.332", "requestId": "req_1",
         "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "I will remember it."}],
                     "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": {"input_tokens": 3, "output_tokens": 5}}},
    ]
    store = S3SessionStore(client, BUCKET, PREFIX)
    key = {"project_key": project_key_for_directory(str(cwd)), "session_id": sid}
    asyncio.run(store.append(key, entries[:1]))
    asyncio.run(store.append(key, entries[1:]))
    mock = Mock([{"kind": "text", "text": "it was heliotrope-55"}], tmp_path)
    try:
        result = run_keel(["-p", "what was the word?", "--resume", sid], cwd, tmp_path / "fresh", mock, endpoint)
        bodies = mock.bodies()
    finally:
        mock.stop()
    assert result["session_id"] == sid
    assert "heliotrope-55" in bodies[-1] and "I will remember it." in bodies[-1], bodies[-1][:2000]
    # keel's turn went up after the store's own parts: the store now reads the whole session.
    after = asyncio.run(store.load(key))
    assert after[:2] == entries
    assert "what was the word?" in json.dumps(after[2:])


def test_bytes_uploaded_per_turn_stay_flat_over_200_turns(s3, tmp_path):
    endpoint, client = s3
    cwd = (tmp_path / "long").resolve()
    cwd.mkdir()
    turns = 200
    mock = Mock([{"kind": "text", "text": f"reply {i} " + "x" * 200} for i in range(turns)], tmp_path)
    home = tmp_path / "h"
    env = dict(os.environ, ANTHROPIC_BASE_URL=mock.url, ANTHROPIC_API_KEY="sk-test-keel",
               HOME=str(home), KEEL_HOME=str(home / "keel"), KEEL_MAX_RETRIES="0",
               KEEL_TRANSCRIPT_URL=f"s3://{BUCKET}/{PREFIX}", AWS_ENDPOINT_URL=endpoint,
               AWS_ALLOW_HTTP="true", AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    env.pop("CLAUDE_CONFIG_DIR", None)
    lines = "".join(json.dumps({"type": "user", "message": {"role": "user", "content": f"turn {i}"}}) + "\n"
                    for i in range(turns))
    try:
        out = subprocess.run([str(KEEL), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
                              "--verbose"], cwd=cwd, env=env, input=lines, capture_output=True, text=True,
                             timeout=600)
    finally:
        mock.stop()
    results = [json.loads(l) for l in out.stdout.splitlines() if '"type":"result"' in l]
    assert out.returncode == 0 and len(results) == turns, (out.returncode, len(results), out.stderr[-2000:])
    assert all(r["transcript_remote_current"] for r in results), results[-1]
    sid = results[-1]["session_id"]
    d = f"{PREFIX}/{project_key_for_directory(str(cwd))}/{sid}/"
    store = S3SessionStore(client, BUCKET, PREFIX)
    parts = sorted((o["Key"], o["Size"]) for o in store._keys(d))
    sizes = [size for _, size in parts]
    local = next((home / "keel" / "projects").rglob(f"{sid}.jsonl")).stat().st_size
    # Every byte went up once, and no part grew with the session: the last hundred turns' parts
    # are no bigger than the first hundred's (an upload of the whole file would be 100x).
    assert sum(sizes) == local, (sum(sizes), local)
    half = len(sizes) // 2
    print(f"\n{turns} turns: {len(sizes)} parts, {sum(sizes)} bytes in all; largest part of the first "
          f"half {max(sizes[:half])} B, of the second half {max(sizes[half:])} B; transcript {local} B")
    assert max(sizes[half:]) <= 2 * max(sizes[:half]), sizes
