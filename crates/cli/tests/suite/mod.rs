pub mod common;

mod basic;
mod cancel;
mod control;
mod demo;
mod failures;
mod sessions;
