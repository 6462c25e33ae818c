//! What a session tells its front ends, typed.
//!
//! The engine emits [`Event`]s; the [`Emitter`](crate::emit::Emitter) stamps each with an
//! [`Envelope`] (uuid, session id, the Task call it belongs to, time), persists it, and sends
//! it on the session's channel. Every front end reads the same stream: the `-p` printers and
//! the stream-json writer turn events into wire frames with [`crate::wire::frame`], the
//! transcript writer records those frames, an interactive UI reads the events themselves. The
//! wire schema lives in `keel-protocol` and the mapping in one file ([`crate::wire`]), so an
//! internal change here cannot change what an SDK sees.

use std::path::PathBuf;
use std::time::Duration;

use keel_protocol::content::AssistantMessage;
use keel_protocol::{ContentBlock, Extra, PermissionDenial};
use serde_json::Value;

use crate::end::TurnEnd;
use crate::permissions::AllowedBy;
use crate::task_types::{TaskKind, TaskStatus};

/// Who and when, stamped once by the emitter.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// This event's id (the frame's `uuid`).
    pub uuid: String,
    /// The session.
    pub session_id: String,
    /// The Task call whose subagent emitted it, if a subagent did.
    pub parent_tool_use_id: Option<String>,
    /// When it was emitted (RFC 3339, milliseconds).
    pub timestamp: String,
}

/// One stamped event, as front ends receive it.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitted {
    /// Who and when.
    pub envelope: Envelope,
    /// What happened.
    pub event: Event,
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // moved once through a channel; boxing buys nothing
pub enum Event {
    /// A turn of the main agent started: what the session is working with.
    Init(InitInfo),
    /// Something the user should know that did not stop the run.
    Warning {
        /// The message.
        message: String,
        /// Structured detail.
        fields: Extra,
    },
    /// Content the model reads as the user's: the prompt, or a note keel added. Recorded in the
    /// transcript (so a resume sees what the model saw), not shown: front ends know the prompt.
    UserContent {
        /// The blocks.
        content: Vec<ContentBlock>,
    },
    /// One content block of a model reply.
    Assistant {
        /// The reply with exactly this one block.
        message: AssistantMessage,
        /// The API's request id.
        request_id: Option<String>,
    },
    /// The result of one tool call (run, stopped, denied or never started).
    ToolResult(ToolResultEvent),
    /// A transient API error; keel waits and tries again.
    ApiRetry(RetryNotice),
    /// keel switched to the fallback model.
    ModelFallback {
        /// The model that stayed overloaded.
        from: String,
        /// The model used from now on.
        to: String,
        /// Why (`overloaded`).
        trigger: String,
        /// Said for people.
        text: String,
    },
    /// A tool call was refused (by a rule, a hook, the mode, or the user).
    PermissionDenied {
        /// The tool.
        tool_name: String,
        /// The call.
        tool_use_id: String,
        /// Why, and how to allow it.
        message: String,
    },
    /// A raw streaming event, forwarded with `--include-partial-messages` (never persisted).
    StreamEvent {
        /// The event as the API sent it.
        raw: Value,
        /// The id of the message it belongs to.
        message_id: Option<String>,
    },
    /// A subagent or background task started or ended.
    Task(TaskEvent),
    /// What the session is doing (`compacting`, or nothing special any more).
    Status {
        /// `compacting`, or `None`.
        status: Option<String>,
    },
    /// The conversation was compacted: the model now sees a summary and the latest messages.
    CompactBoundary(CompactInfo),
    /// The conversation as it stands after a compaction, recorded (never shown) so that a
    /// resume starts from it; the transcript keeps everything before it too.
    CompactedHistory {
        /// The messages the model sees from now on.
        messages: Vec<keel_protocol::ApiMessage>,
    },
    /// A settings hook started or ended (`system/hook_started` / `hook_response`; shown, not
    /// kept in the transcript).
    Hook(crate::hook_event::HookProgress),
    /// A turn of the main agent ended: the one `result` of the turn.
    Result(TurnReport),
    /// `/clear`: the conversation was dropped and a new session starts (stamped with the old
    /// session's id; everything after it carries the new one).
    ConversationReset {
        /// The new session's id.
        new_conversation_id: String,
        /// The uuid of the user message that asked for it.
        user_message_uuid: String,
    },
}

/// What a compaction did.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactInfo {
    /// `auto` or `manual`.
    pub trigger: String,
    /// Tokens in the context before.
    pub pre_tokens: u64,
    /// Tokens in the context after (estimated).
    pub post_tokens: u64,
    /// How long it took.
    pub duration: std::time::Duration,
    /// Messages kept as they were.
    pub preserved_messages: u64,
    /// The summary the model wrote.
    pub summary: String,
}

/// What `system/init` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct InitInfo {
    /// The working directory.
    pub cwd: PathBuf,
    /// The tools offered, by name.
    pub tools: Vec<String>,
    /// The model.
    pub model: String,
    /// The provider that serves it.
    pub provider: String,
    /// The permission mode's wire name.
    pub permission_mode: String,
    /// Where the API key came from.
    pub api_key_source: String,
    /// The agent types the Task tool offers.
    pub agents: Vec<String>,
    /// Directories granted besides the working directory.
    pub additional_directories: Vec<PathBuf>,
    /// The MCP servers, as `init` lists them (`{name, status}`).
    pub mcp_servers: Vec<serde_json::Value>,
    /// The output style's name.
    pub output_style: String,
    /// The capability account (`keel_capabilities`).
    pub account: serde_json::Value,
    /// The skills loaded (`skills`).
    pub skills: Vec<serde_json::Value>,
    /// The custom commands loaded (`slash_commands`).
    pub slash_commands: Vec<String>,
}

/// Why a call did not run (or did not finish).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonExecution {
    /// It never started.
    Rejected,
    /// It was running and was stopped.
    Interrupted,
    /// It passed its deadline.
    TimedOut,
    /// A call beside it failed.
    SiblingCancelled,
    /// The session's budget ran out with the reply that asked for it.
    Budget,
    /// A rule, hook, the mode or the user refused it.
    UserRejected,
    /// The reply was cut off (output limit) while the call was being written.
    CutOff,
}

impl NonExecution {
    /// The wire name (`tool_result_meta[].non_execution_kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            NonExecution::Rejected => "rejected",
            NonExecution::Interrupted => "interrupted",
            NonExecution::TimedOut => "timed-out",
            NonExecution::SiblingCancelled => "sibling-cancelled",
            NonExecution::Budget => "budget",
            NonExecution::UserRejected => "user-rejected",
            NonExecution::CutOff => "cut-off",
        }
    }
}

/// Who refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenialSource {
    /// A rule, the mode, or headless use.
    Config,
    /// A PreToolUse hook.
    Hook,
    /// The user (or host) answering the approval.
    User,
}

impl DenialSource {
    /// The wire name (`permission_decision.source`).
    pub fn as_str(self) -> &'static str {
        match self {
            DenialSource::Config => "config",
            DenialSource::Hook => "hook",
            DenialSource::User => "user_temporary",
        }
    }
}

/// How a call's permission went and whether it ran (`tool_result_meta`).
#[derive(Clone, Debug, PartialEq)]
pub enum CallMeta {
    /// Nothing to say beyond its id (an unknown tool).
    Plain,
    /// Allowed; it ran (and, with `stopped`, did not finish).
    Ran {
        /// Why it was allowed.
        allowed_by: AllowedBy,
        /// Set when it was stopped.
        stopped: Option<NonExecution>,
    },
    /// It never ran, for this reason.
    NotRun(NonExecution),
    /// It was refused.
    Denied(DenialSource),
}

/// The result of one tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResultEvent {
    /// The `tool_result` block the model reads.
    pub block: ContentBlock,
    /// Structured detail for front ends (`tool_use_result`: Bash's stdout and stderr, ...).
    pub detail: Option<Value>,
    /// How its permission went and whether it ran.
    pub meta: CallMeta,
}

impl ToolResultEvent {
    /// The call this result answers.
    pub fn tool_use_id(&self) -> &str {
        match &self.block {
            ContentBlock::ToolResult(r) => &r.tool_use_id,
            _ => "",
        }
    }
}

/// A retry keel is about to wait for.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryNotice {
    /// The retry's number (1-based).
    pub attempt: u32,
    /// The most retries keel makes.
    pub max_retries: u32,
    /// How long keel waits before it.
    pub delay: Duration,
    /// The HTTP status of the error, if there was one.
    pub status: Option<u16>,
    /// What failed (`overloaded`, `rate_limit`, `server_error`, ...).
    pub label: &'static str,
}

/// A task starting (`end` is `None`) or ending.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskEvent {
    /// The task id (a subagent's agent id for foreground agents).
    pub task_id: String,
    /// What it is doing.
    pub description: String,
    /// What kind of work it is.
    pub kind: TaskKind,
    /// The Task call that started it in the foreground, if one did.
    pub tool_use_id: Option<String>,
    /// How it ended.
    pub end: Option<TaskEnd>,
}

/// How a task ended.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskEnd {
    /// Its end state.
    pub status: TaskStatus,
    /// One line for people.
    pub summary: String,
    /// Where its whole output is, when it was kept.
    pub output_file: Option<PathBuf>,
}

/// How a turn went, for its `result`.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnReport {
    /// How it ended.
    pub end: TurnEnd,
    /// Model calls made.
    pub num_turns: u32,
    /// Wall time of the turn.
    pub duration: Duration,
    /// Time spent waiting on the model API.
    pub api_duration: Duration,
    /// The session's cost so far.
    pub cost: CostReport,
    /// Calls refused in this turn.
    pub denials: Vec<PermissionDenial>,
    /// The stop reason of the last reply.
    pub stop_reason: Option<String>,
    /// Which result of the session this is (0 for the first).
    pub result_index: u32,
    /// The model the session was on at the end, and its provider.
    pub model: String,
    /// The provider that serves `model`.
    pub provider: String,
    /// The transcript's copy in object storage, when one is kept.
    pub transcript_remote: Option<RemoteCopy>,
    /// The `origin` the host put on the user message that started the turn, echoed back.
    pub origin: Option<Value>,
    /// The structured output the turn ended with (`--json-schema`).
    pub structured_output: Option<Value>,
    /// The capability account (`keel_capabilities`).
    pub account: Value,
    /// The built-in command the turn ran instead of calling the model (`clear`).
    pub local_command: Option<&'static str>,
}

/// Where the transcript's remote copy is, and whether it is current.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteCopy {
    /// The URL of the session's pointer object.
    pub url: String,
    /// Whether the copy there holds the whole turn.
    pub current: bool,
    /// Why not, when it does not.
    pub error: Option<String>,
}

impl RemoteCopy {
    /// The report of an upload that ended in `state`.
    pub(crate) fn of(url: String, state: crate::remote::RemoteState) -> Self {
        Self {
            url,
            current: state.is_ok(),
            error: state.err().map(|e| e.to_string()),
        }
    }
}

/// The session's cost, as the result reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct CostReport {
    /// Dollars.
    pub total_usd: f64,
    /// Summed usage (`usage`).
    pub usage: Value,
    /// Per model (`modelUsage`).
    pub model_usage: Value,
    /// Models priced at the fallback rate.
    pub unpriced_models: Vec<String>,
}
