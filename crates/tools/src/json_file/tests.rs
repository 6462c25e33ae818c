use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use serde_json::json;

use super::*;

fn add_to_list(path: &Path, item: &str) -> Result<(), JsonFileError> {
    update(path, |root| {
        let list = root.entry("allow").or_insert_with(|| json!([]));
        let list = list.as_array_mut().ok_or_else(|| JsonFileError::Refused {
            path: path.to_owned(),
            reason: "\"allow\" is not a list".into(),
        })?;
        list.push(Value::String(item.to_owned()));
        Ok(())
    })
}

#[test]
fn twenty_writers_at_once_lose_no_update_and_never_leave_a_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude").join("settings.local.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{\"keep\": {\"unknown\": [1, 2]}}\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();

    let writers = 20;
    let rounds = 5;
    let start = Arc::new(Barrier::new(writers + 1));
    let done = Arc::new(AtomicBool::new(false));
    // A reader checks the file all along: it is always whole JSON.
    let reader = {
        let (path, done, start) = (path.clone(), done.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            let mut reads = 0;
            while !done.load(Ordering::SeqCst) || reads == 0 {
                let text = std::fs::read_to_string(&path).unwrap();
                let v: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("a reader saw a partial file ({e}): {text:?}"));
                assert!(v["keep"].is_object());
                reads += 1;
            }
            reads
        })
    };
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (path, start) = (path.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for r in 0..rounds {
                    add_to_list(&path, &format!("Bash(writer-{w}-{r})")).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);

    let root = read(&path).unwrap();
    let list = root["allow"].as_array().unwrap();
    assert_eq!(list.len(), writers * rounds, "an update was lost");
    for w in 0..writers {
        for r in 0..rounds {
            let want = format!("Bash(writer-{w}-{r})");
            assert!(list.iter().any(|v| v == &json!(want)), "{want} is missing");
        }
    }
    assert_eq!(
        root["keep"],
        json!({"unknown": [1, 2]}),
        "unknown keys are kept"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "the file keeps its mode");
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("keel-tmp")),
        "left behind: {names:?}"
    );
}

#[test]
fn a_file_that_is_not_a_json_object_is_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    for bad in ["{ nope", "[1, 2]"] {
        std::fs::write(&path, bad).unwrap();
        let err = add_to_list(&path, "x").unwrap_err();
        assert!(
            matches!(
                err,
                JsonFileError::Invalid { .. } | JsonFileError::NotObject { .. }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("settings.json"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
    }
    // A change that refuses writes nothing either.
    std::fs::write(&path, "{\"allow\": 3}").unwrap();
    let err = add_to_list(&path, "x").unwrap_err();
    assert!(matches!(err, JsonFileError::Refused { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"allow\": 3}");
}

#[test]
fn a_link_in_place_of_the_file_is_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("global.json");
    std::fs::write(&elsewhere, "{}").unwrap();
    let path = dir.path().join("settings.local.json");
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let err = add_to_list(&path, "Bash(*)").unwrap_err();
    assert!(matches!(err, JsonFileError::NotRegular { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "{}");
    assert!(std::fs::symlink_metadata(&path)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_missing_file_and_directory_are_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b.json");
    add_to_list(&path, "one").unwrap();
    assert_eq!(read(&path).unwrap()["allow"], json!(["one"]));
}
