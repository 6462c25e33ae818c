//! Why a scenario could not be used, worded to point at the file, the step and the field.

use std::path::{Path, PathBuf};

/// Why a scenario could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{}: cannot read the scenario file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{}the scenario is not valid JSON: {message}", path_prefix(path))]
    Syntax {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// The parser's message.
        message: String,
    },
    /// The JSON does not describe a valid scenario.
    #[error("{}{}{}", path_prefix(path), step_prefix(*step, kind), field_problem(field, problem))]
    Invalid {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// Index of the offending step; `None` for a top-level field.
        step: Option<usize>,
        /// Kind of the offending step when it is known.
        kind: Option<String>,
        /// The field, dotted for nested ones (`then.text`, `calls.0.input`); empty when the
        /// problem is the step (or the scenario) as a whole.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

fn path_prefix(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!("{}: ", p.display()),
        None => String::new(),
    }
}

fn field_problem(field: &str, problem: &str) -> String {
    if field.is_empty() {
        problem.to_string()
    } else {
        format!("field `{field}` {problem}")
    }
}

fn step_prefix(step: Option<usize>, kind: &Option<String>) -> String {
    match (step, kind) {
        (Some(i), Some(k)) => format!("step {i} ({k}): "),
        (Some(i), None) => format!("step {i}: "),
        (None, _) => String::new(),
    }
}

impl ScenarioError {
    pub(super) fn with_path(self, file: &Path) -> Self {
        let p = Some(file.to_path_buf());
        match self {
            ScenarioError::Syntax { message, .. } => ScenarioError::Syntax { path: p, message },
            ScenarioError::Invalid {
                step,
                kind,
                field,
                problem,
                ..
            } => ScenarioError::Invalid {
                path: p,
                step,
                kind,
                field,
                problem,
            },
            other => other,
        }
    }
}
