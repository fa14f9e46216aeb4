//! The safety net of [`WatchOptions::rescan_every`](crate::WatchOptions::rescan_every):
//! the only writer of when each spec's next rescan is due, of the stat
//! signatures a rescan compares against, and of the count of changes the
//! OS did not report (`missed_by_os`).
//!
//! A rescan first runs a sync barrier (cookies), so that every event the
//! OS queued before it has been handled; then it reads every directory of
//! the spec that holds an OS watch and `stat`s its entries. Events keep
//! the signatures current (`handle_name` stores what its `lstat` saw), so
//! a difference left at the rescan is one no event told of: it is
//! delivered as a change, and counted as missed when it is older than the
//! barrier. A change made since the barrier began may have its event on
//! the way: it is left for the next rescan, which delivers and counts it
//! if no event did.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::time::{Duration, Instant, SystemTime};

use super::Engine;
use super::trace;
use crate::fs::{self, Picture, Sig};
use crate::index::{DirId, SpecId};

#[derive(Debug, Default)]
pub(super) struct Rescans {
    every: HashMap<SpecId, Duration>,
    next: HashMap<SpecId, Instant>,
    /// Signatures of the entries of directories some rescanning spec
    /// covers, from the last rescan and the events since.
    sigs: HashMap<DirId, Picture>,
    missed: HashMap<SpecId, u64>,
    touched: Vec<SpecId>,
}

impl Rescans {
    /// Spec `sid` rescans every `every` from `now` on.
    pub(super) fn add(&mut self, sid: SpecId, every: Duration, now: Instant) {
        let every = every.max(Duration::from_millis(1));
        self.every.insert(sid, every);
        self.next.insert(sid, now + every);
    }

    pub(super) fn forget(&mut self, sid: SpecId) {
        self.every.remove(&sid);
        self.next.remove(&sid);
        self.missed.remove(&sid);
    }

    /// Directory `id` left the index.
    pub(super) fn forget_dir(&mut self, id: DirId) {
        self.sigs.remove(&id);
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.next.values().min().copied()
    }

    /// Specs whose rescan is due at `now` (rescheduled an interval on).
    fn due(&mut self, now: Instant) -> Vec<SpecId> {
        let due: Vec<SpecId> = self
            .next
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(s, _)| *s)
            .collect();
        for s in &due {
            let every = self.every[s];
            self.next.insert(*s, now + every);
        }
        due
    }

    /// Whether events in directory `id` must keep its signatures.
    pub(super) fn tracks(&self, id: DirId) -> bool {
        !self.sigs.is_empty() && self.sigs.contains_key(&id)
    }

    /// An event's look at `id/name` found `sig` (`None`: nothing there).
    pub(super) fn saw(&mut self, id: DirId, name: &OsStr, sig: Option<Sig>) {
        if let Some(s) = self.sigs.get_mut(&id) {
            s.set(name, sig);
        }
    }

    fn count(&mut self, sid: SpecId, n: u64) {
        if n > 0 {
            *self.missed.entry(sid).or_default() += n;
            self.touched.push(sid);
        }
    }

    /// Changes the OS did not report, found by `sid`'s rescans.
    pub(super) fn missed(&self, sid: SpecId) -> u64 {
        self.missed.get(&sid).copied().unwrap_or(0)
    }

    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }
}

/// Whether a change with ctime `ctime` was made before `began`.
fn before(ctime: (i64, i64), began: SystemTime) -> bool {
    let Ok(b) = began.duration_since(SystemTime::UNIX_EPOCH) else {
        return false;
    };
    (ctime.0, ctime.1) < (b.as_secs() as i64, i64::from(b.subsec_nanos()))
}

impl Engine {
    /// Starts the barrier of every spec whose rescan is due.
    pub(super) fn rescan_due(&mut self) {
        for sid in self.rescans.due(self.clock.now()) {
            let Some(name) = self.specs.get(sid).map(|s| s.name().to_owned()) else {
                continue;
            };
            let deadline = self.clock.now() + super::sync::INTERNAL_DEADLINE;
            self.start_barrier(name, deadline, None, Some(self.clock.wall()));
        }
    }

    /// The rescan of spec `sid`, its barrier (begun at `began`) passed.
    pub(super) fn rescan_spec(&mut self, sid: SpecId, began: SystemTime) {
        if !self.watches.holds_os_watches() {
            return; // a manager that polls everything: polling is this
        }
        let ids = self
            .index
            .ids_where(|id, n| n.covers(sid) && n.complete() && !self.polls.contains(id));
        trace::bind!(dirs = ids.len());
        let mut missed = 0;
        for id in ids {
            missed += self.rescan_dir(id, began);
        }
        self.rescans.count(sid, missed);
        trace::traced! {
            if missed > 0 {
                trace::event!(
                    WARN,
                    spec = self.specs.name_of(sid),
                    missed,
                    dirs,
                    "rescan found changes the OS did not report"
                );
            } else {
                trace::event!(
                    TRACE,
                    spec = self.specs.name_of(sid),
                    dirs,
                    "rescan found nothing missed"
                );
            }
        }
    }

    /// Reads directory `id` and `stat`s its entries; delivers what no
    /// event told of before `began`. Returns how many changes that is.
    fn rescan_dir(&mut self, id: DirId, began: SystemTime) -> u64 {
        let Some(node) = self.index.get(id) else {
            return 0;
        };
        let path = node.path().clone();
        let hash = self.wants_hash(id);
        let old = self.rescans.sigs.get(&id);
        let baseline = old.is_none();
        let Ok(mut look) = fs::look(&path, true, old, hash, self.clock.wall()) else {
            return 0; // gone or unreadable: its events and retries tell
        };
        self.syncs.cookies_found(look.take_cookies(&path));
        let Some(node) = self.index.get(id) else {
            return 0;
        };
        let old = self.rescans.sigs.get(&id);
        let mut picture = look.picture;
        let mut modified = look.modified;
        let mut missed = 0;
        let mut later = Vec::new();
        for (name, sig) in picture.entries() {
            let known = node.entries().get(name);
            let recent = !before(sig.ctime, began);
            let written = modified.iter().any(|(n, _)| n == name);
            if known != Some(sig.kind) {
                if known.is_none() && recent {
                    // Made since the barrier: its event may be on the way.
                    // Left for the next rescan, which counts it if not.
                    later.push((name.clone(), None));
                    continue;
                }
                // Created or retyped without an event.
                missed += 1;
            } else if written {
                if recent {
                    // As above: compared again at the next rescan.
                    later.push((name.clone(), old.and_then(|o| o.get(name)).copied()));
                    continue;
                }
                missed += 1;
            }
        }
        let mut listing = picture.listing();
        for (name, keep) in later {
            modified.retain(|(n, _)| *n != name);
            if keep.is_none() {
                listing.retain(|(n, _)| *n != name);
            }
            picture.revert(&name, keep);
        }
        // Removed without an event (when, no one can tell: counted).
        missed += node
            .entries()
            .iter()
            .filter(|(n, _)| {
                listing
                    .binary_search_by(|(l, _)| l.as_encoded_bytes().cmp(n.as_encoded_bytes()))
                    .is_err()
            })
            .count() as u64;
        if baseline {
            // The first look: nothing to compare contents with yet.
            modified.clear();
        }
        self.apply_listing(id, &listing, &modified);
        if self.index.get(id).is_some() {
            self.rescans.sigs.insert(id, picture);
        }
        missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescans_are_due_every_interval_per_spec() {
        let t0 = Instant::now();
        let mut r = Rescans::default();
        r.add(1, Duration::from_millis(100), t0);
        r.add(2, Duration::from_millis(300), t0);
        assert_eq!(r.next_deadline(), Some(t0 + Duration::from_millis(100)));
        assert!(r.due(t0 + Duration::from_millis(99)).is_empty());
        assert_eq!(r.due(t0 + Duration::from_millis(100)), vec![1]);
        assert_eq!(r.next_deadline(), Some(t0 + Duration::from_millis(200)));
        r.forget(1);
        assert_eq!(r.next_deadline(), Some(t0 + Duration::from_millis(300)));
    }

    #[test]
    fn events_keep_the_signatures_of_tracked_directories_only() {
        let mut r = Rescans::default();
        assert!(!r.tracks(1));
        r.sigs.insert(1, Picture::default());
        assert!(r.tracks(1) && !r.tracks(2));
        r.saw(1, OsStr::new("a"), Some(Sig::UNKNOWN));
        r.saw(2, OsStr::new("a"), Some(Sig::UNKNOWN));
        assert_eq!(r.sigs[&1].entries().len(), 1);
        assert!(!r.sigs.contains_key(&2));
        r.saw(1, OsStr::new("a"), None);
        assert!(r.sigs[&1].entries().is_empty());
    }

    #[test]
    fn only_changes_older_than_the_barrier_count_as_missed() {
        let began = SystemTime::UNIX_EPOCH + Duration::new(100, 500);
        assert!(before((100, 499), began));
        assert!(!before((100, 500), began));
        assert!(!before((101, 0), began));
        let mut r = Rescans::default();
        r.count(3, 0);
        assert!(r.take_touched().is_empty());
        r.count(3, 2);
        assert_eq!((r.missed(3), r.take_touched()), (2, vec![3]));
    }
}
