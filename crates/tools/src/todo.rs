//! The TodoWrite tool: the model keeps a short task list that the front ends show.
//!
//! Each call replaces the whole list (the model sends every item, with its status); the result
//! carries the list before and after the call (`oldTodos`, `newTodos`), so a front end can
//! show what changed without keeping state of its own. The list touches no file: it lives as
//! long as the session's tools do.

use std::sync::Mutex;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::input::InputError;
use crate::{BoxFuture, ToolContext, ToolOutcome};

/// The most items a list may hold.
pub const MAX_TODOS: usize = 100;
/// The longest `content` or `activeForm` of one item, in characters.
pub const MAX_TODO_CHARS: usize = 2_000;

/// Keeps the session's task list.
#[derive(Debug, Default)]
pub struct TodoWriteTool {
    list: Mutex<Vec<Todo>>,
}

impl TodoWriteTool {
    /// A tool with an empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// The list as it is now.
    pub fn current(&self) -> Vec<Todo> {
        self.list.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

const DESCRIPTION: &str = "Keep a task list for the current work, shown to the user as you go. \
Use it for work of several steps: list the steps, mark one `in_progress` before you start it, \
and mark it `completed` as soon as it is done. Each call replaces the whole list, so send every \
item each time, with its current status. `content` says the task (\"Run the tests\"), \
`activeForm` says it while it runs (\"Running the tests\"). Skip it for a single, simple step.";

/// Where one task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One task of the list.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Todo {
    /// The task, in the imperative ("Run the tests").
    pub content: String,
    /// Where it stands: pending, in_progress or completed.
    pub status: TodoStatus,
    /// The task as it is being done ("Running the tests").
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

/// TodoWrite's input.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Input {
    /// The whole updated task list.
    todos: Vec<Todo>,
}

/// Why a list is refused (the schema cannot say it), or `None`.
fn check(todos: &[Todo]) -> Option<String> {
    if todos.len() > MAX_TODOS {
        return Some(format!(
            "the list has {} items; at most {MAX_TODOS} are kept. Merge small steps into larger ones.",
            todos.len()
        ));
    }
    for (i, t) in todos.iter().enumerate() {
        for (field, text) in [("content", &t.content), ("activeForm", &t.active_form)] {
            let n = text.chars().count();
            if text.trim().is_empty() {
                return Some(format!(
                    "`todos[{i}].{field}` is empty; say what the task is."
                ));
            }
            if n > MAX_TODO_CHARS {
                return Some(format!(
                    "`todos[{i}].{field}` has {n} characters; at most {MAX_TODO_CHARS} are allowed. Keep each task to a line or two."
                ));
            }
        }
    }
    None
}

impl crate::TypedTool for TodoWriteTool {
    type Input = Input;
    const NAME: &'static str = "TodoWrite";
    const KIND: crate::ToolKind = crate::ToolKind::TodoWrite;
    const DESCRIPTION: &'static str = DESCRIPTION;
    /// It changes no file and runs nothing: a list in memory.
    const READ_ONLY: bool = true;

    fn run<'a>(&'a self, inp: Input, _cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            if let Some(why) = check(&inp.todos) {
                return InputError::rule("TodoWrite", why).into();
            }
            let old = {
                let mut g = self.list.lock().unwrap_or_else(|p| p.into_inner());
                std::mem::replace(&mut *g, inp.todos.clone())
            };
            let count = |s: TodoStatus| inp.todos.iter().filter(|t| t.status == s).count();
            let content = format!(
                "The task list is saved ({} pending, {} in progress, {} completed). Keep it current as you work: mark each task completed as soon as it is done.",
                count(TodoStatus::Pending),
                count(TodoStatus::InProgress),
                count(TodoStatus::Completed),
            );
            ToolOutcome::Ok {
                content,
                meta: Some(json!({ "oldTodos": old, "newTodos": inp.todos })),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CancelToken;
    use crate::Tool;
    use serde_json::Value;

    fn todo(content: &str, status: &str) -> Value {
        json!({"content": content, "status": status, "activeForm": format!("{content}ing")})
    }

    #[tokio::test]
    async fn each_call_replaces_the_list_and_reports_old_and_new() {
        let dir = tempfile::tempdir().unwrap();
        let tool = TodoWriteTool::new();
        let cx = || ToolContext::new(dir.path(), CancelToken::new());
        let first = json!({"todos": [todo("Test", "pending")]});
        let ToolOutcome::Ok { meta, .. } = tool.call(first, cx()).await else {
            panic!("first call failed")
        };
        assert_eq!(meta.unwrap()["oldTodos"], json!([]));
        let second = json!({"todos": [todo("Test", "completed"), todo("Ship", "in_progress")]});
        let ToolOutcome::Ok { content, meta } = tool.call(second, cx()).await else {
            panic!("second call failed")
        };
        let meta = meta.unwrap();
        assert_eq!(meta["oldTodos"], json!([todo("Test", "pending")]));
        assert_eq!(meta["newTodos"][1]["status"], "in_progress");
        assert!(
            content.contains("0 pending, 1 in progress, 1 completed"),
            "{content}"
        );
        assert_eq!(tool.current().len(), 2);
    }

    #[tokio::test]
    async fn bad_lists_are_refused_and_keep_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let tool = TodoWriteTool::new();
        let cx = || ToolContext::new(dir.path(), CancelToken::new());
        let ok = json!({"todos": [todo("Test", "pending")]});
        assert!(matches!(tool.call(ok, cx()).await, ToolOutcome::Ok { .. }));
        let cases = [
            (
                json!({"todos": [todo("Test", "done")]}),
                "expected one of `pending`, `in_progress`, `completed`",
            ),
            (
                json!({"todos": [todo(" ", "pending")]}),
                "`todos[0].content` is empty",
            ),
            (
                json!({"todos": [todo(&"x".repeat(MAX_TODO_CHARS + 1), "pending")]}),
                "characters; at most 2000",
            ),
            (
                json!({"todos": (0..=MAX_TODOS).map(|i| todo(&format!("t{i}"), "pending")).collect::<Vec<_>>()}),
                "at most 100 are kept",
            ),
        ];
        for (input, want) in cases {
            let out = tool.call(input, cx()).await;
            assert!(
                matches!(&out, ToolOutcome::Failed { message, .. } if message.contains(want)),
                "{want}: {out:?}"
            );
        }
        assert_eq!(tool.current()[0].content, "Test");
    }
}
