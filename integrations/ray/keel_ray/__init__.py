"""Run a batch of keel sessions as Ray tasks.

`run_batch(jobs, ...)` submits each job (a prompt, a working directory, limits) as a Ray task
that runs the `keel` binary headless with stream-json, at most `concurrency` at a time, and
decides retries by keel's exit code: 4 (the model API stayed unavailable) is retried later,
with backoff, by resuming the *same* session (possibly on another node, when the transcripts
live in object storage); 3 (a limit), 1, 2 and 5 are not retried; 130 is a cancellation.
"""

from .batch import Job, Outcome, Summary, load_jobs, run_batch

__all__ = ["Job", "Outcome", "Summary", "load_jobs", "run_batch"]
