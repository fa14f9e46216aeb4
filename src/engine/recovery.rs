//! Recovery from what the OS lost or refused: retries with back-off for
//! directories that could not be watched or read, and rescans after lost
//! events. The only writer of the retry table, of the read times that bound
//! what an overflow may have hidden, and of the per-spec recovery counters.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::Engine;
use super::trace;
use crate::backend::Hint;
use crate::change::{ChangeKind, FileType};
use crate::clock::wall_before;
use crate::fs;
use crate::index::{DirId, EntryDiff, SpecId, diff};
use crate::reads;

/// First delay before a failed watch is tried again; it doubles per attempt.
pub(super) const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest delay between two attempts.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(30);
/// Directories an overflow's rescan reads ahead on worker threads at once.
const LOOK_CHUNK: usize = 1024;

/// Default of how far before the last complete read an overflow may have
/// hidden changes: file systems' timestamps are coarser than the wall clock.
pub(crate) const OVERFLOW_MARGIN: Duration = Duration::from_secs(2);

/// The delay before attempt `attempts + 1` (the first retry comes after
/// [`RETRY_FIRST`]).
pub(super) fn backoff(attempts: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1 << attempts.saturating_sub(1).min(16))
        .min(RETRY_MAX)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Retry {
    attempts: u32,
    at: Instant,
    /// When the first attempt failed: changes since then had no events.
    first: SystemTime,
}

#[derive(Debug)]
pub(super) struct Recovery {
    retries: BTreeMap<DirId, Retry>,
    /// Failed attempts per spec (this generation).
    attempts: HashMap<SpecId, u64>,
    /// Recovered overflows per spec (this generation).
    overflows: HashMap<SpecId, u64>,
    /// Specs whose counters moved since the last look.
    touched: Vec<SpecId>,
    /// When the read before the latest one started (native), or the event
    /// before the latest one was read (portable).
    prev_read: SystemTime,
    last_read: SystemTime,
    /// The latest read's start on the monotonic clock (or a moment after
    /// it), once there has been one.
    last_read_mono: Option<Instant>,
    margin: Duration,
}

impl Recovery {
    pub(super) fn new(margin: Option<Duration>, now: SystemTime) -> Recovery {
        Recovery {
            retries: BTreeMap::new(),
            attempts: HashMap::new(),
            overflows: HashMap::new(),
            touched: Vec::new(),
            prev_read: now,
            last_read: now,
            last_read_mono: None,
            margin: margin.unwrap_or(OVERFLOW_MARGIN),
        }
    }

    /// Directory `id` failed (again) at `now`; counts the attempt for
    /// `specs`. Returns when it is tried again.
    fn schedule(&mut self, id: DirId, specs: &[SpecId], now: Instant, wall: SystemTime) -> Instant {
        let (attempts, first) = self
            .retries
            .get(&id)
            .map_or((1, wall), |r| (r.attempts + 1, r.first));
        let at = now + backoff(attempts);
        self.retries.insert(
            id,
            Retry {
                attempts,
                at,
                first,
            },
        );
        for &s in specs {
            *self.attempts.entry(s).or_default() += 1;
            self.touched.push(s);
        }
        at
    }

    /// The directories whose back-off is over at `now`.
    fn due(&self, now: Instant) -> Vec<DirId> {
        self.retries
            .iter()
            .filter(|(_, r)| r.at <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether `id` waits for a retry.
    pub(super) fn retrying(&self, id: DirId) -> bool {
        self.retries.contains_key(&id)
    }

    /// The directories waiting for a retry.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn waiting(&self) -> impl Iterator<Item = DirId> + '_ {
        self.retries.keys().copied()
    }

    /// Directory `id` left the index: its retry goes with it (its id may
    /// soon name another directory).
    pub(super) fn forget_dir(&mut self, id: DirId) {
        self.cancel(id);
    }

    fn attempts_of(&self, id: DirId) -> Option<u32> {
        self.retries.get(&id).map(|r| r.attempts)
    }

    fn cancel(&mut self, id: DirId) {
        self.retries.remove(&id);
    }

    /// Every waiting directory is due at `now` at the latest.
    fn all_now(&mut self, now: Instant) {
        for r in self.retries.values_mut() {
            r.at = r.at.min(now);
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.retries.values().map(|r| r.at).min()
    }

    /// A read of OS events started at `at`.
    pub(super) fn note_read(&mut self, at: SystemTime, mono: Instant) {
        self.prev_read = self.last_read;
        self.last_read = at;
        self.last_read_mono = Some(mono);
    }

    /// When the read before the latest one started: an overflow marker in
    /// the latest read hides events queued after that.
    pub(super) fn prev_read(&self) -> SystemTime {
        self.prev_read
    }

    /// When the latest read started.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn last_read(&self) -> SystemTime {
        self.last_read
    }

    /// The earliest moment a change hidden by lost events can have
    /// happened, when events after `complete_read` may be missing.
    pub(super) fn since(&self, complete_read: SystemTime) -> SystemTime {
        wall_before(complete_read, self.margin)
    }

    /// [`since`](Self::since) the latest read.
    pub(super) fn overflow_since(&self) -> SystemTime {
        self.since(self.last_read)
    }

    /// An overflow was recovered for `specs`.
    fn count_overflow(&mut self, specs: &[SpecId]) {
        for &s in specs {
            *self.overflows.entry(s).or_default() += 1;
            self.touched.push(s);
        }
    }

    pub(super) fn attempts(&self, sid: SpecId) -> u64 {
        self.attempts.get(&sid).copied().unwrap_or(0)
    }

    pub(super) fn overflows(&self, sid: SpecId) -> u64 {
        self.overflows.get(&sid).copied().unwrap_or(0)
    }

    pub(super) fn forget(&mut self, sid: SpecId) {
        self.attempts.remove(&sid);
        self.overflows.remove(&sid);
    }

    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }
}

impl Engine {
    /// Directory `id` could not be watched or read for a possibly transient
    /// reason: try again after a backoff that doubles per attempt.
    pub(super) fn schedule_retry(&mut self, id: DirId, specs: &[SpecId]) {
        let live: Vec<SpecId> = specs
            .iter()
            .copied()
            .filter(|s| self.specs.contains(*s))
            .collect();
        self.recovery
            .schedule(id, &live, self.clock.now(), self.clock.wall());
        trace::traced! {
            if let Some(r) = self.recovery.retries.get(&id) {
                trace::event!(
                    DEBUG,
                    path = %self.dir_path(id),
                    specs = %self.specs.names_of(&live),
                    attempt = r.attempts,
                    after = ?r.at.saturating_duration_since(self.clock.now()),
                    "directory to be tried again"
                );
            }
        }
    }

    /// Tries failed watches and reads again whose backoff is over; a
    /// directory that gets its watch is re-read (and files changed
    /// meanwhile, by ctime, reported), since no events came while it had
    /// none; one that could not be read is read and its contents reported.
    pub(super) fn retry_due(&mut self) {
        for id in self.recovery.due(self.clock.now()) {
            let Some(node) = self.index.get(id) else {
                self.recovery.cancel(id);
                continue;
            };
            let Some(&Retry {
                attempts, first, ..
            }) = self.recovery.retries.get(&id)
            else {
                continue;
            };
            let follow = node.full().is_empty();
            let unread = !node.full().is_empty() && !node.complete();
            let mut specs = node.full().to_vec();
            specs.extend(node.partial().iter().map(|p| p.spec));
            // Refused a watch: polling covers its changes now (at the watch
            // limit), but a poll compares with what was read, so one never
            // read is read below, as a watch would have had it.
            if self.needs_watch(id)
                && !self.watch_node(id, follow, &specs)
                && !(self.polls.contains(id) && unread)
            {
                if self.polls.contains(id) {
                    self.recovery.cancel(id); // polling covers it now
                } else if self.recovery.attempts_of(id) == Some(attempts) {
                    // Refused as gone: keep backing off until the node goes.
                    self.schedule_retry(id, &specs);
                }
                continue;
            }
            // Changes since the first failure had no events.
            let since = self.recovery.since(first);
            match self.index.get(id) {
                Some(n) if n.complete() => self.rescan_node(id, Some(since)),
                Some(n) if !n.full().is_empty() => {
                    let path = n.path().to_path_buf();
                    let full = n.full().to_vec();
                    self.add_full(full, path, true);
                }
                _ => {}
            }
            // A failed read rescheduled it with one more attempt.
            if self.recovery.attempts_of(id) == Some(attempts) {
                self.recovery.cancel(id);
                trace::event!(
                    INFO,
                    path = %self.dir_path(id),
                    attempts,
                    "directory watched and read again"
                );
            }
        }
    }

    /// Something happened to a directory waiting for a retry (a chmod, say):
    /// try every waiting directory again now rather than after its backoff
    /// (on a path backend the watch that failed may be an ancestor's).
    pub(super) fn retry_all_now(&mut self) {
        self.recovery.all_now(self.clock.now());
    }

    /// The OS dropped events: re-read everything, diff, and report files
    /// changed since `complete_read` (minus the margin) as modified.
    pub(super) fn overflow(&mut self, complete_read: SystemTime) {
        let since = self.recovery.since(complete_read);
        self.recovery.count_overflow(&self.specs.ids());
        self.specs.end_guards();
        trace::event!(
            WARN,
            specs = %self.specs.names_of(&self.specs.ids()),
            dirs = self.index.len(),
            "OS events lost (queue overflow): rescanning every directory"
        );
        trace::bind!(found_before = self.specs.recorded());
        // What was lost was lost before the read that brought the marker
        // began: a directory first read after that shows it all (notify's
        // own walk overflows the queue while the engine's first reads are
        // still to come, so a start-up need not read the tree twice).
        // On the monotonic clock: the wall clock may have been stepped.
        // Not while a barrier waits: its cookie may be found by this
        // rescan's reads, and the events of a skipped directory, queued
        // before the cookie, may not have been read yet.
        let lost_by = self
            .recovery
            .last_read_mono
            .filter(|_| !self.syncs.waiting());
        let ids: Vec<DirId> = self
            .index
            .ids()
            .into_iter()
            .filter(|id| !lost_by.is_some_and(|t| self.index.first_read_after(*id, t)))
            .collect();
        // The reads and stats (a whole tree's) on worker threads, a chunk
        // at a time; the index is changed here alone, in order.
        let threads = reads::threads();
        for chunk in ids.chunks(LOOK_CHUNK) {
            let dirs: Vec<(DirId, Arc<Path>)> = chunk
                .iter()
                .filter_map(|&id| {
                    let n = self.index.get(id)?;
                    n.complete().then(|| (id, n.path().clone()))
                })
                .collect();
            let paths: Vec<Arc<Path>> = dirs.iter().map(|(_, p)| p.clone()).collect();
            let mut looks: HashMap<DirId, (Arc<Path>, reads::Look)> = dirs
                .into_iter()
                .zip(reads::look_all(&paths, Some(since), threads))
                .map(|((id, p), l)| (id, (p, l)))
                .collect();
            for &id in chunk {
                // Looked at as this node, unless an earlier directory's
                // diff freed it and its slot (even its path: a directory
                // replaced) went to another, read after the look began.
                let look = looks
                    .remove(&id)
                    .filter(|(p, _)| self.index.get(id).is_some_and(|n| Arc::ptr_eq(n.path(), p)))
                    .map(|(_, l)| l);
                self.rescan_node_with(id, Some(since), look);
            }
        }
        trace::event!(
            INFO,
            specs = %self.specs.names_of(&self.specs.ids()),
            changes = self.specs.recorded() - found_before,
            "overflow recovered: rescan done"
        );
    }

    /// Rescans every indexed directory at or below `root` (or `root`'s
    /// entry in its parent when it is not a directory).
    pub(super) fn rescan_under(&mut self, root: &Path, since: Option<SystemTime>) {
        if let Some(parent) = root.parent()
            && let (Some(pid), Some(name)) = (self.index.lookup(parent), root.file_name())
        {
            self.handle_name(pid, name, Hint::Rescan);
            if let Some(since) = since {
                self.report_if_changed(pid, name, since);
            }
        }
        let ids = self.index.ids_where(|_, n| n.path().starts_with(root));
        for id in ids {
            self.rescan_node(id, since);
        }
    }

    fn report_if_changed(&mut self, id: DirId, name: &OsStr, since: SystemTime) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        if let Some(t) = node.entries().get(name)
            && t != FileType::Dir
            && fs::changed_since(&node.path().join(name), since)
        {
            self.route(id, name, ChangeKind::Modified, t, false);
        }
    }

    /// Re-reads one directory and applies the diff. With `since`, entries
    /// present before and after whose inode changed since then are reported
    /// modified.
    pub(super) fn rescan_node(&mut self, id: DirId, since: Option<SystemTime>) {
        self.rescan_node_with(id, since, None);
    }

    /// [`rescan_node`](Self::rescan_node), with what a worker already read
    /// of the directory and found changed since `since` (`look`).
    fn rescan_node_with(
        &mut self,
        id: DirId,
        since: Option<SystemTime>,
        look: Option<reads::Look>,
    ) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        // What this re-read reports, a `rescan_every` must not report again:
        // its next look at this directory starts afresh.
        self.rescans.forget_dir(id);
        let path = node.path().clone();
        if !node.complete() {
            let names: Vec<OsString> = node.partial().iter().map(|p| p.name.clone()).collect();
            for n in names {
                self.handle_name(id, &n, Hint::Rescan);
                if let Some(since) = since {
                    self.report_if_changed(id, &n, since);
                }
            }
            return;
        }
        let (listing, on_disk) = match look {
            Some(l) => {
                self.syncs.cookies_found(l.cookies);
                (l.listing, Some(l.changed))
            }
            None => (self.list_dir(&path), None),
        };
        let Some(diffs) = self.diff_read(id, listing) else {
            return;
        };
        // Modified: entries there before and after the diff (not created,
        // removed or retyped by it) whose inode changed since `since`.
        let touched: BTreeSet<OsString> = match since {
            Some(_) => diffs.iter().map(|d| d.name().to_os_string()).collect(),
            None => BTreeSet::new(),
        };
        // Without a worker's look, the files to `stat` here.
        let to_stat: Vec<OsString> = match (since, &on_disk) {
            (Some(_), None) => {
                let node = self.index.get(id).expect("live node");
                node.entries()
                    .iter()
                    .filter(|(n, t)| *t != FileType::Dir && !touched.contains(*n))
                    .map(|(n, _)| n.to_os_string())
                    .collect()
            }
            _ => Vec::new(),
        };
        self.apply_diffs(id, diffs);
        if let Some(since) = since {
            let hits = match on_disk {
                // The worker stat'ed the files of the fresh listing: those
                // the diff did not touch were there before, alike.
                Some(found) => found.into_iter().filter(|n| !touched.contains(n)).collect(),
                None => fs::changed_among(&path, to_stat.iter().map(OsString::as_os_str), since),
            };
            for n in hits {
                let t = self.index.get(id).and_then(|x| x.entries().get(&n));
                if let Some(t) = t.filter(|t| *t != FileType::Dir) {
                    self.route(id, &n, ChangeKind::Modified, t, false);
                }
            }
        }
        self.revalidate_links_in(id);
    }

    /// Diffs what a read of directory `id` found against the index; `None`
    /// when it could not be read (gone: dropped if nothing above tracks it).
    fn diff_read(
        &mut self,
        id: DirId,
        read: std::io::Result<Vec<(OsString, FileType)>>,
    ) -> Option<Vec<EntryDiff>> {
        match read {
            Ok(list) => {
                // Newer than any look of the scanner's under way.
                self.polls.outdate(id);
                Some(diff(self.index.get(id)?.entries(), list))
            }
            Err(e) if fs::gone(&e) => {
                self.check_top(id, false);
                None
            }
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn backoff_doubles_from_50ms_to_at_most_30s() {
        let got: Vec<Duration> = (1..=12).map(backoff).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            got,
            vec![
                ms(50),
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(6400),
                ms(12800),
                ms(25600),
                ms(30000),
                ms(30000)
            ]
        );
        assert_eq!(backoff(u32::MAX), RETRY_MAX, "no overflow");
    }

    #[test]
    fn retries_back_off_per_directory_and_count_per_spec() {
        let t0 = Instant::now();
        let w0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let mut r = Recovery::new(None, w0);
        assert_eq!(r.schedule(1, &[7], t0, w0), t0 + 50 * MS);
        assert_eq!(r.schedule(2, &[7, 8], t0, w0), t0 + 50 * MS);
        let later = w0 + Duration::from_secs(1);
        assert_eq!(
            r.schedule(1, &[7], t0 + 50 * MS, later),
            t0 + 150 * MS,
            "second attempt: 100 ms after it"
        );
        assert_eq!(r.retries[&1].first, w0, "the first failure is kept");
        assert_eq!((r.attempts(7), r.attempts(8), r.attempts(9)), (3, 1, 0));
        assert_eq!(r.next_deadline(), Some(t0 + 50 * MS));
        assert_eq!(r.due(t0 + 49 * MS), Vec::<DirId>::new());
        assert_eq!(r.due(t0 + 50 * MS), vec![2]);
        assert_eq!(r.due(t0 + 150 * MS), vec![1, 2]);
        r.all_now(t0 + 10 * MS);
        assert_eq!(r.due(t0 + 10 * MS), vec![1, 2], "an event makes them due");
        r.cancel(2);
        assert!(!r.retrying(2) && r.retrying(1));
        let mut touched = r.take_touched();
        touched.sort();
        touched.dedup();
        assert_eq!(touched, vec![7, 8]);
        r.forget(7);
        assert_eq!(r.attempts(7), 0);
    }

    #[test]
    fn overflow_margin_reaches_back_from_the_last_complete_read() {
        let w0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let mut r = Recovery::new(Some(Duration::from_millis(100)), w0);
        let (a, b) = (w0 + Duration::from_secs(1), w0 + Duration::from_secs(2));
        r.note_read(a, Instant::now());
        r.note_read(b, Instant::now());
        assert_eq!(r.prev_read, a, "what an overflow marker in read b bounds");
        assert_eq!(r.last_read(), b);
        assert_eq!(r.since(a), a - Duration::from_millis(100));
        assert_eq!(r.overflow_since(), b - Duration::from_millis(100));
        let r = Recovery::new(None, SystemTime::UNIX_EPOCH);
        assert_eq!(
            r.overflow_since(),
            SystemTime::UNIX_EPOCH,
            "never before the epoch"
        );
    }

    #[test]
    fn overflows_count_per_spec() {
        let mut r = Recovery::new(None, SystemTime::UNIX_EPOCH);
        r.count_overflow(&[1, 2]);
        r.count_overflow(&[2]);
        assert_eq!((r.overflows(1), r.overflows(2), r.overflows(3)), (1, 2, 0));
    }
}
