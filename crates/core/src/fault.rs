//! Fault injection for tests of keel's own failure paths, compiled into debug builds only.
//!
//! `KEEL_TEST_FAULT=<point>` makes the engine panic (or stall) at that point, outside any tool
//! (which has its own boundary), so tests can prove the turn's panic boundary holds. Release
//! builds compile this to nothing and never read the variable.

/// Whether `KEEL_TEST_FAULT` names `point` (always false in release builds).
#[inline]
fn wanted(point: &str) -> bool {
    #[cfg(debug_assertions)]
    {
        static FAULT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let wanted = FAULT.get_or_init(|| std::env::var("KEEL_TEST_FAULT").ok());
        wanted.as_deref() == Some(point)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = point;
        false
    }
}

/// Panic here when `KEEL_TEST_FAULT` names `point` (debug builds only).
#[inline]
// The panic is the point: a test sees what one here does to the session.
#[allow(clippy::panic)]
pub(crate) fn inject(point: &str) {
    if wanted(point) {
        panic!("fault injected at {point} (KEEL_TEST_FAULT)");
    }
}

/// Pause here for two seconds when `KEEL_TEST_FAULT` names `point` (debug builds only): a
/// slow disk or a busy machine, made deterministic for a test of what happens meanwhile.
pub(crate) async fn stall(point: &str) {
    if wanted(point) {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}
