//! Roots waiting to be attached again: the only writer of that queue.
//! Where each root is registered is the index's fact (a
//! [`Partial`](crate::index::Partial)), and whether it is missing is
//! derived from there. The steps that attach roots are `attaching.rs`'s.

use std::path::PathBuf;

use crate::index::SpecId;

/// Roots whose watching point changed, to attach again at the end of the
/// pass.
#[derive(Debug, Default)]
pub(super) struct Roots {
    pending: Vec<(SpecId, PathBuf)>,
}

impl Roots {
    pub(super) fn push(&mut self, sid: SpecId, root: PathBuf) {
        self.pending.push((sid, root));
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Everything pending, sorted, each once.
    pub(super) fn take(&mut self) -> Vec<(SpecId, PathBuf)> {
        let mut todo = std::mem::take(&mut self.pending);
        todo.sort();
        todo.dedup();
        todo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_roots_come_out_sorted_once() {
        let mut r = Roots::default();
        r.push(2, "/b".into());
        r.push(1, "/a".into());
        r.push(2, "/b".into());
        assert!(!r.is_empty());
        assert_eq!(r.take(), vec![(1, "/a".into()), (2, "/b".into())]);
        assert!(r.is_empty());
    }
}
