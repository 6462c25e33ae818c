//! MCP servers as keel tools.
//!
//! This crate holds what does not depend on a running server:
//! - [`config`]: the servers users configure (`.mcp.json`, `mcpServers` in the settings files,
//!   `--mcp-config`), read with `${VAR}` / `${VAR:-default}` expansion, each problem named by
//!   where it is (file or flag, server, field);
//! - [`names`]: the names the model sees (`mcp__<server>__<tool>`), sanitized, at most 64
//!   bytes, and made unique deterministically.
//!
//! - [`server`]: a connected server — a stdio server (a child process in its own process
//!   group) or one an SDK host runs ([`sdk`]) — started, listed, called and stopped with every
//!   wait bounded, a stdio server's stderr kept as a bounded tail.
//! - [`hub`]: the servers of one session ([`hub::McpHub`]): started side by side, their tools
//!   offered to the model and following the servers as they change, crash or are toggled.
//! - [`oauth`]: OAuth for servers at a URL (discovery, registration, PKCE, refresh, the
//!   token file).

mod clip;
pub mod config;
pub mod http;
pub mod hub;
pub mod names;
pub mod oauth;
pub mod sdk;
pub mod server;
mod stdout;

pub use config::{
    expand, ConfigError, Entry, OAuthSpec, Origin, ServerSet, ServerSpec, Sources, StdioSpec,
    UrlSpec, UserState,
};
pub use names::{assign, sanitize, server_part, tool_name, MAX_NAME_BYTES};
pub use sdk::{SdkHost, SdkHostError};
pub use server::{CallOutcome, Server, ServerTool, StartError};
