//! What a shell command line would run, read the way bash reads it.
//!
//! [`lower`] parses a line with a real shell parser and lowers it to the simple commands it
//! would run ([`LoweredCommand`]), through pipelines, lists, subshells, loops, functions,
//! substitutions and wrappers; what it cannot model is listed in [`Lowered::problems`].
//! [`readonly::judge`] decides whether one lowered command only reads, from an allow-list of
//! programs and flags.

mod command;
mod lower;
pub mod readonly;
mod why;
mod words;
mod wrappers;

use std::path::Path;

pub use command::{dangerous_var, LoweredCommand, Redirect, HARMLESS_GIT_GLOBALS};
pub use lower::{lower, lower_in, Lowered};
pub use why::NotReadOnly;
pub use words::{Arg, Expansion, ShellEnv};

/// Whether `command` clearly cannot change anything: it was fully understood, and every
/// command it runs is on the read-only list with only listed flags and writes no file. When
/// unsure, `false`. (Read deny rules are checked by the permission layer, which knows them.)
///
/// Lowered with the process's `.` and `HOME`: for a tool asked on its own. The engine does not
/// use it for a session's calls; it judges each Bash call once with the session's roots
/// ([`crate::Judgement::read_only`]).
pub fn is_read_only_command(command: &str) -> bool {
    let env = ShellEnv {
        home: std::env::var("HOME").ok(),
    };
    let l = lower(command, Path::new("."), &env);
    l.understood()
        && !l.commands.is_empty()
        && l.commands.iter().all(|c| readonly::judge(c).is_ok())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bash_argv;
#[cfg(test)]
mod tests_table;
