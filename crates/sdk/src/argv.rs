//! Finding the CLI and building its command line.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::options::{Options, PromptMode};

/// The CLI looked up on `PATH` when `Options::cli_path` is not set.
pub const DEFAULT_CLI: &str = "keel";

/// The arguments for `mode`. `prompt` is only used (and required) by [`PromptMode::Argv`].
pub(crate) fn build_args(o: &Options, mode: PromptMode, prompt: Option<&str>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| (*s).to_owned()));
    // A prompt that starts with '-' would be read as a flag: send it after `--` instead.
    let prompt_after_dashes = match (mode, prompt) {
        (PromptMode::Argv, Some(p)) if p.starts_with('-') => {
            push(&["-p"]);
            Some(p)
        }
        (PromptMode::Argv, Some(p)) => {
            push(&["-p", p]);
            None
        }
        (PromptMode::Argv, None) => {
            push(&["-p"]);
            None
        }
        (PromptMode::StreamJson, _) => None,
    };
    push(&["--output-format", "stream-json", "--verbose"]);
    if let Some(m) = &o.model {
        push(&["--model", m]);
    }
    if let Some(n) = o.max_turns {
        push(&["--max-turns", &n.to_string()]);
    }
    if let Some(b) = o.max_budget_usd {
        push(&["--max-budget-usd", &b.to_string()]);
    }
    if !o.allowed_tools.is_empty() {
        push(&["--allowedTools", &o.allowed_tools.join(",")]);
    }
    if !o.disallowed_tools.is_empty() {
        push(&["--disallowedTools", &o.disallowed_tools.join(",")]);
    }
    if let Some(m) = &o.permission_mode {
        push(&["--permission-mode", m]);
    }
    if let Some(s) = &o.system_prompt {
        push(&["--system-prompt", s]);
    }
    if let Some(s) = &o.append_system_prompt {
        push(&["--append-system-prompt", s]);
    }
    if let Some(r) = &o.resume {
        // The equals form, so that a value starting with '-' cannot pass for a flag.
        push(&[&format!("--resume={r}")]);
    }
    if o.include_partial_messages {
        push(&["--include-partial-messages"]);
    }
    if o.can_use_tool.is_some() && mode == PromptMode::StreamJson {
        push(&["--permission-prompt-tool", "stdio"]);
    }
    for e in &o.extra_args {
        push(&[e]);
    }
    if mode == PromptMode::StreamJson {
        push(&["--input-format", "stream-json"]);
    }
    if let Some(p) = prompt_after_dashes {
        push(&["--", p]);
    }
    a
}

/// The executable to run: `Options::cli_path` (a bare name is looked up on `PATH`), else `keel`
/// on `PATH`.
pub(crate) fn resolve_cli(o: &Options) -> Result<PathBuf> {
    let wanted = o
        .cli_path
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CLI));
    if wanted.components().count() > 1 || wanted.is_absolute() {
        // A path: relative ones are taken from this process's directory, not the CLI's cwd.
        if wanted.is_absolute() {
            return Ok(wanted);
        }
        return Ok(std::env::current_dir()
            .map(|d| d.join(&wanted))
            .unwrap_or(wanted));
    }
    let path_var = o
        .env
        .get("PATH")
        .cloned()
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    find_on_path(&wanted, &path_var).ok_or(Error::CliNotFound { path: wanted })
}

fn find_on_path(name: &Path, path_var: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The command line as a shell would need it, for messages.
pub(crate) fn render_command(program: &Path, args: &[String]) -> String {
    let mut out = shell_quote(&program.to_string_lossy());
    for a in args {
        out.push(' ');
        out.push_str(&shell_quote(a));
    }
    out
}

fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if safe {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn stream_json_args_follow_the_sdk_order() {
        let o = Options {
            model: Some("m".into()),
            max_turns: Some(3),
            allowed_tools: vec!["Bash".into(), "Read".into()],
            resume: Some("-x".into()),
            can_use_tool: Some(crate::callbacks::can_use_tool(|_| async {
                Ok(crate::PermissionResult::allow())
            })),
            ..Options::default()
        };
        assert_eq!(
            build_args(&o, PromptMode::StreamJson, None),
            [
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "m",
                "--max-turns",
                "3",
                "--allowedTools",
                "Bash,Read",
                "--resume=-x",
                "--permission-prompt-tool",
                "stdio",
                "--input-format",
                "stream-json"
            ]
        );
    }

    #[test]
    fn argv_mode_puts_the_prompt_after_p_or_after_dashes() {
        let o = Options::default();
        assert_eq!(
            build_args(&o, PromptMode::Argv, Some("hi")),
            ["-p", "hi", "--output-format", "stream-json", "--verbose"]
        );
        assert_eq!(
            build_args(&o, PromptMode::Argv, Some("-rf")),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--",
                "-rf"
            ]
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(
            render_command(
                Path::new("/bin/keel"),
                &["-p".into(), "it's x".into(), "".into()]
            ),
            r#"/bin/keel -p 'it'\''s x' ''"#
        );
    }

    #[test]
    fn missing_default_cli_is_cli_not_found() {
        let mut o = Options::default();
        o.env
            .insert("PATH".into(), "/nonexistent-dir-for-keel-sdk".into());
        match resolve_cli(&o) {
            Err(Error::CliNotFound { path }) => assert_eq!(path, PathBuf::from("keel")),
            other => panic!("expected CliNotFound, got {other:?}"),
        }
    }
}
