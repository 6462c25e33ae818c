//! Where a checkpoint stands in its transcript ([`Position`]): what the checkpoint stores and
//! the loader resumes from. A leaf.

use serde::{Deserialize, Serialize};

/// Where a checkpoint stands in its transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The transcript's length up to the end of the record (its newline included).
    pub len: u64,
    /// Lines up to there.
    pub lines: usize,
    /// That record's uuid.
    pub uuid: String,
    /// The last entry of the `parentUuid` chain up to there (the parent of the next one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_uuid: Option<String>,
}
