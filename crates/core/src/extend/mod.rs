//! What users add to keel as files: skills (`.claude/skills/<name>/SKILL.md`) and custom
//! slash commands (`.claude/commands/*.md`), from the project and from the user's config
//! directory. Loaded once when a session is built, for every front end alike (`-p`,
//! stream-json and the SDKs, the interactive UI).
//!
//! These files are repository input: each is read bounded, as a regular file whose real path
//! stays inside the directory tree it belongs to (a link out of the project is refused). A file
//! keel cannot use is an error naming the file and the field; the session goes on without it,
//! and the capability account lists it.

pub mod commands;
pub mod frontmatter;
pub(crate) mod skill_tool;
pub mod skills;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use keel_protocol::ContentBlock;
use keel_tools::repofile::{read_repo_file, Confine, RepoFileError, RepoRead};
use serde_json::{json, Value};

pub use commands::{Command, Expanded};
pub use skills::Skill;

/// The most bytes of one skill or command file.
pub const FILE_LIMIT: u64 = 256 << 10;
/// The most entries keel looks at in one skills or commands directory.
pub const MAX_ENTRIES: usize = 500;

/// Whose a file is: the project's (repository input) or the user's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `<cwd>/.claude/...`.
    Project,
    /// `~/.claude/...`.
    User,
}

impl Scope {
    /// `project` or `user`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

/// A skill or command file keel could not use.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// It could not be read (too large, not a regular file, a link leading outside, ...).
    #[error("{0}")]
    Read(#[from] RepoFileError),
    /// Its header or one of its fields is wrong.
    #[error("{path}: field `{field}`: {problem}")]
    Field {
        /// The file.
        path: PathBuf,
        /// The field (or `front matter` for the header as a whole).
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// Its directory holds more entries than keel reads.
    #[error("{path}: more than {MAX_ENTRIES} entries; the rest were not loaded")]
    TooMany {
        /// The directory.
        path: PathBuf,
    },
}

impl LoadError {
    pub(crate) fn field(path: &Path, field: &str, problem: impl Into<String>) -> Self {
        LoadError::Field {
            path: path.to_owned(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}

/// A skill or command file hidden by an earlier one of the same name: the project's file wins
/// over the user's (as in Claude Code), and the user is told which two files collide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shadowed {
    /// `skill` or `command`.
    pub kind: &'static str,
    /// The name both files give.
    pub name: String,
    /// The file that is used.
    pub kept: PathBuf,
    /// The file that is not.
    pub hidden: PathBuf,
}

impl Shadowed {
    /// The warning the session starts with.
    pub fn warning(&self) -> String {
        format!(
            "the {} {:?} of {} hides the one of {}; only the first is used (rename one of them to keep both)",
            self.kind,
            self.name,
            self.kept.display(),
            self.hidden.display()
        )
    }
}

/// Where one scope's files are, and the tree they must really live in.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    pub scope: Scope,
    /// `.claude` of the project or the user.
    pub dir: PathBuf,
    /// A file's real path must be inside this (the project, or the user's home).
    pub root: PathBuf,
    pub home: Option<PathBuf>,
}

impl Place {
    /// The project's then the user's. `user_dir` is the user's config directory as the builder
    /// resolves it (`$CLAUDE_CONFIG_DIR`, else `~/.claude`: [`crate::builder::user_config_dir`]);
    /// `None` falls back to `~/.claude`.
    pub(crate) fn all(cwd: &Path, home: Option<&Path>, user_dir: Option<&Path>) -> Vec<Place> {
        let mut out = vec![Place {
            scope: Scope::Project,
            dir: cwd.join(".claude"),
            root: keel_tools::kpath::kernel_path(cwd).unwrap_or_else(|_| cwd.to_owned()),
            home: home.map(Path::to_path_buf),
        }];
        let dir = user_dir
            .map(Path::to_path_buf)
            .or_else(|| home.map(|h| h.join(".claude")));
        if let Some(dir) = dir {
            // Files may lead anywhere in the user's home (dotfiles kept elsewhere and linked);
            // a config directory outside it confines them to itself.
            let tree = match home {
                Some(h) if dir.starts_with(h) => h.to_owned(),
                _ => dir.clone(),
            };
            out.push(Place {
                scope: Scope::User,
                root: keel_tools::kpath::kernel_path(&tree).unwrap_or(tree),
                dir,
                home: home.map(Path::to_path_buf),
            });
        }
        out
    }

    /// Read one file of this place: bounded, regular, confined to its tree.
    pub(crate) fn read(&self, path: &Path) -> Result<String, RepoFileError> {
        let roots = [self.root.clone()];
        let how = RepoRead {
            limit: FILE_LIMIT,
            over: keel_tools::repofile::OverLimit::Fail,
            confine: Some(Confine {
                roots: &roots,
                home: self.home.as_deref(),
            }),
        };
        read_repo_file(path, &how).map(|f| f.text)
    }
}

/// A directory's entries, sorted, at most [`MAX_ENTRIES`] (an error says when there were
/// more). A directory that does not exist has none.
pub(crate) fn entries(dir: &Path, errors: &mut Vec<LoadError>) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        if out.len() == MAX_ENTRIES {
            errors.push(LoadError::TooMany {
                path: dir.to_owned(),
            });
            break;
        }
        out.push(e.path());
    }
    out.sort();
    out
}

/// The skills and commands of a session, with what could not be loaded.
#[derive(Debug, Default)]
pub struct Extensions {
    /// Skills, the project's first; a name is taken by its first definition.
    pub skills: Vec<Skill>,
    /// Commands, the project's first; a name is taken by its first definition.
    pub commands: Vec<Command>,
    /// Files that could not be used, worded for the user.
    pub skill_errors: Vec<String>,
    /// Command files that could not be used.
    pub command_errors: Vec<String>,
    /// Files hidden by another of the same name.
    pub shadowed: Vec<Shadowed>,
    /// Skill texts loaded by the Skill tool and not yet given to the model.
    pending: Mutex<Vec<String>>,
    /// Where the files were found (read again on use).
    places: Vec<Place>,
}

impl Extensions {
    /// Load the skills and commands of `cwd` and of the user whose home is `home`, from the
    /// scopes `--setting-sources` names (`project` and `user` count here).
    pub fn load(
        cwd: &Path,
        home: Option<&Path>,
        user_dir: Option<&Path>,
        sources: crate::setting_sources::SettingSources,
    ) -> Self {
        let wants = |scope: Scope| {
            sources.contains(match scope {
                Scope::Project => crate::setting_sources::SettingSource::Project,
                Scope::User => crate::setting_sources::SettingSource::User,
            })
        };
        let places: Vec<Place> = Place::all(cwd, home, user_dir)
            .into_iter()
            .filter(|p| wants(p.scope))
            .collect();
        let mut shadowed = Vec::new();
        let (skills, skill_errors) = skills::load(&places, &mut shadowed);
        let (commands, command_errors) = commands::load(&places, &mut shadowed);
        Self {
            shadowed,
            skills,
            commands,
            skill_errors: skill_errors.iter().map(ToString::to_string).collect(),
            command_errors: command_errors.iter().map(ToString::to_string).collect(),
            pending: Mutex::new(Vec::new()),
            places,
        }
    }

    /// The text the model gets when it loads the skill `name` with `args`.
    pub fn skill_text(&self, name: &str, args: &str) -> Option<Result<String, LoadError>> {
        self.skill(name).map(|s| s.load_text(&self.places, args))
    }

    /// A prompt whose first block is `/name args` naming a custom command, expanded; `None`
    /// for any other prompt (an unknown `/word` is left as it is).
    pub fn expand(&self, prompt: &[ContentBlock]) -> Option<Result<Expanded, LoadError>> {
        let Some(ContentBlock::Text(t)) = prompt.first() else {
            return None;
        };
        let (name, args) = commands::split_invocation(&t.text)?;
        let command = self.command(name)?;
        Some(command.expand(&self.places, args))
    }

    /// The skill called `name`.
    pub fn skill(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// The command called `name`.
    pub fn command(&self, name: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// What `system/init` lists as `skills`.
    pub fn skill_names(&self) -> Vec<Value> {
        self.skills.iter().map(|s| json!(s.name)).collect()
    }

    /// What `system/init` lists as `slash_commands`.
    pub fn command_names(&self) -> Vec<String> {
        self.commands.iter().map(|c| c.name.clone()).collect()
    }

    /// The commands as the control protocol's `initialize` answer lists them (what an SDK's
    /// supported-commands call returns).
    pub fn initialize_commands(&self) -> Vec<Value> {
        self.commands
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "description": c.description.clone().unwrap_or_default(),
                    "argumentHint": c.argument_hint.clone().unwrap_or_default(),
                    "builtin": false,
                })
            })
            .collect()
    }

    /// The capability account's part: what was loaded from where (and, for a command, the
    /// model its `model:` field runs its turn on), what was hidden by a file of the same
    /// name, and what was not loaded.
    pub fn account(&self) -> Value {
        let shadowed = |kind: &str| -> Vec<Value> {
            self.shadowed
                .iter()
                .filter(|s| s.kind == kind)
                .map(|s| json!({"name": s.name, "used": s.kept, "hidden": s.hidden}))
                .collect()
        };
        let skills: Vec<Value> = self
            .skills
            .iter()
            .map(|s| json!({"name": s.name, "scope": s.scope.as_str(), "path": s.path}))
            .collect();
        let commands: Vec<Value> = self
            .commands
            .iter()
            .map(|c| {
                let mut v = json!({"name": c.name, "scope": c.scope.as_str(), "path": c.path});
                if let Some(m) = &c.model {
                    v["model"] = json!(m);
                }
                v
            })
            .collect();
        json!({
            "skills": {
                "loaded": skills,
                "shadowed": shadowed("skill"),
                "errors": self.skill_errors,
            },
            "commands": {
                "loaded": commands,
                "shadowed": shadowed("command"),
                "errors": self.command_errors,
            },
        })
    }

    /// Warnings for the start of the session: one per file that could not be used, and one
    /// per file hidden by another of the same name (naming both).
    pub fn warnings(&self) -> Vec<String> {
        let skill = self
            .skill_errors
            .iter()
            .map(|e| format!("skill not loaded: {e}"));
        let command = self
            .command_errors
            .iter()
            .map(|e| format!("custom command not loaded: {e}"));
        let hidden = self.shadowed.iter().map(Shadowed::warning);
        skill.chain(command).chain(hidden).collect()
    }

    pub(crate) fn queue(&self, text: String) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(text);
    }

    /// Skill texts to give the model with the results of the calls that loaded them.
    pub(crate) fn take_pending(&self) -> Vec<String> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
