//! Holds a program declares (`Manager::hold`): the steps that take one
//! (a barrier of each spec it is on first, so that what was written
//! before it is not held) and end one (a barrier of each spec it was the
//! last to hold, so that what was written while it lived is all in the
//! held batch, which then closes as `during_holds` says). The holds
//! themselves are `holds.rs`'s; what becomes of a batch as a barrier
//! passes, `batching.rs`'s `flush_batches` asks them.

use std::time::Duration;

use crossbeam_channel::Sender;

use super::Engine;
use super::sync::HoldMark;
use crate::hold::HoldScope;
use crate::index::SpecId;

/// How long a hold's start waits for a spec's barrier at most (storage
/// that does not answer): then it takes effect anyway.
pub(super) const ENTER_DEADLINE: Duration = Duration::from_secs(5);

impl Engine {
    /// A program declares hold `id` on `scope`: a barrier of each spec it
    /// is on (`reply` is told once they all passed, or at once if it is
    /// on none).
    pub(super) fn hold(&mut self, id: u64, scope: HoldScope, label: String, reply: Sender<()>) {
        let now = (self.clock.now(), self.clock.wall());
        for sid in self.holds.declare(id, (scope, label), now, reply) {
            self.hold_barrier(sid, HoldMark::Enter(id), ENTER_DEADLINE);
        }
    }

    /// The guard of hold `id` was dropped: a barrier of each spec it was
    /// the last to hold, whose held batch closes when it passes (or at
    /// the spec's hold bound); `reply` (a caller of `release`) is told
    /// once they all passed.
    pub(super) fn unhold(&mut self, id: u64, reply: Option<Sender<()>>) {
        let released = self.holds.undeclare(id);
        for &sid in &released {
            let bound = self.holds.bound(sid).unwrap_or(ENTER_DEADLINE);
            self.hold_barrier(sid, HoldMark::Release(id), bound);
        }
        if let Some(reply) = reply {
            self.holds.await_release(released, reply);
        }
    }

    /// Starts a barrier of spec `sid` for a hold (`mark`), given up (and
    /// so passed) after `deadline`.
    fn hold_barrier(&mut self, sid: SpecId, mark: HoldMark, deadline: Duration) {
        let Some(name) = self.specs.get(sid).map(|st| st.name().to_owned()) else {
            return;
        };
        self.start_barrier(name, self.clock.now() + deadline, None, None);
        self.syncs.mark_newest(mark);
    }
}
