//! The NotebookEdit tool: replace, insert or delete one cell of a Jupyter notebook, leaving the
//! file valid nbformat 4 JSON.
//!
//! The notebook is parsed as JSON with its keys in their order, changed at one cell, and
//! written back the way Jupyter writes notebooks (one-space indentation, non-ASCII kept as is,
//! a final newline), atomically and keeping the file's owner and mode. Fields keel does not
//! know are kept. A replaced code cell loses its outputs and execution count: they belonged to
//! the old source.

use std::io::{self, Read};
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::files::{check_fresh, open_for_read, refuse_kind, replace_contents, FileStamp};
use crate::fsutil::{job_failed, run_blocking, Cancelled};
use crate::input::InputError;
use crate::{show, BoxFuture, CancelToken, Checkpoints, ReadLedger, ToolContext, ToolOutcome};

/// The largest notebook read or edited.
pub const MAX_NOTEBOOK_BYTES: u64 = 32 * 1024 * 1024;

/// Edits one cell of a notebook.
#[derive(Clone, Copy, Debug, Default)]
pub struct NotebookEditTool;

const DESCRIPTION: &str = "Change one cell of a Jupyter notebook (.ipynb): replace its source, \
insert a new cell, or delete it. Read the notebook first (Read shows each cell with its id); \
the edit is refused for a notebook not read in this session or changed since. `cell_id` names \
the cell (its id as Read shows it, or `cell-N` for the N-th cell counting from 0). With \
`edit_mode` insert, the new cell goes right after `cell_id` (at the top without one) and \
`cell_type` is required. Replacing a code cell clears its outputs and execution count.";

/// What to do to the cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum EditMode {
    /// Replace the cell's source (the default).
    Replace,
    /// Insert a new cell after it.
    Insert,
    /// Delete it.
    Delete,
}

/// A cell's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum CellType {
    /// Code that runs in the kernel.
    Code,
    /// Markdown text.
    Markdown,
}

/// NotebookEdit's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The notebook: an absolute path, or one relative to the working directory.
    notebook_path: String,
    /// The cell to change (or to insert after): its id, or `cell-N` for the N-th cell from 0.
    cell_id: Option<String>,
    /// The cell's new source (ignored when deleting).
    new_source: String,
    /// The cell's type: code or markdown (required to insert; changes the type on replace).
    cell_type: Option<CellType>,
    /// replace (default), insert or delete.
    edit_mode: Option<EditMode>,
}

impl crate::TypedTool for NotebookEditTool {
    type Input = Input;
    const NAME: &'static str = "NotebookEdit";
    const KIND: crate::ToolKind = crate::ToolKind::NotebookEdit;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, inp: Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let mode = inp.edit_mode.unwrap_or(EditMode::Replace);
            if mode == EditMode::Insert && inp.cell_type.is_none() {
                let rule = "`cell_type` is required to insert a cell (code or markdown).";
                return InputError::rule("NotebookEdit", rule).into();
            }
            if mode != EditMode::Insert && inp.cell_id.is_none() {
                let rule = "`cell_id` is required to replace or delete a cell.";
                return InputError::rule("NotebookEdit", rule).into();
            }
            let path = cx.target(&inp.notebook_path);
            let reads = cx.reads.clone();
            let checkpoints = cx.checkpoints.clone();
            run_blocking(&cx, move |cancel| {
                let job = Job {
                    path: &path,
                    inp: &inp,
                    mode,
                    cancel: &cancel,
                    reads: &reads,
                    checkpoints: checkpoints.as_deref(),
                };
                job.run()
            })
            .await
        })
    }
}

struct Job<'a> {
    path: &'a Path,
    inp: &'a Input,
    mode: EditMode,
    cancel: &'a CancelToken,
    reads: &'a ReadLedger,
    checkpoints: Option<&'a Checkpoints>,
}

impl Job<'_> {
    fn run(self) -> Result<ToolOutcome, Cancelled> {
        let shown = show(self.path);
        let (mut file, meta) = match open_for_read(self.path) {
            Ok(f) => f,
            Err(Ok(refusal)) => return job_failed(refusal),
            Err(Err(e)) if e.kind() == io::ErrorKind::NotFound => {
                return job_failed(format!("Notebook does not exist: {shown}."))
            }
            Err(Err(e)) => return job_failed(format!("Cannot read {shown}: {e}")),
        };
        if let Some(why) = refuse_kind(self.path, &meta)
            .or_else(|| (!meta.is_file()).then(|| format!("{shown} is not a regular file.")))
        {
            return job_failed(why);
        }
        if let Err(why) = check_fresh(self.path, &meta, self.reads, "NotebookEdit") {
            return job_failed(why.to_string());
        }
        if meta.len() > MAX_NOTEBOOK_BYTES {
            return job_failed(format!(
                "{shown} is larger than the {} MiB NotebookEdit works on.",
                MAX_NOTEBOOK_BYTES >> 20
            ));
        }
        let mut bytes = Vec::new();
        if let Err(e) = (&mut file).take(MAX_NOTEBOOK_BYTES).read_to_end(&mut bytes) {
            return job_failed(format!("Cannot read {shown}: {e}"));
        }
        drop(file);
        let mut nb = match parse_notebook(&bytes) {
            Ok(nb) => nb,
            Err(why) => return job_failed(format!("{shown} {why}; it was not changed.")),
        };
        let (cell_id, cell_type) = match self.edit(&mut nb) {
            Ok(done) => done,
            Err(why) => return job_failed(format!("{why} ({shown} was not changed).")),
        };
        let data = to_jupyter_json(&nb);
        if let Some(c) = self.checkpoints {
            c.before_write(self.path);
        }
        if let Err(e) = replace_contents(self.path, &data, self.cancel)? {
            return job_failed(format!("Cannot write {shown}: {e}"));
        }
        if let Some(c) = self.checkpoints {
            c.after_write(self.path, &data);
        }
        if let Ok(m) = std::fs::metadata(self.path) {
            self.reads.record(self.path, FileStamp::of(&m));
        }
        let verb = match self.mode {
            EditMode::Replace => "Replaced the source of",
            EditMode::Insert => "Inserted",
            EditMode::Delete => "Deleted",
        };
        Ok(ToolOutcome::Ok {
            content: format!("{verb} cell {cell_id} in {shown}."),
            meta: Some(json!({
                "notebook_path": shown,
                "cell_id": cell_id,
                "cell_type": cell_type,
                "edit_mode": self.mode,
                "new_source": self.inp.new_source,
            })),
        })
    }

    /// Change the notebook; the id and type of the cell changed, or why not.
    fn edit(&self, nb: &mut Map<String, Value>) -> Result<(String, String), NotebookError> {
        let with_ids = cells_have_ids(nb);
        let Some(Value::Array(cells)) = nb.get_mut("cells") else {
            return Err(NotebookError::NoCells);
        };
        let at = match &self.inp.cell_id {
            Some(id) => Some(find_cell(cells, id)?),
            None => None,
        };
        let source = Value::String(self.inp.new_source.clone());
        match (self.mode, at) {
            (EditMode::Insert, at) => {
                let kind = self.inp.cell_type.unwrap_or(CellType::Code);
                let id = with_ids.then(|| new_cell_id(cells));
                let cell = new_cell(kind, id.clone(), source);
                let pos = at.map_or(0, |i| i + 1);
                cells.insert(pos, cell);
                Ok((id.unwrap_or(format!("cell-{pos}")), type_name(kind).into()))
            }
            (EditMode::Delete, Some(i)) => {
                let cell = cells.remove(i);
                Ok((cell_label(&cell, i), cell_type_of(&cell)))
            }
            (EditMode::Replace, Some(i)) => {
                let cell = cells[i]
                    .as_object_mut()
                    .ok_or(NotebookError::CellNotObject(i))?;
                if let Some(kind) = self.inp.cell_type {
                    cell.insert("cell_type".into(), json!(type_name(kind)));
                }
                let code = cell.get("cell_type").and_then(Value::as_str) == Some("code");
                cell.insert("source".into(), source);
                if code {
                    cell.insert("execution_count".into(), Value::Null);
                    cell.insert("outputs".into(), json!([]));
                } else {
                    cell.remove("execution_count");
                    cell.remove("outputs");
                }
                let label = cell_label(&cells[i], i);
                Ok((label, cell_type_of(&cells[i])))
            }
            (_, None) => Err(NotebookError::CellIdRequired),
        }
    }
}

/// Why a notebook cannot be edited (the sentence follows the notebook's path, or stands
/// alone for a cell).
#[derive(Debug, thiserror::Error)]
pub enum NotebookError {
    /// The file is not JSON.
    #[error("is not valid notebook JSON ({0})")]
    NotJson(serde_json::Error),
    /// The JSON is not an object.
    #[error("is not a notebook (its JSON is not an object)")]
    NotObject,
    /// It has no `nbformat` number.
    #[error("is not a notebook (it has no `nbformat` number)")]
    NoVersion,
    /// It is another nbformat than 4.
    #[error("is nbformat {0}; only nbformat 4 notebooks are supported")]
    Version(u64),
    /// It has no `cells` list.
    #[error("is not a notebook (it has no `cells` list)")]
    NoCells,
    /// The cell named is not a JSON object.
    #[error("cell {0} is not a JSON object")]
    CellNotObject(usize),
    /// No cell has this id.
    #[error("no cell has the id `{0}`; Read the notebook to see the cells' ids")]
    NoSuchId(String),
    /// `cell-N` past the last cell.
    #[error("there is no cell {id}: the notebook has {count} cells{}", if *.count == 0 { String::new() } else { format!(" (cell-0 to cell-{})", .count - 1) })]
    NoSuchIndex {
        /// The id asked for.
        id: String,
        /// How many cells there are.
        count: usize,
    },
    /// Replace and delete need a cell.
    #[error("`cell_id` is required to replace or delete a cell")]
    CellIdRequired,
}

/// The notebook's top-level object, when it is nbformat 4 (or why it is not).
pub(crate) fn parse_notebook(bytes: &[u8]) -> Result<Map<String, Value>, NotebookError> {
    let v: Value = serde_json::from_slice(bytes).map_err(NotebookError::NotJson)?;
    let Value::Object(nb) = v else {
        return Err(NotebookError::NotObject);
    };
    match nb.get("nbformat").and_then(Value::as_u64) {
        Some(4) => {}
        Some(n) => return Err(NotebookError::Version(n)),
        None => return Err(NotebookError::NoVersion),
    }
    if !nb.get("cells").is_some_and(Value::is_array) {
        return Err(NotebookError::NoCells);
    }
    Ok(nb)
}

/// Cells carry ids from nbformat 4.5 on.
fn cells_have_ids(nb: &Map<String, Value>) -> bool {
    nb.get("nbformat_minor")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        >= 5
}

/// The index of the cell `id` names: a cell's own id, else `cell-N`.
fn find_cell(cells: &[Value], id: &str) -> Result<usize, NotebookError> {
    if let Some(i) = cells
        .iter()
        .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
    {
        return Ok(i);
    }
    match id
        .strip_prefix("cell-")
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) if n < cells.len() => Ok(n),
        Some(_) => Err(NotebookError::NoSuchIndex {
            id: id.to_owned(),
            count: cells.len(),
        }),
        None => Err(NotebookError::NoSuchId(id.to_owned())),
    }
}

/// A cell's id as the model names it.
pub(crate) fn cell_label(cell: &Value, index: usize) -> String {
    cell.get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("cell-{index}"))
}

fn cell_type_of(cell: &Value) -> String {
    cell.get("cell_type")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned()
}

fn type_name(kind: CellType) -> &'static str {
    match kind {
        CellType::Code => "code",
        CellType::Markdown => "markdown",
    }
}

/// A new cell, its keys in the order Jupyter writes them (sorted).
fn new_cell(kind: CellType, id: Option<String>, source: Value) -> Value {
    let mut cell = Map::new();
    cell.insert("cell_type".into(), json!(type_name(kind)));
    if kind == CellType::Code {
        cell.insert("execution_count".into(), Value::Null);
    }
    if let Some(id) = id {
        cell.insert("id".into(), json!(id));
    }
    cell.insert("metadata".into(), json!({}));
    if kind == CellType::Code {
        cell.insert("outputs".into(), json!([]));
    }
    cell.insert("source".into(), source);
    Value::Object(cell)
}

/// An id no cell has: 8 hex digits (nbformat allows 1–64 of `[a-zA-Z0-9-_]`).
fn new_cell_id(cells: &[Value]) -> String {
    let taken = |id: &str| {
        cells
            .iter()
            .any(|c| c.get("id").and_then(Value::as_str) == Some(id))
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (0u64..)
        .map(|n| {
            format!(
                "{:08x}",
                (seed.wrapping_add(n).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
            )
        })
        .find(|id| !taken(id))
        .unwrap_or_else(|| "keel-cell".into())
}

/// JSON as Jupyter writes notebooks: one-space indentation, UTF-8 as is, a final newline.
pub(crate) fn to_jupyter_json(nb: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    // Serializing a map of JSON values into memory cannot fail.
    let _ = nb.serialize(&mut ser);
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests;
