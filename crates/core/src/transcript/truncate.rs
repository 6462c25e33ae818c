//! A truncating fork (`--resume-session-at` with `--fork-session`, and optionally
//! `--resume-drops-turn`): the fork's history ends at a given record, and what it leaves out
//! can be required to be exactly one turn, so that a host never loses a message it has not
//! seen (a prompt queued mid-turn, a note keel gave the model). The source file is only read.
//!
//! Records are named by their `uuid`, which is the `uuid` of the stream-json frame keel
//! printed for them (assistant and user frames, results), and, for a prompt, the `uuid` the
//! host gave the user message (or the one keel recorded it under).

use std::path::Path;

use keel_protocol::{ContentBlock, Frame, MessageContent};

use super::{Loaded, Rebuilder, Rebuilt, Record};

/// Where a fork's history ends, and which turn it may drop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The last record kept (`--resume-session-at`).
    pub at: String,
    /// The prompt of the turn the dropped records must all belong to (`--resume-drops-turn`).
    pub drops_turn: Option<String>,
}

/// A truncation keel refused. The texts start as hosts match them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TruncateError {
    /// No record of the session has that uuid.
    #[error("Resume rejected by --resume-session-at: session {session} has no message {at} (keel looked in {path}); nothing was resumed")]
    NotFound {
        /// The session.
        session: String,
        /// The uuid asked for.
        at: String,
        /// Its transcript.
        path: String,
    },
    /// The dropped records are not exactly the declared turn.
    #[error("Resume rejected by --resume-drops-turn: resuming at {at} would drop messages that do not belong to turn {turn}: {why}; the session was left as it was")]
    NotAttributable {
        /// `--resume-session-at`.
        at: String,
        /// `--resume-drops-turn`.
        turn: String,
        /// What was found, naming the record.
        why: String,
    },
}

/// What the records after the cut have shown so far.
enum Cut {
    /// Still before (or at) the cut: records go into the rebuild.
    Keeping,
    /// After the cut: `prompt_seen` once the declared prompt came; `problem` is the first
    /// record that does not belong to it.
    Dropping {
        prompt_seen: bool,
        problem: Option<String>,
    },
}

/// Whether a user frame is a prompt (or a note for the model), not only tool results.
fn is_prompt(content: &MessageContent) -> bool {
    match content {
        MessageContent::Text(_) => true,
        MessageContent::Blocks(bs) => bs.iter().any(|b| !matches!(b, ContentBlock::ToolResult(_))),
    }
}

impl Cut {
    /// Judge one dropped record against the declared turn.
    fn judge(&mut self, r: &Record, turn: &str) {
        let Cut::Dropping {
            prompt_seen,
            problem,
        } = self
        else {
            return;
        };
        if problem.is_some() {
            return;
        }
        let what = match &r.frame {
            Frame::User(u) if is_prompt(&u.message.content) => "a prompt",
            Frame::User(_) => "a tool result",
            Frame::Assistant(_) => "a reply",
            // Bookkeeping (init, results, warnings, status): no message is lost with it.
            _ => return,
        };
        let is_declared = what == "a prompt" && r.uuid == turn;
        match (*prompt_seen, is_declared) {
            (false, true) => *prompt_seen = true,
            (false, false) => {
                *problem = Some(format!(
                    "the dropped range does not start with the declared prompt; its first message is {what} (line {}, uuid {})",
                    r.line, r.uuid
                ))
            }
            (true, _) if what == "a prompt" => {
                *problem = Some(format!(
                    "the dropped range holds another prompt after the declared one (line {}, uuid {})",
                    r.line, r.uuid
                ))
            }
            (true, _) => {}
        }
    }
}

/// Read a transcript for a fork that ends at `t.at`: the conversation up to and including
/// that record, repaired like any rebuild (a call left open at the cut gets a synthetic
/// result). `Ok(Err(..))` is a refusal.
pub fn load_truncated(
    path: &Path,
    session_id: &str,
    t: &Truncation,
) -> std::io::Result<Result<(Loaded, Rebuilt), TruncateError>> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut rebuilder = Rebuilder::new(session_id, true);
    let mut cut = Cut::Keeping;
    let loaded = super::parse_reader_with(path, reader, len, |r| match &mut cut {
        Cut::Keeping => {
            let last = r.uuid == t.at;
            rebuilder.push(r);
            if last {
                cut = Cut::Dropping {
                    prompt_seen: false,
                    problem: None,
                };
            }
        }
        Cut::Dropping { .. } => {
            if let Some(turn) = &t.drops_turn {
                cut.judge(&r, turn);
            }
        }
    })?;
    match cut {
        Cut::Keeping => Ok(Err(TruncateError::NotFound {
            session: session_id.to_owned(),
            at: t.at.clone(),
            path: path.display().to_string(),
        })),
        Cut::Dropping {
            problem: Some(why), ..
        } => Ok(Err(TruncateError::NotAttributable {
            at: t.at.clone(),
            turn: t.drops_turn.clone().unwrap_or_default(),
            why,
        })),
        Cut::Dropping { problem: None, .. } => Ok(Ok((loaded, rebuilder.finish()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{FsyncMode, MirrorSink, SessionHeader, TranscriptWriter};
    use serde_json::{json, Value};

    const SID: &str = "11111111-1111-4111-8111-111111111111";

    fn frame(v: Value) -> Frame {
        serde_json::from_value(v).unwrap()
    }

    fn prompt(uuid: &str, text: &str) -> Frame {
        frame(
            json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":text}]},
            "parent_tool_use_id":null,"session_id":SID,"uuid":uuid}),
        )
    }

    fn reply(uuid: &str, id: &str, text: &str) -> Frame {
        frame(
            json!({"type":"assistant","message":{"id":id,"type":"message","role":"assistant",
            "model":"m","content":[{"type":"text","text":text}],"stop_reason":null,
            "stop_sequence":null,"usage":{}},"parent_tool_use_id":null,"session_id":SID,"uuid":uuid}),
        )
    }

    fn result(uuid: &str) -> Frame {
        frame(
            json!({"type":"result","subtype":"success","is_error":false,"duration_ms":1,
            "duration_api_ms":1,"num_turns":1,"result":"done","session_id":SID,"total_cost_usd":0.0,
            "usage":{},"modelUsage":{},"permission_denials":[],"uuid":uuid}),
        )
    }

    /// Writes `frames` through a mirrored writer; checks the mirror equals the file.
    fn written(dir: &Path, frames: &[Frame]) -> std::path::PathBuf {
        let path = dir.join("s.jsonl");
        let header = SessionHeader::new(SID, Path::new("/w"), "m");
        let w =
            TranscriptWriter::create_lazily(path.clone(), &header, &[], FsyncMode::Turn).unwrap();
        let (sink, mut rx) = MirrorSink::channel(64);
        w.mirror_to(sink, path.clone());
        for f in frames {
            w.append_frame(f).unwrap();
        }
        let mut mirrored = String::new();
        while let Ok(b) = rx.try_recv() {
            assert_eq!(b.file_path, path);
            for e in b.entries {
                mirrored.push_str(e.get());
                mirrored.push('\n');
            }
        }
        assert_eq!(mirrored, std::fs::read_to_string(&path).unwrap());
        path
    }

    fn two_turns_and_a_queued_prompt() -> Vec<Frame> {
        vec![
            prompt("p1", "one"),
            reply("a1", "m1", "one"),
            result("r1"),
            prompt("p2", "two"),
            reply("a2", "m2", "two"),
            prompt("p3", "queued meanwhile"),
            reply("a3", "m3", "three"),
            result("r2"),
        ]
    }

    fn cut(at: &str, turn: Option<&str>) -> Truncation {
        Truncation {
            at: at.into(),
            drops_turn: turn.map(str::to_owned),
        }
    }

    #[test]
    fn a_cut_keeps_the_history_up_to_the_record_and_judges_what_it_drops() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path(), &two_turns_and_a_queued_prompt());
        let before = std::fs::read(&path).unwrap();

        // Results before the declared prompt do not count against it; the later turn ends
        // at a2, so dropping from there on is exactly turn p3.
        let (_, rebuilt) = load_truncated(&path, SID, &cut("a2", Some("p3")))
            .unwrap()
            .unwrap();
        assert_eq!(rebuilt.history.messages().len(), 4);
        // Cut after turn one's result, dropping turn p2: p3 follows in the range, refused.
        assert!(load_truncated(&path, SID, &cut("r1", Some("p2")))
            .unwrap()
            .is_err());

        // A second prompt in the dropped range is not the declared turn's.
        let refused = load_truncated(&path, SID, &cut("a1", Some("p2")))
            .unwrap()
            .unwrap_err();
        let text = refused.to_string();
        assert!(
            text.starts_with("Resume rejected by --resume-drops-turn:"),
            "{text}"
        );
        assert!(
            text.contains("another prompt") && text.contains("p3"),
            "{text}"
        );
        // A range that starts with a reply is not the declared turn either.
        let refused = load_truncated(&path, SID, &cut("p2", Some("p2")))
            .unwrap()
            .unwrap_err();
        assert!(refused.to_string().contains("a reply"), "{refused}");
        // Without a declaration, any cut is taken; an unknown record is refused.
        assert!(load_truncated(&path, SID, &cut("a1", None))
            .unwrap()
            .is_ok());
        let missing = load_truncated(&path, SID, &cut("nope", None))
            .unwrap()
            .unwrap_err();
        assert!(missing
            .to_string()
            .starts_with("Resume rejected by --resume-session-at:"));
        assert_eq!(std::fs::read(&path).unwrap(), before, "only read");
    }
}
