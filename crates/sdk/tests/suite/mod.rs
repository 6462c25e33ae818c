mod backpressure;
mod common;
mod contract;
mod control;
mod executor;
mod keel;
