//! [`SessionOptions`]: what a session is asked to be, as typed values.
//!
//! Every option whose value is a closed set or a number has a type here (the permission mode,
//! the tool set and the rules, thinking, the budget, the setting sources, the provider); free
//! text (a model id, a system prompt, JSON documents, paths) stays a string. A front end parses
//! its flags into these types — through the `FromStr` impls and constructors below, whose
//! [`OptionError`] names the flag and the value it could not use — so the builder never parses
//! a flag's text again, and an embedder cannot hand it a value out of range.

use std::fmt;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::str::FromStr;

pub use keel_model::Provider;
use keel_tools::ToolKind;

pub use crate::setting_sources::{SettingSource, SettingSources, UnknownSettingSource};

use crate::agents;
use crate::permissions::{split_rule_list, PermissionMode, Rule, RuleError, RuleSource};

/// What a session is asked to be: the flags of `keel`, as typed values.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// The model (`--model`; else `KEEL_MODEL`, else `ANTHROPIC_MODEL`, else
    /// [`DEFAULT_MODEL`](super::DEFAULT_MODEL)).
    pub model: Option<String>,
    /// The provider (`--provider`; else the `provider` setting, else `KEEL_PROVIDER`); without
    /// one, a model string `provider/model` picks it, and others go to Anthropic.
    pub provider: Option<Provider>,
    /// Switched to after repeated overload (`--fallback-model`).
    pub fallback_model: Option<String>,
    /// Model calls per turn (`--max-turns`).
    pub max_turns: Option<NonZeroU32>,
    /// Dollars for the session (`--max-budget-usd`).
    pub max_budget_usd: Option<UsdBudget>,
    /// `--permission-mode` (else the settings' `defaultMode`).
    pub permission_mode: Option<PermissionMode>,
    /// `--dangerously-skip-permissions`: start in bypassPermissions.
    pub skip_permissions: bool,
    /// `--allow-dangerously-skip-permissions`: start in the mode asked for, but a host may
    /// switch to bypassPermissions later.
    pub allow_skip_permissions: bool,
    /// `--allowedTools` rules (see [`parse_rules`]).
    pub allowed_tools: Vec<Rule>,
    /// `--disallowedTools` rules.
    pub disallowed_tools: Vec<Rule>,
    /// `--system-prompt`.
    pub system_prompt: Option<String>,
    /// `--system-prompt-file`.
    pub system_prompt_file: Option<PathBuf>,
    /// `--append-system-prompt`.
    pub append_system_prompt: Option<String>,
    /// `--tools`: the built-in tools offered (default: all of them).
    pub tools: ToolSet,
    /// `--include-partial-messages`.
    pub include_partial_messages: bool,
    /// `--include-hook-events`: every settings hook gets `hook_started` / `hook_response`
    /// frames (SessionStart's always do).
    pub include_hook_events: bool,
    /// `--resume <id>`.
    pub resume: Option<String>,
    /// `--continue`.
    pub continue_session: bool,
    /// `--fork-session`.
    pub fork_session: bool,
    /// `--session-id`: the new session's id (see [`FlagUuid::session_id`]).
    pub session_id: Option<FlagUuid>,
    /// `--no-session-persistence`.
    pub no_session_persistence: bool,
    /// `--settings` (JSON or a file).
    pub settings: Option<String>,
    /// `--setting-sources`: which settings scopes are read (default: all three).
    pub setting_sources: SettingSources,
    /// `--agents` JSON.
    pub agents: Option<String>,
    /// `--add-dir` values.
    pub add_dirs: Vec<PathBuf>,
    /// `--sandbox`: run Bash commands in the OS sandbox (else the settings decide).
    pub sandbox: bool,
    /// `--sandbox-network`: sandboxed commands may use the network.
    pub sandbox_network: bool,
    /// `--max-thinking-tokens` (else `MAX_THINKING_TOKENS`): a thinking budget, or none.
    pub max_thinking_tokens: Option<ThinkingBudget>,
    /// `--mcp-config` values (JSON or files).
    pub mcp_config: Vec<String>,
    /// `--strict-mcp-config`: only the `--mcp-config` servers.
    pub strict_mcp_config: bool,
    /// `--thinking`: whether the model thinks (with the budget above, or a default one).
    pub thinking: Option<ThinkingMode>,
    /// `--json-schema`: the answer must be an object matching this JSON Schema.
    pub json_schema: Option<String>,
    /// `--session-mirror`: every line written to the session's transcripts (subagents'
    /// included) is also handed to this sink, after the local write.
    pub mirror: Option<crate::transcript::MirrorSink>,
    /// `--resume-session-at`: a fork's history ends at this message (with `--fork-session`).
    pub resume_session_at: Option<FlagUuid>,
    /// `--resume-drops-turn`: the prompt of the one turn the truncation may drop.
    pub resume_drops_turn: Option<FlagUuid>,
}

/// A flag value keel cannot use: which flag, the value given, and what the flag accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionError {
    /// `--permission-mode` names no mode.
    #[error(
        "--permission-mode {value:?} is not a mode; use one of {}",
        mode_names()
    )]
    PermissionMode {
        /// The value given.
        value: String,
    },
    /// `--allowedTools` / `--disallowedTools` holds a rule that cannot be read.
    #[error("{0}")]
    Rule(#[from] RuleError),
    /// `--tools` names a tool keel does not have.
    #[error("--tools names {name:?}, which is not a keel tool; the tools are {}", tool_names().join(", "))]
    Tool {
        /// The name given.
        name: String,
    },
    /// `--thinking` is not one of its modes.
    #[error("--thinking {value:?} is not valid: expected enabled, adaptive or disabled")]
    Thinking {
        /// The value given (trimmed).
        value: String,
    },
    /// `--max-thinking-tokens` is not a budget keel can send.
    #[error(
        "--max-thinking-tokens {value:?} is not valid: expected 0 (no thinking) or a whole number from {} to {} (below the output limit)",
        MIN_THINKING_TOKENS,
        ThinkingBudget::max_tokens()
    )]
    ThinkingBudget {
        /// The value given.
        value: String,
    },
    /// `--max-budget-usd` is not a positive number of dollars.
    #[error("--max-budget-usd must be a positive number of dollars, got {value}")]
    Budget {
        /// The value given.
        value: f64,
    },
    /// `--setting-sources` names something that is not a settings scope.
    #[error("{0}")]
    SettingSource(#[from] UnknownSettingSource),
    /// `--session-id` is not a UUID.
    #[error(
        "--session-id must be a UUID (like 123e4567-e89b-12d3-a456-426614174000), got {value:?}"
    )]
    SessionId {
        /// The value given.
        value: String,
    },
    /// `--resume-session-at` / `--resume-drops-turn` is not a message's uuid.
    #[error("{flag} must be the uuid of a message of the session (as stream-json frames carry it), got {value:?}")]
    MessageUuid {
        /// The flag.
        flag: &'static str,
        /// The value given.
        value: String,
    },
    /// `--provider` names an API keel does not speak.
    #[error(
        "--provider names the provider {value:?}, which keel does not speak; it speaks {}",
        Provider::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
    )]
    Provider {
        /// The name given.
        value: String,
    },
}

fn mode_names() -> String {
    let all: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.as_str()).collect();
    all.join(", ")
}

/// `--permission-mode`'s value as a mode.
pub fn parse_permission_mode(value: &str) -> Result<PermissionMode, OptionError> {
    PermissionMode::parse(value).ok_or_else(|| OptionError::PermissionMode {
        value: value.to_owned(),
    })
}

/// `--provider`'s value: `None` for an empty one (as if the flag were not given).
pub fn parse_provider(value: &str) -> Result<Option<Provider>, OptionError> {
    if value.trim().is_empty() {
        return Ok(None);
    }
    Provider::parse(value)
        .map(Some)
        .ok_or_else(|| OptionError::Provider {
            value: value.to_owned(),
        })
}

/// The rules of `--allowedTools` / `--disallowedTools` values: each value may hold several,
/// separated by commas or spaces (`"Bash(git status:*) Read"`).
pub fn parse_rules<S: AsRef<str>>(values: &[S]) -> Result<Vec<Rule>, OptionError> {
    values
        .iter()
        .flat_map(|v| split_rule_list(v.as_ref()))
        .map(|r| Rule::parse(&r, RuleSource::Flag).map_err(OptionError::from))
        .collect()
}

/// A UUID given in a flag (`--session-id`, `--resume-session-at`, `--resume-drops-turn`):
/// checked, and kept as it was written (trimmed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagUuid(String);

impl FlagUuid {
    /// `--session-id`'s value.
    pub fn session_id(value: &str) -> Result<Self, OptionError> {
        Self::check(value).ok_or_else(|| OptionError::SessionId {
            value: value.to_owned(),
        })
    }

    /// The uuid of a message, given in `flag` (`--resume-session-at`, `--resume-drops-turn`).
    pub fn message(flag: &'static str, value: &str) -> Result<Self, OptionError> {
        Self::check(value).ok_or_else(|| OptionError::MessageUuid {
            flag,
            value: value.to_owned(),
        })
    }

    fn check(value: &str) -> Option<Self> {
        let value = value.trim();
        uuid::Uuid::parse_str(value)
            .ok()
            .map(|_| FlagUuid(value.to_owned()))
    }

    /// As it was written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// In the hyphenated lowercase form stream-json frames carry.
    pub fn hyphenated(&self) -> String {
        uuid::Uuid::parse_str(&self.0)
            .map(|u| u.hyphenated().to_string())
            .unwrap_or_else(|_| self.0.clone())
    }
}

/// The built-in tools a session offers (`--tools`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolSet {
    /// Every built-in tool (no `--tools`, or `--tools default`).
    #[default]
    All,
    /// Only these (`--tools ""` offers none). Each is a tool keel has: see [`ToolSet::only`].
    Only(Vec<ToolName>),
}

impl ToolSet {
    /// No built-in tool at all (an embedder that brings its own).
    pub fn none() -> Self {
        ToolSet::Only(Vec::new())
    }

    /// Only the tools named (each checked).
    pub fn only<S: AsRef<str>>(names: &[S]) -> Result<Self, OptionError> {
        names
            .iter()
            .map(|n| n.as_ref().parse())
            .collect::<Result<_, _>>()
            .map(ToolSet::Only)
    }

    /// Whether the tool `name` is offered.
    pub fn offers(&self, name: &str) -> bool {
        match self {
            ToolSet::All => true,
            ToolSet::Only(names) => names.iter().any(|n| n.as_str() == name),
        }
    }
}

impl FromStr for ToolSet {
    type Err = OptionError;

    /// `default` is every tool; anything else is a list of names (commas or spaces between).
    fn from_str(spec: &str) -> Result<Self, OptionError> {
        let spec = spec.trim();
        if spec == "default" {
            return Ok(ToolSet::All);
        }
        ToolSet::only(&split_rule_list(spec))
    }
}

/// The name of a tool keel has: a built-in tool, an agent tool, a web tool or `Skill`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolName(String);

impl ToolName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ToolName {
    type Err = OptionError;

    fn from_str(name: &str) -> Result<Self, OptionError> {
        let name = name.trim();
        let known = keel_tools::builtin_tools().iter().any(|t| t.name() == name)
            || agents::AGENT_TOOLS
                .iter()
                .any(|k| agents::agent_tool_name(*k) == name)
            || name == crate::extend::skill_tool::SKILL_TOOL
            || crate::web::WEB_TOOLS
                .iter()
                .any(|k: &ToolKind| k.canonical_name() == name);
        if known {
            Ok(ToolName(name.to_owned()))
        } else {
            Err(OptionError::Tool {
                name: name.to_owned(),
            })
        }
    }
}

/// The tools `--tools` may name, as an error lists them.
fn tool_names() -> Vec<String> {
    let mut names: Vec<String> = keel_tools::builtin_tools()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    names.extend(
        agents::AGENT_TOOLS
            .iter()
            .map(|k| agents::agent_tool_name(*k).to_owned()),
    );
    names.extend(
        crate::web::WEB_TOOLS
            .iter()
            .map(|k| k.canonical_name().to_owned()),
    );
    names
}

/// `--thinking`: whether the model thinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkingMode {
    /// Thinking on, with the budget given or a default one.
    Enabled,
    /// The same as `Enabled` for keel (the model decides how much of the budget to use).
    Adaptive,
    /// No thinking, whatever the budget says.
    Disabled,
}

impl FromStr for ThinkingMode {
    type Err = OptionError;

    fn from_str(value: &str) -> Result<Self, OptionError> {
        match value.trim() {
            "enabled" => Ok(ThinkingMode::Enabled),
            "adaptive" => Ok(ThinkingMode::Adaptive),
            "disabled" => Ok(ThinkingMode::Disabled),
            other => Err(OptionError::Thinking {
                value: other.to_owned(),
            }),
        }
    }
}

/// The smallest thinking budget the API takes.
pub const MIN_THINKING_TOKENS: u32 = 1024;

/// A thinking budget (`--max-thinking-tokens`): none, or a number of tokens from
/// [`MIN_THINKING_TOKENS`] to just below the output limit (the answer needs room beside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinkingBudget(Option<NonZeroU32>);

impl ThinkingBudget {
    /// No thinking (`0`).
    pub const OFF: ThinkingBudget = ThinkingBudget(None);

    /// A budget of `tokens` (0: no thinking); `None` when it is out of range.
    pub fn new(tokens: u64) -> Option<Self> {
        if tokens == 0 {
            return Some(Self::OFF);
        }
        let n = u32::try_from(tokens).ok()?;
        (MIN_THINKING_TOKENS..=Self::max_tokens())
            .contains(&n)
            .then(|| ThinkingBudget(NonZeroU32::new(n)))
    }

    /// The tokens, or `None` for no thinking.
    pub fn tokens(self) -> Option<u32> {
        self.0.map(NonZeroU32::get)
    }

    /// The largest budget: one below the output limit of a request.
    pub fn max_tokens() -> u32 {
        crate::context::Limits::default()
            .max_tokens
            .saturating_sub(1)
    }
}

impl FromStr for ThinkingBudget {
    type Err = OptionError;

    fn from_str(value: &str) -> Result<Self, OptionError> {
        value
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(ThinkingBudget::new)
            .ok_or_else(|| OptionError::ThinkingBudget {
                value: value.to_owned(),
            })
    }
}

/// A spending limit in US dollars (`--max-budget-usd`): finite and above zero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsdBudget(f64);

impl UsdBudget {
    /// A budget of `dollars`, if it is a positive, finite number.
    pub fn new(dollars: f64) -> Result<Self, OptionError> {
        if dollars.is_finite() && dollars > 0.0 {
            Ok(UsdBudget(dollars))
        } else {
            Err(OptionError::Budget { value: dollars })
        }
    }

    /// The dollars.
    pub fn dollars(self) -> f64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_sets_parse_as_the_flag_reads() {
        assert_eq!("default".parse::<ToolSet>(), Ok(ToolSet::All));
        assert_eq!(" default ".parse::<ToolSet>(), Ok(ToolSet::All));
        assert_eq!("".parse::<ToolSet>(), Ok(ToolSet::none()));
        let some: ToolSet = "Bash, Read Task".parse().unwrap();
        assert!(some.offers("Bash") && some.offers("Read") && some.offers("Task"));
        assert!(!some.offers("Write"));
        let err = "Bash,Telepathy".parse::<ToolSet>().unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "--tools names \"Telepathy\", which is not a keel tool; the tools are "
            ),
            "{text}"
        );
        assert!(text.contains("Bash") && text.contains("WebFetch"), "{text}");
    }

    #[test]
    fn thinking_budgets_are_range_checked() {
        assert_eq!("0".parse::<ThinkingBudget>(), Ok(ThinkingBudget::OFF));
        assert_eq!(
            "2048".parse::<ThinkingBudget>().map(|b| b.tokens()),
            Ok(Some(2048))
        );
        assert_eq!(
            " 1024 ".parse::<ThinkingBudget>().map(|b| b.tokens()),
            Ok(Some(1024))
        );
        let most = ThinkingBudget::max_tokens();
        assert_eq!(
            ThinkingBudget::new(u64::from(most)).and_then(|b| b.tokens()),
            Some(most)
        );
        for bad in ["12", "1023", "-1", "lots", "99999999999"] {
            let err = bad.parse::<ThinkingBudget>().unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("--max-thinking-tokens {bad:?} is not valid")),
                "{err}"
            );
        }
        assert!(ThinkingBudget::new(u64::from(most) + 1).is_none());
        assert_eq!(
            " adaptive".parse::<ThinkingMode>(),
            Ok(ThinkingMode::Adaptive)
        );
        assert_eq!(
            "sometimes".parse::<ThinkingMode>().unwrap_err().to_string(),
            "--thinking \"sometimes\" is not valid: expected enabled, adaptive or disabled"
        );
    }

    #[test]
    fn setting_sources_are_a_set_of_three() {
        assert_eq!("".parse::<SettingSources>(), Ok(SettingSources::NONE));
        let s: SettingSources = "project, user,".parse().unwrap();
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            [SettingSource::User, SettingSource::Project]
        );
        assert_eq!(
            "user,global"
                .parse::<SettingSources>()
                .unwrap_err()
                .to_string(),
            "--setting-sources names \"global\"; the sources are user, project and local"
        );
        assert_eq!(
            SettingSources::default().without(SettingSource::Local),
            "user,project".parse().unwrap()
        );
    }

    #[test]
    fn modes_budgets_providers_and_rules_name_the_flag() {
        assert_eq!(parse_permission_mode("plan"), Ok(PermissionMode::Plan));
        let err = parse_permission_mode("yolo").unwrap_err().to_string();
        assert!(
            err.starts_with("--permission-mode \"yolo\" is not a mode; use one of acceptEdits,"),
            "{err}"
        );
        assert!(UsdBudget::new(0.5).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(UsdBudget::new(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_provider(" "), Ok(None));
        assert_eq!(parse_provider("openai"), Ok(Some(Provider::OpenAi)));
        assert!(parse_provider("gemini")
            .unwrap_err()
            .to_string()
            .contains("\"gemini\""));
        let id = FlagUuid::session_id(" 123E4567-E89B-12D3-A456-426614174000 ").unwrap();
        assert_eq!(id.as_str(), "123E4567-E89B-12D3-A456-426614174000");
        assert_eq!(id.hyphenated(), "123e4567-e89b-12d3-a456-426614174000");
        assert!(FlagUuid::session_id("not-a-uuid")
            .unwrap_err()
            .to_string()
            .starts_with("--session-id must be a UUID"));
        assert_eq!(
            FlagUuid::message("--resume-drops-turn", "nope").unwrap_err().to_string(),
            "--resume-drops-turn must be the uuid of a message of the session (as stream-json frames carry it), got \"nope\""
        );
        let rules = parse_rules(&["Bash(git status:*) Read", "Write"]).unwrap();
        assert_eq!(rules.len(), 3);
        assert!(parse_rules(&["Bash(unclosed"]).is_err());
    }
}
