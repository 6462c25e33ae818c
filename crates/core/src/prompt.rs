//! keel's system prompt, in its own words, plus the memory files a user already keeps.

use std::path::{Path, PathBuf};

use keel_model::ToolSpec;

/// Memory files that apply to `cwd`: `~/.claude/CLAUDE.md`, then `CLAUDE.md` (and
/// `.claude/CLAUDE.md`) in every directory from the filesystem root down to `cwd`.
pub fn memory_files(cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(home) = home {
        let p = home.join(".claude").join("CLAUDE.md");
        if p.is_file() {
            out.push(p);
        }
    }
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for d in dirs {
        for p in [d.join("CLAUDE.md"), d.join(".claude").join("CLAUDE.md")] {
            if p.is_file() && !out.contains(&p) {
                out.push(p);
            }
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
    let memory = memory_files(cx.cwd, cx.home);
    if !memory.is_empty() {
        s.push_str(
            "\n# Project and user instructions\nThe user keeps these notes for you; follow them.\n",
        );
        for p in memory {
            match std::fs::read_to_string(&p) {
                Ok(text) => {
                    s.push_str(&format!("\n## {}\n{}\n", p.display(), text.trim_end()));
                }
                Err(e) => tracing::warn!("could not read memory file {}: {e}", p.display()),
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
