mod bash;
mod common;
mod edit;
mod files;
mod glob;
mod grep;
mod inputs;
mod read_write;
