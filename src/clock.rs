//! The engine's one clock handle: monotonic time for deadlines (quiet
//! windows, maximum delays, retry back-off, poll schedules) and wall time
//! for what status and batches report.
//!
//! Real by default. A manual clock (tests only), moved only by
//! `Clock::advance`, lets tests drive every timer without sleeping.
//! Pure: no I/O, no threads.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

/// A clock handle; clones share the same time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clock {
    /// `None`: the real clocks. `Some`: a manual clock.
    manual: Option<Arc<Mutex<Manual>>>,
}

#[derive(Debug)]
struct Manual {
    now: Instant,
    wall: SystemTime,
}

impl Clock {
    /// The system's clocks.
    pub(crate) fn real() -> Clock {
        Clock { manual: None }
    }

    /// A clock that stands still until [`advance`](Clock::advance)d.
    /// Starts at the real time of the call.
    #[cfg(test)]
    pub(crate) fn manual() -> Clock {
        Clock {
            manual: Some(Arc::new(Mutex::new(Manual {
                now: Instant::now(),
                wall: SystemTime::now(),
            }))),
        }
    }

    /// Monotonic now.
    pub(crate) fn now(&self) -> Instant {
        match &self.manual {
            None => Instant::now(),
            Some(m) => m.lock().now,
        }
    }

    /// Wall-clock now.
    pub(crate) fn wall(&self) -> SystemTime {
        match &self.manual {
            None => SystemTime::now(),
            Some(m) => m.lock().wall,
        }
    }

    /// Moves a manual clock forward (both times). No effect on the real one.
    #[cfg(test)]
    pub(crate) fn advance(&self, by: Duration) {
        if let Some(m) = &self.manual {
            let mut m = m.lock();
            m.now += by;
            m.wall += by;
        }
    }
}

/// `at` minus `by`, never before the epoch (where wall time cannot go).
pub(crate) fn wall_before(at: SystemTime, by: Duration) -> SystemTime {
    at.checked_sub(by)
        .filter(|t| *t >= SystemTime::UNIX_EPOCH)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_clones_share_it() {
        let c = Clock::manual();
        let (t0, w0) = (c.now(), c.wall());
        assert_eq!(c.now(), t0);
        let c2 = c.clone();
        c2.advance(Duration::from_millis(1500));
        assert_eq!(c.now(), t0 + Duration::from_millis(1500));
        assert_eq!(c.wall(), w0 + Duration::from_millis(1500));
    }

    #[test]
    fn real_clock_runs() {
        let c = Clock::real();
        let t0 = c.now();
        c.advance(Duration::from_secs(3600)); // no effect
        assert!(c.now() < t0 + Duration::from_secs(3600));
    }

    #[test]
    fn wall_before_saturates_at_the_epoch() {
        let e = SystemTime::UNIX_EPOCH;
        assert_eq!(
            wall_before(e + Duration::from_secs(5), Duration::from_secs(2)),
            e + Duration::from_secs(3)
        );
        assert_eq!(
            wall_before(e + Duration::from_secs(1), Duration::from_secs(2)),
            e
        );
    }
}
