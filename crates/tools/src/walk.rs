//! Walking a tree on several threads (the `ignore` crate's parallel walker), with the same
//! rules as a single-threaded walk: `.gitignore` and friends honoured, `.git` skipped, links not
//! followed. Each thread folds what it finds into its own accumulator; callers merge and sort
//! them, so the result never depends on thread timing.

use std::sync::{Arc, Mutex};

use ignore::{DirEntry, WalkBuilder, WalkState};

use crate::fsutil::Cancelled;
use crate::CancelToken;

/// Fold every entry under the walk `builder` describes into per-thread accumulators (made by
/// `init`, fed by `visit`), on `threads` threads; returns them all.
pub(crate) fn fold<A, I, V>(
    mut builder: WalkBuilder,
    threads: usize,
    cancel: &CancelToken,
    init: I,
    visit: V,
) -> Result<Vec<A>, Cancelled>
where
    A: Send,
    I: Fn() -> A + Sync,
    V: Fn(&mut A, &DirEntry) + Sync,
{
    let done: Arc<Mutex<Vec<A>>> = Arc::new(Mutex::new(Vec::new()));
    let walker = builder.threads(threads.max(1)).build_parallel();
    walker.run(|| {
        let mut acc = Handover {
            acc: Some(init()),
            done: done.clone(),
        };
        let visit = &visit;
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            if let (Ok(e), Some(a)) = (entry, acc.acc.as_mut()) {
                visit(a, &e);
            }
            WalkState::Continue
        })
    });
    if cancel.is_cancelled() {
        return Err(Cancelled);
    }
    let mut done = done.lock().unwrap_or_else(|p| p.into_inner());
    Ok(std::mem::take(&mut *done))
}

/// [`fold`] into lists: every `pick(entry)` that is `Some`, in no particular order.
pub(crate) fn collect<T, F>(
    builder: WalkBuilder,
    threads: usize,
    cancel: &CancelToken,
    pick: F,
) -> Result<Vec<T>, Cancelled>
where
    T: Send,
    F: Fn(&DirEntry) -> Option<T> + Sync,
{
    let parts = fold(builder, threads, cancel, Vec::new, |v: &mut Vec<T>, e| {
        if let Some(t) = pick(e) {
            v.push(t);
        }
    })?;
    Ok(parts.into_iter().flatten().collect())
}

/// One thread's accumulator, handed over when the thread is done.
struct Handover<A> {
    acc: Option<A>,
    done: Arc<Mutex<Vec<A>>>,
}

impl<A> Drop for Handover<A> {
    fn drop(&mut self) {
        if let Some(a) = self.acc.take() {
            self.done.lock().unwrap_or_else(|p| p.into_inner()).push(a);
        }
    }
}

/// How many threads a search uses when not told: the cores there are, at most 8.
///
/// Asked once per process: the standard library reads the affinity mask and the cgroup's CPU
/// quota from /proc and /sys each time, and every tool call's limits start from this default
/// (it was ~0.1 ms of every Bash turn).
pub fn default_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(8)
    })
}
