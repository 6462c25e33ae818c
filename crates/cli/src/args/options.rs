//! The flags as a [`SessionOptions`]: every flag whose value is a closed set or a number is
//! parsed here, once, into keel-core's types (their `FromStr` impls name the flag and the value
//! in the error), so the engine never reads a flag's text.

use keel_core::builder::options::{
    parse_permission_mode, parse_provider, parse_rules, FlagUuid, OptionError, SessionOptions,
    UsdBudget,
};

use super::Cli;

/// The options the flags ask for, or the first flag value keel cannot use (a usage error:
/// printed as `Error: …`, exit 2).
pub fn session_options(cli: &Cli) -> Result<SessionOptions, OptionError> {
    let c = &cli.compat;
    Ok(SessionOptions {
        model: cli.model.clone(),
        fallback_model: cli.fallback_model.clone(),
        provider: cli
            .provider
            .as_deref()
            .map(parse_provider)
            .transpose()?
            .flatten(),
        // clap checked the range (1 and up).
        max_turns: cli.max_turns.and_then(std::num::NonZeroU32::new),
        max_budget_usd: cli.max_budget_usd.map(UsdBudget::new).transpose()?,
        permission_mode: cli
            .permission_mode
            .as_deref()
            .map(parse_permission_mode)
            .transpose()?,
        skip_permissions: cli.dangerously_skip_permissions,
        allow_skip_permissions: c.allow_dangerously_skip_permissions,
        allowed_tools: parse_rules(&cli.allowed_tools)?,
        disallowed_tools: parse_rules(&cli.disallowed_tools)?,
        system_prompt: cli.system_prompt.clone(),
        system_prompt_file: cli.system_prompt_file.clone(),
        append_system_prompt: cli.append_system_prompt.clone(),
        tools: cli
            .tools
            .as_deref()
            .map(str::parse)
            .transpose()?
            .unwrap_or_default(),
        include_partial_messages: cli.include_partial_messages,
        include_hook_events: c.include_hook_events,
        resume: cli.resume.clone(),
        continue_session: cli.continue_session,
        fork_session: cli.fork_session,
        session_id: cli
            .session_id
            .as_deref()
            .map(FlagUuid::session_id)
            .transpose()?,
        no_session_persistence: c.no_session_persistence,
        settings: c.settings.clone(),
        mcp_config: c.mcp_config.clone(),
        strict_mcp_config: c.strict_mcp_config,
        setting_sources: c
            .setting_sources
            .as_deref()
            .map(str::parse)
            .transpose()?
            .unwrap_or_default(),
        agents: c.agents.clone(),
        add_dirs: c.add_dir.clone(),
        sandbox: c.sandbox,
        sandbox_network: c.sandbox_network,
        max_thinking_tokens: c
            .max_thinking_tokens
            .as_deref()
            .map(str::parse)
            .transpose()?,
        thinking: c.thinking.as_deref().map(str::parse).transpose()?,
        json_schema: c.json_schema.clone(),
        mirror: None,
        resume_session_at: cli
            .resume_session_at
            .as_deref()
            .map(|v| FlagUuid::message("--resume-session-at", v))
            .transpose()?,
        resume_drops_turn: cli
            .resume_drops_turn
            .as_deref()
            .map(|v| FlagUuid::message("--resume-drops-turn", v))
            .transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use keel_core::builder::options::{SettingSource, ThinkingMode, ToolSet};
    use keel_core::permissions::PermissionMode;

    fn parse(args: &[&str]) -> Result<SessionOptions, String> {
        let cli = Cli::try_parse_from(std::iter::once("keel").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        session_options(&cli).map_err(|e| e.to_string())
    }

    #[test]
    fn flags_become_typed_options() {
        let o = parse(&[
            "--permission-mode",
            "plan",
            "--tools",
            "Bash,Read",
            "--allowedTools",
            "Bash(git status:*) Read",
            "--thinking",
            "adaptive",
            "--max-thinking-tokens",
            "4096",
            "--max-budget-usd",
            "0.25",
            "--setting-sources",
            "user",
            "--provider",
            "openai",
            "--max-turns",
            "3",
        ])
        .unwrap();
        assert_eq!(o.permission_mode, Some(PermissionMode::Plan));
        assert!(o.tools.offers("Read") && !o.tools.offers("Write"));
        assert_eq!(o.allowed_tools.len(), 2);
        assert_eq!(o.thinking, Some(ThinkingMode::Adaptive));
        assert_eq!(o.max_thinking_tokens.and_then(|b| b.tokens()), Some(4096));
        assert_eq!(o.max_budget_usd.map(|b| b.dollars()), Some(0.25));
        assert!(o.setting_sources.contains(SettingSource::User));
        assert!(!o.setting_sources.contains(SettingSource::Project));
        assert!(o.provider.is_some());
        assert_eq!(o.max_turns.map(|n| n.get()), Some(3));
        let plain = parse(&[]).unwrap();
        assert_eq!(plain.tools, ToolSet::All);
        assert!(plain.setting_sources.contains(SettingSource::Local));
        assert_eq!(parse(&["--provider", ""]).unwrap().provider, None);
    }

    #[test]
    fn a_bad_value_names_its_flag() {
        for (args, needle) in [
            (
                &["--permission-mode", "yolo"][..],
                "--permission-mode \"yolo\"",
            ),
            (&["--tools", "Bash,Nope"][..], "--tools names \"Nope\""),
            (&["--thinking", "maybe"][..], "--thinking \"maybe\""),
            (
                &["--max-thinking-tokens", "12"][..],
                "--max-thinking-tokens \"12\"",
            ),
            (
                &["--max-budget-usd", "0"][..],
                "--max-budget-usd must be a positive",
            ),
            (
                &["--setting-sources", "user,team"][..],
                "--setting-sources names \"team\"",
            ),
            (&["--provider", "gemini"][..], "the provider \"gemini\""),
            (&["--disallowedTools", "Bash(rm"][..], "Bash(rm"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
