//! The Write tool: create or replace a whole file, atomically.

use std::io;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::files::{check_fresh, refuse_kind, replace_contents, FileStamp, ReadLedger};
use crate::fsutil::{run_blocking, Cancelled};
use crate::{show, BoxFuture, CancelToken, ToolContext, ToolOutcome};

/// Creates or overwrites a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteTool;

const DESCRIPTION: &str = "Write a file with the given content, creating it (and any missing \
parent directories) or replacing it entirely. An existing file must have been read with Read in \
this session, and not changed since, or the write is refused. The file keeps its owner, mode and \
links. To change part of an existing file, prefer Edit.";

/// Write's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The file to write: an absolute path, or one relative to the working directory.
    file_path: String,
    /// The full new content of the file.
    content: String,
}

impl crate::TypedTool for WriteTool {
    type Input = Input;
    const NAME: &'static str = "Write";
    const KIND: crate::ToolKind = crate::ToolKind::Write;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let path = cx.target(&inp.file_path);
            let reads = cx.reads.clone();
            let checkpoints = cx.checkpoints.clone();
            // A stop reported while the write completes anyway says `started: true`, which
            // claims no more than that the file may have been written; a stop the write sees
            // before it touches the file leaves the old file in place.
            run_blocking(&cx, move |cancel| {
                write_file(&path, &inp.content, &cancel, &reads, checkpoints.as_deref())
            })
            .await
        })
    }
}

fn write_file(
    path: &std::path::Path,
    content: &str,
    cancel: &CancelToken,
    reads: &ReadLedger,
    checkpoints: Option<&crate::Checkpoints>,
) -> Result<ToolOutcome, Cancelled> {
    let shown = show(path);
    let existed = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Ok(ToolOutcome::failed(format!(
                "{shown} is a directory; give the path of a file inside it."
            )))
        }
        Ok(m) => {
            if let Some(refusal) = refuse_kind(path, &m) {
                return Ok(ToolOutcome::failed(refusal));
            }
            if let Err(why) = check_fresh(path, &m, reads, "Write") {
                return Ok(ToolOutcome::failed(why.to_string()));
            }
            true
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Ok(ToolOutcome::failed(format!("Cannot write {shown}: {e}"))),
    };
    if let Some(parent) = path.parent() {
        if let Err(e) = std::fs::create_dir_all(parent) {
            return Ok(ToolOutcome::failed(format!(
                "Cannot create the directory {} for {shown}: {e}",
                parent.display()
            )));
        }
    }
    if let Some(c) = checkpoints {
        c.before_write(path);
    }
    let how = match replace_contents(path, content.as_bytes(), cancel)? {
        Ok(how) => how,
        Err(e) => return Ok(ToolOutcome::failed(format!("Cannot write {shown}: {e}"))),
    };
    if let Some(c) = checkpoints {
        c.after_write(path, content.as_bytes());
    }
    // What the agent wrote it knows: a following Edit needs no new Read.
    if let Ok(m) = std::fs::metadata(path) {
        reads.record(path, FileStamp::of(&m));
    }
    let verb = if existed { "Overwrote" } else { "Created" };
    Ok(ToolOutcome::Ok {
        content: format!("{verb} {shown} ({} bytes)", content.len()),
        meta: Some(json!({
            "file_path": shown,
            "type": if existed { "update" } else { "create" },
            "bytes": content.len(),
            "written": format!("{how:?}").to_lowercase(),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;

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
