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
//!   changes move to the next batch;
//! - **a hold a program declared** (`Manager::hold`, while its guard
//!   lives): the batch stays open, and once the guard is dropped (and a
//!   barrier passed) it is delivered, or dropped (`during_holds`); one
//!   held past `hold_bound` lets batches flow. It takes effect on a spec
//!   once a barrier passed (the batch closed before it: what was written
//!   before the hold is not held), and on a spec applied while it lives
//!   at once. Its barriers are the engine's (`holding.rs` starts them);
//! - **hashes being read** (`skip_same_content`): a closed batch waits
//!   for its files' hashes, read on the scanner's lanes (the engine's
//!   thread never waits for them), and the spec's next batches wait
//!   behind it; a hash that does not come within the storage deadline
//!   of the last one is given up (the file is reported without one).
//!
//! The batches themselves (the coalescers) are `specs.rs`'s; the steps
//! that ask the holds when a batch is due and close it are
//! `batching.rs`'s (one question per spec: [`Holds::ask`]), those that
//! tell them of writes `writing.rs`'s. What the status lists is
//! [`Holds::status`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::Sender;

use std::collections::VecDeque;

use crate::batch::change::{Change, Meta};
use crate::batch::content::ContentHash;
use crate::fasthash::FastMap;
use crate::hold::settle::{VcsHold, Verdict};
use crate::hold::write::WriteHold;
use crate::hold::{DuringHolds, HoldScope};
use crate::index::SpecId;
use crate::spec::options::WatchOptions;
use crate::state::restore::Restore;
use crate::status::{HoldReason, HoldStatus, VcsLock};

/// The holds of every spec generation, and the holds programs declared.
#[derive(Debug, Default)]
pub(super) struct Holds {
    specs: FastMap<SpecId, SpecHolds>,
    /// Specs that wait for writers (`write_finished`).
    write_specs: usize,
    /// The holds programs declared whose guard lives.
    declared: Vec<Declared>,
    /// Specs on which a declared hold is in effect (to wake for when it
    /// is overdue, with no batch open).
    guarded: Vec<SpecId>,
    /// Callers of `HoldGuard::release` waiting for the barriers of the
    /// specs their hold released (told once none is left).
    endings: Vec<(Vec<SpecId>, Sender<()>)>,
    /// Specs with a closed batch waiting for its hashes.
    hashing: Vec<SpecId>,
    /// The last hash read's token.
    hash_token: u64,
    /// Specs whose holds, as the status lists them, changed.
    touched: Vec<SpecId>,
}

/// A hold a program declared, while its guard lives.
#[derive(Debug)]
struct Declared {
    id: u64,
    scope: HoldScope,
    label: String,
    /// When the engine took it.
    since: Instant,
    wall: SystemTime,
    /// The specs whose barrier it waits for before it takes effect on
    /// them; once none is left, `reply` is told (the guard is returned).
    entering: Vec<SpecId>,
    reply: Option<Sender<()>>,
}

impl Declared {
    /// It took effect wherever it was to: its caller may go on.
    fn entered(&mut self, sid: SpecId) {
        self.entering.retain(|&s| s != sid);
        if self.entering.is_empty()
            && let Some(r) = self.reply.take()
        {
            let _ = r.send(());
        }
    }
}

/// The barriers that close a spec's batch, by kind (what a hold makes of
/// each: [`Holds::on_barrier`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Barrier {
    /// A caller's `Manager::sync`.
    Caller,
    /// The engine's own (a VCS lock's release).
    Internal,
    /// A rescan's.
    Rescan,
    /// The start of the declared hold of this id.
    Enter(u64),
    /// The end of the declared hold of this id.
    Release(u64),
}

/// What becomes of a spec's batch as a barrier passes, or as it is closed
/// by an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Closing {
    /// Closed and delivered.
    Deliver,
    /// Closed, and kept from every subscriber (`DuringHolds::Drop`).
    Drop,
    /// Left open: a hold keeps it.
    Keep,
}

/// One spec generation's holds.
#[derive(Debug, Default)]
struct SpecHolds {
    /// Its name (a declared hold's scope names specs).
    name: String,
    /// What it does with what a declared hold covers, and how long one
    /// holds at most.
    during: DuringHolds,
    bound: Duration,
    /// The declared holds in effect on it (ids), each with whether it is
    /// overdue (as last seen).
    guards: Vec<(u64, bool)>,
    /// Whether a declared hold held its batch when last looked at (so
    /// that the moment they all went overdue is told).
    held: bool,
    /// Its last declared hold ended: the held batch closes once a
    /// barrier passes, dropped if `true`.
    releasing: Option<bool>,
    /// Its closed batches waiting for their files' hashes, oldest first.
    hashing: VecDeque<Hashing>,
    /// With `vcs_settle`: what it knows of the repository's lock.
    vcs: Option<VcsHold>,
    /// With `write_finished`: the files of its batch being written.
    writes: Option<WriteHold>,
    /// While its due batch waits for files being written: since when,
    /// until when (its maximum delay), how many (wall clock, kept as
    /// taken so that the status does not move with the clock).
    writing: Option<(SystemTime, SystemTime, usize)>,
}

/// A closed batch of a spec that compares contents, waiting for its
/// files' hashes (read on the scanner's lanes).
#[derive(Debug)]
struct Hashing {
    token: u64,
    changes: Vec<Change>,
    /// A first batch's mark (`restore.rs`).
    mark: Option<Restore>,
    /// The hashes come so far.
    read: FastMap<PathBuf, Option<ContentHash>>,
    /// How many are still to come, of how many.
    out: usize,
    files: usize,
    since: SystemTime,
    /// Given up then (the storage deadline after the last hash came).
    until: Instant,
}

/// A batch whose hashes are in (or given up): what the filter needs.
#[derive(Debug)]
pub(super) struct Hashed {
    pub sid: SpecId,
    pub changes: Vec<Change>,
    pub mark: Option<Restore>,
    /// Each file's hash as read (absent: not read in time).
    pub read: FastMap<PathBuf, Option<ContentHash>>,
}

impl Hashing {
    fn done(self, sid: SpecId) -> Hashed {
        Hashed {
            sid,
            changes: self.changes,
            mark: self.mark,
            read: self.read,
        }
    }
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
    /// Close it now, as `Close`, and keep it from every subscriber (what
    /// a declared hold held, for a spec that drops it).
    Drop,
    /// Leave it open and start a barrier: the batch closes when it
    /// passes (a hold ended: every change made before is in once it has).
    Release,
}

impl SpecHolds {
    /// Whether a declared hold holds it (one in effect, not overdue).
    fn held(&self) -> bool {
        self.guards.iter().any(|&(_, overdue)| !overdue)
    }

    /// How a held batch closes (by a caller's sync, an update, or the
    /// end of its hold).
    fn disposal(&self) -> Closing {
        match self.during {
            DuringHolds::Drop if self.held() || self.releasing.is_some() => Closing::Drop,
            _ => Closing::Deliver,
        }
    }

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
    /// Spec generation `sid`, named `name`, starts with `options`; the
    /// declared holds on its name are in effect on it at once.
    pub(super) fn add(&mut self, sid: SpecId, name: &str, options: &WatchOptions) {
        let guards: Vec<(u64, bool)> = self
            .declared
            .iter()
            .filter(|d| d.scope.covers(name))
            .map(|d| (d.id, false))
            .collect();
        let h = SpecHolds {
            name: name.to_owned(),
            during: options.during_holds,
            bound: options.hold_bound,
            held: !guards.is_empty(),
            guards,
            releasing: None,
            hashing: VecDeque::new(),
            vcs: options
                .vcs_settle
                .map(|bound| VcsHold::new(bound, options.quiet_window)),
            writes: options.write_finished.map(WriteHold::new),
            writing: None,
        };
        self.write_specs += usize::from(h.writes.is_some());
        if h.held {
            self.guarded.push(sid);
            self.touched.push(sid);
        }
        self.specs.insert(sid, h);
    }

    /// Spec generation `sid` is gone (a declared hold waiting for its
    /// barrier waits no more).
    pub(super) fn forget(&mut self, sid: SpecId) {
        if let Some(h) = self.specs.remove(&sid) {
            self.write_specs -= usize::from(h.writes.is_some());
        }
        self.guarded.retain(|&s| s != sid);
        self.hashing.retain(|&s| s != sid);
        for d in &mut self.declared {
            if d.entering.contains(&sid) {
                d.entered(sid);
            }
        }
        self.ended(sid);
    }

    /// The barrier of spec `sid` that ends a hold passed (or the spec is
    /// gone): a caller of `release` waiting for no other is told.
    fn ended(&mut self, sid: SpecId) {
        self.endings.retain_mut(|(specs, reply)| {
            specs.retain(|&s| s != sid);
            let done = specs.is_empty();
            if done {
                let _ = reply.send(());
            }
            !done
        });
    }

    /// The specs a hold declared may want the engine to wake for, with
    /// no batch open (to say it is overdue).
    pub(super) fn guarded(&self) -> &[SpecId] {
        &self.guarded
    }

    /// When spec `sid` wants the engine to wake, its batch being `batch`:
    /// when the batch is due with its holds, or a hold's next look; while
    /// a declared hold holds it, when that is overdue (none while its
    /// release's barrier is out: the barrier's deadline wakes it).
    pub(super) fn deadline(&self, sid: SpecId, batch: Batch) -> Option<Instant> {
        let Some(h) = self.specs.get(&sid) else {
            return batch.due;
        };
        if let Some(first) = h.hashing.front() {
            return Some(first.until);
        }
        if h.releasing.is_some() {
            return None;
        }
        if h.held() {
            return h
                .guards
                .iter()
                .filter(|(_, overdue)| !overdue)
                .filter_map(|(id, _)| self.declared.iter().find(|d| d.id == *id))
                .map(|d| d.since + h.bound)
                .min();
        }
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
        // Declared holds first: they keep the batch whatever else says.
        let mut overdue_now = false;
        for (id, overdue) in &mut h.guards {
            let late = self
                .declared
                .iter()
                .find(|d| d.id == *id)
                .is_none_or(|d| now >= d.since + h.bound);
            if late != *overdue {
                *overdue = late;
                overdue_now = true;
            }
        }
        if overdue_now {
            self.touched.push(sid);
        }
        if !h.hashing.is_empty() {
            return Answer::Wait; // behind the batch reading its hashes
        }
        if h.releasing.is_some() {
            return Answer::Wait; // its barrier closes it
        }
        if h.held() {
            h.held = true;
            return Answer::Wait;
        }
        if std::mem::take(&mut h.held) && batch.due.is_some() {
            // Every hold on it outlived the bound: what they held goes
            // (as their end would), and batches flow.
            return match h.during {
                DuringHolds::Drop => Answer::Drop,
                _ => Answer::Close,
            };
        }
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
        if let Some(first) = h.hashing.front() {
            out.push(HoldStatus {
                reason: HoldReason::Hashing {
                    files: h.hashing.iter().map(|b| b.files).sum(),
                },
                since: first.since,
                until: None,
                overdue: false,
            });
        }
        for (id, overdue) in &h.guards {
            if let Some(d) = self.declared.iter().find(|d| d.id == *id) {
                out.push(HoldStatus {
                    reason: HoldReason::Declared {
                        label: d.label.clone(),
                    },
                    since: d.wall,
                    until: Some(d.wall + h.bound),
                    overdue: *overdue,
                });
            }
        }
        out
    }

    /// Specs whose holds changed since the last call.
    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }
}

/// Holds a program declared (`Manager::hold`).
impl Holds {
    /// A program declared hold `id` on `scope` (`label`) at `now`; `reply`
    /// is told once it has taken effect. Returns the specs it is to take
    /// effect on once a barrier of each passed (none: it is in effect,
    /// and `reply` told, now).
    pub(super) fn declare(
        &mut self,
        id: u64,
        (scope, label): (HoldScope, String),
        (now, wall): (Instant, SystemTime),
        reply: Sender<()>,
    ) -> Vec<SpecId> {
        let mut entering: Vec<SpecId> = self
            .specs
            .iter()
            .filter(|(_, h)| scope.covers(&h.name))
            .map(|(&sid, _)| sid)
            .collect();
        entering.sort_unstable();
        let mut d = Declared {
            id,
            scope,
            label,
            since: now,
            wall,
            entering: entering.clone(),
            reply: Some(reply),
        };
        if entering.is_empty()
            && let Some(r) = d.reply.take()
        {
            let _ = r.send(()); // on no spec: in effect now
        }
        self.declared.push(d);
        entering
    }

    /// The guard of hold `id` was dropped at `now`: the specs on which it
    /// was the last to hold the batch are released (their held batch
    /// closes once a barrier passes: the caller starts it).
    pub(super) fn undeclare(&mut self, id: u64) -> Vec<SpecId> {
        let Some(at) = self.declared.iter().position(|d| d.id == id) else {
            return Vec::new();
        };
        self.declared.swap_remove(at);
        let mut released = Vec::new();
        for (&sid, h) in &mut self.specs {
            let Some(i) = h.guards.iter().position(|(g, _)| *g == id) else {
                continue;
            };
            h.guards.remove(i);
            self.touched.push(sid);
            if !h.held() && std::mem::take(&mut h.held) {
                h.releasing = Some(h.during == DuringHolds::Drop);
                released.push(sid);
            }
        }
        self.guarded
            .retain(|s| self.specs.get(s).is_some_and(|h| !h.guards.is_empty()));
        released.sort_unstable();
        released
    }

    /// A barrier of spec `sid` passed (or, for a hold's, its deadline
    /// did): what becomes of its batch. A hold's start closes what came
    /// before it (unless another hold keeps the batch already) and takes
    /// effect; its end closes what it held, delivered or dropped; a
    /// caller's sync closes a held batch as its end would; the engine's
    /// own barriers leave a held batch alone.
    pub(super) fn on_barrier(&mut self, sid: SpecId, barrier: Barrier) -> Closing {
        let Some(h) = self.specs.get_mut(&sid) else {
            return Closing::Deliver;
        };
        let closing = match barrier {
            _ if h.held() && barrier != Barrier::Caller => Closing::Keep,
            Barrier::Internal | Barrier::Rescan if h.releasing.is_some() => Closing::Keep,
            Barrier::Caller | Barrier::Enter(_) | Barrier::Release(_) => {
                let c = h.disposal();
                h.releasing = None;
                c
            }
            Barrier::Internal | Barrier::Rescan => Closing::Deliver,
        };
        if let Barrier::Release(_) = barrier {
            self.ended(sid);
        }
        let Some(h) = self.specs.get_mut(&sid) else {
            return closing;
        };
        if let Barrier::Enter(id) = barrier
            && let Some(d) = self.declared.iter_mut().find(|d| d.id == id)
        {
            d.entered(sid);
            if !h.guards.iter().any(|(g, _)| *g == id) {
                h.guards.push((id, false));
                h.held = true;
                self.touched.push(sid);
                if !self.guarded.contains(&sid) {
                    self.guarded.push(sid);
                }
            }
        }
        closing
    }

    /// `reply` is told once the barriers of `released` (the specs a hold
    /// that ended released) have passed: at once if there are none.
    pub(super) fn await_release(&mut self, released: Vec<SpecId>, reply: Sender<()>) {
        if released.is_empty() {
            let _ = reply.send(());
        } else {
            self.endings.push((released, reply));
        }
    }

    /// How spec `sid`'s batch closes now, whatever is due (an update
    /// retiring it): dropped if a declared hold held it to drop it.
    pub(super) fn disposal(&self, sid: SpecId) -> Closing {
        self.specs
            .get(&sid)
            .map_or(Closing::Deliver, SpecHolds::disposal)
    }

    /// How long a declared hold holds spec `sid` at most.
    pub(super) fn bound(&self, sid: SpecId) -> Option<Duration> {
        self.specs.get(&sid).map(|h| h.bound)
    }
}

/// Batches waiting for their files' hashes (`skip_same_content`).
impl Holds {
    /// Spec `sid`'s closed batch `changes` (`mark`: a first batch's)
    /// waits for the hashes of `files` of its files (read on the lanes
    /// with the token returned), behind any of its batches waiting
    /// already; given up at `until` unless one comes.
    pub(super) fn hash_wait(
        &mut self,
        sid: SpecId,
        (changes, mark): (Vec<Change>, Option<Restore>),
        files: usize,
        wall: SystemTime,
        until: Instant,
    ) -> u64 {
        self.hash_token += 1;
        let token = self.hash_token;
        let Some(h) = self.specs.get_mut(&sid) else {
            return token;
        };
        h.hashing.push_back(Hashing {
            token,
            changes,
            mark,
            read: FastMap::default(),
            out: files,
            files,
            since: wall,
            until,
        });
        if !self.hashing.contains(&sid) {
            self.hashing.push(sid);
            self.touched.push(sid);
        }
        token
    }

    /// The hash of `path` for spec `sid`'s batch of read `token` came;
    /// that batch's deadline is now `until`.
    pub(super) fn hashed(
        &mut self,
        sid: SpecId,
        token: u64,
        path: PathBuf,
        hash: Option<ContentHash>,
        until: Instant,
    ) {
        let Some(b) = self
            .specs
            .get_mut(&sid)
            .and_then(|h| h.hashing.iter_mut().find(|b| b.token == token))
        else {
            return;
        };
        if b.read.insert(path, hash).is_none() {
            b.out = b.out.saturating_sub(1);
        }
        b.until = until;
    }

    /// The batches whose hashes are all in, or given up at `now`, in each
    /// spec's order (one waits for those before it).
    pub(super) fn take_hashed(&mut self, now: Instant) -> Vec<Hashed> {
        let mut out = Vec::new();
        for &sid in &self.hashing {
            let Some(h) = self.specs.get_mut(&sid) else {
                continue;
            };
            while h
                .hashing
                .front()
                .is_some_and(|b| b.out == 0 || b.until <= now)
            {
                if let Some(b) = h.hashing.pop_front() {
                    out.push(b.done(sid));
                }
            }
            if h.hashing.is_empty() {
                self.touched.push(sid);
            }
        }
        let specs = &self.specs;
        self.hashing
            .retain(|s| specs.get(s).is_some_and(|h| !h.hashing.is_empty()));
        out
    }

    /// Spec `sid`'s batches waiting for their hashes, taken as they are
    /// (an update retires it: nothing more is waited for).
    pub(super) fn take_hashing(&mut self, sid: SpecId) -> Vec<Hashed> {
        let Some(h) = self.specs.get_mut(&sid) else {
            return Vec::new();
        };
        let out: Vec<Hashed> = h.hashing.drain(..).map(|b| b.done(sid)).collect();
        self.hashing.retain(|&s| s != sid);
        out
    }

    /// A fresh token for a read on the lanes (a start's).
    pub(super) fn next_token(&mut self) -> u64 {
        self.hash_token += 1;
        self.hash_token
    }

    /// The token of spec `sid`'s newest batch waiting for its hashes.
    pub(super) fn hashing(&self, sid: SpecId) -> Option<u64> {
        self.specs.get(&sid)?.hashing.back().map(|b| b.token)
    }

    /// Whether spec `sid`'s batch of read `token` is out (delivered, or
    /// gone with its spec).
    pub(super) fn hashes_done(&self, sid: SpecId, token: u64) -> bool {
        self.specs
            .get(&sid)
            .is_none_or(|h| h.hashing.iter().all(|b| b.token != token))
    }

    /// The specs with a batch waiting for its hashes (to wake for at its
    /// deadline).
    pub(super) fn hashing_specs(&self) -> &[SpecId] {
        &self.hashing
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
