//! One Bash call judged once: the line lowered with the session's roots (cwd, HOME) on the
//! policy's view of the file system, and each command it runs checked against the read-only
//! table. The permission decision, the dispatcher's read-only batching, the suggested rules
//! and `keel permissions check` all read this one judgement: one parse, one root.

use std::borrow::Cow;

use crate::shell::readonly::{self, NotReadOnly, ReadOnly};
use crate::shell::{self, Lowered};

use super::bash::env_of;
use super::Policy;

/// What a Bash command line runs, what it reads and writes, or why it was not understood.
#[derive(Clone, Debug)]
pub struct Judgement {
    /// The line as given.
    pub command: String,
    /// The simple commands it runs (and what could not be modelled, in `problems`).
    pub lowered: Lowered,
    /// For each command of `lowered`, the read-only table's verdict: what it reads, or why
    /// it is not read-only.
    pub readonly: Vec<Result<ReadOnly, NotReadOnly>>,
    /// One line per part, how the rules judged it (filled by [`Policy::explain_bash`]).
    pub parts: Vec<String>,
}

impl Judgement {
    /// Whether the line clearly cannot change anything: fully understood, and every command
    /// it runs is on the read-only list with only listed flags and writes no file. The
    /// dispatcher runs such calls side by side. (Whether what it reads may be read without
    /// asking is the decision's business.)
    pub fn read_only(&self) -> bool {
        self.lowered.understood()
            && !self.lowered.commands.is_empty()
            && self.readonly.iter().all(Result::is_ok)
    }

    /// Why the line was not understood (empty when it was).
    pub fn problems(&self) -> &[String] {
        &self.lowered.problems
    }
}

impl<'p> Policy<'p> {
    /// Judge a command line once, with this policy's roots and file system.
    pub fn judge(&self, command: &str) -> Judgement {
        let lowered = shell::lower_in(self.fs, command, &self.roots.cwd, &env_of(self.roots));
        let readonly = lowered.commands.iter().map(readonly::judge).collect();
        Judgement {
            command: command.to_owned(),
            lowered,
            readonly,
            parts: Vec::new(),
        }
    }

    /// This policy with `j` as the judgement of the call it decides: every step that needs
    /// the line's meaning reads `j` instead of parsing the line again.
    pub fn with_judgement(self, j: &'p Judgement) -> Policy<'p> {
        Policy {
            judged: Some(j),
            ..self
        }
    }

    /// The judgement of `command`: the one handed in, or a new one.
    pub(crate) fn judged_line(&self, command: &str) -> Cow<'p, Judgement> {
        match self.judged {
            Some(j) if j.command == command => Cow::Borrowed(j),
            _ => Cow::Owned(self.judge(command)),
        }
    }
}
