pub mod common;

mod agents;
mod basic;
mod cancel;
mod control;
mod demo;
mod failures;
mod sessions;
