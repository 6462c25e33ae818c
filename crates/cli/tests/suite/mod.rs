pub mod common;

mod basic;
mod failures;
