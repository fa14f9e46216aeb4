//! Holds: the only writer of every hold on a spec's batch, and the one
//! place that says whether a batch that is due closes.
//!
//! A hold keeps a spec's open batch open past the time its quiet window
//! (or maximum delay) would close it, so that what belongs together is
//! delivered as one batch; each kind is bounded, and one that outlives
//! its bound lets batches flow and says so. The kinds, each decided by a
//! pure rule of its own:
//!
//! - **a version-control lock** (`vcs_settle`; `settle.rs`'s rule): a
//!   due batch stays open while the repository's lock exists, and closes
//!   once a barrier passes after it went;
//! - **files being written** (`write_finished`; `write_hold.rs`'s rule):
//!   a due batch waits for them, to its maximum delay at most, when their
//!   changes move to the next batch.
//!
//! The batches themselves (the coalescers) are `specs.rs`'s; the steps
//! that ask the holds when a batch is due and close it are
//! `batching.rs`'s (one question per spec: [`Holds::ask`]), those that
//! tell them of writes `writing.rs`'s. What the status lists is
//! [`Holds::status`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::change::{Change, Meta};
use crate::fasthash::FastMap;
use crate::index::SpecId;
use crate::options::WatchOptions;
use crate::settle::{VcsHold, Verdict};
use crate::status::{HoldReason, HoldStatus, VcsLock};
use crate::write_hold::WriteHold;

/// The holds of every spec generation that can have one.
#[derive(Debug, Default)]
pub(super) struct Holds {
    specs: FastMap<SpecId, SpecHolds>,
    /// Specs that wait for writers (`write_finished`).
    write_specs: usize,
    /// Specs whose holds, as the status lists them, changed.
    touched: Vec<SpecId>,
}

/// One spec generation's holds.
#[derive(Debug, Default)]
struct SpecHolds {
    /// With `vcs_settle`: what it knows of the repository's lock.
    vcs: Option<VcsHold>,
    /// With `write_finished`: the files of its batch being written.
    writes: Option<WriteHold>,
    /// While its due batch waits for files being written: since when,
    /// until when (its maximum delay), how many (wall clock, kept as
    /// taken so that the status does not move with the clock).
    writing: Option<(SystemTime, SystemTime, usize)>,
}

/// A spec's batch, as its holds see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Batch {
    /// When it is due by its quiet window or maximum delay (`None`: no
    /// batch is open).
    pub due: Option<Instant>,
    /// When its maximum delay is up.
    pub latest: Option<Instant>,
}

/// What becomes of a spec's batch (the answer of [`Holds::ask`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Leave it open (not due, or held).
    Wait,
    /// Close it now ([`Holds::carry`] says which changes stay for the
    /// next one).
    Close,
    /// Leave it open and start a barrier: the batch closes when it
    /// passes (a hold ended: every change made before is in once it has).
    Release,
}

impl SpecHolds {
    /// When the batch is due with the holds that stretch it (files being
    /// written: past its quiet window, to its maximum delay at most).
    fn batch_due(&self, batch: Batch) -> Option<Instant> {
        let due = batch.due?;
        match (&self.writes, batch.latest) {
            (Some(w), Some(latest)) => Some(w.deadline(due, latest)),
            _ => Some(due),
        }
    }
}

impl Holds {
    /// Spec generation `sid` starts, with `options`.
    pub(super) fn add(&mut self, sid: SpecId, options: &WatchOptions) {
        let h = SpecHolds {
            vcs: options
                .vcs_settle
                .map(|bound| VcsHold::new(bound, options.quiet_window)),
            writes: options.write_finished.map(WriteHold::new),
            writing: None,
        };
        if h.vcs.is_none() && h.writes.is_none() {
            return;
        }
        self.write_specs += usize::from(h.writes.is_some());
        self.specs.insert(sid, h);
    }

    /// Spec generation `sid` is gone.
    pub(super) fn forget(&mut self, sid: SpecId) {
        if let Some(h) = self.specs.remove(&sid) {
            self.write_specs -= usize::from(h.writes.is_some());
        }
    }

    /// When spec `sid` wants the engine to wake, its batch being `batch`:
    /// when the batch is due with its holds, or a hold's next look.
    pub(super) fn deadline(&self, sid: SpecId, batch: Batch) -> Option<Instant> {
        let Some(h) = self.specs.get(&sid) else {
            return batch.due;
        };
        let due = h.batch_due(batch);
        match &h.vcs {
            Some(v) => v.next_deadline(due),
            None => due,
        }
    }

    /// The one question, asked at `now` (wall clock `wall`) of spec
    /// `sid`'s batch `batch` (open or not) when the engine wakes for it:
    /// does it close? `lock` looks for the version-control lock of the
    /// spec's repositories, if the answer needs it.
    pub(super) fn ask(
        &mut self,
        sid: SpecId,
        (now, wall): (Instant, SystemTime),
        batch: Batch,
        lock: impl FnOnce() -> Option<PathBuf>,
    ) -> Answer {
        let Some(h) = self.specs.get_mut(&sid) else {
            return match batch.due {
                Some(d) if d <= now => Answer::Close,
                _ => Answer::Wait,
            };
        };
        let deadline = h.batch_due(batch);
        let (open, due) = (deadline.is_some(), deadline.is_some_and(|d| d <= now));
        // Due by its own windows, not yet for the files being written.
        let writing = match (&h.writes, batch.due, batch.latest) {
            (Some(w), Some(d), Some(latest)) if d <= now && !due => {
                let files = w.writing_count(now);
                let since = h.writing.map_or(wall, |(s, _, _)| s);
                let until = wall + latest.saturating_duration_since(now);
                let until = h.writing.map_or(until, |(_, u, _)| u);
                Some((since, until, files))
            }
            _ => None,
        };
        if writing != h.writing {
            h.writing = writing;
            self.touched.push(sid);
        }
        let verdict = match &mut h.vcs {
            Some(v) if v.wants_look(now, open, due) => {
                let before = v.status();
                let verdict = v.look(now, wall, lock(), open, due);
                if v.status() != before {
                    self.touched.push(sid);
                }
                verdict
            }
            Some(_) if open => Verdict::Hold,
            _ => Verdict::Flow,
        };
        match verdict {
            Verdict::Flow if due => Answer::Close,
            Verdict::Close if open => Answer::Close,
            Verdict::Release => Answer::Release,
            _ => Answer::Wait,
        }
    }

    /// Spec `sid`'s batch closes at `now`, due, with `changes`: those of
    /// files still being written are taken out, to go back into the next
    /// batch (second list).
    pub(super) fn carry(
        &mut self,
        sid: SpecId,
        now: Instant,
        changes: Vec<Change>,
    ) -> (Vec<Change>, Vec<Change>) {
        let Some(h) = self.specs.get_mut(&sid) else {
            return (changes, Vec::new());
        };
        if h.writing.take().is_some() {
            self.touched.push(sid);
        }
        match &mut h.writes {
            Some(w) => w.carry(now, changes),
            None => (changes, Vec::new()),
        }
    }

    /// Spec `sid`'s batch was closed whole, due or not (a sync, a
    /// barrier that ended a release): a release is over, no file is held.
    pub(super) fn closed(&mut self, sid: SpecId) {
        let Some(h) = self.specs.get_mut(&sid) else {
            return;
        };
        if let Some(v) = &mut h.vcs {
            v.closed();
        }
        if let Some(w) = &mut h.writes {
            w.clear();
        }
        if h.writing.take().is_some() {
            self.touched.push(sid);
        }
    }

    /// The version-control lock spec `sid`'s batch is held for, if one
    /// is (or that is overdue).
    pub(super) fn vcs_lock(&self, sid: SpecId) -> Option<VcsLock> {
        self.specs
            .get(&sid)
            .and_then(|h| h.vcs.as_ref())
            .and_then(VcsHold::status)
    }

    /// The holds on spec `sid`'s batches, as its status lists them.
    pub(super) fn status(&self, sid: SpecId) -> Vec<HoldStatus> {
        let Some(h) = self.specs.get(&sid) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(v) = &h.vcs
            && let Some(lock) = v.status()
        {
            out.push(HoldStatus {
                reason: HoldReason::VcsLock { path: lock.path },
                since: lock.since,
                until: Some(lock.since + v.bound()),
                overdue: lock.overdue,
            });
        }
        if let Some((since, until, files)) = h.writing {
            out.push(HoldStatus {
                reason: HoldReason::Writing { files },
                since,
                until: Some(until),
                overdue: false,
            });
        }
        out
    }

    /// Specs whose holds changed since the last call.
    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }
}

/// Waiting for writers (`write_finished`; the rule is `write_hold.rs`'s).
impl Holds {
    /// Whether some spec waits for writers.
    pub(super) fn any_write_holds(&self) -> bool {
        self.write_specs > 0
    }

    /// Whether spec `sid` waits for writers.
    pub(super) fn holds_writes(&self, sid: SpecId) -> bool {
        self.specs.get(&sid).is_some_and(|h| h.writes.is_some())
    }

    /// For spec `sid` (which does not ignore it), file `path` was written
    /// at `now` (`meta`: what the look saw; `polled`: the directory's poll
    /// interval if only polls look at it).
    pub(super) fn wrote(
        &mut self,
        sid: SpecId,
        now: Instant,
        path: &Path,
        meta: Option<&Meta>,
        polled: Option<Duration>,
    ) {
        if let Some(w) = self.writes_of(sid) {
            w.wrote(now, path, meta, polled);
        }
    }

    /// For spec `sid`, `path` was removed or is no regular file: nothing
    /// to wait for.
    pub(super) fn not_written(&mut self, sid: SpecId, path: &Path) {
        if let Some(w) = self.writes_of(sid) {
            w.removed(path);
        }
    }

    /// The writer of `path` closed it, or a rename put it there.
    pub(super) fn write_finished(&mut self, path: &Path) {
        for h in self.specs.values_mut() {
            if let Some(w) = &mut h.writes {
                w.finished(path);
            }
        }
    }

    /// The files whose interval is up at `now`, to look at, for the specs
    /// `open` (those with an open batch; named twice or more, maybe).
    pub(super) fn write_looks_due(&self, now: Instant, open: &[SpecId]) -> Vec<(SpecId, PathBuf)> {
        let mut out = Vec::new();
        for &sid in open {
            if let Some(w) = self.specs.get(&sid).and_then(|h| h.writes.as_ref()) {
                out.extend(w.looks_due(now).into_iter().map(|p| (sid, p)));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A look at `path` for `sid` at `now` (`wall`) saw `meta`.
    pub(super) fn write_looked(
        &mut self,
        sid: SpecId,
        (now, wall): (Instant, SystemTime),
        path: &Path,
        meta: Option<&Meta>,
    ) {
        if let Some(w) = self.writes_of(sid) {
            w.looked(now, wall, path, meta);
        }
    }

    fn writes_of(&mut self, sid: SpecId) -> Option<&mut WriteHold> {
        self.specs.get_mut(&sid).and_then(|h| h.writes.as_mut())
    }
}

#[cfg(test)]
#[path = "tests/holds.rs"]
mod tests;
