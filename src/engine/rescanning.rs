//! The steps of `rescan_every`: a rescan's barrier started when it is due,
//! the rescan of a spec once its barrier passed (a look at each directory
//! handed to the scanner), and each look applied when it comes back (what
//! no event told of delivered and counted, the names the engine looked at
//! meanwhile left as the engine saw them). The schedule, pictures, looks
//! under way and counts are `rescan.rs`'s.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::SystemTime;

use super::Engine;
use super::rescan::{Flight, before};
use super::trace;
use crate::batch::change::FileType;
use crate::fs::{Look, Picture};
use crate::index::{DirId, SpecId};
use crate::scanner::{Finding, Job, Purpose};

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

    /// The rescan of spec `sid`, its barrier (begun at `began`) passed:
    /// a look at each of its directories that hold an OS watch, on the
    /// scanner. Returns the looks not done yet, which the barrier waits
    /// for: the last handed over first.
    pub(super) fn rescan_spec(
        &mut self,
        sid: SpecId,
        began: SystemTime,
    ) -> Vec<(Purpose, DirId, u64)> {
        if !self.watches.holds_os_watches() {
            return Vec::new(); // a manager that polls everything: polling is this
        }
        let ids = self
            .index
            .ids_where(|id, n| n.covers(sid) && n.complete() && !self.polls.contains(id));
        let mut jobs = Vec::new();
        let mut asked = Vec::with_capacity(ids.len());
        for id in ids {
            let (token, now) = self.rescans.issue(id, sid, began);
            asked.push((id, token));
            if now {
                jobs.extend(self.rescan_job(id, token));
            }
        }
        self.hand_over(Purpose::Rescan, jobs, asked)
    }

    /// The job of rescan look `token` at directory `id`.
    fn rescan_job(&self, id: DirId, token: u64) -> Option<Job> {
        Some(Job {
            purpose: Purpose::Rescan,
            dir: id,
            token,
            path: self.index.get(id)?.path().to_path_buf(),
            fs_key: self.rescans.fs_key(id),
            before: self.rescans.shared_picture(id),
            hash: self.wants_hash(id),
            wall: self.clock.wall(),
        })
    }

    /// A rescan look came back: applied if it is still the one under way
    /// (the directory still indexed at its path, complete, not polled);
    /// returns the job of the look asked for meanwhile, if any.
    pub(super) fn rescan_found(&mut self, f: Finding) -> Option<Job> {
        let flight = self.rescans.take_finding(f.dir, f.token)?;
        let current = !self.polls.contains(f.dir)
            && self
                .index
                .get(f.dir)
                .is_some_and(|n| n.complete() && **n.path() == *f.path);
        // An error: gone or unreadable, its events and retries tell.
        if current && let Ok(look) = f.look {
            let missed = self.rescan_apply(f.dir, &f.path, look, &flight);
            if self.specs.contains(flight.sid) {
                self.rescans.count(flight.sid, missed);
            }
        }
        let token = self.rescans.follow_up(f.dir)?;
        self.rescan_job(f.dir, token)
    }

    /// Applies a rescan's look at directory `id` (at `path`): delivers
    /// what no event told of before the barrier began, leaves what may
    /// have its event on the way for the next rescan, and leaves the
    /// names the engine looked at meanwhile as it saw them. Returns how
    /// many changes no event told of.
    fn rescan_apply(&mut self, id: DirId, path: &Path, mut look: Look, flight: &Flight) -> u64 {
        // Sync cookies are left out, not counted as found: the directory
        // has an OS watch, and a cookie counts once its event is handled,
        // after every event queued before it. The look may have seen one
        // whose event (and those before it) the engine has not read yet.
        look.take_cookies(path);
        self.rescans.seen_on(id, look.fs_key);
        let Some(node) = self.index.get(id) else {
            return 0;
        };
        let (began, touched) = (flight.began, &flight.touched);
        // What the look compared with, kept current since by events.
        let old = self.rescans.picture(id);
        let mut picture = look.picture;
        let mut modified = look.modified;
        let mut missed = 0;
        let mut later = Vec::new();
        for (name, sig) in picture.iter() {
            if touched.contains(name) {
                continue; // the engine's view stands (below)
            }
            let known = node.entries().get(name);
            let recent = !before(sig.ctime, began);
            let written = modified.iter().any(|(n, _)| n == name);
            if known != Some(sig.kind) {
                if known.is_none() && recent {
                    // Made since the barrier: its event may be on the way.
                    // Left for the next rescan, which counts it if not.
                    later.push((name.to_os_string(), None));
                    continue;
                }
                // Created or retyped without an event.
                missed += 1;
            } else if written {
                if recent {
                    // As above: compared again at the next rescan.
                    later.push((name.to_os_string(), old.and_then(|o| o.get(name))));
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
        // The names the engine looked at while the scanner looked: the
        // index's entry and the signature its event kept, not the look's.
        let seen = |name: &OsStr| node.entries().get(name);
        keep_engine_view(
            touched,
            seen,
            old,
            &mut picture,
            &mut listing,
            &mut modified,
        );
        // Removed without an event (when, no one can tell: counted).
        missed += node
            .entries()
            .iter()
            .filter(|(n, _)| at(&listing, n).is_err())
            .count() as u64;
        self.apply_listing(id, &listing, &modified);
        if self.index.get(id).is_some() {
            self.rescans.set_picture(id, picture);
        }
        missed
    }

    /// Spec `sid`'s rescan ended (its barrier passed, its looks applied).
    pub(super) fn rescan_ended(&mut self, sid: SpecId) {
        let (dirs, missed) = self.rescans.take_round(sid);
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
        let _ = (dirs, missed);
    }
}

/// Where `name` is in `listing` (sorted by name), or would be.
fn at(listing: &[(OsString, FileType)], name: &OsStr) -> Result<usize, usize> {
    listing.binary_search_by(|(l, _)| l.as_encoded_bytes().cmp(name.as_encoded_bytes()))
}

/// A look of the scanner's at a directory with an OS watch, to apply: for
/// the names the engine looked at while it was under way (`touched`:
/// events go on meanwhile, and may be newer than the look), the engine's
/// view stands over the look's. Each keeps the index's entry (`seen`) in
/// `listing`, the signature of the picture `old` in `picture` (what the
/// look compared with, or what events kept since: a change no event told
/// of is then still found by the next look), and is not `modified`.
pub(super) fn keep_engine_view(
    touched: &BTreeSet<OsString>,
    seen: impl Fn(&OsStr) -> Option<FileType>,
    old: Option<&Picture>,
    picture: &mut Picture,
    listing: &mut Vec<(OsString, FileType)>,
    modified: &mut Vec<(OsString, bool)>,
) {
    for name in touched {
        modified.retain(|(n, _)| n != name);
        picture.set(name, old.and_then(|o| o.get(name)));
        match (at(listing, name), seen(name)) {
            (Ok(i), Some(t)) => listing[i].1 = t,
            (Ok(i), None) => {
                listing.remove(i);
            }
            (Err(i), Some(t)) => listing.insert(i, (name.clone(), t)),
            (Err(_), None) => {}
        }
    }
}
