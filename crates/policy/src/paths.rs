//! Paths as rules see them: every spelling of a file (`./x`, `src/../x`, `~/x`, `$HOME/x`, an
//! absolute path, a symlink to it) is resolved before a rule is matched, and rule patterns
//! are anchored the documented way:
//!
//! | pattern        | means                                                        |
//! |----------------|--------------------------------------------------------------|
//! | `//abs/path`   | the absolute path `/abs/path`                                |
//! | `~/p`          | `p` under the home directory                                 |
//! | `/p`           | `p` under the project directory (the session's working dir)  |
//! | `./p`, `a/p`   | `p` relative to the working directory                        |
//! | `name` (no `/`)| a file or directory of that name at any depth (deny), or at  |
//! |                | any depth under the working directory (allow)                |
//!
//! `*` matches within one path component, `**` across components. A pattern that names a
//! directory also covers everything under it.

use std::path::{Component, Path, PathBuf};

use crate::fs::FsView;
use crate::kpath::{kernel_path, kernel_path_in};
use globset::{GlobBuilder, GlobMatcher};

/// Where relative paths and patterns are anchored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roots {
    /// The session's working directory (the project).
    pub cwd: PathBuf,
    /// Directories added with `--add-dir` / `additionalDirectories`: edits are allowed there
    /// as in the working directory.
    pub dirs: Vec<PathBuf>,
    /// The home directory, for `~`.
    pub home: Option<PathBuf>,
    /// keel's own output of this session (spilled tool output): readable without asking, as
    /// the results that name these files tell the model to read them.
    pub readable: Vec<PathBuf>,
}

/// System locations any program may read and that hold nothing of the user's: compiler
/// headers, shared data and documentation, the OS's name, and the empty device. Reads there
/// need no rule. Matched on the kernel's resolution of a path, so no link or `..` leads from
/// here to anywhere else.
pub const SYSTEM_READABLE: &[&str] = &[
    "/usr/include",
    "/usr/local/include",
    "/usr/share",
    "/etc/os-release",
    "/usr/lib/os-release",
    "/dev/null",
];

/// A path a call touches, in the two forms rules are checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Made absolute and with `.`/`..` removed by text, symlinks kept: the spelling the call
    /// used, for deny rules (which match either form, erring towards denying).
    pub lexical: PathBuf,
    /// As the kernel resolves it (keel_tools::kpath): each symlink followed where it stands,
    /// before the `..` after it; the file really touched, and the one the tool opens.
    pub real: PathBuf,
    /// Why the kernel's resolution failed (a symlink loop), if it did: such a path is never
    /// inside the project and no allow rule matches it.
    pub broken: Option<String>,
}

impl Roots {
    /// Resolve a path given to a tool (or seen in a command), relative to `base` (the
    /// working directory unless a `cd` moved it).
    pub fn resolve_in(&self, fs: &dyn FsView, path: &str, base: &Path) -> Resolved {
        let expanded = self.expand_home(path);
        let joined = if expanded.is_absolute() {
            expanded
        } else {
            base.join(expanded)
        };
        let lexical = normalize(&joined);
        // Resolve the path as written (not `lexical`): a `..` after a symlink leaves the
        // link's target, not the directory holding the link.
        match kernel_path_in(fs, &joined) {
            Ok(real) => Resolved {
                lexical,
                real,
                broken: None,
            },
            Err(e) => Resolved {
                real: lexical.clone(),
                lexical,
                broken: Some(e.to_string()),
            },
        }
    }

    /// Resolve relative to the working directory.
    pub fn resolve(&self, fs: &dyn FsView, path: &str) -> Resolved {
        self.resolve_in(fs, path, &self.cwd)
    }

    fn expand_home(&self, path: &str) -> PathBuf {
        if let Some(home) = &self.home {
            for prefix in ["~", "$HOME", "${HOME}"] {
                if let Some(rest) = path.strip_prefix(prefix) {
                    if rest.is_empty() {
                        return home.clone();
                    }
                    if let Some(rest) = rest.strip_prefix('/') {
                        return home.join(rest);
                    }
                }
            }
        }
        PathBuf::from(path)
    }

    /// Whether `p` is inside the working directory or an added directory (both spellings
    /// must be: a symlink inside that points out is outside).
    pub fn contains(&self, fs: &dyn FsView, p: &Resolved) -> bool {
        let inside = |x: &Path| {
            std::iter::once(&self.cwd)
                .chain(&self.dirs)
                .any(|d| x.starts_with(d) || x.starts_with(real_path_in(fs, d)))
        };
        p.broken.is_none() && inside(&p.lexical) && inside(&p.real)
    }

    /// Whether `p` may be read without a rule: its real file is inside the working
    /// directory, an added directory, keel's own output, or a [`SYSTEM_READABLE`] location.
    pub fn readable(&self, fs: &dyn FsView, p: &Resolved) -> bool {
        self.contains_real(fs, p)
            || (p.broken.is_none()
                && (self
                    .readable
                    .iter()
                    .any(|d| p.real.starts_with(real_path_in(fs, d)))
                    || SYSTEM_READABLE.iter().any(|s| p.real.starts_with(s))))
    }

    /// Whether the real file of `p` is inside the working directory or an added directory
    /// (reads: where the file really is is what matters; a spelling through a link that
    /// leads back in is inside).
    pub fn contains_real(&self, fs: &dyn FsView, p: &Resolved) -> bool {
        p.broken.is_none()
            && std::iter::once(&self.cwd)
                .chain(&self.dirs)
                .any(|d| p.real.starts_with(d) || p.real.starts_with(real_path_in(fs, d)))
    }
}

/// Remove `.` and `..` without touching the file system (`/a/b/../c` → `/a/c`).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `p` (absolute) resolved as the kernel would; `p` itself when it cannot be (a loop).
pub fn real_path(p: &Path) -> PathBuf {
    kernel_path(p).unwrap_or_else(|_| p.to_path_buf())
}

/// [`real_path`] on the file system `fs` shows.
pub fn real_path_in(fs: &dyn FsView, p: &Path) -> PathBuf {
    kernel_path_in(fs, p).unwrap_or_else(|_| p.to_path_buf())
}

/// A compiled path pattern.
#[derive(Clone, Debug)]
pub struct PathPattern {
    globs: Vec<GlobMatcher>,
    /// The part of the pattern before its first wildcard, as absolute paths (one per anchor
    /// spelling), for "could anything under this directory match" questions.
    prefixes: Vec<PathBuf>,
    /// The pattern matches at any depth (`name`, `**/name`).
    anywhere: bool,
}

/// A path rule's pattern that cannot be compiled.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// Nothing inside the parentheses but spaces.
    #[error("an empty path pattern")]
    Empty,
    /// `~/…` when the session has no home directory.
    #[error("`{pattern}` names the home directory, which is not known")]
    NoHome {
        /// The pattern as written.
        pattern: String,
    },
    /// Not a glob the matcher accepts (an unclosed `[`, `{`).
    #[error("`{pattern}` is not a valid path pattern: {source}")]
    Glob {
        /// The pattern as written.
        pattern: String,
        /// What the glob compiler said.
        source: globset::Error,
    },
}

/// Which way a pattern is used: bare names mean "anywhere" for deny and "under the working
/// directory" for allow, so neither reading widens what the user allowed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// An allow rule.
    Allow,
    /// A deny or ask rule.
    Deny,
}

/// Where a pattern is anchored (one directory), its body under the anchor, and whether it is a
/// deny that matches at any depth from the root.
fn anchor(
    pattern: &str,
    roots: &Roots,
    usage: Use,
) -> Result<(Vec<PathBuf>, String, bool), PatternError> {
    let mut anchors: Vec<PathBuf> = Vec::new();
    let body: String;
    let mut anywhere = false;
    if let Some(abs) = pattern.strip_prefix("//") {
        anchors.push(PathBuf::from("/"));
        body = abs.to_owned();
    } else if let Some(rest) = pattern.strip_prefix("~/") {
        let home = roots.home.clone().ok_or_else(|| PatternError::NoHome {
            pattern: pattern.to_owned(),
        })?;
        anchors.push(home);
        body = rest.to_owned();
    } else if let Some(rest) = pattern.strip_prefix('/') {
        anchors.push(roots.cwd.clone());
        body = rest.to_owned();
    } else if let Some(rest) = pattern.strip_prefix("./") {
        anchors.push(roots.cwd.clone());
        body = rest.to_owned();
    } else if !pattern.trim_end_matches('/').contains('/') {
        // A bare name: at any depth.
        match usage {
            Use::Deny => {
                anchors.push(PathBuf::from("/"));
                anywhere = true;
            }
            Use::Allow => anchors.push(roots.cwd.clone()),
        }
        body = format!("**/{pattern}");
    } else {
        anchors.push(roots.cwd.clone());
        body = pattern.to_owned();
    }
    if body.starts_with("**") {
        anywhere |= usage == Use::Deny && anchors[0] == Path::new("/");
    }
    Ok((anchors, body, anywhere))
}

impl PathPattern {
    /// Compile a rule's pattern.
    pub fn new(
        fs: &dyn FsView,
        pattern: &str,
        roots: &Roots,
        usage: Use,
    ) -> Result<Self, PatternError> {
        let pattern = pattern.trim();
        if pattern.is_empty() {
            return Err(PatternError::Empty);
        }
        let (anchors, body, anywhere) = anchor(pattern, roots, usage)?;
        // Anchor both the given and the real spelling of the anchor directory.
        let mut all = Vec::new();
        for a in &anchors {
            all.push(a.clone());
            let r = real_path_in(fs, a);
            if !all.contains(&r) {
                all.push(r);
            }
        }
        let body = body.trim_end_matches('/');
        let mut globs = Vec::new();
        let mut prefixes = Vec::new();
        for a in &all {
            let base = a.to_string_lossy();
            let base = base.trim_end_matches('/');
            let full = if body.is_empty() {
                base.to_owned()
            } else {
                format!("{base}/{body}")
            };
            let full = escape_glob_anchor(base, &full);
            let mut forms = vec![full.clone(), format!("{full}/**")];
            // `dir/**` also names `dir` itself: a search of the directory reads only what
            // the rule covers.
            if let Some(dir) = full.strip_suffix("/**").filter(|d| !d.is_empty()) {
                forms.push(dir.to_owned());
            }
            for g in forms {
                let m = GlobBuilder::new(&g)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| PatternError::Glob {
                        pattern: pattern.to_owned(),
                        source: e,
                    })?
                    .compile_matcher();
                globs.push(m);
            }
            let full_raw = format!("{base}/{body}");
            let lit = match full_raw.find(['*', '?', '[', '{']) {
                Some(i) => full_raw[..i]
                    .rsplit_once('/')
                    .map(|(a, _)| if a.is_empty() { "/" } else { a })
                    .unwrap_or("/")
                    .to_owned(),
                None => full_raw,
            };
            prefixes.push(PathBuf::from(lit));
        }
        Ok(PathPattern {
            globs,
            prefixes,
            anywhere,
        })
    }

    /// Whether the pattern matches either spelling of `p`.
    pub fn matches(&self, p: &Resolved) -> bool {
        self.globs
            .iter()
            .any(|g| g.is_match(&p.lexical) || g.is_match(&p.real))
    }

    /// Whether the pattern matches the real file (allow rules: the file actually touched).
    pub fn matches_real(&self, p: &Resolved) -> bool {
        p.broken.is_none()
            && self.globs.iter().any(|g| g.is_match(&p.real))
            && self
                .globs
                .iter()
                .any(|g| g.is_match(&p.lexical) || g.is_match(&p.real))
    }

    /// Whether something inside directory `dir` could match (a recursive read of `dir`
    /// would read it).
    pub fn may_match_under(&self, dir: &Resolved) -> bool {
        if self.anywhere || self.matches(dir) {
            return true;
        }
        self.prefixes.iter().any(|pre| {
            [&dir.lexical, &dir.real]
                .iter()
                .any(|d| pre.starts_with(d) || d.starts_with(pre))
        })
    }
}

/// Glob metacharacters in the anchor directory itself are literal.
fn escape_glob_anchor(base: &str, full: &str) -> String {
    let mut escaped = String::new();
    for c in base.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    format!("{escaped}{}", &full[base.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    fn roots(dir: &Path) -> Roots {
        Roots {
            cwd: dir.to_path_buf(),
            dirs: Vec::new(),
            home: Some(dir.join("home")),
            readable: Vec::new(),
        }
    }

    #[test]
    fn spellings_resolve_to_one_file() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::create_dir_all(d.join("home")).unwrap();
        std::fs::write(d.join(".env"), "x").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(d.join(".env"), d.join("src/link")).unwrap();
        let r = roots(d);
        let deny = PathPattern::new(&RealFs, ".env", &r, Use::Deny).unwrap();
        let abs = d.join(".env").display().to_string();
        for p in [".env", "./.env", "src/../.env", abs.as_str(), "src/link"] {
            assert!(deny.matches(&r.resolve(&RealFs, p)), "{p}");
        }
        assert!(!deny.matches(&r.resolve(&RealFs, "src/env")));
        let anchored = PathPattern::new(&RealFs, "./.env", &r, Use::Deny).unwrap();
        assert!(anchored.matches(&r.resolve(&RealFs, "src/../.env")));
        assert!(!anchored.matches(&r.resolve(&RealFs, "src/.env")));
        let home = PathPattern::new(&RealFs, "~/.ssh/**", &r, Use::Deny).unwrap();
        assert!(home.matches(&r.resolve(&RealFs, "~/.ssh/id_rsa")));
        assert!(home.matches(&r.resolve(&RealFs, "$HOME/.ssh/id_rsa")));
        let abs_pat = PathPattern::new(&RealFs, &format!("/{}", abs), &r, Use::Deny).unwrap();
        assert!(abs_pat.matches(&r.resolve(&RealFs, ".env")));
        let dir = PathPattern::new(&RealFs, "./secrets", &r, Use::Deny).unwrap();
        assert!(dir.matches(&r.resolve(&RealFs, "secrets/a/b.txt")));
    }

    #[test]
    fn allow_patterns_follow_symlinks_out() {
        let t = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(elsewhere.path().join("outside.txt"), "x").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(elsewhere.path().join("outside.txt"), d.join("src/link"))
            .unwrap();
        let r = roots(d);
        let allow = PathPattern::new(&RealFs, "src/*", &r, Use::Allow).unwrap();
        assert!(allow.matches_real(&r.resolve(&RealFs, "src/a.txt")));
        let abs = d.join("src/a.txt").display().to_string();
        assert!(allow.matches_real(&r.resolve(&RealFs, &abs)));
        assert!(!allow.matches_real(&r.resolve(&RealFs, "src/../x")));
        assert!(!allow.matches_real(&r.resolve(&RealFs, "src/link")));
        assert!(!r.contains(&RealFs, &r.resolve(&RealFs, "src/link")));
        assert!(r.contains(&RealFs, &r.resolve(&RealFs, "src/new.txt")));
        assert!(!r.contains(&RealFs, &r.resolve(&RealFs, "../elsewhere")));
    }

    #[test]
    fn recursive_reads_meet_denied_paths() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::create_dir_all(d.join("secrets")).unwrap();
        let r = roots(d);
        let p = PathPattern::new(&RealFs, "./secrets/**", &r, Use::Deny).unwrap();
        assert!(p.may_match_under(&r.resolve(&RealFs, ".")));
        assert!(!p.may_match_under(&r.resolve(&RealFs, "src")));
        let any = PathPattern::new(&RealFs, "**/.env", &r, Use::Deny).unwrap();
        assert!(any.may_match_under(&r.resolve(&RealFs, "src")));
    }
}
