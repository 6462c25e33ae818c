"""keel-ray end to end: a local Ray cluster runs a batch of keel sessions against keel-mock."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import ray

from keel_ray import Job, load_jobs, run_batch
from keel_ray.batch import RESUME_PROMPT, _attempt, session_id_for

ROOT = Path(__file__).resolve().parents[3]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
KEEL = Path(os.environ.get("KEEL_BIN", TARGET / "debug" / "keel"))
KEEL_MOCK = Path(os.environ.get("KEEL_MOCK_BIN", TARGET / "debug" / "keel-mock"))

FLAKY = {3, 7, 11, 15}   # keel-mock answers these 529 once
LIMITED = 19             # this one reaches its --max-turns
CONCURRENCY = 3
REPLY_MS = 300


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


class Mock:
    def __init__(self, steps: list, tmp: Path):
        self.log = tmp / "mock.jsonl"
        scenario = tmp / "scenario.json"
        scenario.write_text(json.dumps({"steps": steps}))
        self.proc = subprocess.Popen(
            [str(KEEL_MOCK), "--scenario", str(scenario), "--log", str(self.log)],
            stdout=subprocess.PIPE, text=True,
        )
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http"), self.url

    def requests(self) -> list[dict]:
        return [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def env_for(mock: Mock, tmp: Path) -> dict:
    return {
        "ANTHROPIC_BASE_URL": mock.url, "ANTHROPIC_API_KEY": "sk-test-keel",
        "HOME": str(tmp / "home"), "KEEL_HOME": str(tmp / "keel-home"),
        "KEEL_MAX_RETRIES": "0",  # a 529 ends the session with exit 4 at once: the batch retries
        "IS_SANDBOX": "1",
    }


def task(n: int) -> str:
    return f"task-{n:02d}"


def test_twenty_sessions_with_retries_by_exit_code(cluster, tmp_path):
    steps = []
    for n in range(20):
        who = {"first_user_contains": task(n)}
        if n in FLAKY:
            steps.append({"kind": "error", "status": 529, "match": who})
        if n == LIMITED:
            steps.append({"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "true"}}], "match": who})
        else:
            steps.append({"kind": "text", "text": f"done {task(n)}", "delay_ms": REPLY_MS, "match": who})
    mock = Mock(steps, tmp_path)
    jobs_file = tmp_path / "jobs.jsonl"
    jobs_file.write_text("".join(
        json.dumps({"id": task(n), "prompt": f"Please do {task(n)}.",
                    **({"max_turns": 1, "allowed_tools": ["Bash"]} if n == LIMITED else {})}) + "\n"
        for n in range(20)
    ))
    jobs = load_jobs(jobs_file)
    seen = []
    try:
        outcomes, summary = run_batch(
            jobs, str(KEEL), concurrency=CONCURRENCY, max_attempts=3, backoff_s=0.2,
            env=env_for(mock, tmp_path), batch_id="t1", scratch=str(tmp_path / "work"),
            progress=seen.append,
        )
        reqs = mock.requests()
    finally:
        mock.stop()
    by_id = {o.id: o for o in outcomes}
    assert len(outcomes) == 20
    for n in range(20):
        o = by_id[task(n)]
        if n == LIMITED:
            assert (o.end, o.exit_code, o.attempts) == ("limit", 3, 1), o   # a limit is not retried
            assert o.terminal_reason == "max_turns"
        else:
            assert (o.end, o.exit_code) == ("completed", 0), o
            assert o.attempts == (2 if n in FLAKY else 1), o
            assert o.result == f"done {task(n)}"
    # The retried sessions resumed their own session: same id, the first prompt still there.
    for n in FLAKY:
        mine = [r for r in reqs if task(n) in json.dumps(r["body"]["messages"][0])]
        assert len(mine) == 2, (n, len(mine))
        second = json.dumps(mine[1]["body"])
        assert RESUME_PROMPT in second and f"Please do {task(n)}." in second
        assert mine[1]["validation_error"] is None
        sid = session_id_for("t1", Job(prompt="", id=task(n)))
        assert by_id[task(n)].session_id == sid
        files = list((tmp_path / "keel-home").rglob(f"{sid}.jsonl"))
        assert len(files) == 1, files
    # The cap held: never more than CONCURRENCY sessions, nor model requests, at once.
    assert summary.max_in_flight <= CONCURRENCY, summary
    delayed = {i for i, st in enumerate(steps) if st.get("delay_ms")}
    answered = sorted(r["elapsed_ms"] for r in reqs if r["step"] in delayed)
    overlap = max(sum(1 for t in answered if s <= t < s + REPLY_MS - 20) for s in answered)
    assert overlap <= CONCURRENCY, overlap
    assert summary.by_end == {"completed": 19, "limit": 1}
    assert summary.retried == len(FLAKY) and summary.total == 20
    assert summary.cost_usd > 0 and summary.sessions_per_minute > 0
    assert seen and seen[-1]["done"] == 19 and seen[-1]["failed"] == 1
    # A figure for the note: the batch's pace and a session's peak memory on this machine.
    print(f"\nkeel-ray batch: {summary.sessions_per_minute} sessions/min, "
          f"{summary.wall_s} s for 20, peak RSS per session {summary.peak_rss_mb} MB")


def test_cancelling_an_attempt_stops_keel_with_sigterm_and_its_result_is_written(cluster, tmp_path):
    mock = Mock([{"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "sleep 600; : keel-ray-cancel-marker"}}]},
                 {"kind": "text", "text": "never"}], tmp_path)
    env = env_for(mock, tmp_path)
    job = Job(prompt="run the long thing", id="long", allowed_tools=["Bash"])
    sid = session_id_for("t2", job)
    try:
        ref = _attempt.remote(str(KEEL.resolve()), job, sid, False, env, str(tmp_path / "work"))
        deadline = time.time() + 60
        while time.time() < deadline and not _marker_pids():
            time.sleep(0.05)
        assert _marker_pids(), "the long command started"
        cancelled_at = time.time()
        ray.cancel(ref)
        try:
            with pytest.raises(ray.exceptions.TaskCancelledError):
                ray.get(ref, timeout=120)
        except BaseException:
            # Name the cause: what of keel is still running, and what its transcript says.
            print(f"\n--- {time.time() - cancelled_at:.1f} s after ray.cancel")
            print(subprocess.run(["ps", "-eo", "pid,ppid,stat,etime,args"], capture_output=True,
                                 text=True).stdout)
            for t in (tmp_path / "keel-home").rglob("*.jsonl"):
                print(f"--- {t}\n{t.read_text()[-3000:]}")
            logs = Path(os.environ.get("RAY_TMPDIR", "/tmp/ray")) / "session_latest" / "logs"
            for log in sorted(logs.glob("worker-*")) if logs.is_dir() else []:
                text = log.read_text(errors="replace")
                if text.strip():
                    print(f"--- {log.name}\n{text[-2000:]}")
            raise
    finally:
        mock.stop()
    deadline = time.time() + 30
    while time.time() < deadline and _marker_pids():
        time.sleep(0.05)
    assert not _marker_pids(), "keel's command died with it"
    transcript = next((tmp_path / "keel-home").rglob(f"{sid}.jsonl"))
    deadline = time.time() + 30
    while time.time() < deadline and '"type":"result"' not in transcript.read_text():
        time.sleep(0.05)
    records = [json.loads(l) for l in transcript.read_text().splitlines() if '"type":"result"' in l]
    last = records[-1]["frame"]
    assert last["is_error"] is True and last["terminal_reason"] == "aborted_tools", last


def _marker_pids() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if b"keel-ray-cancel-marker" in (p / "cmdline").read_bytes() and b"sleep" in (p / "cmdline").read_bytes():
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def test_bad_job_files_are_clear_errors(tmp_path):
    cases = {
        "not json\n": "line 1 is not JSON",
        '{"prompt": ""}\n': "`prompt` must be a non-empty string",
        '{"prompt": "x", "max_turns": 0}\n': "`max_turns` must be a positive integer",
        '{"prompt": "x", "colour": "red"}\n': "unknown field",
        '{"prompt": "a", "id": "x"}\n{"prompt": "b", "id": "x"}\n': "used twice",
        '{"prompt": "a", "id": "../../escape"}\n': "`id`",
        '{"prompt": "a", "repo": "--upload-pack=touch /tmp/x"}\n': "`repo`",
        '{"prompt": "a", "repo": "r", "ref": "--orphan"}\n': "`ref`",
    }
    for text, needle in cases.items():
        f = tmp_path / "jobs.jsonl"
        f.write_text(text)
        with pytest.raises(ValueError, match=needle.replace("`", ".")):
            load_jobs(f)
