//! The Grep tool: regex search over files, gitignore-aware, without an `rg` binary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use globset::{Glob, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::fsutil::{job_failed, run_blocking, Cancelled};
use crate::input::InputError;
use crate::{show, BoxFuture, CancelToken, ToolContext, ToolOutcome};

/// Searches file contents with a regular expression.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrepTool;

/// Characters of one matching line shown before it is cut.
pub const MAX_LINE_CHARS: usize = 1000;

const DESCRIPTION: &str = "Search file contents with a regular expression (Rust regex syntax, \
like ripgrep) under a directory or in one file (default: the working directory). Files ignored \
by .gitignore or .ignore, hidden directories and binary files are skipped. Narrow the search \
with `glob` (e.g. `*.rs`, `src/**/*.ts`) or `type` (e.g. rust, py, js). `output_mode` is \
\"files_with_matches\" (default: matching file paths, most recently modified first), \"content\" \
(matching lines as path:line:text, with optional context lines) or \"count\" (path:count). \
Use this instead of running grep or rg through Bash.";

/// Grep's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The regular expression to search for.
    pattern: String,
    /// The file or directory to search (default: the working directory).
    path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` or `src/**/*.{ts,tsx}`.
    glob: Option<String>,
    /// Only search files of this type, e.g. rust, py, js, ts, go, java, md.
    #[serde(rename = "type")]
    file_type: Option<String>,
    /// What to return: "files_with_matches" (default), "content" or "count".
    output_mode: Option<Mode>,
    /// Ignore case.
    #[serde(rename = "-i")]
    ignore_case: Option<bool>,
    /// Show line numbers in content mode (default true).
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    /// Lines of context to show after each match (content mode).
    #[serde(rename = "-A")]
    after: Option<i64>,
    /// Lines of context to show before each match (content mode).
    #[serde(rename = "-B")]
    before: Option<i64>,
    /// Lines of context to show before and after each match (content mode).
    #[serde(rename = "-C")]
    context: Option<i64>,
    /// Let `.` match newlines and patterns span lines (default false).
    multiline: Option<bool>,
    /// Return at most this many lines (content) or entries (other modes).
    head_limit: Option<i64>,
}

/// What a search returns (the field's doc above is what the model reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Content,
    #[default]
    #[serde(rename = "files_with_matches")]
    Files,
    Count,
}

/// Everything a search needs, checked and built before the walk starts.
struct Search {
    root: PathBuf,
    pattern: String,
    mode: Mode,
    matcher: RegexMatcher,
    /// Each thread builds its own searcher (one holds buffers that are not shared).
    searcher: SearcherBuilder,
    globs: Option<Globs>,
    types: Option<ignore::types::Types>,
    line_numbers: bool,
    context: bool,
    head_limit: Option<usize>,
    max_bytes: usize,
    threads: usize,
    /// Files the permission rules forbid reading (passed over in a directory walk).
    hidden: Option<crate::PathFilter>,
    /// How many files the walk passed over for that reason.
    hidden_count: usize,
}

/// What searching one file that matches found.
struct Found {
    shown: String,
    lines: Vec<String>,
    count: u64,
    mtime: Option<SystemTime>,
}

impl Found {
    /// Bytes this file adds to the output (roughly, for a count).
    fn weight(&self) -> usize {
        let lines: usize = self.lines.iter().map(|l| l.len() + 1).sum();
        lines.max(self.shown.len() + 1)
    }
}

/// A file to search, and what searching it found once it has been searched.
struct Entry {
    path: PathBuf,
    state: Searched,
}

/// Whether a file has been searched, and what it gave (boxed: most files give nothing, and
/// the list of a large tree's files is sorted, so its entries are kept small).
enum Searched {
    Not,
    NoMatch,
    Matched(Box<Found>),
}

impl From<Option<Found>> for Searched {
    fn from(found: Option<Found>) -> Self {
        match found {
            Some(f) => Searched::Matched(Box::new(f)),
            None => Searched::NoMatch,
        }
    }
}

/// Files searched at a time between two merges once the walk is over: results are merged in
/// path order after each batch, so the output stops at its cap after at most one batch more
/// than needed.
const BATCH: usize = 512;

impl crate::TypedTool for GrepTool {
    type Input = Input;
    const NAME: &'static str = "Grep";
    const KIND: crate::ToolKind = crate::ToolKind::Grep;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let search = match prepare(inp, &cx) {
                Ok(s) => s,
                Err(e) => return ToolOutcome::failed(e.to_string()),
            };
            run_blocking(&cx, move |cancel| search.run(&cancel)).await
        })
    }
}

/// Why a Grep call's input cannot be searched with; its text is what the model reads.
#[derive(Debug, thiserror::Error)]
enum PrepareError {
    /// The input breaks the schema or one of Grep's own rules.
    #[error(transparent)]
    Input(#[from] InputError),
    /// `pattern` is not a regular expression the matcher accepts.
    #[error("Invalid regex `{pattern}`: {source}{hint}")]
    Regex {
        /// The pattern as given.
        pattern: String,
        /// What the regex compiler said.
        source: grep_regex::Error,
        /// A hint when the pattern looks meant for multiline mode (may be empty).
        hint: &'static str,
    },
}

/// Input that breaks one of Grep's own rules.
fn rule(sentence: impl Into<String>) -> InputError {
    InputError::rule("Grep", sentence)
}

fn nonneg(name: &str, v: Option<i64>) -> Result<Option<usize>, InputError> {
    match v {
        Some(n) if n < 0 => Err(rule(format!("`{name}` must be 0 or more, not {n}."))),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

fn prepare(inp: Input, cx: &ToolContext) -> Result<Search, PrepareError> {
    if inp.pattern.is_empty() {
        return Err(rule("`pattern` is empty; give a regular expression.").into());
    }
    let mode = inp.output_mode.unwrap_or_default();
    let root = match inp.path.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => cx.target(p),
        None => cx.cwd.clone(),
    };
    let multiline = inp.multiline.unwrap_or(false);
    let mut mb = RegexMatcherBuilder::new();
    mb.case_insensitive(inp.ignore_case.unwrap_or(false))
        .multi_line(true);
    if multiline {
        mb.dot_matches_new_line(true);
    } else {
        mb.line_terminator(Some(b'\n'));
    }
    let matcher = mb.build(&inp.pattern).map_err(|e| PrepareError::Regex {
        pattern: inp.pattern.clone(),
        source: e,
        hint: if !multiline && inp.pattern.contains("\\n") {
            " (set `multiline` to true to match across lines)"
        } else {
            ""
        },
    })?;
    let context = nonneg("-C", inp.context)?;
    let before = nonneg("-B", inp.before)?.or(context).unwrap_or(0);
    let after = nonneg("-A", inp.after)?.or(context).unwrap_or(0);
    let head_limit = nonneg("head_limit", inp.head_limit)?.filter(|&n| n > 0);
    let mut sb = SearcherBuilder::new();
    sb.binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .multi_line(multiline);
    if mode == Mode::Content {
        sb.before_context(before).after_context(after);
    }
    let globs = match inp.glob.as_deref().map(str::trim).filter(|g| !g.is_empty()) {
        Some(g) => Some(Globs::new(g)?),
        None => None,
    };
    let types = match inp
        .file_type
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        Some(t) => {
            let mut tb = ignore::types::TypesBuilder::new();
            tb.add_defaults();
            tb.select(t);
            Some(tb.build().map_err(|_| {
                rule(format!(
                    "unknown file `type` \"{t}\". Use a name such as rust, py, js, ts, go, \
                     java, c, cpp, md, json, yaml, or use `glob` instead."
                ))
            })?)
        }
        None => None,
    };
    Ok(Search {
        root,
        pattern: inp.pattern,
        mode,
        matcher,
        searcher: sb,
        globs,
        types,
        line_numbers: inp.line_numbers.unwrap_or(true),
        context: mode == Mode::Content && (before > 0 || after > 0),
        head_limit,
        max_bytes: cx.limits.head_bytes + cx.limits.tail_bytes,
        threads: cx.limits.search_threads.max(1),
        hidden: cx.hidden.clone(),
        hidden_count: 0,
    })
}

/// `glob` filters: a glob without `/` matches a file's name at any depth, one with `/` matches
/// its path relative to the search root. Several globs may be separated by spaces.
struct Globs {
    names: GlobSet,
    paths: GlobSet,
}

impl Globs {
    fn new(spec: &str) -> Result<Self, InputError> {
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        for g in spec.split_whitespace() {
            let g = g.trim_start_matches("./");
            let glob = Glob::new(g).map_err(|e| rule(format!("bad `glob` \"{g}\": {e}")))?;
            if g.contains('/') {
                paths.add(glob);
            } else {
                names.add(glob);
            }
        }
        let build = |b: GlobSetBuilder| b.build().map_err(|e| rule(format!("bad `glob`: {e}")));
        Ok(Globs {
            names: build(names)?,
            paths: build(paths)?,
        })
    }

    fn is_match(&self, root: &Path, path: &Path) -> bool {
        let name_hit = path.file_name().is_some_and(|n| self.names.is_match(n));
        let rel = path.strip_prefix(root).unwrap_or(path);
        name_hit || self.paths.is_match(rel)
    }
}

/// The output collected so far, with the bounds that stop it.
struct Out {
    lines: Vec<String>,
    bytes: usize,
    max_bytes: usize,
    limit: Option<usize>,
    /// Why collection stopped early, if it did.
    stopped: Option<String>,
}

impl Out {
    fn full(&self) -> bool {
        self.stopped.is_some()
    }

    /// Add a line; `false` once a bound is reached (the line is then dropped).
    fn push(&mut self, line: String) -> bool {
        if self.full() {
            return false;
        }
        if self.limit.is_some_and(|l| self.lines.len() >= l) {
            self.stopped = Some(format!(
                "[output limited to {} by head_limit]",
                self.lines.len()
            ));
            return false;
        }
        if self.bytes + line.len() + 1 > self.max_bytes && !self.lines.is_empty() {
            self.stopped = Some(format!(
                "[output cut at about {} bytes; narrow the search with `path`, `glob`, `type` \
                 or `head_limit`]",
                self.max_bytes
            ));
            return false;
        }
        self.bytes += line.len() + 1;
        self.lines.push(line);
        true
    }
}

impl Search {
    fn run(mut self, cancel: &CancelToken) -> Result<ToolOutcome, Cancelled> {
        if !self.root.exists() {
            return job_failed(format!(
                "The search path {} does not exist. Give `path` as an existing file or directory.",
                show(&self.root)
            ));
        }
        let mut out = Out {
            lines: Vec::new(),
            bytes: 0,
            max_bytes: self.max_bytes,
            limit: self.head_limit,
            stopped: None,
        };
        let mut files: Vec<(SystemTime, String)> = Vec::new();
        let mut matched_files = 0usize;
        let mut entries = self.gather(cancel)?;
        'batches: for batch in entries.chunks_mut(BATCH) {
            self.search_batch(batch, cancel)?;
            for e in batch.iter_mut() {
                let Searched::Matched(found) = std::mem::replace(&mut e.state, Searched::Not)
                else {
                    continue;
                };
                matched_files += 1;
                match self.mode {
                    Mode::Files => {
                        files.push((found.mtime.unwrap_or(SystemTime::UNIX_EPOCH), found.shown));
                    }
                    Mode::Count => {
                        out.push(format!("{}:{}", found.shown, found.count));
                    }
                    Mode::Content => {
                        if self.context && matched_files > 1 {
                            out.push("--".into());
                        }
                        for l in found.lines {
                            if !out.push(l) {
                                break;
                            }
                        }
                    }
                }
                if out.full() {
                    break 'batches;
                }
            }
        }
        if self.mode == Mode::Files {
            files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            for (_, p) in files {
                if !out.push(p) {
                    break;
                }
            }
        }
        let hidden_note = (self.hidden_count > 0).then(|| {
            format!(
                "[{} file{} not searched: the permission rules deny reading {}]",
                self.hidden_count,
                if self.hidden_count == 1 {
                    " was"
                } else {
                    "s were"
                },
                if self.hidden_count == 1 { "it" } else { "them" }
            )
        });
        if out.lines.is_empty() {
            let mut content = format!("No matches for {} in {}", self.pattern, show(&self.root));
            if let Some(n) = hidden_note {
                content.push('\n');
                content.push_str(&n);
            }
            return Ok(ToolOutcome::Ok {
                content,
                meta: Some(json!({ "num_files": 0, "num_lines": 0 })),
            });
        }
        let num_lines = out.lines.len();
        let mut text = out.lines.join("\n");
        if let Some(note) = out.stopped {
            text.push('\n');
            text.push_str(&note);
        }
        if let Some(n) = hidden_note {
            text.push('\n');
            text.push_str(&n);
        }
        Ok(ToolOutcome::Ok {
            content: text,
            meta: Some(json!({ "num_files": matched_files, "num_lines": num_lines })),
        })
    }

    /// The files to search, in path order: `root` itself if it is a file, else a
    /// gitignore-aware walk on `threads` threads (sorted afterwards: the order is that of a
    /// one-threaded walk that visits each directory's entries by name).
    ///
    /// The walk's threads search the files as they find them, as long as what they have found
    /// is less than the output can show; past that, files are only listed, and the rest are
    /// searched in path order after the walk, as far as the output goes. Either way a file's
    /// result is the same, so the output does not depend on which thread found what, and the
    /// memory held stays near the output's cap.
    fn gather(&mut self, cancel: &CancelToken) -> Result<Vec<Entry>, Cancelled> {
        if !self.root.is_dir() {
            return Ok(vec![Entry {
                path: self.root.clone(),
                state: Searched::Not,
            }]);
        }
        let mut wb = ignore::WalkBuilder::new(&self.root);
        wb.hidden(true)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git");
        if let Some(t) = self.types.take() {
            wb.types(t);
        }
        let globs = self.globs.take();
        let passed_over = AtomicUsize::new(0);
        // Every matching file is listed in files mode (newest first), so all are searched.
        let (budget, line_budget) = match self.mode {
            Mode::Files => (usize::MAX, usize::MAX),
            Mode::Content | Mode::Count => (self.max_bytes, self.head_limit.unwrap_or(usize::MAX)),
        };
        let (held, held_lines) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let this = &*self;
        let how = this.how();
        let parts = crate::walk::fold(
            wb,
            this.threads,
            cancel,
            || (this.searcher.build(), Vec::new()),
            |(searcher, found): &mut (Searcher, Vec<Entry>), e| {
                if !e.file_type().is_some_and(|t| t.is_file()) {
                    return;
                }
                if let Some(g) = &globs {
                    if !g.is_match(&this.root, e.path()) {
                        return;
                    }
                }
                if this.hidden.as_ref().is_some_and(|h| h.hides(e.path())) {
                    passed_over.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let room = held.load(Ordering::Relaxed) < budget
                    && held_lines.load(Ordering::Relaxed) < line_budget;
                let state = if room {
                    let f = how.search_one(searcher, e.path(), cancel);
                    if let Some(f) = &f {
                        held.fetch_add(f.weight(), Ordering::Relaxed);
                        held_lines.fetch_add(f.lines.len().max(1), Ordering::Relaxed);
                    }
                    f.into()
                } else {
                    Searched::Not
                };
                found.push(Entry {
                    path: e.path().to_path_buf(),
                    state,
                });
            },
        )?;
        self.hidden_count = passed_over.into_inner();
        let mut entries: Vec<Entry> = parts.into_iter().flat_map(|(_, v)| v).collect();
        entries.sort_unstable_by(|a, b| crate::walk::path_order(&a.path, &b.path));
        Ok(entries)
    }

    /// Search the files of `batch` the walk left unsearched, on up to `threads` threads.
    fn search_batch(&self, batch: &mut [Entry], cancel: &CancelToken) -> Result<(), Cancelled> {
        let mut todo: Vec<&mut Entry> = batch
            .iter_mut()
            .filter(|e| matches!(e.state, Searched::Not))
            .collect();
        let threads = self.threads.min(todo.len());
        if threads == 0 {
            return Ok(());
        }
        let how = self.how();
        if threads == 1 {
            let mut searcher = self.searcher.build();
            for e in todo {
                if cancel.is_cancelled() {
                    return Err(Cancelled);
                }
                e.state = how.search_one(&mut searcher, &e.path, cancel).into();
            }
            return Ok(());
        }
        let next = AtomicUsize::new(0);
        let slots: Vec<std::sync::Mutex<&mut Entry>> =
            todo.drain(..).map(std::sync::Mutex::new).collect();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                let mut searcher = self.searcher.build();
                let (how, next, slots) = (&how, &next, &slots);
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= slots.len() || cancel.is_cancelled() {
                        break;
                    }
                    let mut e = slots[i].lock().unwrap_or_else(|p| p.into_inner());
                    e.state = how.search_one(&mut searcher, &e.path, cancel).into();
                });
            }
        });
        if cancel.is_cancelled() {
            return Err(Cancelled);
        }
        Ok(())
    }

    /// What every thread needs to search a file (shareable between threads).
    fn how(&self) -> How<'_> {
        How {
            matcher: &self.matcher,
            mode: self.mode,
            line_numbers: self.line_numbers,
            max_bytes: self.max_bytes,
        }
    }
}

/// How to search one file.
struct How<'a> {
    matcher: &'a RegexMatcher,
    mode: Mode,
    line_numbers: bool,
    max_bytes: usize,
}

impl How<'_> {
    /// Search one file: what it gave if it matches (`None` if it does not, is binary or could
    /// not be read).
    fn search_one(
        &self,
        searcher: &mut Searcher,
        path: &Path,
        cancel: &CancelToken,
    ) -> Option<Found> {
        let mut sink = FileSink {
            mode: self.mode,
            path,
            shown: None,
            line_numbers: self.line_numbers,
            lines: Vec::new(),
            bytes: 0,
            max_bytes: self.max_bytes,
            count: 0,
            binary: false,
            cancel,
        };
        let searched = searcher.search_path(self.matcher, path, &mut sink);
        if searched.is_err() || sink.binary || (sink.count == 0 && sink.lines.is_empty()) {
            return None;
        }
        let mtime = (self.mode == Mode::Files).then(|| {
            std::fs::metadata(path)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH)
        });
        let count = sink.count;
        let lines = std::mem::take(&mut sink.lines);
        Some(Found {
            shown: sink.shown.take().unwrap_or_else(|| show(path)),
            lines,
            count,
            mtime,
        })
    }
}

/// Collects one file's results; they are kept only if the file turns out not to be binary.
struct FileSink<'a> {
    mode: Mode,
    path: &'a Path,
    /// `path` as shown, made at the first line (most files searched have none).
    shown: Option<String>,
    line_numbers: bool,
    lines: Vec<String>,
    /// Bytes in `lines`; past `max_bytes` the file's search stops (the output would be cut anyway).
    bytes: usize,
    max_bytes: usize,
    count: u64,
    binary: bool,
    cancel: &'a CancelToken,
}

impl FileSink<'_> {
    fn line(&mut self, sep: char, number: Option<u64>, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let text = String::from_utf8_lossy(bytes);
        let text = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!("{}... [line cut]", &text[..cut]),
            None => text.into_owned(),
        };
        let path = self.path;
        let shown = self.shown.get_or_insert_with(|| show(path));
        let line = match (self.line_numbers, number) {
            (true, Some(n)) => format!("{shown}{sep}{n}{sep}{text}"),
            _ => format!("{shown}{sep}{text}"),
        };
        self.bytes += line.len() + 1;
        self.lines.push(line);
    }

    fn go_on(&self) -> bool {
        self.bytes <= self.max_bytes && !self.cancel.is_cancelled()
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        match self.mode {
            Mode::Files => {
                self.count = 1;
                return Ok(false);
            }
            Mode::Count => self.count += m.lines().count() as u64,
            Mode::Content => {
                let first = m.line_number();
                for (k, l) in m.lines().enumerate() {
                    self.line(':', first.map(|n| n + k as u64), l);
                }
                self.count += 1;
            }
        }
        Ok(self.go_on())
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.mode == Mode::Content {
            self.line('-', c.line_number(), c.bytes());
        }
        Ok(self.go_on())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.mode == Mode::Content {
            self.lines.push("--".into());
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;

    #[test]
    fn schema_is_pinned() {
        crate::input::assert_schema(
            GrepTool.input_schema(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "The regular expression to search for."
                    },
                    "path": {
                        "type": "string",
                        "description": "The file or directory to search (default: the working directory)."
                    },
                    "glob": {
                        "type": "string",
                        "description": "Only search files matching this glob, e.g. `*.rs` or `src/**/*.{ts,tsx}`."
                    },
                    "type": {
                        "type": "string",
                        "description": "Only search files of this type, e.g. rust, py, js, ts, go, java, md."
                    },
                    "output_mode": {
                        "type": "string",
                        "description": "What to return: \"files_with_matches\" (default), \"content\" or \"count\".",
                        "enum": ["content", "files_with_matches", "count"]
                    },
                    "-i": {
                        "type": "boolean",
                        "description": "Ignore case."
                    },
                    "-n": {
                        "type": "boolean",
                        "description": "Show line numbers in content mode (default true)."
                    },
                    "-A": {
                        "type": "integer",
                        "description": "Lines of context to show after each match (content mode)."
                    },
                    "-B": {
                        "type": "integer",
                        "description": "Lines of context to show before each match (content mode)."
                    },
                    "-C": {
                        "type": "integer",
                        "description": "Lines of context to show before and after each match (content mode)."
                    },
                    "multiline": {
                        "type": "boolean",
                        "description": "Let `.` match newlines and patterns span lines (default false)."
                    },
                    "head_limit": {
                        "type": "integer",
                        "description": "Return at most this many lines (content) or entries (other modes)."
                    }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        );
    }
}
