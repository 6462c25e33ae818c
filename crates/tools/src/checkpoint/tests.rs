use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;

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
fn the_store_is_removed_with_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("store");
    let store = Checkpoints::new(&at);
    let a = dir.path().join("a.txt");
    fs::write(&a, "a0").unwrap();
    store.mark("p1", "first");
    write(&store, &a, "a1");
    assert!(at.is_dir());
    drop(store);
    assert!(!at.exists());
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
