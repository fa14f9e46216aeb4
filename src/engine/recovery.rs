//! Recovery from what the OS lost or refused: retries with back-off for
//! directories that could not be watched or read, rescans after lost
//! events, and restarts of an event backend whose reader stopped. The
//! only writer of the retry table, of the read times that bound what an
//! overflow may have hidden, of the backend's restart schedule, and of
//! the per-spec recovery counters. The steps are `retrying.rs`'s
//! (retries), `rereading.rs`'s (a directory read again and diffed;
//! everything, after lost events) and `restarting.rs`'s (a new backend).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime};

use crate::clock::wall_before;
use crate::index::{DirId, SpecId};
use crate::spec::defaults::DEFAULT_OVERFLOW_MARGIN;

/// First delay before a failed watch is tried again; it doubles per attempt.
pub(super) const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest delay between two attempts.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(30);

/// The delay before attempt `attempts + 1` (the first retry comes after
/// [`RETRY_FIRST`]).
pub(super) fn backoff(attempts: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1 << attempts.saturating_sub(1).min(16))
        .min(RETRY_MAX)
}

/// A directory waiting to be tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Retry {
    pub attempts: u32,
    /// When it is tried again.
    pub at: Instant,
    /// When the first attempt failed: changes since then had no events.
    pub first: SystemTime,
}

/// The event backend is down: its reader stopped, and a new one is to be
/// started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Down {
    /// Why (the reader's last word, or why the last restart failed).
    pub error: String,
    /// Restarts tried so far.
    pub attempts: u32,
    /// When the next is due.
    pub at: Instant,
    /// Every event after the read that began then may be missing.
    pub complete_read: SystemTime,
}

/// How long the back-off between restarts of the event backend is: the
/// first wait, doubled per failed restart up to the second.
pub(crate) type RestartBackoff = (Duration, Duration);

#[derive(Debug)]
pub(super) struct Recovery {
    /// The event backend's restart, while it is down.
    down: Option<Down>,
    /// Test hook: restarts still to fail.
    failing_restarts: u32,
    restart_backoff: RestartBackoff,
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
    pub(super) fn new(
        margin: Option<Duration>,
        restart_backoff: Option<RestartBackoff>,
        now: SystemTime,
    ) -> Recovery {
        Recovery {
            down: None,
            failing_restarts: 0,
            restart_backoff: restart_backoff.unwrap_or((
                crate::spec::defaults::DEFAULT_RESTART_FIRST,
                crate::spec::defaults::DEFAULT_RESTART_MAX,
            )),
            retries: BTreeMap::new(),
            attempts: HashMap::new(),
            overflows: HashMap::new(),
            touched: Vec::new(),
            prev_read: now,
            last_read: now,
            last_read_mono: None,
            margin: margin.unwrap_or(DEFAULT_OVERFLOW_MARGIN),
        }
    }

    /// Directory `id` failed (again) at `now`; counts the attempt for
    /// `specs`. Returns when it is tried again.
    pub(super) fn schedule(
        &mut self,
        id: DirId,
        specs: &[SpecId],
        now: Instant,
        wall: SystemTime,
    ) -> Instant {
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
    pub(super) fn due(&self, now: Instant) -> Vec<DirId> {
        self.retries
            .iter()
            .filter(|(_, r)| r.at <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The retry `id` waits for, if it does.
    pub(super) fn retry_of(&self, id: DirId) -> Option<Retry> {
        self.retries.get(&id).copied()
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

    pub(super) fn attempts_of(&self, id: DirId) -> Option<u32> {
        self.retries.get(&id).map(|r| r.attempts)
    }

    pub(super) fn cancel(&mut self, id: DirId) {
        self.retries.remove(&id);
    }

    /// Something happened to a directory waiting for a retry (a chmod,
    /// say): every waiting directory is due at `now` at the latest, rather
    /// than after its backoff (on a path backend the watch that failed may
    /// be an ancestor's).
    pub(super) fn all_now(&mut self, now: Instant) {
        for r in self.retries.values_mut() {
            r.at = r.at.min(now);
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let restart = self.down.as_ref().map(|d| d.at);
        self.retries.values().map(|r| r.at).chain(restart).min()
    }

    /// The event backend went down (`error`), or a restart failed: the
    /// next restart after the back-off; `specs` (all of them) are told.
    pub(super) fn backend_down(&mut self, error: String, now: Instant, specs: &[SpecId]) {
        let (first, max) = self.restart_backoff;
        let (attempts, complete_read) = self
            .down
            .as_ref()
            .map_or((0, self.last_read), |d| (d.attempts, d.complete_read));
        let wait = first
            .saturating_mul(1 << attempts.min(16))
            .min(max.max(first));
        self.down = Some(Down {
            error,
            attempts,
            at: now + wait,
            complete_read,
        });
        self.touched.extend_from_slice(specs);
    }

    /// Whether the event backend is down, and since what.
    pub(super) fn down(&self) -> Option<&Down> {
        self.down.as_ref()
    }

    /// A restart is due at `now`: counted as tried.
    pub(super) fn restart_due(&mut self, now: Instant) -> Option<Down> {
        let d = self.down.as_mut().filter(|d| d.at <= now)?;
        d.attempts += 1;
        Some(d.clone())
    }

    /// Test hook: the next `n` restarts fail.
    #[cfg(feature = "test-hooks")]
    pub(super) fn fail_restarts(&mut self, n: u32) {
        self.failing_restarts = n;
    }

    /// Whether this restart is to fail (test hook).
    pub(super) fn take_injected_restart_failure(&mut self) -> bool {
        let fail = self.failing_restarts > 0;
        self.failing_restarts = self.failing_restarts.saturating_sub(1);
        fail
    }

    /// The new backend is up: `specs` are told.
    pub(super) fn backend_up(&mut self, specs: &[SpecId]) {
        self.down = None;
        self.touched.extend_from_slice(specs);
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

    /// When the latest read started on the monotonic clock (or a moment
    /// after), once there has been one.
    pub(super) fn last_read_mono(&self) -> Option<Instant> {
        self.last_read_mono
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
    pub(super) fn count_overflow(&mut self, specs: &[SpecId]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A backend that went down is restarted after `first`, then after
    /// twice as long per failed restart, never more than `max`; the
    /// loss is bounded by the read before it went down, whatever fails
    /// after.
    #[test]
    fn backend_restarts_back_off() {
        let w0 = SystemTime::UNIX_EPOCH;
        let mut r = Recovery::new(None, Some((100 * MS, 350 * MS)), w0);
        let t0 = Instant::now();
        r.note_read(w0 + Duration::from_secs(7), t0);
        r.backend_down("read failed".into(), t0, &[1]);
        assert_eq!(r.take_touched(), [1]);
        assert_eq!(r.next_deadline(), Some(t0 + 100 * MS));
        assert_eq!(r.restart_due(t0 + 99 * MS), None);
        let mut at = t0 + 100 * MS;
        for wait in [200, 350, 350] {
            let d = r.restart_due(at).expect("due");
            assert_eq!(d.complete_read, w0 + Duration::from_secs(7));
            r.backend_down("cannot start".into(), at, &[1]);
            assert_eq!(r.down().map(|d| d.error.as_str()), Some("cannot start"));
            at += wait * MS;
            assert_eq!(r.next_deadline(), Some(at), "after {} tries", d.attempts);
        }
        assert_eq!(r.restart_due(at).map(|d| d.attempts), Some(4));
        r.backend_up(&[1]);
        assert_eq!(r.down(), None);
        assert_eq!(r.next_deadline(), None);
    }

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
        let mut r = Recovery::new(None, None, w0);
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
        let mut r = Recovery::new(Some(Duration::from_millis(100)), None, w0);
        let (a, b) = (w0 + Duration::from_secs(1), w0 + Duration::from_secs(2));
        r.note_read(a, Instant::now());
        r.note_read(b, Instant::now());
        assert_eq!(r.prev_read, a, "what an overflow marker in read b bounds");
        assert_eq!(r.last_read(), b);
        assert_eq!(r.since(a), a - Duration::from_millis(100));
        assert_eq!(r.overflow_since(), b - Duration::from_millis(100));
        let r = Recovery::new(None, None, SystemTime::UNIX_EPOCH);
        assert_eq!(
            r.overflow_since(),
            SystemTime::UNIX_EPOCH,
            "never before the epoch"
        );
    }

    #[test]
    fn overflows_count_per_spec() {
        let mut r = Recovery::new(None, None, SystemTime::UNIX_EPOCH);
        r.count_overflow(&[1, 2]);
        r.count_overflow(&[2]);
        assert_eq!((r.overflows(1), r.overflows(2), r.overflows(3)), (1, 2, 0));
    }
}
