//! Followed symlinks (`follow_symlinks`): the only writer of which nodes
//! are followed links and which directory each led to when it was
//! followed. The steps that look at links again are `following.rs`'s.

use std::collections::HashMap;

use crate::fs::DirIdent;
use crate::index::DirId;

/// Nodes that are followed symlinks, with the identity of the directory
/// the link led to when it was followed.
#[derive(Debug, Default)]
pub(super) struct Links {
    targets: HashMap<DirId, DirIdent>,
}

impl Links {
    pub(super) fn target(&self, id: DirId) -> Option<&DirIdent> {
        self.targets.get(&id)
    }

    pub(super) fn contains(&self, id: DirId) -> bool {
        self.targets.contains_key(&id)
    }

    pub(super) fn insert(&mut self, id: DirId, target: DirIdent) {
        self.targets.insert(id, target);
    }

    pub(super) fn remove(&mut self, id: DirId) {
        self.targets.remove(&id);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn ids(&self) -> impl Iterator<Item = DirId> + '_ {
        self.targets.keys().copied()
    }
}
