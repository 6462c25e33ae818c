//! Why a `keel mcp` command failed, as kinds with the input that failed; each is printed as
//! one line after "keel mcp: " and the command exits 1.

use std::fmt;
use std::path::PathBuf;

use keel_core::builder::BuildError;
use keel_core::mcp::oauth::OAuthError;
use keel_core::mcp::{ConfigError, EnvError};
use keel_tools::json_file::JsonFileError;

/// Why a `keel mcp` command failed: printed as one line after "keel mcp: ", exit code 1.
#[derive(Debug)]
pub(super) enum McpCmdError {
    /// A flag or argument of `add` / `add-json` that cannot make a server entry.
    Flag(FlagError),
    /// `--scope` is not a scope.
    BadScope(String),
    /// The local or user scope without a home for `~/.claude.json`.
    NoStateFile(String),
    /// `~/.claude.json` or `.mcp.json` could not be read or written.
    File(JsonFileError),
    /// Something other than an object where `mcpServers` or its parents belong.
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// The key holding the non-object.
        key: String,
    },
    /// Not a server name keel accepts.
    BadName(String),
    /// `add` of a name the scope already has.
    Exists {
        /// The server.
        name: String,
        /// The scope.
        scope: String,
        /// Where the scope is kept.
        path: PathBuf,
    },
    /// The entry is not one a session could read.
    BadEntry(Box<ConfigError>),
    /// `add-json` of something other than one server.
    NoServer,
    /// No server of that name (in that scope, when one was given).
    Missing {
        /// The server.
        name: String,
        /// The scope asked for.
        scope: Option<String>,
    },
    /// `remove` of a name kept in several scopes, without `--scope`.
    Ambiguous {
        /// The server.
        name: String,
        /// The scopes holding it.
        scopes: Vec<String>,
    },
    /// The settings (which hold the servers) could not be read.
    Build(BuildError),
    /// `login` of a server that is not an http one.
    NotHttp {
        /// The server.
        name: String,
        /// Its kind.
        kind: &'static str,
    },
    /// `login` of a server whose entry is wrong.
    Misconfigured {
        /// The server.
        name: String,
        /// What is wrong with its entry.
        error: Box<ConfigError>,
    },
    /// MCP_TIMEOUT out of range.
    Env(EnvError),
    /// The OAuth flow, or the token store, failed.
    OAuth(OAuthError),
    /// Neither HOME nor KEEL_HOME is set: tokens have nowhere to be kept.
    NoKeelHome,
}

/// What is wrong with `add`'s flags or `add-json`'s configuration.
#[derive(Debug)]
pub(super) enum FlagError {
    /// `--header` given for a stdio server.
    HeaderForStdio,
    /// `add NAME` with no command after `--`.
    NoCommand,
    /// An `--env` that is not `KEY=VALUE` (as given).
    BadEnv(String),
    /// `--env` given for an http or sse server.
    EnvForUrl,
    /// Not exactly one URL after the name (the transport given).
    OneUrl(String),
    /// A URL that is not http:// or https:// (as given).
    NotHttpUrl(String),
    /// A `--header` that is not `Name: value` (as given).
    BadHeader(String),
    /// A `--transport` that is not stdio, http or sse (as given).
    BadTransport(String),
    /// `add-json`'s configuration is not JSON.
    NotJson(serde_json::Error),
    /// A `--client-id` that is empty, too long or not printable.
    BadClientId,
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagError::HeaderForStdio => f.write_str("--header is for http and sse servers"),
            FlagError::NoCommand => {
                f.write_str("give the command after the name: add NAME -- COMMAND [ARGS...]")
            }
            FlagError::BadEnv(e) => write!(f, "--env {e:?} is not KEY=VALUE"),
            FlagError::EnvForUrl => f.write_str("--env is for stdio servers"),
            FlagError::OneUrl(t) => {
                write!(
                    f,
                    "give one URL after the name: add --transport {t} NAME URL"
                )
            }
            FlagError::NotHttpUrl(u) => write!(f, "{u:?} is not an http:// or https:// URL"),
            FlagError::BadHeader(h) => write!(f, "--header {h:?} is not \"Name: value\""),
            FlagError::BadTransport(t) => {
                write!(f, "--transport {t:?} is not one of stdio, http, sse")
            }
            FlagError::NotJson(e) => write!(f, "the configuration is not JSON: {e}"),
            FlagError::BadClientId => {
                f.write_str("--client-id must be 1 to 1024 printable characters")
            }
        }
    }
}

impl fmt::Display for McpCmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpCmdError::Flag(e) => e.fmt(f),
            McpCmdError::BadScope(s) => write!(f, "--scope {s:?} is not one of local, project, user"),
            McpCmdError::NoStateFile(scope) => write!(f, "the {scope} scope lives in ~/.claude.json (or $CLAUDE_CONFIG_DIR/.claude.json), and neither HOME nor CLAUDE_CONFIG_DIR is set"),
            McpCmdError::File(e) => e.fmt(f),
            McpCmdError::NotAnObject { path, key } => write!(
                f,
                "{} has a {key:?} that is not an object; it was left as it is",
                path.display()
            ),
            McpCmdError::BadName(name) => write!(
                f,
                "{name:?} is not a server name (1 to 64 letters, digits, '_', '-', '.')"
            ),
            McpCmdError::Exists { name, scope, path } => write!(
                f,
                "there is already a server {name:?} in the {scope} scope ({}); remove it first",
                path.display()
            ),
            // The entry's own words: the file and server are the ones on the command line.
            McpCmdError::BadEntry(e) => match &e.field {
                Some(field) => write!(f, "field {field:?}: {}", e.message),
                None => f.write_str(&e.message),
            },
            McpCmdError::NoServer => f.write_str("no server was given"),
            McpCmdError::Missing { name, scope: None } => {
                write!(f, "there is no server {name:?} here")
            }
            McpCmdError::Missing {
                name,
                scope: Some(s),
            } => write!(f, "there is no server {name:?} in the {s} scope"),
            McpCmdError::Ambiguous { name, scopes } => write!(
                f,
                "server {name:?} is in the {} scopes; say which with --scope",
                scopes.join(" and ")
            ),
            McpCmdError::Build(e) => e.fmt(f),
            McpCmdError::NotHttp { name, kind } => write!(
                f,
                "server {name:?} is a {kind} server; OAuth is for servers of type http"
            ),
            McpCmdError::Misconfigured { name, error } => {
                write!(f, "server {name:?} is not configured right: {error}")
            }
            McpCmdError::Env(e) => e.fmt(f),
            McpCmdError::OAuth(e) => e.fmt(f),
            McpCmdError::NoKeelHome => {
                f.write_str("keel's home is not known (set HOME or KEEL_HOME)")
            }
        }
    }
}

impl std::error::Error for McpCmdError {}

impl From<FlagError> for McpCmdError {
    fn from(e: FlagError) -> Self {
        McpCmdError::Flag(e)
    }
}

impl From<JsonFileError> for McpCmdError {
    fn from(e: JsonFileError) -> Self {
        McpCmdError::File(e)
    }
}

impl From<OAuthError> for McpCmdError {
    fn from(e: OAuthError) -> Self {
        McpCmdError::OAuth(e)
    }
}

impl From<BuildError> for McpCmdError {
    fn from(e: BuildError) -> Self {
        McpCmdError::Build(e)
    }
}
