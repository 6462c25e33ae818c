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
}

/// A path a call touches, in the two forms rules are checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Made absolute and with `.`/`..` removed, symlinks kept.
    pub lexical: PathBuf,
    /// With every symlink of its existing part followed (the file really touched).
    pub real: PathBuf,
}

impl Roots {
    /// Resolve a path given to a tool (or seen in a command), relative to `base` (the
    /// working directory unless a `cd` moved it).
    pub fn resolve_in(&self, path: &str, base: &Path) -> Resolved {
        let expanded = self.expand_home(path);
        let joined = if expanded.is_absolute() {
            expanded
        } else {
            base.join(expanded)
        };
        let lexical = normalize(&joined);
        let real = real_path(&lexical);
        Resolved { lexical, real }
    }

    /// Resolve relative to the working directory.
    pub fn resolve(&self, path: &str) -> Resolved {
        self.resolve_in(path, &self.cwd.clone())
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
    pub fn contains(&self, p: &Resolved) -> bool {
        let inside = |x: &Path| {
            std::iter::once(&self.cwd)
                .chain(&self.dirs)
                .any(|d| x.starts_with(d) || x.starts_with(real_path(d)))
        };
        inside(&p.lexical) && inside(&p.real)
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

/// Follow symlinks in the longest existing prefix of `p`; the rest is appended as is.
pub fn real_path(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(r) = std::fs::canonicalize(&existing) {
            let mut out = r;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return normalize(&out);
        }
        match (
            existing.file_name().map(|n| n.to_owned()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
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

/// Which way a pattern is used: bare names mean "anywhere" for deny and "under the working
/// directory" for allow, so neither reading widens what the user allowed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Allow,
    Deny,
}

impl PathPattern {
    /// Compile a rule's pattern.
    pub fn new(pattern: &str, roots: &Roots, usage: Use) -> Result<Self, String> {
        let pattern = pattern.trim();
        if pattern.is_empty() {
            return Err("an empty path pattern".to_owned());
        }
        let mut anchors: Vec<PathBuf> = Vec::new();
        let body: String;
        let mut anywhere = false;
        if let Some(abs) = pattern.strip_prefix("//") {
            anchors.push(PathBuf::from("/"));
            body = abs.to_owned();
        } else if let Some(rest) = pattern.strip_prefix("~/") {
            let home = roots.home.clone().ok_or_else(|| {
                format!("`{pattern}` names the home directory, which is not known")
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
        // Anchor both the given and the real spelling of the anchor directory.
        let mut all = Vec::new();
        for a in &anchors {
            all.push(a.clone());
            let r = real_path(a);
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
            for g in [full.clone(), format!("{full}/**")] {
                let m = GlobBuilder::new(&g)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| format!("`{pattern}` is not a valid path pattern: {e}"))?
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
        self.globs.iter().any(|g| g.is_match(&p.real))
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

    fn roots(dir: &Path) -> Roots {
        Roots {
            cwd: dir.to_path_buf(),
            dirs: Vec::new(),
            home: Some(dir.join("home")),
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
        let deny = PathPattern::new(".env", &r, Use::Deny).unwrap();
        let abs = d.join(".env").display().to_string();
        for p in [".env", "./.env", "src/../.env", abs.as_str(), "src/link"] {
            assert!(deny.matches(&r.resolve(p)), "{p}");
        }
        assert!(!deny.matches(&r.resolve("src/env")));
        let anchored = PathPattern::new("./.env", &r, Use::Deny).unwrap();
        assert!(anchored.matches(&r.resolve("src/../.env")));
        assert!(!anchored.matches(&r.resolve("src/.env")));
        let home = PathPattern::new("~/.ssh/**", &r, Use::Deny).unwrap();
        assert!(home.matches(&r.resolve("~/.ssh/id_rsa")));
        assert!(home.matches(&r.resolve("$HOME/.ssh/id_rsa")));
        let abs_pat = PathPattern::new(&format!("/{}", abs), &r, Use::Deny).unwrap();
        assert!(abs_pat.matches(&r.resolve(".env")));
        let dir = PathPattern::new("./secrets", &r, Use::Deny).unwrap();
        assert!(dir.matches(&r.resolve("secrets/a/b.txt")));
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
        let allow = PathPattern::new("src/*", &r, Use::Allow).unwrap();
        assert!(allow.matches_real(&r.resolve("src/a.txt")));
        let abs = d.join("src/a.txt").display().to_string();
        assert!(allow.matches_real(&r.resolve(&abs)));
        assert!(!allow.matches_real(&r.resolve("src/../x")));
        assert!(!allow.matches_real(&r.resolve("src/link")));
        assert!(!r.contains(&r.resolve("src/link")));
        assert!(r.contains(&r.resolve("src/new.txt")));
        assert!(!r.contains(&r.resolve("../elsewhere")));
    }

    #[test]
    fn recursive_reads_meet_denied_paths() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::create_dir_all(d.join("secrets")).unwrap();
        let r = roots(d);
        let p = PathPattern::new("./secrets/**", &r, Use::Deny).unwrap();
        assert!(p.may_match_under(&r.resolve(".")));
        assert!(!p.may_match_under(&r.resolve("src")));
        let any = PathPattern::new("**/.env", &r, Use::Deny).unwrap();
        assert!(any.may_match_under(&r.resolve("src")));
    }
}
