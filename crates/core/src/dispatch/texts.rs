//! What the model is told about a call that was stopped or never started, worded by the
//! engine from the cancel token's reason (never by the tool).

use std::time::Duration;

use keel_protocol::CancelReason;
use keel_tools::ToolLimits;

/// The call never started.
pub(crate) fn rejected_text(tool: &str, reason: CancelReason) -> String {
    match reason {
        CancelReason::UserInterrupted => format!(
            "The user interrupted before this {tool} call started, so it did not run and changed nothing. Stop and wait for the user's next instruction."
        ),
        CancelReason::Shutdown => format!("keel was shutting down before this {tool} call started, so it did not run and changed nothing."),
        CancelReason::Timeout => format!("A deadline passed before this {tool} call started, so it did not run and changed nothing."),
        CancelReason::SiblingError => format!("A parallel call failed before this {tool} call started, so it did not run and changed nothing."),
    }
}

fn partial_block(partial: &str) -> String {
    if partial.trim().is_empty() {
        "It produced no output before it was stopped.".to_owned()
    } else {
        format!("Output captured before it was stopped:\n{partial}")
    }
}

pub(super) fn interrupted_text(
    tool: &str,
    reason: CancelReason,
    ran: Duration,
    partial: &str,
) -> String {
    let who = if reason == CancelReason::Shutdown {
        "keel was shutting down and stopped"
    } else {
        "The user interrupted"
    };
    format!(
        "{who} this {tool} call after it had run for {:.1} s. It did not finish, and it may already have changed files or other state. {}\nStop and wait for the user's next instruction.",
        ran.as_secs_f64(),
        partial_block(partial)
    )
}

pub(super) fn timed_out_text(
    tool: &str,
    ran: Duration,
    partial: &str,
    limits: &ToolLimits,
) -> String {
    if tool.starts_with("mcp__") {
        // An MCP server's tool: keel stops waiting; the server is asked to cancel the call.
        return format!(
            "This {tool} call got no answer within {:.1} s (MCP_TOOL_TIMEOUT, in milliseconds, sets the limit): keel stopped waiting and told the MCP server to cancel it. It may have partly run. {}",
            ran.as_secs_f64(),
            partial_block(partial)
        );
    }
    format!(
        "This {tool} call timed out after {:.1} s and was stopped (its whole process group was killed). It may have partly run. {}\nIf it needs longer, pass a larger timeout (at most {} ms), or run something quicker.",
        ran.as_secs_f64(),
        partial_block(partial),
        limits.max_timeout.as_millis()
    )
}

pub(super) fn sibling_text(
    tool: &str,
    ran: Duration,
    partial: &str,
    sibling: Option<&(String, String)>,
) -> String {
    let which = sibling
        .map(|(n, id)| format!("the {n} call {id}"))
        .unwrap_or_else(|| "another call".into());
    format!(
        "This {tool} call was cancelled after {:.1} s because {which}, running beside it, failed. The user did not interrupt anything. It may have partly run. {}\nLook at the failed call, fix it, then rerun what is still needed.",
        ran.as_secs_f64(),
        partial_block(partial)
    )
}
