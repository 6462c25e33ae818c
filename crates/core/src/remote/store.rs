//! The object-storage backend of [`super::RemoteTranscripts`] (cargo feature `remote`).
//!
//! A session is stored as parts in the agent SDKs' session-store layout (see
//! [`super::layout`]): each upload puts only the whole lines appended since the last one, so
//! the bytes sent per turn follow the turn, not the session's size. What is in the bucket is
//! found once per process (one listing), then tracked in memory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use keel_tools::repofile::{read_repo_file, RepoRead};

use super::layout::{self, Stream};
use super::{RemoteError, MAX_FETCH_BYTES};

/// The largest legacy pointer object keel reads.
const MAX_POINTER_BYTES: u64 = 64 << 10;
/// How long one request to the bucket may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most one part carries; more new bytes than this go up as several parts.
const MAX_PART_BYTES: u64 = 32 << 20;
/// The most subagent transcripts of one session keel uploads or fetches.
const MAX_SUBAGENTS: usize = 10_000;
/// The most projects keel looks through for a session that is not under this directory's key.
const MAX_PROJECTS_SCANNED: usize = 1_000;
/// The file beside a fetched session that names the project key it is stored under, when that
/// is not this directory's (a session keeps one place in the bucket wherever it resumes).
const PROJECT_FILE: &str = "remote-project";

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

/// What of one local transcript file is in the bucket.
#[derive(Default)]
struct FileSync {
    /// Bytes of the local file already stored.
    offset: u64,
    /// The last `agent_metadata` line stored (subagents).
    meta: Option<Vec<u8>>,
    /// A part that was sent but not confirmed: sent again under the same name first, so a put
    /// that succeeded without our hearing of it leaves no second copy.
    pending: Option<Pending>,
}

struct Pending {
    name: String,
    payload: Bytes,
    end: u64,
    meta: Option<Vec<u8>>,
}

/// The upload state of one session: what the bucket holds of each of its files.
#[derive(Default)]
pub struct Synced {
    project: Option<String>,
    files: HashMap<Stream, FileSync>,
    last_ms: u64,
}

impl RemoteTranscripts {
    /// The store `url` names: `s3://bucket/prefix` (credentials, region and endpoint from the
    /// usual `AWS_*` variables: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL` for an S3-compatible server, `AWS_ALLOW_HTTP=true` for plain http)
    /// or `file:///shared/dir` (a volume every machine mounts).
    pub fn from_url(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, RemoteError> {
        let config = |reason: String| RemoteError::Config {
            url: url.to_owned(),
            reason,
        };
        let parsed =
            url::Url::parse(url.trim()).map_err(|e| config(format!("is not a URL ({e})")))?;
        if !matches!(parsed.scheme(), "s3" | "file") {
            return Err(config(format!(
                "names a {}: store; keel stores transcripts at s3://bucket/prefix or file:///directory",
                parsed.scheme()
            )));
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
        let bad = |e: object_store::Error| config(format!("cannot be used: {e}"));
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

    fn session_prefix(&self, project: &str, session_id: &str) -> ObjectPath {
        self.prefix.child(project).child(session_id)
    }

    fn stream_prefix(&self, project: &str, session_id: &str, stream: &Stream) -> ObjectPath {
        let p = self.session_prefix(project, session_id);
        match stream {
            Stream::Main => p,
            Stream::Subagent(id) => p.child("subagents").child(format!("agent-{id}")),
        }
    }

    fn object_url(&self, o: &ObjectPath) -> String {
        let rel = o.prefix_match(&self.prefix).map(|parts| {
            parts
                .map(|p| p.as_ref().to_owned())
                .collect::<Vec<_>>()
                .join("/")
        });
        format!("{}/{}", self.url, rel.unwrap_or_else(|| o.to_string()))
    }

    /// Where session `session_id`'s transcript is, for people: its folder of parts, under the
    /// project key of the local transcript at `local`.
    pub fn session_url(&self, local: &Path, session_id: &str) -> String {
        let project = stored_project(local).unwrap_or_default();
        format!("{}/{project}/{session_id}/", self.url)
    }

    /// Upload what is new in session `session_id`'s local transcript at `local` (and in its
    /// subagents' transcripts beside it) since the last upload; the bytes sent.
    pub async fn sync(
        &self,
        session_id: &str,
        local: &Path,
        synced: &mut Synced,
    ) -> Result<u64, RemoteError> {
        let project = match &synced.project {
            Some(p) => p.clone(),
            None => {
                let project = stored_project(local)?;
                synced.files = self.inventory(&project, session_id).await?.0;
                synced.project = Some(project.clone());
                project
            }
        };
        let mut sent = 0;
        let mut files = vec![(Stream::Main, local.to_path_buf())];
        files.extend(local_subagents(local).await?);
        for (stream, file) in files {
            let dir = self.stream_prefix(&project, session_id, &stream);
            let state = synced.files.entry(stream.clone()).or_default();
            sent += self
                .sync_file(&dir, &stream, &file, state, &mut synced.last_ms)
                .await?;
        }
        Ok(sent)
    }

    async fn sync_file(
        &self,
        dir: &ObjectPath,
        stream: &Stream,
        file: &Path,
        state: &mut FileSync,
        last_ms: &mut u64,
    ) -> Result<u64, RemoteError> {
        let mut sent = 0;
        if let Some(p) = &state.pending {
            let (name, payload, end, meta) =
                (p.name.clone(), p.payload.clone(), p.end, p.meta.clone());
            // On an error the part stays pending, to be sent under the same name next time.
            self.put_part(dir, &name, payload.clone()).await?;
            state.pending = None;
            sent += payload.len() as u64;
            state.offset = end;
            if meta.is_some() {
                state.meta = meta;
            }
        }
        loop {
            let (lines, end) = read_new_lines(file, state.offset).await?;
            let meta = match stream {
                Stream::Subagent(_) => read_meta_line(file)
                    .await
                    .filter(|m| state.meta.as_ref() != Some(m)),
                Stream::Main => None,
            };
            if lines.is_empty() && meta.is_none() {
                return Ok(sent);
            }
            let mut payload = lines;
            if let Some(m) = &meta {
                payload.extend_from_slice(m);
                payload.push(b'\n');
            }
            *last_ms = now_ms().max(*last_ms + 1);
            let name = layout::part_name(*last_ms, rand::random::<u32>());
            let pending = Pending {
                name: name.clone(),
                payload: Bytes::from(payload),
                end,
                meta: meta.clone(),
            };
            let payload = pending.payload.clone();
            state.pending = Some(pending);
            self.put_part(dir, &name, payload.clone()).await?;
            state.pending = None;
            sent += payload.len() as u64;
            state.offset = end;
            if meta.is_some() {
                state.meta = meta;
            }
        }
    }

    async fn put_part(
        &self,
        dir: &ObjectPath,
        name: &str,
        payload: Bytes,
    ) -> Result<(), RemoteError> {
        let object = dir.child(name);
        within(self.store.put(&object, PutPayload::from(payload)))
            .await
            .map(|_| ())
            .map_err(|source| RemoteError::Store {
                op: "uploading",
                object: self.object_url(&object),
                source,
            })
    }

    /// What the bucket holds of a session: per stream, the bytes of its local file already
    /// stored and its last metadata line; and the parts by stream, in order.
    async fn inventory(
        &self,
        project: &str,
        session_id: &str,
    ) -> Result<(HashMap<Stream, FileSync>, Parts), RemoteError> {
        let base = self.session_prefix(project, session_id);
        let mut parts: Parts = BTreeMap::new();
        let mut listing = self.store.list(Some(&base));
        loop {
            let next = tokio::time::timeout(REQUEST_TIMEOUT, listing.next()).await;
            let meta = match next {
                Ok(Some(Ok(m))) => m,
                Ok(None) => break,
                Ok(Some(Err(source))) => {
                    return Err(RemoteError::Store {
                        op: "listing",
                        object: self.object_url(&base),
                        source,
                    })
                }
                Err(_) => return Err(self.no_answer("listing", &base)),
            };
            let Some(rest) = meta.location.prefix_match(&base) else {
                continue;
            };
            let rest: Vec<String> = rest.map(|p| p.as_ref().to_owned()).collect();
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            if let Some((stream, name)) = layout::classify(&rest) {
                let streams = parts.len();
                let entry = parts.entry(stream).or_default();
                if entry.is_empty() && streams > MAX_SUBAGENTS {
                    return Err(RemoteError::Invalid {
                        object: self.object_url(&base),
                        reason: format!("more than {MAX_SUBAGENTS} subagent transcripts"),
                    });
                }
                entry.push((name, meta.location, meta.size));
            }
        }
        let mut files = HashMap::new();
        for (stream, list) in parts.iter_mut() {
            list.sort();
            let state = match stream {
                Stream::Main => FileSync {
                    offset: list.iter().map(|(_, _, size)| size).sum(),
                    ..FileSync::default()
                },
                // Metadata lines are not bytes of the local file: the parts are read to tell.
                Stream::Subagent(_) => {
                    let (body, meta) = self.read_subagent(list).await?;
                    FileSync {
                        offset: body.len() as u64,
                        meta,
                        pending: None,
                    }
                }
            };
            files.insert(stream.clone(), state);
        }
        Ok((files, parts))
    }

    /// A subagent's parts, read: its transcript lines and its last metadata line.
    async fn read_subagent(
        &self,
        list: &[(String, ObjectPath, u64)],
    ) -> Result<(Vec<u8>, Option<Vec<u8>>), RemoteError> {
        let (mut body, mut meta) = (Vec::new(), None);
        for (_, object, size) in list {
            if body.len() as u64 + size > MAX_PART_BYTES * 8 {
                return Err(RemoteError::Invalid {
                    object: self.object_url(object),
                    reason: "a subagent transcript past the size keel fetches".into(),
                });
            }
            let bytes = self.get_bytes(object, MAX_PART_BYTES * 8).await?;
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                if layout::is_agent_metadata(line) {
                    meta = Some(line.to_vec());
                } else {
                    body.extend_from_slice(line);
                    body.push(b'\n');
                }
            }
        }
        Ok((body, meta))
    }

    async fn get_bytes(&self, object: &ObjectPath, limit: u64) -> Result<Bytes, RemoteError> {
        let store_err = |source| RemoteError::Store {
            op: "fetching",
            object: self.object_url(object),
            source,
        };
        let got = within(self.store.get(object)).await.map_err(store_err)?;
        if got.meta.size > limit {
            return Err(RemoteError::Invalid {
                object: self.object_url(object),
                reason: format!("{} bytes, past the {limit} keel reads", got.meta.size),
            });
        }
        within(got.bytes()).await.map_err(store_err)
    }

    fn no_answer(&self, op: &'static str, o: &ObjectPath) -> RemoteError {
        RemoteError::Store {
            op,
            object: self.object_url(o),
            source: timeout_error(),
        }
    }

    /// Fetch session `session_id` into `dest` (a new file; subagents beside it), looking under
    /// the project key of `dest`'s directory first, then in the older single-object layout,
    /// then under the bucket's other projects. `Ok(false)` when the store has no such session.
    pub async fn fetch(&self, session_id: &str, dest: &Path) -> Result<bool, RemoteError> {
        let here = stored_project(dest)?;
        let (_, parts) = self.inventory(&here, session_id).await?;
        if !parts.is_empty() {
            self.materialize(&parts, dest).await?;
            return Ok(true);
        }
        if self.fetch_legacy(session_id, dest).await? {
            return Ok(true);
        }
        for project in self.projects().await? {
            if project == here {
                continue;
            }
            let (_, parts) = self.inventory(&project, session_id).await?;
            if !parts.is_empty() {
                self.materialize(&parts, dest).await?;
                // Later uploads go on where the session already is.
                let marker = dest.with_extension("").join(PROJECT_FILE);
                write_new(&marker, project.as_bytes()).await?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The bucket's project keys (at most [`MAX_PROJECTS_SCANNED`]).
    async fn projects(&self) -> Result<Vec<String>, RemoteError> {
        let listed = within(self.store.list_with_delimiter(Some(&self.prefix)))
            .await
            .map_err(|source| RemoteError::Store {
                op: "listing",
                object: self.url.clone(),
                source,
            })?;
        let keys: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_owned))
            .filter(|k| layout::safe_id(k))
            .collect();
        if keys.len() > MAX_PROJECTS_SCANNED {
            return Err(RemoteError::Invalid {
                object: self.url.clone(),
                reason: format!(
                    "more than {MAX_PROJECTS_SCANNED} projects to look through; resume from the directory the session was started in"
                ),
            });
        }
        Ok(keys)
    }

    /// Write the session's parts to `dest` and its subagents' beside it, each file streamed to
    /// a temporary name, synced and renamed into place.
    async fn materialize(&self, parts: &Parts, dest: &Path) -> Result<(), RemoteError> {
        let mut total = 0u64;
        for (stream, list) in parts {
            total += list.iter().map(|(_, _, s)| s).sum::<u64>();
            if total > MAX_FETCH_BYTES {
                return Err(RemoteError::Invalid {
                    object: self.url.clone(),
                    reason: format!("the session is past the {MAX_FETCH_BYTES} bytes keel fetches"),
                });
            }
            match stream {
                Stream::Main => {
                    let tmp = dest.with_extension("jsonl.fetching");
                    let written = self.stream_parts(list, &tmp).await;
                    if let Err(e) = written {
                        let _ = tokio::fs::remove_file(&tmp).await;
                        return Err(e);
                    }
                    rename(&tmp, dest).await?;
                }
                Stream::Subagent(id) => {
                    let dir = dest.with_extension("").join("subagents");
                    let (body, meta) = self.read_subagent(list).await?;
                    write_new(&dir.join(format!("agent-{id}.jsonl")), &body).await?;
                    if let Some(meta) = meta {
                        write_new(&dir.join(format!("agent-{id}.meta.json")), &sidecar(&meta))
                            .await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn stream_parts(
        &self,
        list: &[(String, ObjectPath, u64)],
        tmp: &Path,
    ) -> Result<(), RemoteError> {
        let local = |op, source| RemoteError::Local {
            op,
            path: tmp.to_path_buf(),
            source,
        };
        if let Some(dir) = tmp.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| local("creating the directory of", e))?;
        }
        let mut file = tokio::fs::File::create(tmp)
            .await
            .map_err(|e| local("creating", e))?;
        let mut n = 0u64;
        for (_, object, _) in list {
            let got =
                within(self.store.get(object))
                    .await
                    .map_err(|source| RemoteError::Store {
                        op: "fetching",
                        object: self.object_url(object),
                        source,
                    })?;
            let mut stream = got.into_stream();
            let mut last = b'\n';
            loop {
                let chunk = match tokio::time::timeout(REQUEST_TIMEOUT, stream.next()).await {
                    Ok(Some(Ok(c))) => c,
                    Ok(None) => break,
                    Ok(Some(Err(source))) => {
                        return Err(RemoteError::Store {
                            op: "fetching",
                            object: self.object_url(object),
                            source,
                        })
                    }
                    Err(_) => return Err(self.no_answer("fetching", object)),
                };
                n += chunk.len() as u64;
                if n > MAX_FETCH_BYTES {
                    return Err(RemoteError::Invalid {
                        object: self.object_url(object),
                        reason: format!("more than the {MAX_FETCH_BYTES} bytes keel fetches"),
                    });
                }
                if let Some(b) = chunk.last() {
                    last = *b;
                }
                file.write_all(&chunk)
                    .await
                    .map_err(|e| local("writing", e))?;
            }
            // A part written by another tool may lack its last newline: lines stay apart.
            if last != b'\n' {
                file.write_all(b"\n")
                    .await
                    .map_err(|e| local("writing", e))?;
            }
        }
        file.flush().await.map_err(|e| local("writing", e))?;
        // On disk before it is renamed into place: a power loss must not leave an empty
        // transcript under the real name.
        file.sync_all().await.map_err(|e| local("syncing", e))
    }

    /// The single-object layout of keel before 0.2 (`<prefix>/<session>/latest.json` naming
    /// the transcript object), so sessions stored by it still resume.
    async fn fetch_legacy(&self, session_id: &str, dest: &Path) -> Result<bool, RemoteError> {
        let pointer_path = self.prefix.child(session_id).child("latest.json");
        let pointer = match within(self.store.get(&pointer_path)).await {
            Ok(r) if r.meta.size > MAX_POINTER_BYTES => {
                return Err(RemoteError::Invalid {
                    object: self.object_url(&pointer_path),
                    reason: format!("{} bytes, not a pointer", r.meta.size),
                })
            }
            Ok(r) => within(r.bytes()).await,
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => Err(e),
        }
        .map_err(|source| RemoteError::Store {
            op: "reading",
            object: self.object_url(&pointer_path),
            source,
        })?;
        let not_pointer = |reason: &str| RemoteError::Invalid {
            object: self.object_url(&pointer_path),
            reason: reason.to_owned(),
        };
        let pointer: Value =
            serde_json::from_slice(&pointer).map_err(|_| not_pointer("not keel's pointer"))?;
        let name = pointer["object"]
            .as_str()
            .filter(|n| n.ends_with(".jsonl") && !n.contains('/') && !n.starts_with('.'))
            .ok_or_else(|| not_pointer("names no transcript object"))?;
        let object = self.prefix.child(session_id).child(name);
        let list = [(name.to_owned(), object, 0)];
        let tmp = dest.with_extension("jsonl.fetching");
        if let Err(e) = self.stream_parts(&list, &tmp).await {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
        rename(&tmp, dest).await?;
        Ok(true)
    }
}

/// Parts by stream: (name, object, size), in name order once listed.
type Parts = BTreeMap<Stream, Vec<(String, ObjectPath, u64)>>;

/// The project key a local transcript is stored under: the one a fetch recorded beside it, or
/// the name of its directory (`<projects>/<project key>/<session>.jsonl`).
fn stored_project(local: &Path) -> Result<String, RemoteError> {
    let marker = local.with_extension("").join(PROJECT_FILE);
    if let Ok(f) = read_repo_file(&marker, &RepoRead::bounded(4 << 10)) {
        let key = f.text.trim();
        if layout::safe_id(key) {
            return Ok(key.to_owned());
        }
    }
    local
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .filter(|k| layout::safe_id(k))
        .map(str::to_owned)
        .ok_or_else(|| RemoteError::Invalid {
            object: local.display().to_string(),
            reason: "the transcript's directory is not a project key".into(),
        })
}

/// The subagent transcripts beside a session's transcript (`<session>/subagents/agent-*.jsonl`).
async fn local_subagents(local: &Path) -> Result<Vec<(Stream, PathBuf)>, RemoteError> {
    let dir = local.with_extension("").join("subagents");
    let mut out = Vec::new();
    let mut rd = match tokio::fs::read_dir(&dir).await {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(RemoteError::Local {
                op: "listing",
                path: dir,
                source,
            })
        }
    };
    while let Ok(Some(e)) = rd.next_entry().await {
        let name = e.file_name();
        let Some(id) = name.to_str().and_then(layout::subagent_of_file) else {
            continue;
        };
        if out.len() >= MAX_SUBAGENTS {
            break;
        }
        out.push((Stream::Subagent(id.to_owned()), e.path()));
    }
    out.sort();
    Ok(out)
}

/// The whole lines of `file` from `offset` (at most [`MAX_PART_BYTES`] of them, cut after the
/// last newline: a line being written is sent next time), and the offset after them.
async fn read_new_lines(file: &Path, offset: u64) -> Result<(Vec<u8>, u64), RemoteError> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let local = |op, source| RemoteError::Local {
        op,
        path: file.to_path_buf(),
        source,
    };
    let mut f = match tokio::fs::File::open(file).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), offset)),
        Err(e) => return Err(local("opening", e)),
    };
    let len = f.metadata().await.map_err(|e| local("reading", e))?.len();
    if len < offset {
        return Err(RemoteError::Invalid {
            object: file.display().to_string(),
            reason: format!(
                "the bucket holds {offset} bytes of it but this machine has {len}: another machine wrote to the session; not uploading over it"
            ),
        });
    }
    let want = (len - offset).min(MAX_PART_BYTES);
    let mut buf = vec![0u8; want as usize];
    f.seek(std::io::SeekFrom::Start(offset))
        .await
        .map_err(|e| local("reading", e))?;
    f.read_exact(&mut buf)
        .await
        .map_err(|e| local("reading", e))?;
    let keep = buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    buf.truncate(keep);
    Ok((buf, offset + keep as u64))
}

/// A subagent's sidecar as the `agent_metadata` line the session stores carry.
async fn read_meta_line(transcript: &Path) -> Option<Vec<u8>> {
    let name = transcript.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let path = transcript.with_file_name(format!("{name}.meta.json"));
    // A regular file of at most 64 KiB (a sidecar is a few hundred bytes).
    let text = read_repo_file(&path, &RepoRead::bounded(64 << 10))
        .ok()?
        .text;
    let Ok(Value::Object(mut meta)) = serde_json::from_str::<Value>(&text) else {
        return None;
    };
    meta.insert("type".into(), Value::from("agent_metadata"));
    serde_json::to_vec(&meta).ok()
}

/// The sidecar file's JSON from an `agent_metadata` line (without the line's `type`).
fn sidecar(line: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(mut m)) => {
            m.remove("type");
            serde_json::to_vec(&m).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

async fn write_new(path: &Path, bytes: &[u8]) -> Result<(), RemoteError> {
    let local = |op, source| RemoteError::Local {
        op,
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| local("creating the directory of", e))?;
    }
    let tmp = path.with_extension("fetching");
    let mut f = tokio::fs::File::create(&tmp)
        .await
        .map_err(|e| local("creating", e))?;
    f.write_all(bytes).await.map_err(|e| local("writing", e))?;
    f.sync_all().await.map_err(|e| local("syncing", e))?;
    rename(&tmp, path).await
}

async fn rename(from: &Path, to: &Path) -> Result<(), RemoteError> {
    tokio::fs::rename(from, to)
        .await
        .map_err(|source| RemoteError::Local {
            op: "renaming into place",
            path: to.to_path_buf(),
            source,
        })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn timeout_error() -> object_store::Error {
    object_store::Error::Generic {
        store: "keel",
        source: format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()).into(),
    }
}

async fn within<T>(
    fut: impl std::future::Future<Output = Result<T, object_store::Error>>,
) -> Result<T, object_store::Error> {
    match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
        Ok(r) => r,
        Err(_) => Err(timeout_error()),
    }
}

#[cfg(test)]
mod tests;
