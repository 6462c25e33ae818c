//! The MCP servers users configure, read as they already keep them:
//!
//! - `.mcp.json` in the project: `{"mcpServers": {"<name>": {...}}}`;
//! - `mcpServers` in the settings files keel reads (user, project, local);
//! - `--mcp-config <file or JSON>`, repeatable; with `--strict-mcp-config`, only those.
//!
//! A server is `{"command", "args"?, "env"?, "cwd"?}` (stdio, the default), `{"type": "http" |
//! "sse", "url", "headers"?}`, or `{"type": "sdk", "name"?}` (a server the SDK host runs
//! in-process and reaches over the control protocol). `${VAR}` and `${VAR:-default}` are
//! expanded in the command, arguments, environment values, URL and header values.
//!
//! A file that is not JSON, or not shaped as a list of servers, is an error for the whole run: it
//! names the file (or which `--mcp-config` value) and what is wrong. A problem inside one
//! server's entry (a field of the wrong type, a variable that is not set) fails that server
//! only: it is kept as an [`Entry`] whose spec is the error, so the session can report it and go
//! on without it. Unknown fields are ignored (newer keys of the same files).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use keel_protocol::json::type_name as kind;
use serde_json::{json, Map, Value};

/// Where a server's configuration was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The `index`-th `--mcp-config` value (1-based): a file, or JSON given inline.
    Flag {
        /// Which value.
        index: usize,
        /// The file it named, if it named one.
        file: Option<PathBuf>,
    },
    /// A file: the project's `.mcp.json`, or a settings file's `mcpServers`.
    File(PathBuf),
    /// The user's own state file (`~/.claude.json`, where `mcp add` writes): its top-level
    /// `mcpServers` (user scope), or those of one project (local scope).
    UserState {
        /// The file.
        file: PathBuf,
        /// The project directory, for the local scope.
        project: Option<String>,
    },
}

impl Origin {
    /// The scope a server of this origin is configured in, as `mcp list` names it.
    pub fn scope(&self) -> &'static str {
        match self {
            Origin::Flag { .. } => "flag",
            Origin::UserState { project: None, .. } => "user",
            Origin::UserState {
                project: Some(_), ..
            } => "local",
            Origin::File(p) if p.file_name().is_some_and(|n| n == ".mcp.json") => "project",
            Origin::File(p) if p.ends_with(".claude/settings.local.json") => "local settings",
            Origin::File(_) => "settings",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag {
                index,
                file: Some(p),
            } => write!(f, "--mcp-config value {index} ({})", p.display()),
            Origin::Flag { index, file: None } => {
                write!(f, "--mcp-config value {index} (inline JSON)")
            }
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::UserState {
                file,
                project: None,
            } => write!(f, "{}", file.display()),
            Origin::UserState {
                file,
                project: Some(dir),
            } => write!(f, "{} (project {dir})", file.display()),
        }
    }
}

/// A configuration problem: where, which server, which field, and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file or flag.
    pub origin: Origin,
    /// The server, when the problem is inside one.
    pub server: Option<String>,
    /// The field (`args[2]`, `env.TOKEN`, ...), when there is one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MCP configuration in {}", self.origin)?;
        if let Some(s) = &self.server {
            write!(f, ", server {s:?}")?;
        }
        if let Some(fl) = &self.field {
            write!(f, ", field {fl:?}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A server started as a child process, speaking MCP on its stdin and stdout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StdioSpec {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment added to keel's (in the order written).
    pub env: Vec<(String, String)>,
    /// Its working directory (default: the session's).
    pub cwd: Option<String>,
}

/// A server reached at a URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlSpec {
    /// `http://` or `https://`.
    pub url: String,
    /// Headers sent with every request (in the order written).
    pub headers: Vec<(String, String)>,
    /// `oauth`: how `keel mcp login` signs in to it.
    pub oauth: OAuthSpec,
}

/// A server's `oauth` settings (`{"clientId": ..., "callbackPort": ...}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OAuthSpec {
    /// A client id registered with its authorization server (none: keel registers itself).
    pub client_id: Option<String>,
    /// The loopback port of the redirect that registration names (none: any free port).
    pub callback_port: Option<u16>,
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerSpec {
    /// A child process on stdio.
    Stdio(StdioSpec),
    /// Streamable HTTP.
    Http(UrlSpec),
    /// The legacy HTTP + server-sent events transport.
    Sse(UrlSpec),
    /// Run by the SDK host, reached with `mcp_message` control requests.
    Sdk {
        /// The name the host knows it by.
        name: String,
    },
}

impl ServerSpec {
    /// `stdio`, `http`, `sse` or `sdk`.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerSpec::Stdio(_) => "stdio",
            ServerSpec::Http(_) => "http",
            ServerSpec::Sse(_) => "sse",
            ServerSpec::Sdk { .. } => "sdk",
        }
    }

    /// The configuration as `mcp list` and `mcp get` show it: the values of environment
    /// variables and headers (often secrets) are left out, their names kept.
    pub fn describe(&self) -> Value {
        let names = |pairs: &[(String, String)]| -> Vec<Value> {
            pairs
                .iter()
                .map(|(k, _)| Value::String(k.clone()))
                .collect()
        };
        match self {
            ServerSpec::Stdio(s) => serde_json::json!({
                "type": "stdio", "command": s.command, "args": s.args,
                "env": names(&s.env), "cwd": s.cwd,
            }),
            ServerSpec::Http(u) | ServerSpec::Sse(u) => serde_json::json!({
                "type": self.kind(), "url": u.url, "headers": names(&u.headers),
            }),
            ServerSpec::Sdk { name } => serde_json::json!({ "type": "sdk", "name": name }),
        }
    }
}

/// One configured server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name (the `mcpServers` key).
    pub name: String,
    /// Where it was configured.
    pub origin: Origin,
    /// How to reach it, or why it cannot be used.
    pub spec: Result<ServerSpec, ConfigError>,
}

/// The servers of a session, one per name, in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerSet {
    /// The servers.
    pub entries: Vec<Entry>,
}

impl ServerSet {
    /// The server named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// Where a session's MCP configuration comes from, lowest precedence first within each kind.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// The user's state file: its user-scope servers (below everything else) and this
    /// project's local-scope ones (above `.mcp.json`).
    pub user_state: Option<UserState>,
    /// `mcpServers` of each settings file that has one (user, project, local: later wins).
    pub settings: Vec<(PathBuf, Value)>,
    /// The project's `.mcp.json`, if there is one.
    pub project_file: Option<PathBuf>,
    /// The `--mcp-config` values, in order (later wins).
    pub flags: Vec<String>,
    /// `--strict-mcp-config`: only the `--mcp-config` servers.
    pub strict: bool,
}

/// The servers of the user's state file (`~/.claude.json`) that apply to one project.
#[derive(Clone, Debug, Default)]
pub struct UserState {
    /// The file.
    pub file: PathBuf,
    /// Its top-level `mcpServers` (user scope).
    pub user: Option<Value>,
    /// The project's directory and its `mcpServers` there (local scope).
    pub local: Option<(String, Value)>,
}

impl UserState {
    /// Read `file` for the project in `cwd`; `None` when there is no such file.
    pub fn read(file: &Path, cwd: &Path) -> Result<Option<UserState>, ConfigError> {
        Self::read_cached(file, cwd, None)
    }

    /// [`UserState::read`], through a cache at `cache`: the file can be megabytes of other
    /// tools' state, and only its servers matter, so they are kept apart, keyed by the file's
    /// size, modification time and inode, and the file is parsed again only when it changed.
    /// A cache that cannot be read or written is only slower.
    pub fn read_cached(
        file: &Path,
        cwd: &Path,
        cache: Option<&Path>,
    ) -> Result<Option<UserState>, ConfigError> {
        use std::os::unix::fs::MetadataExt;
        let meta = match std::fs::metadata(file) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(_) => return Self::parse(file, cwd).map(|(s, _)| s),
        };
        let key = json!({
            "file": file.display().to_string(),
            "size": meta.size(),
            "mtime_ns": meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            "ino": meta.ino(),
        });
        let dir = cwd.display().to_string();
        if let Some(c) = cache {
            let cached = std::fs::read(c)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .filter(|v| v.get("key") == Some(&key));
            if let Some(v) = cached {
                return Ok(Some(UserState {
                    file: file.to_owned(),
                    user: v.get("user").filter(|u| !u.is_null()).cloned(),
                    local: v
                        .get("projects")
                        .and_then(|p| p.get(&dir))
                        .map(|s| (dir.clone(), s.clone())),
                }));
            }
        }
        let (state, projects) = Self::parse(file, cwd)?;
        if let (Some(c), Some(state)) = (cache, &state) {
            let doc = json!({ "key": key, "user": state.user, "projects": projects });
            if let Some(parent) = c.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let tmp = c.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, doc.to_string()).is_ok() && std::fs::rename(&tmp, c).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Ok(state)
    }

    /// Parse the whole file: the state for `cwd`, and every project's servers (for the cache).
    fn parse(file: &Path, cwd: &Path) -> Result<(Option<UserState>, Value), ConfigError> {
        let origin = Origin::UserState {
            file: file.to_owned(),
            project: None,
        };
        let err = |message: String| ConfigError {
            origin: origin.clone(),
            server: None,
            field: None,
            message,
        };
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Value::Null)),
            Err(e) => return Err(err(format!("could not be read: {e}"))),
        };
        let dir = cwd.display().to_string();
        // The file holds much else (it can be megabytes): only the two fields are kept, the
        // rest is skipped over without being built.
        #[derive(serde::Deserialize)]
        struct Project {
            #[serde(rename = "mcpServers")]
            mcp_servers: Option<Value>,
        }
        #[derive(serde::Deserialize)]
        struct State {
            #[serde(rename = "mcpServers")]
            mcp_servers: Option<Value>,
            projects: Option<std::collections::HashMap<String, Project>>,
        }
        let (user, projects) = match serde_json::from_str::<State>(&text) {
            Ok(st) => {
                let projects: Map<String, Value> = st
                    .projects
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(d, p)| Some((d, p.mcp_servers?)))
                    .collect();
                (st.mcp_servers, projects)
            }
            // Shaped otherwise than expected somewhere: read it whole, take what is there.
            Err(_) => {
                let root: Value =
                    serde_json::from_str(&text).map_err(|e| err(format!("is not JSON: {e}")))?;
                let projects = root
                    .get("projects")
                    .and_then(Value::as_object)
                    .map(|p| {
                        p.iter()
                            .filter_map(|(d, v)| Some((d.clone(), v.get("mcpServers")?.clone())))
                            .collect()
                    })
                    .unwrap_or_default();
                (root.get("mcpServers").cloned(), projects)
            }
        };
        let local = projects.get(&dir).cloned();
        Ok((
            Some(UserState {
                file: file.to_owned(),
                user,
                local: local.map(|s| (dir, s)),
            }),
            Value::Object(projects),
        ))
    }
}

/// Read every source; a server configured in several places is taken from the one with the
/// highest precedence: `--mcp-config` (the last value that names it), then the local scope of
/// the user's state file, then `.mcp.json`, then the settings files (local, project, user),
/// then the user scope of the state file. `cwd` resolves relative `--mcp-config` paths; `env`
/// gives the variables `${VAR}` expands to.
pub fn load(
    sources: &Sources,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerSet, ConfigError> {
    let mut by_name: BTreeMap<String, Entry> = BTreeMap::new();
    let mut add = |entries: Vec<Entry>| {
        for e in entries {
            by_name.insert(e.name.clone(), e);
        }
    };
    if !sources.strict {
        let state = sources.user_state.as_ref();
        if let Some(servers) = state.and_then(|s| s.user.as_ref()) {
            let origin = Origin::UserState {
                file: state.map(|s| s.file.clone()).unwrap_or_default(),
                project: None,
            };
            add(parse_servers(servers, &origin, env)?);
        }
        for (path, servers) in &sources.settings {
            add(parse_servers(servers, &Origin::File(path.clone()), env)?);
        }
        if let Some(path) = &sources.project_file {
            let origin = Origin::File(path.clone());
            // A repository's file: a regular file of bounded size, never a FIFO or a device.
            let how =
                keel_tools::repofile::RepoRead::bounded(keel_tools::repofile::REPO_FILE_LIMIT);
            let text = keel_tools::repofile::read_repo_file(path, &how)
                .map_err(|e| ConfigError {
                    origin: origin.clone(),
                    server: None,
                    field: None,
                    message: format!("could not be used: {e}"),
                })?
                .text;
            add(parse_document(&text, &origin, env)?);
        }
        if let Some((dir, servers)) = state.and_then(|s| s.local.as_ref()) {
            let origin = Origin::UserState {
                file: state.map(|s| s.file.clone()).unwrap_or_default(),
                project: Some(dir.clone()),
            };
            add(parse_servers(servers, &origin, env)?);
        }
    }
    for (i, value) in sources.flags.iter().enumerate() {
        add(parse_flag(value, i + 1, cwd, env)?);
    }
    Ok(ServerSet {
        entries: by_name.into_values().collect(),
    })
}

/// One `--mcp-config` value: JSON when it starts with `{`, else the path of a file.
pub fn parse_flag(
    value: &str,
    index: usize,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Entry>, ConfigError> {
    if value.trim_start().starts_with('{') {
        return parse_document(value, &Origin::Flag { index, file: None }, env);
    }
    let path = cwd.join(value);
    let origin = Origin::Flag {
        index,
        file: Some(path.clone()),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
        origin: origin.clone(),
        server: None,
        field: None,
        message: format!("is neither JSON nor a file that can be read ({e})"),
    })?;
    parse_document(&text, &origin, env)
}

/// A whole document: `{"mcpServers": {...}}`.
pub fn parse_document(
    text: &str,
    origin: &Origin,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Entry>, ConfigError> {
    let err = |message: String| ConfigError {
        origin: origin.clone(),
        server: None,
        field: None,
        message,
    };
    let root: Value = serde_json::from_str(text).map_err(|e| err(format!("is not JSON: {e}")))?;
    let Value::Object(root) = root else {
        return Err(err(format!(
            "must be a JSON object with \"mcpServers\", not {}",
            kind(&root)
        )));
    };
    let Some(servers) = root.get("mcpServers") else {
        return Err(err(
            "has no \"mcpServers\" (expected {\"mcpServers\": {\"<name>\": {...}}})".into(),
        ));
    };
    parse_servers(servers, origin, env)
}

/// The value of `mcpServers`: an object of servers by name.
pub fn parse_servers(
    servers: &Value,
    origin: &Origin,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Entry>, ConfigError> {
    let Value::Object(servers) = servers else {
        return Err(ConfigError {
            origin: origin.clone(),
            server: None,
            field: Some("mcpServers".into()),
            message: format!(
                "must be an object of servers by name, not {}",
                kind(servers)
            ),
        });
    };
    let mut out = Vec::with_capacity(servers.len());
    for (name, v) in servers {
        if name.trim().is_empty() {
            return Err(ConfigError {
                origin: origin.clone(),
                server: Some(name.clone()),
                field: None,
                message: "a server needs a name that is not empty".into(),
            });
        }
        let at = Field {
            origin,
            server: name,
            env,
        };
        out.push(Entry {
            name: name.clone(),
            origin: origin.clone(),
            spec: at.server(v),
        });
    }
    Ok(out)
}

/// Reading the fields of one server, with errors that say where.
struct Field<'a> {
    origin: &'a Origin,
    server: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Field<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            origin: self.origin.clone(),
            server: Some(self.server.to_owned()),
            field: (!field.is_empty()).then(|| field.to_owned()),
            message: message.into(),
        }
    }

    fn server(&self, v: &Value) -> Result<ServerSpec, ConfigError> {
        let Value::Object(o) = v else {
            return Err(self.err("", format!("must be an object, not {}", kind(v))));
        };
        let kind_of = match o.get("type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(other) => {
                return Err(self.err("type", format!("must be a string, not {}", kind(other))))
            }
        };
        match kind_of {
            Some("stdio") => self.stdio(o),
            None if o.contains_key("command") => self.stdio(o),
            None if o.contains_key("url") => Err(self.err(
                "type",
                "a server with a \"url\" needs \"type\": \"http\" or \"sse\"",
            )),
            None => Err(self.err(
                "",
                "needs a \"command\" (a stdio server) or a \"type\" (\"http\", \"sse\", \"sdk\")",
            )),
            Some("http") => self.url(o).map(ServerSpec::Http),
            Some("sse") => self.url(o).map(ServerSpec::Sse),
            Some("sdk") => Ok(ServerSpec::Sdk {
                name: match o.get("name") {
                    None => self.server.to_owned(),
                    Some(Value::String(n)) if !n.is_empty() => n.clone(),
                    Some(other) => {
                        return Err(self.err(
                            "name",
                            format!("must be a string that is not empty, not {}", kind(other)),
                        ))
                    }
                },
            }),
            Some(other) => Err(self.err(
                "type",
                format!("{other:?} is not a transport keel knows (stdio, http, sse, sdk)"),
            )),
        }
    }

    fn stdio(&self, o: &Map<String, Value>) -> Result<ServerSpec, ConfigError> {
        let command = match o.get("command") {
            Some(Value::String(c)) => self.expand("command", c)?,
            Some(other) => {
                return Err(self.err("command", format!("must be a string, not {}", kind(other))))
            }
            None => return Err(self.err("command", "is missing")),
        };
        if command.trim().is_empty() {
            return Err(self.err("command", "is empty"));
        }
        let args = match o.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let field = format!("args[{i}]");
                    match a {
                        Value::String(s) => self.expand(&field, s),
                        other => {
                            Err(self.err(&field, format!("must be a string, not {}", kind(other))))
                        }
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(self.err(
                    "args",
                    format!("must be an array of strings, not {}", kind(other)),
                ))
            }
        };
        let env = self.pairs(o, "env")?;
        for (k, _) in &env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(self.err(
                    &format!("env.{k}"),
                    "is not a name an environment variable can have",
                ));
            }
        }
        let cwd = match o.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(self.expand("cwd", c)?),
            Some(other) => {
                return Err(self.err("cwd", format!("must be a string, not {}", kind(other))))
            }
        };
        Ok(ServerSpec::Stdio(StdioSpec {
            command,
            args,
            env,
            cwd,
        }))
    }

    fn url(&self, o: &Map<String, Value>) -> Result<UrlSpec, ConfigError> {
        let url = match o.get("url") {
            Some(Value::String(u)) => self.expand("url", u)?,
            Some(other) => {
                return Err(self.err("url", format!("must be a string, not {}", kind(other))))
            }
            None => return Err(self.err("url", "is missing")),
        };
        let lower = url.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(self.err("url", format!("{url:?} is not an http:// or https:// URL")));
        }
        let headers = self.pairs(o, "headers")?;
        for (k, v) in &headers {
            if k.is_empty() || k.bytes().any(|b| b <= b' ' || b == b':' || b >= 0x7f) {
                return Err(self.err(&format!("headers.{k}"), "is not a header name"));
            }
            if v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(self.err(&format!("headers.{k}"), "holds a line break or a NUL byte"));
            }
        }
        let oauth = self.oauth(o)?;
        Ok(UrlSpec {
            url,
            headers,
            oauth,
        })
    }

    /// The `oauth` object: `clientId` (1 to 1024 printable characters), `callbackPort`
    /// (1 to 65535).
    fn oauth(&self, o: &Map<String, Value>) -> Result<OAuthSpec, ConfigError> {
        let obj = match o.get("oauth") {
            None | Some(Value::Null) => return Ok(OAuthSpec::default()),
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(self.err("oauth", format!("must be an object, not {}", kind(other))))
            }
        };
        let client_id = match obj.get("clientId") {
            None | Some(Value::Null) => None,
            Some(Value::String(c))
                if (1..=1024).contains(&c.len())
                    && c.bytes().all(|b| (0x21..0x7f).contains(&b)) =>
            {
                Some(self.expand("oauth.clientId", c)?)
            }
            Some(_) => {
                return Err(self.err(
                    "oauth.clientId",
                    "must be a string of 1 to 1024 printable characters",
                ))
            }
        };
        let callback_port = match obj.get("callbackPort") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64().and_then(|p| u16::try_from(p).ok()) {
                Some(p) if p > 0 => Some(p),
                _ => {
                    return Err(self.err(
                        "oauth.callbackPort",
                        format!("must be a port from 1 to 65535, not {v}"),
                    ))
                }
            },
        };
        Ok(OAuthSpec {
            client_id,
            callback_port,
        })
    }

    /// An object of strings (`env`, `headers`), values expanded.
    fn pairs(
        &self,
        o: &Map<String, Value>,
        key: &str,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    let field = format!("{key}.{k}");
                    match v {
                        Value::String(s) => Ok((k.clone(), self.expand(&field, s)?)),
                        other => {
                            Err(self.err(&field, format!("must be a string, not {}", kind(other))))
                        }
                    }
                })
                .collect(),
            Some(other) => Err(self.err(
                key,
                format!("must be an object of strings, not {}", kind(other)),
            )),
        }
    }

    fn expand(&self, field: &str, s: &str) -> Result<String, ConfigError> {
        expand(s, self.env).map_err(|e| self.err(field, e.to_string()))
    }
}

/// Why a `${…}` in a configured string cannot be expanded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// `${` with no `}` after it (`text`: the whole string).
    #[error("\"${{\" without a closing \"}}\" in {text:?}")]
    Unclosed {
        /// The string being expanded.
        text: String,
    },
    /// The text between the braces is not a variable name.
    #[error("\"${{{inner}}}\" does not name a variable (letters, digits and _, not starting with a digit)")]
    BadName {
        /// What stood between the braces.
        inner: String,
    },
    /// A variable that is not set and has no default.
    #[error("${{{name}}} is not set, and has no default (write ${{{name}:-value}} for one)")]
    Unset {
        /// The variable.
        name: String,
    },
}

/// Expand `${VAR}` and `${VAR:-default}` in `s` from `env`. A `$` not followed by `{` is kept
/// as it is. A variable that is not set and has no default is an error (a server started
/// with a hole in its command line would do something nobody asked for).
pub fn expand(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unclosed { text: s.to_owned() });
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ExpandError::BadName {
                inner: inner.to_owned(),
            });
        }
        match (env(name), default) {
            (Some(v), _) if !(v.is_empty() && default.is_some()) => out.push_str(&v),
            (_, Some(d)) => out.push_str(d),
            (_, None) => {
                return Err(ExpandError::Unset {
                    name: name.to_owned(),
                })
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests;
