pub mod common;

mod basic;
mod cancel;
mod failures;
