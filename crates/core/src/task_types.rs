//! What a background task is and how it stands ([`TaskKind`], [`TaskStatus`]): the words the
//! event types, the wire and the task list share. A leaf, below the task machinery.

use keel_protocol::CancelReason;

/// A limit that cut a task short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Its turn limit.
    MaxTurns,
    /// The session's cost budget.
    Budget,
}

impl Limit {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::MaxTurns => "max_turns",
            Limit::Budget => "budget",
        }
    }
}

/// Who stopped a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KilledBy {
    /// The user (an interrupt, `stop_task`).
    User,
    /// The agent that started it (TaskStop, KillShell, or its own turn ending).
    Parent,
    /// keel, at the end of the session.
    System,
}

impl KilledBy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            KilledBy::User => "user",
            KilledBy::Parent => "parent",
            KilledBy::System => "system",
        }
    }

    /// Who a cancel with `reason` came from.
    pub fn from_reason(reason: CancelReason) -> Self {
        match reason {
            CancelReason::UserInterrupted => KilledBy::User,
            CancelReason::Shutdown => KilledBy::System,
            CancelReason::SiblingError | CancelReason::Timeout => KilledBy::Parent,
        }
    }
}

/// How a task ended (or that it has not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// Still running.
    Running,
    /// Finished its job.
    Completed,
    /// Failed, and why.
    Failed(String),
    /// Stopped by a limit.
    Truncated(Limit),
    /// Stopped by someone.
    Killed(KilledBy),
}

impl TaskStatus {
    /// The status word used in frames and tool results.
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed(_) => "failed",
            TaskStatus::Truncated(_) => "truncated",
            TaskStatus::Killed(_) => "killed",
        }
    }

    /// The status with its detail, e.g. `truncated{max_turns}`.
    pub fn describe(&self) -> String {
        match self {
            TaskStatus::Running | TaskStatus::Completed => self.as_str().to_owned(),
            TaskStatus::Failed(d) => format!("failed{{{d}}}"),
            TaskStatus::Truncated(l) => format!("truncated{{{}}}", l.as_str()),
            TaskStatus::Killed(by) => format!("killed{{by: {}}}", by.as_str()),
        }
    }
}

/// What kind of work a task does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// A subagent.
    Agent {
        /// Its agent type.
        agent_type: String,
    },
    /// A background shell command.
    Shell {
        /// The command.
        command: String,
    },
}

impl TaskKind {
    /// The wire name (`task_type`), also the prefix of its ids.
    pub fn name(&self) -> &'static str {
        match self {
            TaskKind::Agent { .. } => "agent",
            TaskKind::Shell { .. } => "shell",
        }
    }
}
