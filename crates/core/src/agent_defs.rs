//! Agent types the Task tool can start: built-in ones, markdown files with a front-matter
//! header (`~/.claude/agents/*.md`, `.claude/agents/*.md`), and `--agents '<json>'`.

use std::path::{Path, PathBuf};

use keel_tools::repofile::{read_repo_file, RepoFileError, RepoRead, REPO_FILE_LIMIT};
use serde_json::Value;

/// Where an agent type was defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentSource {
    /// Shipped with keel.
    Builtin,
    /// A markdown file.
    File(PathBuf),
    /// `--agents` on the command line (or an SDK's `initialize`).
    Flag,
}

/// One agent type.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentDef {
    /// The name the Task tool's `subagent_type` refers to.
    pub name: String,
    /// When to use it, for the model.
    pub description: String,
    /// Tools it may use (`None`: every tool of the parent).
    pub tools: Option<Vec<String>>,
    /// Only read-only calls may run (Explore, Plan).
    pub read_only: bool,
    /// The model (`None`: the parent's).
    pub model: Option<String>,
    /// Its system prompt.
    pub prompt: String,
    /// Its turn limit (`None`: the session's default for subagents).
    pub max_turns: Option<u32>,
    /// Where it came from.
    pub source: AgentSource,
}

const GENERAL_PROMPT: &str = "You are a keel subagent: another agent delegated one task to you. \
Work on that task alone, with the tools you have, until it is done or you cannot go further. \
Your final message is the only thing the delegating agent will read, so make it a complete, \
self-contained report: what you found or changed (with file paths), what you could not do, and why. \
Do not ask questions; nobody can answer them mid-task.";

const EXPLORE_PROMPT: &str = "You are a keel subagent for exploring a codebase: another agent wants facts \
about the code and will read only your final message. You can read and search but not change anything. \
Search broadly first (Glob, Grep), then read the files that matter. Answer with concrete findings: \
file paths, line numbers, names, and short quotes where they help. Say plainly what you did not find.";

const PLAN_PROMPT: &str = "You are a keel subagent for planning: another agent wants a plan for a change and \
will read only your final message. You can read and search but not change anything. Study the relevant \
code, then give a step-by-step plan: which files change and how, in what order, what could break, and how \
to check the result.";

/// Used when a custom agent's own prompt cannot be built.
pub const FALLBACK_PROMPT: &str = GENERAL_PROMPT;

fn builtins() -> Vec<AgentDef> {
    let ro = Some(vec![
        "Read".to_owned(),
        "Glob".to_owned(),
        "Grep".to_owned(),
        "Bash".to_owned(),
    ]);
    vec![
        AgentDef {
            name: "general-purpose".into(),
            description:
                "A capable agent for multi-step tasks: research, code changes, running commands."
                    .into(),
            tools: None,
            read_only: false,
            model: None,
            prompt: GENERAL_PROMPT.into(),
            max_turns: None,
            source: AgentSource::Builtin,
        },
        AgentDef {
            name: "Explore".into(),
            description: "Read-only: finds files, code and facts in the codebase quickly.".into(),
            tools: ro.clone(),
            read_only: true,
            model: None,
            prompt: EXPLORE_PROMPT.into(),
            max_turns: None,
            source: AgentSource::Builtin,
        },
        AgentDef {
            name: "Plan".into(),
            description:
                "Read-only: studies the code and proposes a step-by-step implementation plan."
                    .into(),
            tools: ro,
            read_only: true,
            model: None,
            prompt: PLAN_PROMPT.into(),
            max_turns: None,
            source: AgentSource::Builtin,
        },
    ]
}

/// The agent types of a session.
#[derive(Clone, Debug)]
pub struct AgentRegistry {
    agents: Vec<AgentDef>,
}

impl Default for AgentRegistry {
    fn default() -> Self {
        Self { agents: builtins() }
    }
}

impl AgentRegistry {
    /// Built-ins, then user files, then project files; a later definition of the same name
    /// replaces an earlier one. A broken file is returned as a warning (once, with its path);
    /// it never stops the session. (`--agents` JSON is the user's own flag: the builder parses
    /// it with [`parse_agents_json`] and refuses to start when it is wrong.)
    pub fn load(cwd: &Path, home: Option<&Path>) -> (Self, Vec<String>) {
        let mut reg = Self::default();
        let mut warnings = Vec::new();
        let mut dirs = Vec::new();
        if let Some(h) = home {
            dirs.push(h.join(".claude").join("agents"));
        }
        dirs.push(cwd.join(".claude").join("agents"));
        for dir in dirs {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "md"))
                .collect();
            files.sort();
            for f in files {
                match parse_agent_file(&f) {
                    Ok((def, warning)) => {
                        warnings.extend(warning);
                        reg.insert(def);
                    }
                    Err(w) => warnings.push(w.to_string()),
                }
            }
        }
        (reg, warnings)
    }

    /// Add or replace an agent type.
    pub fn insert(&mut self, def: AgentDef) {
        self.agents.retain(|a| a.name != def.name);
        self.agents.push(def);
    }

    /// The agent type called `name`.
    pub fn get(&self, name: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// Every agent type's name.
    pub fn names(&self) -> Vec<&str> {
        self.agents.iter().map(|a| a.name.as_str()).collect()
    }
}

/// Agent definitions (`--agents`, or an SDK host's `initialize`) that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentsError {
    /// The text is not JSON.
    #[error("--agents is not valid JSON: {0}")]
    NotJson(String),
    /// The JSON is not an object of definitions.
    #[error("--agents must be a JSON object mapping agent names to definitions")]
    NotAnObject,
    /// A definition lacks its prompt.
    #[error("--agents: agent {0:?} has no \"prompt\"")]
    NoPrompt(String),
    /// A field of a definition has the wrong shape or is out of range.
    #[error("--agents: agent {agent:?}: {what}")]
    BadField {
        /// The agent.
        agent: String,
        /// What is wrong, naming the field.
        what: &'static str,
    },
    /// `maxTurns` is not a whole number in range.
    #[error("--agents: agent {agent:?}: \"maxTurns\" must be a whole number from 1 to 100000, got {got}")]
    MaxTurns {
        /// The agent.
        agent: String,
        /// What it held.
        got: String,
    },
}

/// Parse `--agents '{"name": {"description", "prompt", "tools", "model"}}'`.
pub fn parse_agents_json(json: &str) -> Result<Vec<AgentDef>, AgentsError> {
    let v: Value = serde_json::from_str(json).map_err(|e| AgentsError::NotJson(e.to_string()))?;
    let obj = v.as_object().ok_or(AgentsError::NotAnObject)?;
    let mut out = Vec::new();
    for (name, d) in obj {
        let field = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_owned);
        let prompt = field("prompt").ok_or_else(|| AgentsError::NoPrompt(name.clone()))?;
        let tools = match d.get("tools") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            ),
            Some(Value::String(s)) => Some(split_list(s)),
            Some(_) => {
                return Err(AgentsError::BadField {
                    agent: name.clone(),
                    what: "\"tools\" must be a list of tool names",
                })
            }
        };
        out.push(AgentDef {
            name: name.clone(),
            description: field("description").unwrap_or_default(),
            tools,
            read_only: false,
            model: field("model").filter(|m| m != "inherit"),
            prompt,
            max_turns: match d.get("maxTurns").or_else(|| d.get("max_turns")) {
                None | Some(Value::Null) => None,
                Some(n) => Some(
                    n.as_u64()
                        .filter(|n| (1..=100_000).contains(n))
                        .map(|n| n as u32)
                        .ok_or_else(|| AgentsError::MaxTurns {
                            agent: name.clone(),
                            got: n.to_string(),
                        })?,
                ),
            },
            source: AgentSource::Flag,
        });
    }
    Ok(out)
}

fn split_list(s: &str) -> Vec<String> {
    s.trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|t| t.trim().trim_matches('"').trim_matches('\'').to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Why an agent file was skipped (the warning says so, naming the file).
#[derive(Debug, thiserror::Error)]
enum SkippedAgentFile {
    /// Not UTF-8.
    #[error("agent file {} is not UTF-8 text; skipped", .0.display())]
    NotText(std::path::PathBuf),
    /// Not a regular file inside the project, a pseudo-file, or too large.
    #[error("agent file skipped: {0}")]
    Unsafe(RepoFileError),
    /// No `---` front matter.
    #[error("agent file {} has no front matter (it must start with a line `---`); skipped", .0.display())]
    NoFrontMatter(std::path::PathBuf),
    /// The front matter names no agent.
    #[error("agent file {} has no `name:` in its front matter; skipped", .0.display())]
    NoName(std::path::PathBuf),
}

/// Parse one agent file. `Ok((def, warning))`: usable (maybe with the fallback prompt, and a
/// warning saying why); `Err(warning)`: skipped.
fn parse_agent_file(path: &Path) -> Result<(AgentDef, Option<String>), SkippedAgentFile> {
    let shown = path.display();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A repository's agent file is hostile input: a link to /dev/zero or a FIFO is skipped,
    // not read until memory runs out or a writer appears.
    let text = match read_repo_file(path, &RepoRead::bounded(REPO_FILE_LIMIT)) {
        Ok(f) => f.text,
        Err(RepoFileError::NotText { .. }) => {
            return Err(SkippedAgentFile::NotText(path.to_path_buf()))
        }
        Err(
            e @ (RepoFileError::NotRegular { .. }
            | RepoFileError::Pseudo { .. }
            | RepoFileError::TooLarge { .. }
            | RepoFileError::Outside { .. }),
        ) => return Err(SkippedAgentFile::Unsafe(e)),
        Err(e @ (RepoFileError::Missing { .. } | RepoFileError::Io { .. })) => {
            // The name is known from the file name: keep the agent with the default prompt.
            let def = file_def(
                stem,
                String::new(),
                None,
                None,
                FALLBACK_PROMPT.into(),
                path,
            );
            return Ok((def, Some(format!("agent file {shown} cannot be read ({e}); agent {:?} uses keel's default subagent prompt", def_name(path)))));
        }
    };
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err(SkippedAgentFile::NoFrontMatter(path.to_path_buf()));
    };
    let (header, body, closed) = split_front_matter(rest);
    let FrontMatter {
        name,
        description,
        tools,
        model,
        bad_line,
    } = parse_front_matter(header);
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Err(SkippedAgentFile::NoName(path.to_path_buf()));
    };
    if !closed || bad_line.is_some() || body.trim().is_empty() {
        let why = if !closed {
            "its front matter is not closed by a `---` line".to_owned()
        } else if let Some(l) = bad_line {
            format!("line {l} of its front matter is not `key: value`")
        } else {
            "it has no prompt after the front matter".to_owned()
        };
        let def = file_def(
            name.clone(),
            description,
            tools,
            model,
            FALLBACK_PROMPT.into(),
            path,
        );
        return Ok((
            def,
            Some(format!(
                "agent file {shown}: {why}; agent {name:?} uses keel's default subagent prompt"
            )),
        ));
    }
    Ok((
        file_def(
            name,
            description,
            tools,
            model,
            body.trim().to_owned(),
            path,
        ),
        None,
    ))
}

/// The front matter (after its opening `---`), the prompt after it, and whether a `---` line
/// closed it.
fn split_front_matter(rest: &str) -> (&str, &str, bool) {
    match rest.find("\n---") {
        Some(i) => {
            let after = &rest[i + 4..];
            (
                &rest[..i],
                after.split_once('\n').map(|(_, b)| b).unwrap_or(""),
                true,
            )
        }
        None => (rest, "", false),
    }
}

/// The fields of an agent file's front matter keel reads.
struct FrontMatter {
    name: Option<String>,
    description: String,
    tools: Option<Vec<String>>,
    /// None for `inherit` (the session's model).
    model: Option<String>,
    /// The first line (of the file, from 1) that is not `key: value`.
    bad_line: Option<usize>,
}

/// Reads `key: value` lines (blank and `#` lines skipped, quotes around values dropped).
fn parse_front_matter(header: &str) -> FrontMatter {
    let mut m = FrontMatter {
        name: None,
        description: String::new(),
        tools: None,
        model: None,
        bad_line: None,
    };
    for (i, line) in header.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            m.bad_line.get_or_insert(i + 2);
            continue;
        };
        let v = v.trim().trim_matches('"').trim_matches('\'').to_owned();
        match k.trim() {
            "name" => m.name = Some(v),
            "description" => m.description = v,
            "tools" => m.tools = Some(split_list(&v)),
            "model" => m.model = Some(v).filter(|x| x != "inherit" && !x.is_empty()),
            _ => {}
        }
    }
    m
}

fn def_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn file_def(
    name: String,
    description: String,
    tools: Option<Vec<String>>,
    model: Option<String>,
    prompt: String,
    path: &Path,
) -> AgentDef {
    AgentDef {
        name,
        description,
        tools,
        read_only: false,
        model,
        prompt,
        max_turns: None,
        source: AgentSource::File(path.to_path_buf()),
    }
}

/// Bounds on subagents.
#[derive(Clone, Debug)]
pub struct SubagentLimits {
    /// How deep subagents may nest (1: the main agent may start subagents, they may not).
    pub max_depth: u32,
    /// How many subagents may run at once (foreground and background together).
    pub max_concurrent: usize,
    /// Turn limit of a subagent whose type sets none.
    pub default_max_turns: Option<u32>,
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_concurrent: 4,
            default_max_turns: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_and_files_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join(".claude/agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(agents.join("reviewer.md"), "---\nname: reviewer\ndescription: Reviews\ntools: Read, Grep\nmodel: claude-haiku-4-5\n---\nReview the code.\n").unwrap();
        std::fs::write(
            agents.join("broken.md"),
            "---\nname: broken\nthis line has no colon\n---\nprompt\n",
        )
        .unwrap();
        std::fs::write(agents.join("junk.md"), "just some notes, no header\n").unwrap();
        let (mut reg, warnings) = AgentRegistry::load(dir.path(), None);
        for d in parse_agents_json(r#"{"fixer": {"description": "Fixes", "prompt": "Fix it."}}"#)
            .unwrap()
        {
            reg.insert(d);
        }
        let names = reg.names();
        for n in [
            "general-purpose",
            "Explore",
            "Plan",
            "reviewer",
            "broken",
            "fixer",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(!names.contains(&"junk"));
        let r = reg.get("reviewer").unwrap();
        assert_eq!(
            (r.tools.clone(), r.model.as_deref(), r.prompt.as_str()),
            (
                Some(vec!["Read".into(), "Grep".into()]),
                Some("claude-haiku-4-5"),
                "Review the code."
            )
        );
        assert_eq!(reg.get("broken").unwrap().prompt, FALLBACK_PROMPT);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings.iter().any(|w| w.contains("junk.md"))
                && warnings
                    .iter()
                    .any(|w| w.contains("broken.md") && w.contains("line 3"))
        );
        assert!(parse_agents_json("{not json")
            .unwrap_err()
            .to_string()
            .contains("--agents"));
        assert!(
            parse_agents_json(r#"{"a": {"prompt": "p", "maxTurns": 5000000000}}"#)
                .unwrap_err()
                .to_string()
                .contains("maxTurns")
        );
    }
}
