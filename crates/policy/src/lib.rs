//! keel's judgement of a tool call, in one place: what a shell line would run (lowered as
//! bash reads it, wrappers peeled), which commands only read (an allow-list of programs and
//! flags), where a path really leads (resolved as the kernel does), and what the rules and the
//! permission mode say about it.
//!
//! The crate does no I/O of its own: the file system is an injected [`FsView`] ([`RealFs`]
//! asks the kernel, [`FakeFs`] is a tree in memory) and the environment (HOME, PATH) comes in
//! with the [`Roots`] and the [`Policy`].

pub mod fs;
pub mod globdir;
mod kind;
pub mod paths;
pub mod rules;
pub mod shell;

pub use fs::{kpath, FakeFs, FileKind, FsView, RealFs};
pub use kind::ToolKind;
pub use paths::{PatternError, Resolved, Roots};
pub use rules::{
    split_rule_list, wildcard_with, AllowedBy, Decision, Judgement, PathUse, PermissionMode,
    Policy, Rule, RuleError, RuleErrorKind, RuleSource, WebRules,
};
