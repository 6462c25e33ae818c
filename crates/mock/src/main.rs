//! The `keel-mock` binary: serve a scenario file until SIGINT or SIGTERM.

use std::io::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use keel_mock::{MockConfig, MockServer, Scenario};

/// A scripted stand-in for model APIs, for testing agents and their clients.
///
/// It listens on loopback, answers POST /v1/messages (Anthropic), POST /v1/responses and POST
/// /v1/chat/completions (OpenAI), and Bedrock's and Vertex AI's routes from the steps of a
/// scenario file (text, tool calls, HTTP errors, errors inside a stream, cut connections,
/// stalls), each in that API's shape, rejects
/// requests the real API would reject, and can write every request it gets to a JSON-lines log.
/// It also stands in for Microsoft Entra ID's token endpoint (POST /{tenant}/oauth2/v2.0/token)
/// and then refuses on /v1/messages any keel-mock-entra-N token it did not hand out.
///
/// The first line it prints is the base URL to use, e.g. ANTHROPIC_BASE_URL=<that line>, or
/// OPENAI_BASE_URL=<that line>/v1.
#[derive(Parser, Debug)]
#[command(name = "keel-mock", version)]
struct Args {
    /// Scenario file (JSON) to serve.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "check",
        conflicts_with = "check"
    )]
    scenario: Option<PathBuf>,

    /// Only check that FILE is a valid scenario, then exit (0 when valid, 2 when not).
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,

    /// Port to listen on; 0 lets the system pick a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,

    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,

    /// Append every request received, as one JSON object per line, to FILE.
    #[arg(long = "log", value_name = "FILE")]
    log: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(file) = &args.check {
        return match Scenario::from_file(file) {
            Ok(s) => {
                println!(
                    "{}: valid scenario with {} steps",
                    file.display(),
                    s.steps.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("keel-mock: {e}");
                ExitCode::from(2)
            }
        };
    }
    let Some(file) = &args.scenario else {
        eprintln!("keel-mock: --scenario FILE is required");
        return ExitCode::from(2);
    };
    let scenario = match Scenario::from_file(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("keel-mock: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel-mock: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = MockConfig {
        scenario,
        host: args.host,
        port: args.port,
        log_path: args.log,
    };
    match runtime.block_on(run(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keel-mock: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cfg: MockConfig) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use tokio::signal::unix::{signal, SignalKind};

    // Watch the signals before announcing the URL: whoever reads it may signal at once.
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let (host, port) = (cfg.host, cfg.port);
    let server = MockServer::start_with(cfg)
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", server.base_url())?;
    out.flush()?;
    drop(out);

    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    server.shutdown();
    Ok(())
}
