//! The Write tool: create or replace a whole file, atomically.

use std::io;
use std::time::Instant;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::fsutil::write_atomic;
use crate::input::{input_schema, parse_input};
use crate::{show, BoxFuture, Tool, ToolContext, ToolOutcome};

/// Creates or overwrites a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteTool;

const DESCRIPTION: &str = "Write a file with the given content, creating it (and any missing \
parent directories) or replacing it entirely. The write is atomic: the file holds either its old \
content or the new one, never a mix. To change part of an existing file, prefer Edit; before \
overwriting a file, Read it so nothing is lost by accident.";

/// Write's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Input {
    /// The file to write: an absolute path, or one relative to the working directory.
    file_path: String,
    /// The full new content of the file.
    content: String,
}

impl Tool for WriteTool {
    fn name(&self) -> &'static str {
        "Write"
    }
    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Write
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        input_schema::<Input>()
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        false
    }

    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let begun = Instant::now();
            let inp: Input = match parse_input("Write", &input) {
                Ok(i) => i,
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            if cx.cancel.is_cancelled() {
                return cx.stopped(false, String::new(), begun.elapsed(), 0);
            }
            let path = cx.resolve(&inp.file_path);
            // Not raced against the cancel token: the write is short and atomic, and reporting
            // "stopped" while it completes anyway would not be truthful.
            let outcome =
                tokio::task::spawn_blocking(move || write_file(&path, &inp.content)).await;
            outcome.unwrap_or_else(|e| ToolOutcome::failed(format!("Internal error in Write: {e}")))
        })
    }
}

fn write_file(path: &std::path::Path, content: &str) -> ToolOutcome {
    let shown = show(path);
    let existed = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return ToolOutcome::failed(format!(
                "{shown} is a directory; give the path of a file inside it."
            ))
        }
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return ToolOutcome::failed(format!("Cannot write {shown}: {e}")),
    };
    if let Some(parent) = path.parent() {
        if let Err(e) = std::fs::create_dir_all(parent) {
            return ToolOutcome::failed(format!(
                "Cannot create the directory {} for {shown}: {e}",
                parent.display()
            ));
        }
    }
    if let Err(e) = write_atomic(path, content.as_bytes()) {
        return ToolOutcome::failed(format!("Cannot write {shown}: {e}"));
    }
    let verb = if existed { "Overwrote" } else { "Created" };
    ToolOutcome::Ok {
        content: format!("{verb} {shown} ({} bytes)", content.len()),
        meta: Some(json!({
            "file_path": shown,
            "type": if existed { "update" } else { "create" },
            "bytes": content.len(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_pinned() {
        crate::input::assert_schema(
            WriteTool.input_schema(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "file_path": {
                        "type": "string",
                        "description": "The file to write: an absolute path, or one relative to the working directory."
                    },
                    "content": {
                        "type": "string",
                        "description": "The full new content of the file."
                    }
                },
                "required": ["file_path", "content"],
                "additionalProperties": false
            }),
        );
    }
}
