//! What the launcher tests share: running a command and asking it who its supervisor's parent is.

use keel_tools::{BashTool, CancelToken, Tool, ToolContext, ToolOutcome};
use serde_json::json;

/// Run `command` in `dir` and return its output (it must succeed).
pub async fn run(dir: &std::path::Path, command: &str) -> String {
    let cx = ToolContext::new(dir, CancelToken::new());
    match BashTool.call(json!({ "command": command }), cx).await {
        ToolOutcome::Ok { content, .. } => content,
        other => panic!("{command}: {other:?}"),
    }
}

/// A command that prints its supervisor's parent: pid, name, and that one's parent's pid, read
/// by the command itself while its supervisor is there.
pub const CHAIN: &str =
    "S=$(awk '{print $4}' /proc/$$/stat); L=$(awk '{print $4}' /proc/$S/stat); \
                         echo $L $(cat /proc/$L/comm) $(awk '{print $4}' /proc/$L/stat)";

/// [`CHAIN`]'s output, parsed.
pub fn chain(out: &str) -> (i32, String, i32) {
    let f: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(f.len(), 3, "{out}");
    (
        f[0].parse().unwrap(),
        f[1].to_owned(),
        f[2].parse().unwrap(),
    )
}
