//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools::{process, CancelToken, ToolContext, ToolLimits};

/// A context rooted at `dir` with a fresh token and default limits.
pub fn cx(dir: &Path) -> ToolContext {
    ToolContext::new(dir, CancelToken::new()).with_tool_use_id("toolu_test")
}

/// A context with short grace and drain deadlines, so stop paths are quick.
pub fn quick_cx(dir: &Path) -> ToolContext {
    cx(dir).with_limits(Arc::new(ToolLimits {
        kill_grace: Duration::from_millis(300),
        drain_deadline: Duration::from_millis(300),
        ..ToolLimits::default()
    }))
}

/// Wait (bounded) until no live process is left in group `pgid`.
pub async fn group_gone(pgid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if !process::group_alive(pgid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Wait (bounded) for a file written by a command to hold a pid, and return it.
pub async fn wait_for_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if let Ok(pid) = s.trim().parse() {
                return pid;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the command never wrote {}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Write `text` to `dir/rel`, creating parent directories.
pub fn put(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

/// Set a file's modification time to `secs` seconds after the epoch.
pub fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}
