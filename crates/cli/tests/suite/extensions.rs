//! Skills and custom slash commands end to end: the files in `.claude/skills` and
//! `.claude/commands` (the project's and the user's), what `system/init` lists, and what
//! keel-mock received — in `-p` and in stream-json input alike.

use std::path::Path;

use serde_json::{json, Value};

use super::common::{Harness, Stream};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Every text the request's messages carry, user and tool results alike, in order.
fn texts(request: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in request["messages"].as_array().unwrap() {
        match &m["content"] {
            Value::String(s) => out.push(s.clone()),
            Value::Array(blocks) => {
                for b in blocks {
                    if let Some(t) = b["text"].as_str() {
                        out.push(t.to_owned());
                    }
                    match &b["content"] {
                        Value::String(s) => out.push(s.clone()),
                        Value::Array(inner) => out.extend(
                            inner
                                .iter()
                                .filter_map(|i| i["text"].as_str().map(str::to_owned)),
                        ),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn skill_tool(request: &Value) -> Option<Value> {
    request["tools"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == "Skill")
        .cloned()
}

fn skills_fixture(h: &Harness) {
    write(
        h.cwd(),
        ".claude/skills/release-notes/SKILL.md",
        "---\nname: release-notes\ndescription: Write release notes from the git log\n---\nCollect the changes since $ARGUMENTS and group them by crate.\n",
    );
    write(
        h.home.path(),
        ".claude/skills/haiku/SKILL.md",
        "---\nname: haiku\ndescription: Answer in a haiku\n---\nAnswer in three lines of 5, 7 and 5 syllables.\n",
    );
    write(
        h.cwd(),
        ".claude/skills/broken/SKILL.md",
        "---\nname: Not A Name!\ndescription: x\n---\nbody\n",
    );
}

#[tokio::test]
async fn skills_are_listed_and_a_loaded_skill_reaches_the_model_with_its_arguments() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Skill", "input": {"skill": "release-notes", "args": "v1.2.0"}, "id": "toolu_skill"}]},
            {"kind": "tool_use", "calls": [{"name": "Skill", "input": {"skill": "haiku"}, "id": "toolu_user_skill"}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    skills_fixture(&h);
    let run = h.run_stream("write the notes", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let init = run.of("system")[0];
    assert_eq!(init["subtype"], "init");
    assert_eq!(init["skills"], json!(["release-notes", "haiku"]));
    assert!(init["tools"].as_array().unwrap().contains(&json!("Skill")));
    // The broken file is named, with its field, and the run went on without it.
    let errors = init["keel_capabilities"]["skills"]["errors"]
        .as_array()
        .unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0].as_str().unwrap();
    assert!(e.contains("broken/SKILL.md") && e.contains("`name`"), "{e}");
    assert!(
        run.of("system").iter().any(|f| f["subtype"] == "warning"
            && f["message"].as_str().unwrap().contains("broken/SKILL.md")),
        "a warning says which skill was not loaded"
    );
    let requests = h.requests();
    // The first request lists each skill by name and description; no body yet.
    let first = &requests[0].body;
    let listing = skill_tool(first).expect("the Skill tool is offered")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        listing.contains("- release-notes: Write release notes from the git log"),
        "{listing}"
    );
    assert!(listing.contains("- haiku: Answer in a haiku"), "{listing}");
    let everything = first.to_string();
    assert!(
        !everything.contains("group them by crate"),
        "no body before use"
    );
    // After the call: a short confirmation, then the skill's directory and its body with the
    // arguments put in.
    let second = texts(&requests[1].body);
    let confirm = second
        .iter()
        .position(|t| t.contains("Loaded the skill release-notes"))
        .unwrap();
    let body = second
        .iter()
        .position(|t| t.contains("Collect the changes since v1.2.0 and group them by crate."))
        .expect("the body reached the model");
    assert!(confirm < body, "{second:?}");
    let skill_dir = h.cwd().join(".claude/skills/release-notes");
    assert!(second[body].contains(&format!(
        "Base directory for this skill: {}",
        skill_dir.display()
    )));
    // The user's skill is loaded the same way.
    let third = texts(&requests[2].body);
    assert!(
        third
            .iter()
            .any(|t| t.contains("three lines of 5, 7 and 5")),
        "{third:?}"
    );
}

#[tokio::test]
async fn a_skill_can_be_denied_by_rule_and_an_unknown_one_is_a_clear_error() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [
                {"name": "Skill", "input": {"skill": "release-notes"}, "id": "toolu_denied"},
                {"name": "Skill", "input": {"skill": "nope"}, "id": "toolu_unknown"}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    skills_fixture(&h);
    let run = h
        .run_stream("go", &["--disallowedTools", "Skill(release-notes)"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let results = run.tool_results();
    let text = |id: &str| {
        results
            .iter()
            .find(|b| b["tool_use_id"] == id)
            .map(|b| b["content"].to_string())
            .unwrap()
    };
    assert!(
        text("toolu_denied").contains("Skill(release-notes)"),
        "{}",
        text("toolu_denied")
    );
    assert!(
        text("toolu_unknown").contains("no skill called"),
        "{}",
        text("toolu_unknown")
    );
    let second = texts(&h.requests()[1].body);
    assert!(
        !second.iter().any(|t| t.contains("group them by crate")),
        "{second:?}"
    );
}

#[tokio::test]
async fn without_skills_no_skill_tool_is_offered() {
    let h = Harness::from_json(r#"{"steps":[{"kind":"text","text":"hi"}]}"#).await;
    let run = h.run_stream("hi", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let init = run.of("system")[0];
    assert_eq!(init["skills"], json!([]));
    assert!(skill_tool(&h.requests()[0].body).is_none());
}

fn commands_fixture(h: &Harness) {
    write(
        h.cwd(),
        ".claude/commands/greet.md",
        "---\ndescription: Greet someone\nargument-hint: NAME\n---\nSay hello to $ARGUMENTS, then to $1 again.\n",
    );
    write(
        h.cwd(),
        ".claude/commands/tools/lint.md",
        "Lint $ARGUMENTS.\n",
    );
    write(
        h.home.path(),
        ".claude/commands/mine.md",
        "---\ndescription: my own\n---\nThe user's command.\n",
    );
    write(
        h.cwd(),
        ".claude/commands/bad.md",
        "---\nallowed-tools: Bash(\n---\nx\n",
    );
}

#[tokio::test]
async fn a_custom_command_in_print_mode_is_expanded_before_the_model_sees_it() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"hello Bob"}]}"#,
    )
    .await;
    commands_fixture(&h);
    let run = h.run_stream("/greet Bob", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let init = run.of("system")[0];
    let listed = init["slash_commands"].as_array().unwrap();
    for name in ["greet", "tools:lint", "mine"] {
        assert!(listed.contains(&json!(name)), "{name} in {listed:?}");
    }
    assert!(!init["skills"].as_array().unwrap().contains(&json!("greet")));
    let e = init["keel_capabilities"]["commands"]["errors"][0]
        .as_str()
        .unwrap();
    assert!(e.contains("bad.md") && e.contains("`allowed-tools`"), "{e}");
    let sent = texts(&h.requests()[0].body);
    let named = sent
        .iter()
        .position(|t| {
            t.contains("<command-name>/greet</command-name>")
                && t.contains("<command-args>Bob</command-args>")
        })
        .expect("a block names the command");
    let body = sent
        .iter()
        .position(|t| t == "Say hello to Bob, then to Bob again.")
        .expect("the body, arguments put in");
    assert!(named < body, "{sent:?}");
    assert!(!sent.iter().any(|t| t == "/greet Bob"), "{sent:?}");
    // A namespaced one and the user's own work the same way.
    let run = h.run_stream("/tools:lint src", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(texts(&h.requests()[1].body)
        .iter()
        .any(|t| t == "Lint src."));
    let run = h.run_stream("/mine", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(texts(&h.requests()[2].body)
        .iter()
        .any(|t| t == "The user's command."));
    // A /word that names no command goes to the model as typed.
    let run = h.run_stream("/unknown-thing please", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(texts(&h.requests()[3].body)
        .iter()
        .any(|t| t == "/unknown-thing please"));
}

#[tokio::test]
async fn a_custom_command_sent_as_stream_json_input_is_expanded() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    commands_fixture(&h);
    let mut s = Stream::start(&h, &[], &[]);
    s.user("/greet Ada").await;
    let result = s.result().await;
    assert_eq!(result["subtype"], "success");
    let init = s.wait(|f| f["subtype"] == "init").await;
    assert!(init["slash_commands"]
        .as_array()
        .unwrap()
        .contains(&json!("greet")));
    s.finish().await;
    let sent = texts(&h.requests()[0].body);
    assert!(
        sent.iter()
            .any(|t| t == "Say hello to Ada, then to Ada again."),
        "{sent:?}"
    );
}

#[tokio::test]
async fn a_repository_command_cannot_approve_a_command_the_user_did_not_allow() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "rm victim.txt"}, "id": "toolu_rm"}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    write(
        h.cwd(),
        ".claude/commands/cleanup.md",
        "---\nallowed-tools: Bash(rm:*), Bash\n---\nRemove the junk.\n",
    );
    std::fs::write(h.cwd().join("victim.txt"), "keep me").unwrap();
    let run = h.run_stream("/cleanup", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert!(
        h.cwd().join("victim.txt").exists(),
        "the repository's command approved nothing"
    );
    let denials = run.result()["permission_denials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{denials:?}");
    assert_eq!(denials[0]["tool_name"], "Bash");
}

#[tokio::test]
async fn allowed_tools_narrow_the_commands_turn_only() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [
                {"name": "Bash", "input": {"command": "touch outside-list.txt"}, "id": "toolu_touch"},
                {"name": "Read", "input": {"file_path": "notes.txt"}, "id": "toolu_read"}]},
            {"kind": "text", "text": "done"},
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch later.txt"}, "id": "toolu_later"}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    write(
        h.cwd(),
        ".claude/commands/status.md",
        "---\nallowed-tools: Bash(git status:*)\n---\nShow the status.\n",
    );
    std::fs::write(h.cwd().join("notes.txt"), "notes").unwrap();
    // The user allows every Bash command; the command's list still narrows its own turn.
    let mut s = Stream::start(&h, &["--allowedTools", "Bash"], &[]);
    s.user("/status").await;
    let first = s.result().await;
    assert_eq!(
        first["permission_denials"].as_array().unwrap().len(),
        1,
        "{first}"
    );
    assert!(!h.cwd().join("outside-list.txt").exists());
    s.user("now touch it").await;
    let second = s.result().await;
    assert_eq!(second["permission_denials"], json!([]), "{second}");
    s.finish().await;
    assert!(
        h.cwd().join("later.txt").exists(),
        "the next turn is not narrowed"
    );
    let sent = texts(&h.requests()[1].body);
    assert!(
        sent.iter()
            .any(|t| t.contains("allowed-tools (Bash(git status:*))")),
        "{sent:?}"
    );
    assert!(
        sent.iter().any(|t| t.contains("notes")),
        "reads keep working: {sent:?}"
    );
}

#[tokio::test]
async fn a_users_own_command_pre_approves_what_it_lists() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "touch made.txt"}, "id": "toolu_touch"}]},
            {"kind": "text", "text": "done"}
        ]})
        .to_string(),
    )
    .await;
    write(
        h.home.path(),
        ".claude/commands/make.md",
        "---\nallowed-tools: Bash(touch:*)\n---\nMake the file.\n",
    );
    let run = h.run_stream("/make", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.result()["permission_denials"], json!([]));
    assert!(h.cwd().join("made.txt").exists());
}

#[tokio::test]
async fn a_commands_model_is_used_for_its_turn_only() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    write(
        h.cwd(),
        ".claude/commands/deep.md",
        "---\nmodel: claude-opus-4-1\n---\nThink hard about $ARGUMENTS.\n",
    );
    let mut s = Stream::start(&h, &["--model", "claude-sonnet-4-5"], &[]);
    s.user("/deep caching").await;
    s.result().await;
    s.user("and now something small").await;
    s.result().await;
    s.finish().await;
    let requests = h.requests();
    assert_eq!(requests[0].body["model"], "claude-opus-4-1");
    assert_eq!(requests[1].body["model"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn setting_sources_choose_whose_skills_and_commands_load() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    skills_fixture(&h);
    commands_fixture(&h);
    let run = h
        .run_stream("hi", &["--setting-sources", "user"], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    let init = run.of("system")[0];
    assert_eq!(init["skills"], json!(["haiku"]));
    assert_eq!(init["slash_commands"], json!(["mine"]));
    let run = h
        .run_stream("/greet Bob", &["--setting-sources", ""], &[])
        .await;
    run.assert_end("success", false, "completed", 0);
    assert_eq!(run.of("system")[0]["skills"], json!([]));
    // Not loaded, so not a command: the prompt goes as typed.
    assert!(texts(&h.requests()[1].body)
        .iter()
        .any(|t| t == "/greet Bob"));
}

#[tokio::test]
async fn a_skill_loaded_beside_a_subagent_reaches_the_parent_not_the_subagent() {
    let h = Harness::from_json(
        &json!({"steps": [
            {"kind": "tool_use", "match": {"first_user_contains": "parent prompt"}, "calls": [
                {"name": "Skill", "input": {"skill": "haiku"}, "id": "toolu_skill"},
                {"name": "Task", "input": {"description": "d", "prompt": "child prompt", "subagent_type": "general-purpose"}, "id": "toolu_task"}]},
            {"kind": "tool_use", "match": {"first_user_contains": "child prompt"}, "calls": [
                {"name": "Read", "input": {"file_path": "notes.txt"}, "id": "toolu_child_read"}]},
            {"kind": "text", "match": {"first_user_contains": "child prompt"}, "text": "child done"},
            {"kind": "text", "match": {"first_user_contains": "parent prompt"}, "text": "parent done"}
        ]})
        .to_string(),
    )
    .await;
    skills_fixture(&h);
    std::fs::write(h.cwd().join("notes.txt"), "notes").unwrap();
    let run = h.run_stream("parent prompt", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let requests = h.requests();
    let of = |who: &str| -> Vec<Vec<String>> {
        requests
            .iter()
            .filter(|r| texts(&r.body).first().is_some_and(|t| t.contains(who)))
            .map(|r| texts(&r.body))
            .collect()
    };
    let child = of("child prompt");
    assert!(child.len() >= 2, "{child:?}");
    assert!(
        !child.concat().iter().any(|t| t.contains("three lines")),
        "{child:?}"
    );
    let parent = of("parent prompt");
    assert!(
        parent
            .last()
            .unwrap()
            .iter()
            .any(|t| t.contains("three lines")),
        "{parent:?}"
    );
}
