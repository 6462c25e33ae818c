//! keel-sdk integration tests: one test binary (see suite/).

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
