"""`python -m keel_ray JOBS.jsonl [--concurrency N] [--out results.jsonl]`."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict

import ray

from .batch import load_jobs, progress_line, run_batch, write_results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="keel-ray", description="Run a batch of keel sessions on Ray.")
    p.add_argument("jobs", help="a JSONL file: one job per line ({\"prompt\": ..., \"cwd\"|\"repo\"+\"ref\", \"model\", \"max_turns\", \"max_budget_usd\", \"allowed_tools\", \"env\", \"id\"})")
    p.add_argument("--keel", default=shutil.which("keel") or "keel", help="the keel binary (default: keel on PATH)")
    p.add_argument("--concurrency", type=int, default=4, help="sessions at once (default 4)")
    p.add_argument("--max-attempts", type=int, default=3, help="attempts per job when the API stays unavailable (exit 4)")
    p.add_argument("--backoff", type=float, default=5.0, help="seconds before the first retry (doubling, jittered)")
    p.add_argument("--out", default="results.jsonl", help="the results table (a .summary.json is written beside)")
    p.add_argument("--address", default=None, help="a Ray cluster to join (default: start a local one)")
    a = p.parse_args(argv)
    try:
        jobs = load_jobs(a.jobs)
    except (OSError, ValueError) as e:
        print(f"keel-ray: {e}", file=sys.stderr)
        return 2
    if a.concurrency < 1 or a.max_attempts < 1 or a.backoff < 0:
        print("keel-ray: --concurrency and --max-attempts must be at least 1, --backoff not negative", file=sys.stderr)
        return 2
    ray.init(address=a.address, include_dashboard=False, log_to_driver=False)
    try:
        outcomes, summary = run_batch(
            jobs, a.keel, concurrency=a.concurrency, max_attempts=a.max_attempts,
            backoff_s=a.backoff, progress=progress_line,
        )
    except KeyboardInterrupt:
        print("\nkeel-ray: cancelled; every running keel was sent SIGTERM", file=sys.stderr)
        return 130
    finally:
        ray.shutdown()
    sys.stderr.write("\n")
    write_results(outcomes, summary, a.out)
    print(json.dumps(asdict(summary), indent=2))
    return 0 if all(o.end == "completed" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
