//! keel's system prompt, in its own words, plus the memory files a user already keeps.

use std::path::{Path, PathBuf};

use keel_model::ToolSpec;
use keel_tools::repofile::{
    read_repo_file, Confine, OverLimit, RepoFileError, RepoRead, MEMORY_FILE_LIMIT,
};

/// Memory files that apply to `cwd`: `~/.claude/CLAUDE.md`, then `CLAUDE.md` (and
/// `.claude/CLAUDE.md`) in every directory from the filesystem root down to `cwd`. These are
/// candidates by name; [`read_memory`] decides which may really be read.
pub fn memory_files(cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(home) = home {
        let p = home.join(".claude").join("CLAUDE.md");
        if p.symlink_metadata().is_ok() {
            out.push(p);
        }
    }
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for d in dirs {
        for p in [d.join("CLAUDE.md"), d.join(".claude").join("CLAUDE.md")] {
            // `symlink_metadata`: a link is a candidate too, judged where it leads below.
            if p.symlink_metadata().is_ok() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// One memory file as read into the prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemorySection {
    /// Where it was found.
    pub path: PathBuf,
    /// Its text (at most [`MEMORY_FILE_LIMIT`] bytes).
    pub text: String,
    /// Its full size when it was cut at the bound.
    pub cut_from: Option<u64>,
}

/// The memory files keel reads, and a warning for each one it skipped or cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The files read, in prompt order.
    pub sections: Vec<MemorySection>,
    /// What the user should know: a file skipped (and why) or cut.
    pub warnings: Vec<String>,
}

/// The project a memory file in `cwd`'s tree belongs to: the nearest ancestor holding `.git`,
/// else `cwd` itself. A `CLAUDE.md` may link anywhere inside it (a monorepo's shared notes).
fn project_root(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())
        .unwrap_or(cwd)
        .to_owned()
}

/// Read the memory files of `cwd` (see [`memory_files`]) as hostile repository input: only a
/// regular file whose real path lies inside the directory it was found in, the project, or the
/// user's config directory (`~/.claude`), never in `/proc`, `/sys`, `/dev` or a secret
/// directory of the home (`~/.ssh`, ...), and at most [`MEMORY_FILE_LIMIT`] bytes — a longer
/// file is cut there with a notice the model sees and a warning the user sees.
pub fn read_memory(cwd: &Path, home: Option<&Path>) -> Memory {
    let mut out = Memory::default();
    let project = project_root(cwd);
    let config = home.map(|h| h.join(".claude"));
    for p in memory_files(cwd, home) {
        let found_in = p
            .parent()
            .map(|d| {
                if d.ends_with(".claude") {
                    d.parent().unwrap_or(d)
                } else {
                    d
                }
            })
            .unwrap_or(cwd)
            .to_owned();
        let mut roots = vec![found_in];
        if p.starts_with(&project) {
            roots.push(project.clone());
        }
        roots.extend(config.clone());
        let how = RepoRead {
            limit: MEMORY_FILE_LIMIT,
            over: OverLimit::Cut,
            confine: Some(Confine {
                roots: &roots,
                home,
            }),
        };
        match read_repo_file(&p, &how) {
            Ok(f) => {
                if let Some(size) = f.cut_from {
                    out.warnings.push(format!(
                        "memory file {} is {size} bytes; only its first {MEMORY_FILE_LIMIT} bytes are in the prompt",
                        p.display()
                    ));
                }
                out.sections.push(MemorySection {
                    path: p,
                    text: f.text,
                    cut_from: f.cut_from,
                });
            }
            // A link that leads nowhere is not worth a warning.
            Err(RepoFileError::Missing { .. }) => {}
            Err(e) => out.warnings.push(format!("memory file skipped: {e}")),
        }
    }
    out
}

/// Inputs of the default prompt.
pub struct PromptContext<'a> {
    /// Working directory.
    pub cwd: &'a Path,
    /// Tools offered.
    pub tools: &'a [ToolSpec],
    /// Today's date (YYYY-MM-DD).
    pub date: &'a str,
    /// Home directory, for user memory.
    pub home: Option<&'a Path>,
}

/// keel's default system prompt.
pub fn default_prompt(cx: &PromptContext<'_>) -> String {
    let tool_names: Vec<&str> = cx.tools.iter().map(|t| t.name.as_str()).collect();
    let mut s = format!(
        "You are keel, a coding agent working in a software project on the user's machine. \
You act through tools; what you write between tool calls is read by the user.\n\n\
# How to work\n\
- Look before you change: read the relevant files and search the tree before editing.\n\
- Make the smallest change that does the job, in the style of the surrounding code.\n\
- Prefer the dedicated tools over shell commands for reading (Read), searching (Grep, Glob) and editing (Edit, Write) files.\n\
- After changing code, run the project's own checks (build, tests, linters) when you can, and report what they said.\n\
- If a tool call fails, read its message: it says what to fix. Do not repeat an identical call that failed.\n\
- If a call was rejected or interrupted by the user, stop and wait for their instructions.\n\
- Be concise. When you are done, say what you did and anything the user must still do.\n\n\
# Environment\n\
- Working directory: {cwd}\n\
- Platform: {os} ({arch})\n\
- Date: {date}\n\
- Tools available: {tools}\n",
        cwd = cx.cwd.display(),
        os = std::env::consts::OS,
        arch = std::env::consts::ARCH,
        date = cx.date,
        tools = tool_names.join(", "),
    );
    let memory = read_memory(cx.cwd, cx.home);
    if !memory.sections.is_empty() {
        s.push_str(
            "\n# Project and user instructions\nThe user keeps these notes for you; follow them.\n",
        );
        for m in memory.sections {
            s.push_str(&format!(
                "\n## {}\n{}\n",
                m.path.display(),
                m.text.trim_end()
            ));
            if let Some(size) = m.cut_from {
                s.push_str(&format!(
                    "[keel: this file is {size} bytes; it was cut here, at {MEMORY_FILE_LIMIT} bytes]\n"
                ));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_names_environment_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".claude")).unwrap();
        std::fs::write(home.path().join(".claude/CLAUDE.md"), "user rule: be brief").unwrap();
        let proj = dir.path().join("proj");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "parent rule").unwrap();
        std::fs::write(proj.join("CLAUDE.md"), "project rule").unwrap();
        let tools = [ToolSpec {
            name: "Bash".into(),
            description: String::new(),
            input_schema: serde_json::json!({}),
            server: None,
        }];
        let p = default_prompt(&PromptContext {
            cwd: &proj,
            tools: &tools,
            date: "2026-11-22",
            home: Some(home.path()),
        });
        assert!(p.contains(&proj.display().to_string()));
        assert!(p.contains("2026-11-22") && p.contains("Bash"));
        let (u, a, b) = (
            p.find("user rule").unwrap(),
            p.find("parent rule").unwrap(),
            p.find("project rule").unwrap(),
        );
        assert!(
            u < a && a < b,
            "user memory, then outer directories, then the project"
        );
    }
}

#[cfg(test)]
mod memory_tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_out_of_the_project_are_skipped_with_a_warning() {
        let home = tempfile::tempdir().unwrap();
        let proj = home.path().join("work/proj");
        std::fs::create_dir_all(proj.join(".git")).unwrap();
        std::fs::create_dir_all(proj.join("sub/.claude")).unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        std::fs::write(home.path().join(".ssh/id_rsa"), "SECRET-KEY").unwrap();
        std::fs::write(proj.join("AGENTS.md"), "shared notes").unwrap();
        // A monorepo link inside the project is read; a link to a key or /proc is not.
        symlink(proj.join("AGENTS.md"), proj.join("sub/CLAUDE.md")).unwrap();
        symlink(home.path().join(".ssh/id_rsa"), proj.join("CLAUDE.md")).unwrap();
        symlink("/proc/self/environ", proj.join("sub/.claude/CLAUDE.md")).unwrap();
        let m = read_memory(&proj.join("sub"), Some(home.path()));
        let texts: Vec<&str> = m.sections.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["shared notes"]);
        assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
        assert!(
            m.warnings.iter().any(|w| w.contains(".ssh")),
            "{:?}",
            m.warnings
        );
        assert!(
            m.warnings.iter().any(|w| w.contains("/proc")),
            "{:?}",
            m.warnings
        );
    }

    #[test]
    fn an_oversize_memory_file_is_cut_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        let big = "x".repeat(MEMORY_FILE_LIMIT as usize + 10);
        std::fs::write(dir.path().join("CLAUDE.md"), &big).unwrap();
        let p = default_prompt(&PromptContext {
            cwd: dir.path(),
            tools: &[],
            date: "2026-11-22",
            home: None,
        });
        assert!(p.contains("it was cut here"), "the model is told");
        assert!(!p.contains(&big), "the whole file is not in the prompt");
        let m = read_memory(dir.path(), None);
        assert!(m.warnings[0].contains("only its first"), "{:?}", m.warnings);
    }
}
