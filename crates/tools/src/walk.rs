//! Walking a tree on several threads (the `ignore` crate's parallel walker), with the same
//! rules as a single-threaded walk: `.gitignore` and friends honoured, `.git` skipped, links not
//! followed. Each thread folds what it finds into its own accumulator; callers merge and sort
//! them, so the result never depends on thread timing.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
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

/// The order of two paths a walk yields, the same as `Path`'s own (component by component)
/// for paths without `.`, `..` or doubled separators below a common root: their bytes compared
/// with the separator below every other byte. Comparing components is several times slower,
/// and sorting a large tree's files that way cost as much as searching it on a second thread.
pub(crate) fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let n = a.len().min(b.len());
    let mut same = 0;
    while same + 8 <= n && a[same..same + 8] == b[same..same + 8] {
        same += 8;
    }
    while same < n && a[same] == b[same] {
        same += 1;
    }
    let rank = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
    match (a.get(same), b.get(same)) {
        (Some(&x), Some(&y)) => rank(x).cmp(&rank(y)),
        _ => a.len().cmp(&b.len()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths built from parts that sort differently byte by byte than component by component
    /// (`a-b` sorts before `a/b` as bytes, after it as components).
    #[test]
    fn path_order_is_component_order() {
        let parts = [
            "a", "a-b", "a.b", "ab", "a b", "A", "_", "z", "\u{e9}", "a0", "b",
        ];
        let mut paths = Vec::new();
        for x in parts {
            paths.push(Path::new("/root").join(x));
            for y in parts {
                paths.push(Path::new("/root").join(x).join(y));
                for z in ["a", "a-b", "a.b"] {
                    paths.push(Path::new("/root").join(x).join(y).join(z));
                }
            }
        }
        let mut by_components = paths.clone();
        by_components.sort();
        let mut by_bytes = paths.clone();
        by_bytes.sort_by(|a, b| path_order(a, b));
        assert_eq!(by_components, by_bytes);
        // And a plain byte sort would not do: the test has cases where the two differ.
        let mut plain = paths;
        plain.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
        assert_ne!(plain, by_components);
    }
}
