//! Reading a file that a repository (or the user's config directory) supplies: settings,
//! agent definitions, memory files (`CLAUDE.md`), `.mcp.json`, slash commands.
//!
//! Such a file is input from whoever wrote the repository, so it is read as hostile: only a
//! regular file (judged on the opened descriptor, so a swap after the check changes nothing),
//! never a FIFO (opening one would wait for a writer) or a device (`/dev/zero` never ends),
//! never a file of the kernel's pseudo file systems (`/proc`, `/sys`: `/proc/self/environ`
//! holds keel's API keys and reports a size of 0), and at most a stated number of bytes.
//! A caller that also names roots ([`Confine`]) gets the file only when the path the kernel
//! really opened lies inside one of them and outside the user's secret directories.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The bound for settings files, agent definitions, `.mcp.json` and commands (1 MiB).
pub const REPO_FILE_LIMIT: u64 = 1 << 20;

/// The bound for one memory file read into the system prompt (256 KiB).
pub const MEMORY_FILE_LIMIT: u64 = 256 << 10;

/// Directories under the home directory that no repository file may resolve into.
pub const SECRET_HOME_DIRS: &[&str] = &[".ssh", ".gnupg", ".aws", ".kube", ".docker"];

/// Pseudo file systems and device trees: never a repository file, whatever a link says.
const PSEUDO_ROOTS: &[&str] = &["/proc", "/sys", "/dev"];

/// What to do with a file over the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverLimit {
    /// Refuse the file ([`RepoFileError::TooLarge`]).
    Fail,
    /// Keep the first `limit` bytes and say so in [`RepoFile::cut_from`].
    Cut,
}

/// Where a confined file must really live.
#[derive(Clone, Copy, Debug)]
pub struct Confine<'a> {
    /// The directories the opened file may be inside (compared after resolving links).
    pub roots: &'a [PathBuf],
    /// The user's home, for [`SECRET_HOME_DIRS`].
    pub home: Option<&'a Path>,
}

/// How to read one repository file.
#[derive(Clone, Copy, Debug)]
pub struct RepoRead<'a> {
    /// The most bytes read.
    pub limit: u64,
    /// What happens past `limit`.
    pub over: OverLimit,
    /// Roots the file must resolve into, if any.
    pub confine: Option<Confine<'a>>,
}

impl RepoRead<'_> {
    /// Refuse anything over `limit` bytes, wherever the file lives.
    pub fn bounded(limit: u64) -> RepoRead<'static> {
        RepoRead {
            limit,
            over: OverLimit::Fail,
            confine: None,
        }
    }
}

/// A file read by [`read_repo_file`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoFile {
    /// Its contents (at most the limit).
    pub text: String,
    /// The file's full size when it was cut ([`OverLimit::Cut`]).
    pub cut_from: Option<u64>,
    /// The path the kernel opened (links resolved).
    pub real_path: PathBuf,
}

/// Why a repository file was not read.
#[derive(Debug, thiserror::Error)]
pub enum RepoFileError {
    /// There is no such file (callers usually skip it).
    #[error("{path} does not exist")]
    Missing {
        /// The path asked for.
        path: PathBuf,
    },
    /// Opening or reading failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path asked for.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A FIFO, device, socket or directory, not a regular file.
    #[error("{path} is a {kind}, not a regular file")]
    NotRegular {
        /// The path asked for.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// It resolves into `/proc`, `/sys` or `/dev`.
    #[error("{path} resolves to {real} (a kernel pseudo file), which keel does not read as a repository file")]
    Pseudo {
        /// The path asked for.
        path: PathBuf,
        /// Where it really leads.
        real: PathBuf,
    },
    /// It resolves outside the allowed roots, or into a secret directory.
    #[error("{path} resolves to {real}, outside {allowed}")]
    Outside {
        /// The path asked for.
        path: PathBuf,
        /// Where it really leads.
        real: PathBuf,
        /// The places it may be (for the message).
        allowed: String,
    },
    /// Bigger than the bound.
    #[error("{path} is {size} bytes, over keel's limit of {limit} bytes for this file")]
    TooLarge {
        /// The path asked for.
        path: PathBuf,
        /// Its size (or at least this many bytes).
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotText {
        /// The path asked for.
        path: PathBuf,
    },
}

/// Read a repository file under `how`'s rules (see the module's documentation).
pub fn read_repo_file(path: &Path, how: &RepoRead<'_>) -> Result<RepoFile, RepoFileError> {
    let io = |source: std::io::Error| RepoFileError::Io {
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits() | nix::fcntl::OFlag::O_NOCTTY.bits())
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => RepoFileError::Missing {
                path: path.to_owned(),
            },
            _ => io(e),
        })?;
    let meta = file.metadata().map_err(io)?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(RepoFileError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(&ft),
        });
    }
    let real = opened_path(&file, path);
    check_place(path, &real, how.confine)?;
    let mut buf = Vec::with_capacity(meta.len().min(how.limit) as usize);
    // One byte past the bound tells a file that grew since fstat from one that fits.
    file.take(how.limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(io)?;
    let mut cut_from = None;
    if buf.len() as u64 > how.limit {
        let size = meta.len().max(buf.len() as u64);
        match how.over {
            OverLimit::Fail => {
                return Err(RepoFileError::TooLarge {
                    path: path.to_owned(),
                    size,
                    limit: how.limit,
                })
            }
            OverLimit::Cut => {
                buf.truncate(how.limit as usize);
                cut_from = Some(size);
            }
        }
    }
    let text = match String::from_utf8(buf) {
        Ok(t) => t,
        // A cut may split a character; drop the partial one, nothing else.
        Err(e) if cut_from.is_some() && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut b = e.into_bytes();
            b.truncate(valid);
            String::from_utf8(b).map_err(|_| RepoFileError::NotText {
                path: path.to_owned(),
            })?
        }
        Err(_) => {
            return Err(RepoFileError::NotText {
                path: path.to_owned(),
            })
        }
    };
    Ok(RepoFile {
        text,
        cut_from,
        real_path: real,
    })
}

/// The path the kernel opened: `/proc/self/fd` names it exactly (no second lookup that a
/// swapped link could redirect); elsewhere, the canonical form of `path`.
fn opened_path(file: &std::fs::File, path: &Path) -> PathBuf {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .or_else(|_| std::fs::canonicalize(path))
        .unwrap_or_else(|_| path.to_owned())
}

fn check_place(
    path: &Path,
    real: &Path,
    confine: Option<Confine<'_>>,
) -> Result<(), RepoFileError> {
    if PSEUDO_ROOTS.iter().any(|r| real.starts_with(r)) {
        return Err(RepoFileError::Pseudo {
            path: path.to_owned(),
            real: real.to_owned(),
        });
    }
    let Some(c) = confine else { return Ok(()) };
    let outside = |allowed: String| RepoFileError::Outside {
        path: path.to_owned(),
        real: real.to_owned(),
        allowed,
    };
    if let Some(home) = c.home {
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_owned());
        if let Some(d) = SECRET_HOME_DIRS
            .iter()
            .map(|d| home.join(d))
            .find(|d| real.starts_with(d))
        {
            return Err(outside(format!(
                "the places keel reads it from ({} holds secrets)",
                d.display()
            )));
        }
    }
    let inside = c.roots.iter().any(|r| {
        let r = std::fs::canonicalize(r).unwrap_or_else(|_| r.clone());
        real.starts_with(r)
    });
    if inside {
        Ok(())
    } else {
        let names: Vec<String> = c.roots.iter().map(|r| r.display().to_string()).collect();
        Err(outside(names.join(", ")))
    }
}

fn kind_of(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn roots(p: &Path) -> Vec<PathBuf> {
        vec![p.to_owned()]
    }

    #[test]
    fn a_regular_file_is_read() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.json"), "{}").unwrap();
        let f = read_repo_file(&d.path().join("a.json"), &RepoRead::bounded(10)).unwrap();
        assert_eq!(f.text, "{}");
        assert_eq!(f.cut_from, None);
    }

    #[test]
    fn a_link_to_dev_zero_is_refused_at_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("settings.json");
        symlink("/dev/zero", &p).unwrap();
        let e = read_repo_file(&p, &RepoRead::bounded(REPO_FILE_LIMIT)).unwrap_err();
        assert!(
            matches!(
                e,
                RepoFileError::NotRegular {
                    kind: "character device",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("settings.json"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("agent.md");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_repo_file(&p, &RepoRead::bounded(REPO_FILE_LIMIT)).unwrap_err();
        assert!(
            matches!(e, RepoFileError::NotRegular { kind: "FIFO", .. }),
            "{e}"
        );
    }

    #[test]
    fn a_link_into_proc_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("CLAUDE.md");
        symlink("/proc/self/environ", &p).unwrap();
        let e = read_repo_file(&p, &RepoRead::bounded(REPO_FILE_LIMIT)).unwrap_err();
        assert!(matches!(e, RepoFileError::Pseudo { .. }), "{e}");
    }

    #[test]
    fn over_the_bound_fails_or_is_cut() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.md");
        std::fs::write(&p, "é".repeat(10)).unwrap(); // 20 bytes
        let e = read_repo_file(&p, &RepoRead::bounded(15)).unwrap_err();
        assert!(
            matches!(
                e,
                RepoFileError::TooLarge {
                    size: 20,
                    limit: 15,
                    ..
                }
            ),
            "{e}"
        );
        let cut = read_repo_file(
            &p,
            &RepoRead {
                limit: 15,
                over: OverLimit::Cut,
                confine: None,
            },
        )
        .unwrap();
        assert_eq!(cut.text, "é".repeat(7), "the split character is dropped");
        assert_eq!(cut.cut_from, Some(20));
    }

    #[test]
    fn a_confined_file_must_resolve_inside_its_roots_and_outside_secrets() {
        let home = tempfile::tempdir().unwrap();
        let proj = home.path().join("proj");
        std::fs::create_dir_all(proj.join("docs")).unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        std::fs::write(home.path().join(".ssh/id_rsa"), "KEY").unwrap();
        std::fs::write(home.path().join("notes.md"), "outside").unwrap();
        std::fs::write(proj.join("docs/AGENTS.md"), "inside").unwrap();
        symlink(proj.join("docs/AGENTS.md"), proj.join("CLAUDE.md")).unwrap();
        symlink(home.path().join("notes.md"), proj.join("OUT.md")).unwrap();
        symlink(home.path().join(".ssh/id_rsa"), proj.join("KEY.md")).unwrap();
        let r = roots(&proj);
        let how = RepoRead {
            limit: MEMORY_FILE_LIMIT,
            over: OverLimit::Cut,
            confine: Some(Confine {
                roots: &r,
                home: Some(home.path()),
            }),
        };
        assert_eq!(
            read_repo_file(&proj.join("CLAUDE.md"), &how).unwrap().text,
            "inside"
        );
        let e = read_repo_file(&proj.join("OUT.md"), &how).unwrap_err();
        assert!(matches!(e, RepoFileError::Outside { .. }), "{e}");
        // Even a home-wide root never reaches ~/.ssh.
        let wide = roots(home.path());
        let how = RepoRead {
            confine: Some(Confine {
                roots: &wide,
                home: Some(home.path()),
            }),
            ..how
        };
        let e = read_repo_file(&proj.join("KEY.md"), &how).unwrap_err();
        assert!(e.to_string().contains(".ssh"), "{e}");
        assert!(read_repo_file(&proj.join("OUT.md"), &how).is_ok());
    }
}
