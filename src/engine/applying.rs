//! Applying specs: a spec created or replaced (attached, walked, its
//! update's net effect or its initial scan reported, the old generation
//! retired), and deleted. The applied specs are `specs.rs`'s; the other
//! owners forget a retired generation through `forget.rs`.

use std::path::PathBuf;

use super::Engine;
use super::trace;
use crate::batch::change::{ChangeKind, FileType};
use crate::ids::Generation;
use crate::ignore::Matcher;
use crate::index::SpecId;
use crate::spec::WatchSpec;
use crate::state::restore::StateRefused;
use crate::state::snapshot::Snapshot;

impl Engine {
    /// Creates or replaces the named spec. The old generation's open batch
    /// is closed first (nothing seen is lost), then the new one is attached
    /// before the old one lets go of its watches (no gap).
    pub(super) fn upsert(
        &mut self,
        name: String,
        generation: Generation,
        spec: WatchSpec,
        matcher: Matcher,
        state: Option<Result<Snapshot, StateRefused>>,
    ) {
        trace::span!(INFO, "apply", spec = %name, generation = generation.0);
        let roots = spec.paths.clone();
        let (sid, old) = self.specs.insert(name, generation, spec, matcher);
        if let Some(st) = self.specs.get(sid) {
            self.holds.add(sid, st.name(), st.options());
        }
        if let Some(old) = old {
            // Its last batch first, so that it is journaled with it
            // (dropped, if a hold held it to drop it).
            self.close_retiring(old);
        }
        let wall = self.clock.wall();
        let name = self
            .specs
            .get(sid)
            .expect("just inserted")
            .name()
            .to_owned();
        // A state is restored only by a new spec (an update goes on from
        // what the old generation saw).
        let state = state.filter(|_| old.is_none());
        let restored = match &state {
            Some(Ok(snap)) => Some(snap.header.seq),
            _ => None,
        };
        self.out.started(sid, &name, generation, wall, restored);
        let initial_scan = self.specs.get(sid).is_some_and(|st| st.initial_scan());
        if let Some(every) = self.specs.get(sid).and_then(|st| st.rescan_every()) {
            self.rescans.add(sid, every, self.clock.now());
        }
        self.progress.begin(sid, self.clock.now());
        for root in &roots {
            self.attach_root(sid, root, false);
        }
        self.walk_ends();
        self.start_contents(sid);
        // An update's guard (a new spec has none: with no `Created` of its
        // own to stand for them, writes during its walk must be reported).
        if let Some(old) = old {
            let cookies = self.guard_cookies(sid);
            self.specs.guard(sid, old, cookies, self.clock.now());
        }
        if let Some(state) = state {
            self.first_batch(sid, state, initial_scan);
        } else if initial_scan {
            self.scan_initial(sid);
        } else if let Some(old) = old {
            self.report_update(old, sid);
        }
        if let Some(old) = old {
            self.retire(old);
        }
        self.watches.reconcile_soon();
    }

    /// The net effect of an update from generation `old` to `new`, as
    /// changes of `new`: entries it shows that `old` did not (an ignore
    /// removed, a path added) are `Created`, entries `old` showed that it
    /// does not are `Removed`, so that a consumer's mirror stays exact
    /// across the update. (A root itself, listed in its parent, is not
    /// among them; what is below it is.)
    fn report_update(&mut self, old: SpecId, new: SpecId) {
        let (Some(o), Some(n)) = (self.specs.get(old), self.specs.get(new)) else {
            return;
        };
        let (old_m, new_m) = (o.matcher().clone(), n.matcher().clone());
        let now = self.now;
        let ids = self
            .index
            .ids_where(|_, node| node.covers(old) || node.covers(new));
        let mut diffs = Vec::new();
        for id in ids {
            let Some(node) = self.index.get(id) else {
                continue;
            };
            let (in_old, in_new) = (node.covers(old), node.covers(new));
            for (name, t) in node.entries().iter() {
                let p = node.path().join(name);
                let dir = t == FileType::Dir;
                let was = in_old && !old_m.is_ignored(&p, dir);
                let is = in_new && !new_m.is_ignored(&p, dir);
                match (was, is) {
                    (false, true) => diffs.push((p, ChangeKind::Created, t)),
                    (true, false) => diffs.push((p, ChangeKind::Removed, t)),
                    _ => {}
                }
            }
        }
        for (p, kind, t) in diffs {
            self.specs.record_unfiltered(new, now, p, kind, t);
        }
    }

    /// Reports every entry spec `sid` sees (below its roots, and its
    /// roots themselves when they are not directories) as created, for it
    /// alone.
    pub(super) fn scan_initial(&mut self, sid: SpecId) {
        let Some(matcher) = self.specs.get(sid).map(|st| st.matcher()) else {
            return;
        };
        let found: Vec<(PathBuf, FileType)> = self
            .spec_dirs(sid)
            .iter()
            .flat_map(|d| {
                d.visible(matcher)
                    .into_iter()
                    .map(|(name, t)| (d.path.join(name), t))
            })
            .collect();
        let now = self.now;
        for (path, t) in found {
            self.specs
                .record_unfiltered(sid, now, path, ChangeKind::Created, t);
        }
    }

    /// Deletes the named spec: its pending changes are dropped.
    pub(super) fn delete(&mut self, name: &str) {
        let Some(sid) = self.specs.id_of(name) else {
            return;
        };
        self.retire(sid);
        self.watches.reconcile_soon();
        self.out.deleted(name);
    }

    /// Removes every trace of a spec generation: registrations, unused
    /// directories, and the facts other owners keep about it.
    fn retire(&mut self, sid: SpecId) {
        for id in self.index.detach(sid) {
            self.free_node(id);
        }
        self.forget_spec(sid);
    }
}
