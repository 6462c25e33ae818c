//! [`RemoteTranscripts`] in a keel built without object storage (cargo feature `remote` off):
//! `KEEL_TRANSCRIPT_URL` is refused at start, so no run silently goes without the remote copy
//! it asked for. No value of this type can exist.

use std::convert::Infallible;
use std::path::Path;

use super::RemoteError;

/// Where transcripts would go; never made in this build.
#[derive(Clone, Debug)]
pub struct RemoteTranscripts {
    never: Infallible,
}

/// The upload state of a session (nothing, in this build).
#[derive(Default)]
pub struct Synced;

impl RemoteTranscripts {
    /// Always an error: this build has no object storage.
    pub fn from_url(url: &str, _env: &dyn Fn(&str) -> Option<String>) -> Result<Self, RemoteError> {
        Err(RemoteError::Config {
            url: url.to_owned(),
            reason: "cannot be used: this keel was built without object storage (the cargo feature `remote`); build it with default features to keep transcripts in a bucket".into(),
        })
    }

    /// The URL of the store.
    pub fn url(&self) -> &str {
        match self.never {}
    }

    /// Where a session's transcript is, for people.
    pub fn session_url(&self, _local: &Path, _session_id: &str) -> String {
        match self.never {}
    }

    /// Upload what is new of a session.
    pub async fn sync(
        &self,
        _session_id: &str,
        _local: &Path,
        _synced: &mut Synced,
    ) -> Result<u64, RemoteError> {
        match self.never {}
    }

    /// Fetch a session.
    pub async fn fetch(&self, _session_id: &str, _dest: &Path) -> Result<bool, RemoteError> {
        match self.never {}
    }
}
