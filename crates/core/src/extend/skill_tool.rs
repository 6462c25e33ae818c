//! The `Skill` tool: the model loads a skill by name. Its result is a short confirmation; the
//! skill's directory and body reach the model as user content right after the results of the
//! reply's calls (see `Session::run_tools`), where instructions belong.

use std::sync::Arc;

use keel_tools::{BoxFuture, ToolContext, ToolKind, ToolOutcome, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::Extensions;

/// The tool's name.
pub const SKILL_TOOL: &str = "Skill";
/// The most bytes of the tool's description (the skills' listing included).
pub const LISTING_LIMIT: usize = 16 * 1024;

/// What the description says before it lists the skills.
const INTRO: &str = "Load a skill: a set of instructions (and files beside them) for a kind of \
task. When a task matches a skill's description, load it before starting the task, then follow \
what it says. The skill's text arrives in the next message. Skills available here:\n";

/// The Skill tool's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SkillInput {
    /// The skill's name, as listed.
    skill: String,
    /// Arguments for the skill (they replace `$ARGUMENTS` in it).
    args: Option<String>,
}

/// Loads a skill's instructions on demand.
pub(crate) struct SkillTool {
    ext: Arc<Extensions>,
    description: String,
}

impl SkillTool {
    /// The tool for the skills of `ext`; its description lists them (name and description).
    pub(crate) fn new(ext: Arc<Extensions>) -> Self {
        let mut description = String::from(INTRO);
        // Bounded: hundreds of long descriptions would crowd every request.
        let mut left = ext.skills.len();
        for s in &ext.skills {
            let line = format!("- {}: {}\n", s.name, s.description);
            if description.len() + line.len() > LISTING_LIMIT {
                description.push_str(&format!(
                    "({left} more skills are not listed here; load one by its exact name if the user names it.)\n"
                ));
                break;
            }
            description.push_str(&line);
            left -= 1;
        }
        Self { ext, description }
    }
}

impl TypedTool for SkillTool {
    type Input = SkillInput;
    const NAME: &'static str = SKILL_TOOL;
    const KIND: ToolKind = ToolKind::Skill;
    const DESCRIPTION: &'static str = INTRO;
    // It only adds text to the conversation, as memory files do.
    const READ_ONLY: bool = true;

    /// The introduction and the listing of this session's skills.
    fn describe(&self) -> &str {
        &self.description
    }

    fn run<'a>(&'a self, inp: SkillInput, _cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let name = inp.skill.trim().trim_start_matches('/');
            let args = inp.args.unwrap_or_default();
            match self.ext.skill_text(name, &args) {
                None => {
                    let known: Vec<&str> =
                        self.ext.skills.iter().map(|s| s.name.as_str()).collect();
                    ToolOutcome::failed(format!(
                        "There is no skill called {name:?}. The skills are: {}.",
                        known.join(", ")
                    ))
                }
                Some(Err(e)) => {
                    ToolOutcome::failed(format!("The skill {name:?} could not be loaded: {e}"))
                }
                Some(Ok(text)) => {
                    self.ext.queue(text);
                    ToolOutcome::Ok {
                        content: format!("Loaded the skill {name}; its instructions follow."),
                        meta: Some(json!({"success": true, "commandName": name})),
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_tools::Tool;

    #[test]
    fn the_listing_is_bounded_and_says_what_it_left_out() {
        let cwd = tempfile::tempdir().unwrap();
        for i in 0..100 {
            let dir = cwd.path().join(format!(".claude/skills/s{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            let text = format!("---\ndescription: {}\n---\nbody\n", "d".repeat(1000));
            std::fs::write(dir.join("SKILL.md"), text).unwrap();
        }
        let ext = Arc::new(Extensions::load(
            cwd.path(),
            None,
            None,
            crate::setting_sources::SettingSources::ALL,
        ));
        assert_eq!(ext.skills.len(), 100);
        let tool = SkillTool::new(ext);
        let d = tool.description();
        assert!(d.len() < LISTING_LIMIT + 200, "{}", d.len());
        assert!(d.contains("more skills are not listed here"), "{d}");
    }
}
