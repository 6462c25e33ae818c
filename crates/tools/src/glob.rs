//! The Glob tool: find files by name pattern, newest first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::fsutil::{job_failed, run_blocking, Cancelled};
use crate::input::InputError;
use crate::{show, BoxFuture, CancelToken, ToolContext, ToolOutcome};

/// Finds files by glob pattern.
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobTool;

/// The most paths one call lists.
pub const MAX_RESULTS: usize = 200;

const DESCRIPTION: &str = "Find files whose path matches a glob pattern, such as `**/*.rs` or \
`src/**/*.{ts,tsx}`, under a directory (default: the working directory). `*` stays within one \
directory level, `**` crosses any number. Files ignored by .gitignore or .ignore and hidden \
directories are skipped. Returns absolute paths, most recently modified first, at most 200. To \
search file contents, use Grep.";

/// Glob's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The glob to match against paths relative to `path`, e.g. `**/*.rs`.
    pattern: String,
    /// The directory to search in (default: the working directory).
    path: Option<String>,
}

impl crate::TypedTool for GlobTool {
    type Input = Input;
    const NAME: &'static str = "Glob";
    const KIND: crate::ToolKind = crate::ToolKind::Glob;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            if inp.pattern.trim().is_empty() {
                let rule = "`pattern` is empty; give a glob such as `**/*.rs`.";
                return InputError::rule("Glob", rule).into();
            }
            // The directory searched is the one the permission check judged (see
            // `search_dir`): an absolute pattern names it itself.
            let (dir, pattern) = split_pattern(inp.path.as_deref(), &inp.pattern);
            let base = match dir {
                Some(d) => cx.target(&d),
                None => cx.cwd.clone(),
            };
            let matcher = match GlobBuilder::new(&pattern).literal_separator(true).build() {
                Ok(g) => g.compile_matcher(),
                Err(e) => {
                    return ToolOutcome::failed(format!(
                        "Invalid glob pattern `{}`: {e}",
                        inp.pattern
                    ))
                }
            };
            let hidden_ok = mentions_hidden(&pattern);
            let shown_pattern = inp.pattern.clone();
            let threads = cx.limits.search_threads;
            run_blocking(&cx, move |cancel| {
                if !base.is_dir() {
                    let what = if base.exists() {
                        "is not a directory"
                    } else {
                        "does not exist"
                    };
                    return job_failed(format!(
                        "The search directory {} {what}. Give `path` as an existing directory.",
                        show(&base)
                    ));
                }
                find(&base, &matcher, hidden_ok, &cancel, &shown_pattern, threads)
            })
            .await
        })
    }
}

pub use keel_policy::globdir::search_dir;
use keel_policy::globdir::split_pattern;

/// Whether the pattern asks for hidden entries itself (a part starting with `.`).
fn mentions_hidden(pattern: &str) -> bool {
    pattern
        .split('/')
        .any(|p| p.starts_with('.') && p != "." && p != "..")
}

fn find(
    base: &Path,
    matcher: &GlobMatcher,
    hidden_ok: bool,
    cancel: &CancelToken,
    pattern: &str,
    threads: usize,
) -> Result<ToolOutcome, Cancelled> {
    let mut builder = ignore::WalkBuilder::new(base);
    builder
        .hidden(!hidden_ok)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git");
    // Each thread keeps its newest MAX_RESULTS matches (a min-heap) and counts all of them.
    type Heap = BinaryHeap<Reverse<(SystemTime, Reverse<PathBuf>)>>;
    let parts = crate::walk::fold(
        builder,
        threads,
        cancel,
        || (0usize, Heap::new()),
        |(count, best): &mut (usize, Heap), entry| {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return;
            }
            let path = entry.path();
            let Ok(rel) = path.strip_prefix(base) else {
                return;
            };
            if !matcher.is_match(rel) {
                return;
            }
            *count += 1;
            let mtime = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            best.push(Reverse((mtime, Reverse(absolute(path)))));
            if best.len() > MAX_RESULTS {
                best.pop();
            }
        },
    )?;
    let total: usize = parts.iter().map(|(n, _)| n).sum();
    let mut best = Heap::new();
    for (_, part) in parts {
        for item in part {
            best.push(item);
            if best.len() > MAX_RESULTS {
                best.pop();
            }
        }
    }
    // Newest first; equal times in path order. The same whatever order the threads found them.
    let found: Vec<(SystemTime, PathBuf)> = best
        .into_sorted_vec()
        .into_iter()
        .map(|Reverse((t, Reverse(p)))| (t, p))
        .collect();
    if total == 0 {
        return Ok(ToolOutcome::Ok {
            content: format!("No files matched {pattern} under {}", show(base)),
            meta: Some(json!({ "num_files": 0, "truncated": false })),
        });
    }
    let shown: Vec<String> = found.iter().map(|(_, p)| show(p)).collect();
    let mut text = shown.join("\n");
    if total > shown.len() {
        text.push_str(&format!(
            "\n[{} more files not shown; narrow the pattern or the path]",
            total - shown.len()
        ));
    }
    Ok(ToolOutcome::Ok {
        content: text,
        meta: Some(json!({ "num_files": total, "truncated": total > shown.len() })),
    })
}

/// `path` without `.` components (the walk root may be relative to nothing if cwd was).
fn absolute(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;

    #[test]
    fn schema_is_pinned() {
        crate::input::assert_schema(
            GlobTool.input_schema(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "The glob to match against paths relative to `path`, e.g. `**/*.rs`."
                    },
                    "path": {
                        "type": "string",
                        "description": "The directory to search in (default: the working directory)."
                    }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        );
    }

    #[test]
    fn absolute_patterns_split() {
        let b = Some("/cwd");
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            split_pattern(b, "/a/b/**/*.rs"),
            (some("/a/b"), "**/*.rs".into())
        );
        assert_eq!(
            split_pattern(b, "/a/b/c.txt"),
            (some("/a/b"), "c.txt".into())
        );
        assert_eq!(
            split_pattern(b, "./src/*.rs"),
            (some("/cwd"), "src/*.rs".into())
        );
        assert_eq!(split_pattern(None, "src/*.rs"), (None, "src/*.rs".into()));
        assert_eq!(split_pattern(b, "/*.rs"), (some("/"), "*.rs".into()));
        assert_eq!(
            search_dir(&serde_json::json!({"pattern": "/home/u/.ssh/*", "path": "."})),
            some("/home/u/.ssh")
        );
    }

    #[test]
    fn hidden_patterns() {
        assert!(mentions_hidden(".github/**/*.yml"));
        assert!(!mentions_hidden("**/*.rs"));
        assert!(!mentions_hidden("../x/*.rs"));
    }
}
