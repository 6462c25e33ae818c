pub mod common;

mod agents;
mod basic;
mod boundary;
mod bypass;
mod cancel;
mod context;
mod control;
mod demo;
mod failures;
mod fleet;
mod hooks;
mod live_context;
mod mcp;
mod ownership;
mod providers;
mod sandbox;
mod sessions;
