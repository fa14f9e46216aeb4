//! Sync barriers (Watchman's cookies, in-process): the steps that start
//! a barrier (the caller's, an apply's guard, a rescan's), complete it
//! once its cookies are seen, and answer it. The barriers waiting and the
//! cookies seen are `sync.rs`'s.
//!
//! A barrier registers first, then the engine itself creates one cookie
//! file per root (in the root, or the nearest existing directory above
//! it). The OS reports a watcher's events in order, so once every cookie
//! has come back through the inbox every event before it has been handled;
//! at the end of that pass the spec's polled directories are polled once
//! more (those without an OS watch on the scanner: the barrier is parked
//! until those looks are applied, in a later pass; a rescan's barrier
//! likewise waits for the rescan's looks), its links looked at
//! again, its open batch closed, and the caller answered. A cookie that
//! cannot be created costs a rescan of its root instead. Cookies are
//! removed before the answer and never indexed. A root that cannot be
//! `stat`ed (storage that fails) gets no cookie and its barrier times out.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use crossbeam_channel::Sender;

use super::Engine;
use super::holds::Barrier;
use super::polling::look_done;
use super::specs::GUARD_DEADLINE;
use super::sync::{HoldMark, Wait, cookies_for};
use crate::fs;
use crate::index::{DirId, SpecId};
use crate::scanner::Purpose;

/// A barrier whose cookies have all been seen.
pub(super) struct Ready {
    sid: Option<SpecId>,
    wait: Wait,
}

impl Engine {
    /// Registers a barrier for spec `name`, then creates its cookies.
    pub(super) fn start_sync(&mut self, name: String, deadline: Instant, reply: Sender<bool>) {
        self.start_barrier(name, deadline, Some(reply), None);
    }

    /// A barrier for spec `name`: the caller's (`reply`), or the engine's
    /// own before a rescan (`rescan`: when it began).
    pub(super) fn start_barrier(
        &mut self,
        name: String,
        deadline: Instant,
        reply: Option<Sender<bool>>,
        rescan: Option<SystemTime>,
    ) {
        let Some(sid) = self.specs.id_of(&name) else {
            if let Some(r) = reply {
                let _ = r.send(false);
            }
            return;
        };
        let mut all = self.specs.get(sid).expect("named spec").roots().to_vec();
        // A root whose file system is away reports nothing until it is
        // back: nothing to wait for there (and no cookie left in the
        // directory below its mount).
        all.retain(|r| !self.mounts.holds(r));
        // A root that does not exist gets no cookie (it would go in an
        // ancestor, outside the spec's paths, even `/`): the name its
        // nearest existing ancestor waits for is looked at instead, which
        // is exact (nothing is there to be stale).
        let (roots, missing): (Vec<PathBuf>, Vec<PathBuf>) =
            all.into_iter().partition(|r| fs::exists(r));
        // A root that cannot be `stat`ed though it may be there (`EIO`,
        // `ESTALE`: storage that fails) is neither missing (its entry
        // stays) nor a place for a cookie: the barrier waits for one that
        // is never made, and times out, as for a mount that hangs: nothing
        // can be said of what changed there.
        let (missing, failing): (Vec<PathBuf>, Vec<PathBuf>) =
            missing.into_iter().partition(|r| fs::absent(r));
        for root in missing {
            self.look_for_missing_root(sid, &root);
        }
        let cookies = cookies_for(roots);
        let never: Vec<PathBuf> = cookies_for(failing).into_iter().map(|(c, _)| c).collect();
        self.syncs.begin(
            name,
            cookies
                .iter()
                .map(|(c, _)| c.clone())
                .chain(never)
                .collect(),
            deadline,
            reply,
            rescan,
        );
        for (cookie, root) in cookies {
            let polled_only = cookie
                .parent()
                .and_then(|d| self.index.lookup(d))
                .is_some_and(|id| self.polled_only(id));
            match fs::create_cookie(&cookie) {
                // No event will bring it: the spec's polled directories
                // are polled when the barrier completes.
                Ok(_) if polled_only => self.syncs.cookie_made(cookie, false),
                Ok(_) => self.syncs.cookie_made(cookie, true),
                Err(_) => {
                    // No cookie (a read-only or permission-denied
                    // directory): rescan the root instead, a weaker barrier
                    // that loses no created or removed entry.
                    self.syncs.cookie_not_made(&cookie);
                    let since: SystemTime = self.recovery.overflow_since();
                    self.rescan_under(&root, Some(since));
                }
            }
        }
    }

    /// A look at `paths` of spec `name` (`Manager::look`): a barrier with
    /// no cookie. Each path is looked at as an OS event about it would
    /// make the engine look (`lstat` of the name; the first directory on
    /// the way down that the index does not hold read), except where the
    /// nearest directory the index holds on its way is polled: that
    /// directory is polled now (on the scanner), which finds what was
    /// written there too, and the barrier is parked until those looks are
    /// applied. Then the spec's batch closes and the caller is answered,
    /// as for a sync; the rest of the spec is not polled. Paths outside
    /// what the spec covers are passed over.
    pub(super) fn start_look(
        &mut self,
        name: String,
        paths: &[PathBuf],
        deadline: Instant,
        reply: Sender<bool>,
    ) {
        let Some(sid) = self.specs.id_of(&name) else {
            let _ = reply.send(false);
            return;
        };
        let mut polled = Vec::new();
        for path in paths {
            let Some(dir) = path.ancestors().skip(1).find_map(|d| self.index.lookup(d)) else {
                continue;
            };
            let covered = self
                .index
                .get(dir)
                .is_some_and(|n| n.covers(sid) || n.partial().iter().any(|p| p.spec == sid));
            if !covered {
                continue;
            }
            if self.polls.contains(dir) {
                if !polled.contains(&dir) {
                    polled.push(dir);
                }
            } else {
                self.os_event(crate::backend::OsEvent::Path {
                    path: path.clone(),
                    hint: crate::backend::Hint::Rescan,
                });
            }
        }
        let scans = self.poll_dirs(polled);
        self.syncs.look(name, deadline, reply, scans);
    }

    /// Creates (and at once removes) the cookies of an apply's guard for
    /// `sid`, after its reads and before its report: one in each existing
    /// root (or a file root's
    /// directory) that has an OS watch, so that its event comes back in
    /// queue order. Returns the cookies to wait for (none: no guard, as
    /// for a manager that polls).
    pub(super) fn guard_cookies(&mut self, sid: SpecId) -> Vec<PathBuf> {
        let Some(st) = self.specs.get(sid) else {
            return Vec::new();
        };
        if !self.watches.holds_os_watches() {
            return Vec::new();
        }
        let name = st.name().to_owned();
        let roots: Vec<PathBuf> = st
            .roots()
            .iter()
            .filter(|r| fs::exists(r) && !self.mounts.holds(r))
            .cloned()
            .collect();
        let mut created = Vec::new();
        for (cookie, _) in cookies_for(roots) {
            let heard = cookie.parent().is_some_and(|d| {
                self.index.lookup(d).is_some_and(|id| {
                    self.index
                        .get(id)
                        .is_some_and(|n| self.watches.has_watch(id, n.path(), !n.full().is_empty()))
                })
            });
            // Removed at once: its creation's event is the marker, and no
            // one sees the file after the apply (nor reads it as theirs).
            if heard && fs::create_cookie(&cookie).is_ok() {
                fs::remove_cookie(&cookie);
                created.push(cookie);
            }
        }
        if !created.is_empty() {
            let deadline = self.clock.now() + GUARD_DEADLINE;
            self.syncs.guard(name, &created, deadline);
        }
        created
    }

    /// Looks at the name under which root `root` of `sid` is awaited (it
    /// may have appeared).
    fn look_for_missing_root(&mut self, sid: SpecId, root: &Path) {
        let Some(nid) = self.index.find_partial(sid, root) else {
            return;
        };
        let name = self.index.get(nid).and_then(|n| {
            n.partial()
                .iter()
                .find(|p| p.spec == sid && p.root == root)
                .map(|p| p.name.clone())
        });
        if let Some(name) = name {
            self.handle_name(nid, &name, crate::backend::Hint::Rescan);
        }
    }

    /// The barriers whose cookies have all been seen, made complete: the
    /// spec's polled directories polled once more (they have no events to
    /// wait for) and its links looked at again (a link's target can change
    /// without an event). Their batches are closed by the caller. One that
    /// handed looks to the scanner is parked, and returned here (ready) in
    /// the pass that applies the last of them.
    pub(super) fn syncs_ready(&mut self) -> Vec<Ready> {
        let owners = (&self.polls, &self.rescans, &self.reloads);
        let scanned = self
            .syncs
            .take_scanned(|why, id, t| look_done(owners, why, id, t));
        let (guards, ready): (Vec<Wait>, Vec<Wait>) = self
            .syncs
            .take_ready()
            .into_iter()
            .partition(Wait::is_guard);
        for g in guards {
            g.remove_cookies();
        }
        let mut out = Vec::with_capacity(ready.len() + scanned.len());
        // A hold's barrier past its deadline counts as passed: a hold
        // never waits on storage that does not answer.
        for wait in self.syncs.take_expired_holds(self.clock.now()) {
            wait.remove_cookies();
            let sid = self.specs.id_of(wait.name());
            out.push(Ready { sid, wait });
        }
        for wait in scanned {
            let sid = self.specs.id_of(wait.name());
            if let Some(sid) = sid
                && wait.rescan().is_some()
            {
                self.rescan_ended(sid);
            }
            out.push(Ready { sid, wait });
        }
        for wait in ready {
            let sid = self.specs.id_of(wait.name());
            if let Some(sid) = sid {
                self.specs.end_guard(sid);
                let polled = self.poll_spec(sid);
                let outside = self.look_outside(true);
                // Handed over after the polls' looks: the last first.
                let mut scans = match wait.rescan() {
                    Some(began) => self.rescan_spec(sid, began),
                    None => Vec::new(),
                };
                scans.extend(polled);
                if let Some(token) = outside {
                    // (Handed over first: waited for last.)
                    scans.insert(0, (Purpose::Outside, 0, token));
                }
                self.revalidate_links_of(sid);
                if !self.roots.is_empty() {
                    self.settle();
                }
                if !scans.is_empty() {
                    // The scanner's looks come later: the barrier passes
                    // once they are applied.
                    self.syncs.park(wait, scans);
                    continue;
                }
                if wait.rescan().is_some() {
                    self.rescan_ended(sid);
                }
            }
            out.push(Ready { sid, wait });
        }
        out
    }

    /// Answers barriers whose batches have been delivered (one whose
    /// batch waits for its files' hashes is answered once it is out), and
    /// lets go of those whose caller gave up.
    pub(super) fn answer_syncs(&mut self, ready: Vec<Ready>) {
        for r in ready {
            match r.sid.and_then(|sid| Some((sid, self.holds.hashing(sid)?))) {
                Some((sid, token)) => {
                    self.syncs
                        .park_answer(r.wait, vec![(Purpose::Hash, sid as DirId, token)]);
                }
                None => r.wait.pass(),
            }
        }
        let holds = &self.holds;
        let out = self.syncs.take_answerable(|_, sid, token| {
            SpecId::try_from(sid).is_ok_and(|sid| holds.hashes_done(sid, token))
        });
        for w in out {
            w.pass();
        }
        for w in self.syncs.take_expired(self.clock.now()) {
            w.remove_cookies();
        }
    }
}

/// The specs of `ready` barriers (whose batches close now, as their
/// holds say), with the kind of each barrier.
pub(super) fn passed(ready: &[Ready]) -> Vec<(SpecId, Barrier)> {
    ready
        .iter()
        .filter_map(|r| {
            let kind = match r.wait.hold() {
                Some(HoldMark::Enter(id)) => Barrier::Enter(id),
                Some(HoldMark::Release(id)) => Barrier::Release(id),
                None if r.wait.is_caller() => Barrier::Caller,
                None if r.wait.rescan().is_some() => Barrier::Rescan,
                None => Barrier::Internal,
            };
            Some((r.sid?, kind))
        })
        .collect()
}
