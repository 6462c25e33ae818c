//! keel's end-to-end tests: the `keel` binary against keel-mock on loopback. One test binary.

mod suite;
