//! The Edit tool: replace an exact piece of text in a file.

use std::io;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::files::{
    check_fresh, decode, encode, open_for_read, replace_contents, FileStamp, ReadLedger,
};
use crate::fsutil::{job_failed, numbered, run_blocking, Cancelled};
use crate::input::InputError;
use crate::{show, BoxFuture, CancelToken, ToolContext, ToolOutcome};

/// Replaces exact text in a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct EditTool;

/// Lines of context shown before and after the first change.
const CONTEXT_LINES: usize = 3;
/// The most lines of the changed region shown back.
const MAX_SNIPPET_LINES: usize = 30;

const DESCRIPTION: &str = "Replace exact text in a file. `old_string` must match the file's \
current text exactly, including whitespace and indentation, and must occur exactly once (add \
surrounding lines to make it unique) unless `replace_all` is true. The file must have been read \
with Read in this session, and not changed since, or the edit is refused. The file keeps its \
owner, mode and links. To create a new file, use Write.";

/// Edit's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The file to edit: an absolute path, or one relative to the working directory.
    file_path: String,
    /// The exact text to replace.
    old_string: String,
    /// The text to put in its place (must differ from `old_string`).
    new_string: String,
    /// Replace every occurrence of `old_string` instead of exactly one (default false).
    replace_all: Option<bool>,
}

impl crate::TypedTool for EditTool {
    type Input = Input;
    const NAME: &'static str = "Edit";
    const KIND: crate::ToolKind = crate::ToolKind::Edit;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
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
            let path = cx.target(&inp.file_path);
            let reads = cx.reads.clone();
            let checkpoints = cx.checkpoints.clone();
            // What a stop means for the file: see Write.
            run_blocking(&cx, move |cancel| {
                edit_file(&path, &inp, &cancel, &reads, checkpoints.as_deref())
            })
            .await
        })
    }
}

fn edit_file(
    path: &Path,
    inp: &Input,
    cancel: &CancelToken,
    reads: &ReadLedger,
    checkpoints: Option<&crate::Checkpoints>,
) -> Result<ToolOutcome, Cancelled> {
    let shown = show(path);
    match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return job_failed(format!(
                "File does not exist: {shown}. To create a new file, use Write."
            ))
        }
        Ok(m) if m.is_dir() => return job_failed(format!("{shown} is a directory, not a file.")),
        _ => {}
    }
    let (mut file, meta) = match open_for_read(path) {
        Ok(f) => f,
        Err(Ok(refusal)) => return job_failed(refusal),
        Err(Err(e)) => return job_failed(format!("Cannot read {shown}: {e}")),
    };
    if let Err(why) = check_fresh(path, &meta, reads, "Edit") {
        return job_failed(why.to_string());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    if let Err(e) = io::Read::read_to_end(&mut file, &mut bytes) {
        return job_failed(format!("Cannot read {shown}: {e}"));
    }
    drop(file);
    let (content, encoding) = decode(bytes);

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
    let data = match encode(&updated, encoding) {
        Ok(d) => d,
        Err(c) => {
            return job_failed(format!(
                "{shown} is a Latin-1 file and `new_string` has the character {c:?}, which Latin-1 cannot hold; nothing was changed. Use characters from Latin-1, or convert the file to UTF-8 first."
            ))
        }
    };
    if let Some(c) = checkpoints {
        c.before_write(path);
    }
    let how = match replace_contents(path, &data, cancel)? {
        Ok(how) => how,
        Err(e) => return job_failed(format!("Cannot write {shown}: {e}")),
    };
    if let Some(c) = checkpoints {
        c.after_write(path, &data);
    }
    if let Ok(m) = std::fs::metadata(path) {
        reads.record(path, FileStamp::of(&m));
    }
    let plural = if count == 1 { "" } else { "s" };
    let snippet = snippet(&updated, first, &new);
    let note = encoding
        .note()
        .map(|n| format!("\n[{shown}: {n}; it was written back the same way.]"))
        .unwrap_or_default();
    Ok(ToolOutcome::Ok {
        content: format!("Edited {shown}: {count} replacement{plural}.\n{snippet}{note}"),
        meta: Some(json!({
            "file_path": shown,
            "replacements": count,
            "written": format!("{how:?}").to_lowercase(),
        })),
    })
}

/// The longest line shown in a snippet; longer lines (minified code) are cut around the change.
const SNIPPET_LINE_CHARS: usize = 240;

/// Numbered lines around the first change (which starts at byte `at` and is `new` long),
/// bounded: at most [`MAX_SNIPPET_LINES`] lines of at most [`SNIPPET_LINE_CHARS`] characters,
/// each cut line saying how much was cut.
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
        .map(|(i, l)| {
            numbered(
                i + 1,
                &cut(l, (i == first_line).then(|| column(updated, at))),
            )
        })
        .collect();
    lines.join("\n")
}

/// The character column of byte `at` within its line.
fn column(text: &str, at: usize) -> usize {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..at].chars().count()
}

/// `line` cut to [`SNIPPET_LINE_CHARS`] characters, kept around `focus` (the change's column)
/// when given, with markers saying how many characters were cut on each side.
fn cut(line: &str, focus: Option<usize>) -> String {
    let n = line.chars().count();
    if n <= SNIPPET_LINE_CHARS {
        return line.to_owned();
    }
    let half = SNIPPET_LINE_CHARS / 2;
    let from = focus
        .unwrap_or(0)
        .saturating_sub(half)
        .min(n - SNIPPET_LINE_CHARS);
    let to = from + SNIPPET_LINE_CHARS;
    let kept: String = line.chars().skip(from).take(SNIPPET_LINE_CHARS).collect();
    let mut out = String::new();
    if from > 0 {
        out.push_str(&format!("[… {from} characters cut] "));
    }
    out.push_str(&kept);
    if to < n {
        out.push_str(&format!(" [… {} characters cut]", n - to));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;

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
    fn a_change_in_a_huge_line_shows_a_bounded_snippet() {
        let line = format!("{}NEW{}", "a".repeat(3_000_000), "b".repeat(1000));
        let at = line.find("NEW").unwrap();
        let s = snippet(&line, at, "NEW");
        assert!(s.len() < 1000, "{} bytes", s.len());
        assert!(s.contains("NEW") && s.contains("characters cut]"), "{s}");
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
