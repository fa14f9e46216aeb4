//! Start-up progress: the only writer of how far the first walk of a
//! spec's tree has got, and of when that was last published. While a
//! spec's roots are attached (one long step of the engine's thread on a
//! big tree), the walk counts directories and entries and publishes the
//! spec's status (phase `Starting`, with `progress`) at most every
//! [`PROGRESS_EVERY`]. Also the only writer of whether a heap trim is due
//! after a big walk. The steps that publish the progress and trim the
//! heap are `walk.rs`'s.

use std::time::{Duration, Instant};

use crate::index::SpecId;
use crate::status::Progress;

/// Least time between two progress statuses of one walk.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Directories walked between two looks at the clock.
const LOOK_EVERY: usize = 64;

/// The first walk under way and its progress, and whether a heap trim
/// is due.
#[derive(Debug, Default)]
pub(super) struct WalkProgress {
    /// The spec whose first walk is under way, its counts, and when its
    /// progress was last published (or the walk began).
    current: Option<(SpecId, Progress, Instant)>,
    /// Whether a progress status was published during this walk.
    published: bool,
    /// A big walk ended: trim the heap once the engine is idle.
    trim_due: bool,
}

impl WalkProgress {
    /// The progress of `sid`, if its first walk is under way and has been
    /// going on long enough to say so.
    pub(super) fn progress_of(&self, sid: SpecId) -> Option<Progress> {
        match self.current {
            Some((s, p, _)) if s == sid && self.published => Some(p),
            _ => None,
        }
    }

    /// The first walk of `sid` begins (at `now`).
    pub(super) fn begin(&mut self, sid: SpecId, now: Instant) {
        self.current = Some((sid, Progress::default(), now));
        self.published = false;
    }

    /// Counts a directory read with `entries` entries; the spec whose
    /// progress is to be published now, if it is time (noted as done at
    /// `now()`).
    pub(super) fn count(
        &mut self,
        entries: usize,
        now: impl FnOnce() -> Instant,
    ) -> Option<SpecId> {
        let (sid, p, last) = self.current.as_mut()?;
        p.dirs += 1;
        p.entries += entries;
        if p.dirs % LOOK_EVERY != 0 {
            return None;
        }
        let t = now();
        if t.duration_since(*last) < PROGRESS_EVERY {
            return None;
        }
        *last = t;
        self.published = true;
        Some(*sid)
    }

    /// The walk is over: the spec it was for if it published progress, and
    /// how many directories it read (a heap trim is due after
    /// [`TRIM_AFTER`] of them).
    pub(super) fn end(&mut self) -> (Option<SpecId>, usize) {
        let Some((sid, p, _)) = self.current.take() else {
            return (None, 0);
        };
        if p.dirs >= TRIM_AFTER {
            self.trim_due = true;
        }
        (std::mem::take(&mut self.published).then_some(sid), p.dirs)
    }

    /// Whether the heap is to be trimmed now: a big walk ended and the
    /// engine is `idle` (asked only then); the trim is then no longer due.
    pub(super) fn take_trim(&mut self, idle: impl FnOnce() -> bool) -> bool {
        if self.trim_due && idle() {
            self.trim_due = false;
            return true;
        }
        false
    }
}

/// Directories a walk reads before the heap is trimmed after it.
const TRIM_AFTER: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_published_at_most_every_interval_and_only_for_long_walks() {
        let t0 = Instant::now();
        let mut w = WalkProgress::default();
        w.begin(7, t0);
        for _ in 0..LOOK_EVERY {
            let soon = t0 + Duration::from_millis(50);
            assert_eq!(w.count(3, || soon), None, "too soon");
        }
        assert_eq!(w.progress_of(7), None, "a short walk says nothing");
        // The clock is looked at every LOOK_EVERY directories: at 163 ms
        // (published), then at 227 ms (64 ms later: not yet).
        let mut published = 0;
        for i in 0..LOOK_EVERY * 2 {
            let at = t0 + PROGRESS_EVERY + Duration::from_millis(i as u64);
            published += usize::from(w.count(1, || at) == Some(7));
        }
        assert_eq!(published, 1, "at most once per interval");
        let p = w.progress_of(7).unwrap();
        assert_eq!(
            (p.dirs, p.entries),
            (LOOK_EVERY * 3, LOOK_EVERY * 3 + LOOK_EVERY * 2)
        );
        assert_eq!(w.progress_of(8), None, "another spec");
        assert_eq!(w.end(), (Some(7), LOOK_EVERY * 3));
        assert_eq!(w.progress_of(7), None, "over");
        assert_eq!(w.end(), (None, 0));
    }
}
