mod bash;
mod common;
mod edit;
mod glob;
mod grep;
mod inputs;
mod read_write;
