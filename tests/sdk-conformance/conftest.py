"""Fixtures for the SDK conformance suite: the official Python SDK drives the keel binary
(`cli_path`) against the keel-mock binary. Every test also proves that keel — not the CLI the
SDK bundles — answered: keel-mock logged the requests, and `system/init` carries
`keel_version`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KEEL = Path(os.environ.get("KEEL_BIN", REPO / "target" / "debug" / "keel"))
KEEL_MOCK = Path(os.environ.get("KEEL_MOCK_BIN", REPO / "target" / "debug" / "keel-mock"))
SCENARIOS = HERE / "scenarios"


class Mock:
    """A keel-mock process serving one scenario file, logging every request."""

    def __init__(self, scenario: str, tmp: Path):
        self.log = tmp / f"mock-{scenario}.jsonl"
        self.proc = subprocess.Popen(
            [str(KEEL_MOCK), "--scenario", str(SCENARIOS / f"{scenario}.json"), "--port", "0",
             "--log", str(self.log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.proc.kill()
            raise RuntimeError(f"keel-mock did not start: {self.url!r} {self.proc.stderr.read()}")

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                path = r["path"]
                model_call = path.startswith(("/v1/messages", "/v1/responses", "/v1/chat/completions")) \
                    or r.get("dialect") in ("bedrock", "vertex")
                if model_call and "count_tokens" not in path:
                    out.append(r)
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Env:
    """A scratch working directory and home, and options that point the SDK at keel."""

    def __init__(self, tmp: Path, mock: Mock, openai: bool = False, cloud: str | None = None):
        self.tmp = tmp
        self.mock = mock
        # With `cloud` ("bedrock" or "vertex"), keel is switched to that cloud the way Claude
        # Code's users switch it, and pointed at keel-mock's route for it.
        self.cloud = cloud
        # With `openai`, keel's OpenAI providers are pointed at keel-mock (the test picks the
        # API with the model string, e.g. "openai/gpt-5" or "openai-chat/gpt-5").
        self.openai = openai
        self.cwd = tmp / "work"
        self.cwd.mkdir()
        self.home = tmp / "home"
        self.home.mkdir()
        self.stderr: list[str] = []

    def env(self) -> dict[str, str]:
        env = {
            "ANTHROPIC_BASE_URL": self.mock.url,
            "ANTHROPIC_API_KEY": "sk-test-keel",
            "HOME": str(self.home),
            "KEEL_HOME": str(self.tmp / "keel-home"),
            "IS_SANDBOX": "1",
        }
        if self.openai:
            env.update({"OPENAI_BASE_URL": self.mock.url + "/v1", "OPENAI_API_KEY": "sk-test-keel"})
        if self.cloud == "bedrock":
            env.update({
                "CLAUDE_CODE_USE_BEDROCK": "1",
                "ANTHROPIC_BEDROCK_BASE_URL": self.mock.url,
                "AWS_REGION": "us-west-2",
                "AWS_ACCESS_KEY_ID": "AKIDTEST",
                "AWS_SECRET_ACCESS_KEY": "secret-test-key",
            })
        elif self.cloud == "vertex":
            env.update({
                "CLAUDE_CODE_USE_VERTEX": "1",
                "ANTHROPIC_VERTEX_BASE_URL": self.mock.url + "/v1",
                "ANTHROPIC_VERTEX_PROJECT_ID": "keel-test",
                "CLAUDE_CODE_SKIP_VERTEX_AUTH": "1",
            })
        return env

    def options(self, **kw):
        from claude_agent_sdk import ClaudeAgentOptions

        return ClaudeAgentOptions(
            cli_path=str(KEEL),
            cwd=str(self.cwd),
            env=self.env(),
            stderr=self.stderr.append,
            **kw,
        )


@pytest.fixture
def start(tmp_path: Path):
    """`start(scenario)` -> Env with a running keel-mock."""
    if not KEEL.exists() or not KEEL_MOCK.exists():
        pytest.fail(f"build keel and keel-mock first: {KEEL}, {KEEL_MOCK}")
    mocks: list[Mock] = []

    def _start(scenario: str, openai: bool = False, cloud: str | None = None) -> Env:
        m = Mock(scenario, tmp_path)
        mocks.append(m)
        return Env(tmp_path, m, openai, cloud)

    yield _start
    for m in mocks:
        m.stop()
