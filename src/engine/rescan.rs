//! The safety net of [`WatchOptions::rescan_every`](crate::WatchOptions::rescan_every):
//! the only writer of when each spec's next rescan is due, of the
//! pictures a rescan compares with, and of the count of changes the OS did
//! not report (`missed_by_os`). The steps that rescan are
//! `rescanning.rs`'s.
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

use crate::fs::{Picture, Sig};
use crate::index::{DirId, SpecId};

#[derive(Debug, Default)]
pub(super) struct Rescans {
    every: HashMap<SpecId, Duration>,
    next: HashMap<SpecId, Instant>,
    /// Pictures of the directories some rescanning spec covers, from the
    /// last rescan and the events since.
    pictures: HashMap<DirId, Picture>,
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
        self.pictures.remove(&id);
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.next.values().min().copied()
    }

    /// Specs whose rescan is due at `now` (rescheduled an interval on).
    pub(super) fn due(&mut self, now: Instant) -> Vec<SpecId> {
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
        !self.pictures.is_empty() && self.pictures.contains_key(&id)
    }

    /// An event's look at `id/name` found `sig` (`None`: nothing there).
    pub(super) fn saw(&mut self, id: DirId, name: &OsStr, sig: Option<Sig>) {
        if let Some(s) = self.pictures.get_mut(&id) {
            s.set(name, sig);
        }
    }

    pub(super) fn count(&mut self, sid: SpecId, n: u64) {
        if n > 0 {
            *self.missed.entry(sid).or_default() += n;
            self.touched.push(sid);
        }
    }

    /// The picture of rescanned directory `id`: the last rescan's, kept
    /// current by events (`None`: not rescanned yet).
    pub(super) fn picture(&self, id: DirId) -> Option<&Picture> {
        self.pictures.get(&id)
    }

    /// The picture of `id` after a rescan.
    pub(super) fn set_picture(&mut self, id: DirId, picture: Picture) {
        self.pictures.insert(id, picture);
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
pub(super) fn before(ctime: (i64, i64), began: SystemTime) -> bool {
    let Ok(b) = began.duration_since(SystemTime::UNIX_EPOCH) else {
        return false;
    };
    (ctime.0, ctime.1) < (b.as_secs() as i64, i64::from(b.subsec_nanos()))
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
        r.pictures.insert(1, Picture::default());
        assert!(r.tracks(1) && !r.tracks(2));
        r.saw(1, OsStr::new("a"), Some(Sig::UNKNOWN));
        r.saw(2, OsStr::new("a"), Some(Sig::UNKNOWN));
        assert_eq!(r.pictures[&1].entries().len(), 1);
        assert!(!r.pictures.contains_key(&2));
        r.saw(1, OsStr::new("a"), None);
        assert!(r.pictures[&1].entries().is_empty());
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
