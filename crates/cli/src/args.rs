//! Command-line flags: a compatible subset of `claude`'s headless flags, plus keel's own.

pub mod compat;
pub mod options;

use clap::{ArgAction, Parser, ValueEnum};

/// Output formats (`--output-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Only the final text.
    Text,
    /// One JSON object: the result (with --verbose: an array of every frame).
    Json,
    /// One JSON frame per line, as they happen.
    #[value(name = "stream-json")]
    StreamJson,
}

/// Input formats (`--input-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    /// The prompt is the argument or stdin as plain text.
    Text,
    /// NDJSON user messages and control frames on stdin.
    #[value(name = "stream-json")]
    StreamJson,
}

/// keel: a coding agent you can run headless, script, and trust to say how it ended.
#[derive(Debug, Parser)]
#[command(
    name = "keel",
    disable_version_flag = true,
    about = "keel — a coding-agent runtime. Runs a prompt against a model, lets the model use tools in the working directory, and reports exactly how the run ended.",
    after_help = "Without -p, on a terminal, keel is interactive: `keel [PROMPT]` (Esc stops a turn, /help lists keys and commands).\n\nSubcommands:\n  keel demo        run a complete session offline against a scripted model (no API key needed)\n  keel sessions    list this directory's sessions (--all for every directory)\n\nExit codes: 0 success, 1 error, 2 bad usage, 3 a limit was reached, 4 the API stayed unavailable, 130 interrupted.\nEnvironment: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL, KEEL_MAX_RETRIES, KEEL_RETRY_BUDGET_MS, KEEL_STREAM_IDLE_TIMEOUT_MS, KEEL_HOME, KEEL_FSYNC."
)]
pub struct Cli {
    /// Run headless: print the answer and exit. Without it (and without --output-format or --input-format set to json/stream-json), keel starts its interactive UI on the terminal.
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// The prompt. With -p, read from stdin when absent; without -p, the interactive UI's first prompt.
    pub prompt: Option<String>,

    /// How to print the run.
    #[arg(long = "output-format", value_enum, default_value = "text")]
    pub output_format: OutputFormat,

    /// How the prompt arrives.
    #[arg(long = "input-format", value_enum, default_value = "text")]
    pub input_format: InputFormat,

    /// Print every frame (required for stream-json output with --print).
    #[arg(long)]
    pub verbose: bool,

    /// Forward the model's raw streaming events as `stream_event` frames.
    #[arg(long = "include-partial-messages")]
    pub include_partial_messages: bool,

    /// The model (default: ANTHROPIC_MODEL, else keel's default).
    #[arg(long)]
    pub model: Option<String>,

    /// A model to switch to when the main one stays overloaded.
    #[arg(long = "fallback-model")]
    pub fallback_model: Option<String>,

    /// The model API: anthropic, openai (Responses) or openai-chat (Chat Completions).
    /// Without it, a model written `provider/model` picks its provider.
    #[arg(long)]
    pub provider: Option<String>,

    /// Stop after this many model calls in one turn.
    #[arg(long = "max-turns", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Stop once the session has cost this many US dollars.
    #[arg(long = "max-budget-usd")]
    pub max_budget_usd: Option<f64>,

    /// Tools (or rules like "Bash(git status:*)") allowed without asking; comma or space separated, repeatable.
    #[arg(long = "allowedTools", visible_alias = "allowed-tools", action = ArgAction::Append)]
    pub allowed_tools: Vec<String>,

    /// Tools (or rules) never allowed; comma or space separated, repeatable.
    #[arg(long = "disallowedTools", visible_alias = "disallowed-tools", action = ArgAction::Append)]
    pub disallowed_tools: Vec<String>,

    /// default, acceptEdits, bypassPermissions, plan or dontAsk.
    #[arg(long = "permission-mode")]
    pub permission_mode: Option<String>,

    /// Same as --permission-mode bypassPermissions.
    #[arg(long = "dangerously-skip-permissions")]
    pub dangerously_skip_permissions: bool,

    /// Replace keel's system prompt ("" sends none).
    #[arg(long = "system-prompt")]
    pub system_prompt: Option<String>,

    /// Read the system prompt from a file.
    #[arg(long = "system-prompt-file")]
    pub system_prompt_file: Option<std::path::PathBuf>,

    /// Append to the system prompt.
    #[arg(long = "append-system-prompt")]
    pub append_system_prompt: Option<String>,

    /// Only offer these built-in tools ("" for none, "default" for all).
    #[arg(long = "tools")]
    pub tools: Option<String>,

    /// Resume the session with this id: its conversation is loaded and the run appends to it.
    #[arg(short = 'r', long = "resume", value_name = "SESSION_ID")]
    pub resume: Option<String>,

    /// Continue the most recent session of this directory.
    #[arg(short = 'c', long = "continue")]
    pub continue_session: bool,

    /// With --resume or --continue: branch off a copy under a new session id, leaving the old session as it was.
    #[arg(long = "fork-session")]
    pub fork_session: bool,

    /// With --resume and --fork-session: the fork's history ends at this message (the uuid of
    /// a stream-json assistant or user frame, or of a result); what came after is left out.
    #[arg(long = "resume-session-at", value_name = "UUID")]
    pub resume_session_at: Option<String>,

    /// With --resume-session-at: the prompt (uuid) of the one turn the fork may leave out;
    /// anything else after the cut (another prompt, a note to the model) refuses the fork.
    #[arg(long = "resume-drops-turn", value_name = "UUID")]
    pub resume_drops_turn: Option<String>,

    /// With stream-json output: also print every line written to the session's transcripts
    /// as `transcript_mirror` frames (after it is written, before the turn's result).
    #[arg(long = "session-mirror")]
    pub session_mirror: bool,

    /// The id (a UUID) of the new session; an error if a session with this id exists.
    #[arg(long = "session-id", value_name = "UUID")]
    pub session_id: Option<String>,

    /// Print the protocol version keel is compatible with and keel's own version, then exit.
    #[arg(short = 'v', long = "version", short_alias = 'V')]
    pub version: bool,

    /// Flags the official SDKs pass: honoured, or accepted with a notice (see compat.rs).
    #[command(flatten)]
    pub compat: compat::CompatArgs,
}
