//! Read of a Jupyter notebook: its cells, each with the id NotebookEdit takes, its type, its
//! source and a short account of its outputs, instead of the raw JSON.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::files::{open_for_read, FileStamp, ReadLedger};
use crate::notebook::{cell_label, parse_notebook, MAX_NOTEBOOK_BYTES};
use crate::{show, ToolOutcome};

/// The most bytes of rendered cells returned; past it the rest is left out, saying so.
const MAX_VIEW_BYTES: usize = 256 * 1024;
/// The most characters of one output's text shown.
const MAX_OUTPUT_CHARS: usize = 2_000;

/// The notebook at `path` as cells, or `None` when it is not a notebook keel can show that
/// way (the caller then reads it as text).
pub(crate) fn read_notebook(path: &Path, reads: &ReadLedger) -> Option<ToolOutcome> {
    let (file, meta) = open_for_read(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_NOTEBOOK_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_NOTEBOOK_BYTES).read_to_end(&mut bytes).ok()?;
    let nb = parse_notebook(&bytes).ok()?;
    let cells = nb.get("cells").and_then(Value::as_array)?;
    let language = nb
        .get("metadata")
        .and_then(|m| m.get("language_info").or_else(|| m.get("kernelspec")))
        .and_then(|l| l.get("name").or_else(|| l.get("language")))
        .and_then(Value::as_str)
        .unwrap_or("python");
    let shown = show(path);
    let mut out = format!(
        "{shown}: a Jupyter notebook with {} cells ({language}). Each cell is shown between <cell> and </cell> with the id NotebookEdit takes.\n",
        cells.len()
    );
    let mut cut = None;
    for (i, cell) in cells.iter().enumerate() {
        let part = render_cell(cell, i);
        if out.len() + part.len() > MAX_VIEW_BYTES {
            cut = Some(i);
            break;
        }
        out.push_str(&part);
    }
    if let Some(i) = cut {
        out.push_str(&format!(
            "[cells {i} to {} are left out: the notebook is too long to show whole. Read it with `offset` and `limit` to see its JSON.]\n",
            cells.len() - 1
        ));
    }
    reads.record(path, FileStamp::of(&meta));
    Some(ToolOutcome::Ok {
        content: out,
        meta: Some(serde_json::json!({
            "file_path": shown,
            "type": "notebook",
            "cells": cells.len(),
        })),
    })
}

fn render_cell(cell: &Value, i: usize) -> String {
    let kind = cell.get("cell_type").and_then(Value::as_str).unwrap_or("?");
    let count = match cell.get("execution_count") {
        Some(Value::Number(n)) => format!(" execution_count=\"{n}\""),
        _ => String::new(),
    };
    let mut s = format!(
        "<cell id=\"{}\" type=\"{kind}\"{count}>\n{}\n</cell>\n",
        cell_label(cell, i),
        text_of(cell.get("source"))
    );
    if let Some(outputs) = cell.get("outputs").and_then(Value::as_array) {
        for o in outputs {
            s.push_str(&render_output(o));
        }
    }
    s
}

/// nbformat keeps text as a string or a list of lines.
fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn render_output(o: &Value) -> String {
    let kind = o.get("output_type").and_then(Value::as_str).unwrap_or("?");
    let text = match kind {
        "stream" => text_of(o.get("text")),
        "error" => format!(
            "{}: {}",
            o.get("ename").and_then(Value::as_str).unwrap_or("Error"),
            o.get("evalue").and_then(Value::as_str).unwrap_or("")
        ),
        _ => {
            let data = o.get("data");
            let plain = text_of(data.and_then(|d| d.get("text/plain")));
            let others: Vec<&str> = data
                .and_then(Value::as_object)
                .map(|d| {
                    d.keys()
                        .map(String::as_str)
                        .filter(|k| *k != "text/plain")
                        .collect()
                })
                .unwrap_or_default();
            match (plain.is_empty(), others.is_empty()) {
                (false, true) => plain,
                (false, false) => format!("{plain}\n[also: {}]", others.join(", ")),
                (true, _) => format!("[{}]", others.join(", ")),
            }
        }
    };
    let n = text.chars().count();
    let text = if n > MAX_OUTPUT_CHARS {
        let kept: String = text.chars().take(MAX_OUTPUT_CHARS).collect();
        format!(
            "{kept}\n[{} more characters of output left out]",
            n - MAX_OUTPUT_CHARS
        )
    } else {
        text
    };
    format!("<output type=\"{kind}\">\n{text}\n</output>\n")
}
