//! `keel`: the command line.

mod args;
mod demo;
mod printer;
mod run;

use std::sync::Arc;

use clap::Parser;

fn main() {
    init_tracing();
    let argv: Vec<String> = std::env::args().collect();
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
    let code = runtime.block_on(dispatch(argv));
    // Leave at once: background tasks (a blocked stdin reader, say) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    std::process::exit(code);
}

async fn dispatch(argv: Vec<String>) -> i32 {
    match argv.get(1).map(String::as_str) {
        Some("demo") => return demo::run(&argv[2..]).await,
        Some("sessions") => {
            eprintln!("keel sessions: session transcripts are not kept by this build yet");
            return 1;
        }
        _ => {}
    }
    let cli = match args::Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("keel: the working directory is not accessible: {e}");
            return 1;
        }
    };
    let inputs = run::RunInputs {
        env: Arc::new(|k: &str| std::env::var(k).ok()),
        cwd,
        model: None,
    };
    match run::run(cli, inputs).await {
        Ok(code) => code,
        Err(run::UsageError(msg)) => {
            eprintln!("{msg}");
            2
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("KEEL_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
