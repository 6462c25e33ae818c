pub mod harness;

mod engine;
mod torture;
