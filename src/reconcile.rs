//! The spec differ: what to create, update and delete to reach a desired set.
//!
//! Pure: compares maps, touches nothing.

use std::collections::{BTreeMap, HashMap};

/// What [`Manager::reconcile`](crate::Manager::reconcile) did, by name. Each
/// list is sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconcileSummary {
    /// Names that were not applied before and are now.
    pub created: Vec<String>,
    /// Names whose spec changed (each got a new generation).
    pub updated: Vec<String>,
    /// Names that were applied and are not in the desired set.
    pub deleted: Vec<String>,
    /// Names whose spec was already as desired: no work was done for them.
    pub unchanged: Vec<String>,
}

impl ReconcileSummary {
    /// True when nothing was created, updated or deleted.
    #[must_use]
    pub fn is_noop(&self) -> bool {
        self.created.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }
}

/// The differ: compares the last applied specs with the desired ones.
pub(crate) fn plan<S: PartialEq>(
    current: &HashMap<String, S>,
    desired: &BTreeMap<String, S>,
) -> ReconcileSummary {
    let mut out = ReconcileSummary::default();
    for (name, spec) in desired {
        match current.get(name) {
            None => out.created.push(name.clone()),
            Some(old) if old == spec => out.unchanged.push(name.clone()),
            Some(_) => out.updated.push(name.clone()),
        }
    }
    let mut deleted: Vec<String> = current
        .keys()
        .filter(|n| !desired.contains_key(*n))
        .cloned()
        .collect();
    deleted.sort();
    out.deleted = deleted;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cur(items: &[(&str, u32)]) -> HashMap<String, u32> {
        items.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }
    fn des(items: &[(&str, u32)]) -> BTreeMap<String, u32> {
        items.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }
    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn empty_to_empty_is_noop() {
        let p = plan(&cur(&[]), &des(&[]));
        assert!(p.is_noop());
        assert_eq!(p, ReconcileSummary::default());
    }

    #[test]
    fn creates_updates_deletes_and_keeps() {
        let p = plan(
            &cur(&[("a", 1), ("b", 1), ("c", 1)]),
            &des(&[("a", 1), ("b", 2), ("d", 1)]),
        );
        assert_eq!(p.created, names(&["d"]));
        assert_eq!(p.updated, names(&["b"]));
        assert_eq!(p.deleted, names(&["c"]));
        assert_eq!(p.unchanged, names(&["a"]));
        assert!(!p.is_noop());
    }

    #[test]
    fn same_set_is_noop() {
        let p = plan(&cur(&[("a", 1), ("b", 2)]), &des(&[("b", 2), ("a", 1)]));
        assert!(p.is_noop());
        assert_eq!(p.unchanged, names(&["a", "b"]));
    }

    #[test]
    fn everything_deleted_sorted() {
        let p = plan(&cur(&[("z", 1), ("m", 1), ("a", 1)]), &des(&[]));
        assert_eq!(p.deleted, names(&["a", "m", "z"]));
    }

    #[test]
    fn exhaustive_small_universe() {
        // Every combination of 3 names, each absent / value 1 / value 2, on
        // both sides: 27 x 27 cases. Each name lands in exactly one list and
        // the right one.
        let vals = [None, Some(1u32), Some(2u32)];
        let ns = ["a", "b", "c"];
        for ci in 0..27 {
            for di in 0..27 {
                let mut c = HashMap::new();
                let mut d = BTreeMap::new();
                let (mut x, mut y) = (ci, di);
                for n in ns {
                    if let Some(v) = vals[x % 3] {
                        c.insert(n.to_string(), v);
                    }
                    if let Some(v) = vals[y % 3] {
                        d.insert(n.to_string(), v);
                    }
                    x /= 3;
                    y /= 3;
                }
                let p = plan(&c, &d);
                for n in ns {
                    let n = n.to_string();
                    let expect = match (c.get(&n), d.get(&n)) {
                        (None, None) => None,
                        (None, Some(_)) => Some(&p.created),
                        (Some(_), None) => Some(&p.deleted),
                        (Some(a), Some(b)) if a == b => Some(&p.unchanged),
                        (Some(_), Some(_)) => Some(&p.updated),
                    };
                    let lists = [&p.created, &p.updated, &p.deleted, &p.unchanged];
                    let count = lists.iter().filter(|l| l.contains(&n)).count();
                    match expect {
                        None => assert_eq!(count, 0),
                        Some(l) => {
                            assert_eq!(count, 1);
                            assert!(l.contains(&n));
                        }
                    }
                }
            }
        }
    }
}
