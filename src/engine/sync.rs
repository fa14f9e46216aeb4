//! Sync barriers (Watchman's cookies, in-process): the only writer of the
//! barriers waiting and of the cookies seen.
//!
//! How a barrier works, and the steps that start, complete and answer
//! them, are `syncing.rs`'s.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use crossbeam_channel::Sender;

use crate::index::DirId;
use crate::scanner::Purpose;

use crate::fs::{self, COOKIE_PREFIX};

/// A barrier waiting.
pub(super) struct Wait {
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
    /// scanner's looks at the spec's polled directories, and at its
    /// rescanned ones for a rescan's barrier (what for, directory,
    /// token), in `scans`, the last handed over first: the scanner is done
    /// with them in the order handed over (per lane: a file system's),
    /// so each pass pops those done off the end (a barrier over 10,000
    /// directories is not looked through whole after each finding; one
    /// done before those handed over after it is popped with them).
    parked: bool,
    scans: Vec<(Purpose, DirId, u64)>,
    /// The barrier of a hold a program declared: its start's (the spec's
    /// batch closed before it takes effect) or its end's (the held batch
    /// closed). Past its deadline it counts as passed.
    hold: Option<HoldMark>,
    /// It passed, and its batch closed: its caller is answered once the
    /// batch is out (its hashes read: `scans` names the read).
    answer_only: bool,
}

/// What a hold's barrier is for (the hold's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HoldMark {
    /// The hold begins: what was written before it is closed first.
    Enter(u64),
    /// The hold ended: what was written while it lived is all in.
    Release(u64),
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

impl Wait {
    /// The spec it is for.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// A rescan's barrier: when it began.
    pub(super) fn rescan(&self) -> Option<SystemTime> {
        self.rescan
    }

    /// Whether it is an apply's guard.
    pub(super) fn is_guard(&self) -> bool {
        self.guard
    }

    /// Whether a caller of `Manager::sync` waits for it.
    pub(super) fn is_caller(&self) -> bool {
        self.reply.is_some()
    }

    /// The hold it is a barrier of, if it is one.
    pub(super) fn hold(&self) -> Option<HoldMark> {
        self.hold
    }

    /// Removes the cookies it created.
    pub(super) fn remove_cookies(&self) {
        for c in &self.created {
            fs::remove_cookie(c);
        }
    }

    /// It passed: its cookies are removed and its caller, if any,
    /// answered.
    pub(super) fn pass(&self) {
        self.remove_cookies();
        if let Some(reply) = &self.reply {
            let _ = reply.send(true);
        }
    }
}

impl Syncs {
    /// Registers a barrier for spec `name`, the caller's (`reply`) or the
    /// engine's own before a rescan (`rescan`: when it began), waiting for
    /// `cookies`, none of them created yet.
    pub(super) fn begin(
        &mut self,
        name: String,
        cookies: BTreeSet<PathBuf>,
        deadline: Instant,
        reply: Option<Sender<bool>>,
        rescan: Option<SystemTime>,
    ) {
        self.waits.push(Wait {
            name,
            remaining: cookies,
            created: Vec::new(),
            deadline,
            reply,
            rescan,
            guard: false,
            parked: false,
            scans: Vec::new(),
            hold: None,
            answer_only: false,
        });
    }

    /// The newest barrier is hold `mark`'s.
    pub(super) fn mark_newest(&mut self, mark: HoldMark) {
        if let Some(w) = self.waits.last_mut() {
            w.hold = Some(mark);
        }
    }

    /// The newest barrier's cookie was created; with `heard: false` no
    /// event will bring it (it is not waited for).
    pub(super) fn cookie_made(&mut self, cookie: PathBuf, heard: bool) {
        let w = self.waits.last_mut().expect("a barrier begun");
        if !heard {
            w.remaining.remove(&cookie);
        }
        w.created.push(cookie);
    }

    /// The newest barrier's cookie could not be created: it is not waited
    /// for.
    pub(super) fn cookie_not_made(&mut self, cookie: &Path) {
        let w = self.waits.last_mut().expect("a barrier begun");
        w.remaining.remove(cookie);
    }

    /// Registers an apply's guard for spec `name`, waiting for `cookies`
    /// (created and removed already).
    pub(super) fn guard(&mut self, name: String, cookies: &[PathBuf], deadline: Instant) {
        self.waits.push(Wait {
            name,
            remaining: cookies.iter().cloned().collect(),
            created: Vec::new(),
            deadline,
            reply: None,
            rescan: None,
            guard: true,
            parked: false,
            scans: Vec::new(),
            hold: None,
            answer_only: false,
        });
    }

    /// The cookies apply guards still wait for (the test harness plays
    /// the OS).
    #[cfg(test)]
    pub(super) fn guard_cookies_waiting(&self) -> Vec<PathBuf> {
        self.waits
            .iter()
            .filter(|w| w.guard)
            .flat_map(|w| w.remaining.iter().cloned())
            .collect()
    }

    /// Registers a look's barrier for spec `name` (`Manager::look`): no
    /// cookie, parked at once until the scanner's looks `scans` are done
    /// with (none: it passes at the end of this pass).
    pub(super) fn look(
        &mut self,
        name: String,
        deadline: Instant,
        reply: Sender<bool>,
        scans: Vec<(Purpose, DirId, u64)>,
    ) {
        self.waits.push(Wait {
            name,
            remaining: BTreeSet::new(),
            created: Vec::new(),
            deadline,
            reply: Some(reply),
            rescan: None,
            guard: false,
            parked: true,
            scans,
            hold: None,
            answer_only: false,
        });
    }

    /// Parks `wait` (its cookies all seen) until the scanner's looks
    /// `scans` (what for, directory, token) are done with.
    pub(super) fn park(&mut self, mut wait: Wait, scans: Vec<(Purpose, DirId, u64)>) {
        wait.parked = true;
        wait.scans = scans;
        self.waits.push(wait);
    }

    /// Parks `wait`, passed and its batch closed, until the reads `scans`
    /// (the hashes its batch waits for) are done with: then it is
    /// answered ([`take_answerable`](Self::take_answerable)), its batch
    /// not closed again.
    pub(super) fn park_answer(&mut self, mut wait: Wait, scans: Vec<(Purpose, DirId, u64)>) {
        wait.parked = true;
        wait.answer_only = true;
        wait.scans = scans;
        self.waits.push(wait);
    }

    /// Takes the waits parked for their answer alone whose reads are all
    /// `done` now.
    pub(super) fn take_answerable(
        &mut self,
        done: impl Fn(Purpose, DirId, u64) -> bool,
    ) -> Vec<Wait> {
        for w in self.waits.iter_mut().filter(|w| w.answer_only) {
            while let Some(&(why, id, t)) = w.scans.last()
                && done(why, id, t)
            {
                w.scans.pop();
            }
        }
        let (ready, waiting) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.answer_only && w.scans.is_empty());
        self.waits = waiting;
        ready
    }

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
    pub(super) fn take_ready(&mut self) -> Vec<Wait> {
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
    pub(super) fn take_scanned(&mut self, done: impl Fn(Purpose, DirId, u64) -> bool) -> Vec<Wait> {
        for w in self.waits.iter_mut().filter(|w| !w.answer_only) {
            // (Done for good once done: a look applied or overtaken, or
            // its directory polled, or rescanned, no more.)
            while let Some(&(why, id, t)) = w.scans.last()
                && done(why, id, t)
            {
                w.scans.pop();
            }
        }
        let (ready, waiting) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.parked && !w.answer_only && w.scans.is_empty());
        self.waits = waiting;
        ready
    }

    /// Takes the holds' barriers whose deadline is past at `now`: they
    /// count as passed (a hold is bounded; nothing waits on the engine).
    pub(super) fn take_expired_holds(&mut self, now: Instant) -> Vec<Wait> {
        let (expired, waiting) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.hold.is_some() && w.deadline <= now);
        self.waits = waiting;
        expired
    }

    /// Takes the waits whose caller has given up by `now`.
    pub(super) fn take_expired(&mut self, now: Instant) -> Vec<Wait> {
        let (expired, waiting) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.deadline <= now);
        self.waits = waiting;
        expired
    }
}

/// A cookie path for each root, unique in the process, with its root.
pub(super) fn cookies_for(roots: Vec<PathBuf>) -> Vec<(PathBuf, PathBuf)> {
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
                hold: None,
                answer_only: false,
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
