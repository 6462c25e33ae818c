//! The hook events keel fires ([`HookEvent`]) and what a hook run reports
//! ([`HookProgress`]): the vocabulary that events, the wire and the hooks all speak. A leaf,
//! so that the event types need nothing of the hooks' machinery.

use std::fmt;

/// The hook events keel fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// Before a tool call runs.
    PreToolUse,
    /// After a tool call ran.
    PostToolUse,
    /// When a prompt arrives, before the model sees it.
    UserPromptSubmit,
    /// When the model ends its turn.
    Stop,
    /// Before the conversation is compacted.
    PreCompact,
    /// When a subagent ends its turn.
    SubagentStop,
    /// When a session starts (or is resumed).
    SessionStart,
    /// When a session ends.
    SessionEnd,
    /// When keel needs the user (a permission question).
    Notification,
    /// When a permission question is about to be asked: the hook may answer it.
    PermissionRequest,
    /// After a tool call failed (instead of PostToolUse).
    PostToolUseFailure,
    /// When a subagent starts, before its first request.
    SubagentStart,
}

impl HookEvent {
    /// Every event keel fires.
    pub const ALL: [HookEvent; 12] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::PreCompact,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::Notification,
        HookEvent::PermissionRequest,
        HookEvent::PostToolUseFailure,
        HookEvent::SubagentStart,
    ];

    /// The wire name (`hook_event_name`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::SubagentStart => "SubagentStart",
        }
    }

    /// Parse a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Whether hooks of this event are matched against a tool name.
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
        )
    }

    /// For the other events, the input field a matcher is compared with (SessionStart's
    /// `source`, SessionEnd's `reason`, PreCompact's `trigger`, Notification's
    /// `notification_type`, SubagentStart/SubagentStop's `agent_type`); `None`: matchers are
    /// ignored and every hook of the event runs.
    pub fn matched_field(self) -> Option<&'static str> {
        match self {
            HookEvent::SessionStart => Some("source"),
            HookEvent::SessionEnd => Some("reason"),
            HookEvent::PreCompact => Some("trigger"),
            HookEvent::Notification => Some("notification_type"),
            HookEvent::SubagentStart | HookEvent::SubagentStop => Some("agent_type"),
            _ => None,
        }
    }

    /// Whether a hook of this event can stop what it is about (a failing guard then blocks
    /// unless it opted out): PreToolUse, UserPromptSubmit, PermissionRequest.
    pub fn guards(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::UserPromptSubmit | HookEvent::PermissionRequest
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one hook run ended, for its `system/hook_response` frame.
#[derive(Clone, Debug, PartialEq)]
pub struct HookRunEnd {
    /// What it printed on stdout (bounded).
    pub stdout: String,
    /// What it printed on stderr (bounded), or why it failed.
    pub stderr: String,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// `success`, `error` or `cancelled`.
    pub outcome: &'static str,
}

/// One hook starting or ending (`system/hook_started`, `system/hook_response`).
#[derive(Clone, Debug, PartialEq)]
pub struct HookProgress {
    /// Pairs the start with the end.
    pub hook_id: String,
    /// `Event:matcher` or `Event`, as Claude Code names hooks.
    pub hook_name: String,
    /// The hook's shell command, cut to 80 characters (the interactive UI names it).
    pub command: String,
    /// The event.
    pub event: HookEvent,
    /// `None`: it started; otherwise how it ended.
    pub end: Option<HookRunEnd>,
}
