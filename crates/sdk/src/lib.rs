//! keel-sdk
