//! Output styles: how the model is asked to answer. The `outputStyle` setting (user, project
//! and local settings files, as `--setting-sources` allows, then `--settings`) names a
//! built-in style or a custom one, a Markdown file in `~/.claude/output-styles/` or the
//! project's `.claude/output-styles/` whose front matter gives its `name` (and
//! `description`) and whose body is appended to the system prompt.

use std::path::{Path, PathBuf};

use keel_tools::repofile::{read_repo_file, Confine, OverLimit, RepoFileError, RepoRead};
use serde_json::Value;

use crate::setting_sources::SettingSource;

/// The style used when none is set (nothing is added to the system prompt).
pub const DEFAULT_STYLE: &str = "default";
/// The longest settings or style file read, in bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;
/// Style files read per directory.
const MAX_STYLE_FILES: usize = 200;

const EXPLANATORY: &str = "Output style: Explanatory. Besides doing the task, help the user understand it: when you make a choice that is not obvious (a design, a library, a trade-off), say briefly why, and point out what in this codebase the change relies on. Keep these notes short and set them apart from the work itself.";
const LEARNING: &str = "Output style: Learning. Treat the session as a chance for the user to learn by doing: explain your reasoning as you go, and where a small, well-defined piece of the work (a few lines of logic, a test case) would teach something, leave it to the user with a clear TODO and say what it should do, instead of writing it yourself.";

/// The output style a session uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputStyle {
    /// Its name, as `system/init.output_style` reports it.
    pub name: String,
    /// What is appended to the system prompt (`None` for the default style).
    pub prompt: Option<String>,
}

impl Default for OutputStyle {
    fn default() -> Self {
        Self {
            name: DEFAULT_STYLE.to_owned(),
            prompt: None,
        }
    }
}

/// Where settings and styles are looked for.
pub struct Places<'a> {
    /// The working directory (its `.claude/`).
    pub cwd: &'a Path,
    /// The user's home (its `.claude/`).
    pub home: Option<&'a Path>,
    /// `--setting-sources`.
    pub sources: crate::setting_sources::SettingSources,
    /// `--settings` (JSON or a file).
    pub flag_settings: Option<&'a str>,
}

impl Places<'_> {
    fn wants(&self, source: SettingSource) -> bool {
        self.sources.contains(source)
    }
}

/// Read a repository file of at most [`MAX_FILE_BYTES`] (a regular file, never a kernel pseudo
/// file; with `confine`, only inside those roots and outside the user's secret directories):
/// `None` when it is absent or refused, with a warning for a refusal.
fn read_bounded(
    path: &Path,
    confine: Option<Confine<'_>>,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let how = RepoRead {
        limit: MAX_FILE_BYTES,
        over: OverLimit::Fail,
        confine,
    };
    match read_repo_file(path, &how) {
        Ok(f) => Some(f.text),
        Err(RepoFileError::Missing { .. }) => None,
        Err(e) => {
            warnings.push(format!("{e}; ignored"));
            None
        }
    }
}

fn style_setting(text: &str) -> Option<String> {
    serde_json::from_str::<Value>(text)
        .ok()?
        .get("outputStyle")?
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The `outputStyle` setting: the last of user, project, local and `--settings` that sets it.
fn configured(p: &Places<'_>, warnings: &mut Vec<String>) -> Option<String> {
    let mut files: Vec<PathBuf> = Vec::new();
    if let (Some(h), true) = (p.home, p.wants(SettingSource::User)) {
        files.push(h.join(".claude").join("settings.json"));
    }
    if p.wants(SettingSource::Project) {
        files.push(p.cwd.join(".claude").join("settings.json"));
    }
    if p.wants(SettingSource::Local) {
        files.push(p.cwd.join(".claude").join("settings.local.json"));
    }
    let mut found = None;
    for f in files {
        if let Some(s) = read_bounded(&f, None, warnings).and_then(|t| style_setting(&t)) {
            found = Some(s);
        }
    }
    if let Some(flag) = p.flag_settings {
        let text = if flag.trim_start().starts_with('{') {
            Some(flag.to_owned())
        } else {
            read_bounded(Path::new(flag), None, warnings)
        };
        if let Some(s) = text.and_then(|t| style_setting(&t)) {
            found = Some(s);
        }
    }
    found
}

/// A custom style file: its front matter's `name` (else the file's stem) and its body.
fn custom_style(
    path: &Path,
    confine: Confine<'_>,
    warnings: &mut Vec<String>,
) -> Option<(String, String)> {
    // A style's text goes into the system prompt: a link must not bring in a secret.
    let text = read_bounded(path, Some(confine), warnings)?;
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    let (front, body) = match text.strip_prefix("---") {
        Some(rest) => match rest.split_once("\n---") {
            Some((front, body)) => (front, body.trim_start_matches(['-', '\r', '\n'])),
            None => ("", text.as_str()),
        },
        None => ("", text.as_str()),
    };
    let name = front
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "name")
        .map(|(_, v)| v.trim().trim_matches(['"', '\'']).to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or(stem);
    Some((name, body.trim().to_owned()))
}

/// The custom styles: the user's, then the project's (a project style of the same name wins).
fn custom_styles(p: &Places<'_>, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut dirs = Vec::new();
    if let Some(h) = p.home {
        dirs.push(h.join(".claude").join("output-styles"));
    }
    dirs.push(p.cwd.join(".claude").join("output-styles"));
    let roots: Vec<PathBuf> = p
        .home
        .map(|h| h.join(".claude"))
        .into_iter()
        .chain([p.cwd.to_path_buf()])
        .collect();
    let confine = Confine {
        roots: &roots,
        home: p.home,
    };
    let mut out = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .take(MAX_STYLE_FILES)
            .collect();
        files.sort();
        for f in files {
            if let Some(s) = custom_style(&f, confine, warnings) {
                out.push(s);
            }
        }
    }
    out
}

/// The names of every style a session could use: the built-in ones, then the custom files
/// in `~/.claude/output-styles/` and `.claude/output-styles/` (unreadable ones left out).
pub fn available(cwd: &Path, home: Option<&Path>) -> Vec<String> {
    let places = Places {
        cwd,
        home,
        sources: crate::setting_sources::SettingSources::ALL,
        flag_settings: None,
    };
    let mut names: Vec<String> = [DEFAULT_STYLE, "Explanatory", "Learning"]
        .map(str::to_owned)
        .to_vec();
    for (n, _) in custom_styles(&places, &mut Vec::new()) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// The session's output style, and warnings (an unknown style name, an unreadable file).
pub fn resolve(p: &Places<'_>) -> (OutputStyle, Vec<String>) {
    let mut warnings = Vec::new();
    let Some(name) = configured(p, &mut warnings) else {
        return (OutputStyle::default(), warnings);
    };
    let builtin = [
        (DEFAULT_STYLE, None),
        ("Explanatory", Some(EXPLANATORY)),
        ("Learning", Some(LEARNING)),
    ];
    if let Some((n, text)) = builtin.iter().find(|(n, _)| n.eq_ignore_ascii_case(&name)) {
        let style = OutputStyle {
            name: (*n).to_owned(),
            prompt: text.map(str::to_owned),
        };
        return (style, warnings);
    }
    let customs = custom_styles(p, &mut warnings);
    if let Some((n, body)) = customs.into_iter().rev().find(|(n, _)| *n == name) {
        let style = OutputStyle {
            name: n,
            prompt: Some(body).filter(|b| !b.is_empty()),
        };
        return (style, warnings);
    }
    warnings.push(format!(
        "the output style {name:?} (outputStyle in the settings) is neither built in (default, Explanatory, Learning) nor a file in ~/.claude/output-styles or .claude/output-styles; using the default style"
    ));
    (OutputStyle::default(), warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places<'a>(cwd: &'a Path, home: &'a Path, sources: Option<&str>) -> Places<'a> {
        Places {
            cwd,
            home: Some(home),
            sources: sources.map_or(crate::setting_sources::SettingSources::ALL, |s| {
                s.parse().unwrap()
            }),
            flag_settings: None,
        }
    }

    #[test]
    fn settings_sources_and_custom_files_decide_the_style() {
        let cwd = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let (c, h) = (cwd.path(), home.path());
        assert_eq!(resolve(&places(c, h, None)).0, OutputStyle::default());
        std::fs::create_dir_all(h.join(".claude/output-styles")).unwrap();
        std::fs::create_dir_all(c.join(".claude")).unwrap();
        std::fs::write(
            h.join(".claude/settings.json"),
            r#"{"outputStyle":"learning"}"#,
        )
        .unwrap();
        assert_eq!(resolve(&places(c, h, None)).0.name, "Learning");
        std::fs::write(
            h.join(".claude/output-styles/terse.md"),
            "---\nname: very-terse\ndescription: short answers\n---\nAnswer in one line.\n",
        )
        .unwrap();
        std::fs::write(
            c.join(".claude/settings.local.json"),
            r#"{"outputStyle":"very-terse"}"#,
        )
        .unwrap();
        let (s, w) = resolve(&places(c, h, None));
        assert_eq!(
            (s.name.as_str(), s.prompt.as_deref()),
            ("very-terse", Some("Answer in one line."))
        );
        assert!(w.is_empty(), "{w:?}");
        // Without the local source, the user's setting is what is left.
        assert_eq!(
            resolve(&places(c, h, Some("user,project"))).0.name,
            "Learning"
        );
        std::fs::write(c.join(".claude/settings.json"), r#"{"outputStyle":"nope"}"#).unwrap();
        let (s, w) = resolve(&places(c, h, Some("project")));
        assert_eq!(s, OutputStyle::default());
        assert!(w[0].contains("\"nope\""), "{w:?}");
    }

    #[test]
    fn a_style_file_that_links_to_a_secret_or_a_pseudo_file_is_not_read() {
        let cwd = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let (c, h) = (cwd.path(), home.path());
        std::fs::create_dir_all(c.join(".claude/output-styles")).unwrap();
        std::fs::create_dir_all(h.join(".ssh")).unwrap();
        std::fs::write(h.join(".ssh/id_rsa"), "PRIVATE-KEY-MARKER").unwrap();
        std::fs::write(elsewhere.path().join("token"), "TOKEN-MARKER").unwrap();
        let styles = c.join(".claude/output-styles");
        std::os::unix::fs::symlink(h.join(".ssh/id_rsa"), styles.join("key.md")).unwrap();
        std::os::unix::fs::symlink("/proc/self/environ", styles.join("env.md")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("token"), styles.join("tok.md")).unwrap();
        for name in ["key", "env", "tok"] {
            std::fs::write(
                c.join(".claude/settings.json"),
                format!(r#"{{"outputStyle":"{name}"}}"#),
            )
            .unwrap();
            let (s, w) = resolve(&places(c, h, None));
            assert_eq!(s, OutputStyle::default(), "{name}");
            assert!(!w.is_empty(), "{name}: the refusal is said");
            let all = format!("{s:?} {w:?}");
            assert!(!all.contains("MARKER"), "{all}");
        }
        // Control: a plain style file in the project is read.
        std::fs::write(styles.join("plain.md"), "Be brief.").unwrap();
        std::fs::write(
            c.join(".claude/settings.json"),
            r#"{"outputStyle":"plain"}"#,
        )
        .unwrap();
        assert_eq!(
            resolve(&places(c, h, None)).0.prompt.as_deref(),
            Some("Be brief.")
        );
    }
}
