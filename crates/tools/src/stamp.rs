//! What a file looked like ([`FileStamp`]): enough to notice that it changed. A leaf, so that
//! the read ledger and the line index can both keep stamps.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// What a file looked like: enough to notice that it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileStamp {
    /// The stamp of `meta`.
    pub fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}
