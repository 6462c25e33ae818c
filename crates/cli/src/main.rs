//! `keel`: the command line.

mod args;
mod control;
#[cfg(feature = "demo")]
mod demo;
mod mcp_cmd;
mod permissions;
mod printer;
mod queue;
mod run;
mod sessions;
mod signals;
mod stream_input;
mod trust;

use std::sync::Arc;

use clap::Parser;

fn main() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == keel_core::os::LAUNCHER_ARG)
    {
        keel_core::os::serve_launcher();
    }
    init_tracing();
    quiet_panics();
    // Whatever a command orphans comes to keel, not to init, so keel can still stop it.
    if let Err(e) = keel_core::os::own_descendants() {
        tracing::warn!("could not become a subreaper ({e}); processes that leave their command's group may outlive keel");
    }
    let argv: Vec<String> = std::env::args().collect();
    // Commands are forked from a small launcher (this binary, started with LAUNCHER_ARG when
    // the first command runs), not from keel, whose fork costs grow with its memory.
    // KEEL_LAUNCHER=off: fork each command from keel itself (to compare, or rule it out).
    match std::env::var("KEEL_LAUNCHER").as_deref().map(str::trim) {
        // The running image itself, even if an upgrade replaced the file since keel started
        // (a newer keel might not speak this one's protocol).
        Err(std::env::VarError::NotPresent) | Ok("" | "on") => {
            keel_core::os::enable_launcher("/proc/self/exe".into())
        }
        Ok("off") => {}
        Ok(v) => usage_exit(&format!(
            "Error: KEEL_LAUNCHER must be `on` (commands are started by a small launcher \
             process, the default) or `off` (keel forks each command itself), got {v:?}"
        )),
        Err(_) => usage_exit("Error: KEEL_LAUNCHER is not valid UTF-8; set it to `on` or `off`"),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("keel: could not start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    // Turns have their own panic boundary; this one catches what panics outside any turn, so
    // even then keel ends with one clear line and exit 1, not a crash report.
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(dispatch(argv))
    })) {
        Ok(code) => code,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            eprintln!("keel: internal error outside a turn (a panic: {what}); this is a keel bug");
            1
        }
    };
    // Leave at once: background tasks (a blocked stdin reader, say) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    // Resume checkpoints: the one a resume started is finished, long transcripts brought up to date.
    keel_core::transcript::checkpoint::at_exit();
    // The launcher leaves once its socket closes; waiting for it counts its commands' CPU time
    // to keel (as `time keel …` expects).
    keel_core::os::stop_launcher();
    // Anything still a child of keel now was orphaned by something keel started.
    let orphans = keel_core::os::kill_orphans();
    if orphans > 0 {
        tracing::info!("stopped {orphans} orphaned process(es) at exit");
    }
    std::process::exit(code);
}

async fn dispatch(argv: Vec<String>) -> i32 {
    match argv.get(1).map(String::as_str) {
        #[cfg(feature = "demo")]
        Some("demo") => return demo::run(&argv[2..]).await,
        Some("sessions") => return sessions::run(&argv[2..]),
        Some("permissions") => return permissions::run(&argv[2..]),
        Some("mcp") => return mcp_cmd::run(&argv[2..]).await,
        _ => {}
    }
    let cli: args::Cli = match parse_args(argv) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if cli.version {
        println!("{}", version_line());
        return 0;
    }
    let cwd = match working_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let env: Arc<keel_core::Env> = Arc::new(|k: &str| std::env::var(k).ok());
    if interactive(&cli) {
        for notice in cli.compat.notices(cli.input_format) {
            eprintln!("{notice}");
        }
        let mut options = match args::options::session_options(&cli) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("Error: {e}");
                return 2;
            }
        };
        if let Err(code) = trust::ask_if_needed(&cwd, &mut options) {
            return code;
        }
        return keel_tui::run(keel_tui::Launch {
            cwd,
            env,
            options,
            prompt: cli.prompt.clone(),
        })
        .await;
    }
    let inputs = run::RunInputs { env, cwd };
    let ran = if cli.input_format == args::InputFormat::StreamJson {
        for notice in cli.compat.notices(cli.input_format) {
            eprintln!("{notice}");
        }
        stream_input::run(cli, inputs).await
    } else {
        run::run(cli, inputs).await
    };
    match ran {
        Ok(code) => code,
        Err(run::UsageError(msg)) => {
            eprintln!("{msg}");
            2
        }
    }
}

/// What `-v`/`--version` prints: the Claude Code protocol version keel is compatible with
/// first (SDKs and scripts parse the leading `X.Y.Z`), then keel's own version.
fn version_line() -> String {
    format!(
        "{} (keel {})",
        keel_core::PROTOCOL_VERSION,
        keel_core::KEEL_VERSION
    )
}

/// Without `-p`, and with neither format set to stream-json or json (what SDKs and scripts
/// ask for), keel is interactive: the terminal UI, which says to use `-p` when there is no
/// terminal.
fn interactive(cli: &args::Cli) -> bool {
    !cli.print
        && cli.input_format == args::InputFormat::Text
        && cli.output_format == args::OutputFormat::Text
}

/// A panic inside a turn is caught by the engine and reported as the turn's result, and one
/// outside a turn by `main`; the default hook would also print a multi-line report on stderr,
/// where keel promises one line. Panics are logged at debug level instead.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::debug!("a panic{at}: {what}");
    }));
}

/// A bad setting found before anything ran: say what and where, exit 2 (as for a bad flag).
fn usage_exit(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    // --debug / --debug-file (flags the SDKs pass) raise the default level to debug.
    let debug = args::compat::DebugFlags::from_argv(std::env::args());
    let default = if debug.on { "debug" } else { "warn" };
    let filter = EnvFilter::try_from_env("KEEL_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    if let Some(path) = &debug.file {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => {
                let _ = builder
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(f))
                    .try_init();
                return;
            }
            Err(e) => eprintln!(
                "keel: cannot open --debug-file {}: {e}; logging to stderr",
                path.display()
            ),
        }
    }
    // Colours only for a person at a terminal, and never with NO_COLOR.
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = builder
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Parse a command line; on an error (or `--help`/`--version`) print what clap says and return
/// the exit code: 2 for bad usage, 0 for help.
pub(crate) fn parse_args<T: Parser>(argv: impl IntoIterator<Item = String>) -> Result<T, i32> {
    T::try_parse_from(argv).map_err(|e| {
        let code = if e.use_stderr() { 2 } else { 0 };
        let _ = e.print();
        code
    })
}

/// The working directory, or exit code 1 with a clear line when it is gone.
pub(crate) fn working_dir() -> Result<std::path::PathBuf, i32> {
    std::env::current_dir().map_err(|e| {
        eprintln!("keel: the working directory is not accessible: {e}");
        1
    })
}
