//! Multi-turn client with interrupt: ask a long question, interrupt it when the first answer
//! text arrives, then ask a second question in the same session.
//!
//! ```text
//! ANTHROPIC_API_KEY=... cargo run -p keel-sdk --example client
//! ```
//! Needs a CLI with `--input-format stream-json` (keel or claude). `KEEL_CLI` picks it.

use futures_util::StreamExt;
use keel_sdk::{Client, Options};

#[tokio::main]
async fn main() -> keel_sdk::Result<()> {
    let mut options = Options::default();
    if let Ok(cli) = std::env::var("KEEL_CLI") {
        options.cli_path = Some(cli.into());
    }
    let mut client = Client::connect(options).await?;
    println!("connected to pid {}", client.pid());

    client
        .query("Count slowly from 1 to 100, one number per line.")
        .await?;
    // Interrupt from another task, as a UI would: the handle is cheap to clone.
    let handle = client.handle();
    let mut interrupted = false;
    let mut turn = client.receive_response();
    while let Some(msg) = turn.next().await {
        let msg = msg?;
        if let Some(text) = msg.assistant_text() {
            println!("assistant: {text}");
            if !interrupted {
                interrupted = true;
                let handle = handle.clone();
                tokio::spawn(async move {
                    match handle.interrupt().await {
                        Ok(receipt) => eprintln!("interrupt acknowledged: {receipt}"),
                        Err(e) => eprintln!("interrupt failed: {e}"),
                    }
                });
            }
        }
        if let Some(r) = msg.as_result() {
            println!("first turn ended: {} ({:?})", r.subtype, r.terminal_reason);
        }
    }
    drop(turn);

    client.set_model(None).await?;
    client.query("Now just say: done.").await?;
    let mut turn = client.receive_response();
    while let Some(msg) = turn.next().await {
        if let Some(text) = msg?.assistant_text() {
            println!("assistant: {text}");
        }
    }
    drop(turn);

    let closed = client.close().await;
    println!("closed: {closed:?}");
    Ok(())
}
