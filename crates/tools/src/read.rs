//! The Read tool: a text file with line numbers, a window at a time.

use std::io::{self, BufRead, BufReader, Read as _};
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::files::{open_for_read, Encoding, FileStamp, ReadLedger};
use crate::fsutil::{
    human_size, job_failed, looks_binary, numbered, run_blocking, Cancelled, SNIFF_BYTES,
};
use crate::input::InputError;
use crate::lineindex::{self, Found};
use crate::{show, BoxFuture, CancelToken, ToolContext, ToolOutcome};

/// Reads a text file with line numbers.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadTool;

/// Lines shown when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2000;
/// Characters of one line shown before it is cut.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of numbered text one call returns at most (the rest: use `offset`).
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// After the lines shown, the rest of a file is read only to count its lines, and only when
/// that much or less is left: a window at the start of a 1 GB file costs what the window costs.
pub const COUNT_REST_BYTES: u64 = 8 * 1024 * 1024;

const DESCRIPTION: &str = "Read a text file and return its lines numbered like `cat -n` \
(number, tab, text). Reads up to 2000 lines from the start by default; for longer files pass \
`offset` (the first line, counting from 1) and `limit` to read another part. Very long lines are \
cut. Images (PNG, JPEG, GIF, WebP) are shown to you as images; Jupyter notebooks (.ipynb) as \
their cells with ids. Other binary files are refused. \
Read a file before editing it, so your edit matches its exact text.";

/// Read's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The file to read: an absolute path, or one relative to the working directory.
    file_path: String,
    /// The line to start at, counting from 1 (default 1).
    offset: Option<i64>,
    /// How many lines to read (default 2000).
    limit: Option<i64>,
}

impl crate::TypedTool for ReadTool {
    type Input = Input;
    const NAME: &'static str = "Read";
    const KIND: crate::ToolKind = crate::ToolKind::Read;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let start = match inp.offset {
                None | Some(0) => 1,
                Some(n) if n < 0 => {
                    let rule = format!("`offset` must be a line number from 1 up, not {n}.");
                    return InputError::rule("Read", rule).into();
                }
                Some(n) => n as usize,
            };
            let limit = match inp.limit {
                None => DEFAULT_LIMIT,
                Some(n) if n <= 0 => {
                    let rule = format!("`limit` must be at least 1, not {n}.");
                    return InputError::rule("Read", rule).into();
                }
                Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            };
            let path = cx.target(&inp.file_path);
            let reads = cx.reads.clone();
            // A notebook read whole is shown as cells; a window of it as its JSON lines.
            let cells = inp.offset.is_none()
                && inp.limit.is_none()
                && path.extension().is_some_and(|e| e == "ipynb");
            run_blocking(&cx, move |cancel| {
                if cells {
                    if let Some(out) = crate::notebook_view::read_notebook(&path, &reads) {
                        return Ok(out);
                    }
                }
                read_file(&path, start, limit, &cancel, &reads)
            })
            .await
        })
    }
}

fn read_file(
    path: &Path,
    start: usize,
    limit: usize,
    cancel: &CancelToken,
    reads: &ReadLedger,
) -> Result<ToolOutcome, Cancelled> {
    let shown = show(path);
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return job_failed(format!(
            "{shown} is a directory, not a file. Use Glob (or Bash `ls`) to see what it contains."
        ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return job_failed(format!(
            "File does not exist: {shown}. Check the path, or use Glob to find the file by name."
        ))
        }
        Err(e) => return job_failed(format!("Cannot read {shown}: {e}")),
    }
    let (mut file, meta) = match open_for_read(path) {
        Ok(f) => f,
        Err(Ok(refusal)) => return job_failed(refusal),
        Err(Err(e)) => return job_failed(format!("Cannot read {shown}: {e}")),
    };
    let mut sample = Vec::with_capacity(SNIFF_BYTES);
    if let Err(e) = (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut sample)
    {
        return job_failed(format!("Cannot read {shown}: {e}"));
    }
    // Decided on what was read, not on the size: pseudo-files (/proc) report 0 and have lines.
    if sample.is_empty() {
        reads.record(path, FileStamp::of(&meta));
        return Ok(ToolOutcome::ok(format!(
            "The file {shown} is empty (0 bytes)."
        )));
    }
    if let Some(media) = crate::image::media_type(&sample) {
        return read_image(path, file, sample, media, meta.len());
    }
    if looks_binary(&sample) {
        return job_failed(format!(
            "{shown} is a binary file ({}); Read only shows text files.",
            human_size(meta.len())
        ));
    }
    let encoding = sample_encoding(&sample);
    let stamp = FileStamp::of(&meta);
    let window = if start == 1 {
        // From the top: what was sniffed is the start of the window (this also serves
        // pseudo-files, which cannot be read at an offset).
        let reader = BufReader::with_capacity(64 * 1024, io::Cursor::new(sample).chain(file));
        let from = Resume {
            line: 1,
            byte: 0,
            total: reads.lines().total(stamp),
        };
        number_lines(reader, from, start, limit, encoding, cancel, meta.len())
    } else {
        let file = Opened {
            file,
            stamp,
            size: meta.len(),
            encoding,
        };
        window_at(file, start, limit, cancel, reads)
    };
    match window {
        Ok(w) => {
            if w.total_known {
                reads.lines().record(stamp, &[], Some(w.total as u64));
            }
            reads.record(path, stamp);
            Ok(render(path, start, w))
        }
        Err(_) if cancel.is_cancelled() => Err(Cancelled),
        Err(e) => job_failed(format!("Cannot read {shown}: {e}")),
    }
}

/// A text file opened for a Read, and what is known of it.
struct Opened {
    file: std::fs::File,
    stamp: FileStamp,
    size: u64,
    encoding: Encoding,
}

/// The window from line `start` (> 1): found from the nearest line start the agent's index
/// knows for this version of the file, noting new line starts on the way.
fn window_at(
    f: Opened,
    start: usize,
    limit: usize,
    cancel: &CancelToken,
    reads: &ReadLedger,
) -> io::Result<Window> {
    use std::io::{Seek, SeekFrom};
    let Opened {
        mut file,
        stamp,
        size,
        encoding,
    } = f;
    let from = reads.lines().nearest(stamp, start as u64);
    let mut marks = Vec::new();
    let found = lineindex::scan_to(&file, from, start as u64, cancel, &mut marks)?;
    match found {
        Found::End(total) => {
            reads.lines().record(stamp, &marks, Some(total));
            Ok(Window::past_end(total as usize, encoding, size))
        }
        Found::At(byte) => {
            reads.lines().record(stamp, &marks, None);
            file.seek(SeekFrom::Start(byte))?;
            let reader = BufReader::with_capacity(64 * 1024, file);
            let from = Resume {
                line: start,
                byte,
                total: reads.lines().total(stamp),
            };
            number_lines(reader, from, start, limit, encoding, cancel, size)
        }
    }
}

/// An image file, for the model to see: within the API's limits, or refused saying how to
/// make it fit.
fn read_image(
    path: &Path,
    mut file: std::fs::File,
    mut bytes: Vec<u8>,
    media: &str,
    size: u64,
) -> Result<ToolOutcome, Cancelled> {
    use crate::image::{MAX_IMAGE_BYTES, MAX_IMAGE_SIDE};
    let shown = show(path);
    if size > MAX_IMAGE_BYTES {
        return job_failed(format!(
            "{shown} is an image of {}, larger than the {} the model API accepts per image. Make a smaller copy first (for example `convert {shown} -resize 1600x1600 small.png`) and Read that.",
            human_size(size),
            human_size(MAX_IMAGE_BYTES)
        ));
    }
    if let Err(e) = (&mut file)
        .take(MAX_IMAGE_BYTES + 1)
        .read_to_end(&mut bytes)
    {
        return job_failed(format!("Cannot read {shown}: {e}"));
    }
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return job_failed(format!(
            "{shown} grew past {} while it was read; the model API accepts no larger image.",
            human_size(MAX_IMAGE_BYTES)
        ));
    }
    let dims = crate::image::dimensions(&bytes, media);
    if let Some((w, h)) = dims {
        if w > MAX_IMAGE_SIDE || h > MAX_IMAGE_SIDE {
            return job_failed(format!(
                "{shown} is {w}×{h} pixels; the model API accepts at most {MAX_IMAGE_SIDE} pixels a side. Make a smaller copy first (for example `convert {shown} -resize 2000x2000 small.png`) and Read that."
            ));
        }
    }
    let size_text = dims.map_or(String::new(), |(w, h)| format!(", {w}×{h}"));
    let note = format!(
        "{shown}: an image ({media}{size_text}, {}), shown above.",
        human_size(bytes.len() as u64)
    );
    let mut file_meta = json!({"type": media, "originalSize": bytes.len()});
    if let Some((w, h)) = dims {
        file_meta["width"] = json!(w);
        file_meta["height"] = json!(h);
    }
    Ok(ToolOutcome::Ok {
        content: note,
        meta: Some(json!({
            "type": "image",
            "file": file_meta,
            crate::image::IMAGE_DATA_KEY: {"media_type": media, "data": crate::image::encode(&bytes)},
        })),
    })
}

/// The file's encoding as its first bytes tell it (an incomplete sequence at the very end of
/// the sample is the sample's cut, not a fault).
fn sample_encoding(sample: &[u8]) -> Encoding {
    match std::str::from_utf8(sample) {
        Ok(_) => Encoding::Utf8,
        Err(e) if e.error_len().is_none() => Encoding::Utf8,
        Err(_) => Encoding::Latin1,
    }
}

/// The lines of one window, and how many lines the file has.
struct Window {
    text: String,
    /// The last line shown (0 if none).
    last: usize,
    total: usize,
    /// The window was cut by [`MAX_OUTPUT_BYTES`] before reaching `limit`.
    cut_by_size: bool,
    /// How the lines were decoded.
    encoding: Encoding,
    /// Lines that were not valid UTF-8 in a file read as UTF-8 (shown with replacement
    /// characters, and said so).
    lossy_lines: usize,
    /// `total` counts every line of the file (false: reading stopped after the window, the
    /// rest being too large to count cheaply).
    total_known: bool,
    /// Bytes of the file (for the note when the count was not taken).
    size: u64,
}

impl Window {
    /// No line at the offset asked for: the file has `total` lines.
    fn past_end(total: usize, encoding: Encoding, size: u64) -> Self {
        Window {
            text: String::new(),
            last: 0,
            total,
            cut_by_size: false,
            encoding,
            lossy_lines: 0,
            total_known: true,
            size,
        }
    }
}

/// Where the reader given to [`number_lines`] stands: at the start of line `line`, byte `byte`
/// of the file; and the file's line count if it is known already.
struct Resume {
    line: usize,
    byte: u64,
    total: Option<u64>,
}

/// The window of `limit` lines from line `start` (at or after the line the reader stands at).
fn number_lines(
    mut reader: impl BufRead,
    from: Resume,
    start: usize,
    limit: usize,
    encoding: Encoding,
    cancel: &CancelToken,
    size: u64,
) -> io::Result<Window> {
    let end = start.saturating_add(limit); // exclusive
    let mut w = Window::past_end(from.line.saturating_sub(1), encoding, size);
    let mut buf = Vec::new();
    let keep = MAX_LINE_CHARS * 4;
    let mut consumed = from.byte;
    while let Some(len) = read_line_bounded(&mut reader, &mut buf, keep)? {
        w.total += 1;
        consumed += len as u64 + 1;
        if w.total & 0xfff == 0 && cancel.is_cancelled() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
        }
        if w.last > 0 && (w.total >= end || w.cut_by_size) {
            // The window is done: the count is known, or taken only when that is cheap.
            if let Some(total) = from.total.and_then(|t| usize::try_from(t).ok()) {
                w.total = total.max(w.total);
                return Ok(w);
            }
            if size.saturating_sub(consumed) > COUNT_REST_BYTES {
                w.total_known = false;
                return Ok(w);
            }
            w.total += count_lines(&mut reader, cancel)?;
            return Ok(w);
        }
        if w.total < start || w.total >= end || w.cut_by_size {
            continue;
        }
        let (line, lossy) = render_line(&buf, len, encoding);
        w.lossy_lines += usize::from(lossy);
        let entry = numbered(w.total, &line);
        if w.text.len() + entry.len() + 1 > MAX_OUTPUT_BYTES && w.last > 0 {
            w.cut_by_size = true;
            continue;
        }
        if !w.text.is_empty() {
            w.text.push('\n');
        }
        w.text.push_str(&entry);
        w.last = w.total;
    }
    Ok(w)
}

/// The reader's next bytes (empty at the end), past interrupted reads.
fn fill(reader: &mut impl BufRead) -> io::Result<&[u8]> {
    loop {
        match reader.fill_buf() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            // Re-borrowed here: the loop above cannot hold it across iterations.
            Ok(_) => return reader.fill_buf(),
        }
    }
}

/// The lines left in `reader` (a last line without `\n` counts).
fn count_lines(reader: &mut impl BufRead, cancel: &CancelToken) -> io::Result<usize> {
    let mut n = 0;
    let mut open = false;
    loop {
        let buf = fill(reader)?;
        if buf.is_empty() {
            return Ok(n + usize::from(open));
        }
        if cancel.is_cancelled() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
        }
        let lines = buf.iter().filter(|&&b| b == b'\n').count();
        n += lines;
        open = buf.last() != Some(&b'\n');
        let used = buf.len();
        reader.consume(used);
    }
}

/// One line as text: `\r` of CRLF dropped, decoded as `encoding` (UTF-8 that turns out invalid
/// is shown lossily, and the second value says so), cut at [`MAX_LINE_CHARS`] characters.
fn render_line(bytes: &[u8], full_len: usize, encoding: Encoding) -> (String, bool) {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let (text, lossy): (std::borrow::Cow<'_, str>, bool) = match encoding {
        Encoding::Latin1 => (bytes.iter().map(|&b| char::from(b)).collect(), false),
        Encoding::Utf8 => match std::str::from_utf8(bytes) {
            Ok(s) => (s.into(), false),
            Err(_) => (String::from_utf8_lossy(bytes), true),
        },
    };
    (cut_line(&text, full_len, bytes.len()), lossy)
}

fn cut_line(text: &str, full_len: usize, kept: usize) -> String {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!(
            "{}... [line cut at {MAX_LINE_CHARS} characters; it is {full_len} bytes long]",
            &text[..cut]
        ),
        None if full_len > kept + 1 => {
            format!("{text}... [line cut; it is {full_len} bytes long]")
        }
        None => text.to_owned(),
    }
}

/// Read one line (without its `\n`) keeping at most `keep` bytes of it in `out`.
/// Returns the full length of the line, or `None` at end of file.
fn read_line_bounded(
    reader: &mut impl BufRead,
    out: &mut Vec<u8>,
    keep: usize,
) -> io::Result<Option<usize>> {
    out.clear();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let buf = fill(reader)?;
        if buf.is_empty() {
            return Ok(any.then_some(total));
        }
        any = true;
        let (piece, used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = keep.saturating_sub(out.len());
        out.extend_from_slice(&piece[..piece.len().min(room)]);
        total += piece.len();
        reader.consume(used);
        if done {
            return Ok(Some(total));
        }
    }
}

fn render(path: &Path, start: usize, w: Window) -> ToolOutcome {
    let shown = show(path);
    if w.last == 0 {
        return ToolOutcome::failed(format!(
            "{shown} has {} line{}; offset {start} is past the end. Use an offset from 1 to {}.",
            w.total,
            if w.total == 1 { "" } else { "s" },
            w.total
        ));
    }
    let mut text = w.text;
    if let Some(note) = w.encoding.note() {
        text.push_str(&format!("\n\n[{shown}: {note}.]"));
    }
    if w.lossy_lines > 0 {
        text.push_str(&format!(
            "\n\n[{shown}: {} line{} of this file {} not valid UTF-8 and {} shown with replacement characters.]",
            w.lossy_lines,
            if w.lossy_lines == 1 { "" } else { "s" },
            if w.lossy_lines == 1 { "is" } else { "are" },
            if w.lossy_lines == 1 { "is" } else { "are" },
        ));
    }
    if !w.total_known {
        let why = if w.cut_by_size {
            " (the output size limit was reached)"
        } else {
            ""
        };
        text.push_str(&format!(
            "\n\n[{shown}: showing lines {start}-{}{why}; more lines follow ({} in all; its lines were not counted). Use `offset` {} to read on.]",
            w.last,
            human_size(w.size),
            w.last + 1
        ));
    } else if w.last < w.total {
        let why = if w.cut_by_size {
            " (the output size limit was reached)"
        } else {
            ""
        };
        text.push_str(&format!(
            "\n\n[{shown} has {} lines; showing lines {start}-{}{why}. Use `offset` {} to read on.]",
            w.total,
            w.last,
            w.last + 1
        ));
    }
    ToolOutcome::Ok {
        content: text,
        meta: Some(json!({
            "file_path": PathBuf::from(path),
            "start_line": start,
            "num_lines": w.last + 1 - start,
            "total_lines": if w.total_known { json!(w.total) } else { Value::Null },
            "encoding": match w.encoding { Encoding::Utf8 => "utf-8", Encoding::Latin1 => "latin-1" },
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;

    #[test]
    fn schema_is_pinned() {
        crate::input::assert_schema(
            ReadTool.input_schema(),
            serde_json::json!({
                "type": "object",
                "properties": {
                    "file_path": {
                        "type": "string",
                        "description": "The file to read: an absolute path, or one relative to the working directory."
                    },
                    "offset": {
                        "type": "integer",
                        "description": "The line to start at, counting from 1 (default 1)."
                    },
                    "limit": {
                        "type": "integer",
                        "description": "How many lines to read (default 2000)."
                    }
                },
                "required": ["file_path"],
                "additionalProperties": false
            }),
        );
    }

    const TOP: Resume = Resume {
        line: 1,
        byte: 0,
        total: None,
    };

    fn lines(text: &str, start: usize, limit: usize) -> Window {
        number_lines(
            io::Cursor::new(text.as_bytes().to_vec()),
            TOP,
            start,
            limit,
            Encoding::Utf8,
            &CancelToken::new(),
            text.len() as u64,
        )
        .unwrap()
    }

    #[test]
    fn a_window_at_the_start_of_a_huge_file_stops_after_the_window() {
        // What is left after the window is past COUNT_REST_BYTES: it is not read at all.
        let text = "a\nb\nc\nd\n".repeat(10);
        let w = number_lines(
            io::Cursor::new(text.as_bytes().to_vec()),
            TOP,
            2,
            2,
            Encoding::Utf8,
            &CancelToken::new(),
            COUNT_REST_BYTES * 100,
        )
        .unwrap();
        assert_eq!(w.text, "     2\tb\n     3\tc");
        assert!(!w.total_known);
        assert_eq!(
            w.total, 4,
            "read up to the first line after the window, no further"
        );
        let out = render(Path::new("/big.log"), 2, w);
        assert!(out.text().contains("more lines follow"), "{}", out.text());
        assert!(out.text().contains("`offset` 4"), "{}", out.text());
        // A small file is counted to its end, as before.
        let w = lines(&text, 2, 2);
        assert!(w.total_known);
        assert_eq!(w.total, 40);
    }

    #[test]
    fn numbering_and_window() {
        let w = lines("a\nb\r\nc\n", 1, 10);
        assert_eq!(w.text, "     1\ta\n     2\tb\n     3\tc");
        assert_eq!((w.last, w.total), (3, 3));
        let w = lines("a\nb\nc\nd", 2, 2);
        assert_eq!(w.text, "     2\tb\n     3\tc");
        assert_eq!((w.last, w.total), (3, 4));
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "x".repeat(MAX_LINE_CHARS * 10);
        let w = lines(&long, 1, 10);
        assert!(w.text.len() < MAX_LINE_CHARS + 200);
        assert!(w
            .text
            .contains("line cut at 2000 characters; it is 20000 bytes long"));
    }

    #[test]
    fn bounded_reader() {
        let mut r = io::Cursor::new(b"hello world\nhi".to_vec());
        let mut buf = Vec::new();
        assert_eq!(read_line_bounded(&mut r, &mut buf, 5).unwrap(), Some(11));
        assert_eq!(buf, b"hello");
        assert_eq!(read_line_bounded(&mut r, &mut buf, 5).unwrap(), Some(2));
        assert_eq!(buf, b"hi");
        assert_eq!(read_line_bounded(&mut r, &mut buf, 5).unwrap(), None);
    }
}
