//! WebFetch's further URLs are judged like its first, through the real binary: a redirect hop
//! goes through the PreToolUse hooks and a custom command's `allowed-tools` too, a deny rule on
//! an address reaches every spelling of it, and the https upgrade is what a port rule judges.
//! A loopback server in this process plays the web and records every request it gets.

use std::path::Path;
use std::sync::{Arc, Mutex};

use keel_mock::{Scenario, Step};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::common::Harness;
use super::web_tools::{fetch_call, text_of};

/// A loopback web server: `/page` is a page, `/go` redirects to `/private-page`, `/away`
/// redirects wherever `away` says; every request line is recorded.
struct Web {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    away: Arc<Mutex<String>>,
}

impl Web {
    async fn start() -> Web {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let away = Arc::new(Mutex::new(String::from("/page")));
        let (log, to) = (seen.clone(), away.clone());
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, log.clone(), to.lock().unwrap().clone()));
            }
        });
        Web { port, seen, away }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(mut sock: TcpStream, log: Arc<Mutex<Vec<String>>>, away: String) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    log.lock().unwrap().push(line.clone());
    let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
    let redirect = |to: &str| {
        format!("HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    };
    let reply = match path.as_str() {
        "/go" => redirect("/private-page"),
        "/away" => redirect(&away),
        "/page" | "/private-page" => {
            let body = "The secret word is marmalade.";
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        }
        _ => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
    };
    let _ = sock.write_all(reply.as_bytes()).await;
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A PreToolUse hook that blocks a URL blocks it as a redirect's target too, on the very host
/// and port the first URL was allowed on: the hop goes through the hooks again.
#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_hop_goes_through_the_pretooluse_hooks() {
    let web = Web::start().await;
    let h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![fetch_call(&web.url("/go"))]),
        Step::text("ok"),
    ]))
    .await;
    let hook = json!({"type": "command",
        "command": "if grep -q private-page; then echo 'no private pages, says the team' >&2; exit 2; fi; exit 0"});
    write(
        h.cwd(),
        ".claude/settings.json",
        &json!({"hooks": {"PreToolUse": [{"matcher": "WebFetch", "hooks": [hook]}]}}).to_string(),
    );
    let run = h
        .run_stream(
            "fetch",
            &["--allowedTools", "WebFetch(domain:127.0.0.1)"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = run.tool_results()[0];
    assert_eq!(r["is_error"], true, "{r}");
    let t = text_of(r);
    assert!(t.contains("no private pages, says the team"), "{t}");
    assert!(t.contains("/private-page"), "the hop is named: {t}");
    assert_eq!(
        web.seen(),
        vec!["GET /go HTTP/1.1"],
        "the hop was not fetched"
    );
    assert_eq!(h.requests().len(), 2, "no reading request");
}

/// A custom command's `allowed-tools` narrow its turn's redirects too: the session's broader
/// rule does not carry a hop to another port the command does not list.
#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_hop_stays_within_a_commands_allowed_tools() {
    let (a, b) = (Web::start().await, Web::start().await);
    *a.away.lock().unwrap() = b.url("/page");
    let h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![fetch_call(&a.url("/away"))]),
        Step::text("ok"),
    ]))
    .await;
    write(
        h.cwd(),
        ".claude/commands/fetchit.md",
        &format!(
            "---\nallowed-tools: WebFetch(domain:127.0.0.1:{})\n---\nFetch the page.\n",
            a.port
        ),
    );
    let run = h
        .run_stream(
            "/fetchit",
            &["--allowedTools", "WebFetch(domain:127.0.0.1)"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = run.tool_results()[0];
    assert_eq!(r["is_error"], true, "{r}");
    let t = text_of(r);
    assert!(t.contains("/fetchit"), "the command is named: {t}");
    assert!(t.contains("redirect"), "{t}");
    assert_eq!(a.seen(), vec!["GET /away HTTP/1.1"]);
    assert!(
        b.seen().is_empty(),
        "the hop was not fetched: {:?}",
        b.seen()
    );
}

/// A deny rule written for an address reaches the address however the URL spells it (an
/// IPv4-mapped IPv6 address, a plain number), and a deny written in one of those spellings
/// reaches the plain address.
#[tokio::test(flavor = "multi_thread")]
async fn deny_rules_on_an_address_reach_every_spelling_of_it() {
    let web = Web::start().await;
    let p = web.port;
    let urls = [
        format!("http://[::ffff:127.0.0.1]:{p}/page"),
        format!("http://[::ffff:7f00:1]:{p}/page"),
        format!("http://2130706433:{p}/page"),
        format!("http://0x7f.0.0.1:{p}/page"),
        format!("http://127.0.0.1.:{p}/page"),
    ];
    for (allow, deny) in [
        (
            "WebFetch(domain:[::ffff:127.0.0.1])",
            "WebFetch(domain:127.0.0.1)",
        ),
        (
            "WebFetch(domain:127.0.0.1)",
            "WebFetch(domain:::ffff:127.0.0.1)",
        ),
    ] {
        let h = Harness::new(Scenario::new(vec![
            Step::tool_use(urls.iter().map(|u| fetch_call(u)).collect()),
            Step::text("ok"),
        ]))
        .await;
        let run = h
            .run_stream(
                "fetch them",
                &["--allowedTools", allow, "--disallowedTools", deny],
                &[],
            )
            .await;
        run.assert_end("success", false, "completed", 0);
        let results = run.tool_results();
        assert_eq!(results.len(), urls.len());
        for (r, url) in results.iter().zip(&urls) {
            assert_eq!(r["is_error"], true, "{deny} {url}: {r}");
        }
        let denials = run.result()["permission_denials"].as_array().unwrap().len();
        assert_eq!(denials, urls.len(), "{deny}");
    }
    assert!(web.seen().is_empty(), "nothing fetched: {:?}", web.seen());
}

/// A rule for port 80 of a public host does not allow its http URL: keel fetches it over https
/// on 443, and that is what is judged (headless: denied, naming the rule that would allow it).
#[tokio::test(flavor = "multi_thread")]
async fn a_port_80_rule_does_not_open_the_https_upgrade() {
    let h = Harness::new(Scenario::new(vec![
        Step::tool_use(vec![fetch_call("http://docs.example.invalid/a")]),
        Step::text("ok"),
    ]))
    .await;
    let run = h
        .run_stream(
            "fetch",
            &["--allowedTools", "WebFetch(domain:docs.example.invalid:80)"],
            &[],
        )
        .await;
    run.assert_end("success", false, "completed", 0);
    let r = run.tool_results()[0];
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(
        run.result()["permission_denials"][0]["tool_name"],
        "WebFetch",
        "denied by the permission check, before any lookup: {r}"
    );
    assert!(
        text_of(r).contains("WebFetch(domain:docs.example.invalid)"),
        "{r}"
    );
}

/// A project's command or skill of the same name as the user's own wins (as in Claude Code),
/// but not silently: a `system/warning` names both files, and the capability account lists the
/// hidden one — and a command's `model:` override is shown there too.
#[tokio::test(flavor = "multi_thread")]
async fn a_project_file_hiding_the_users_is_named_and_a_commands_model_is_accounted() {
    let h = Harness::from_json(
        r#"{"on_exhausted":"repeat_last","steps":[{"kind":"text","text":"ok"}]}"#,
    )
    .await;
    let home = h.home.path();
    write(
        h.cwd(),
        ".claude/commands/deploy.md",
        "---\nmodel: claude-haiku-4-5\n---\nThe project's deploy.\n",
    );
    write(home, ".claude/commands/deploy.md", "The user's deploy.\n");
    write(
        h.cwd(),
        ".claude/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: project notes\n---\nProject.\n",
    );
    write(
        home,
        ".claude/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: my notes\n---\nMine.\n",
    );
    let run = h.run_stream("/deploy", &[], &[]).await;
    run.assert_end("success", false, "completed", 0);
    let warnings: Vec<String> = run
        .of("system")
        .into_iter()
        .filter(|f| f["subtype"] == "warning")
        .map(|f| f.to_string())
        .collect();
    for (kind, name) in [("command", "deploy"), ("skill", "notes")] {
        let w = warnings
            .iter()
            .find(|w| w.contains(&format!("{kind} \\\"{name}\\\"")))
            .unwrap_or_else(|| panic!("a warning names the {kind}: {warnings:?}"));
        let rel = match kind {
            "command" => ".claude/commands/deploy.md",
            _ => ".claude/skills/notes/SKILL.md",
        };
        assert!(w.contains(&h.cwd().join(rel).display().to_string()), "{w}");
        assert!(w.contains(&home.join(rel).display().to_string()), "{w}");
    }
    let init = run.of("system")[0];
    let account = &init["keel_capabilities"];
    let hidden = &account["commands"]["shadowed"][0];
    assert_eq!(hidden["name"], "deploy", "{account}");
    assert!(hidden["hidden"]
        .as_str()
        .unwrap()
        .starts_with(&*home.display().to_string()));
    assert_eq!(
        account["skills"]["shadowed"][0]["name"], "notes",
        "{account}"
    );
    let deploy = account["commands"]["loaded"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "deploy")
        .unwrap();
    assert_eq!(deploy["scope"], "project");
    assert_eq!(deploy["model"], "claude-haiku-4-5", "{deploy}");
    // The project's file is the one that ran, on its model.
    let req = &h.requests()[0].body;
    assert_eq!(req["model"], "claude-haiku-4-5");
    assert!(req["messages"]
        .to_string()
        .contains("The project's deploy."));
}
