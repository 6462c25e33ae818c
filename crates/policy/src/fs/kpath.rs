//! Paths resolved the way the kernel resolves them, so that the file a permission check judges
//! is the file a tool opens.
//!
//! The kernel walks a path one component at a time and follows a symlink *when it meets it*:
//! in `link/../x` the `..` is applied to the link's target, not to the directory holding the
//! link. Removing `..` by text first (as `a/b/../c` → `a/c`) therefore judges another file
//! than the one written whenever a link precedes the `..`. [`kernel_path`] walks like the
//! kernel: each existing symlink component is followed before the next component is applied
//! (at most [`MAX_HOPS`] links, as the kernel's `ELOOP` limit); from the first component that
//! does not exist on, the rest is applied by text, since that is what creating the missing
//! directories and the file (as Write does) leads to. A dangling symlink is followed to
//! where its target would be created, as `open(O_CREAT)` does.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::fs::{FileKind, FsView, RealFs};

/// The most symlinks one resolution follows (the kernel's own limit is 40).
pub const MAX_HOPS: usize = 40;

/// Why a path could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The path is relative: resolution needs a base directory first.
    #[error("`{0}` is not an absolute path")]
    NotAbsolute(PathBuf),
    /// More than [`MAX_HOPS`] symlinks (a loop, or a very long chain), as the kernel's `ELOOP`.
    #[error("`{path}` goes through more than {MAX_HOPS} symbolic links (a loop?)")]
    TooManyLinks {
        /// The path given.
        path: PathBuf,
    },
    /// A symlink on the way could not be read.
    #[error("the symbolic link `{path}` cannot be read: {source}")]
    Unreadable {
        /// The link.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// Resolve the absolute `path` as the kernel would open it (or create it): every existing
/// symlink component followed before the following `..` is applied; the result names no
/// symlink in its existing part.
pub fn kernel_path(path: &Path) -> Result<PathBuf, ResolveError> {
    kernel_path_in(&RealFs, path)
}

/// [`kernel_path`] on the file system `fs` shows.
pub fn kernel_path_in<F: FsView + ?Sized>(fs: &F, path: &Path) -> Result<PathBuf, ResolveError> {
    if !path.is_absolute() {
        return Err(ResolveError::NotAbsolute(path.to_path_buf()));
    }
    let mut todo: VecDeque<OsString> = parts(path);
    let mut done = PathBuf::from("/");
    let mut hops = 0usize;
    // How many trailing components of `done` do not exist (or cannot be looked at): they
    // are applied by text, as a writer creating them would make them plain directories; a
    // `..` back out of them resumes the walk on what exists.
    let mut by_text = 0usize;
    while let Some(c) = todo.pop_front() {
        if c == "." {
            continue;
        }
        if c == ".." {
            // `done` holds no symlink, so its parent is the kernel's `..` (and `/..` is `/`).
            done.pop();
            by_text = by_text.saturating_sub(1);
            continue;
        }
        let next = done.join(&c);
        if by_text > 0 {
            by_text += 1;
            done = next;
            continue;
        }
        match fs.kind(&next) {
            Ok(FileKind::Link) => {
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(ResolveError::TooManyLinks {
                        path: path.to_path_buf(),
                    });
                }
                let target = fs
                    .read_link(&next)
                    .map_err(|source| ResolveError::Unreadable {
                        path: next.clone(),
                        source,
                    })?;
                if magic(&next, &target) {
                    // The kernel goes to the object itself, not to the link's text: keep
                    // the link's own path (the open then reaches, and checks, the object).
                    by_text = 1;
                    done = next;
                    continue;
                }
                if target.is_absolute() {
                    done = PathBuf::from("/");
                }
                for p in parts(&target).into_iter().rev() {
                    todo.push_front(p);
                }
            }
            Ok(_) => done = next,
            // Missing, not a directory, or not searchable: the kernel's open fails there or
            // (for a missing part) a writer creates it; either way no link follows.
            Err(_) => {
                by_text = 1;
                done = next;
            }
        }
    }
    Ok(done)
}

/// Whether `link` is one of /proc's links the kernel does not resolve by their text: an open
/// file (`/proc/<pid>/fd/<n>`, which may be a pipe, a socket or a deleted file) or a link
/// whose text is no path (`ns/net -> net:[…]`). `/proc/self` and the like, and `cwd`/`root`/
/// `exe` (whose text is the path the kernel reaches), resolve as ordinary links.
fn magic(link: &Path, target: &Path) -> bool {
    if !link.starts_with("/proc") {
        return false;
    }
    let parent = link.parent();
    parent.and_then(Path::file_name).is_some_and(|n| n == "fd")
        || (!target.is_absolute() && parent != Some(Path::new("/proc")))
}

/// The components of `p` as names, `.` and `..` (the root dropped).
fn parts(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::CurDir => Some(OsString::from(".")),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_dot_dot_after_a_link_applies_to_the_link_target() {
        let t = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(d.join("outside/sub")).unwrap();
        std::fs::create_dir_all(d.join("proj")).unwrap();
        symlink("../outside/sub", d.join("proj/link")).unwrap();
        assert_eq!(
            kernel_path(&d.join("proj/link/../pwned")).unwrap(),
            d.join("outside/pwned")
        );
        // Missing parts are applied by text: creating them leads there.
        assert_eq!(
            kernel_path(&d.join("proj/new/dir/../f")).unwrap(),
            d.join("proj/new/f")
        );
        // A dangling link is followed to where open(O_CREAT) creates its target.
        symlink(d.join("outside/made"), d.join("proj/dangling")).unwrap();
        assert_eq!(
            kernel_path(&d.join("proj/dangling")).unwrap(),
            d.join("outside/made")
        );
        symlink("loop2", d.join("proj/loop1")).unwrap();
        symlink("loop1", d.join("proj/loop2")).unwrap();
        assert!(matches!(
            kernel_path(&d.join("proj/loop1/x")),
            Err(ResolveError::TooManyLinks { .. })
        ));
        assert!(kernel_path(Path::new("rel")).is_err());
        // /proc: `self` is an ordinary link, an open file's link is kept as it is.
        let me = PathBuf::from(format!("/proc/{}", std::process::id()));
        assert_eq!(
            kernel_path(Path::new("/proc/self/fd/0")).unwrap(),
            me.join("fd/0")
        );
        assert_eq!(
            kernel_path(Path::new("/proc/self/root/etc")).unwrap(),
            PathBuf::from("/etc")
        );
        assert_eq!(kernel_path(Path::new("/..")).unwrap(), PathBuf::from("/"));
    }
}
