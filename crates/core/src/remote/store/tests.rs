use std::io::Write;

use super::*;

fn store(dir: &Path) -> RemoteTranscripts {
    RemoteTranscripts::from_url(&format!("file://{}", dir.display()), &|_| None).unwrap()
}

/// A local projects directory with one project key, and the session file's path in it.
fn session_file(root: &Path, project: &str, sid: &str) -> PathBuf {
    let dir = root.join(project);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{sid}.jsonl"))
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// The part files under a directory of the bucket, in name order.
fn parts(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

fn concat(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

#[tokio::test]
async fn each_upload_sends_only_the_new_lines_as_a_part_in_the_sdk_layout() {
    let bucket = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let r = store(bucket.path());
    let file = session_file(local.path(), "-work-proj", "s1");
    let mut synced = Synced::default();
    let line = format!("{{\"type\":\"user\",\"pad\":\"{}\"}}\n", "x".repeat(200));
    let mut sent = Vec::new();
    for _ in 0..200 {
        append(&file, &line);
        sent.push(r.sync("s1", &file, &mut synced).await.unwrap());
    }
    // Flat: every turn sends its own line and nothing of the 200 before it.
    assert!(sent.iter().all(|n| *n == line.len() as u64), "{sent:?}");
    let dir = bucket.path().join("-work-proj/s1");
    let got = parts(&dir);
    assert_eq!(got.len(), 200);
    for p in &got {
        assert!(
            layout::is_part(p.file_name().unwrap().to_str().unwrap()),
            "{p:?}"
        );
    }
    assert_eq!(concat(&got), std::fs::read_to_string(&file).unwrap());
    // Nothing new: nothing sent.
    assert_eq!(r.sync("s1", &file, &mut synced).await.unwrap(), 0);
}

#[tokio::test]
async fn a_line_being_written_waits_for_its_newline() {
    let bucket = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let r = store(bucket.path());
    let file = session_file(local.path(), "p", "s1");
    let mut synced = Synced::default();
    append(&file, "{\"a\":1}\n{\"b\":");
    assert_eq!(r.sync("s1", &file, &mut synced).await.unwrap(), 8);
    append(&file, "2}\n");
    assert_eq!(r.sync("s1", &file, &mut synced).await.unwrap(), 8);
    assert_eq!(
        concat(&parts(&bucket.path().join("p/s1"))),
        "{\"a\":1}\n{\"b\":2}\n"
    );
}

#[tokio::test]
async fn subagents_and_their_metadata_go_under_subagents_and_come_back() {
    let bucket = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let r = store(bucket.path());
    let file = session_file(local.path(), "p", "s1");
    append(&file, "{\"type\":\"user\"}\n");
    let sub = local.path().join("p/s1/subagents");
    std::fs::create_dir_all(&sub).unwrap();
    append(&sub.join("agent-a7.jsonl"), "{\"type\":\"assistant\"}\n");
    std::fs::write(
        sub.join("agent-a7.meta.json"),
        r#"{"agentType":"general","toolUseId":"t1"}"#,
    )
    .unwrap();
    let mut synced = Synced::default();
    r.sync("s1", &file, &mut synced).await.unwrap();
    // The metadata is sent once, not at every upload.
    append(&sub.join("agent-a7.jsonl"), "{\"type\":\"user\"}\n");
    r.sync("s1", &file, &mut synced).await.unwrap();
    let stored = concat(&parts(&bucket.path().join("p/s1/subagents/agent-a7")));
    assert_eq!(stored.matches("agent_metadata").count(), 1, "{stored}");
    assert!(stored.contains("\"toolUseId\":\"t1\""));

    // Another machine, the same directory: the session, its subagent and sidecar come back.
    let other = tempfile::tempdir().unwrap();
    let dest = session_file(other.path(), "p", "s1");
    assert!(r.fetch("s1", &dest).await.unwrap());
    assert_eq!(
        std::fs::read_to_string(&dest).unwrap(),
        "{\"type\":\"user\"}\n"
    );
    let osub = other.path().join("p/s1/subagents");
    assert_eq!(
        std::fs::read_to_string(osub.join("agent-a7.jsonl")).unwrap(),
        "{\"type\":\"assistant\"}\n{\"type\":\"user\"}\n"
    );
    let meta: Value =
        serde_json::from_slice(&std::fs::read(osub.join("agent-a7.meta.json")).unwrap()).unwrap();
    assert_eq!(
        meta,
        serde_json::json!({"agentType":"general","toolUseId":"t1"})
    );
    // What came from the bucket is not sent again by the next process there.
    let mut fresh = Synced::default();
    assert_eq!(r.sync("s1", &dest, &mut fresh).await.unwrap(), 0);
    append(&dest, "{\"type\":\"assistant\"}\n");
    assert_eq!(r.sync("s1", &dest, &mut fresh).await.unwrap(), 21);
}

#[tokio::test]
async fn a_session_started_elsewhere_is_found_and_stays_where_it_is() {
    let bucket = tempfile::tempdir().unwrap();
    let r = store(bucket.path());
    let a = tempfile::tempdir().unwrap();
    let file = session_file(a.path(), "-machine-a", "s9");
    append(&file, "{\"n\":1}\n");
    r.sync("s9", &file, &mut Synced::default()).await.unwrap();
    // Machine B runs in another directory, so another project key.
    let b = tempfile::tempdir().unwrap();
    let dest = session_file(b.path(), "-machine-b", "s9");
    assert!(r.fetch("s9", &dest).await.unwrap());
    append(&dest, "{\"n\":2}\n");
    r.sync("s9", &dest, &mut Synced::default()).await.unwrap();
    assert_eq!(
        concat(&parts(&bucket.path().join("-machine-a/s9"))),
        "{\"n\":1}\n{\"n\":2}\n",
        "the session keeps one place in the bucket"
    );
    assert!(!bucket.path().join("-machine-b").exists());
    assert!(!r
        .fetch("nobody", &session_file(b.path(), "-machine-b", "nobody"))
        .await
        .unwrap());
}

#[tokio::test]
async fn a_bucket_that_holds_more_than_this_machine_is_not_written_over() {
    let bucket = tempfile::tempdir().unwrap();
    let r = store(bucket.path());
    let a = tempfile::tempdir().unwrap();
    let file = session_file(a.path(), "p", "s1");
    append(&file, "{\"n\":1}\n{\"n\":2}\n");
    r.sync("s1", &file, &mut Synced::default()).await.unwrap();
    let b = tempfile::tempdir().unwrap();
    let short = session_file(b.path(), "p", "s1");
    append(&short, "{\"n\":1}\n");
    let e = r
        .sync("s1", &short, &mut Synced::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("another machine wrote to the session"), "{e}");
    assert_eq!(parts(&bucket.path().join("p/s1")).len(), 1);
}

#[tokio::test]
async fn sessions_stored_in_the_older_single_object_layout_still_come_back() {
    let bucket = tempfile::tempdir().unwrap();
    let r = store(bucket.path());
    std::fs::create_dir_all(bucket.path().join("s1")).unwrap();
    std::fs::write(
        bucket.path().join("s1/00000000000000000002.jsonl"),
        "one\ntwo\n",
    )
    .unwrap();
    std::fs::write(
        bucket.path().join("s1/latest.json"),
        r#"{"object":"00000000000000000002.jsonl","generation":2}"#,
    )
    .unwrap();
    let local = tempfile::tempdir().unwrap();
    let dest = session_file(local.path(), "p", "s1");
    assert!(r.fetch("s1", &dest).await.unwrap());
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "one\ntwo\n");
    // A pointer that names something outside the session's prefix is refused.
    for evil in [
        r#"{"object":"../../etc/passwd.jsonl"}"#,
        r#"{"object":"a/b.jsonl"}"#,
        "not json",
    ] {
        std::fs::write(bucket.path().join("s1/latest.json"), evil).unwrap();
        let e = r
            .fetch("s1", &session_file(local.path(), "q", "s1"))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("latest.json"), "{e}");
    }
}

#[test]
fn only_s3_and_file_urls_are_taken() {
    for bad in ["http://example.com/x", "gs://bucket/x", "no url"] {
        let e = RemoteTranscripts::from_url(bad, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("KEEL_TRANSCRIPT_URL"), "{e}");
    }
}
