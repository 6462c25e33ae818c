//! Grep and Glob give the same output on one thread as on many: the walk and the search run in
//! parallel, the results are put back in a fixed order.

use std::path::Path;
use std::sync::Arc;

use keel_tools::glob::GlobTool;
use keel_tools::grep::GrepTool;
use keel_tools::{Tool, ToolLimits, ToolOutcome};
use serde_json::{json, Value};

use super::common::cx;

/// A tree with nested directories, ignored files, hidden files, a binary file and symlinks.
fn tree(root: &Path) {
    let w = |p: &str, text: String| {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    for d in 0..12 {
        for f in 0..25 {
            let body: String = (0..(f % 7 + 1))
                .map(|l| {
                    format!(
                        "line {l} of {d}/{f}: {}\n",
                        if (d + f + l) % 5 == 0 {
                            "needle"
                        } else {
                            "hay"
                        }
                    )
                })
                .collect();
            w(&format!("src/mod{d}/sub{}/file{f}.txt", f % 3), body);
        }
    }
    w(".gitignore", "ignored/\n*.log\n".into());
    w("ignored/needle.txt", "needle hidden by .gitignore\n".into());
    w("src/trace.log", "needle in an ignored log\n".into());
    w(".hidden/needle.txt", "needle in a hidden dir\n".into());
    w("src/.dotfile.txt", "needle in a dotfile\n".into());
    std::fs::write(root.join("src/blob.bin"), b"needle\0\x01\x02binary").unwrap();
    std::os::unix::fs::symlink(root.join("src/mod1"), root.join("src/link_to_dir")).unwrap();
    std::os::unix::fs::symlink(
        root.join("src/mod2/sub0/file0.txt"),
        root.join("src/link.txt"),
    )
    .unwrap();
}

async fn run(tool: &dyn Tool, root: &Path, threads: usize, input: Value) -> String {
    let limits = Arc::new(ToolLimits {
        search_threads: threads,
        ..ToolLimits::default()
    });
    match tool.call(input, cx(root).with_limits(limits)).await {
        ToolOutcome::Ok { content, .. } => content,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn grep_and_glob_give_the_same_output_on_any_number_of_threads() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let cases: Vec<(&dyn Tool, Value)> = vec![
        (
            &GrepTool,
            json!({"pattern": "needle", "output_mode": "content"}),
        ),
        (
            &GrepTool,
            json!({"pattern": "needle", "output_mode": "content", "-C": 1}),
        ),
        (
            &GrepTool,
            json!({"pattern": "needle", "output_mode": "count"}),
        ),
        (
            &GrepTool,
            json!({"pattern": "needle", "output_mode": "files_with_matches"}),
        ),
        (
            &GrepTool,
            json!({"pattern": "needle", "output_mode": "content", "head_limit": 17}),
        ),
        (
            &GrepTool,
            json!({"pattern": "hay", "output_mode": "content", "glob": "src/**/sub1/*.txt"}),
        ),
        (&GlobTool, json!({"pattern": "**/*.txt"})),
        (&GlobTool, json!({"pattern": "src/**/file1*"})),
    ];
    for (tool, input) in cases {
        let one = run(tool, dir.path(), 1, input.clone()).await;
        assert!(
            !one.contains("No matches") && !one.contains("No files"),
            "{input}: {one}"
        );
        assert!(!one.contains("ignored"), "gitignored files stay out: {one}");
        assert!(!one.contains(".hidden"), "hidden files stay out: {one}");
        assert!(!one.contains("blob.bin"), "binary files stay out: {one}");
        assert!(
            !one.contains("link_to_dir"),
            "links are not followed: {one}"
        );
        for threads in [2, 4, 8] {
            let many = run(tool, dir.path(), threads, input.clone()).await;
            assert_eq!(many, one, "{input} on {threads} threads");
        }
    }
}
