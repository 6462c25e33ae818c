//! What loading a transcript found and repaired, worded for the user.

use std::path::Path;

use super::{Loaded, Notice, NoticeKind, Rebuilt, RepairCause, SCHEMA};

/// What happens to the loaded file, which decides how notices are worded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Disposition {
    /// Appended to: the torn tail is cut, tail repairs are recorded.
    Resume,
    /// Copied into a new file; the old one is left as it was.
    Fork,
    /// Could not be opened for writing: nothing is changed or recorded.
    ReadOnly,
}

pub(super) fn notices(loaded: &Loaded, rebuilt: &Rebuilt, how: Disposition) -> Vec<Notice> {
    let path = &loaded.path;
    let shown = path.display();
    let mut out = Vec::new();
    let notice = |kind, message: String, line| Notice {
        kind,
        message,
        path: path.clone(),
        line,
        tool_use_ids: Vec::new(),
        entry_type: None,
        entry_uuid: None,
    };
    if let Some(h) = &loaded.header {
        if h.schema > SCHEMA {
            out.push(notice(
                NoticeKind::NewerSchema,
                format!(
                    "the transcript {shown} was written by a newer keel ({}, record schema {}; this keel reads schema {SCHEMA}); what this keel does not know was ignored",
                    h.keel_version, h.schema
                ),
                None,
            ));
        }
    }
    for i in &loaded.issues {
        out.push(notice(
            NoticeKind::CorruptLine,
            format!(
                "line {} of the transcript {shown} is damaged ({}); keel skipped it and read the rest of the session",
                i.line, i.reason
            ),
            Some(i.line),
        ));
    }
    if let Some(t) = &loaded.torn {
        let after = match how {
            Disposition::Resume => "; it was ignored and cut off the end of the file",
            Disposition::Fork => "; it was ignored (the original file is left as it was)",
            Disposition::ReadOnly => "; it was ignored",
        };
        out.push(notice(
            NoticeKind::TornTail,
            format!(
                "the last record of the transcript {shown} (line {}, {} bytes) is incomplete ({}): keel was probably stopped while writing it{after}",
                t.line, t.bytes, t.reason
            ),
            Some(t.line),
        ));
    }
    for (kind, n, line) in &loaded.unmapped {
        let (s, were) = if *n == 1 {
            ("y", "was")
        } else {
            ("ies", "were")
        };
        out.push(Notice {
            entry_type: Some(kind.clone()),
            ..notice(
                NoticeKind::UnmappedEntry,
                format!(
                    "{n} `{kind}` entr{s} of the transcript {shown} (the first on line {line}) {were} not sent to the model: keel has no message to map {} onto; the entries stay in the file",
                    if *n == 1 { "it" } else { "them" }
                ),
                Some(*line),
            )
        });
    }
    out.extend(super::chain_load::notices(loaded));
    if rebuilt.missing_prompt {
        out.push(notice(
            NoticeKind::MissingPrompt,
            format!("the first prompt of the transcript {shown} could not be read; keel put a placeholder prompt first"),
            None,
        ));
    }
    out.extend(repair_notices(rebuilt, path, how != Disposition::ReadOnly));
    out
}

pub(super) fn repair_notices(rebuilt: &Rebuilt, path: &Path, recorded: bool) -> Vec<Notice> {
    let mut out = Vec::new();
    for cause in [RepairCause::SessionEnded, RepairCause::ResultMissing] {
        let rs: Vec<_> = rebuilt
            .repairs
            .iter()
            .filter(|r| r.cause == cause)
            .collect();
        if rs.is_empty() {
            continue;
        }
        let calls = rs
            .iter()
            .map(|r| format!("{} {}", r.tool_name, r.tool_use_id))
            .collect::<Vec<_>>()
            .join(", ");
        let n = rs.len();
        let (s, they, each) = if n == 1 {
            ("", "it", "it")
        } else {
            ("s", "they", "each")
        };
        let why = match cause {
            RepairCause::SessionEnded => format!("the session ended before {they} finished"),
            RepairCause::ResultMissing => {
                format!(
                    "the transcript holds no result for {}",
                    if n == 1 { "it" } else { "them" }
                )
            }
        };
        let recorded = if cause == RepairCause::SessionEnded && recorded {
            ", and recorded that in the transcript"
        } else {
            ""
        };
        let what = format!(
            "; keel gave {each} a result saying it may have run and had side effects{recorded}"
        );
        out.push(Notice {
            kind: NoticeKind::RepairedToolCalls,
            message: format!("{n} tool call{s} had no result because {why} ({calls}){what}"),
            path: path.to_owned(),
            line: None,
            tool_use_ids: rs.iter().map(|r| r.tool_use_id.clone()).collect(),
            entry_type: None,
            entry_uuid: None,
        });
    }
    out
}
