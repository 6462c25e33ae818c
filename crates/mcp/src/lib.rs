//! MCP servers as keel tools.
//!
//! This crate holds what does not depend on a running server:
//! - [`config`]: the servers users configure (`.mcp.json`, `mcpServers` in the settings files,
//!   `--mcp-config`), read with `${VAR}` / `${VAR:-default}` expansion, each problem named by
//!   where it is (file or flag, server, field);
//! - [`names`]: the names the model sees (`mcp__<server>__<tool>`), sanitized, at most 64
//!   bytes, and made unique deterministically.
//!
//! - [`stdio`]: a stdio server (a child process in its own process group), started, listed,
//!   called and stopped with every wait bounded, and its stderr kept as a bounded tail.
//!
//! The HTTP transports and the bridge into sessions build on these.

pub mod config;
pub mod names;
pub mod stdio;

pub use config::{
    expand, ConfigError, Entry, Origin, ServerSet, ServerSpec, Sources, StdioSpec, UrlSpec,
};
pub use names::{assign, sanitize, server_part, tool_name, MAX_NAME_BYTES};
pub use stdio::{CallOutcome, ServerTool, StartError, StdioServer};
