//! The safety net of [`WatchOptions::rescan_every`](crate::WatchOptions::rescan_every):
//! the only writer of when each spec's next rescan is due, of the
//! pictures a rescan compares with, of the scanner's rescan looks under
//! way (tokens, and the names the engine looked at meanwhile), and of the
//! count of changes the OS did not report (`missed_by_os`). The steps
//! that rescan are `rescanning.rs`'s.
//!
//! A rescan first runs a sync barrier (cookies), so that every event the
//! OS queued before it has been handled; then the scanner reads every
//! directory of the spec that holds an OS watch and `stat`s its entries
//! (one look per directory at a time: another asked for meanwhile
//! follows it, compared with the picture the first one left). Events keep
//! the signatures current (`handle_name` stores what its `lstat` saw), so
//! a difference left at the rescan is one no event told of: it is
//! delivered as a change, and counted as missed when it is older than the
//! barrier. A change made since the barrier began may have its event on
//! the way: it is left for the next rescan, which delivers and counts it
//! if no event did.
//!
//! The directory has an OS watch, so its events go on while the scanner
//! looks: every name the engine looks at or changes meanwhile is noted
//! ([`touched`](Rescans::touched)), and for those the engine's own view
//! (the index's entry, the signature the event kept) stands over the
//! look's, which may be older. The rest of the look is applied: nothing
//! an event handled is reported again or undone, and a busy directory is
//! still rescanned (a look is never made again for an event).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::fs::{Picture, Sig};
use crate::index::{DirId, SpecId};

#[derive(Debug, Default)]
pub(super) struct Rescans {
    every: HashMap<SpecId, Duration>,
    next: HashMap<SpecId, Instant>,
    /// Pictures of the directories some rescanning spec covers, from the
    /// last rescan and the events since (shared with the look under way,
    /// which compares with it; an event meanwhile copies it).
    pictures: HashMap<DirId, Arc<Picture>>,
    /// The file systems the last rescan of each directory touched (see
    /// `fs::Look::fs_key`): the scanner's lane for the next.
    fs_keys: HashMap<DirId, u64>,
    /// The scanner's rescan looks, per directory.
    looks: HashMap<DirId, Looks>,
    /// The last token handed to a look (tokens are never reused).
    tokens: u64,
    missed: HashMap<SpecId, u64>,
    /// Directories looked at and changes found by each spec's rescans
    /// since its last one ended (for its trace).
    round: HashMap<SpecId, (usize, u64)>,
    touched: Vec<SpecId>,
}

/// A rescan look the scanner is making of a directory.
#[derive(Debug)]
pub(super) struct Flight {
    pub(super) token: u64,
    /// The spec whose rescan asked for it, and when its barrier began.
    pub(super) sid: SpecId,
    pub(super) began: SystemTime,
    /// Names the engine looked at or changed since it was handed over:
    /// the look may be older than that, so for these the engine's view
    /// stands.
    pub(super) touched: BTreeSet<OsString>,
}

/// A directory's rescan looks: the one under way, and those asked for
/// meanwhile (token, spec, when its barrier began; one per spec), handed
/// over one at a time, each once the one before is done with.
#[derive(Debug, Default)]
struct Looks {
    current: Option<Flight>,
    queued: VecDeque<(u64, SpecId, SystemTime)>,
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
        self.round.remove(&sid);
        // Its looks asked for and not handed over yet go; one under way
        // is let go of when it comes.
        self.looks.retain(|_, l| {
            l.queued.retain(|(_, s, _)| *s != sid);
            l.current.is_some() || !l.queued.is_empty()
        });
    }

    /// Directory `id` left the index, or the engine read it whole itself
    /// (newer than any look under way, which is not applied): its picture
    /// and its looks go.
    pub(super) fn forget_dir(&mut self, id: DirId) {
        self.pictures.remove(&id);
        self.fs_keys.remove(&id);
        self.looks.remove(&id);
    }

    /// A rescan look at `id` for spec `sid`, whose barrier began at
    /// `began`: its token, and whether to hand it over now (`false`: a
    /// look is under way, this one follows it; a look of `sid`'s already
    /// waiting stands for it, with the later `began`). Its picture
    /// exists from now on (empty for a first look), so that events keep
    /// it.
    pub(super) fn issue(&mut self, id: DirId, sid: SpecId, began: SystemTime) -> (u64, bool) {
        let l = self.looks.entry(id).or_default();
        if l.current.is_some() || !l.queued.is_empty() {
            if let Some(q) = l.queued.iter_mut().find(|q| q.1 == sid) {
                q.2 = q.2.max(began);
                return (q.0, false);
            }
            self.tokens += 1;
            l.queued.push_back((self.tokens, sid, began));
            return (self.tokens, false);
        }
        self.tokens += 1;
        l.current = Some(Flight {
            token: self.tokens,
            sid,
            began,
            touched: BTreeSet::new(),
        });
        self.pictures.entry(id).or_default();
        (self.tokens, true)
    }

    /// The engine looked at (or changed) entry `name` of `id`: a rescan
    /// look under way may be older than that.
    pub(super) fn touched(&mut self, id: DirId, name: &OsStr) {
        if !self.looks.is_empty()
            && let Some(f) = self.looks.get_mut(&id).and_then(|l| l.current.as_mut())
        {
            f.touched.insert(name.to_os_string());
        }
    }

    /// The scanner's rescan look `token` at `id` came back: the look to
    /// apply (`None`: not the one under way, or let go of). The one asked
    /// for meanwhile is the caller's to [`follow_up`](Self::follow_up)
    /// once this one is applied.
    pub(super) fn take_finding(&mut self, id: DirId, token: u64) -> Option<Flight> {
        let l = self.looks.get_mut(&id)?;
        if l.current.as_ref().is_none_or(|f| f.token != token) {
            return None;
        }
        let f = l.current.take();
        if l.queued.is_empty() {
            self.looks.remove(&id);
        }
        f
    }

    /// After a rescan look at `id` was applied (or dropped): the look asked
    /// for meanwhile, now under way, if there is one (its token).
    pub(super) fn follow_up(&mut self, id: DirId) -> Option<u64> {
        let l = self.looks.get_mut(&id)?;
        if l.current.is_some() {
            return None;
        }
        let (token, sid, began) = l.queued.pop_front()?;
        l.current = Some(Flight {
            token,
            sid,
            began,
            touched: BTreeSet::new(),
        });
        self.pictures.entry(id).or_default();
        Some(token)
    }

    /// Whether rescan look `token` at `id` is done with (applied, let go
    /// of, or `id` forgotten): what a rescan's barrier waits for. The
    /// looks of a directory are done in the order asked for.
    pub(super) fn done(&self, id: DirId, token: u64) -> bool {
        self.looks.get(&id).is_none_or(|l| {
            let first = l.current.as_ref().map(|f| f.token);
            first
                .or_else(|| l.queued.front().map(|q| q.0))
                .is_none_or(|t| token < t)
        })
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
            Arc::make_mut(s).set(name, sig);
        }
    }

    /// A rescan of `sid` looked at a directory and found `n` changes the
    /// OS did not report.
    pub(super) fn count(&mut self, sid: SpecId, n: u64) {
        let r = self.round.entry(sid).or_default();
        r.0 += 1;
        r.1 += n;
        if n > 0 {
            *self.missed.entry(sid).or_default() += n;
            self.touched.push(sid);
        }
    }

    /// The directories looked at and the changes found by `sid`'s rescans
    /// since the last call (a rescan ended).
    pub(super) fn take_round(&mut self, sid: SpecId) -> (usize, u64) {
        self.round.remove(&sid).unwrap_or_default()
    }

    /// The picture of rescanned directory `id`: the last rescan's, kept
    /// current by events (`None`: not rescanned yet).
    pub(super) fn picture(&self, id: DirId) -> Option<&Picture> {
        self.pictures.get(&id).map(|p| &**p)
    }

    /// The file systems the last rescan of `id` touched (`None`: not
    /// known).
    pub(super) fn fs_key(&self, id: DirId) -> Option<u64> {
        self.fs_keys.get(&id).copied()
    }

    /// A rescan's look at `id` touched the file systems of `key`.
    pub(super) fn seen_on(&mut self, id: DirId, key: Option<u64>) {
        if let Some(k) = key
            && self.pictures.contains_key(&id)
        {
            self.fs_keys.insert(id, k);
        }
    }

    /// [`picture`](Self::picture), shared (for the scanner's look).
    pub(super) fn shared_picture(&self, id: DirId) -> Arc<Picture> {
        self.pictures.get(&id).cloned().unwrap_or_default()
    }

    /// The picture of `id` after a rescan (one equal to the picture it
    /// has is dropped, as the poll set's are).
    pub(super) fn set_picture(&mut self, id: DirId, picture: Picture) {
        if self.pictures.get(&id).is_none_or(|p| **p != picture) {
            self.pictures.insert(id, Arc::new(picture));
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
        r.pictures.insert(1, Arc::default());
        assert!(r.tracks(1) && !r.tracks(2));
        r.saw(1, OsStr::new("a"), Some(Sig::UNKNOWN));
        r.saw(2, OsStr::new("a"), Some(Sig::UNKNOWN));
        assert_eq!(r.pictures[&1].iter().count(), 1);
        assert!(!r.pictures.contains_key(&2));
        r.saw(1, OsStr::new("a"), None);
        assert!(r.pictures[&1].iter().next().is_none());
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
