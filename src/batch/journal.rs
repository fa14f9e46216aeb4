//! The changes-since journal of one spec generation: for every path
//! changed lately, enough to tell its net change after any sequence number
//! the journal still covers.
//!
//! Pure: batches in (with their sequence numbers), answers out. Memory is
//! bounded by the number of distinct paths (`capacity`), not by the number
//! of changes: each path keeps its type, whether it exists now, the seq of
//! its last change, and the seqs at which it last appeared or vanished (at
//! most [`MAX_FLIPS`]). What must go to keep within those bounds raises the
//! journal's floor: a question about an older seq is answered with
//! [`ChangesSince::Resync`], never with a partial list.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::change::{Change, ChangeKind, FileType, Meta};
use crate::ids::{Generation, Seq};

/// Appearances and disappearances kept per path. A path that comes and
/// goes more often than this (a lock file) raises the floor instead.
const MAX_FLIPS: usize = 8;

/// The answer of [`Manager::changes_since`](crate::Manager::changes_since).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum ChangesSince {
    /// The net changes after the seq asked for, through `through`: each
    /// path once, sorted by path, compared with what was there at that
    /// seq (a file created and removed since does not appear; one removed
    /// and created again is `Modified`). Ask again from `through`.
    Changes {
        /// The changes.
        changes: Vec<Change>,
        /// The last seq they cover.
        through: Seq,
    },
    /// The journal cannot answer from that seq: rebuild from scratch (list
    /// the tree, or apply the spec with
    /// [`initial_scan`](crate::WatchOptions::initial_scan)), then ask
    /// again from `through`. Changes after `through` are kept, so nothing
    /// made during the rebuild is missed.
    Resync {
        /// Why.
        reason: ResyncReason,
        /// Where to ask from after rebuilding.
        through: Seq,
    },
}

/// Why [`ChangesSince::Resync`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum ResyncReason {
    /// The seq is older than what the journal still holds (it keeps a
    /// bounded number of paths; `oldest` is the oldest seq it can answer
    /// from).
    TooOld {
        /// The oldest seq the journal can answer from now.
        oldest: Seq,
    },
    /// The seq is from before the spec's current generation (it was
    /// updated since: its paths or rules may differ).
    OtherGeneration {
        /// The current generation.
        generation: Generation,
    },
    /// The seq was never issued by this manager (it is ahead of the
    /// newest).
    Unknown,
    /// The seq is of another instance: an earlier run, another process or
    /// manager, a snapshot of another lineage (see [`Seq`]).
    OtherInstance,
}

#[derive(Debug)]
struct Entry {
    exists: bool,
    file_type: FileType,
    /// The metadata of its last change (a spec's with
    /// [`WatchOptions::metadata`](crate::WatchOptions::metadata)): what
    /// it is now, if it exists.
    meta: Option<Box<Meta>>,
    last: u64,
    /// Seqs at which the path appeared or vanished, oldest first.
    flips: Vec<u64>,
}

/// The journal of one spec generation.
#[derive(Debug)]
pub(crate) struct Journal {
    generation: Generation,
    /// The instance its seqs are of (the manager's, or a restored
    /// snapshot's lineage).
    instance: u64,
    /// The manager's own instance: its seqs of other specs are understood
    /// too (a consumer of several specs can keep one).
    manager: u64,
    /// The last seq issued before this generation started.
    start: u64,
    /// Questions about seqs below this are answered with `Resync`.
    floor: u64,
    /// The seq of the last batch recorded.
    through: u64,
    capacity: usize,
    paths: HashMap<Arc<Path>, Entry>,
    /// (last seq, path): who goes first when the journal is full.
    by_last: BTreeSet<(u64, Arc<Path>)>,
}

impl Journal {
    /// An empty journal of a generation that starts after seq `start` of
    /// `instance` (the manager's is `manager`).
    pub(crate) fn new(
        generation: Generation,
        (instance, manager): (u64, u64),
        start: u64,
        capacity: usize,
    ) -> Journal {
        Journal {
            generation,
            instance,
            manager,
            start,
            floor: start,
            through: start,
            capacity: capacity.max(1),
            paths: HashMap::new(),
            by_last: BTreeSet::new(),
        }
    }

    /// The generation it journals.
    pub(crate) fn generation(&self) -> Generation {
        self.generation
    }

    /// The instance its seqs are of.
    pub(crate) fn instance(&self) -> u64 {
        self.instance
    }

    /// Records a batch with sequence number `seq` (greater than any
    /// before).
    pub(crate) fn record(&mut self, seq: u64, changes: &[Change]) {
        debug_assert!(seq > self.through);
        self.through = seq;
        for c in changes {
            self.record_one(seq, c);
        }
    }

    fn record_one(&mut self, seq: u64, c: &Change) {
        let key: Arc<Path> = match self.paths.get_key_value(c.path.as_path()) {
            Some((k, _)) => k.clone(),
            None => {
                if self.paths.len() >= self.capacity {
                    self.evict_oldest();
                }
                let k: Arc<Path> = Arc::from(c.path.as_path());
                let exists_before = c.kind.existed_before();
                self.paths.insert(
                    k.clone(),
                    Entry {
                        exists: exists_before,
                        file_type: c.file_type,
                        meta: None,
                        last: 0,
                        flips: Vec::new(),
                    },
                );
                k
            }
        };
        let e = self.paths.get_mut(&key).expect("just found or inserted");
        if e.last != 0 {
            self.by_last.remove(&(e.last, key.clone()));
        }
        let exists = c.kind.exists_after();
        if exists != e.exists {
            e.flips.push(seq);
            if e.flips.len() > MAX_FLIPS {
                let dropped = e.flips.remove(0);
                self.floor = self.floor.max(dropped);
            }
        }
        e.exists = exists;
        e.file_type = c.file_type;
        e.meta.clone_from(&c.meta);
        e.last = seq;
        self.by_last.insert((seq, key));
    }

    fn evict_oldest(&mut self) {
        if let Some((last, path)) = self.by_last.pop_first() {
            self.paths.remove(&path);
            self.floor = self.floor.max(last);
        }
    }

    /// The net changes after `seq`; `newest` is the newest seq the manager
    /// has issued (for any spec).
    pub(crate) fn since(&self, seq: Seq, newest: u64) -> ChangesSince {
        let through = Seq::new(self.instance, self.through);
        let resync = |reason| ChangesSince::Resync { reason, through };
        if seq.instance() != self.instance && seq.instance() != self.manager {
            return resync(ResyncReason::OtherInstance);
        }
        let seq = seq.number();
        if seq > newest.max(self.through) {
            return resync(ResyncReason::Unknown);
        }
        if seq < self.start {
            return resync(ResyncReason::OtherGeneration {
                generation: self.generation,
            });
        }
        if seq < self.floor {
            return resync(ResyncReason::TooOld {
                oldest: Seq::new(self.instance, self.floor),
            });
        }
        let mut changes: Vec<Change> = self
            .by_last
            .range((seq + 1, Arc::from(Path::new("")))..)
            .filter_map(|(_, path)| {
                let e = &self.paths[path];
                let flips_after = e.flips.iter().filter(|f| **f > seq).count();
                let existed = e.exists ^ (flips_after % 2 == 1);
                let kind = ChangeKind::between(existed, e.exists)?;
                let mut c = Change::new(PathBuf::from(&**path), kind, e.file_type);
                c.meta.clone_from(&e.meta);
                Some(c)
            })
            .collect();
        changes.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        ChangesSince::Changes { changes, through }
    }

    /// Distinct paths held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.paths.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeKind::*;

    const I: u64 = 0xab;

    fn j(generation: u64, start: u64, capacity: usize) -> Journal {
        Journal::new(Generation(generation), (I, I), start, capacity)
    }

    fn s(n: u64) -> Seq {
        Seq::new(I, n)
    }

    fn c(path: &str, kind: ChangeKind) -> Change {
        Change::new(path, kind, FileType::File)
    }

    fn changes(j: &Journal, seq: u64) -> Vec<(String, ChangeKind)> {
        match j.since(Seq::new(I, seq), 1_000) {
            ChangesSince::Changes { changes, .. } => changes
                .into_iter()
                .map(|c| (c.path.display().to_string(), c.kind))
                .collect(),
            other => panic!("since {seq}: {other:?}"),
        }
    }

    fn pairs(v: &[(&str, ChangeKind)]) -> Vec<(String, ChangeKind)> {
        v.iter().map(|(p, k)| (p.to_string(), *k)).collect()
    }

    #[test]
    fn net_changes_are_relative_to_the_seq_asked() {
        let mut j = j(1, 10, 100);
        j.record(11, &[c("/a", Created), c("/b", Modified)]);
        j.record(12, &[c("/a", Modified), c("/c", Removed)]);
        j.record(13, &[c("/a", Removed), c("/b", Removed)]);
        j.record(14, &[c("/b", Created)]);
        assert_eq!(
            changes(&j, 10),
            pairs(&[("/b", Modified), ("/c", Removed)]),
            "a came and went; b was replaced"
        );
        assert_eq!(
            changes(&j, 11),
            pairs(&[("/a", Removed), ("/b", Modified), ("/c", Removed)])
        );
        assert_eq!(changes(&j, 12), pairs(&[("/a", Removed), ("/b", Modified)]));
        assert_eq!(changes(&j, 13), pairs(&[("/b", Created)]));
        assert_eq!(changes(&j, 14), pairs(&[]));
        match j.since(s(14), 20) {
            ChangesSince::Changes { through, .. } => assert_eq!(through, s(14)),
            other => panic!("{other:?}"),
        }
    }

    /// Whatever seq is asked from, a path's change carries the metadata of
    /// its newest change: what it is now (none once removed).
    #[test]
    fn metadata_is_what_the_path_is_now() {
        let sized = |p: &str, kind, size| c(p, kind).with_meta(Meta::new(size, None, Some(9)));
        let mut j = j(1, 10, 100);
        j.record(11, &[sized("/a", Created, 1), sized("/b", Created, 1)]);
        j.record(12, &[sized("/a", Modified, 2), c("/b", Removed)]);
        j.record(13, &[sized("/a", Modified, 3)]);
        let metas = |j: &Journal, seq| match j.since(s(seq), 100) {
            ChangesSince::Changes { changes, .. } => changes
                .into_iter()
                .map(|c| (c.path.display().to_string(), c.kind, c.meta.map(|m| m.size)))
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let a = |kind, size| ("/a".to_string(), kind, size);
        assert_eq!(metas(&j, 10), vec![a(Created, Some(3))], "b came and went");
        assert_eq!(
            metas(&j, 11),
            vec![a(Modified, Some(3)), ("/b".into(), Removed, None)]
        );
        assert_eq!(metas(&j, 12), vec![a(Modified, Some(3))]);
        // A change without metadata (none asked for) leaves none behind.
        j.record(14, &[c("/a", Modified)]);
        assert_eq!(metas(&j, 13), vec![a(Modified, None)]);
    }

    #[test]
    fn a_seq_between_batches_of_other_specs_is_fine() {
        let mut j = j(1, 0, 100);
        j.record(5, &[c("/a", Created)]);
        j.record(9, &[c("/a", Modified)]);
        assert_eq!(changes(&j, 7), pairs(&[("/a", Modified)]));
        assert_eq!(changes(&j, 3), pairs(&[("/a", Created)]));
        assert_eq!(changes(&j, 9), pairs(&[]));
        assert_eq!(changes(&j, 500), pairs(&[]), "newer batches of others");
    }

    #[test]
    fn memory_is_bounded_by_paths_and_eviction_raises_the_floor() {
        let mut j = j(1, 0, 2);
        for s in 1..=1000 {
            j.record(s, &[c("/hot", Modified)]);
        }
        assert_eq!(j.len(), 1, "one path however many changes");
        j.record(1001, &[c("/x", Created)]);
        j.record(1002, &[c("/y", Created)]); // evicts /hot (last 1000)
        assert_eq!(j.len(), 2);
        assert_eq!(
            j.since(s(999), 2000),
            ChangesSince::Resync {
                reason: ResyncReason::TooOld { oldest: s(1000) },
                through: s(1002)
            },
            "never a partial list"
        );
        assert_eq!(
            changes(&j, 1000),
            pairs(&[("/x", Created), ("/y", Created)])
        );
    }

    #[test]
    fn a_path_that_comes_and_goes_often_raises_the_floor() {
        let mut j = j(1, 0, 100);
        let mut n = 0;
        for _ in 0..10 {
            n += 1;
            j.record(n, &[c("/lock", Created)]);
            n += 1;
            j.record(n, &[c("/lock", Removed)]);
        }
        // 20 flips, 8 kept: those at 13..=20.
        assert_eq!(
            j.since(s(11), 100),
            ChangesSince::Resync {
                reason: ResyncReason::TooOld { oldest: s(12) },
                through: s(20)
            }
        );
        assert_eq!(changes(&j, 12), pairs(&[]), "gone then and now");
        assert_eq!(changes(&j, 13), pairs(&[("/lock", Removed)]));
    }

    #[test]
    fn other_generations_and_unknown_seqs_must_resync() {
        let mut j = j(3, 50, 10);
        j.record(51, &[c("/a", Created)]);
        assert_eq!(
            j.since(s(49), 60),
            ChangesSince::Resync {
                reason: ResyncReason::OtherGeneration {
                    generation: Generation(3)
                },
                through: s(51)
            }
        );
        assert_eq!(changes(&j, 50), pairs(&[("/a", Created)]));
        assert!(matches!(
            j.since(s(61), 60),
            ChangesSince::Resync {
                reason: ResyncReason::Unknown,
                ..
            }
        ));
    }

    #[test]
    fn seqs_of_other_instances_must_resync_whatever_their_numbers() {
        // A restored lineage (0x1) in a manager whose own instance is 0x2.
        let mut j = Journal::new(Generation(1), (0x1, 0x2), 50, 10);
        j.record(51, &[c("/a", Created)]);
        for other in [Seq::new(0x3, 50), Seq::new(0x3, 51), Seq::new(0x3, 0)] {
            assert_eq!(
                j.since(other, 60),
                ChangesSince::Resync {
                    reason: ResyncReason::OtherInstance,
                    through: Seq::new(0x1, 51)
                },
                "{other}"
            );
        }
        let lineage = j.since(Seq::new(0x1, 50), 60);
        let manager = j.since(Seq::new(0x2, 50), 60);
        assert_eq!(lineage, manager, "the manager's own seqs are understood");
        assert!(
            matches!(&lineage, ChangesSince::Changes { changes, .. } if changes.len() == 1),
            "{lineage:?}"
        );
    }

    #[test]
    fn removed_keeps_the_type_it_had() {
        let mut j = j(1, 0, 10);
        j.record(1, &[Change::new("/d", Removed, FileType::Dir)]);
        match j.since(s(0), 1) {
            ChangesSince::Changes { changes, .. } => {
                assert_eq!(changes[0].file_type, FileType::Dir);
                assert_eq!(changes[0].kind, Removed);
            }
            other => panic!("{other:?}"),
        }
    }
}
