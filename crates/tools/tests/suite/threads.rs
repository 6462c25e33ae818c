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
    // Names whose byte order differs from their path order (`mod1-x/…` sorts after `mod1/…`
    // as a path, before it as bytes).
    w(
        "src/mod1-x/needle.txt",
        "needle after mod1 as a path\n".into(),
    );
    w("src/mod1.txt", "needle beside mod1\n".into());
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
    run_capped(tool, root, threads, 30_000, input).await
}

/// Run with the output cut at about `cap` bytes.
async fn run_capped(
    tool: &dyn Tool,
    root: &Path,
    threads: usize,
    cap: usize,
    input: Value,
) -> String {
    let limits = Arc::new(ToolLimits {
        search_threads: threads,
        head_bytes: cap / 2,
        tail_bytes: cap - cap / 2,
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

/// The files of content lines (`path:line:text`), each once, in the order they come.
fn files_in(content: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for line in content.lines().filter(|l| !l.starts_with('[')) {
        let file = line.split(':').next().unwrap().to_string();
        if files.last() != Some(&file) {
            files.push(file);
        }
    }
    files
}

#[tokio::test]
async fn grep_output_is_in_path_order_and_cut_at_the_same_place_on_any_number_of_threads() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let input = json!({"pattern": "needle|hay", "output_mode": "content"});
    let whole = run_capped(&GrepTool, dir.path(), 1, 10_000_000, input.clone()).await;
    assert!(!whole.contains("[output cut"), "{whole}");
    let files = files_in(&whole);
    let mut sorted: Vec<&Path> = files.iter().map(Path::new).collect();
    sorted.sort();
    assert_eq!(
        sorted,
        files.iter().map(Path::new).collect::<Vec<_>>(),
        "files come in path order"
    );
    let at = |name: &str| files.iter().position(|f| f.ends_with(name)).unwrap();
    assert!(at("src/mod1/sub0/file0.txt") < at("src/mod1-x/needle.txt"));
    assert!(at("src/mod1.txt") > at("src/mod1/sub2/file2.txt"));
    let whole: Vec<&str> = whole.lines().collect();
    // Caps small enough that the walk stops searching early and the rest is searched after it.
    for cap in [200, 3_000, 20_000] {
        let one = run_capped(&GrepTool, dir.path(), 1, cap, input.clone()).await;
        assert!(one.contains("[output cut at about"), "cap {cap}: {one}");
        let lines: Vec<&str> = one.lines().filter(|l| !l.starts_with('[')).collect();
        assert!(lines.len() < whole.len(), "cap {cap}");
        assert_eq!(
            lines,
            whole[..lines.len()],
            "cap {cap}: the head of the whole output"
        );
        for threads in [2, 4, 8] {
            let many = run_capped(&GrepTool, dir.path(), threads, cap, input.clone()).await;
            assert_eq!(many, one, "cap {cap} on {threads} threads");
        }
    }
    for limit in [1, 40, 600] {
        let input = json!({"pattern": "needle|hay", "output_mode": "count", "head_limit": limit});
        let one = run(&GrepTool, dir.path(), 1, input.clone()).await;
        assert_eq!(
            one.lines().filter(|l| !l.starts_with('[')).count(),
            limit.min(files.len())
        );
        for threads in [2, 4, 8] {
            let many = run(&GrepTool, dir.path(), threads, input.clone()).await;
            assert_eq!(many, one, "head_limit {limit} on {threads} threads");
        }
    }
}
