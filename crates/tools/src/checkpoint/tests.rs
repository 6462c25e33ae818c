use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;
use std::path::PathBuf;

fn write(c: &Checkpoints, p: &Path, data: &str) {
    c.before_write(p);
    fs::write(p, data).unwrap();
    c.after_write(p, data.as_bytes());
}

#[test]
fn a_rewind_restores_content_and_mode_and_deletes_created_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = Checkpoints::new(dir.path().join("store"));
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    fs::write(&a, "one\ntwo\n").unwrap();
    fs::set_permissions(&a, fs::Permissions::from_mode(0o640)).unwrap();
    store.mark("p1", "first");
    write(&store, &a, "one\n2\n3\n");
    write(&store, &a, "one\nTWO\n");
    store.mark("p2", "second");
    write(&store, &b, "new\n");
    write(&store, &a, "changed again\n");

    let preview = store.rewind("p2", true).unwrap();
    assert_eq!(preview.files_changed.len(), 2);
    assert_eq!(
        fs::read_to_string(&b).unwrap(),
        "new\n",
        "a dry run changes nothing"
    );

    let r = store.rewind("p1", false).unwrap();
    assert_eq!(r.deleted, vec![key_of(&b)]);
    assert_eq!(fs::read_to_string(&a).unwrap(), "one\ntwo\n");
    assert_eq!(
        fs::metadata(&a).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert!(!b.exists());
    assert_eq!(store.prompts(), vec![("p1".to_owned(), "first".to_owned())]);
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("keel"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_file_changed_outside_keel_refuses_the_whole_rewind() {
    let dir = tempfile::tempdir().unwrap();
    let store = Checkpoints::new(dir.path().join("store"));
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    fs::write(&a, "a0").unwrap();
    fs::write(&b, "b0").unwrap();
    store.mark("p1", "first");
    write(&store, &a, "a1");
    write(&store, &b, "b1");
    fs::write(&b, "b1 and a hand edit").unwrap();
    let err = store.rewind("p1", false).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("b.txt changed outside keel"), "{text}");
    assert_eq!(
        fs::read_to_string(&a).unwrap(),
        "a1",
        "none restored halfway"
    );
    fs::remove_file(&b).unwrap();
    let text = store.rewind("p1", false).unwrap_err().to_string();
    assert!(
        text.contains("b.txt was deleted since keel wrote it"),
        "{text}"
    );
    assert!(matches!(
        store.rewind("nope", false),
        Err(RewindError::UnknownPrompt { .. })
    ));
}

#[test]
fn a_reopened_store_rewinds_to_a_prompt_of_the_earlier_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let at = root.join("store");
    let a = root.join("a.txt");
    fs::write(&a, "a0").unwrap();
    {
        let store = Checkpoints::new(&at);
        store.mark("p1", "first");
        write(&store, &a, "a1");
        write(&store, &root.join("new.txt"), "n");
    }
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&at), 0o700);
    assert_eq!(mode(&at.join(index::INDEX_FILE)), 0o600);
    let (store, problem) = Checkpoints::open(&at, std::slice::from_ref(&root));
    assert!(problem.is_none(), "{problem:?}");
    assert_eq!(store.prompts(), vec![("p1".to_owned(), "first".to_owned())]);
    // A later run's snapshots do not overwrite the earlier run's.
    store.mark("p2", "second");
    write(&store, &a, "a2");
    let r = store.rewind("p1", false).unwrap();
    assert_eq!(r.files_changed.len(), 2, "{r:?}");
    assert_eq!(fs::read_to_string(&a).unwrap(), "a0");
    assert!(!root.join("new.txt").exists());
    // The rewind itself is saved: a third run no longer knows p2.
    let (again, _) = Checkpoints::open(&at, &[root]);
    assert!(!again.knows("p2") && again.knows("p1"));
}

#[test]
fn a_hostile_or_corrupt_index_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let project = root.join("project");
    fs::create_dir(&project).unwrap();
    let at = root.join("store");
    {
        let store = Checkpoints::new(&at);
        store.mark("p1", "first");
        write(&store, &project.join("a.txt"), "a1");
    }
    let index = at.join(index::INDEX_FILE);
    let good = fs::read_to_string(&index).unwrap();
    let cases = [
        // A file outside the project.
        good.replace(&*project.display().to_string(), "/etc"),
        // A path that climbs out.
        good.replace("a.txt", "../../etc/passwd"),
        // A snapshot named by a path.
        good.replace(
            "\"kind\":\"missing\"",
            "\"kind\":\"kept\",\"blob\":\"../../x\",\"mode\":420,\"len\":1,\"hash\":1",
        ),
        "{not json".to_owned(),
        good.replace("\"version\":1", "\"version\":9"),
    ];
    for (i, bad) in cases.iter().enumerate() {
        assert_ne!(bad, &good, "case {i} changes the index");
        fs::write(&index, bad).unwrap();
        let (store, problem) = Checkpoints::open(&at, std::slice::from_ref(&project));
        let problem = problem.unwrap_or_else(|| panic!("case {i} was trusted"));
        assert!(problem.to_string().contains("index.json"), "{problem}");
        assert!(
            store.prompts().is_empty(),
            "case {i}: nothing of it is used"
        );
    }
    fs::remove_file(&index).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &index).unwrap();
    assert!(
        Checkpoints::open(&at, &[project]).1.is_some(),
        "a link is refused"
    );
}

#[test]
fn a_tampered_snapshot_is_refused_naming_the_file_and_nothing_is_restored() {
    let dir = tempfile::tempdir().unwrap();
    let store = Checkpoints::new(dir.path().join("store"));
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    fs::write(&a, "a0").unwrap();
    fs::write(&b, "b0").unwrap();
    store.mark("p1", "first");
    write(&store, &a, "a1");
    write(&store, &b, "b1");
    // Same length, other content: only the hash tells.
    let blobs: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap() != index::INDEX_FILE)
            .collect();
        v.sort();
        v
    };
    fs::write(&blobs[1], "XX").unwrap();
    let text = store.rewind("p1", false).unwrap_err().to_string();
    assert!(text.contains("b.txt"), "{text}");
    assert!(text.contains("was changed"), "{text}");
    assert_eq!(
        fs::read_to_string(&a).unwrap(),
        "a1",
        "none restored halfway"
    );
    assert_eq!(fs::read_to_string(&b).unwrap(), "b1");
}

#[test]
fn a_directory_swapped_after_the_checks_does_not_redirect_the_restore() {
    let dir = tempfile::tempdir().unwrap();
    let store = Checkpoints::new(dir.path().join("store"));
    let sub = dir.path().join("sub");
    let decoy = dir.path().join("decoy");
    fs::create_dir(&sub).unwrap();
    fs::create_dir(&decoy).unwrap();
    fs::write(decoy.join("a.txt"), "decoy").unwrap();
    let f = sub.join("a.txt");
    fs::write(&f, "a0").unwrap();
    store.mark("p1", "first");
    write(&store, &f, "a1");
    let moved = dir.path().join("moved");
    let (s2, m2, d2) = (sub, moved.clone(), decoy.clone());
    restore::between_checks_and_writes(Box::new(move || {
        fs::rename(&s2, &m2).unwrap();
        std::os::unix::fs::symlink(&d2, &s2).unwrap();
    }));
    store.rewind("p1", false).unwrap();
    assert_eq!(fs::read_to_string(decoy.join("a.txt")).unwrap(), "decoy");
    assert_eq!(
        fs::read_to_string(moved.join("a.txt")).unwrap(),
        "a0",
        "restored in the directory that was checked"
    );
}

#[test]
fn a_directory_swapped_for_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Checkpoints::new(dir.path().join("store"));
    let sub = dir.path().join("sub");
    fs::create_dir(&sub).unwrap();
    let f = sub.join("a.txt");
    fs::write(&f, "a0").unwrap();
    store.mark("p1", "first");
    write(&store, &f, "a1");
    let elsewhere = dir.path().join("elsewhere");
    fs::rename(&sub, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &sub).unwrap();
    let text = store.rewind("p1", false).unwrap_err().to_string();
    assert!(text.contains("is no longer where it was"), "{text}");
    assert_eq!(fs::read_to_string(elsewhere.join("a.txt")).unwrap(), "a1");
}

#[test]
fn links_planted_beside_a_file_are_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("bashrc");
    fs::write(&victim, "mine\n").unwrap();
    let store = Checkpoints::new(dir.path().join("store"));
    let a = dir.path().join("foo.txt");
    fs::write(&a, "planted by the repository\n").unwrap();
    // The names the side files once had (fixed), pointing out of the project.
    for what in ["keel-rewind-new", "keel-rewind-old"] {
        std::os::unix::fs::symlink(&victim, dir.path().join(format!(".foo.txt.{what}"))).unwrap();
    }
    store.mark("p1", "first");
    write(&store, &a, "edited by keel\n");
    store.rewind("p1", false).unwrap();
    assert_eq!(
        fs::read_to_string(&a).unwrap(),
        "planted by the repository\n"
    );
    assert!(!fs::symlink_metadata(&a).unwrap().file_type().is_symlink());
    assert_eq!(
        fs::read_to_string(&victim).unwrap(),
        "mine\n",
        "nothing written outside"
    );
}

#[test]
fn stores_unwritten_for_the_retention_are_pruned_but_never_through_a_link() {
    use nix::sys::stat::{utimensat, UtimensatFlags};
    use nix::sys::time::TimeSpec;
    let t = tempfile::tempdir().unwrap();
    let parent = t.path().join("checkpoints");
    let outside = t.path().join("outside");
    // Stores are named by session id and hold keel's index; "not-keels" is an old folder
    // that is neither (a KEEL_HOME pointed at some other folder must lose nothing).
    let (old, fresh, current) = (
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
        "00000000-0000-4000-8000-000000000003",
    );
    for d in [old, fresh, current, "not-keels"] {
        fs::create_dir_all(parent.join(d)).unwrap();
        fs::write(parent.join(d).join("1"), "x").unwrap();
        if d != "not-keels" {
            fs::write(parent.join(d).join("index.json"), "{}").unwrap();
        }
    }
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("keep-me"), "x").unwrap();
    std::os::unix::fs::symlink(&outside, parent.join("link")).unwrap();
    let long_ago = TimeSpec::new(1_000_000_000, 0); // 2001
    for p in [
        parent.join(old),
        parent.join(current),
        parent.join("not-keels"),
        outside.clone(),
    ] {
        utimensat(
            None,
            &p,
            &long_ago,
            &long_ago,
            UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }
    let removed = super::prune_stale(&parent, &parent.join(current), super::RETENTION);
    assert_eq!(removed, 1);
    assert!(!parent.join(old).exists(), "the stale store is gone");
    assert!(
        parent.join(fresh).join("1").exists(),
        "a recent store stays"
    );
    assert!(
        parent.join(current).join("1").exists(),
        "the store in use stays"
    );
    assert!(
        parent.join("not-keels").join("1").exists(),
        "what is not keel's store stays"
    );
    assert!(
        outside.join("keep-me").exists(),
        "nothing is removed through a link"
    );
}
