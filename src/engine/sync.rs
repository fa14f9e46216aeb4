//! Sync barriers (Watchman's cookies, in-process): the only writer of the
//! barriers waiting and of the cookies seen.
//!
//! A barrier registers first, then the engine itself creates one cookie
//! file per root (in the root, or the nearest existing directory above
//! it). The OS reports a watcher's events in order, so once every cookie
//! has come back through the inbox every event before it has been handled;
//! at the end of that pass the spec's polled directories are polled once
//! more (those without an OS watch on the scanner: the barrier is parked
//! until those looks are applied, in a later pass), its links looked at
//! again, its open batch closed, and the caller answered. A cookie that cannot be created costs a rescan of its root
//! instead. Cookies are removed before the answer and never indexed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use crossbeam_channel::Sender;

use super::Engine;
use crate::index::{DirId, SpecId};

use crate::fs::{self, COOKIE_PREFIX};

struct Wait {
    name: String,
    /// Cookies not seen yet.
    remaining: BTreeSet<PathBuf>,
    /// Cookies created (removed when the wait ends).
    created: Vec<PathBuf>,
    deadline: Instant,
    /// The caller of `Manager::sync` (none for the engine's own).
    reply: Option<Sender<bool>>,
    /// A rescan's barrier, begun at this time: the spec is rescanned once
    /// it passes.
    rescan: Option<SystemTime>,
    /// An apply's guard (see `specs::Guard`): nothing to do when it
    /// passes but remove its cookies.
    guard: bool,
    /// Its cookies are all seen and the spec looked at; it waits for the
    /// scanner's looks at the spec's polled directories (directory,
    /// token) in `scans`, the last handed over first: the scanner is done
    /// with them in the order handed over, so each pass pops those done
    /// off the end (a barrier over 10,000 directories is not looked
    /// through whole after each finding).
    parked: bool,
    scans: Vec<(DirId, u64)>,
}

/// A barrier whose cookies have all been seen.
pub(super) struct Ready {
    sid: Option<SpecId>,
    wait: Wait,
}

#[derive(Default)]
pub(super) struct Syncs {
    waits: Vec<Wait>,
    /// Cookies found since the last end of pass (by events or reads).
    found: Vec<PathBuf>,
}

/// Barrier numbers, unique in the process: two managers syncing the same
/// root never name a cookie alike.
static NEXT_BARRIER: AtomicU64 = AtomicU64::new(1);

/// How long the engine's own barriers (before a rescan) may wait.
pub(super) const INTERNAL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

impl Syncs {
    /// A read or an event found the cookie at `path`.
    pub(super) fn cookie_found(&mut self, path: PathBuf) {
        self.found.push(path);
    }

    /// A read found these cookies.
    pub(super) fn cookies_found(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.found.extend(paths);
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.waits.iter().map(|w| w.deadline).min()
    }

    /// Whether some barrier waits for cookies a read may find (an apply
    /// guard's are gone as soon as made; a parked one waits for looks).
    pub(super) fn waiting(&self) -> bool {
        self.waits.iter().any(|w| !w.guard && !w.parked)
    }

    /// Counts the cookies found; takes the waits whose cookies are all
    /// seen. Cookies nobody waits for are forgotten.
    fn take_ready(&mut self) -> Vec<Wait> {
        for c in self.found.drain(..) {
            for w in &mut self.waits {
                w.remaining.remove(&c);
            }
        }
        let (ready, waiting) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.remaining.is_empty() && !w.parked);
        self.waits = waiting;
        ready
    }

    /// Takes the waits whose cookies were seen earlier and whose polled
    /// directories' looks are all `done` now.
    fn take_scanned(&mut self, done: impl Fn(DirId, u64) -> bool) -> Vec<Wait> {
        for w in &mut self.waits {
            // (Done for good once done: a look applied or overtaken, or
            // its directory polled no more.)
            while let Some(&(id, t)) = w.scans.last()
                && done(id, t)
            {
                w.scans.pop();
            }
        }
        let (ready, waiting) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.parked && w.scans.is_empty());
        self.waits = waiting;
        ready
    }

    /// Takes the waits whose caller has given up by `now`.
    fn take_expired(&mut self, now: Instant) -> Vec<Wait> {
        let (expired, waiting) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.deadline <= now);
        self.waits = waiting;
        expired
    }
}

/// A cookie path for each root, unique in the process, with its root.
fn cookies_for(roots: Vec<PathBuf>) -> Vec<(PathBuf, PathBuf)> {
    let id = NEXT_BARRIER.fetch_add(1, Ordering::Relaxed);
    roots
        .into_iter()
        .enumerate()
        .map(|(i, root)| {
            let c = fs::cookie_dir(&root)
                .join(format!("{COOKIE_PREFIX}{}-{id}-{i}", std::process::id()));
            (c, root)
        })
        .collect()
}

fn remove_cookies(w: &Wait) {
    for c in &w.created {
        fs::remove_cookie(c);
    }
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
        let all = self.specs.get(sid).expect("named spec").roots().to_vec();
        // A root that does not exist gets no cookie (it would go in an
        // ancestor, outside the spec's paths, even `/`): the name its
        // nearest existing ancestor waits for is looked at instead, which
        // is exact (nothing is there to be stale).
        let (roots, missing): (Vec<PathBuf>, Vec<PathBuf>) =
            all.into_iter().partition(|r| fs::exists(r));
        for root in missing {
            self.look_for_missing_root(sid, &root);
        }
        let cookies = cookies_for(roots);
        self.syncs.waits.push(Wait {
            name,
            remaining: cookies.iter().map(|(c, _)| c.clone()).collect(),
            created: Vec::new(),
            deadline,
            reply,
            rescan,
            guard: false,
            parked: false,
            scans: Vec::new(),
        });
        let paths: Vec<PathBuf> = cookies.iter().map(|(c, _)| c.clone()).collect();
        self.watches.barrier(&paths);
        for (cookie, root) in cookies {
            let polled_only = cookie
                .parent()
                .and_then(|d| self.index.lookup(d))
                .is_some_and(|id| self.polled_only(id));
            let made = fs::create_cookie(&cookie);
            let w = self.syncs.waits.last_mut().expect("just pushed");
            match made {
                Ok(_) if polled_only => {
                    // No event will bring it: the spec's polled
                    // directories are polled when the barrier completes.
                    w.remaining.remove(&cookie);
                    w.created.push(cookie);
                }
                Ok(_) => w.created.push(cookie),
                Err(_) => {
                    // No cookie (a read-only or permission-denied
                    // directory): rescan the root instead, a weaker barrier
                    // that loses no created or removed entry.
                    w.remaining.remove(&cookie);
                    let since: SystemTime = self.recovery.overflow_since();
                    self.rescan_under(&root, Some(since));
                }
            }
        }
        // A backend that looks for changes by itself (a poller) looks now.
        self.watches.look_now();
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
            .filter(|r| fs::exists(r))
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
            self.syncs.waits.push(Wait {
                name,
                remaining: created.iter().cloned().collect(),
                created: Vec::new(),
                deadline: self.clock.now() + super::specs::GUARD_DEADLINE,
                reply: None,
                rescan: None,
                guard: true,
                parked: false,
                scans: Vec::new(),
            });
        }
        created
    }

    /// The cookies apply guards still wait for (the test harness plays
    /// the OS).
    #[cfg(test)]
    pub(super) fn guard_cookies_waiting(&self) -> Vec<PathBuf> {
        self.syncs
            .waits
            .iter()
            .filter(|w| w.guard)
            .flat_map(|w| w.remaining.iter().cloned())
            .collect()
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
        let polls = &self.polls;
        let scanned = self.syncs.take_scanned(|id, t| polls.done(id, t));
        let (guards, ready): (Vec<Wait>, Vec<Wait>) =
            self.syncs.take_ready().into_iter().partition(|w| w.guard);
        for g in guards {
            remove_cookies(&g);
        }
        let mut out = Vec::with_capacity(ready.len() + scanned.len());
        for wait in scanned {
            out.push(Ready {
                sid: self.specs.id_of(&wait.name),
                wait,
            });
        }
        for mut wait in ready {
            let sid = self.specs.id_of(&wait.name);
            if let Some(sid) = sid {
                self.specs.end_guard(sid);
                let scans = self.poll_spec(sid);
                self.look_outside(true);
                if let Some(began) = wait.rescan {
                    self.rescan_spec(sid, began);
                }
                self.revalidate_links_of(sid);
                if !self.roots.is_empty() {
                    self.settle();
                }
                if !scans.is_empty() {
                    // The scanner's looks come later: the barrier passes
                    // once they are applied.
                    wait.parked = true;
                    wait.scans = scans;
                    self.syncs.waits.push(wait);
                    continue;
                }
            }
            out.push(Ready { sid, wait });
        }
        out
    }

    /// Answers barriers whose batches have been delivered, and lets go of
    /// those whose caller gave up.
    pub(super) fn answer_syncs(&mut self, ready: Vec<Ready>) {
        for r in ready {
            remove_cookies(&r.wait);
            if let Some(reply) = &r.wait.reply {
                let _ = reply.send(true);
            }
        }
        for w in self.syncs.take_expired(self.clock.now()) {
            remove_cookies(&w);
        }
    }
}

/// The specs of `ready` barriers (whose batches close now).
pub(super) fn specs_of(ready: &[Ready]) -> Vec<SpecId> {
    ready.iter().filter_map(|r| r.sid).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn wait(
        name: &str,
        cookies: &[&str],
        deadline: Instant,
    ) -> (Wait, crossbeam_channel::Receiver<bool>) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        (
            Wait {
                name: name.into(),
                remaining: cookies.iter().map(PathBuf::from).collect(),
                created: Vec::new(),
                deadline,
                reply: Some(tx),
                rescan: None,
                guard: false,
                parked: false,
                scans: Vec::new(),
            },
            rx,
        )
    }

    #[test]
    fn a_barrier_is_ready_once_every_cookie_is_seen() {
        let t0 = Instant::now();
        let mut s = Syncs::default();
        let (a, _ra) = wait("a", &["/r/c1", "/q/c2"], t0 + Duration::from_secs(1));
        let (b, _rb) = wait("b", &["/r/c3"], t0 + Duration::from_secs(1));
        s.waits.extend([a, b]);
        s.cookie_found("/r/c1".into());
        s.cookie_found("/stray".into());
        assert!(s.take_ready().is_empty());
        assert!(s.found.is_empty(), "found cookies are used up");
        s.cookie_found("/q/c2".into());
        let ready = s.take_ready();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].name, "a");
        assert_eq!(s.waits.len(), 1);
        assert_eq!(s.next_deadline(), Some(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn a_barrier_nobody_waits_for_expires() {
        let t0 = Instant::now();
        let mut s = Syncs::default();
        let (a, ra) = wait("a", &["/r/c1"], t0 + Duration::from_millis(10));
        s.waits.push(a);
        assert!(s.take_expired(t0).is_empty());
        let gone = s.take_expired(t0 + Duration::from_millis(10));
        assert_eq!(gone.len(), 1);
        drop(gone);
        assert!(ra.recv().is_err(), "the reply is dropped, not sent");
        assert_eq!(s.next_deadline(), None);
    }
}
