//! What a tool is, as the policy sees it.

/// What a tool is, for the engine's decisions: which tool a call names (aliases included),
/// which calls edit files, which may cancel their siblings. Decisions never compare names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Runs a shell command.
    Bash,
    /// Reads a file.
    Read,
    /// Creates or replaces a file.
    Write,
    /// Replaces text in a file.
    Edit,
    /// Finds files by pattern.
    Glob,
    /// Searches file contents.
    Grep,
    /// Starts a subagent (the model may also call it `Agent`).
    Task,
    /// Reads a background task's output.
    TaskOutput,
    /// Stops a background task.
    TaskStop,
    /// Stops a background shell (the older name of TaskStop, kept for models that use it).
    KillShell,
    /// Edits one cell of a Jupyter notebook.
    NotebookEdit,
    /// Keeps the session's task list (writes no file).
    TodoWrite,
    /// Loads a skill's instructions into the conversation.
    Skill,
    /// Fetches a web page and answers a question about it.
    WebFetch,
    /// Searches the web through the provider's search tool.
    WebSearch,
    /// A tool defined outside keel (an MCP server, an SDK host).
    External,
}

impl ToolKind {
    /// Other names a model may call this tool by.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            ToolKind::Task => &["Agent"],
            _ => &[],
        }
    }

    /// Whether two tool names name the same tool (`Task` and `Agent`).
    pub fn same_tool(a: &str, b: &str) -> bool {
        a == b
            || [ToolKind::Task].iter().any(|k| {
                let names = |n: &str| n == k.canonical_name() || k.aliases().contains(&n);
                names(a) && names(b)
            })
    }

    /// The name keel's own tool of this kind has (`External` has none of its own).
    pub fn canonical_name(self) -> &'static str {
        match self {
            ToolKind::Bash => "Bash",
            ToolKind::Read => "Read",
            ToolKind::Write => "Write",
            ToolKind::Edit => "Edit",
            ToolKind::Glob => "Glob",
            ToolKind::Grep => "Grep",
            ToolKind::Task => "Task",
            ToolKind::TaskOutput => "TaskOutput",
            ToolKind::TaskStop => "TaskStop",
            ToolKind::KillShell => "KillShell",
            ToolKind::NotebookEdit => "NotebookEdit",
            ToolKind::TodoWrite => "TodoWrite",
            ToolKind::Skill => "Skill",
            ToolKind::WebFetch => "WebFetch",
            ToolKind::WebSearch => "WebSearch",
            ToolKind::External => "",
        }
    }

    /// Whether `called` names a tool of this kind whose own name is `name`.
    pub fn answers_to(self, name: &str, called: &str) -> bool {
        name == called || self.aliases().contains(&called)
    }

    /// Whether calls of this tool write the file named by their [`ToolKind::path_field`].
    pub fn edits_files(self) -> bool {
        matches!(
            self,
            ToolKind::Write | ToolKind::Edit | ToolKind::NotebookEdit
        )
    }

    /// The input field that names the file a file tool acts on.
    pub fn path_field(self) -> Option<&'static str> {
        match self {
            ToolKind::Read | ToolKind::Write | ToolKind::Edit => Some("file_path"),
            ToolKind::NotebookEdit => Some("notebook_path"),
            _ => None,
        }
    }

    /// Whether a failed call cancels its running siblings of the same kind (shell commands
    /// that run side by side usually depend on each other; reads do not).
    pub fn cancels_siblings_on_failure(self) -> bool {
        matches!(self, ToolKind::Bash)
    }
}
