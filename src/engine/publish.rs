//! Publishing: the only writer of every [`WatchStatus`], of batches'
//! sequence numbers, and of what subscribers receive.
//!
//! A status is derived, never kept up to date by hand: at the end of each
//! pass the specs whose facts changed (each owner notes which specs it
//! touched) get their status built afresh from the owners, and it is
//! published only if something a reader sees differs from the last one.
//! The cost is proportional to what changed, not to the number of specs.
//! The step that gathers the facts from the owners is `publishing.rs`'s.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crossbeam_channel::Receiver;
use parking_lot::{Condvar, Mutex};

use super::trace;
use crate::batch::change::{Change, ChangeBatch};
use crate::batch::event::Event;
use crate::batch::fanout::Subscriber;
use crate::batch::journal::{ChangesSince, Journal};
use crate::ids::Generation;
use crate::ids::Seq;
use crate::index::SpecId;
use crate::spec::defaults::DEFAULT_JOURNAL_PATHS;
use crate::state::restore::Restore;
use crate::status::{Phase, RECENT_BATCHES, RootStatus, WatchStatus};

/// What the engine publishes for the manager to read: written by the
/// engine alone.
pub(crate) struct Shared {
    statuses: Mutex<HashMap<String, Arc<WatchStatus>>>,
    /// Notified whenever statuses change or the engine stops.
    changed: Condvar,
    /// Set when the engine stopped for good, with the reason.
    dead: Mutex<Option<String>>,
    /// The changes-since journal of each spec's current generation.
    journals: Mutex<HashMap<String, Journal>>,
    /// The newest seq issued.
    newest: AtomicU64,
}

impl Shared {
    pub(crate) fn new() -> Shared {
        Shared {
            statuses: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
            dead: Mutex::new(None),
            journals: Mutex::new(HashMap::new()),
            newest: AtomicU64::new(0),
        }
    }

    /// Why the engine stopped for good, if it did.
    pub(crate) fn dead(&self) -> Option<String> {
        self.dead.lock().clone()
    }

    /// The latest status published for spec `name`.
    pub(crate) fn status(&self, name: &str) -> Option<Arc<WatchStatus>> {
        self.statuses.lock().get(name).cloned()
    }

    /// Every published status, in no order.
    pub(crate) fn statuses(&self) -> Vec<Arc<WatchStatus>> {
        self.statuses.lock().values().cloned().collect()
    }

    /// Calls `look` with the published statuses now and after each change
    /// (or the engine's end) until it answers, or `deadline` passes
    /// (`None`). `look` runs with the statuses locked: a change published
    /// between two looks is never missed.
    pub(crate) fn wait_for<T>(
        &self,
        deadline: std::time::Instant,
        mut look: impl FnMut(&HashMap<String, Arc<WatchStatus>>) -> Option<T>,
    ) -> Option<T> {
        let mut statuses = self.statuses.lock();
        loop {
            if let Some(answer) = look(&statuses) {
                return Some(answer);
            }
            if self.changed.wait_until(&mut statuses, deadline).timed_out() {
                return None;
            }
        }
    }

    /// The newest seq issued, in spec `name`'s instance: every batch of
    /// the spec up to it is published (`None`: no such spec).
    pub(crate) fn newest_seq(&self, name: &str) -> Option<Seq> {
        let newest = self.newest.load(Ordering::Acquire);
        let instance = self.journals.lock().get(name).map(Journal::instance)?;
        Some(Seq::new(instance, newest))
    }

    /// The net changes of spec `name` after `seq` (`None`: no such spec).
    pub(crate) fn changes_since(&self, name: &str, seq: Seq) -> Option<ChangesSince> {
        let newest = self.newest.load(Ordering::Acquire);
        self.journals.lock().get(name).map(|j| j.since(seq, newest))
    }
}

/// What only the status reports about a spec generation.
#[derive(Debug)]
struct SpecOut {
    monitor_start: SystemTime,
    last_event: Option<SystemTime>,
    recent: VecDeque<Arc<ChangeBatch>>,
    /// Changes its holds kept from subscribers (`DuringHolds::Drop`).
    dropped: u64,
    published: Option<Arc<WatchStatus>>,
}

pub(super) struct Publisher {
    shared: Arc<Shared>,
    subscribers: Vec<Subscriber>,
    /// New subscribers handed over by the manager.
    joining: Receiver<Subscriber>,
    /// Whether some subscriber has a backlog.
    behind: bool,
    next_seq: u64,
    /// The manager's instance (see [`Seq`]): random, drawn at start.
    instance: u64,
    specs: HashMap<SpecId, SpecOut>,
    touched: Vec<SpecId>,
    /// The backend failed for good: every spec is `Failed` with this (and
    /// when).
    failed: Option<(String, SystemTime)>,
    /// Distinct paths each spec's journal holds.
    journal_paths: usize,
}

/// The facts of one spec's status that other owners hold.
pub(super) struct Facts {
    pub name: String,
    pub generation: Generation,
    pub watched_dirs: usize,
    pub polled_dirs: usize,
    pub roots: Vec<RootStatus>,
    /// `Some` while the first walk is under way (phase `Starting`).
    pub progress: Option<crate::status::Progress>,
    /// What its files held at start is being read (phase `Starting`).
    pub hashing_start: bool,
    pub watch_retries: u64,
    pub overflow_recoveries: u64,
    pub missed_by_os: u64,
    pub last_error: Option<(String, SystemTime)>,
    /// `None`: watching in full; else why not.
    pub degraded: Option<String>,
    /// The version-control lock holding its batches, if one does.
    pub vcs_lock: Option<crate::status::VcsLock>,
    /// Every hold on its batches.
    pub holds: Vec<crate::status::HoldStatus>,
}

impl Publisher {
    pub(super) fn new(shared: Arc<Shared>, joining: Receiver<Subscriber>) -> Publisher {
        Publisher {
            shared,
            subscribers: Vec::new(),
            joining,
            behind: false,
            next_seq: 1,
            instance: 0,
            specs: HashMap::new(),
            touched: Vec::new(),
            failed: None,
            journal_paths: DEFAULT_JOURNAL_PATHS,
        }
    }

    /// Numbers batches from `first` on, as seqs of `instance`, and keeps
    /// `paths` distinct paths in each journal.
    pub(super) fn configure(&mut self, first: u64, instance: u64, paths: Option<usize>) {
        self.next_seq = first.max(1);
        self.instance = instance;
        self.shared
            .newest
            .store(self.next_seq - 1, Ordering::Release);
        if let Some(p) = paths {
            self.journal_paths = p.max(1);
        }
    }

    /// Spec generation `sid` (`name`, `generation`) starts being watched
    /// at `wall`; its journal starts empty, after the newest seq, or, for
    /// a spec restored from a snapshot, after the snapshot's seq
    /// (`restored`), in its lineage: a seq kept with the snapshot is then
    /// answered from the restore on.
    pub(super) fn started(
        &mut self,
        sid: SpecId,
        name: &str,
        generation: Generation,
        wall: SystemTime,
        restored: Option<Seq>,
    ) {
        let (instance, start) = match restored {
            Some(seq) => {
                // Numbers go on increasing past the lineage's.
                self.next_seq = self.next_seq.max(seq.number().saturating_add(1));
                (seq.instance(), seq.number())
            }
            None => (self.instance, self.next_seq - 1),
        };
        self.shared.journals.lock().insert(
            name.to_owned(),
            Journal::new(
                generation,
                (instance, self.instance),
                start,
                self.journal_paths,
            ),
        );
        self.specs.insert(
            sid,
            SpecOut {
                monitor_start: wall,
                last_event: None,
                recent: VecDeque::new(),
                dropped: 0,
                published: None,
            },
        );
        self.touched.push(sid);
        trace::event!(
            INFO,
            spec = name,
            generation = generation.0,
            "watching started"
        );
    }

    /// A root of `sid` is watched again after it vanished.
    pub(super) fn restarted(&mut self, sid: SpecId, wall: SystemTime) {
        if let Some(s) = self.specs.get_mut(&sid) {
            s.monitor_start = wall;
            self.touched.push(sid);
        }
    }

    /// The newest seq number issued: every batch up to it is published.
    pub(super) fn newest(&self) -> u64 {
        self.next_seq - 1
    }

    /// The instance of spec `name`'s seqs: its journal's (a restored
    /// lineage), else the manager's.
    pub(super) fn instance_of(&self, name: &str) -> u64 {
        self.shared
            .journals
            .lock()
            .get(name)
            .map_or(self.instance, Journal::instance)
    }

    /// Publishes a batch of `sid` closed at `wall`, with a spec's first
    /// batch's mark if it is one (see [`ChangeBatch::restore`]).
    pub(super) fn batch(
        &mut self,
        sid: SpecId,
        name: &str,
        generation: Generation,
        changes: Vec<Change>,
        wall: SystemTime,
        restore: Option<Restore>,
    ) {
        let (number, instance) = self.journal(name, generation, &changes);
        // Sorted already (the coalescer's order): `new` checks it in one pass.
        let mut batch =
            ChangeBatch::new(name, generation, Seq::new(instance, number), wall, changes);
        batch.restore = restore;
        let batch = Arc::new(batch);
        trace::event!(
            DEBUG,
            spec = name,
            generation = generation.0,
            seq = %batch.seq,
            changes = batch.changes.len(),
            paths = %trace::FirstPaths(&batch.changes),
            "batch published"
        );
        if let Some(s) = self.specs.get_mut(&sid) {
            if s.recent.len() == RECENT_BATCHES {
                s.recent.pop_front();
            }
            s.recent.push_back(batch.clone());
            s.last_event = Some(wall);
            self.touched.push(sid);
        }
        self.send(Event::Changes(batch));
    }

    /// Numbers a batch of spec `name` (`generation`) made of `changes`,
    /// and journals them: its seq's number, and the instance it is of.
    fn journal(&mut self, name: &str, generation: Generation, changes: &[Change]) -> (u64, u64) {
        let number = self.next_seq;
        self.next_seq += 1;
        let mut journals = self.shared.journals.lock();
        let journal = journals
            .get_mut(name)
            .filter(|j| j.generation() == generation);
        let instance = journal.as_ref().map_or(self.instance, |j| j.instance());
        if let Some(j) = journal {
            j.record(number, changes);
        }
        drop(journals);
        self.shared.newest.store(number, Ordering::Release);
        (number, instance)
    }

    /// A batch of `sid` that its holds keep from every subscriber
    /// (`DuringHolds::Drop`): numbered and journaled as any batch
    /// (`changes_since` describes the disk), sent to no one, and counted.
    pub(super) fn dropped(
        &mut self,
        sid: SpecId,
        name: &str,
        generation: Generation,
        changes: &[Change],
    ) {
        let (_number, _) = self.journal(name, generation, changes);
        trace::event!(
            DEBUG,
            spec = name,
            generation = generation.0,
            seq = _number,
            changes = changes.len(),
            "batch dropped by a hold"
        );
        if let Some(s) = self.specs.get_mut(&sid) {
            s.dropped += changes.len() as u64;
            self.touched.push(sid);
        }
    }

    /// A fact of `sid`'s status that another owner keeps changed.
    pub(super) fn touch(&mut self, sid: SpecId) {
        self.touched.push(sid);
    }

    /// The spec generation is gone (deleted or superseded): nothing more is
    /// published for it.
    pub(super) fn forget(&mut self, sid: SpecId) {
        self.specs.remove(&sid);
    }

    /// The spec `name` was deleted.
    pub(super) fn deleted(&mut self, name: &str) {
        self.shared.statuses.lock().remove(name);
        self.shared.journals.lock().remove(name);
        self.send(Event::Deleted(name.to_owned()));
        self.shared.changed.notify_all();
    }

    /// The backend failed for good: every spec fails with `error`.
    pub(super) fn fail(&mut self, error: &str, wall: SystemTime) {
        trace::event!(
            ERROR,
            error,
            specs = self.specs.len(),
            "the backend failed: every spec fails"
        );
        self.failed = Some((error.to_owned(), wall));
        self.touched.extend(self.specs.keys().copied());
    }

    /// After a panic: every last published status, failed with `error`,
    /// without looking at anything else (it may be inconsistent).
    pub(super) fn fail_all(&mut self, error: &str, wall: SystemTime) {
        trace::event!(ERROR, error, "the engine failed: every spec fails");
        self.failed = Some((error.to_owned(), wall));
        let sids: Vec<SpecId> = self.specs.keys().copied().collect();
        for sid in sids {
            let Some(last) = self.specs.get(&sid).and_then(|s| s.published.clone()) else {
                continue;
            };
            let mut st = WatchStatus::clone(&last);
            st.phase = Phase::Failed {
                error: error.to_owned(),
            };
            st.last_error = Some(error.to_owned());
            st.last_error_time = Some(wall);
            self.put(sid, st);
        }
        self.shared.changed.notify_all();
    }

    /// The engine stopped for good.
    pub(super) fn stopped(&mut self, reason: String) {
        trace::event!(INFO, reason = %reason, "engine stopped");
        // Under the statuses' lock: a waiter between its look and its wait
        // (`Shared::wait_for`) cannot miss the end.
        let _statuses = self.shared.statuses.lock();
        *self.shared.dead.lock() = Some(reason);
        self.shared.changed.notify_all();
    }

    /// Specs whose status inputs changed here since the last call.
    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }

    /// Offers a freshly derived status of `sid`; publishes it if a reader
    /// would see a difference. Returns whether it did.
    pub(super) fn offer(&mut self, sid: SpecId, f: Facts) -> bool {
        let Some(s) = self.specs.get(&sid) else {
            return false;
        };
        let phase = match (&self.failed, f.degraded) {
            (Some((error, _)), _) => Phase::Failed {
                error: error.clone(),
            },
            (None, _) if f.progress.is_some() || f.hashing_start => Phase::Starting,
            (None, None) => Phase::Watching,
            (None, Some(reason)) => Phase::Degraded { reason },
        };
        let (last_error, last_error_time) = match self.failed.clone().or(f.last_error) {
            Some((e, t)) => (Some(e), Some(t)),
            None => (None, None),
        };
        let status = WatchStatus {
            name: f.name,
            observed_generation: f.generation,
            phase,
            monitor_start_time: Some(s.monitor_start),
            last_event_time: s.last_event,
            recent_batches: s.recent.iter().cloned().collect(),
            progress: f.progress,
            roots: f.roots,
            watched_dirs: f.watched_dirs,
            polled_dirs: f.polled_dirs,
            watch_retries: f.watch_retries,
            overflow_recoveries: f.overflow_recoveries,
            missed_by_os: f.missed_by_os,
            last_error,
            last_error_time,
            vcs_lock: f.vcs_lock,
            holds: f.holds,
            dropped_by_holds: s.dropped,
        };
        if s.published.as_deref().is_some_and(|p| same(p, &status)) {
            return false;
        }
        self.put(sid, status);
        true
    }

    fn put(&mut self, sid: SpecId, status: WatchStatus) {
        let snapshot = Arc::new(status);
        if let Some(s) = self.specs.get_mut(&sid) {
            s.published = Some(snapshot.clone());
        }
        self.shared
            .statuses
            .lock()
            .insert(snapshot.name.clone(), snapshot.clone());
        self.send(Event::Status(snapshot));
    }

    /// Wakes those waiting on statuses.
    pub(super) fn notify(&self) {
        self.shared.changed.notify_all();
    }

    /// Sends `event` to every subscriber (new ones first join).
    fn send(&mut self, event: Event) {
        self.subscribers.extend(self.joining.try_iter());
        self.subscribers.retain_mut(|s| s.send(event.clone()));
        self.behind = self.subscribers.iter().any(Subscriber::behind);
    }

    /// Moves backlogs into channels where room appeared.
    pub(super) fn flush_backlogs(&mut self) {
        if !self.behind {
            return;
        }
        self.subscribers.retain_mut(Subscriber::flush);
        self.behind = self.subscribers.iter().any(Subscriber::behind);
    }

    pub(super) fn behind(&self) -> bool {
        self.behind
    }

    pub(super) fn backlog_paths(&self) -> usize {
        self.subscribers.iter().map(Subscriber::backlog_paths).sum()
    }
}

/// Whether a reader would see no difference between two statuses. Batches
/// are shared, so the recent ones compare by identity.
fn same(a: &WatchStatus, b: &WatchStatus) -> bool {
    a.name == b.name
        && a.observed_generation == b.observed_generation
        && a.phase == b.phase
        && a.monitor_start_time == b.monitor_start_time
        && a.last_event_time == b.last_event_time
        && a.recent_batches.len() == b.recent_batches.len()
        && a.recent_batches
            .iter()
            .zip(&b.recent_batches)
            .all(|(x, y)| Arc::ptr_eq(x, y))
        && a.roots == b.roots
        && a.progress == b.progress
        && a.watched_dirs == b.watched_dirs
        && a.polled_dirs == b.polled_dirs
        && a.watch_retries == b.watch_retries
        && a.overflow_recoveries == b.overflow_recoveries
        && a.missed_by_os == b.missed_by_os
        && a.last_error == b.last_error
        && a.last_error_time == b.last_error_time
        && a.vcs_lock == b.vcs_lock
        && a.holds == b.holds
        && a.dropped_by_holds == b.dropped_by_holds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::change::{ChangeKind, FileType};
    use std::time::Duration;

    fn publisher() -> (Publisher, crossbeam_channel::Receiver<Event>) {
        let (join_tx, join_rx) = crossbeam_channel::unbounded();
        let p = Publisher::new(Arc::new(Shared::new()), join_rx);
        let (tx, rx) = crossbeam_channel::bounded(100);
        join_tx.send(Subscriber::new(tx)).unwrap();
        (p, rx)
    }

    fn facts(dirs: usize) -> Facts {
        Facts {
            name: "s".into(),
            generation: Generation(1),
            watched_dirs: dirs,
            polled_dirs: 0,
            roots: Vec::new(),
            progress: None,
            hashing_start: false,
            watch_retries: 0,
            overflow_recoveries: 0,
            missed_by_os: 0,
            last_error: None,
            degraded: None,
            vcs_lock: None,
            holds: Vec::new(),
        }
    }

    fn statuses(rx: &crossbeam_channel::Receiver<Event>) -> Vec<Arc<WatchStatus>> {
        rx.try_iter()
            .filter_map(|e| match e {
                Event::Status(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_status_is_published_only_when_a_reader_would_see_a_change() {
        let (mut p, rx) = publisher();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        p.started(1, "s", Generation(1), t0, None);
        assert!(p.offer(1, facts(3)));
        assert!(!p.offer(1, facts(3)), "nothing new");
        assert!(p.offer(1, facts(4)));
        assert_eq!(statuses(&rx).len(), 2);
        assert_eq!(p.shared.statuses.lock()["s"].watched_dirs, 4);
        // A batch changes what a reader sees: recent batches, event time.
        let change = Change::new("/r/f", ChangeKind::Created, FileType::File);
        p.batch(
            1,
            "s",
            Generation(1),
            vec![change],
            t0 + Duration::from_secs(1),
            None,
        );
        assert!(p.offer(1, facts(4)));
        assert!(!p.offer(1, facts(4)));
        let st = statuses(&rx);
        assert_eq!(st.len(), 1);
        assert_eq!(st[0].recent_batches.len(), 1);
        assert_eq!(st[0].last_event_time, Some(t0 + Duration::from_secs(1)));
        // Monitoring restarted: the time moves.
        p.restarted(1, t0 + Duration::from_secs(2));
        assert!(p.offer(1, facts(4)));
        assert_eq!(
            statuses(&rx)[0].monitor_start_time,
            Some(t0 + Duration::from_secs(2))
        );
        assert_eq!(p.take_touched(), vec![1, 1, 1]);
    }

    #[test]
    fn recent_batches_are_bounded_and_seqs_increase() {
        let (mut p, rx) = publisher();
        p.started(1, "s", Generation(1), SystemTime::UNIX_EPOCH, None);
        for i in 0..(RECENT_BATCHES + 5) {
            let change = Change::new(format!("/r/{i}"), ChangeKind::Modified, FileType::File);
            p.batch(
                1,
                "s",
                Generation(1),
                vec![change],
                SystemTime::UNIX_EPOCH,
                None,
            );
        }
        let seqs: Vec<u64> = rx
            .try_iter()
            .filter_map(|e| match e {
                Event::Changes(b) => Some(b.seq.number()),
                _ => None,
            })
            .collect();
        assert_eq!(seqs, (1..=(RECENT_BATCHES as u64 + 5)).collect::<Vec<_>>());
        p.offer(1, facts(1));
        let st = p.shared.statuses.lock()["s"].clone();
        assert_eq!(st.recent_batches.len(), RECENT_BATCHES);
        assert_eq!(
            st.recent_batches[0].seq.number(),
            6,
            "the oldest went first"
        );
    }

    #[test]
    fn failure_wins_over_every_derived_phase() {
        let (mut p, _rx) = publisher();
        p.started(1, "s", Generation(1), SystemTime::UNIX_EPOCH, None);
        let mut f = facts(1);
        f.degraded = Some("waiting for /x to exist".into());
        assert!(p.offer(1, f));
        assert!(matches!(
            p.shared.statuses.lock()["s"].phase,
            Phase::Degraded { .. }
        ));
        p.take_touched();
        p.fail("inotify read failed: EIO", SystemTime::UNIX_EPOCH);
        assert_eq!(p.take_touched(), vec![1], "every spec is touched");
        assert!(p.offer(1, facts(1)));
        let st = p.shared.statuses.lock()["s"].clone();
        assert_eq!(
            st.phase,
            Phase::Failed {
                error: "inotify read failed: EIO".into()
            }
        );
        assert_eq!(st.last_error.as_deref(), Some("inotify read failed: EIO"));
    }

    #[test]
    fn deleted_specs_leave_statuses_and_say_so() {
        let (mut p, rx) = publisher();
        p.started(1, "s", Generation(1), SystemTime::UNIX_EPOCH, None);
        p.offer(1, facts(1));
        p.forget(1);
        p.deleted("s");
        assert!(p.shared.statuses.lock().is_empty());
        assert!(
            rx.try_iter()
                .any(|e| matches!(e, Event::Deleted(n) if n == "s"))
        );
        assert!(!p.offer(1, facts(1)), "nothing for a forgotten spec");
    }
}
