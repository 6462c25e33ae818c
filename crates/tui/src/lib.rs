//! keel's interactive terminal UI.
//!
//! `keel` with no `-p` on a terminal runs here: a session built by `SessionBuilder`, its typed
//! events drawn inline — finished messages go into the terminal's own scrollback once, and only
//! a small live area (streaming reply, running calls, input box, status line) is redrawn. The
//! UI reaches the engine only through its public API: the builder, the event stream, the
//! session handle (interrupt, background) and the approver seam.

pub mod app;
pub mod approve;
mod driver;
pub mod editor;
pub mod markdown;
pub mod rewind;
pub mod screen;
pub mod view;

pub use driver::{run, Launch};
