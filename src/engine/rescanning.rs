//! The steps of `rescan_every`: a rescan's barrier started when it is due,
//! and the rescan of a spec once its barrier passed (each directory looked at,
//! what no event told of delivered and counted). The schedule, pictures and
//! counts are `rescan.rs`'s.

use std::time::SystemTime;

use super::Engine;
use super::rescan::before;
use super::trace;
use crate::fs::{self};
use crate::index::{DirId, SpecId};

impl Engine {
    /// Starts the barrier of every spec whose rescan is due.
    pub(super) fn rescan_due(&mut self) {
        for sid in self.rescans.due(self.clock.now()) {
            let Some(name) = self.specs.get(sid).map(|s| s.name().to_owned()) else {
                continue;
            };
            let deadline = self.clock.now() + super::sync::INTERNAL_DEADLINE;
            self.start_barrier(name, deadline, None, Some(self.clock.wall()));
        }
    }

    /// The rescan of spec `sid`, its barrier (begun at `began`) passed.
    pub(super) fn rescan_spec(&mut self, sid: SpecId, began: SystemTime) {
        if !self.watches.holds_os_watches() {
            return; // a manager that polls everything: polling is this
        }
        let ids = self
            .index
            .ids_where(|id, n| n.covers(sid) && n.complete() && !self.polls.contains(id));
        trace::bind!(dirs = ids.len());
        let mut missed = 0;
        for id in ids {
            missed += self.rescan_dir(id, began);
        }
        self.rescans.count(sid, missed);
        trace::traced! {
            if missed > 0 {
                trace::event!(
                    WARN,
                    spec = self.specs.name_of(sid),
                    missed,
                    dirs,
                    "rescan found changes the OS did not report"
                );
            } else {
                trace::event!(
                    TRACE,
                    spec = self.specs.name_of(sid),
                    dirs,
                    "rescan found nothing missed"
                );
            }
        }
    }

    /// Reads directory `id` and `stat`s its entries; delivers what no
    /// event told of before `began`. Returns how many changes that is.
    fn rescan_dir(&mut self, id: DirId, began: SystemTime) -> u64 {
        let Some(node) = self.index.get(id) else {
            return 0;
        };
        let path = node.path().clone();
        let hash = self.wants_hash(id);
        let old = self.rescans.picture(id);
        let baseline = old.is_none();
        let Ok(mut look) = fs::look(&path, true, old, hash, self.clock.wall()) else {
            return 0; // gone or unreadable: its events and retries tell
        };
        self.syncs.cookies_found(look.take_cookies(&path));
        let Some(node) = self.index.get(id) else {
            return 0;
        };
        let old = self.rescans.picture(id);
        let mut picture = look.picture;
        let mut modified = look.modified;
        let mut missed = 0;
        let mut later = Vec::new();
        for (name, sig) in picture.entries() {
            let known = node.entries().get(name);
            let recent = !before(sig.ctime, began);
            let written = modified.iter().any(|(n, _)| n == name);
            if known != Some(sig.kind) {
                if known.is_none() && recent {
                    // Made since the barrier: its event may be on the way.
                    // Left for the next rescan, which counts it if not.
                    later.push((name.clone(), None));
                    continue;
                }
                // Created or retyped without an event.
                missed += 1;
            } else if written {
                if recent {
                    // As above: compared again at the next rescan.
                    later.push((name.clone(), old.and_then(|o| o.get(name)).copied()));
                    continue;
                }
                missed += 1;
            }
        }
        let mut listing = picture.listing();
        for (name, keep) in later {
            modified.retain(|(n, _)| *n != name);
            if keep.is_none() {
                listing.retain(|(n, _)| *n != name);
            }
            picture.revert(&name, keep);
        }
        // Removed without an event (when, no one can tell: counted).
        missed += node
            .entries()
            .iter()
            .filter(|(n, _)| {
                listing
                    .binary_search_by(|(l, _)| l.as_encoded_bytes().cmp(n.as_encoded_bytes()))
                    .is_err()
            })
            .count() as u64;
        if baseline {
            // The first look: nothing to compare contents with yet.
            modified.clear();
        }
        self.apply_listing(id, &listing, &modified);
        if self.index.get(id).is_some() {
            self.rescans.set_picture(id, picture);
        }
        missed
    }
}
