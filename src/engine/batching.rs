//! The specs' batches, in and out: a raw change of an indexed
//! directory's entry routed to the open batch of every spec it concerns
//! (the one way in), and batches closed, when due or at a sync, and
//! handed to `publish.rs`, a spec that compares contents leaving out
//! files whose content did not change (`contents.rs`'s rule). The batches
//! themselves are `specs.rs`'s; whether a due batch closes, the holds'
//! (`holds.rs`: one question per spec, [`Holds::ask`]).

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use super::Engine;
use super::holds::{Answer, Barrier, Closing, Holds};
use super::specs::SpecTable;
use crate::batch::change::{Change, ChangeKind, FileType, Meta};
use crate::fs;
use crate::index::{DirId, SpecId};
use crate::state::restore::Restore;

/// What [`take_due`] closed, and what it holds.
#[derive(Default)]
pub(super) struct Due {
    /// The batches closed.
    pub closed: Vec<(SpecId, Vec<Change>)>,
    /// The batches closed and kept from every subscriber (what a
    /// declared hold held, for a spec that drops it).
    pub dropped: Vec<(SpecId, Vec<Change>)>,
    /// Specs whose held batch is to close once a barrier passes (a hold
    /// ended).
    pub released: Vec<SpecId>,
}

/// Closes every batch that is due at `now` (wall time `wall`), but those
/// a hold keeps open: each spec the engine wakes for is asked of its
/// holds once. `lock` says which lock file of the repositories holding
/// the roots it is given exists, if one does (asked only of specs with
/// `vcs_settle`, when their batch is due or their hold's next look is).
pub(super) fn take_due(
    specs: &mut SpecTable,
    holds: &mut Holds,
    (now, wall): (Instant, SystemTime),
    mut lock: impl FnMut(&[PathBuf]) -> Option<PathBuf>,
) -> Due {
    let mut out = Due::default();
    let mut keep = Vec::new();
    let mut visit = specs.take_open();
    visit.extend_from_slice(holds.guarded());
    visit.extend_from_slice(holds.hashing_specs());
    visit.sort_unstable();
    visit.dedup();
    for sid in visit {
        let Some(batch) = specs.batch(sid) else {
            continue; // gone
        };
        let roots = || {
            specs
                .get(sid)
                .map(|st| lock(st.roots()))
                .unwrap_or_default()
        };
        match holds.ask(sid, (now, wall), batch, roots) {
            answer @ (Answer::Close | Answer::Drop) => {
                let (changes, carried) = holds.carry(sid, now, specs.take(sid));
                specs.put_back(sid, now, carried);
                match answer {
                    Answer::Drop => out.dropped.push((sid, changes)),
                    _ => out.closed.push((sid, changes)),
                }
            }
            Answer::Release => out.released.push(sid),
            Answer::Wait => {}
        }
        if let Some(batch) = specs.batch(sid)
            && holds.deadline(sid, batch).is_some()
        {
            keep.push(sid);
        }
    }
    specs.keep_open(keep);
    out
}

/// When the engine wakes next for a batch: the earliest one due (with its
/// holds), or a hold's next look.
pub(super) fn next_deadline(specs: &SpecTable, holds: &Holds) -> Option<Instant> {
    specs
        .open_ids()
        .iter()
        .chain(holds.guarded())
        .chain(holds.hashing_specs())
        .filter_map(|&sid| holds.deadline(sid, specs.batch(sid)?))
        .min()
}

impl Engine {
    /// Publishes the batch of `sid`: the one given, or its open one. An
    /// empty one only with a first batch's mark (`restore.rs`'s). A spec
    /// that compares contents has its files' hashes read first, off the
    /// engine's thread (`hashing.rs`): the batch waits, not the engine.
    pub(super) fn emit(
        &mut self,
        sid: SpecId,
        changes: Option<Vec<Change>>,
        mark: Option<Restore>,
    ) {
        let changes = changes.unwrap_or_else(|| {
            self.holds.closed(sid);
            self.specs.take(sid)
        });
        if self.contents.compares(sid) {
            self.hash_then_deliver(sid, changes, mark);
        } else {
            self.deliver(sid, changes, mark);
        }
    }

    /// Publishes `changes` of `sid` as a batch (`mark`: a first batch's),
    /// with their metadata if the spec wants it.
    pub(super) fn deliver(&mut self, sid: SpecId, mut changes: Vec<Change>, mark: Option<Restore>) {
        if changes.is_empty() && mark.is_none() {
            return;
        }
        if self.specs.get(sid).is_some_and(|st| st.wants_meta()) {
            self.fill_meta(&mut changes);
        }
        if let Some(st) = self.specs.get(sid) {
            self.out.batch(
                sid,
                st.name(),
                st.generation(),
                changes,
                self.clock.wall(),
                mark,
            );
        }
    }

    /// The last batches of spec generation `sid`, retired by an update:
    /// those waiting for their hashes go with what was read (nothing is
    /// waited for any more), then its open batch, delivered (its files
    /// without hashes: reported, whatever they hold) or dropped, as its
    /// holds say.
    pub(super) fn close_retiring(&mut self, sid: SpecId) {
        for b in self.holds.take_hashing(sid) {
            self.deliver_read(b);
        }
        match self.holds.disposal(sid) {
            Closing::Drop => self.drop_batch(sid, None),
            _ => {
                self.holds.closed(sid);
                let changes = self.specs.take(sid);
                let changes = self
                    .contents
                    .filter(sid, changes, false, &|_: &std::path::Path| None);
                self.deliver(sid, changes, None);
            }
        }
    }

    /// Gives each change of a closing batch that leaves its entry in place
    /// and has no metadata (no look within the batch `stat`ed it: a read
    /// found it) what the entry is now: from its directory's polls if only
    /// they watch it (their last look is the newest; a hung mount is not
    /// `stat`ed on the engine's thread), else from an `lstat`. None when
    /// what is there now is of another type (it changed again: a later
    /// batch says so) or is gone.
    fn fill_meta(&self, changes: &mut [Change]) {
        for c in changes {
            if c.kind == ChangeKind::Removed || c.meta.is_some() {
                continue;
            }
            let (Some(dir), Some(name)) = (c.path.parent(), c.path.file_name()) else {
                continue;
            };
            let now = match self.index.lookup(dir) {
                Some(id) if self.polled_only(id) => self
                    .polls
                    .picture(id)
                    .and_then(|p| p.get(name))
                    .and_then(|s| Some((s.kind, s.meta()?))),
                _ => fs::lstat(&c.path),
            };
            c.meta = now
                .filter(|(t, _)| *t == c.file_type)
                .map(|(_, m)| Box::new(m));
        }
    }

    /// Closes the open batch of `sid` and keeps it from every subscriber
    /// (what a declared hold held, for a spec that drops it): journaled
    /// and counted (`publish.rs`), its files' hashes forgotten (the next
    /// change of one is reported, whatever it holds).
    pub(super) fn drop_batch(&mut self, sid: SpecId, changes: Option<Vec<Change>>) {
        let changes = changes.unwrap_or_else(|| {
            self.holds.closed(sid);
            self.specs.take(sid)
        });
        if changes.is_empty() {
            return;
        }
        self.contents.forget_paths(sid, &changes);
        if let Some(st) = self.specs.get(sid) {
            self.out.dropped(sid, st.name(), st.generation(), &changes);
        }
    }

    /// Closes the open batch of `sid` now, as its holds say (delivered,
    /// dropped, or left open).
    pub(super) fn close_as(&mut self, sid: SpecId, closing: Closing) {
        match closing {
            Closing::Deliver => self.emit(sid, None, None),
            Closing::Drop => self.drop_batch(sid, None),
            Closing::Keep => {}
        }
    }

    /// Closes the batches that are due, and those of specs whose barrier
    /// passed (`synced`) whatever their windows say (but as their holds
    /// say).
    pub(super) fn flush_batches(&mut self, synced: &[(SpecId, Barrier)]) {
        self.deliver_hashed();
        for &(sid, barrier) in synced {
            let closing = self.holds.on_barrier(sid, barrier);
            self.close_as(sid, closing);
        }
        self.look_at_writes();
        let now = (self.clock.now(), self.clock.wall());
        let due = take_due(&mut self.specs, &mut self.holds, now, fs::vcs_lock);
        for sid in due.released {
            // Its lock went: the writes made before are all in once a
            // barrier passes, which closes the batch.
            if let Some(name) = self.specs.get(sid).map(|st| st.name().to_owned()) {
                let deadline = self.clock.now() + super::sync::INTERNAL_DEADLINE;
                self.start_barrier(name, deadline, None, None);
            }
        }
        for (sid, changes) in due.dropped {
            self.drop_batch(sid, Some(changes));
        }
        let long = due.closed.len() > 8;
        for (i, (sid, changes)) in due.closed.into_iter().enumerate() {
            self.emit(sid, Some(changes), None);
            if i == 0 && long {
                // A consumer woken by the first batch may have been put on
                // this CPU: let it take it before the rest of the pass.
                std::thread::yield_now();
            }
        }
    }

    /// Hands a raw change at `id/name` to every spec it concerns, and
    /// notes it if it is an ignore file: the one way a change of an
    /// indexed directory's entry is routed. `hinted`: a `Modified` the OS
    /// hinted at (an apply's guard may hold it back). `meta`: what the
    /// look that found it `stat`ed, if it did.
    pub(super) fn route(
        &mut self,
        id: DirId,
        name: &OsStr,
        kind: ChangeKind,
        ft: FileType,
        hinted: bool,
        meta: Option<&Meta>,
    ) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        self.specs
            .route(self.now, node, name, kind, ft, hinted, meta);
        if self.holds.any_write_holds() {
            self.note_write(id, name, kind, ft, meta);
        }
        // A rescan's look under way may be older than this change.
        self.rescans.touched(id, name);
        self.note_ignore_file(id, name);
    }
}
