//! Custom slash commands: `.claude/commands/<name>.md` (and `<dir>/<name>.md`, called
//! `dir:name`) of the project and the user. A prompt `/name args` naming one is expanded by
//! the engine before the model sees it — in `-p`, in stream-json input (the SDKs) and in the
//! interactive UI alike. A `/word` that names no command is passed on unchanged.
//!
//! `allowed-tools` only ever narrows what the user's own policy allows: while the command's
//! turn runs, a call that would change something runs only if the list covers it. Only a
//! command file of the user's own (`~/.claude/commands`) may also pre-approve what it lists,
//! as the user's settings may; a repository's file never widens anything.

use std::path::{Path, PathBuf};

use keel_protocol::ContentBlock;

use super::frontmatter;
use super::{entries, LoadError, Place, Scope, Shadowed};
use keel_tools::ToolKind;
use serde_json::Value;

use crate::permissions::{
    split_rule_list, Decision, PermissionConfig, PermissionMode, Rule, RuleSource,
};

/// The longest command name (`dir:name` included).
pub const MAX_NAME: usize = 128;

/// One custom command.
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    /// `name`, or `dir:name` for a file in a subdirectory.
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// `argument-hint`.
    pub argument_hint: Option<String>,
    /// `allowed-tools`, as rules.
    pub allowed_tools: Option<Vec<Rule>>,
    /// `model`: the model of the command's turn.
    pub model: Option<String>,
    /// The file.
    pub path: PathBuf,
    /// The project's or the user's.
    pub scope: Scope,
}

fn valid_part(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !s.starts_with('.')
}

/// The commands of `places`, in order; a name is taken by its first definition, and each
/// later file of that name is recorded in `shadowed`.
pub(crate) fn load(
    places: &[Place],
    shadowed: &mut Vec<Shadowed>,
) -> (Vec<Command>, Vec<LoadError>) {
    let mut out: Vec<Command> = Vec::new();
    let mut errors = Vec::new();
    for place in places {
        let dir = place.dir.join("commands");
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for p in entries(&dir, &mut errors) {
            if p.is_dir() {
                // One level of namespaces: `frontend/review.md` is `/frontend:review`.
                let ns = p.file_name().map(|n| n.to_string_lossy().into_owned());
                for q in entries(&p, &mut errors) {
                    if let (Some(ns), Some(stem)) = (&ns, md_stem(&q)) {
                        files.push((format!("{ns}:{stem}"), q));
                    }
                }
            } else if let Some(stem) = md_stem(&p) {
                files.push((stem, p));
            }
        }
        for (name, path) in files {
            if let Some(kept) = out.iter().find(|c| c.name == name) {
                shadowed.push(Shadowed {
                    kind: "command",
                    name,
                    kept: kept.path.clone(),
                    hidden: path,
                });
                continue;
            }
            match read_command(place, name, path) {
                Ok(c) => out.push(c),
                Err(e) => errors.push(e),
            }
        }
    }
    (out, errors)
}

fn md_stem(p: &Path) -> Option<String> {
    if p.extension().is_none_or(|e| e != "md") {
        return None;
    }
    p.file_stem().map(|s| s.to_string_lossy().into_owned())
}

fn read_command(place: &Place, name: String, path: PathBuf) -> Result<Command, LoadError> {
    if name.len() > MAX_NAME || !name.split(':').all(valid_part) {
        return Err(LoadError::field(
            &path,
            "name",
            format!("{name:?} is not a command name (letters, digits, '-', '_' and '.')"),
        ));
    }
    let text = place.read(&path)?;
    let fm = frontmatter::parse(&text)
        .map_err(|e| LoadError::field(&path, "front matter", e.to_string()))?;
    let text_field = |k: &str| {
        fm.get(k)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let allowed_tools = match fm.get("allowed-tools") {
        None => None,
        Some(list) => Some(
            split_rule_list(list)
                .iter()
                .map(|r| {
                    Rule::parse(r, RuleSource::Settings(path.display().to_string()))
                        .map_err(|e| LoadError::field(&path, "allowed-tools", e.to_string()))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let model = text_field("model");
    if let Some(m) = &model {
        if m.len() > 200 || m.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(LoadError::field(
                &path,
                "model",
                format!("{m:?} is not a model name"),
            ));
        }
    }
    Ok(Command {
        name,
        description: text_field("description"),
        argument_hint: text_field("argument-hint"),
        allowed_tools,
        model,
        path,
        scope: place.scope,
    })
}

/// The command `name` of `cwd`'s project or of the user whose home is `home` and config
/// directory `user_dir` (what the interactive UI checks before it sends `/name args` on).
pub fn find(
    cwd: &Path,
    home: Option<&Path>,
    user_dir: Option<&Path>,
    name: &str,
) -> Option<Command> {
    let (all, _) = load(&Place::all(cwd, home, user_dir), &mut Vec::new());
    all.into_iter().find(|c| c.name == name)
}

/// A prompt that ran a custom command: what the model is given instead, and what the
/// command's turn is bound by.
#[derive(Clone, Debug)]
pub struct Expanded {
    /// The command.
    pub command: Command,
    /// Its arguments as typed.
    pub args: String,
    /// The blocks that replace the prompt's first block.
    pub blocks: Vec<ContentBlock>,
}

/// `/name args` → `(name, args)`, when `text` has that shape.
pub fn split_invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    (!name.is_empty() && !name.contains('/')).then(|| (name, rest[end..].trim()))
}

impl Command {
    /// The command run with `args`: a block naming it and its arguments, then its body
    /// (read again now, bounded and confined) with the arguments put in.
    pub(crate) fn expand(&self, places: &[Place], args: &str) -> Result<Expanded, LoadError> {
        let place = places
            .iter()
            .find(|p| p.scope == self.scope)
            .ok_or_else(|| LoadError::field(&self.path, "path", "its directory is gone"))?;
        let text = place.read(&self.path)?;
        let fm = frontmatter::parse(&text)
            .map_err(|e| LoadError::field(&self.path, "front matter", e.to_string()))?;
        let named = format!(
            "<command-name>/{}</command-name>\n<command-args>{args}</command-args>",
            self.name
        );
        Ok(Expanded {
            command: self.clone(),
            args: args.to_owned(),
            blocks: vec![
                ContentBlock::text(named),
                ContentBlock::text(frontmatter::substitute(fm.body.trim(), args)),
            ],
        })
    }
}

impl Expanded {
    /// A command file of the user's own pre-approves what its `allowed-tools` lists for its
    /// turn, as the user's settings would (deny and ask rules still win). A project's file
    /// adds nothing.
    pub(crate) fn widen_user(&self, perms: &mut PermissionConfig) {
        if let (Scope::User, Some(list)) = (self.command.scope, &self.command.allowed_tools) {
            perms.allow.extend(list.iter().cloned());
        }
    }

    /// Why a call is refused in this command's turn: with `allowed-tools`, a call that would
    /// change something must be covered by the list (reads keep working). `None`: the list
    /// does not stand in the way (the user's policy still decides).
    pub(crate) fn refuses(
        &self,
        perms: &PermissionConfig,
        tool: &str,
        kind: ToolKind,
        input: &Value,
        read_only: bool,
    ) -> Option<String> {
        let list = self.command.allowed_tools.as_ref()?;
        let only = PermissionConfig {
            mode: PermissionMode::Default,
            allow: list.clone(),
            deny: Vec::new(),
            ask: Vec::new(),
            roots: perms.roots.clone(),
        };
        match only.decide(tool, kind, input, read_only) {
            Decision::Allow(_) => None,
            _ => Some(format!(
                "{tool} was not run: this turn runs the custom command /{}, whose allowed-tools ({}) do not cover this call. Stay within them, or tell the user what else is needed.",
                self.command.name,
                list.iter().map(Rule::text).collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn loads_namespaces_fields_and_errors() {
        let cwd = tempfile::tempdir().unwrap();
        let c = cwd.path().join(".claude/commands");
        std::fs::create_dir_all(c.join("fe")).unwrap();
        std::fs::write(c.join("greet.md"), "---\ndescription: Greet\nargument-hint: NAME\nallowed-tools: Read, Bash(git status:*)\n---\nHello $1!\n").unwrap();
        std::fs::write(c.join("fe/review.md"), "Review $ARGUMENTS").unwrap();
        std::fs::write(c.join("broken.md"), "---\nallowed-tools: Bash(oops\n---\n").unwrap();
        std::fs::write(c.join("notes.txt"), "not a command").unwrap();
        let places = Place::all(cwd.path(), None, None);
        let (cmds, errors) = load(&places, &mut Vec::new());
        let names: Vec<&str> = cmds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["fe:review", "greet"]);
        assert_eq!(cmds[1].argument_hint.as_deref(), Some("NAME"));
        assert_eq!(cmds[1].allowed_tools.as_ref().map(Vec::len), Some(2));
        assert!(
            errors[0].to_string().contains("`allowed-tools`"),
            "{}",
            errors[0]
        );
        let e = cmds[1].expand(&places, "Bob").unwrap();
        assert_eq!(e.blocks[1], ContentBlock::text("Hello Bob!"));
        assert_eq!(
            split_invocation("/fe:review  a b"),
            Some(("fe:review", "a b"))
        );
        assert_eq!(split_invocation("/usr/bin/ls"), None);
        assert_eq!(split_invocation("hello"), None);
    }

    #[test]
    fn allowed_tools_cover_every_command_a_line_runs_and_never_widen_a_project() {
        let cwd = tempfile::tempdir().unwrap();
        let c = cwd.path().join(".claude/commands");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(
            c.join("st.md"),
            "---\nallowed-tools: Bash(git status:*)\n---\nx\n",
        )
        .unwrap();
        let places = Place::all(cwd.path(), None, None);
        let (cmds, _) = load(&places, &mut Vec::new());
        let x = cmds[0].expand(&places, "").unwrap();
        let mut perms = PermissionConfig::new(PermissionMode::Default, cwd.path());
        x.widen_user(&mut perms);
        assert!(perms.allow.is_empty(), "a project's list approves nothing");
        let bash = |c: &str| serde_json::json!({ "command": c });
        let refuses = |c: &str| x.refuses(&perms, "Bash", ToolKind::Bash, &bash(c), false);
        assert_eq!(refuses("git status --short"), None);
        assert!(
            refuses("git status && rm -rf src").is_some(),
            "the rm is not covered"
        );
        assert!(refuses("touch x").unwrap().contains("/st"));
        // Reads are not narrowed.
        assert_eq!(refuses("ls"), None);
    }
}
