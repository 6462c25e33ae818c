//! A file's directory held open for a rewind: reached from `/` one component at a time, each
//! opened with `O_NOFOLLOW | O_DIRECTORY`, so a directory swapped for a link anywhere on the
//! path is noticed rather than followed. Every later step (read, link, create, rename, unlink)
//! is made relative to the open directory, never by path again: a process that swaps a parent
//! directory after the checks cannot redirect the writes.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Component, Path};

use nix::fcntl::{openat, renameat, AtFlags, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::{faccessat, linkat, unlinkat, AccessFlags, UnlinkatFlags};

/// An open directory.
#[derive(Debug)]
pub(super) struct Dir {
    fd: OwnedFd,
}

fn io_err(e: nix::Error) -> io::Error {
    io::Error::from(e)
}

/// `openat`, its new descriptor owned (closed on drop, also on the error paths).
#[allow(unsafe_code)]
fn open_at(dir: Option<RawFd>, name: &Path, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
    let fd = openat(dir, name, flags | OFlag::O_CLOEXEC, mode).map_err(io_err)?;
    // SAFETY: `openat` succeeded, so `fd` is a new, open descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Dir {
    /// Open the absolute directory `path`, following no link on the way (a link anywhere on
    /// it is an error: `ELOOP` or `ENOTDIR`).
    pub(super) fn open(path: &Path) -> io::Result<Dir> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let mut fd = open_at(None, Path::new("/"), flags, Mode::empty())?;
        for c in path.components() {
            match c {
                Component::RootDir => {}
                Component::Normal(name) => {
                    fd = open_at(Some(fd.as_raw_fd()), Path::new(name), flags, Mode::empty())?;
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "not an absolute, plain path",
                    ))
                }
            }
        }
        Ok(Dir { fd })
    }

    fn raw(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    /// The file `name` in this directory, read up to `limit` bytes: `Ok(None)` when it does
    /// not exist, `Err(None)` when something other than a regular file stands there.
    pub(super) fn read(
        &self,
        name: &OsStr,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, Option<io::Error>> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
        let fd = match open_at(self.raw(), Path::new(name), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // A link there: O_NOFOLLOW refuses it.
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => return Err(None),
            Err(e) => return Err(Some(e)),
        };
        let file = File::from(fd);
        if !file.metadata().map_err(Some)?.is_file() {
            return Err(None);
        }
        let mut data = Vec::new();
        file.take(limit).read_to_end(&mut data).map_err(Some)?;
        Ok(Some(data))
    }

    /// Whether this directory may be written.
    pub(super) fn writable(&self) -> io::Result<()> {
        faccessat(self.raw(), ".", AccessFlags::W_OK, AtFlags::empty()).map_err(io_err)
    }

    /// A new file `name` (never an existing name, never through a link), with `mode`.
    pub(super) fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        let mode = Mode::from_bits_truncate(mode as nix::libc::mode_t);
        open_at(self.raw(), Path::new(name), flags, mode).map(File::from)
    }

    /// A second name `to` for the file `from` (the link itself if it is one: not followed).
    pub(super) fn link(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        linkat(
            self.raw(),
            Path::new(from),
            self.raw(),
            Path::new(to),
            AtFlags::empty(),
        )
        .map_err(io_err)
    }

    /// Rename `from` to `to`, both in this directory.
    pub(super) fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        renameat(self.raw(), Path::new(from), self.raw(), Path::new(to)).map_err(io_err)
    }

    /// Remove the file `name`.
    pub(super) fn unlink(&self, name: &OsStr) -> io::Result<()> {
        unlinkat(self.raw(), Path::new(name), UnlinkatFlags::NoRemoveDir).map_err(io_err)
    }
}
