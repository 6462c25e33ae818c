//! keel-tools integration tests, compiled as one binary.

mod suite;
