//! One entry's place in Claude Code's `parentUuid` chain ([`Link`]) and what kind of entry it
//! is: what the reader hands on for every entry, and what the chain walk works on. A leaf.

use keel_protocol::{ContentBlock, Frame, SystemFrame};

/// One entry's place in the `parentUuid` chain.
#[derive(Debug)]
pub(crate) struct Link {
    /// Its line (1-based).
    pub line: usize,
    /// Its `uuid`.
    pub uuid: Box<str>,
    /// Its `parentUuid`.
    pub parent: Option<Box<str>>,
    /// What it is.
    pub kind: LinkKind,
}

/// What a linked entry is.
#[derive(Debug)]
pub(crate) enum LinkKind {
    /// A `user` or `assistant` message.
    Message {
        /// It went to the rebuild as a record (a main-conversation message).
        record: bool,
        /// It may be picked as the newest message of the main conversation.
        main: bool,
        /// Its tool calls or results (`None`: a prompt).
        facts: Option<Box<Facts>>,
    },
    /// A `compact_boundary`: the history starts again there.
    Boundary,
    /// Anything else (`attachment`, `system`, `progress`, ...): it links, it is not sent.
    Other,
}

/// What the put-back of a parallel response needs to know about a message.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// An assistant entry's `message.id`.
    pub(super) msg_id: Option<Box<str>>,
    /// The ids of its `tool_use` blocks.
    pub(super) calls: Vec<Box<str>>,
    /// The `tool_use_id`s of its `tool_result` blocks.
    pub(super) results: Vec<Box<str>>,
}

impl LinkKind {
    /// The kind of a record holding `frame`; `meta`: never the newest main message. Its
    /// [`Facts`] are added only when the links are kept (when the chain walk keeps them).
    pub fn of_frame(frame: &Frame, meta: bool) -> Self {
        match frame {
            Frame::Assistant(a) => LinkKind::Message {
                record: a.parent_tool_use_id.is_none(),
                main: a.parent_tool_use_id.is_none() && !meta,
                facts: None,
            },
            Frame::User(u) => LinkKind::Message {
                record: u.parent_tool_use_id.is_none(),
                main: u.parent_tool_use_id.is_none() && !meta,
                facts: None,
            },
            f if is_compaction(f) => LinkKind::Boundary,
            _ => LinkKind::Other,
        }
    }

    pub(super) fn is_record(&self) -> bool {
        matches!(
            self,
            LinkKind::Message { record: true, .. } | LinkKind::Boundary
        )
    }

    pub(super) fn is_message(&self) -> bool {
        matches!(self, LinkKind::Message { .. })
    }

    pub(super) fn is_main(&self) -> bool {
        matches!(self, LinkKind::Message { main: true, .. })
    }

    pub(super) fn facts(&self) -> Option<&Facts> {
        match self {
            LinkKind::Message {
                record: true,
                main: true,
                facts: Some(f),
            } => Some(f),
            _ => None,
        }
    }
}

impl Facts {
    /// What `frame` says (`None`: a prompt, nothing to put back).
    pub(super) fn of(frame: &Frame) -> Option<Box<Self>> {
        let ids = |bs: &[ContentBlock], result: bool| -> Vec<Box<str>> {
            bs.iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse(t) if !result => Some(t.id.as_str().into()),
                    ContentBlock::ToolResult(r) if result => Some(r.tool_use_id.as_str().into()),
                    _ => None,
                })
                .collect()
        };
        match frame {
            Frame::Assistant(a) => Some(Box::new(Facts {
                msg_id: Some(a.message.id.as_str().into()),
                calls: ids(&a.message.content, false),
                results: Vec::new(),
            })),
            Frame::User(u) => {
                let results = ids(u.message.content.blocks(), true);
                (!results.is_empty()).then(|| {
                    Box::new(Facts {
                        results,
                        ..Facts::default()
                    })
                })
            }
            _ => None,
        }
    }
}

/// A compaction record (keel's, or Claude Code's boundary as the reader maps it).
pub(super) fn is_compaction(f: &Frame) -> bool {
    matches!(f, Frame::System(SystemFrame::Other(v))
        if v.get("subtype").and_then(serde_json::Value::as_str)
            == Some(crate::wire::COMPACTED_HISTORY))
}

/// Something wrong with the chain that the walk went around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainIssue {
    /// What is wrong.
    pub kind: ChainIssueKind,
    /// The entry concerned.
    pub uuid: String,
    /// Its line (1-based).
    pub line: usize,
    /// The parent it names.
    pub parent: String,
}

/// What is wrong with a chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainIssueKind {
    /// The entry's parent is already on the walk: the history starts at the entry.
    Cycle,
    /// No entry of the file has the entry's parent: the history starts at the entry.
    DanglingParent,
}

/// What the walk found, for the notices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainReport {
    /// Breaks the walk went around.
    pub issues: Vec<ChainIssue>,
    /// Main-conversation messages on other branches than the resumed one, not sent.
    pub abandoned: usize,
    /// The first of them (its line).
    pub abandoned_line: Option<usize>,
    /// The walk disagreed with the file order, so the file was read a second time.
    pub reread: bool,
}
