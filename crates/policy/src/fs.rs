//! The file system as the policy sees it: an injected view, so that every judgement can be
//! computed (and tested) without touching a disk. [`RealFs`] asks the kernel; [`FakeFs`] is
//! an in-memory tree for tests.

pub mod kpath;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// What a path names, without following a final symlink (`lstat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link.
    Link,
    /// Anything else (a device, a FIFO, a socket).
    Other,
}

/// The questions the policy asks of the file system. Nothing here changes anything.
pub trait FsView: Send + Sync {
    /// What `path` names, the last component not followed (as `lstat`).
    fn kind(&self, path: &Path) -> io::Result<FileKind>;
    /// The text of the symlink `path`.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// Whether `path`, every link followed, is a directory.
    fn is_dir(&self, path: &Path) -> bool {
        crate::kpath::kernel_path_in(self, path)
            .ok()
            .and_then(|p| self.kind(&p).ok())
            == Some(FileKind::Dir)
    }
    /// Whether `path`, every link followed, is a regular file.
    fn is_file(&self, path: &Path) -> bool {
        crate::kpath::kernel_path_in(self, path)
            .ok()
            .and_then(|p| self.kind(&p).ok())
            == Some(FileKind::File)
    }
}

/// The real file system, asked through `lstat` and `readlink`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl FsView for RealFs {
    fn kind(&self, path: &Path) -> io::Result<FileKind> {
        let t = std::fs::symlink_metadata(path)?.file_type();
        Ok(if t.is_symlink() {
            FileKind::Link
        } else if t.is_dir() {
            FileKind::Dir
        } else if t.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        })
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }
}

/// One entry of a [`FakeFs`].
#[derive(Clone, Debug)]
enum Entry {
    Dir,
    File,
    Link(PathBuf),
}

/// An in-memory tree of directories, files and links (absolute paths), for tests. Parent
/// directories are made as entries are added.
#[derive(Clone, Debug, Default)]
pub struct FakeFs {
    entries: Arc<RwLock<BTreeMap<PathBuf, Entry>>>,
}

impl FakeFs {
    /// An empty tree (only `/`).
    pub fn new() -> Self {
        let fs = FakeFs::default();
        fs.put(Path::new("/"), Entry::Dir);
        fs
    }

    fn put(&self, path: &Path, e: Entry) {
        let mut map = match self.entries.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        for a in path.ancestors().skip(1) {
            map.entry(a.to_path_buf()).or_insert(Entry::Dir);
        }
        map.insert(path.to_path_buf(), e);
    }

    /// Add the directory `path` (and its parents).
    pub fn dir(&self, path: impl AsRef<Path>) -> &Self {
        self.put(path.as_ref(), Entry::Dir);
        self
    }

    /// Add the regular file `path` (and its parents).
    pub fn file(&self, path: impl AsRef<Path>) -> &Self {
        self.put(path.as_ref(), Entry::File);
        self
    }

    /// Add the symlink `path` whose text is `target`.
    pub fn link(&self, path: impl AsRef<Path>, target: impl AsRef<Path>) -> &Self {
        self.put(path.as_ref(), Entry::Link(target.as_ref().to_path_buf()));
        self
    }

    fn get(&self, path: &Path) -> Option<Entry> {
        let map = match self.entries.read() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.get(path).cloned()
    }
}

impl FsView for FakeFs {
    fn kind(&self, path: &Path) -> io::Result<FileKind> {
        // As the kernel: a parent that is not a directory fails the lookup.
        match self.get(path) {
            Some(Entry::Dir) => Ok(FileKind::Dir),
            Some(Entry::File) => Ok(FileKind::File),
            Some(Entry::Link(_)) => Ok(FileKind::Link),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        match self.get(path) {
            Some(Entry::Link(t)) => Ok(t),
            Some(_) => Err(io::Error::from(io::ErrorKind::InvalidInput)),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpath::kernel_path_in;

    #[test]
    fn the_fake_tree_resolves_links_as_the_kernel_does() {
        let fs = FakeFs::new();
        fs.dir("/w/outside/sub")
            .dir("/w/proj")
            .link("/w/proj/link", "../outside/sub");
        assert_eq!(
            kernel_path_in(&fs, Path::new("/w/proj/link/../pwned")).unwrap(),
            PathBuf::from("/w/outside/pwned")
        );
        assert!(fs.is_dir(Path::new("/w/proj/link")));
        assert!(!fs.is_file(Path::new("/w/proj/link")));
        fs.file("/w/proj/a.txt");
        assert!(fs.is_file(Path::new("/w/proj/a.txt")));
    }
}
