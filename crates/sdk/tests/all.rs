//! keel-sdk integration tests: one test binary (see suite/).

mod suite;
