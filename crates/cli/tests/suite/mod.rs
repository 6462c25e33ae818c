pub mod common;

mod basic;
