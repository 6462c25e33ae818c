//! keel-core's in-process tests: a real Session against keel-mock on loopback.

mod suite;
