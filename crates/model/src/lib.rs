//! keel-model
