//! Retries: a directory that could not be watched or read, for a reason
//! that may pass, is tried again after a back-off that doubles per
//! attempt; once it gets its watch it is read again, and what changed
//! meanwhile reported. The retry table and its counters are
//! `recovery.rs`'s.

use super::Engine;
use super::recovery::Retry;
use super::trace;
use crate::index::{DirId, SpecId};

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
            if let Some(r) = self.recovery.retry_of(id) {
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
            let Some(Retry {
                attempts, first, ..
            }) = self.recovery.retry_of(id)
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
}
