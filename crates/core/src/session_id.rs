//! The session id, shared and switchable: `/clear` starts a new session in the same process,
//! and everything that stamps or names the session (the emitters, the Task tool's and the
//! background tasks' clones of them, the context, hook inputs) reads the id at the moment it
//! is used, from one cell.

use std::sync::{Arc, RwLock};

/// One session's id, shared by every clone; [`SessionId::switch`] changes it for all of them.
#[derive(Clone)]
pub struct SessionId(Arc<RwLock<Arc<str>>>);

impl SessionId {
    /// A cell holding `id`.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(Arc::new(RwLock::new(id.into())))
    }

    /// The id now.
    pub fn get(&self) -> Arc<str> {
        // A poisoned lock only means a panic elsewhere; the id is still whole (it is replaced
        // in one assignment).
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Make `id` the session's id for every clone; returns the id it replaces.
    pub fn switch(&self, id: impl Into<Arc<str>>) -> Arc<str> {
        let mut g = self.0.write().unwrap_or_else(|p| p.into_inner());
        std::mem::replace(&mut *g, id.into())
    }
}

impl std::fmt::Debug for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.get())
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::SessionId;

    #[test]
    fn a_switch_is_seen_by_every_clone() {
        let a = SessionId::new("old");
        let b = a.clone();
        assert_eq!(&*a.switch("new"), "old");
        assert_eq!(&*b.get(), "new");
        assert_eq!(b.to_string(), "new");
    }
}
