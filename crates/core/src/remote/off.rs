//! [`RemoteTranscripts`] in a keel built without object storage (cargo feature `remote` off):
//! `KEEL_TRANSCRIPT_URL` is refused at start, so no run silently goes without the remote copy
//! it asked for. No value of this type can exist.

use std::convert::Infallible;
use std::path::Path;

/// Where transcripts would go; never made in this build.
#[derive(Clone, Debug)]
pub struct RemoteTranscripts {
    never: Infallible,
}

impl RemoteTranscripts {
    /// Always an error: this build has no object storage.
    pub fn from_url(url: &str, _env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        Err(format!(
            "KEEL_TRANSCRIPT_URL={url:?} cannot be used: this keel was built without object storage (the cargo feature `remote`); build it with default features to keep transcripts in a bucket"
        ))
    }

    /// The URL of the store.
    pub fn url(&self) -> &str {
        match self.never {}
    }

    /// Where a session's transcript is, for people.
    pub fn pointer_url(&self, _session_id: &str) -> String {
        match self.never {}
    }

    /// Upload a transcript.
    pub async fn upload(
        &self,
        _session_id: &str,
        _path: &Path,
        _generation: u64,
        _previous: Option<u64>,
    ) -> Result<(), String> {
        match self.never {}
    }

    /// Fetch a transcript.
    pub async fn fetch(&self, _session_id: &str, _dest: &Path) -> Result<bool, String> {
        match self.never {}
    }
}
