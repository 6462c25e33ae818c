//! The Edit tool: replace an exact piece of text in a file.

use std::io;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::fsutil::{job_failed, numbered, run_blocking, write_atomic, Cancelled};
use crate::input::{input_schema, parse_input, InputError};
use crate::{show, BoxFuture, CancelToken, Tool, ToolContext, ToolOutcome};

/// Replaces exact text in a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct EditTool;

/// Lines of context shown before and after the first change.
const CONTEXT_LINES: usize = 3;
/// The most lines of the changed region shown back.
const MAX_SNIPPET_LINES: usize = 30;

const DESCRIPTION: &str = "Replace exact text in a file. `old_string` must match the file's \
current text exactly, including whitespace and indentation, and must occur exactly once (add \
surrounding lines to make it unique) unless `replace_all` is true. Read the file first so you \
copy the text exactly as it is. The write is atomic. To create a new file, use Write.";

/// Edit's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Input {
    /// The file to edit: an absolute path, or one relative to the working directory.
    file_path: String,
    /// The exact text to replace.
    old_string: String,
    /// The text to put in its place (must differ from `old_string`).
    new_string: String,
    /// Replace every occurrence of `old_string` instead of exactly one (default false).
    replace_all: Option<bool>,
}

impl Tool for EditTool {
    fn name(&self) -> &'static str {
        "Edit"
    }
    fn kind(&self) -> crate::ToolKind {
        crate::ToolKind::Edit
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
            let inp: Input = match parse_input("Edit", &input) {
                Ok(i) => i,
                Err(e) => return e.into(),
            };
            if inp.old_string.is_empty() {
                let rule = "`old_string` is empty. Give the exact text to replace; to create a \
                            new file, use Write.";
                return InputError::rule("Edit", rule).into();
            }
            if inp.old_string == inp.new_string {
                let rule = "`old_string` and `new_string` are identical, so there is nothing to \
                            change.";
                return InputError::rule("Edit", rule).into();
            }
            let path = cx.resolve(&inp.file_path);
            // What a stop means for the file: see Write.
            run_blocking(&cx, move |cancel| edit_file(&path, &inp, &cancel)).await
        })
    }
}

fn edit_file(path: &Path, inp: &Input, cancel: &CancelToken) -> Result<ToolOutcome, Cancelled> {
    let shown = show(path);
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return job_failed(format!(
                "File does not exist: {shown}. To create a new file, use Write."
            ))
        }
        Err(_) if path.is_dir() => {
            return job_failed(format!("{shown} is a directory, not a file."))
        }
        Err(e) => return job_failed(format!("Cannot read {shown}: {e}")),
    };
    let Ok(content) = String::from_utf8(bytes) else {
        return job_failed(format!(
            "{shown} is not UTF-8 text; Edit only changes text files."
        ));
    };

    let (mut old, mut new) = (inp.old_string.clone(), inp.new_string.clone());
    let mut count = content.matches(old.as_str()).count();
    // A file with CRLF line ends, edited with text copied as plain `\n` lines.
    if count == 0 && content.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        let crlf = old.replace('\n', "\r\n");
        let n = content.matches(crlf.as_str()).count();
        if n > 0 {
            old = crlf;
            new = new.replace("\r\n", "\n").replace('\n', "\r\n");
            count = n;
        }
    }
    let replace_all = inp.replace_all.unwrap_or(false);
    if count == 0 {
        return job_failed(format!(
            "The text to replace was not found in {shown}. Read the file to get its current \
             text and copy `old_string` exactly (whitespace and indentation must match)."
        ));
    }
    if count > 1 && !replace_all {
        return job_failed(format!(
            "`old_string` occurs {count} times in {shown}. Include more surrounding lines to \
             make it unique, or set `replace_all` to true to replace every occurrence."
        ));
    }
    let first = content.find(old.as_str()).unwrap_or(0);
    let updated = if replace_all {
        content.replace(old.as_str(), &new)
    } else {
        content.replacen(old.as_str(), &new, 1)
    };
    if let Err(e) = write_atomic(path, updated.as_bytes(), cancel)? {
        return job_failed(format!("Cannot write {shown}: {e}"));
    }
    let plural = if count == 1 { "" } else { "s" };
    let snippet = snippet(&updated, first, &new);
    Ok(ToolOutcome::Ok {
        content: format!("Edited {shown}: {count} replacement{plural}.\n{snippet}"),
        meta: Some(json!({
            "file_path": shown,
            "replacements": count,
        })),
    })
}

/// Numbered lines around the first change (which starts at byte `at` and is `new` long).
fn snippet(updated: &str, at: usize, new: &str) -> String {
    let first_line = updated[..at].matches('\n').count(); // 0-based
    let new_lines = new.matches('\n').count() + 1;
    let from = first_line.saturating_sub(CONTEXT_LINES);
    let to = (first_line + new_lines + CONTEXT_LINES).min(from + MAX_SNIPPET_LINES);
    // `lines()` drops the `\r` of CRLF and the empty piece after a final newline.
    let lines: Vec<String> = updated
        .lines()
        .enumerate()
        .skip(from)
        .take(to - from)
        .map(|(i, l)| numbered(i + 1, l))
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_pinned() {
        crate::input::assert_schema(
            EditTool.input_schema(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "file_path": {
                        "type": "string",
                        "description": "The file to edit: an absolute path, or one relative to the working directory."
                    },
                    "old_string": {
                        "type": "string",
                        "description": "The exact text to replace."
                    },
                    "new_string": {
                        "type": "string",
                        "description": "The text to put in its place (must differ from `old_string`)."
                    },
                    "replace_all": {
                        "type": "boolean",
                        "description": "Replace every occurrence of `old_string` instead of exactly one (default false)."
                    }
                },
                "required": ["file_path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        );
    }

    #[test]
    fn snippet_shows_context() {
        let text = "1\n2\n3\n4\nNEW\n6\n7\n8\n9\n";
        let at = text.find("NEW").unwrap();
        assert_eq!(
            snippet(text, at, "NEW"),
            "     2\t2\n     3\t3\n     4\t4\n     5\tNEW\n     6\t6\n     7\t7\n     8\t8"
        );
    }
}
