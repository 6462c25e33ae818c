use super::*;
use crate::{CancelToken, ReadTool, Tool};

const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": 3,
   "id": "aa11",
   "metadata": {"tags": ["keep"]},
   "outputs": [{"name": "stdout", "output_type": "stream", "text": ["hi\n"]}],
   "source": ["print('hi')\n", "x = 1"]
  },
  {
   "cell_type": "markdown",
   "id": "bb22",
   "metadata": {},
   "source": "# Title é"
  }
 ],
 "metadata": {"kernelspec": {"name": "python3"}, "custom": 7},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

async fn setup() -> (tempfile::TempDir, std::path::PathBuf, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.ipynb");
    std::fs::write(&path, NB).unwrap();
    let cx = ToolContext::new(dir.path(), CancelToken::new());
    (dir, path, cx)
}

async fn edit(cx: &ToolContext, input: Value) -> ToolOutcome {
    NotebookEditTool.call(input, cx.clone()).await
}

#[tokio::test]
async fn an_unread_notebook_is_refused_and_read_shows_cells() {
    let (_d, path, cx) = setup().await;
    let input = json!({"notebook_path": "n.ipynb", "cell_id": "aa11", "new_source": "y = 2"});
    let out = edit(&cx, input.clone()).await;
    assert!(out.text().contains("has not been read"), "{out:?}");
    let read = ReadTool
        .call(json!({"file_path": "n.ipynb"}), cx.clone())
        .await;
    let text = read.text();
    assert!(
        text.contains(
            "<cell id=\"aa11\" type=\"code\" execution_count=\"3\">\nprint('hi')\nx = 1\n</cell>"
        ),
        "{text}"
    );
    assert!(text.contains("<output type=\"stream\">\nhi\n"), "{text}");
    assert!(text.contains("# Title é"), "{text}");
    let out = edit(&cx, input).await;
    assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cell = &nb["cells"][0];
    assert_eq!(cell["source"], "y = 2");
    assert_eq!(cell["outputs"], json!([]));
    assert_eq!(cell["execution_count"], Value::Null);
    assert_eq!(
        cell["metadata"]["tags"][0], "keep",
        "unknown fields are kept"
    );
    assert_eq!(nb["metadata"]["custom"], 7);
}

#[tokio::test]
async fn insert_and_delete_keep_valid_nbformat_written_as_jupyter_does() {
    let (_d, path, cx) = setup().await;
    ReadTool
        .call(json!({"file_path": "n.ipynb"}), cx.clone())
        .await;
    let out = edit(&cx, json!({"notebook_path": "n.ipynb", "cell_id": "aa11", "new_source": "z", "cell_type": "code", "edit_mode": "insert"})).await;
    assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("{\n \"cells\": [\n  {\n"),
        "one-space indent: {text}"
    );
    assert!(text.ends_with("}\n") && text.contains("é"), "{text}");
    let nb: Value = serde_json::from_str(&text).unwrap();
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert_eq!(cells[1]["source"], "z");
    assert_eq!(cells[1]["outputs"], json!([]));
    assert!(cells[1]["id"].as_str().unwrap().len() == 8);
    let out = edit(&cx, json!({"notebook_path": "n.ipynb", "cell_id": "bb22", "new_source": "", "edit_mode": "delete"})).await;
    assert!(matches!(out, ToolOutcome::Ok { .. }), "{out:?}");
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(nb["cells"].as_array().unwrap().len(), 2);
    let out = edit(&cx, json!({"notebook_path": "n.ipynb", "cell_id": "cell-9", "new_source": "", "edit_mode": "delete"})).await;
    assert!(out.text().contains("there is no cell cell-9"), "{out:?}");
    let out = edit(
        &cx,
        json!({"notebook_path": "n.ipynb", "new_source": "q", "edit_mode": "insert"}),
    )
    .await;
    assert!(out.text().contains("`cell_type` is required"), "{out:?}");
}
