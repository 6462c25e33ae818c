//! A permission callback and a hook. The callback decides by rule: allow `Read`/`Glob`/`Grep`,
//! allow `Bash` only for `ls` and `git status`, deny the rest with a reason the model sees.
//! A PreToolUse hook logs every Bash command.
//!
//! ```text
//! ANTHROPIC_API_KEY=... cargo run -p keel-sdk --example permission -- "List the files, then delete them."
//! ```
//! Needs a CLI with `--input-format stream-json` and `--permission-prompt-tool stdio`.

use futures_util::StreamExt;
use keel_sdk::{query, HookMatcher, Options, PermissionResult};
use serde_json::json;

#[tokio::main]
async fn main() -> keel_sdk::Result<()> {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "List the files here, then delete them.".into());
    let mut options = Options::default()
        .with_can_use_tool(|req| async move {
            let allowed = match req.tool_name.as_str() {
                "Read" | "Glob" | "Grep" => true,
                "Bash" => {
                    let cmd = req.input["command"].as_str().unwrap_or("");
                    cmd == "ls" || cmd.starts_with("ls ") || cmd == "git status"
                }
                _ => false,
            };
            eprintln!(
                "[permission] {} {} -> {}",
                req.tool_name,
                req.input,
                if allowed { "allow" } else { "deny" }
            );
            Ok(if allowed {
                PermissionResult::allow()
            } else {
                PermissionResult::deny(format!(
                    "{} is not allowed by this host's policy; only listing and reading are.",
                    req.tool_name
                ))
            })
        })
        .with_hook(
            "PreToolUse",
            HookMatcher::new(Some("Bash")).callback(|input| async move {
                eprintln!("[hook] Bash: {}", input.input["tool_input"]["command"]);
                Ok(json!({"continue": true}))
            }),
        );
    if let Ok(cli) = std::env::var("KEEL_CLI") {
        options.cli_path = Some(cli.into());
    }

    let mut stream = query(prompt, options);
    while let Some(msg) = stream.next().await {
        let msg = msg?;
        if let Some(text) = msg.assistant_text() {
            println!("{text}");
        }
        if let Some(r) = msg.as_result() {
            println!("[{}] denials: {}", r.subtype, r.permission_denials.len());
        }
    }
    Ok(())
}
