//! Why one command of a Bash line needs approval: it is not read-only, it reads what may not
//! be read without asking, or it writes where no rule allows. The sentences are what the
//! approval prompt and `keel permissions check` show in "needs approval (…)".

use std::path::{Path, PathBuf};

use super::RuleSource;
use crate::shell::NotReadOnly;

/// Why a command (or one of its writes) cannot run without asking.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NeedsApproval {
    /// The read-only table does not vouch for it.
    #[error(transparent)]
    NotReadOnly(#[from] NotReadOnly),
    /// It runs (after a `cd`) in a directory that may not be read without asking.
    #[error("it runs in {}, outside the working directory and the added directories ({})", dir.display(), hint(allow_dir))]
    RunsOutside {
        /// The directory it runs in, resolved.
        dir: PathBuf,
        /// The directory a Read rule or `--add-dir` would have to allow.
        allow_dir: PathBuf,
    },
    /// A file operand whose path is only known at run time.
    #[error("it reads `{word}`, which keel cannot resolve before it runs")]
    Unresolved {
        /// The word as written.
        word: String,
    },
    /// A file operand a Read deny rule protects.
    #[error("it reads `{word}`, which the rule `{rule}` from {origin} protects")]
    ReadDenied {
        /// The word as written.
        word: String,
        /// The deny rule as written.
        rule: String,
        /// Where the deny rule came from.
        origin: RuleSource,
    },
    /// A file operand outside every readable place.
    #[error(
        "it reads `{word}`{}, outside the working directory and the added directories ({})",
        leads_to(via),
        hint(allow_dir)
    )]
    ReadsOutside {
        /// The word as written.
        word: String,
        /// Where it really leads, when a link takes it elsewhere.
        via: Option<PathBuf>,
        /// The directory a Read rule or `--add-dir` would have to allow.
        allow_dir: PathBuf,
    },
    /// A redirection whose target is only known at run time.
    #[error("its path is only known when the command runs")]
    WriteUnresolved,
    /// A write while the session plans.
    #[error("the session is in plan mode")]
    PlanMode,
    /// A write inside the project that no rule or mode allows.
    #[error("no rule allows writing there")]
    WriteNotAllowed,
    /// A write outside the working directory and the added directories.
    #[error("it is outside the working directory and the added directories")]
    WriteOutside,
}

/// The rule that would allow reading under `dir` (as an absolute Read rule), or `--add-dir`.
fn hint(dir: &std::path::Path) -> String {
    let body = exact_path_rule(dir);
    let body = if body == "//" { "/".to_owned() } else { body };
    format!(
        "the rule `Read({body}/**)` or --add-dir {} would allow it",
        dir.display()
    )
}

fn leads_to(via: &Option<PathBuf>) -> String {
    via.as_ref()
        .map(|p| format!(" (it leads to {})", p.display()))
        .unwrap_or_default()
}

/// A path as an exact `Edit(//…)` rule body: absolute, glob characters escaped.
pub fn exact_path_rule(p: &Path) -> String {
    let mut s = String::from("/");
    for c in p.display().to_string().chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            s.push('\\');
        }
        s.push(c);
    }
    s
}
