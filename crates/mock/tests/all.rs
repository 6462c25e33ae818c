//! keel-mock integration tests, compiled as one binary.

mod suite;
