//! The sets of specs covering directories, interned: every directory with
//! the same covering specs shares one allocation, so a directory costs 16
//! bytes however many specs cover it (100 specs over a 50,000-directory
//! tree would otherwise hold 400 bytes in each directory).
//!
//! Pure data, no I/O.

use std::collections::HashSet;
use std::sync::Arc;

use super::SpecId;

/// A covering set, sorted, shared; `None` when empty.
pub(crate) type SpecSet = Option<Arc<[SpecId]>>;

/// The slice of a set.
pub(crate) fn slice(set: &SpecSet) -> &[SpecId] {
    set.as_deref().unwrap_or(&[])
}

/// Every set some directory holds (and, until the next purge, some no one
/// holds any more).
#[derive(Debug)]
pub(crate) struct SpecSets {
    sets: HashSet<Arc<[SpecId]>>,
    /// Size of `sets` past which the sets no directory holds are dropped.
    purge_at: usize,
}

impl Default for SpecSets {
    fn default() -> SpecSets {
        SpecSets {
            sets: HashSet::new(),
            purge_at: 64,
        }
    }
}

impl SpecSets {
    /// The shared set holding exactly `ids` (sorted, no duplicates).
    fn intern(&mut self, ids: &[SpecId]) -> SpecSet {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "sorted set");
        if ids.is_empty() {
            return None;
        }
        if let Some(a) = self.sets.get(ids) {
            return Some(a.clone());
        }
        if self.sets.len() >= self.purge_at {
            // Held by the table alone: no directory has it any more.
            self.sets.retain(|a| Arc::strong_count(a) > 1);
            self.purge_at = (self.sets.len() * 2).max(64);
        }
        let a: Arc<[SpecId]> = Arc::from(ids);
        self.sets.insert(a.clone());
        Some(a)
    }

    /// `set` with `sid` added.
    pub(crate) fn with(&mut self, set: &SpecSet, sid: SpecId) -> SpecSet {
        let old = slice(set);
        match old.binary_search(&sid) {
            Ok(_) => set.clone(),
            Err(i) => {
                let mut ids: smallvec::SmallVec<[SpecId; 8]> = old.iter().copied().collect();
                ids.insert(i, sid);
                self.intern(&ids)
            }
        }
    }

    /// `set` without `sid`.
    pub(crate) fn without(&mut self, set: &SpecSet, sid: SpecId) -> SpecSet {
        let old = slice(set);
        match old.binary_search(&sid) {
            Err(_) => set.clone(),
            Ok(i) => {
                let mut ids: smallvec::SmallVec<[SpecId; 8]> = old.iter().copied().collect();
                ids.remove(i);
                self.intern(&ids)
            }
        }
    }

    /// Distinct sets held (test and stats use).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.sets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_sets_share_one_allocation() {
        let mut s = SpecSets::default();
        let a = s.with(&None, 3);
        let a = s.with(&a, 1);
        let b = s.with(&None, 1);
        let b = s.with(&b, 3);
        assert_eq!(slice(&a), [1, 3]);
        assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()));
        assert!(
            Arc::ptr_eq(s.with(&a, 3).as_ref().unwrap(), a.as_ref().unwrap()),
            "adding a member changes nothing"
        );
        let three = s.without(&a, 1);
        assert_eq!(slice(&three), [3]);
        assert_eq!(s.without(&three, 3), None, "empty is None");
        assert_eq!(slice(&s.without(&a, 7)), [1, 3], "not a member");
    }

    /// Sets no directory holds go at the next purge: churn through many
    /// specs does not grow the table without bound.
    #[test]
    fn sets_no_one_holds_are_purged() {
        let mut s = SpecSets::default();
        let kept = s.with(&None, 0);
        for sid in 1..10_000 {
            let t = s.with(&kept, sid);
            drop(t);
        }
        assert!(s.len() <= 129, "{} sets held", s.len());
        assert_eq!(slice(&s.with(&None, 0)), [0]);
        assert!(Arc::ptr_eq(
            s.with(&None, 0).as_ref().unwrap(),
            kept.as_ref().unwrap()
        ));
    }
}
