//! How the capability tools and events look in the interactive UI — hook runs, WebFetch and
//! WebSearch (and the provider's own search), the pinned task list, notebook edits, skills,
//! custom commands and the `/rewind` picker — built from the events a session emits and
//! rendered with ratatui's test backend, compared with snapshots.

// A test crate: a failed unwrap or panic is a failed test (clippy.toml exempts only #[test] functions and #[cfg(test)] code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel_core::event::{CallMeta, Emitted, Envelope, Event, InitInfo, ToolResultEvent};
use keel_core::hooks::{HookEvent, HookProgress, HookRunEnd};
use keel_core::permissions::AllowedBy;
use keel_core::TurnEnd;
use keel_tui::app::{Action, App, Modal};
use keel_tui::editor::History;
use keel_tui::view::{self, LiveArea};
use ratatui::backend::TestBackend;
use ratatui::text::Line;
use ratatui::Terminal;
use serde_json::{json, Value};

fn app_in(cwd: PathBuf) -> App {
    let mut a = App::new(cwd, History::default());
    a.status.model = "claude-sonnet-4-5".into();
    a.status.mode = "default".into();
    a.status.cost_usd = 0.0123;
    a.status.context_tokens = 30_000;
    a.status.context_window = Some(200_000);
    a
}

fn app() -> App {
    app_in(PathBuf::from("/nonexistent-keel-test"))
}

fn emitted(event: Event) -> Emitted {
    Emitted {
        envelope: Envelope {
            uuid: "u".into(),
            session_id: "s".into(),
            parent_tool_use_id: None,
            timestamp: "t".into(),
        },
        event,
    }
}

fn block(a: &mut App, b: Value) {
    let message = serde_json::from_value(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [b], "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}
    }))
    .unwrap();
    a.on_event(&emitted(Event::Assistant {
        message,
        request_id: None,
    }));
}

fn call(a: &mut App, id: &str, name: &str, input: Value) {
    block(
        a,
        json!({"type": "tool_use", "id": id, "name": name, "input": input}),
    );
}

fn result(a: &mut App, id: &str, text: &str, is_error: bool, detail: Option<Value>) {
    a.on_event(&emitted(Event::ToolResult(ToolResultEvent {
        block: serde_json::from_value(
            json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": is_error}),
        )
        .unwrap(),
        detail,
        meta: CallMeta::Ran {
            allowed_by: AllowedBy::ReadOnly,
            stopped: None,
        },
    })));
}

fn key(a: &mut App, code: KeyCode) -> Vec<Action> {
    a.on_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn send(a: &mut App, s: &str) -> Vec<Action> {
    for c in s.chars() {
        key(a, KeyCode::Char(c));
    }
    key(a, KeyCode::Enter)
}

fn freeze(a: &mut App, now: Instant) {
    if let Some(r) = a.running.as_mut() {
        r.started = now;
        r.last_model = now;
    }
    for t in &mut a.tools {
        t.started = now;
    }
    for h in &mut a.hooks {
        h.started = now;
    }
}

/// The scrollback lines committed since the last call, then the live area, as an 80-column
/// terminal shows them.
fn screen(a: &mut App) -> String {
    let now = Instant::now();
    freeze(a, now);
    let mut lines: Vec<Line<'static>> = Vec::new();
    for l in a.take_committed() {
        let text = keel_tui::markdown::plain(&l);
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            lines.push(Line::raw(""));
        }
        for chunk in chars.chunks(80) {
            lines.push(Line::raw(chunk.iter().collect::<String>()));
        }
    }
    lines.extend(view::frame(a, 80, 40, now).lines);
    let mut t = Terminal::new(TestBackend::new(80, lines.len() as u16)).unwrap();
    t.draw(|f| f.render_widget(LiveArea { lines: &lines }, f.area()))
        .unwrap();
    t.backend().to_string()
}

fn hook(
    a: &mut App,
    id: &str,
    name: &str,
    command: &str,
    event: HookEvent,
    end: Option<HookRunEnd>,
) {
    a.on_event(&emitted(Event::Hook(HookProgress {
        hook_id: id.into(),
        hook_name: name.into(),
        command: command.into(),
        event,
        end,
    })));
}

fn ended(code: Option<i32>, stdout: &str, stderr: &str) -> HookRunEnd {
    HookRunEnd {
        stdout: stdout.into(),
        stderr: stderr.into(),
        exit_code: code,
        outcome: if code == Some(0) { "success" } else { "error" },
    }
}

fn completed() -> TurnEnd {
    TurnEnd::Completed {
        text: String::new(),
    }
}

#[test]
fn hooks_that_blocked_added_context_failed_or_timed_out_get_a_line_and_quiet_ones_none() {
    let mut a = app();
    hook(
        &mut a,
        "h0",
        "SessionStart",
        "git branch --show-current",
        HookEvent::SessionStart,
        None,
    );
    hook(
        &mut a,
        "h0",
        "SessionStart",
        "git branch --show-current",
        HookEvent::SessionStart,
        Some(ended(Some(0), "main\n", "")),
    );
    send(&mut a, "clean up the build");
    hook(
        &mut a,
        "h1",
        "UserPromptSubmit",
        "./log-prompt.sh",
        HookEvent::UserPromptSubmit,
        None,
    );
    hook(
        &mut a,
        "h1",
        "UserPromptSubmit",
        "./log-prompt.sh",
        HookEvent::UserPromptSubmit,
        Some(ended(Some(0), "", "")),
    );
    call(&mut a, "t1", "Bash", json!({"command": "rm -rf target"}));
    hook(
        &mut a,
        "h2",
        "PreToolUse:Bash",
        "./guard.sh",
        HookEvent::PreToolUse,
        None,
    );
    // While it runs, the live area says which hook keel is waiting on.
    let now = Instant::now();
    freeze(&mut a, now);
    let running: Vec<String> = view::frame(&a, 80, 40, now)
        .lines
        .iter()
        .map(|l| l.to_string())
        .collect();
    let running = running.join("\n");
    assert!(
        running.contains("◆ hook PreToolUse:Bash · ./guard.sh · running 0s"),
        "{running}"
    );
    hook(
        &mut a,
        "h2",
        "PreToolUse:Bash",
        "./guard.sh",
        HookEvent::PreToolUse,
        Some(ended(Some(2), "", "rm -rf is not allowed here\n")),
    );
    hook(
        &mut a,
        "h3",
        "PreToolUse:Bash",
        "sleep 60",
        HookEvent::PreToolUse,
        None,
    );
    hook(
        &mut a,
        "h3",
        "PreToolUse:Bash",
        "sleep 60",
        HookEvent::PreToolUse,
        Some(ended(
            None,
            "",
            "did not finish within its 5 s deadline and was stopped",
        )),
    );
    hook(
        &mut a,
        "h4",
        "PostToolUse",
        "./notify.sh",
        HookEvent::PostToolUse,
        None,
    );
    hook(
        &mut a,
        "h4",
        "PostToolUse",
        "./notify.sh",
        HookEvent::PostToolUse,
        Some(ended(Some(1), "", "notify: no such host\n")),
    );
    hook(
        &mut a,
        "h5",
        "Stop",
        "./check-tests.sh",
        HookEvent::Stop,
        None,
    );
    hook(
        &mut a,
        "h5",
        "Stop",
        "./check-tests.sh",
        HookEvent::Stop,
        Some(ended(
            Some(0),
            r#"{"decision":"block","reason":"2 tests still fail"}"#,
            "",
        )),
    );
    let s = screen(&mut a);
    assert!(
        !s.contains("log-prompt"),
        "a hook that did nothing stays quiet:\n{s}"
    );
    assert!(
        !s.contains("running"),
        "finished hooks leave the live area:\n{s}"
    );
    insta::assert_snapshot!(s);
}

fn todos(items: &[(&str, &str)]) -> Value {
    let list: Vec<Value> = items
        .iter()
        .map(|(c, s)| json!({"content": c, "status": s, "activeForm": format!("{c}ing")}))
        .collect();
    json!({ "todos": list })
}

#[test]
fn the_task_list_is_pinned_above_the_prompt_and_updated_in_place() {
    let mut a = app();
    send(&mut a, "ship it");
    call(
        &mut a,
        "t1",
        "TodoWrite",
        todos(&[
            ("Pars", "in_progress"),
            ("Test", "pending"),
            ("Ship", "pending"),
        ]),
    );
    result(
        &mut a,
        "t1",
        "Todos have been modified successfully.",
        false,
        None,
    );
    let first = screen(&mut a);
    call(
        &mut a,
        "t2",
        "TodoWrite",
        todos(&[
            ("Pars", "completed"),
            ("Test", "in_progress"),
            ("Ship", "pending"),
        ]),
    );
    result(
        &mut a,
        "t2",
        "Todos have been modified successfully.",
        false,
        None,
    );
    call(&mut a, "t3", "Bash", json!({"command": "cargo test"}));
    let second = screen(&mut a);
    insta::assert_snapshot!("todo_first", first);
    insta::assert_snapshot!("todo_second", second);
    // The live area holds one list, the latest: it is one block above the spinner.
    let live: Vec<String> = view::frame(&a, 80, 40, Instant::now())
        .lines
        .iter()
        .map(|l| l.to_string())
        .collect();
    assert_eq!(
        live.iter().filter(|l| l.contains("Tasks (")).count(),
        1,
        "{live:?}"
    );
    assert!(live.iter().any(|l| l == "  [x] Pars"), "{live:?}");
    assert!(live.iter().any(|l| l == "  [>] Testing"), "{live:?}");
    // A finished list is not pinned over the next turn; an open one is.
    a.turn_ended(&completed());
    assert!(!a.todos.is_empty());
    call(
        &mut a,
        "t4",
        "TodoWrite",
        todos(&[
            ("Pars", "completed"),
            ("Test", "completed"),
            ("Ship", "completed"),
        ]),
    );
    result(&mut a, "t4", "ok", false, None);
    a.turn_ended(&completed());
    assert!(a.todos.is_empty());
}

#[test]
fn a_failed_todo_write_leaves_the_pinned_list_as_it_was() {
    let mut a = app();
    send(&mut a, "plan");
    call(&mut a, "t1", "TodoWrite", todos(&[("One", "pending")]));
    result(&mut a, "t1", "ok", false, None);
    call(&mut a, "t2", "TodoWrite", json!({"todos": "not a list"}));
    result(
        &mut a,
        "t2",
        "TodoWrite: `todos` must be a list",
        true,
        None,
    );
    assert_eq!(a.todos.len(), 1);
}

#[test]
fn web_fetch_shows_the_domain_status_size_and_a_refusal_truthfully() {
    let mut a = app();
    send(&mut a, "read the docs");
    call(
        &mut a,
        "t1",
        "WebFetch",
        json!({"url": "https://docs.example.com/guide/intro", "prompt": "summary"}),
    );
    result(
        &mut a,
        "t1",
        "The guide explains setup in three steps.",
        false,
        Some(
            json!({"bytes": 12_800, "code": 200, "codeText": "OK", "durationMs": 412,
                    "url": "https://www.example.org/guide/intro",
                    "result": "The guide explains setup in three steps."}),
        ),
    );
    call(
        &mut a,
        "t2",
        "WebFetch",
        json!({"url": "http://169.254.169.254/latest/meta-data", "prompt": "x"}),
    );
    result(
        &mut a,
        "t2",
        "WebFetch refused http://169.254.169.254/latest/meta-data: 169.254.169.254 is a link-local address. Allow it with a rule such as WebFetch(domain:169.254.169.254) if you mean it.",
        true,
        Some(json!("Error: refused")),
    );
    insta::assert_snapshot!(screen(&mut a));
}

#[test]
fn web_search_shows_the_query_the_count_and_the_sources_and_so_does_the_providers_own() {
    let mut a = app();
    send(&mut a, "what is new in rust");
    call(
        &mut a,
        "t1",
        "WebSearch",
        json!({"query": "rust 1.80 release notes"}),
    );
    let links: Vec<Value> = (1..=7)
        .map(|i| json!({"title": format!("Result {i}"), "url": format!("https://site{i}.example/page")}))
        .collect();
    result(
        &mut a,
        "t1",
        "Web search results ...",
        false,
        Some(
            json!({"query": "rust 1.80 release notes", "results": [{"tool_use_id": "t1", "content": links}],
                    "searches": 2, "durationSeconds": 1.25}),
        ),
    );
    block(
        &mut a,
        json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "tokio 2"}}),
    );
    block(
        &mut a,
        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "title": "Tokio blog", "url": "https://tokio.rs/blog", "encrypted_content": "x"}
        ]}),
    );
    block(
        &mut a,
        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_2",
        "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}}),
    );
    insta::assert_snapshot!(screen(&mut a));
}

#[test]
fn notebook_edits_name_the_cell_the_kind_and_preview_the_source() {
    let mut a = app();
    send(&mut a, "fix the notebook");
    call(
        &mut a,
        "t1",
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "cell_id": "c2", "new_source": "df = load()\ndf.describe()", "cell_type": "code"}),
    );
    result(
        &mut a,
        "t1",
        "Replaced the source of cell c2 in analysis.ipynb.",
        false,
        Some(
            json!({"notebook_path": "analysis.ipynb", "cell_id": "c2", "cell_type": "code", "edit_mode": "replace", "new_source": "df = load()\ndf.describe()"}),
        ),
    );
    call(
        &mut a,
        "t2",
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "cell_id": "c2", "new_source": "# Results", "cell_type": "markdown", "edit_mode": "insert"}),
    );
    result(
        &mut a,
        "t2",
        "Inserted cell 7f3a in analysis.ipynb.",
        false,
        Some(
            json!({"notebook_path": "analysis.ipynb", "cell_id": "7f3a", "cell_type": "markdown", "edit_mode": "insert", "new_source": "# Results"}),
        ),
    );
    call(
        &mut a,
        "t3",
        "NotebookEdit",
        json!({"notebook_path": "analysis.ipynb", "cell_id": "cell-0", "new_source": "", "edit_mode": "delete"}),
    );
    result(
        &mut a,
        "t3",
        "Deleted cell cell-0 in analysis.ipynb.",
        false,
        Some(
            json!({"notebook_path": "analysis.ipynb", "cell_id": "cell-0", "cell_type": "code", "edit_mode": "delete", "new_source": ""}),
        ),
    );
    insta::assert_snapshot!(screen(&mut a));
}

fn init(skills: Value) -> Event {
    Event::Init(InitInfo {
        cwd: PathBuf::from("/p"),
        tools: vec!["Skill".into()],
        model: "claude-sonnet-4-5".into(),
        provider: "anthropic".into(),
        permission_mode: "default".into(),
        api_key_source: "ANTHROPIC_API_KEY".into(),
        agents: Vec::new(),
        additional_directories: Vec::new(),
        mcp_servers: Vec::new(),
        output_style: "default".into(),
        account: json!({"skills": {"loaded": skills, "errors": []}}),
        skills: Vec::new(),
        slash_commands: Vec::new(),
    })
}

#[test]
fn a_skill_says_its_name_and_whether_it_is_the_projects_or_yours() {
    let mut a = app();
    send(&mut a, "make the report");
    a.on_event(&emitted(init(
        json!([{"name": "pdf", "scope": "project"}, {"name": "notes", "scope": "user"}]),
    )));
    call(&mut a, "t1", "Skill", json!({"skill": "pdf"}));
    result(
        &mut a,
        "t1",
        "Loaded the skill pdf; its instructions follow.",
        false,
        Some(json!({"success": true, "commandName": "pdf"})),
    );
    call(&mut a, "t2", "Skill", json!({"skill": "notes"}));
    result(
        &mut a,
        "t2",
        "Loaded the skill notes; its instructions follow.",
        false,
        Some(json!({"success": true, "commandName": "notes"})),
    );
    call(&mut a, "t3", "Skill", json!({"skill": "nope"}));
    result(
        &mut a,
        "t3",
        "There is no skill called \"nope\". The skills are: pdf, notes.",
        true,
        None,
    );
    insta::assert_snapshot!(screen(&mut a));
}

#[test]
fn a_custom_command_says_where_it_comes_from() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = dir.path().join(".claude/commands");
    std::fs::create_dir_all(&cmds).unwrap();
    std::fs::write(
        cmds.join("greet.md"),
        "---\ndescription: Greet someone by name\n---\nSay hello to $ARGUMENTS.\n",
    )
    .unwrap();
    let mut a = app_in(dir.path().to_path_buf());
    let actions = send(&mut a, "/greet Bob");
    // Sent as typed: the engine expands it.
    assert_eq!(actions.len(), 1);
    assert!(
        matches!(&actions[0], Action::Turn(c) if serde_json::to_string(c).unwrap().contains("/greet Bob"))
    );
    insta::assert_snapshot!(screen(&mut a));
}

#[test]
fn the_rewind_picker_lists_the_prompts_and_enter_picks_one() {
    let mut a = app();
    a.pick_rewind(vec![
        "add the parser".into(),
        "write tests".into(),
        "refactor everything".into(),
    ]);
    assert!(
        matches!(a.modal, Some(Modal::Rewind { selected: 2, .. })),
        "the latest is highlighted"
    );
    assert!(key(&mut a, KeyCode::Up).is_empty());
    insta::assert_snapshot!(screen(&mut a));
    assert_eq!(key(&mut a, KeyCode::Enter), vec![Action::Rewind(Some(2))]);
    a.pick_rewind(vec!["one".into()]);
    assert!(key(&mut a, KeyCode::Esc).is_empty());
    assert!(a.modal.is_none());
    let s = screen(&mut a);
    assert!(s.contains("Not rewound"), "{s}");
    a.pick_rewind(Vec::new());
    assert!(a.modal.is_none());
}

#[tokio::test]
async fn a_refused_rewind_names_each_file_and_why_and_touches_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(keel_tools::Checkpoints::new(dir.path().join("store")));
    let kept = dir.path().join("kept.txt");
    let gone = dir.path().join("gone.txt");
    store.mark("u1", "write two files");
    for f in [&kept, &gone] {
        store.before_write(f);
        std::fs::write(f, "by keel").unwrap();
        store.after_write(f, b"by keel");
    }
    std::fs::remove_file(&gone).unwrap();
    let lines = keel_tui::rewind::run(Some(store), 1).await;
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    assert!(
        text[0].starts_with("Cannot rewind to prompt 1 (write two files): no file was changed"),
        "{text:?}"
    );
    assert!(
        text.contains(&format!(
            "  ✗ {} was deleted since keel wrote it",
            gone.display()
        )),
        "{text:?}"
    );
    assert!(kept.exists(), "the other file was left as it was");
}

#[test]
fn a_web_fetch_question_shows_the_host_first_and_the_rest_of_the_input() {
    let mut a = app();
    send(&mut a, "check the page");
    call(
        &mut a,
        "t1",
        "WebFetch",
        json!({"url": "http://evil.example\\@docs.example.com/page", "prompt": "What does it say?"}),
    );
    let (tx, _rx) = tokio::sync::oneshot::channel();
    a.ask(
        keel_core::approval::ApprovalRequest {
            tool_name: "WebFetch".into(),
            tool_use_id: "t1".into(),
            input: json!({"url": "http://evil.example\\@docs.example.com/page", "prompt": "What does it say?"}),
            description: None,
            blocked_path: None,
            suggestions: vec![json!({"type": "addRules", "rules": [{"toolName": "WebFetch", "ruleContent": "domain:evil.example"}], "behavior": "allow", "destination": "session"})],
            reason: None,
            mode: keel_core::permissions::PermissionMode::Default,
        },
        tx,
    );
    insta::assert_snapshot!(screen(&mut a));
}
