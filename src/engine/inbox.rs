//! The bound on what the backend has handed the engine and the engine has
//! not taken yet: OS events queued in its inbox, their peak, the events
//! dropped, and where what was dropped begins. Shared by the backend's
//! sink (which admits or drops each message, never waiting) and the
//! engine (which takes them, and learns of a drop as of a kernel queue
//! overflow: a precise rescan, nothing lost).
//!
//! A message is admitted whole or dropped whole. One message heavier than
//! the whole bound (an inotify read of more events than it) is admitted
//! when nothing is queued, so that every drop happens while a message is
//! queued before it: the engine, taking that one, learns of the drop.

use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

#[derive(Debug, Default)]
struct State {
    /// Events admitted and not taken yet.
    queued: usize,
    /// The most ever queued.
    peak: usize,
    /// Events dropped since the manager started.
    dropped: u64,
    /// When the read of the last message admitted began.
    last_read: Option<SystemTime>,
    /// Events were dropped after the read that began then (the last one
    /// admitted before the first drop), and the engine has not been told.
    lost_after: Option<SystemTime>,
}

/// The inbox's bound, one per manager.
#[derive(Clone, Debug)]
pub(crate) struct Inbox {
    limit: usize,
    state: Arc<Mutex<State>>,
}

/// What the engine may read of the inbox (`Manager::stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct InboxStats {
    pub queued: usize,
    pub peak: usize,
    pub dropped: u64,
}

impl Inbox {
    /// An inbox that holds at most `limit` events (at least 1).
    pub(crate) fn new(limit: usize) -> Inbox {
        Inbox {
            limit: limit.max(1),
            state: Arc::default(),
        }
    }

    /// A message of `events` OS events, read from `read_at` on, is to be
    /// handed over: whether it may be (else it is dropped, and the engine
    /// will be told).
    pub(crate) fn admit(&self, events: usize, read_at: Option<SystemTime>) -> bool {
        let mut s = self.state.lock();
        if s.queued > 0 && s.queued.saturating_add(events) > self.limit {
            s.dropped += events as u64;
            if s.lost_after.is_none() {
                // Nothing admitted yet: anything may have been lost.
                s.lost_after = Some(s.last_read.unwrap_or(SystemTime::UNIX_EPOCH));
            }
            return false;
        }
        s.queued += events;
        s.peak = s.peak.max(s.queued);
        if let Some(t) = read_at {
            s.last_read = Some(t);
        }
        true
    }

    /// The engine took a message of `events` events. `Some(read)` when
    /// events were dropped since it was last told: every event queued
    /// after the read that began at `read` may be missing.
    pub(crate) fn taken(&self, events: usize) -> Option<SystemTime> {
        let mut s = self.state.lock();
        s.queued = s.queued.saturating_sub(events);
        s.lost_after.take()
    }

    pub(crate) fn stats(&self) -> InboxStats {
        let s = self.state.lock();
        InboxStats {
            queued: s.queued,
            peak: s.peak,
            dropped: s.dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn holds_at_most_its_limit_and_says_where_the_loss_begins() {
        let inbox = Inbox::new(10);
        assert!(inbox.admit(6, at(1)));
        assert!(inbox.admit(4, at(2)));
        // Full: dropped, the loss begins after the read at 2.
        assert!(!inbox.admit(1, at(3)));
        assert!(!inbox.admit(5, at(4)));
        assert_eq!(inbox.taken(6), Some(at(2).unwrap()));
        // Told once.
        assert_eq!(inbox.taken(0), None);
        assert!(inbox.admit(6, at(5)));
        assert_eq!(
            inbox.stats(),
            InboxStats {
                queued: 10,
                peak: 10,
                dropped: 6
            }
        );
        assert_eq!(inbox.taken(4), None);
        assert_eq!(inbox.taken(6), None);
        assert_eq!(inbox.stats().queued, 0);
    }

    /// A message heavier than the bound goes through when nothing is
    /// queued: every drop then has a message queued before it, whose
    /// taking tells the engine.
    #[test]
    fn a_heavy_message_alone_is_admitted() {
        let inbox = Inbox::new(10);
        assert!(inbox.admit(50, at(1)));
        assert!(!inbox.admit(1, at(2)));
        assert_eq!(inbox.taken(50), at(1));
        assert!(inbox.admit(1, at(3)));
    }

    /// Messages without a read time (a reader's failure) are admitted as
    /// any other and leave the last read as it was.
    #[test]
    fn a_loss_before_any_read_is_a_loss_since_ever() {
        let inbox = Inbox::new(1);
        assert!(inbox.admit(1, None));
        assert!(!inbox.admit(1, None));
        assert_eq!(inbox.taken(1), Some(SystemTime::UNIX_EPOCH));
    }
}
