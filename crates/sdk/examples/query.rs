//! One-shot query: run a prompt, print the answer as it streams, and report how the run ended.
//!
//! ```text
//! ANTHROPIC_API_KEY=... cargo run -p keel-sdk --example query -- "What is in this directory?"
//! ```
//! `KEEL_CLI` picks the CLI (default: `keel` on PATH; `claude` works too).

use futures_util::StreamExt;
use keel_sdk::{query, Error, Options, PromptMode};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Say hello.".into());
    let mut options = Options {
        // The prompt goes in argv (`-p PROMPT`): one turn, works with any compatible CLI.
        // Leave `prompt_mode` unset to use stream-json input (needed for callbacks).
        prompt_mode: Some(PromptMode::Argv),
        max_turns: Some(5),
        ..Options::default()
    };
    if let Ok(cli) = std::env::var("KEEL_CLI") {
        options.cli_path = Some(cli.into());
    }

    let mut stream = query(prompt, options);
    while let Some(item) = stream.next().await {
        match item {
            Ok(msg) => {
                if let Some(text) = msg.assistant_text() {
                    println!("{text}");
                }
                if let Some(r) = msg.as_result() {
                    eprintln!(
                        "[{}: {} turn(s), ${:.4}]",
                        r.subtype, r.num_turns, r.total_cost_usd
                    );
                }
            }
            // The run ended with an error result (a limit, an API failure): its own words.
            Err(e @ Error::Result(_)) => {
                eprintln!("run failed: {e} (exit code {:?})", e.exit_code());
                return std::process::ExitCode::FAILURE;
            }
            // The CLI crashed or refused to start: the real stderr is in the error.
            Err(e) if e.is_terminal() => {
                eprintln!("error: {e}");
                return std::process::ExitCode::FAILURE;
            }
            // A line the SDK could not read; the run goes on.
            Err(e) => eprintln!("warning: {e}"),
        }
    }
    std::process::ExitCode::SUCCESS
}
