//! The headless run: flags → session → frames → printer → exit code.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel_core::agents::{AgentRegistry, SubagentLimits};
use keel_core::permissions::{PermissionConfig, PermissionMode, Rule, RuleSource};
use keel_core::retry::{env_ms, RetryPolicy};
use keel_core::{Emitter, Session, SessionConfig, TurnEnd};
use keel_model::{AnthropicClient, ClientConfig, Model, DEFAULT_BASE_URL};
use keel_protocol::{CancelReason, ContentBlock};
use keel_tools::{Tool, ToolLimits};

use crate::args::{Cli, InputFormat, OutputFormat};
use crate::printer;

/// A usage error: printed on stderr, nothing on stdout, exit 2.
#[derive(Debug)]
pub struct UsageError(pub String);

/// A run that cannot start: a usage error (exit 2), or a session that cannot be found or opened
/// (exit 1). Printed on stderr; nothing goes to stdout.
#[derive(Debug)]
pub struct StartError {
    /// The message, for stderr.
    pub message: String,
    /// The exit code.
    pub code: i32,
}

impl StartError {
    /// Not a usage error: exit 1.
    pub fn failed(message: String) -> Self {
        Self { message, code: 1 }
    }

    /// Report the error: usage errors go back to the caller (exit 2), others are printed here
    /// and become their exit code.
    pub fn into_exit(self) -> Result<i32, UsageError> {
        if self.code == 2 {
            return Err(UsageError(self.message));
        }
        eprintln!("{}", self.message);
        Ok(self.code)
    }
}

impl From<UsageError> for StartError {
    fn from(UsageError(message): UsageError) -> Self {
        Self { message, code: 2 }
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Environment lookups go through this, so tests and the demo can supply their own.
pub type Env = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Everything a run needs that is not a flag.
pub struct RunInputs {
    /// Environment lookup.
    pub env: Arc<Env>,
    /// Working directory.
    pub cwd: PathBuf,
    /// A model to use instead of building the Anthropic client (the demo's in-process mock).
    pub model: Option<Arc<dyn Model>>,
}

/// A session ready to run, with the receiving end of its frames.
pub struct Prepared {
    /// The session.
    pub session: Session,
    /// Frames the session emits.
    pub rx: tokio::sync::mpsc::Receiver<keel_protocol::Frame>,
}

/// Validate flags and build the session (shared by every input mode).
pub fn prepare(cli: &Cli, inputs: RunInputs) -> Result<Prepared, StartError> {
    let env = inputs.env.clone();
    if cli.output_format == OutputFormat::StreamJson && !cli.verbose {
        return Err(UsageError(
            "Error: When using --print, --output-format=stream-json requires --verbose".into(),
        )
        .into());
    }
    let mut cfg = build_config(cli, &inputs)?;
    let model: Arc<dyn Model> = match inputs.model {
        Some(m) => m,
        None => Arc::new(build_client(&*env)?),
    };
    let tools = select_tools(cli)?;
    // The session: new, resumed, continued or forked; its transcript is written ahead of
    // every consumer — unless the host asked for no persistence at all.
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let (emitter, start) = if cli.compat.no_session_persistence {
        if cli.resume.is_some() || cli.continue_session || cli.fork_session {
            return Err(UsageError(
                "Error: --no-session-persistence starts a session that is never written; it cannot be combined with --resume, --continue or --fork-session".into(),
            )
            .into());
        }
        if let Some(id) = &cli.session_id {
            if uuid::Uuid::parse_str(id.trim()).is_err() {
                return Err(
                    UsageError(format!("Error: --session-id must be a UUID, got {id:?}")).into(),
                );
            }
            cfg.session_id = id.trim().to_owned();
        }
        let emitter = Emitter::new(cfg.session_id.clone(), tx);
        (emitter, None)
    } else {
        let start = crate::resume::open(cli, &*env, &mut cfg)?;
        let emitter = Emitter::new(cfg.session_id.clone(), tx).with_persist(start.writer.clone());
        (emitter, Some(start))
    };
    // Long command output keeps head and tail for the model; the whole of it goes beside the
    // session's transcript (or to the temp directory when no transcript is kept).
    let spill = match &cfg.transcript_path {
        Some(t) => t.with_extension("").join("tool-output"),
        None => std::env::temp_dir().join(format!("keel-tool-output-{}", cfg.session_id)),
    };
    let mut limits = (*cfg.tool_limits).clone();
    limits.spill_dir = Some(spill);
    cfg.tool_limits = Arc::new(limits);
    let (registry, agent_warnings) =
        AgentRegistry::load(&cfg.cwd, cfg.home.as_deref(), cli.compat.agents.as_deref());
    let equipped = keel_core::agents::equip(
        tools,
        |name| tool_wanted(cli, name),
        &cfg,
        model.clone(),
        &emitter,
        registry,
        subagent_limits(&*env)?,
    );
    let (history, notices) = start.map(|s| (s.history, s.notices)).unwrap_or_default();
    let mut session = Session::new(cfg, model, equipped.tools, emitter)
        .with_history(history)
        .with_cost(equipped.cost)
        .with_tasks(equipped.tasks)
        .with_agents(equipped.runtime);
    for w in agent_warnings {
        eprintln!("keel: {w}");
        session.queue_warning(w, keel_protocol::Extra::new());
    }
    for n in &notices {
        session.queue_warning(n.message.clone(), n.fields());
    }
    Ok(Prepared { session, rx })
}

/// Interrupt the session on SIGINT (the user) or SIGTERM (shutdown). The task ends after the
/// first signal; abort it when the run is over.
pub fn spawn_signal_handler(handle: keel_core::SessionHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        let reason = tokio::select! {
            _ = int.recv() => CancelReason::UserInterrupted,
            _ = term.recv() => CancelReason::Shutdown,
        };
        let receipt = handle.interrupt_with(reason).await;
        tracing::info!("interrupted: {receipt:?}");
    })
}

/// Validate flags, run one prompt headless, and return the exit code. Usage errors return `Err`.
pub async fn run(cli: Cli, inputs: RunInputs) -> Result<i32, UsageError> {
    for notice in cli.compat.notices(cli.input_format) {
        eprintln!("{notice}");
    }
    if cli.input_format == InputFormat::StreamJson {
        return crate::stream_input::run(cli, inputs).await;
    }
    let Prepared { mut session, rx } = match prepare(&cli, inputs) {
        Ok(p) => p,
        Err(e) => return e.into_exit(),
    };
    let prompt = read_prompt(&cli)?;
    let printer = tokio::spawn(printer::print(rx, cli.output_format, cli.verbose));
    let signals = spawn_signal_handler(session.handle());
    let end = session.run_turn(vec![ContentBlock::text(prompt)]).await;
    signals.abort();
    let killed = session.shutdown().await;
    if killed > 0 {
        tracing::info!("stopped {killed} leftover process group(s) at exit");
    }
    drop(session); // closes the channel, so the printer finishes
    let printed = printer.await.unwrap_or_default();
    Ok(finish(&end, &printed, cli.output_format))
}

/// The exit code, and the one clear stderr line of a failed run.
pub(crate) fn finish(end: &TurnEnd, printed: &printer::Printed, format: OutputFormat) -> i32 {
    if let Some(e) = &printed.write_error {
        eprintln!("keel: {e}");
        return 1;
    }
    let code = end.exit_code();
    if code != 0 {
        let text = end.result_text();
        match format {
            OutputFormat::Text => eprintln!("{text}"),
            _ => eprintln!(
                "keel: {} ({}, exit {code})",
                first_line(&text),
                end.terminal_reason().as_str()
            ),
        }
    }
    code
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn read_prompt(cli: &Cli) -> Result<String, UsageError> {
    let missing = || {
        UsageError("Error: Input must be provided either through stdin or as a prompt argument when using --print".into())
    };
    if let Some(p) = &cli.prompt {
        if !p.trim().is_empty() {
            return Ok(p.clone());
        }
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(missing());
    }
    let mut s = String::new();
    stdin
        .lock()
        .read_to_string(&mut s)
        .map_err(|e| UsageError(format!("Error: could not read the prompt from stdin: {e}")))?;
    if s.trim().is_empty() {
        return Err(missing());
    }
    Ok(s)
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn build_config(cli: &Cli, inputs: &RunInputs) -> Result<SessionConfig, UsageError> {
    let env = &*inputs.env;
    let mut cfg = SessionConfig::new(inputs.cwd.clone());
    cfg.home = env("HOME").map(PathBuf::from);
    if let Some(m) = cli
        .model
        .clone()
        .or_else(|| env("ANTHROPIC_MODEL"))
        .filter(|m| !m.trim().is_empty())
    {
        cfg.model = m;
    }
    cfg.fallback_model = cli.fallback_model.clone();
    cfg.max_turns = cli.max_turns;
    if let Some(b) = cli.max_budget_usd {
        if !(b.is_finite() && b > 0.0) {
            return Err(UsageError(format!(
                "Error: --max-budget-usd must be a positive number of dollars, got {b}"
            )));
        }
        cfg.max_budget_usd = Some(b);
    }
    cfg.include_partial_messages = cli.include_partial_messages;
    cfg.append_system_prompt = cli.append_system_prompt.clone();
    cfg.system_prompt = match (&cli.system_prompt, &cli.system_prompt_file) {
        (Some(_), Some(_)) => {
            return Err(UsageError(
                "Error: use either --system-prompt or --system-prompt-file, not both".into(),
            ))
        }
        (Some(s), None) => Some(s.clone()),
        (None, Some(p)) => Some(std::fs::read_to_string(p).map_err(|e| {
            UsageError(format!(
                "Error: cannot read --system-prompt-file {}: {e}",
                p.display()
            ))
        })?),
        (None, None) => None,
    };
    cfg.permissions = permissions(cli, &inputs.cwd, cfg.home.as_deref())?;
    cfg.retry = RetryPolicy::from_env(|k| env(k)).map_err(|e| UsageError(format!("Error: {e}")))?;
    let ms = |var| env_ms(&|k: &str| env(k), var).map_err(|e| UsageError(format!("Error: {e}")));
    let mut limits = ToolLimits::default();
    if let Some(d) = ms("KEEL_BASH_DEFAULT_TIMEOUT_MS")? {
        limits.default_timeout = d;
    }
    cfg.tool_limits = Arc::new(limits);
    cfg.additional_directories = cli.compat.add_dir.clone();
    cfg.api_key_source = if env("ANTHROPIC_API_KEY").is_some() {
        "ANTHROPIC_API_KEY".into()
    } else {
        "none".into()
    };
    Ok(cfg)
}

fn permissions(
    cli: &Cli,
    cwd: &std::path::Path,
    home: Option<&std::path::Path>,
) -> Result<PermissionConfig, UsageError> {
    let settings = crate::settings::load(
        cli.compat.settings.as_deref(),
        cli.compat.setting_sources.as_deref(),
        cwd,
        home,
    )?;
    let mut mode = match cli.permission_mode.as_deref() {
        None => settings.default_mode.unwrap_or_default(),
        Some(m) => PermissionMode::parse(m).ok_or_else(|| {
            let all: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.as_str()).collect();
            UsageError(format!(
                "Error: --permission-mode {m:?} is not a mode; use one of {}",
                all.join(", ")
            ))
        })?,
    };
    if cli.dangerously_skip_permissions {
        mode = PermissionMode::BypassPermissions;
    }
    if mode == PermissionMode::BypassPermissions
        && is_root()
        && std::env::var_os("IS_SANDBOX").is_none()
    {
        return Err(UsageError(
            "Error: bypassPermissions cannot be used as root, where a command could change anything on the machine. Run as a normal user, or set IS_SANDBOX=1 if this is a disposable sandbox.".into(),
        ));
    }
    let parse = |values: &[String]| -> Result<Vec<Rule>, UsageError> {
        Cli::rules(values)
            .iter()
            .map(|r| {
                Rule::parse(r, RuleSource::Flag).map_err(|e| UsageError(format!("Error: {e}")))
            })
            .collect()
    };
    let mut allow = parse(&cli.allowed_tools)?;
    allow.extend(settings.allow);
    let mut deny = parse(&cli.disallowed_tools)?;
    deny.extend(settings.deny);
    Ok(PermissionConfig { mode, allow, deny })
}

/// Whether an agent tool (Task, TaskOutput, KillShell, TaskStop) is offered: always, unless
/// `--tools` lists tools and leaves it out.
fn tool_wanted(cli: &Cli, name: &str) -> bool {
    match cli.tools.as_deref().map(str::trim) {
        None | Some("default") => true,
        Some(spec) => keel_core::permissions::split_rule_list(spec)
            .iter()
            .any(|w| w == name),
    }
}

/// `KEEL_SUBAGENT_MAX_DEPTH`, `KEEL_SUBAGENT_MAX_CONCURRENCY`, `KEEL_SUBAGENT_MAX_TURNS`.
fn subagent_limits(env: &Env) -> Result<SubagentLimits, UsageError> {
    let mut l = SubagentLimits::default();
    let num = |var: &str| -> Result<Option<u64>, UsageError> {
        env(var)
            .filter(|v| !v.trim().is_empty())
            .map(|v| {
                v.trim().parse::<u64>().map_err(|_| {
                    UsageError(format!(
                        "Error: {var}={v:?} is not valid: expected a whole number"
                    ))
                })
            })
            .transpose()
    };
    if let Some(n) = num("KEEL_SUBAGENT_MAX_DEPTH")? {
        l.max_depth = n as u32;
    }
    if let Some(n) = num("KEEL_SUBAGENT_MAX_CONCURRENCY")? {
        l.max_concurrent = n.max(1) as usize;
    }
    if let Some(n) = num("KEEL_SUBAGENT_MAX_TURNS")? {
        l.default_max_turns = Some(n.max(1) as u32);
    }
    Ok(l)
}

fn select_tools(cli: &Cli) -> Result<Vec<Arc<dyn Tool>>, UsageError> {
    let all = keel_tools::builtin_tools();
    let Some(spec) = cli.tools.as_deref() else {
        return Ok(all);
    };
    if spec.trim() == "default" {
        return Ok(all);
    }
    let wanted = keel_core::permissions::split_rule_list(spec);
    for w in &wanted {
        if !all.iter().any(|t| t.name() == w)
            && !keel_core::agents::AGENT_TOOLS.contains(&w.as_str())
        {
            let mut names: Vec<&str> = all.iter().map(|t| t.name()).collect();
            names.extend(keel_core::agents::AGENT_TOOLS);
            return Err(UsageError(format!(
                "Error: --tools names {w:?}, which is not a keel tool; the tools are {}",
                names.join(", ")
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|t| wanted.iter().any(|w| w == t.name()))
        .collect())
}

fn build_client(env: &Env) -> Result<AnthropicClient, UsageError> {
    let base_url = env("ANTHROPIC_BASE_URL")
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let api_key = env("ANTHROPIC_API_KEY").filter(|s| !s.trim().is_empty());
    let auth_token = env("ANTHROPIC_AUTH_TOKEN").filter(|s| !s.trim().is_empty());
    if api_key.is_none() && auth_token.is_none() && base_url == DEFAULT_BASE_URL {
        return Err(UsageError(
            "Error: keel needs an API key to talk to the model. Set ANTHROPIC_API_KEY (create a key in the Anthropic Console), or point ANTHROPIC_BASE_URL at a compatible server. To see keel work without a key, run `keel demo`.".into(),
        ));
    }
    let ms = |var| env_ms(&|k: &str| env(k), var).map_err(|e| UsageError(format!("Error: {e}")));
    let mut cfg = ClientConfig {
        base_url,
        api_key,
        auth_token,
        ..ClientConfig::default()
    };
    if let Some(d) = ms("KEEL_STREAM_IDLE_TIMEOUT_MS")? {
        cfg.idle_timeout = d.max(Duration::from_millis(50));
    }
    if let Some(d) = ms("KEEL_CONNECT_TIMEOUT_MS")? {
        cfg.connect_timeout = d;
    }
    AnthropicClient::new(cfg).map_err(|e| UsageError(format!("Error: {e}")))
}
