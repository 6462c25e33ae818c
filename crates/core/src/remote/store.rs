//! The object-storage backend of [`super::RemoteTranscripts`] (cargo feature `remote`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde_json::{json, Value};

use super::MAX_FETCH_BYTES;

/// The largest pointer object keel reads.
const MAX_POINTER_BYTES: u64 = 64 << 10;
/// How long one request to the bucket may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Where transcripts go: a bucket (or directory) and a prefix.
#[derive(Clone)]
pub struct RemoteTranscripts {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    url: String,
}

impl std::fmt::Debug for RemoteTranscripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteTranscripts({})", self.url)
    }
}

impl RemoteTranscripts {
    /// The store `url` names: `s3://bucket/prefix` (credentials, region and endpoint from the
    /// usual `AWS_*` variables: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL` for an S3-compatible server, `AWS_ALLOW_HTTP=true` for plain http)
    /// or `file:///shared/dir` (a volume every machine mounts).
    pub fn from_url(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let parsed = url::Url::parse(url.trim())
            .map_err(|e| format!("KEEL_TRANSCRIPT_URL={url:?} is not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "s3" | "file") {
            return Err(format!(
                "KEEL_TRANSCRIPT_URL={url:?}: keel stores transcripts at s3://bucket/prefix or file:///directory, not {}: URLs",
                parsed.scheme()
            ));
        }
        let mut options: Vec<(String, String)> = Vec::new();
        for var in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT",
            "AWS_ENDPOINT_URL",
            "AWS_ALLOW_HTTP",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
        ] {
            if let Some(v) = env(var).filter(|v| !v.trim().is_empty()) {
                let key = match var {
                    "AWS_ENDPOINT_URL" => "aws_endpoint".to_owned(),
                    "AWS_DEFAULT_REGION" => "aws_region".to_owned(),
                    other => other.to_ascii_lowercase(),
                };
                options.push((key, v));
            }
        }
        let bad =
            |e: object_store::Error| format!("KEEL_TRANSCRIPT_URL={url:?} cannot be used: {e}");
        let (store, prefix): (Arc<dyn ObjectStore>, ObjectPath) = if parsed.scheme() == "s3" {
            if !options.iter().any(|(k, _)| k == "aws_region") {
                options.push(("aws_region".into(), "us-east-1".into()));
            }
            // A few quick retries inside one upload; keel itself tries again at the next turn.
            let retry = object_store::RetryConfig {
                max_retries: 2,
                retry_timeout: Duration::from_secs(10),
                ..Default::default()
            };
            let client = object_store::ClientOptions::new()
                .with_connect_timeout(Duration::from_secs(5))
                .with_timeout(REQUEST_TIMEOUT);
            // The client options first: the variables (AWS_ALLOW_HTTP among them) refine them.
            let mut b = object_store::aws::AmazonS3Builder::new()
                .with_url(parsed.as_str())
                .with_retry(retry)
                .with_client_options(client);
            for (k, v) in options {
                let key = k.parse().map_err(bad)?;
                b = b.with_config(key, v);
            }
            let store = b.build().map_err(bad)?;
            let prefix = ObjectPath::from_url_path(parsed.path()).map_err(|e| bad(e.into()))?;
            (Arc::new(store), prefix)
        } else {
            let (store, prefix) = object_store::parse_url_opts(&parsed, options).map_err(bad)?;
            (Arc::from(store), prefix)
        };
        Ok(Self {
            store,
            prefix,
            url: url.trim().trim_end_matches('/').to_owned(),
        })
    }

    /// The URL of the store, as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn pointer(&self, session_id: &str) -> ObjectPath {
        self.prefix.child(session_id).child("latest.json")
    }

    /// Where session `session_id`'s transcript is, for people (the pointer's URL).
    pub fn pointer_url(&self, session_id: &str) -> String {
        format!("{}/{session_id}/latest.json", self.url)
    }

    /// Upload the local transcript at `path` as generation `generation`, then point at it,
    /// then drop the generation it replaces.
    pub async fn upload(
        &self,
        session_id: &str,
        path: &Path,
        generation: u64,
        previous: Option<u64>,
    ) -> Result<(), String> {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let len = bytes.len();
        let object = self
            .prefix
            .child(session_id)
            .child(format!("{generation:020}.jsonl"));
        within(self.store.put(&object, PutPayload::from(bytes)))
            .await
            .map_err(|e| format!("uploading to {}: {e}", self.url))?;
        let pointer = json!({
            "object": object.filename().unwrap_or_default(),
            "generation": generation,
            "bytes": len,
            "session_id": session_id,
        });
        within(self.store.put(
            &self.pointer(session_id),
            PutPayload::from(pointer.to_string().into_bytes()),
        ))
        .await
        .map_err(|e| {
            format!(
                "updating the pointer at {}: {e}",
                self.pointer_url(session_id)
            )
        })?;
        if let Some(old) = previous.filter(|p| *p != generation) {
            let old = self
                .prefix
                .child(session_id)
                .child(format!("{old:020}.jsonl"));
            // A leftover old generation wastes space but misleads nobody: the pointer decides.
            let _ = within(self.store.delete(&old)).await;
        }
        Ok(())
    }

    /// Fetch session `session_id`'s transcript into `dest` (a new file). `Ok(false)` when the
    /// store has no such session.
    pub async fn fetch(&self, session_id: &str, dest: &Path) -> Result<bool, String> {
        let pointer = match within(self.store.get(&self.pointer(session_id))).await {
            Ok(r) if r.meta.size > MAX_POINTER_BYTES => {
                return Err(format!(
                    "{} is {} bytes, not a pointer",
                    self.pointer_url(session_id),
                    r.meta.size
                ))
            }
            Ok(r) => within(r.bytes())
                .await
                .map_err(|e| format!("reading {}: {e}", self.pointer_url(session_id)))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(format!("reading {}: {e}", self.pointer_url(session_id))),
        };
        let pointer: Value = serde_json::from_slice(&pointer).map_err(|e| {
            format!(
                "{} is not keel's pointer ({e})",
                self.pointer_url(session_id)
            )
        })?;
        let name = pointer["object"]
            .as_str()
            .filter(|n| n.ends_with(".jsonl") && !n.contains('/') && !n.starts_with('.'))
            .ok_or_else(|| {
                format!(
                    "{} names no transcript object",
                    self.pointer_url(session_id)
                )
            })?;
        let object = self.prefix.child(session_id).child(name);
        let got = within(self.store.get(&object))
            .await
            .map_err(|e| format!("fetching {}/{session_id}/{name}: {e}", self.url))?;
        if got.meta.size > MAX_FETCH_BYTES {
            return Err(format!(
                "{}/{session_id}/{name} is {} bytes, past the {MAX_FETCH_BYTES} keel fetches",
                self.url, got.meta.size
            ));
        }
        if let Some(dir) = dest.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        // Streamed to a file beside and renamed into place: memory stays flat whatever the
        // transcript's size, and a crash leaves no half transcript.
        let tmp = dest.with_extension("jsonl.fetching");
        let written = copy_to(got.into_stream(), &tmp).await;
        let written = match written {
            Ok(n) => n,
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(format!("fetching {}/{session_id}/{name}: {e}", self.url));
            }
        };
        tracing::debug!("fetched {written} bytes of session {session_id}");
        tokio::fs::rename(&tmp, dest)
            .await
            .map_err(|e| format!("writing {}: {e}", dest.display()))?;
        Ok(true)
    }
}

/// Write `stream` to a new file at `path`, each chunk within the request timeout and never
/// past [`MAX_FETCH_BYTES`] (whatever size the store announced); the bytes written.
async fn copy_to<B: AsRef<[u8]>>(
    mut stream: impl futures_util::Stream<Item = object_store::Result<B>> + Unpin,
    path: &Path,
) -> Result<u64, String> {
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    let mut file = tokio::fs::File::create(path)
        .await
        .map_err(|e| format!("creating {}: {e}", path.display()))?;
    let mut n = 0u64;
    loop {
        let chunk = match tokio::time::timeout(REQUEST_TIMEOUT, stream.next()).await {
            Ok(Some(c)) => c.map_err(|e| e.to_string())?,
            Ok(None) => break,
            Err(_) => return Err(format!("no data for {} s", REQUEST_TIMEOUT.as_secs())),
        };
        let chunk = chunk.as_ref();
        n += chunk.len() as u64;
        if n > MAX_FETCH_BYTES {
            return Err(format!(
                "more than the {MAX_FETCH_BYTES} bytes keel fetches"
            ));
        }
        file.write_all(chunk)
            .await
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    file.flush()
        .await
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    // On disk before it is renamed into place: a power loss must not leave an empty transcript
    // under the real name.
    file.sync_all()
        .await
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(n)
}

async fn within<T>(
    fut: impl std::future::Future<Output = Result<T, object_store::Error>>,
) -> Result<T, object_store::Error> {
    match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
        Ok(r) => r,
        Err(_) => Err(object_store::Error::Generic {
            store: "keel",
            source: format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()).into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> RemoteTranscripts {
        RemoteTranscripts::from_url(&format!("file://{}", dir.display()), &|_| None).unwrap()
    }

    #[tokio::test]
    async fn uploads_replace_the_pointer_and_fetch_refuses_what_is_not_keels() {
        let bucket = tempfile::tempdir().unwrap();
        let local = tempfile::tempdir().unwrap();
        let r = store(bucket.path());
        let file = local.path().join("t.jsonl");
        std::fs::write(&file, "one\n").unwrap();
        r.upload("s1", &file, 1, None).await.unwrap();
        std::fs::write(&file, "one\ntwo\n").unwrap();
        r.upload("s1", &file, 2, Some(1)).await.unwrap();
        let mut names: Vec<String> = std::fs::read_dir(bucket.path().join("s1"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["00000000000000000002.jsonl", "latest.json"]);
        let back = local.path().join("back/s1.jsonl");
        assert!(r.fetch("s1", &back).await.unwrap());
        assert_eq!(std::fs::read_to_string(&back).unwrap(), "one\ntwo\n");
        assert!(!r
            .fetch("nobody", &local.path().join("x.jsonl"))
            .await
            .unwrap());
        // A pointer that names something outside the session's prefix is refused.
        for evil in [
            r#"{"object":"../../etc/passwd.jsonl"}"#,
            r#"{"object":"a/b.jsonl"}"#,
            "not json",
        ] {
            std::fs::write(bucket.path().join("s1/latest.json"), evil).unwrap();
            let e = r
                .fetch("s1", &local.path().join("y.jsonl"))
                .await
                .unwrap_err();
            assert!(e.contains("latest.json"), "{e}");
        }
    }

    #[test]
    fn only_s3_and_file_urls_are_taken() {
        for bad in ["http://example.com/x", "gs://bucket/x", "no url"] {
            let e = RemoteTranscripts::from_url(bad, &|_| None).unwrap_err();
            assert!(e.contains("KEEL_TRANSCRIPT_URL"), "{e}");
        }
    }
}
