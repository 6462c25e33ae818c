//! `keel mcp list | get | add | add-json | remove | login | logout`: the MCP servers of this
//! directory, kept in the files users already have — `.mcp.json` (project scope), and
//! `~/.claude.json` (user scope at its top level, local scope under the project's entry).
//! `list` and `get` check each server as a session would start it. `login` runs the OAuth
//! browser flow for a server at a URL (the only place keel ever opens a browser); `logout`
//! forgets its tokens.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use keel_core::builder::{SessionBuilder, SessionOptions};
use keel_core::mcp::McpHub;
use keel_tools::json_file::JsonFileError;
use serde_json::{json, Map, Value};

#[path = "mcp_cmd_error.rs"]
mod error;
use error::{FlagError, McpCmdError};

#[derive(Debug, Parser)]
#[command(
    name = "keel mcp",
    about = "Configure MCP servers and check that they start"
)]
struct McpCli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every server a session here would have, where it is configured, and whether it starts.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One server: its configuration and whether it starts.
    Get {
        /// The server.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add a server: `add NAME -- COMMAND [ARGS...]`, or `add --transport http NAME URL`.
    Add {
        /// Where to keep it: local (this project, only you), project (.mcp.json, shared
        /// with the repository), user (every project).
        #[arg(short, long, default_value = "local")]
        scope: String,
        /// stdio (a command keel starts), http or sse (a URL).
        #[arg(short, long, default_value = "stdio")]
        transport: String,
        /// An environment variable for a stdio server: KEY=VALUE (repeatable).
        #[arg(short, long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// A header for an http or sse server: "Name: value" (repeatable).
        #[arg(short = 'H', long = "header", value_name = "HEADER")]
        header: Vec<String>,
        /// The server's name.
        name: String,
        /// The command and its arguments (after `--`), or the URL.
        #[arg(required = true)]
        target: Vec<String>,
    },
    /// Add a server from its JSON configuration: `add-json NAME '{"command": ...}'`.
    AddJson {
        /// Where to keep it (local, project, user).
        #[arg(short, long, default_value = "local")]
        scope: String,
        /// The server's name.
        name: String,
        /// Its configuration, as in `mcpServers`.
        json: String,
    },
    /// Sign in to a server at a URL that needs OAuth: prints the URL to open (and opens a
    /// browser when run in a terminal with a display), waits for the redirect, keeps the tokens.
    Login {
        /// The server.
        name: String,
        /// A client id registered with the authorization server (default: the server's
        /// `oauth.clientId`, else keel registers itself when the server allows it).
        #[arg(long)]
        client_id: Option<String>,
        /// The loopback port of the redirect (default: the server's `oauth.callbackPort`,
        /// else any free port).
        #[arg(long)]
        callback_port: Option<u16>,
    },
    /// Forget the tokens kept for a server.
    Logout {
        /// The server.
        name: String,
    },
    /// Remove a server.
    Remove {
        /// The scope to remove it from (needed when it is in more than one).
        #[arg(short, long)]
        scope: Option<String>,
        /// The server's name.
        name: String,
    },
}

/// Run `keel mcp ARGS`; returns the exit code.
pub async fn run(args: &[String]) -> i32 {
    let argv = std::iter::once("keel mcp".to_owned()).chain(args.iter().cloned());
    let cli: McpCli = match crate::parse_args(argv) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let cwd = match crate::working_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    // The user's state file: `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
    let env = |k: &str| std::env::var(k).ok();
    let state_file = keel_core::builder::claude_json(&env, &cwd);
    let result = match cli.command {
        Command::List { json } => list(&cwd, None, json).await,
        Command::Get { name, json } => list(&cwd, Some(&name), json).await,
        Command::Add {
            scope,
            transport,
            env,
            header,
            name,
            target,
        } => entry_from_flags(&transport, &env, &header, &target)
            .and_then(|entry| add(&cwd, state_file.as_deref(), &scope, &name, entry)),
        Command::AddJson { scope, name, json } => serde_json::from_str::<Value>(&json)
            .map_err(|e| FlagError::NotJson(e).into())
            .and_then(|entry| add(&cwd, state_file.as_deref(), &scope, &name, entry)),
        Command::Remove { scope, name } => {
            remove(&cwd, state_file.as_deref(), scope.as_deref(), &name)
        }
        Command::Login {
            name,
            client_id,
            callback_port,
        } => login(&cwd, &name, client_id, callback_port).await,
        Command::Logout { name } => logout(&name),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("keel mcp: {e}");
            1
        }
    }
}

/// A server's `mcpServers` entry from `add`'s flags.
fn entry_from_flags(
    transport: &str,
    env: &[String],
    headers: &[String],
    target: &[String],
) -> Result<Value, McpCmdError> {
    match transport {
        "stdio" => {
            if !headers.is_empty() {
                return Err(FlagError::HeaderForStdio.into());
            }
            let (command, args) = target.split_first().ok_or(FlagError::NoCommand)?;
            let mut vars = Map::new();
            for e in env {
                let (k, v) = e
                    .split_once('=')
                    .filter(|(k, _)| valid_env_name(k))
                    .ok_or_else(|| FlagError::BadEnv(e.clone()))?;
                vars.insert(k.to_owned(), json!(v));
            }
            let mut entry = json!({ "command": command, "args": args });
            if !vars.is_empty() {
                entry["env"] = Value::Object(vars);
            }
            Ok(entry)
        }
        "http" | "sse" => {
            if !env.is_empty() {
                return Err(FlagError::EnvForUrl.into());
            }
            let [url] = target else {
                return Err(FlagError::OneUrl(transport.to_owned()).into());
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(FlagError::NotHttpUrl(url.clone()).into());
            }
            let mut hs = Map::new();
            for h in headers {
                let (k, v) = h
                    .split_once(':')
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .filter(|(k, _)| {
                        !k.is_empty()
                            && k.bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                    })
                    .ok_or_else(|| FlagError::BadHeader(h.clone()))?;
                hs.insert(k.to_owned(), json!(v));
            }
            let mut entry = json!({ "type": transport, "url": url });
            if !hs.is_empty() {
                entry["headers"] = Value::Object(hs);
            }
            Ok(entry)
        }
        other => Err(FlagError::BadTransport(other.to_owned()).into()),
    }
}

fn valid_env_name(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Where a scope's servers are kept: the file, and the path of keys to its `mcpServers`.
fn scope_place(
    cwd: &Path,
    state_file: Option<&Path>,
    scope: &str,
) -> Result<(PathBuf, Vec<String>), McpCmdError> {
    let state = || {
        state_file
            .map(Path::to_path_buf)
            .ok_or_else(|| McpCmdError::NoStateFile(scope.to_owned()))
    };
    match scope {
        "project" => Ok((cwd.join(".mcp.json"), vec!["mcpServers".into()])),
        "user" => Ok((state()?, vec!["mcpServers".into()])),
        "local" => Ok((
            state()?,
            vec![
                "projects".into(),
                cwd.display().to_string(),
                "mcpServers".into(),
            ],
        )),
        other => Err(McpCmdError::BadScope(other.to_owned())),
    }
}

/// A JSON file as an object; a missing file is an empty one. Anything else is an error: a
/// file keel cannot read is never overwritten.
fn read_object(path: &Path) -> Result<Map<String, Value>, McpCmdError> {
    Ok(keel_tools::json_file::read(path)?)
}

/// Change the JSON object in `path` through the shared settings writer: under its lock (other
/// sessions may update the same file), replaced atomically, unknown keys and mode kept.
fn update_object<T>(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> Result<T, McpCmdError>,
) -> Result<T, McpCmdError> {
    let mut refused = None;
    let out = keel_tools::json_file::update(path, |root| {
        change(root).map_err(|e| {
            let reason = e.to_string();
            refused = Some(e);
            JsonFileError::Refused {
                path: path.to_owned(),
                reason,
            }
        })
    });
    match (out, refused) {
        (Ok(v), _) => Ok(v),
        // The change's own error, as it was (it already names the file where it matters).
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(e.into()),
    }
}

/// The object at `keys` under `root`, made when missing; an error when something else is there.
fn object_at<'a>(
    root: &'a mut Map<String, Value>,
    keys: &[String],
    path: &Path,
) -> Result<&'a mut Map<String, Value>, McpCmdError> {
    let mut at = root;
    for k in keys {
        let next = at.entry(k.clone()).or_insert_with(|| json!({}));
        at = next
            .as_object_mut()
            .ok_or_else(|| McpCmdError::NotAnObject {
                path: path.to_owned(),
                key: k.clone(),
            })?;
    }
    Ok(at)
}

fn add(
    cwd: &Path,
    state_file: Option<&Path>,
    scope: &str,
    name: &str,
    entry: Value,
) -> Result<(), McpCmdError> {
    if !valid_name(name) {
        return Err(McpCmdError::BadName(name.to_owned()));
    }
    // The entry must be one keel can read; variables need not be set yet.
    let any = |_: &str| Some(String::new());
    let mut one = Map::new();
    one.insert(name.to_owned(), entry.clone());
    let checked = keel_mcp_check(&Value::Object(one), &any)?;
    let (path, keys) = scope_place(cwd, state_file, scope)?;
    update_object(&path, |root| {
        let servers = object_at(root, &keys, &path)?;
        if servers.contains_key(name) {
            return Err(McpCmdError::Exists {
                name: name.to_owned(),
                scope: scope.to_owned(),
                path: path.clone(),
            });
        }
        servers.insert(name.to_owned(), entry);
        Ok(())
    })?;
    println!(
        "Added {checked} MCP server {name} to the {scope} scope ({}).",
        path.display()
    );
    if scope == "project" {
        println!(
            "Project servers run only once you approve them: add {name:?} to enabledMcpjsonServers in ~/.claude/settings.json."
        );
    }
    Ok(())
}

/// Check one server entry as a session reads it; its kind ("stdio", "http", ...).
fn keel_mcp_check(
    servers: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<&'static str, McpCmdError> {
    let origin = keel_core::mcp::Origin::Flag {
        index: 1,
        file: None,
    };
    let entries = keel_core::mcp::parse_servers(servers, &origin, env).map_err(|mut e| {
        // Only the message: the whole configuration was the command line's.
        e.field = None;
        McpCmdError::BadEntry(Box::new(e))
    })?;
    match entries.into_iter().next().map(|e| e.spec) {
        Some(Ok(spec)) => Ok(spec.kind()),
        Some(Err(e)) => Err(McpCmdError::BadEntry(Box::new(e))),
        None => Err(McpCmdError::NoServer),
    }
}

fn remove(
    cwd: &Path,
    state_file: Option<&Path>,
    scope: Option<&str>,
    name: &str,
) -> Result<(), McpCmdError> {
    let scopes: Vec<&str> = match scope {
        Some(s) => vec![s],
        None => vec!["local", "project", "user"],
    };
    let mut found = Vec::new();
    for s in scopes {
        let (path, keys) = scope_place(cwd, state_file, s)?;
        let root = Value::Object(read_object(&path)?);
        let mut at = Some(&root);
        for k in &keys {
            at = at.and_then(|v| v.get(k));
        }
        if at.and_then(|v| v.get(name)).is_some() {
            found.push((s, path, keys));
        }
    }
    match found.len() {
        0 => Err(McpCmdError::Missing {
            name: name.to_owned(),
            scope: scope.map(str::to_owned),
        }),
        1 => {
            let (s, path, keys) = found.remove(0);
            update_object(&path, |root| {
                object_at(root, &keys, &path)?.remove(name);
                Ok(())
            })?;
            println!(
                "Removed MCP server {name} from the {s} scope ({}).",
                path.display()
            );
            Ok(())
        }
        _ => Err(McpCmdError::Ambiguous {
            name: name.to_owned(),
            scopes: found.iter().map(|f| f.0.to_owned()).collect(),
        }),
    }
}

/// `list` (all servers) or `get` (one): the configuration, then a check of each server
/// that a session would start, side by side, each within MCP_TIMEOUT.
async fn list(cwd: &Path, only: Option<&str>, as_json: bool) -> Result<(), McpCmdError> {
    let builder = SessionBuilder::new(cwd).options(SessionOptions::default());
    let (mut set, bounds) = builder.mcp_servers()?;
    if let Some(name) = only {
        set.entries.retain(|e| e.name == name);
        if set.entries.is_empty() {
            return Err(McpCmdError::Missing {
                name: name.to_owned(),
                scope: None,
            });
        }
    }
    if set.entries.is_empty() {
        if as_json {
            println!("[]");
        } else {
            println!("No MCP servers are configured here. Add one with: keel mcp add NAME -- COMMAND [ARGS...]");
        }
        return Ok(());
    }
    let hub = McpHub::start(&set, cwd, bounds).await;
    let statuses = hub.statuses();
    hub.shutdown().await;
    let mut out = Vec::new();
    for (e, st) in set.entries.iter().zip(&statuses) {
        let mut v = json!({
            "name": e.name,
            "scope": e.origin.scope(),
            "source": e.origin.to_string(),
            "status": st.status,
        });
        if let Ok(spec) = &e.spec {
            v["config"] = spec.describe();
        }
        if st.status == "pending" {
            v["status"] = json!("failed");
            v["error"] =
                json!("it is run by an SDK host; it can be checked only in a session that has one");
        }
        if let Some(err) = &st.error {
            v["error"] = json!(err);
        }
        if st.status == "connected" {
            v["tools"] = json!(st.tools);
        }
        out.push(v);
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(());
    }
    for v in &out {
        let what = match &v["config"] {
            c if c["type"] == "stdio" => {
                let mut s = c["command"].as_str().unwrap_or("").to_owned();
                for a in c["args"].as_array().into_iter().flatten() {
                    s.push(' ');
                    s.push_str(a.as_str().unwrap_or(""));
                }
                s
            }
            c if c["url"].is_string() => format!(
                "{} ({})",
                c["url"].as_str().unwrap_or(""),
                c["type"].as_str().unwrap_or("")
            ),
            c => c["type"].as_str().unwrap_or("").to_owned(),
        };
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(" {what}")
        };
        let state = match v["status"].as_str() {
            Some("connected") => format!(
                "connected, {} tool(s)",
                v["tools"].as_array().map_or(0, Vec::len)
            ),
            Some("needs-auth") => format!("needs-auth: {}", v["error"].as_str().unwrap_or("")),
            _ => format!("failed: {}", v["error"].as_str().unwrap_or("")),
        };
        println!(
            "{}:{what} [{}] - {state}",
            v["name"].as_str().unwrap_or(""),
            v["scope"].as_str().unwrap_or("")
        );
        if only.is_some() {
            println!("  configured in {}", v["source"].as_str().unwrap_or(""));
            for t in v["tools"].as_array().into_iter().flatten() {
                println!("  tool {}", t.as_str().unwrap_or(""));
            }
        }
    }
    Ok(())
}

/// How long the user has to finish signing in, in the browser.
const LOGIN_BROWSER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

/// The token file, under keel's home.
fn token_store() -> Result<keel_core::mcp::oauth::TokenStore, McpCmdError> {
    let home = keel_core::mcp::oauth::keel_home_from_env().ok_or(McpCmdError::NoKeelHome)?;
    Ok(keel_core::mcp::oauth::TokenStore::new(
        keel_core::mcp::oauth::store_path(&home),
    ))
}

/// `login NAME`: the OAuth flow for server NAME, its tokens kept for the sessions after.
async fn login(
    cwd: &Path,
    name: &str,
    client_id: Option<String>,
    callback_port: Option<u16>,
) -> Result<(), McpCmdError> {
    let builder = SessionBuilder::new(cwd).options(SessionOptions::default());
    let (set, _) = builder.mcp_servers()?;
    let entry = set
        .entries
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| McpCmdError::Missing {
            name: name.to_owned(),
            scope: None,
        })?;
    let spec = match entry.spec {
        Ok(keel_core::mcp::ServerSpec::Http(u)) => u,
        Ok(other) => {
            return Err(McpCmdError::NotHttp {
                name: name.to_owned(),
                kind: other.kind(),
            })
        }
        Err(error) => {
            return Err(McpCmdError::Misconfigured {
                name: name.to_owned(),
                error: Box::new(error),
            })
        }
    };
    let url = spec.url.clone();
    let client_id = client_id.or(spec.oauth.client_id);
    let callback_port = callback_port.or(spec.oauth.callback_port).unwrap_or(0);
    if let Some(id) = &client_id {
        if id.is_empty() || id.len() > 1024 || id.bytes().any(|b| !(0x21..0x7f).contains(&b)) {
            return Err(FlagError::BadClientId.into());
        }
    }
    let env = |k: &str| std::env::var(k).ok();
    let request_deadline =
        keel_core::mcp::timeout_from_env(&env, "MCP_TIMEOUT", std::time::Duration::from_secs(30))
            .map_err(McpCmdError::Env)?;
    let store = token_store()?;
    let path = store.path().to_owned();
    let opts = keel_core::mcp::oauth::LoginOptions {
        request_deadline,
        browser_deadline: LOGIN_BROWSER_DEADLINE,
        callback_port,
        client_id,
    };
    let started = keel_core::mcp::oauth::login(name, &url, store, opts).await?;
    let Some(flow) = started else {
        println!("MCP server {name} at {url} answered without asking for authorization; there is nothing to sign in to.");
        return Ok(());
    };
    println!(
        "To sign in to MCP server {name}, open this URL in a browser:\n\n  {}\n",
        flow.url
    );
    println!(
        "Waiting for the browser to come back to keel (at most {} minutes)...",
        LOGIN_BROWSER_DEADLINE.as_secs() / 60
    );
    open_browser(&flow.url);
    flow.finish().await?;
    println!(
        "Signed in to MCP server {name}; its tokens are kept in {}.",
        path.display()
    );
    Ok(())
}

/// Open `url` in a browser, only when a person is at a terminal with a display: `$BROWSER`,
/// else the desktop's opener. Never waited for; a failure leaves the printed URL to use.
fn open_browser(url: &str) {
    use std::io::IsTerminal;
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let display = cfg!(target_os = "macos")
        || ["DISPLAY", "WAYLAND_DISPLAY"]
            .iter()
            .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
    if !interactive || !display {
        return;
    }
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".into()
            } else {
                "xdg-open".into()
            }
        });
    let spawned = tokio::process::Command::new(&opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
        }
        Err(e) => eprintln!("keel mcp: the browser ({opener}) could not be started: {e}; open the URL above yourself"),
    }
}

/// `logout NAME`: forget the tokens kept for server NAME.
fn logout(name: &str) -> Result<(), McpCmdError> {
    let store = token_store()?;
    if store.remove(name)? {
        println!(
            "Signed out of MCP server {name}: its tokens were removed from {}.",
            store.path().display()
        );
    } else {
        println!("No tokens were kept for MCP server {name}.");
    }
    Ok(())
}
