//! The bypass corpus for paths: symlinks followed by `..` (judged where the kernel goes),
//! reads outside the project (asked, headless: denied, and nothing of the secret reaches the
//! model), and MCP resources of a denied server. Each family has a positive control: with a
//! rule that allows it, the same call does leave its mark or return the secret.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::common::{mcp_test_server, Harness, Provider, Run};

/// A scratch world: the project, a fake home with secrets, and a directory outside both.
struct World {
    h: Harness,
    outside: tempfile::TempDir,
    run: Run,
}

impl World {
    fn dir(&self) -> &Path {
        self.h.cwd()
    }
    fn out(&self) -> PathBuf {
        self.outside.path().to_path_buf()
    }
    /// Everything the model was sent, as one text.
    fn sent(&self) -> String {
        self.h
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
    fn denied(&self) -> bool {
        !self.run.of("system/permission_denied").is_empty()
            && self.run.result()["permission_denials"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
    }
}

fn build(dir: &Path, home: &Path, out: &Path) {
    use std::os::unix::fs::symlink;
    std::fs::create_dir_all(out.join("sub")).unwrap();
    std::fs::write(out.join("victim.txt"), "keep").unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("d")).unwrap();
    std::fs::write(dir.join("src/a.txt"), "a").unwrap();
    std::fs::write(dir.join(".env"), "TOPSECRET-ENV").unwrap();
    symlink(out.join("sub"), dir.join("link")).unwrap();
    symlink(out.join("sub"), dir.join("src/link")).unwrap();
    // `d/up/../.env` is the project's .env to the kernel (`d/.env` by text).
    symlink("../src", dir.join("d/up")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "TOPSECRET-SSH").unwrap();
    std::fs::write(home.join(".ssh/TOPSECRET-NAME.pub"), "k").unwrap();
    std::fs::write(home.join(".aws/credentials"), "TOPSECRET-AWS").unwrap();
    symlink(home.join(".ssh"), dir.join("keys")).unwrap();
}

/// Run `calls` (one step each) under `args`; `@ABS`, `@HOME` and `@OUT` in both stand for
/// the project, the fake home and the outside directory, as absolute paths (so
/// `Read(/@HOME/x)` is the rule `Read(//<home>/x)`).
async fn attempt(calls: &[(&str, Value)], args: &[&str]) -> World {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    build(dir.path(), home.path(), outside.path());
    let (abs, home_s, out_s) = (
        dir.path().display().to_string(),
        home.path().display().to_string(),
        outside.path().display().to_string(),
    );
    let fill = |s: &str| {
        s.replace("@ABS", &abs)
            .replace("@HOME", &home_s)
            .replace("@OUT", &out_s)
            .replace("@MCP", &mcp_test_server().display().to_string())
    };
    let mut steps: Vec<Value> = calls
        .iter()
        .map(|(tool, input)| {
            let input: Value = serde_json::from_str(&fill(&input.to_string())).unwrap();
            json!({"kind": "tool_use", "calls": [{"name": tool, "input": input}]})
        })
        .collect();
    steps.push(json!({"kind": "text", "text": "done"}));
    let scenario = json!({ "steps": steps }).to_string();
    let args: Vec<String> = args.iter().map(|a| fill(a)).collect();
    let h = Harness {
        mock: keel_mock::MockServer::start(keel_mock::Scenario::from_json(&scenario).unwrap())
            .await
            .unwrap(),
        dir,
        home,
        provider: Provider::Anthropic,
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = h.run_stream("go", &args, &[]).await;
    run.assert_end("success", false, "completed", 0);
    World { h, outside, run }
}

const MCP_CFG: &str = r#"{"mcpServers":{"t":{"command":"@MCP","args":["--mode","normal"]}}}"#;

/// Symlinks followed by `..`: each write lands outside what the rule or mode allows, so it
/// is asked about (headless: denied) and leaves nothing; with the directory added, it lands.
#[tokio::test]
async fn a_dot_dot_after_a_symlink_is_judged_where_the_kernel_goes() {
    let write = (
        "Write",
        json!({"file_path": "link/../pwned", "content": "x"}),
    );
    let redirect = ("Bash", json!({"command": "echo x > link/../pwned"}));
    let edit = (
        "Edit",
        json!({"file_path": "src/link/../victim.txt", "old_string": "keep", "new_string": "gone"}),
    );
    let accept = ["--permission-mode", "acceptEdits"];
    // `echo` is allowed, so only the file it writes through the redirection is judged.
    let accept_echo = [
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash(echo:*)",
    ];
    for (call, args) in [
        (write.clone(), &accept[..]),
        (redirect.clone(), &accept_echo[..]),
        (edit.clone(), &["--allowedTools", "Edit(src/*)"][..]),
    ] {
        let w = attempt(std::slice::from_ref(&call), args).await;
        assert!(
            w.denied(),
            "{call:?} was not denied: {:?}",
            w.run.tool_results()
        );
        assert!(!w.out().join("pwned").exists(), "{call:?} wrote outside");
        assert!(
            !w.dir().join("pwned").exists(),
            "{call:?} wrote beside the link"
        );
        assert_eq!(
            std::fs::read_to_string(w.out().join("victim.txt")).unwrap(),
            "keep",
            "{call:?} edited outside src"
        );
    }
    // Positive controls: with the outside directory added, the same calls land there.
    for call in [write, redirect] {
        let args = [&accept_echo[..], &["--add-dir", "@OUT"]].concat();
        let w = attempt(std::slice::from_ref(&call), &args).await;
        assert!(!w.denied(), "{call:?}: {:?}", w.run.tool_results());
        assert!(
            w.out().join("pwned").exists(),
            "{call:?} lands where the kernel goes"
        );
        assert!(!w.dir().join("pwned").exists());
    }
    let w = attempt(
        &[("Read", json!({"file_path": "@OUT/victim.txt"})), edit],
        &["--allowedTools", "Edit(/@OUT/**) Read(/@OUT/**)"],
    )
    .await;
    assert!(!w.denied(), "{:?}", w.run.tool_results());
    assert_eq!(
        std::fs::read_to_string(w.out().join("victim.txt")).unwrap(),
        "gone"
    );
}

/// `Read(./.env)` is not bypassed by a spelling whose text differs from where the kernel goes.
#[tokio::test]
async fn a_read_deny_rule_sees_through_a_link_and_dot_dot() {
    let w = attempt(
        &[("Read", json!({"file_path": "d/up/../.env"}))],
        &["--disallowedTools", "Read(./.env)"],
    )
    .await;
    assert!(w.denied(), "{:?}", w.run.tool_results());
    assert!(
        !w.sent().contains("TOPSECRET-ENV"),
        "the secret reached the model"
    );
    // Positive control: without the rule, the same spelling reads the project's .env.
    let w = attempt(&[("Read", json!({"file_path": "d/up/../.env"}))], &[]).await;
    assert!(!w.denied());
    assert!(w.sent().contains("TOPSECRET-ENV"));
}

/// Reads outside the project ask (headless: denied, naming a rule that would allow them), by
/// every tool and spelling; nothing of the secret reaches the model. An explicit rule (or the
/// directory added) allows each.
#[tokio::test]
async fn reads_outside_the_project_are_asked_about() {
    let cases: Vec<((&str, Value), String)> = vec![
        (
            ("Read", json!({"file_path": "@HOME/.ssh/id_rsa"})),
            "Read(/@HOME/.ssh/**)".into(),
        ),
        (
            ("Read", json!({"file_path": "~/.ssh/id_rsa"})),
            "Read(/@HOME/.ssh/**)".into(),
        ),
        (
            ("Read", json!({"file_path": "keys/id_rsa"})),
            "Read(/@HOME/.ssh/**)".into(),
        ),
        (
            ("Bash", json!({"command": "cat ~/.aws/credentials"})),
            "Read(/@HOME/.aws/**)".into(),
        ),
        (
            ("Bash", json!({"command": "cd ~/.aws && cat credentials"})),
            "Read(/@HOME/.aws/**)".into(),
        ),
        (
            ("Bash", json!({"command": "grep -r SECRET ~/.ssh"})),
            "Read(/@HOME/.ssh/**)".into(),
        ),
        (
            (
                "Grep",
                json!({"pattern": "SECRET", "path": "~/.aws", "output_mode": "content"}),
            ),
            "Read(/@HOME/.aws/**)".into(),
        ),
        (
            ("Glob", json!({"pattern": "*", "path": "@HOME/.ssh"})),
            "Read(/@HOME/.ssh/**)".into(),
        ),
        (
            ("Glob", json!({"pattern": "@HOME/.ssh/*"})),
            "Read(/@HOME/.ssh/**)".into(),
        ),
    ];
    let runs = futures_util::future::join_all(
        cases
            .iter()
            .map(|(call, _)| async move { attempt(std::slice::from_ref(call), &[]).await }),
    )
    .await;
    for ((call, _), w) in cases.iter().zip(&runs) {
        assert!(
            w.denied(),
            "{call:?} was not denied: {:?}",
            w.run.tool_results()
        );
        assert!(
            !w.sent().contains("TOPSECRET"),
            "{call:?}: a secret reached the model"
        );
        let text = w.run.tool_results()[0].to_string();
        assert!(
            text.contains("Read(/") && text.contains("--add-dir"),
            "{call:?}: the denial names the rule that would allow it: {text}"
        );
    }
    // Positive controls: an explicit Read rule allows each; so does bypassPermissions.
    let runs = futures_util::future::join_all(cases.iter().map(|(call, rule)| async move {
        attempt(std::slice::from_ref(call), &["--allowedTools", rule]).await
    }))
    .await;
    for ((call, _), w) in cases.iter().zip(&runs) {
        assert!(
            !w.denied(),
            "{call:?} with a rule: {:?}",
            w.run.tool_results()
        );
        assert!(
            w.sent().contains("TOPSECRET"),
            "{call:?}: the rule lets it read"
        );
    }
    let w = attempt(
        &[cases[0].0.clone()],
        &["--permission-mode", "bypassPermissions"],
    )
    .await;
    assert!(w.sent().contains("TOPSECRET-SSH"));
    let w = attempt(&[cases[3].0.clone()], &["--add-dir", "@HOME/.aws"]).await;
    assert!(
        w.sent().contains("TOPSECRET-AWS"),
        "an added directory is readable"
    );
}

/// A deny rule on a whole MCP server stops the resource tools from reading it, in every mode;
/// with no rule they are asked about; a rule on the server allows them.
#[tokio::test]
async fn resources_of_a_denied_mcp_server_are_not_read() {
    let read = (
        "ReadMcpResourceTool",
        json!({"server": "t", "uri": "keel://notes/hello"}),
    );
    let list = ("ListMcpResourcesTool", json!({}));
    for (call, args) in [
        (
            read.clone(),
            vec![
                "--mcp-config",
                MCP_CFG,
                "--permission-mode",
                "bypassPermissions",
                "--disallowedTools",
                "mcp__t",
            ],
        ),
        (
            list.clone(),
            vec![
                "--mcp-config",
                MCP_CFG,
                "--permission-mode",
                "bypassPermissions",
                "--disallowedTools",
                "mcp__t",
            ],
        ),
        (
            read.clone(),
            vec![
                "--mcp-config",
                MCP_CFG,
                "--allowedTools",
                "ReadMcpResourceTool",
                "--disallowedTools",
                "mcp__t",
            ],
        ),
        (read.clone(), vec!["--mcp-config", MCP_CFG]),
    ] {
        let w = attempt(std::slice::from_ref(&call), &args).await;
        assert!(
            w.denied(),
            "{call:?} under {args:?}: {:?}",
            w.run.tool_results()
        );
        let sent = w.sent();
        assert!(
            !sent.contains("hello from a resource") && !sent.contains("A note to read"),
            "{call:?}: {sent}"
        );
    }
    let w = attempt(
        &[read],
        &["--mcp-config", MCP_CFG, "--allowedTools", "mcp__t"],
    )
    .await;
    assert!(!w.denied(), "{:?}", w.run.tool_results());
    assert!(w.sent().contains("hello from a resource"));
}
