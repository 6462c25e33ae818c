//! keel-mock
