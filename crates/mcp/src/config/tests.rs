use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".into()),
        "EMPTY" => Some(String::new()),
        "HOME" => Some("/home/u".into()),
        _ => None,
    }
}

fn file(p: &str) -> Origin {
    Origin::File(PathBuf::from(p))
}

fn spec(entries: &[Entry], name: &str) -> Result<ServerSpec, ConfigError> {
    entries
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
        .spec
        .clone()
}

#[test]
fn expansion_follows_the_shell_forms_and_refuses_holes() {
    assert_eq!(expand("a ${TOKEN} b", &env).unwrap(), "a s3cret b");
    assert_eq!(expand("${NOPE:-dflt}", &env).unwrap(), "dflt");
    assert_eq!(expand("${EMPTY:-dflt}", &env).unwrap(), "dflt");
    assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
    assert_eq!(
        expand("$HOME and $ alone", &env).unwrap(),
        "$HOME and $ alone"
    );
    assert_eq!(
        expand("${HOME}/x:${TOKEN}", &env).unwrap(),
        "/home/u/x:s3cret"
    );
    let e = expand("--key=${NOPE}", &env).unwrap_err();
    assert_eq!(
        e,
        ExpandError::Unset {
            name: "NOPE".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "${NOPE} is not set, and has no default (write ${NOPE:-value} for one)"
    );
    let e = expand("${TOKEN", &env).unwrap_err();
    assert_eq!(
        e.to_string(),
        "\"${\" without a closing \"}\" in \"${TOKEN\""
    );
    let e = expand("${1X}", &env).unwrap_err();
    assert_eq!(e, ExpandError::BadName { inner: "1X".into() });
    assert!(e.to_string().contains("does not name a variable"), "{e}");
}

#[test]
fn the_forms_users_keep_are_read() {
    let doc = json!({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files", "${HOME}/src"],
                  "env": {"API_KEY": "${TOKEN}"}, "cwd": "/tmp"},
        "plain": {"type": "stdio", "command": "srv"},
        "remote": {"type": "http", "url": "https://mcp.example.test/${TOKEN}",
                   "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        "calc": {"type": "sdk", "name": "calculator"},
        "bare-sdk": {"type": "sdk"},
        "future": {"command": "x", "timeout": 5000, "somethingNew": true}
    }});
    let entries = parse_document(&doc.to_string(), &file(".mcp.json"), &env).unwrap();
    assert_eq!(entries.len(), 7);
    assert_eq!(
        spec(&entries, "files").unwrap(),
        ServerSpec::Stdio(StdioSpec {
            command: "npx".into(),
            args: vec!["-y".into(), "server-files".into(), "/home/u/src".into()],
            env: vec![("API_KEY".into(), "s3cret".into())],
            cwd: Some("/tmp".into()),
        })
    );
    assert!(matches!(spec(&entries, "plain").unwrap(), ServerSpec::Stdio(s) if s.args.is_empty()));
    assert_eq!(
        spec(&entries, "remote").unwrap(),
        ServerSpec::Http(UrlSpec {
            url: "https://mcp.example.test/s3cret".into(),
            headers: vec![("Authorization".into(), "Bearer s3cret".into())],
            oauth: Default::default(),
        })
    );
    assert!(matches!(
        spec(&entries, "legacy").unwrap(),
        ServerSpec::Sse(_)
    ));
    assert_eq!(
        spec(&entries, "calc").unwrap(),
        ServerSpec::Sdk {
            name: "calculator".into()
        }
    );
    assert_eq!(
        spec(&entries, "bare-sdk").unwrap(),
        ServerSpec::Sdk {
            name: "bare-sdk".into()
        }
    );
    assert!(
        spec(&entries, "future").is_ok(),
        "unknown fields are ignored"
    );
}

#[test]
fn a_bad_server_fails_alone_and_says_where() {
    let doc = json!({"mcpServers": {
        "ok": {"command": "srv"},
        "args-type": {"command": "srv", "args": "--flag"},
        "arg-item": {"command": "srv", "args": ["a", 3]},
        "no-var": {"command": "srv", "env": {"KEY": "${MISSING}"}},
        "url-no-type": {"url": "https://x.test"},
        "bad-type": {"type": "websocket", "url": "wss://x"},
        "bad-url": {"type": "http", "url": "file:///etc/passwd"},
        "header-inject": {"type": "http", "url": "https://x.test",
                          "headers": {"X-A": "a\r\nX-Injected: 1"}},
        "empty-cmd": {"command": " "},
        "not-object": 5
    }});
    let origin = file("/p/.mcp.json");
    let entries = parse_document(&doc.to_string(), &origin, &env).unwrap();
    assert!(spec(&entries, "ok").is_ok());
    let field_of = |name: &str| {
        let e = spec(&entries, name).unwrap_err();
        assert_eq!(e.origin, origin);
        assert_eq!(e.server.as_deref(), Some(name));
        (e.field.clone(), e.to_string())
    };
    let (f, msg) = field_of("args-type");
    assert_eq!(f.as_deref(), Some("args"));
    assert_eq!(
        msg,
        "MCP configuration in /p/.mcp.json, server \"args-type\", field \"args\": must be an array of strings, not a string"
    );
    assert_eq!(field_of("arg-item").0.as_deref(), Some("args[1]"));
    let (f, msg) = field_of("no-var");
    assert_eq!(f.as_deref(), Some("env.KEY"));
    assert!(msg.contains("${MISSING} is not set"), "{msg}");
    assert_eq!(field_of("url-no-type").0.as_deref(), Some("type"));
    assert!(field_of("bad-type")
        .1
        .contains("\"websocket\" is not a transport"));
    assert_eq!(field_of("bad-url").0.as_deref(), Some("url"));
    assert_eq!(field_of("header-inject").0.as_deref(), Some("headers.X-A"));
    assert_eq!(field_of("empty-cmd").0.as_deref(), Some("command"));
    assert!(field_of("not-object")
        .1
        .contains("must be an object, not a number"));
}

#[test]
fn a_broken_document_is_an_error_that_names_it() {
    let origin = Origin::Flag {
        index: 2,
        file: None,
    };
    let e = parse_document("{\"mcpServers\": {", &origin, &env).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("MCP configuration in --mcp-config value 2 (inline JSON): is not JSON"),
        "{e}"
    );
    let e = parse_document("[]", &origin, &env).unwrap_err();
    assert!(e.message.contains("not an array"), "{e}");
    let e = parse_document("{\"servers\": {}}", &origin, &env).unwrap_err();
    assert!(e.message.contains("has no \"mcpServers\""), "{e}");
    let e = parse_document("{\"mcpServers\": []}", &origin, &env).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("mcpServers"));
}

#[test]
fn sources_merge_by_precedence_and_strict_keeps_only_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join(".mcp.json");
    std::fs::write(
        &project,
        json!({"mcpServers": {"shared": {"command": "from-project"},
                              "proj": {"command": "p"}}})
        .to_string(),
    )
    .unwrap();
    let flag_file = dir.path().join("extra.json");
    std::fs::write(
        &flag_file,
        json!({"mcpServers": {"shared": {"command": "from-flag-file"}}}).to_string(),
    )
    .unwrap();
    let sources = Sources {
        user_state: None,
        settings: vec![
            (
                PathBuf::from("/home/u/.claude/settings.json"),
                json!({"shared": {"command": "from-user"}, "user": {"command": "u"}}),
            ),
            (
                PathBuf::from("/p/.claude/settings.local.json"),
                json!({"shared": {"command": "from-local"}}),
            ),
        ],
        project_file: Some(project),
        flags: vec![
            "extra.json".into(),
            json!({"mcpServers": {"inline": {"type": "sdk"}}}).to_string(),
        ],
        strict: false,
    };
    let set = load(&sources, dir.path(), &env).unwrap();
    let names: Vec<&str> = set.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec!["inline", "proj", "shared", "user"]);
    let shared = set.get("shared").unwrap();
    assert!(matches!(&shared.spec, Ok(ServerSpec::Stdio(s)) if s.command == "from-flag-file"));
    assert_eq!(
        shared.origin,
        Origin::Flag {
            index: 1,
            file: Some(flag_file)
        }
    );
    // Without the flags, the project file outranks the settings files.
    let no_flags = Sources {
        flags: vec![],
        ..sources.clone()
    };
    let set = load(&no_flags, dir.path(), &env).unwrap();
    assert!(matches!(&set.get("shared").unwrap().spec,
        Ok(ServerSpec::Stdio(s)) if s.command == "from-project"));
    // The user's state file: its user scope is below everything, its local scope (this
    // project's entry) above .mcp.json.
    let state = dir.path().join(".claude.json");
    std::fs::write(
        &state,
        json!({"mcpServers": {"shared": {"command": "from-state-user"}, "su": {"command": "s"}},
               "projects": {
                   dir.path().display().to_string(): {"mcpServers": {"proj": {"command": "from-state-local"}}},
                   "/elsewhere": {"mcpServers": {"other": {"command": "o"}}}}})
        .to_string(),
    )
    .unwrap();
    let with_state = Sources {
        user_state: UserState::read(&state, dir.path()).unwrap(),
        flags: vec![],
        ..sources.clone()
    };
    let set = load(&with_state, dir.path(), &env).unwrap();
    let names: Vec<&str> = set.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec!["proj", "shared", "su", "user"]);
    assert!(matches!(&set.get("shared").unwrap().spec,
        Ok(ServerSpec::Stdio(s)) if s.command == "from-project"));
    let proj = set.get("proj").unwrap();
    assert!(matches!(&proj.spec, Ok(ServerSpec::Stdio(s)) if s.command == "from-state-local"));
    assert_eq!(proj.origin.scope(), "local");
    assert_eq!(set.get("su").unwrap().origin.scope(), "user");
    assert!(UserState::read(&dir.path().join("none.json"), dir.path())
        .unwrap()
        .is_none());
    // Through the cache: the same answer, and a changed file is read again.
    let cache = dir.path().join("cache/state.json");
    for _ in 0..2 {
        let s = UserState::read_cached(&state, dir.path(), Some(&cache))
            .unwrap()
            .unwrap();
        assert_eq!(s.user.unwrap()["su"]["command"], "s");
        assert_eq!(s.local.unwrap().1["proj"]["command"], "from-state-local");
        assert!(cache.is_file());
    }
    std::fs::write(
        &state,
        json!({"mcpServers": {"changed": {"command": "c"}}}).to_string(),
    )
    .unwrap();
    let s = UserState::read_cached(&state, dir.path(), Some(&cache))
        .unwrap()
        .unwrap();
    assert!(s.user.unwrap().get("changed").is_some());
    assert!(s.local.is_none());
    std::fs::write(&state, "{broken").unwrap();
    let err = UserState::read(&state, dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(".claude.json") && err.contains("is not JSON"),
        "{err}"
    );
    // Strict: only the flags' servers.
    let strict = Sources {
        strict: true,
        ..sources
    };
    let set = load(&strict, dir.path(), &env).unwrap();
    let names: Vec<&str> = set.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec!["inline", "shared"]);
    // A flag naming a file that is not there says which value and which path.
    let missing = Sources {
        flags: vec!["nope.json".into()],
        ..Sources::default()
    };
    let e = load(&missing, Path::new("/nowhere"), &env).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("MCP configuration in --mcp-config value 1 (/nowhere/nope.json): is neither JSON nor a file"),
        "{e}"
    );
}
