//! TodoWrite and NotebookEdit through the keel binary against keel-mock.

use serde_json::{json, Value};

use super::common::Harness;

/// The tool_use_result of the user frame answering the call `id`.
fn result_meta<'a>(run: &'a super::common::Run, id: &str) -> &'a Value {
    run.of("user")
        .into_iter()
        .find(|f| {
            f["message"]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["tool_use_id"] == id))
        })
        .map(|f| &f["tool_use_result"])
        .unwrap_or_else(|| panic!("no tool result for {id}: {}", run.stdout))
}

#[tokio::test]
async fn todowrite_round_trip_shows_the_call_and_old_and_new_lists() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"id":"toolu_t1","name":"TodoWrite","input":{"todos":[
                {"content":"Write the parser","status":"in_progress","activeForm":"Writing the parser"},
                {"content":"Test it","status":"pending","activeForm":"Testing it"}]}}]},
            {"kind":"tool_use","calls":[{"id":"toolu_t2","name":"TodoWrite","input":{"todos":[
                {"content":"Write the parser","status":"completed","activeForm":"Writing the parser"},
                {"content":"Test it","status":"in_progress","activeForm":"Testing it"}]}}]},
            {"kind":"text","text":"Planned."}]}"#,
    )
    .await;
    // No permission flag: the list touches no file, so it needs none.
    let run = h.run_stream("plan it", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let init = &run.of("system/init")[0];
    let tools: Vec<&str> = init["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"TodoWrite") && tools.contains(&"NotebookEdit"),
        "{tools:?}"
    );
    // The call is shown as Claude Code shows it: an assistant tool_use block.
    let call = run
        .of("assistant")
        .into_iter()
        .flat_map(|f| f["message"]["content"].as_array().unwrap().iter())
        .find(|b| b["type"] == "tool_use" && b["id"] == "toolu_t2")
        .expect("the second TodoWrite call is streamed");
    assert_eq!(call["name"], "TodoWrite");
    let first = result_meta(&run, "toolu_t1");
    assert_eq!(first["oldTodos"], json!([]));
    assert_eq!(first["newTodos"][0]["status"], "in_progress");
    let second = result_meta(&run, "toolu_t2");
    assert_eq!(second["oldTodos"], first["newTodos"]);
    assert_eq!(second["newTodos"][0]["status"], "completed");
    assert_eq!(second["newTodos"][1]["activeForm"], "Testing it");
    // The model reads a short confirmation, counted.
    let reqs = h.requests();
    let sent = reqs[2].body["messages"].to_string();
    assert!(
        sent.contains("1 pending, 1 in progress, 0 completed"),
        "{sent}"
    );
    assert!(
        sent.contains("0 pending, 1 in progress, 1 completed"),
        "{sent}"
    );
    // The tool is offered with Claude Code's input schema.
    let offered = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "TodoWrite")
        .expect("TodoWrite is offered");
    let item = &offered["input_schema"]["properties"]["todos"]["items"];
    let item = if item.get("$ref").is_some() {
        let name = item["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
        offered["input_schema"]["$defs"][name].clone()
    } else {
        item.clone()
    };
    let mut props: Vec<&String> = item["properties"].as_object().unwrap().keys().collect();
    props.sort();
    assert_eq!(props, ["activeForm", "content", "status"]);
}

#[tokio::test]
async fn todoread_and_todowrite_are_accepted_in_allowed_tools() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"ok"}]}"#).await;
    let run = h
        .run_stream("hi", &["--allowedTools", "TodoRead,TodoWrite"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert!(!run.stderr.contains("TodoRead"), "{}", run.stderr);
}

const NOTEBOOK: &str = r##"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": 7,
   "id": "first",
   "metadata": {"collapsed": false},
   "outputs": [{"name": "stdout", "output_type": "stream", "text": ["42\n"]}],
   "source": ["x = 41\n", "print(x + 1)"]
  },
  {
   "cell_type": "markdown",
   "id": "notes",
   "metadata": {},
   "source": "# Notes"
  }
 ],
 "metadata": {"kernelspec": {"display_name": "Python 3", "name": "python3"}, "x-custom": true},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

#[tokio::test]
async fn notebookedit_replaces_inserts_and_deletes_leaving_valid_nbformat() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"id":"toolu_early","name":"NotebookEdit","input":{"notebook_path":"nb.ipynb","cell_id":"first","new_source":"too soon"}}]},
            {"kind":"tool_use","calls":[{"id":"toolu_read","name":"Read","input":{"file_path":"nb.ipynb"}}]},
            {"kind":"tool_use","calls":[{"id":"toolu_rep","name":"NotebookEdit","input":{"notebook_path":"nb.ipynb","cell_id":"first","new_source":"y = 1\nprint(y)"}}]},
            {"kind":"tool_use","calls":[{"id":"toolu_ins","name":"NotebookEdit","input":{"notebook_path":"nb.ipynb","cell_id":"first","new_source":"More notes","cell_type":"markdown","edit_mode":"insert"}}]},
            {"kind":"tool_use","calls":[{"id":"toolu_del","name":"NotebookEdit","input":{"notebook_path":"nb.ipynb","cell_id":"notes","new_source":"","edit_mode":"delete"}}]},
            {"kind":"text","text":"Done."}]}"#,
    )
    .await;
    let path = h.cwd().join("nb.ipynb");
    std::fs::write(&path, NOTEBOOK).unwrap();
    let run = h
        .run_stream(
            "edit the notebook",
            &["--permission-mode", "acceptEdits"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let results = run.tool_results();
    let text = |i: usize| results[i]["content"].to_string();
    assert_eq!(
        results[0]["is_error"], true,
        "an unread notebook is refused"
    );
    assert!(text(0).contains("has not been read"), "{}", text(0));
    assert!(
        text(1).contains("<cell id=\\\"first\\\" type=\\\"code\\\""),
        "Read shows cells: {}",
        text(1)
    );
    for (i, r) in results.iter().enumerate().skip(2) {
        assert_ne!(r["is_error"], true, "{}", text(i));
    }
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(
        written.starts_with("{\n \"cells\": [\n  {\n   \"cell_type\""),
        "{written}"
    );
    let nb: Value = serde_json::from_str(&written).expect("the notebook is still JSON");
    assert_eq!(nb["nbformat"], 4);
    assert_eq!(nb["metadata"]["x-custom"], true, "unknown fields are kept");
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{written}");
    let code = &cells[0];
    assert_eq!(code["id"], "first");
    assert_eq!(code["source"], "y = 1\nprint(y)");
    assert_eq!(code["outputs"], json!([]));
    assert_eq!(code["execution_count"], Value::Null);
    assert_eq!(code["metadata"]["collapsed"], false);
    let added = &cells[1];
    assert_eq!(added["cell_type"], "markdown");
    assert_eq!(added["source"], "More notes");
    assert!(added.get("outputs").is_none());
    let id = added["id"].as_str().unwrap();
    assert!(!id.is_empty() && id.len() <= 64 && id != "first");
    for cell in cells {
        for key in ["cell_type", "metadata", "source"] {
            assert!(cell.get(key).is_some(), "cell lacks {key}: {cell}");
        }
    }
}

#[tokio::test]
async fn notebookedit_follows_the_edit_permission_rules() {
    let h = Harness::from_json(
        r#"{"steps":[
            {"kind":"tool_use","calls":[{"name":"Read","input":{"file_path":"nb.ipynb"}}]},
            {"kind":"tool_use","calls":[{"name":"NotebookEdit","input":{"notebook_path":"nb.ipynb","cell_id":"first","new_source":"z"}}]},
            {"kind":"text","text":"Done."}]}"#,
    )
    .await;
    std::fs::write(h.cwd().join("nb.ipynb"), NOTEBOOK).unwrap();
    let run = h
        .run_stream(
            "edit",
            &[
                "--permission-mode",
                "acceptEdits",
                "--disallowedTools",
                "Edit(nb.ipynb)",
            ],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = run.tool_results();
    assert_eq!(r[1]["is_error"], true, "{}", r[1]);
    assert!(
        r[1]["content"].to_string().contains("Edit(nb.ipynb)"),
        "{}",
        r[1]
    );
    assert_eq!(
        std::fs::read_to_string(h.cwd().join("nb.ipynb")).unwrap(),
        NOTEBOOK
    );
}
