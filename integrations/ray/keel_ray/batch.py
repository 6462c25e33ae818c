"""The batch runner: jobs in, one Ray task per attempt, outcomes and a summary out."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

import ray

# keel's exit codes (docs/failure-model.md) and what the batch does with each.
RETRY_LATER = {4}           # the model API stayed unavailable: resume the session later
NO_RETRY = {1, 2, 3, 5}     # a real error, bad usage, a limit, a refusal: the same again
CANCELLED = {130}           # stopped from outside

# What a job id may be (it names the job's scratch directory).
_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")

# The namespace of the session ids a batch derives from its jobs' ids.
_NAMESPACE = uuid.UUID("6b1c0e4e-2f7a-4d52-9c55-6f0c3d1e8a11")

# What a resumed session is told (the original prompt is already in its history).
RESUME_PROMPT = "The previous attempt was cut off because the model API was unavailable. Continue the task where you left off."


@dataclass
class Job:
    """One session to run. `prompt` is required; the rest is optional."""

    prompt: str
    id: str = ""
    cwd: Optional[str] = None
    repo: Optional[str] = None
    ref: Optional[str] = None
    model: Optional[str] = None
    max_turns: Optional[int] = None
    max_budget_usd: Optional[float] = None
    allowed_tools: list = field(default_factory=list)
    env: dict = field(default_factory=dict)

    @staticmethod
    def from_dict(d: dict, line: int) -> "Job":
        where = f"line {line}"
        if not isinstance(d, dict):
            raise ValueError(f"{where}: a job must be a JSON object")
        unknown = set(d) - set(Job.__dataclass_fields__)
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
        if not isinstance(d.get("prompt"), str) or not d["prompt"].strip():
            raise ValueError(f"{where}: `prompt` must be a non-empty string")
        for k in ("max_turns",):
            if d.get(k) is not None and (not isinstance(d[k], int) or d[k] < 1):
                raise ValueError(f"{where}: `{k}` must be a positive integer")
        if d.get("max_budget_usd") is not None and (
            not isinstance(d["max_budget_usd"], (int, float)) or d["max_budget_usd"] <= 0
        ):
            raise ValueError(f"{where}: `max_budget_usd` must be a positive number")
        job = Job(**d)
        if not job.id:
            job.id = f"job-{line}"
        job.check(where)
        return job

    def check(self, where: str = "a job") -> None:
        """Refuse what would escape the batch's scratch directory or reach git as an option:
        the id names a directory, `repo` and `ref` are handed to git."""
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"{where}: `id` {self.id!r} must be letters, digits, '.', '_' or '-' (not starting with '.'), at most 128")
        for k in ("repo", "ref", "cwd", "model"):
            v = getattr(self, k)
            if v is not None and (not isinstance(v, str) or not v or v.startswith("-")):
                raise ValueError(f"{where}: `{k}` must be a non-empty string not starting with '-'")


def load_jobs(path: str | Path) -> list[Job]:
    """Jobs from a JSONL file (blank lines skipped); a bad line is an error naming it."""
    jobs, seen = [], set()
    for n, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: line {n} is not JSON ({e})") from None
        job = Job.from_dict(d, n)
        if job.id in seen:
            raise ValueError(f"{path}: line {n}: the id {job.id!r} is used twice")
        seen.add(job.id)
        jobs.append(job)
    return jobs


@dataclass
class Outcome:
    """How one job ended (its last attempt), one line of the results table."""

    id: str
    session_id: str
    end: str                    # completed | failed | limit | refused | unavailable | cancelled | error
    exit_code: int
    attempts: int
    subtype: Optional[str] = None
    terminal_reason: Optional[str] = None
    num_turns: int = 0
    cost_usd: float = 0.0
    duration_ms: float = 0.0
    transcript_url: Optional[str] = None
    result: Optional[str] = None
    peak_rss_mb: float = 0.0
    started: float = 0.0
    finished: float = 0.0


def end_state(code: int) -> str:
    return {0: "completed", 1: "failed", 2: "failed", 3: "limit", 4: "unavailable",
            5: "refused", 130: "cancelled"}.get(code, "error")


def session_id_for(batch: str, job: Job) -> str:
    """A session id derived from the batch and the job: stable across retries and nodes."""
    return str(uuid.uuid5(_NAMESPACE, f"{batch}/{job.id}"))


def _command(keel: str, job: Job, session_id: str, resume: bool) -> list[str]:
    cmd = [keel, "-p", RESUME_PROMPT if resume else job.prompt,
           "--output-format", "stream-json", "--verbose"]
    cmd += ["--resume", session_id] if resume else ["--session-id", session_id]
    if job.model:
        cmd += ["--model", job.model]
    if job.max_turns:
        cmd += ["--max-turns", str(job.max_turns)]
    if job.max_budget_usd:
        cmd += ["--max-budget-usd", str(job.max_budget_usd)]
    for t in job.allowed_tools:
        cmd += ["--allowedTools", t]
    return cmd


def _workdir(job: Job, scratch: Path) -> str:
    if job.cwd:
        return job.cwd
    if job.repo:
        dest = scratch / "repo"
        if not dest.exists():
            subprocess.run(["git", "clone", "--quiet", "--", job.repo, str(dest)], check=True)
            if job.ref:
                subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", "--detach", job.ref], check=True)
        return str(dest)
    scratch.mkdir(parents=True, exist_ok=True)
    return str(scratch)


def _hear_cancellation() -> None:
    """Ray cancels a running task by simulating SIGINT in the worker's main thread, which does
    nothing when SIGINT is ignored there: a cluster started from a shell that ignores it (nohup,
    a background job, some CI runners) passes that on to every worker, and a cancelled attempt
    then ran on until keel's own timeouts. Python's own handler is put back so that the
    cancellation arrives as KeyboardInterrupt."""
    try:
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, None):
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass  # not the main thread: Ray's interruption cannot reach this task anyway


# How long a cancelled attempt gives keel to stop its tools and write its result after
# SIGTERM (it needs well under a second), and then to die after SIGKILL.
CANCEL_GRACE_S = 10


@ray.remote(num_cpus=0, max_retries=0)
def _attempt(keel: str, job: Job, session_id: str, resume: bool, env: dict, scratch: str) -> dict:
    """One attempt: run keel, read its stream, return how it ended. Cancelling the task sends
    keel SIGTERM, so it stops its tools and writes its honest result before the task ends."""
    started = time.time()
    _hear_cancellation()
    child_env = dict(os.environ)
    child_env.update(env)
    child_env.update(job.env)
    cwd = _workdir(job, Path(scratch))
    proc = subprocess.Popen(
        _command(keel, job, session_id, resume),
        cwd=cwd, env=child_env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    # The pipes are drained by threads; this thread waits in short steps, so that Ray's
    # cancellation (an exception raised in the running task) lands here.
    chunks: dict = {"out": [], "err": []}
    readers = [
        threading.Thread(target=lambda: chunks["out"].append(proc.stdout.read()), daemon=True),
        threading.Thread(target=lambda: chunks["err"].append(proc.stderr.read()), daemon=True),
    ]
    for t in readers:
        t.start()
    result = None
    cancelled = None

    hwm_kb = 0

    def reap(deadline: float):
        # keel's own peak memory is its VmHWM (counted from its exec; the rusage of a forked
        # child would include the Ray worker it was forked from), read until it exits.
        nonlocal hwm_kb
        status_file = f"/proc/{proc.pid}/status"
        while time.time() < deadline:
            try:
                with open(status_file) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm_kb = max(hwm_kb, int(line.split()[1]))
            except (OSError, ValueError):
                pass
            if proc.poll() is not None:
                return True
            time.sleep(0.05)
        return False

    try:
        reap(float("inf"))
    except BaseException as e:  # Ray cancels a task by raising in it
        cancelled = e
        # Passed on as SIGTERM: keel stops its tools and writes its honest result.
        # The grace periods add up to well under a minute, so that a caller waiting on the
        # cancelled task is answered even when keel (or a process holding its pipes) hangs.
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            if not reap(time.time() + CANCEL_GRACE_S):
                proc.kill()
                reap(time.time() + CANCEL_GRACE_S)
    for t in readers:
        t.join(timeout=5 if cancelled is not None else 10)
    if cancelled is not None:
        raise cancelled
    out = "".join(chunks["out"])
    err = "".join(chunks["err"])
    for line in out.splitlines():
        try:
            frame = json.loads(line)
        except json.JSONDecodeError:
            continue
        if frame.get("type") == "result":
            result = frame
    rss_kb = hwm_kb
    return {
        "exit_code": proc.returncode,
        "result": result,
        "stderr": err[-2000:],
        "started": started,
        "finished": time.time(),
        "peak_rss_mb": rss_kb / 1024.0,
    }


@dataclass
class Summary:
    total: int
    by_end: dict
    retried: int
    cost_usd: float
    wall_s: float
    sessions_per_minute: float
    max_in_flight: int
    peak_rss_mb: float


def run_batch(
    jobs: Iterable[Job],
    keel: str,
    concurrency: int = 4,
    max_attempts: int = 3,
    backoff_s: float = 1.0,
    env: Optional[dict] = None,
    batch_id: Optional[str] = None,
    scratch: Optional[str] = None,
    progress: Optional[Callable[[dict], None]] = None,
) -> tuple[list[Outcome], Summary]:
    """Run every job; returns the outcomes (in job order) and a summary.

    At most `concurrency` sessions run at once (the driver holds the rest back, so a fleet
    never stampedes the API). A job that ends with exit 4 is tried again — up to
    `max_attempts` in all, after a jittered, growing wait — resuming its own session."""
    jobs = list(jobs)
    for j in jobs:
        j.check(f"job {j.id!r}")
    if len({j.id for j in jobs}) != len(jobs):
        raise ValueError("two jobs share an id")
    if concurrency < 1 or max_attempts < 1:
        raise ValueError("concurrency and max_attempts must be at least 1")
    keel = str(Path(keel).resolve())
    batch_id = batch_id or uuid.uuid4().hex[:12]
    scratch_root = Path(scratch or Path.cwd() / f"keel-batch-{batch_id}")
    env = dict(env or {})
    state = {j.id: {"attempts": 0, "not_before": 0.0} for j in jobs}
    queue = list(jobs)
    running: dict = {}
    done: dict[str, Outcome] = {}
    retried: set = set()
    spans: list = []
    counts = {"done": 0, "running": 0, "failed": 0, "retrying": 0, "cost_usd": 0.0}
    t0 = time.time()

    def report():
        if progress:
            progress(dict(counts, total=len(jobs)))

    try:
        while queue or running:
            now = time.time()
            # Start what may start: a free slot, and a job whose backoff has passed.
            for job in list(queue):
                if len(running) >= concurrency:
                    break
                st = state[job.id]
                if st["not_before"] > now:
                    continue
                queue.remove(job)
                st["attempts"] += 1
                sid = session_id_for(batch_id, job)
                ref = _attempt.remote(keel, job, sid, st["attempts"] > 1, env,
                                      str(scratch_root / job.id))
                running[ref] = job
                counts["running"] = len(running)
                counts["retrying"] = sum(1 for j in queue if state[j.id]["attempts"] > 0)
                report()
            if not running:
                time.sleep(min(0.2, max(0.0, min(state[j.id]["not_before"] for j in queue) - now)))
                continue
            ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            for ref in ready:
                job = running.pop(ref)
                a = ray.get(ref)
                spans.append((a["started"], a["finished"]))
                code = a["exit_code"]
                r = a["result"] or {}
                st = state[job.id]
                if code in RETRY_LATER and st["attempts"] < max_attempts:
                    retried.add(job.id)
                    wait = backoff_s * (2 ** (st["attempts"] - 1))
                    st["not_before"] = time.time() + wait * random.uniform(1.0, 2.0)
                    queue.append(job)
                else:
                    o = Outcome(
                        id=job.id, session_id=session_id_for(batch_id, job), end=end_state(code),
                        exit_code=code, attempts=st["attempts"], subtype=r.get("subtype"),
                        terminal_reason=r.get("terminal_reason"), num_turns=r.get("num_turns", 0),
                        cost_usd=r.get("total_cost_usd", 0.0), duration_ms=r.get("duration_ms", 0.0),
                        transcript_url=r.get("transcript_url"), result=r.get("result"),
                        peak_rss_mb=a["peak_rss_mb"], started=a["started"], finished=a["finished"],
                    )
                    done[job.id] = o
                    counts["done" if code == 0 else "failed"] += 1
                counts["cost_usd"] = round(sum(o.cost_usd for o in done.values()), 6)
                counts["running"] = len(running)
                counts["retrying"] = sum(1 for j in queue if state[j.id]["attempts"] > 0)
                report()
    except KeyboardInterrupt:
        # Cancelling the batch cancels every running attempt: each keel gets SIGTERM and
        # writes its honest result.
        for ref in running:
            ray.cancel(ref)
        raise
    outcomes = [done[j.id] for j in jobs if j.id in done]
    wall = time.time() - t0
    by_end: dict = {}
    for o in outcomes:
        by_end[o.end] = by_end.get(o.end, 0) + 1
    summary = Summary(
        total=len(jobs), by_end=by_end, retried=len(retried),
        cost_usd=round(sum(o.cost_usd for o in outcomes), 6), wall_s=round(wall, 3),
        sessions_per_minute=round(len(outcomes) / wall * 60, 1) if wall > 0 else 0.0,
        max_in_flight=_max_overlap(spans),
        peak_rss_mb=round(max((o.peak_rss_mb for o in outcomes), default=0.0), 1),
    )
    return outcomes, summary


def _max_overlap(spans: list) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def write_results(outcomes: list[Outcome], summary: Summary, path: str | Path) -> None:
    """The results table as JSONL (one outcome per line) and the summary beside it."""
    path = Path(path)
    with path.open("w") as f:
        for o in outcomes:
            f.write(json.dumps(asdict(o)) + "\n")
    path.with_suffix(".summary.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")


def progress_line(c: dict) -> None:
    sys.stderr.write(
        f"\rkeel-ray: {c['done']} done · {c['running']} running · {c['failed']} failed · "
        f"{c['retrying']} retrying · of {c['total']} · ${c['cost_usd']:.4f}   "
    )
    sys.stderr.flush()
