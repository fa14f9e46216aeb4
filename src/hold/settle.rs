//! Settling around version control ([`WatchOptions::vcs_settle`]): whether
//! a spec's batch that is due is held because a version-control lock
//! (`.git/index.lock`, `.hg/wlock`) exists, until when, and what its
//! status says.
//!
//! One hold per spec generation, owned by the holds' owner
//! (`engine/holds.rs`) with the spec's other holds: a held batch is the
//! coalescer's open batch (`engine/specs.rs`), left open, so it keeps
//! netting per path and nothing is dropped, only delayed.
//!
//! Pure: the caller passes the time and what it found at the lock's path
//! (the engine `stat`s it through `fs`, when a batch is due and at the
//! times [`VcsHold::next_deadline`] names).
//!
//! [`WatchOptions::vcs_settle`]: crate::WatchOptions::vcs_settle

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::status::VcsLock;

/// How often a lock that outlived its bound is looked at, to see it go.
const OVERDUE_RECHECK: Duration = Duration::from_secs(1);

/// The shortest and longest interval between two looks at a lock while a
/// batch is held (the spec's quiet window, within these).
const RECHECK_MIN: Duration = Duration::from_millis(10);
const RECHECK_MAX: Duration = Duration::from_millis(100);

/// A spec's hold: what it knows of its repository's lock.
#[derive(Debug)]
pub(crate) struct VcsHold {
    bound: Duration,
    recheck: Duration,
    state: State,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// No lock seen at the last look (or none since the spec started).
    Idle,
    /// A batch came due while `lock` existed (first at `since`, wall time
    /// `wall`): it stays open; the lock is looked at again at `next`.
    Held {
        lock: PathBuf,
        since: Instant,
        wall: SystemTime,
        next: Instant,
    },
    /// The lock went while a batch was held: the batch closes when the
    /// barrier the engine started then passes (every change made before
    /// the lock went is in it), or at `until`.
    Releasing { until: Instant },
    /// The lock outlived the bound: batches flow as if there were none;
    /// looked at again at `next` (and whenever a batch is due) to see it
    /// go.
    Overdue {
        lock: PathBuf,
        wall: SystemTime,
        next: Instant,
    },
}

/// What to do with the spec's batch after a look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Close it if it is due (as without a hold).
    Flow,
    /// Leave it open, due or not.
    Hold,
    /// Leave it open and start a barrier: the batch closes when it passes.
    Release,
    /// Close it now, due or not (the release's barrier took too long).
    Close,
}

impl VcsHold {
    /// A hold that keeps a batch at most `bound` past the time it was
    /// first held, for a spec whose quiet window is `quiet`.
    pub(crate) fn new(bound: Duration, quiet: Duration) -> VcsHold {
        VcsHold {
            bound,
            recheck: quiet.clamp(RECHECK_MIN, RECHECK_MAX),
            state: State::Idle,
        }
    }

    /// How long a batch is held at most.
    pub(crate) fn bound(&self) -> Duration {
        self.bound
    }

    /// Whether the lock is to be looked at now (`due`: the spec's batch
    /// is due; `open`: it has one).
    pub(crate) fn wants_look(&self, now: Instant, open: bool, due: bool) -> bool {
        match &self.state {
            State::Idle => due,
            State::Held { next, .. } => now >= *next,
            State::Releasing { until } => open && now >= *until,
            State::Overdue { next, .. } => due || now >= *next,
        }
    }

    /// What the look at `now` (wall time `wall`) found (`lock`: the lock
    /// file that exists, if one does), and so what becomes of the batch.
    pub(crate) fn look(
        &mut self,
        now: Instant,
        wall: SystemTime,
        lock: Option<PathBuf>,
        open: bool,
        due: bool,
    ) -> Verdict {
        let (state, verdict) = match (std::mem::replace(&mut self.state, State::Idle), lock) {
            (State::Idle, Some(lock)) if due => (
                State::Held {
                    lock,
                    since: now,
                    wall,
                    next: now + self.recheck,
                },
                Verdict::Hold,
            ),
            (State::Idle, _) => (State::Idle, Verdict::Flow),
            (State::Held { since, wall, .. }, Some(lock)) if now >= since + self.bound => (
                State::Overdue {
                    lock,
                    wall,
                    next: now + OVERDUE_RECHECK,
                },
                Verdict::Flow,
            ),
            (State::Held { since, wall, .. }, Some(lock)) => (
                State::Held {
                    lock,
                    since,
                    wall,
                    next: now + self.recheck,
                },
                Verdict::Hold,
            ),
            (State::Held { since, .. }, None) if open => (
                State::Releasing {
                    until: (since + self.bound).max(now + self.recheck),
                },
                Verdict::Release,
            ),
            // A sync took the held batch: nothing left to release.
            (State::Held { .. }, None) => (State::Idle, Verdict::Flow),
            (State::Releasing { until }, _) if now >= until => (State::Idle, Verdict::Close),
            (releasing @ State::Releasing { .. }, _) => (releasing, Verdict::Hold),
            (State::Overdue { wall, .. }, Some(lock)) => (
                State::Overdue {
                    lock,
                    wall,
                    next: now + OVERDUE_RECHECK,
                },
                Verdict::Flow,
            ),
            (State::Overdue { .. }, None) => (State::Idle, Verdict::Flow),
        };
        self.state = state;
        verdict
    }

    /// The spec's batch was closed and delivered (due, by a sync, or by
    /// the release's barrier): a release is over.
    pub(crate) fn closed(&mut self) {
        if matches!(self.state, State::Releasing { .. }) {
            self.state = State::Idle;
        }
    }

    /// When the hold wants the engine to wake: `batch` is when the spec's
    /// open batch is due, if it has one. A held batch is due already: its
    /// own deadline is replaced by the hold's next look.
    pub(crate) fn next_deadline(&self, batch: Option<Instant>) -> Option<Instant> {
        match &self.state {
            State::Idle => batch,
            State::Held { next, .. } => Some(*next),
            State::Releasing { until } => batch.map(|_| *until),
            State::Overdue { next, .. } => Some(batch.map_or(*next, |b| b.min(*next))),
        }
    }

    /// What [`WatchStatus::vcs_lock`](crate::WatchStatus::vcs_lock) says.
    pub(crate) fn status(&self) -> Option<VcsLock> {
        match &self.state {
            State::Held { lock, wall, .. } => Some(VcsLock {
                path: lock.clone(),
                since: *wall,
                overdue: false,
            }),
            State::Overdue { lock, wall, .. } => Some(VcsLock {
                path: lock.clone(),
                since: *wall,
                overdue: true,
            }),
            State::Idle | State::Releasing { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = "/r/.git/index.lock";

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    fn lock(on: bool) -> Option<PathBuf> {
        on.then(|| PathBuf::from(LOCK))
    }

    #[test]
    fn no_lock_lets_batches_flow() {
        let t0 = Instant::now();
        let mut h = VcsHold::new(Duration::from_secs(10), Duration::from_millis(50));
        assert!(!h.wants_look(t0, true, false), "nothing due, no look");
        assert!(h.wants_look(t0, true, true));
        let v = h.look(t0, SystemTime::UNIX_EPOCH, lock(false), true, true);
        assert_eq!(v, Verdict::Flow);
        assert_eq!(h.status(), None);
        assert_eq!(h.next_deadline(Some(ms(t0, 5))), Some(ms(t0, 5)));
        assert_eq!(h.next_deadline(None), None);
    }

    #[test]
    fn a_lock_holds_until_gone_then_releases_through_a_barrier() {
        let t0 = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let mut h = VcsHold::new(Duration::from_secs(10), Duration::from_millis(50));
        assert_eq!(h.look(t0, wall, lock(true), true, true), Verdict::Hold);
        let st = h.status().expect("held");
        assert_eq!(st.path, PathBuf::from(LOCK));
        assert_eq!((st.since, st.overdue), (wall, false));
        // The batch's own deadline (past) gives way to the next look.
        assert_eq!(h.next_deadline(Some(t0)), Some(ms(t0, 50)));
        assert!(!h.wants_look(ms(t0, 49), true, true));
        assert!(h.wants_look(ms(t0, 50), true, true));
        assert_eq!(
            h.look(ms(t0, 50), wall, lock(true), true, true),
            Verdict::Hold
        );
        assert_eq!(h.status().unwrap().since, wall, "since the first hold");
        // Gone: the batch waits for a barrier, which closes it.
        assert_eq!(
            h.look(ms(t0, 100), wall, lock(false), true, true),
            Verdict::Release
        );
        assert_eq!(h.status(), None);
        assert!(
            !h.wants_look(ms(t0, 200), true, true),
            "the barrier decides"
        );
        h.closed();
        assert_eq!(h.next_deadline(None), None);
        assert_eq!(
            h.look(ms(t0, 300), wall, lock(false), true, true),
            Verdict::Flow
        );
    }

    #[test]
    fn a_release_whose_barrier_does_not_pass_closes_at_the_bound() {
        let t0 = Instant::now();
        let w = SystemTime::UNIX_EPOCH;
        let mut h = VcsHold::new(Duration::from_secs(1), Duration::from_millis(50));
        h.look(t0, w, lock(true), true, true);
        assert_eq!(
            h.look(ms(t0, 100), w, lock(false), true, true),
            Verdict::Release
        );
        assert_eq!(h.next_deadline(Some(t0)), Some(ms(t0, 1000)));
        assert!(!h.wants_look(ms(t0, 999), true, true));
        assert!(h.wants_look(ms(t0, 1000), true, true));
        assert_eq!(h.look(ms(t0, 1000), w, None, true, true), Verdict::Close);
        // Late in the bound: still one look's time for the barrier.
        h.look(ms(t0, 2000), w, lock(true), true, true);
        assert_eq!(
            h.look(ms(t0, 2990), w, lock(false), true, true),
            Verdict::Release
        );
        assert_eq!(h.next_deadline(Some(t0)), Some(ms(t0, 3040)));
    }

    #[test]
    fn a_lock_that_outlives_the_bound_lets_batches_flow_and_says_so() {
        let t0 = Instant::now();
        let w = SystemTime::UNIX_EPOCH;
        let mut h = VcsHold::new(Duration::from_millis(500), Duration::from_millis(50));
        assert_eq!(h.look(t0, w, lock(true), true, true), Verdict::Hold);
        let mut t = 50;
        while t < 500 {
            assert_eq!(h.look(ms(t0, t), w, lock(true), true, true), Verdict::Hold);
            t += 50;
        }
        assert_eq!(
            h.look(ms(t0, 500), w, lock(true), true, true),
            Verdict::Flow
        );
        assert!(h.status().unwrap().overdue);
        // Later batches flow at once; the lock is looked at as they do.
        assert_eq!(
            h.look(ms(t0, 700), w, lock(true), true, true),
            Verdict::Flow
        );
        assert!(h.status().unwrap().overdue);
        // With nothing due, a look a second later sees it go.
        assert_eq!(h.next_deadline(None), Some(ms(t0, 1700)));
        assert!(h.wants_look(ms(t0, 1700), false, false));
        assert_eq!(
            h.look(ms(t0, 1700), w, lock(false), false, false),
            Verdict::Flow
        );
        assert_eq!(h.status(), None);
        assert_eq!(h.next_deadline(None), None);
        // A new lock holds again.
        assert_eq!(
            h.look(ms(t0, 2000), w, lock(true), true, true),
            Verdict::Hold
        );
        assert!(!h.status().unwrap().overdue);
    }

    #[test]
    fn a_sync_that_took_the_held_batch_leaves_nothing_to_release() {
        let t0 = Instant::now();
        let w = SystemTime::UNIX_EPOCH;
        let mut h = VcsHold::new(Duration::from_secs(10), Duration::ZERO);
        h.look(t0, w, lock(true), true, true);
        h.closed(); // the sync's batch: still held for what comes next
        assert!(h.status().is_some());
        assert_eq!(h.next_deadline(None), Some(ms(t0, 10)), "at least 10 ms");
        assert_eq!(
            h.look(ms(t0, 10), w, lock(false), false, false),
            Verdict::Flow
        );
        assert_eq!(h.status(), None);
    }

    #[test]
    fn a_lock_seen_while_nothing_is_due_holds_nothing() {
        let t0 = Instant::now();
        let mut h = VcsHold::new(Duration::from_secs(10), Duration::from_millis(50));
        let v = h.look(t0, SystemTime::UNIX_EPOCH, lock(true), true, false);
        assert_eq!(v, Verdict::Flow);
        assert_eq!(h.status(), None);
    }
}
