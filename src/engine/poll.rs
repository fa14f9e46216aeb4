//! The poll set: the only writer of "this directory is polled, and why",
//! of the stat signatures a poll compares, and of when the next poll is
//! due. The steps that poll, and that move directories back to OS watches
//! when watches free up, are here too.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::time::{Duration, Instant};

use super::Engine;
use super::trace;
use crate::backend::WatchError;
use crate::change::FileType;
use crate::fs::{self, Picture};
use crate::index::{DirId, SpecId};
use crate::scanner::{Finding, Job};

/// Default interval of polling for directories without an OS watch.
pub(crate) const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1000);

/// Why a directory is polled in place of an OS watch it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// The OS refused a watch for lack of watches (or the manager's cap
    /// was reached). Moves back to an OS watch when watches free up.
    Limit,
    /// It is at or below a followed symlink on a path backend, which
    /// cannot watch through links. Polled for good.
    Link,
}

#[derive(Debug)]
pub(super) struct Polled {
    /// Polled in place of an OS watch, and why (`Link` wins over `Limit`).
    instead: Option<Why>,
    /// Polled because a covering spec's root is polled (by choice, or
    /// `Auto` found a shared file system), at this interval.
    chosen: Option<Duration>,
    /// What the last look saw: entries' signatures, racy files' content
    /// hashes (see `WatchOptions::content_hash`).
    picture: Picture,
    /// The look the scanner is making of it, if one is under way.
    in_flight: Option<u64>,
    /// The newest look asked for, and the newest one done with (applied,
    /// or overtaken by a read of the engine's own).
    issued: u64,
    applied: u64,
}

/// Which directories are polled, why, and when.
#[derive(Debug)]
pub(super) struct PollSet {
    dirs: BTreeMap<DirId, Polled>,
    /// The interval of polling in place of OS watches.
    interval: Duration,
    /// The next poll of each interval in use.
    next: BTreeMap<Duration, Instant>,
    /// What the OS (or the cap) said when it last refused a watch.
    limit_reason: Option<String>,
    /// Whether the set changed since [`take_changed`](Self::take_changed).
    changed: bool,
    /// The last token handed to a look (tokens are never reused).
    tokens: u64,
}

impl Polled {
    fn new() -> Polled {
        Polled {
            instead: None,
            chosen: None,
            picture: Picture::default(),
            in_flight: None,
            issued: 0,
            applied: 0,
        }
    }

    fn every(&self, instead: Duration) -> Duration {
        match (self.instead, self.chosen) {
            (Some(_), Some(c)) => c.min(instead),
            (Some(_), None) => instead,
            (None, Some(c)) => c,
            (None, None) => instead,
        }
    }
}

impl PollSet {
    pub(super) fn new(interval: Option<Duration>) -> PollSet {
        PollSet {
            dirs: BTreeMap::new(),
            interval: interval
                .unwrap_or(DEFAULT_POLL_INTERVAL)
                .max(Duration::from_millis(1)),
            next: BTreeMap::new(),
            limit_reason: None,
            changed: false,
            tokens: 0,
        }
    }

    pub(super) fn interval(&self) -> Duration {
        self.interval
    }

    pub(super) fn contains(&self, id: DirId) -> bool {
        self.dirs.contains_key(&id)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Schedules a poll at `every` if none is.
    fn arm(&mut self, every: Duration, now: Instant) {
        self.next.entry(every).or_insert(now + every);
    }

    /// Polls `id` in place of an OS watch from now on (keeping its
    /// signatures if it already is polled); `Link` wins over `Limit`.
    fn add(&mut self, id: DirId, why: Why, now: Instant) {
        let p = self.dirs.entry(id).or_insert_with(Polled::new);
        if p.instead != Some(Why::Link) {
            p.instead = Some(why);
        }
        let every = p.every(self.interval);
        self.arm(every, now);
        self.changed = true;
    }

    /// Polls `id` every `every` because a covering spec polls it; returns
    /// whether it was not polled at all before.
    fn choose(&mut self, id: DirId, every: Duration, now: Instant) -> bool {
        let mut new = false;
        let p = self.dirs.entry(id).or_insert_with(|| {
            new = true;
            Polled::new()
        });
        if p.chosen == Some(every) {
            return false;
        }
        p.chosen = Some(every);
        let every = p.every(self.interval);
        self.arm(every, now);
        self.changed = true;
        new
    }

    /// No covering spec polls `id` any more: it stays polled only if it
    /// is polled in place of a watch.
    pub(super) fn unchoose(&mut self, id: DirId) {
        let Some(p) = self.dirs.get_mut(&id) else {
            return;
        };
        if p.chosen.take().is_some() {
            self.changed = true;
            if p.instead.is_none() {
                self.dirs.remove(&id);
            }
        }
    }

    /// `id` got its OS watch (or needs none): it is no longer polled in
    /// place of one.
    pub(super) fn watched(&mut self, id: DirId) {
        if let Some(p) = self.dirs.get_mut(&id)
            && p.instead.take().is_some()
        {
            self.changed = true;
            if p.chosen.is_none() {
                self.dirs.remove(&id);
            }
        }
    }

    /// Stops polling `id` (it left the index).
    pub(super) fn remove(&mut self, id: DirId) {
        self.changed |= self.dirs.remove(&id).is_some();
    }

    /// A look at `id` is handed to the scanner: its token (`None`: not
    /// polled). A newer look overtakes one under way.
    fn issue(&mut self, id: DirId) -> Option<u64> {
        let p = self.dirs.get_mut(&id)?;
        self.tokens += 1;
        p.in_flight = Some(self.tokens);
        p.issued = self.tokens;
        Some(self.tokens)
    }

    /// Whether the scanner is looking at `id`.
    fn in_flight(&self, id: DirId) -> bool {
        self.dirs.get(&id).is_some_and(|p| p.in_flight.is_some())
    }

    /// The engine looked at `id` itself (read it, or polled it on its own
    /// thread): a look of the scanner's under way is older, and is not
    /// applied when it comes.
    pub(super) fn outdate(&mut self, id: DirId) {
        if let Some(p) = self.dirs.get_mut(&id) {
            p.in_flight = None;
            p.applied = p.issued;
        }
    }

    /// The scanner's look `token` at `id` came back: whether it is the
    /// one to apply (not overtaken, nor outdated).
    fn take_finding(&mut self, id: DirId, token: u64) -> bool {
        match self.dirs.get_mut(&id) {
            Some(p) if p.in_flight == Some(token) => {
                p.in_flight = None;
                p.applied = token;
                true
            }
            _ => false,
        }
    }

    /// Whether look `token` at `id` is done with (or `id` is polled no
    /// more): what a sync barrier waits for.
    pub(super) fn done(&self, id: DirId, token: u64) -> bool {
        self.dirs.get(&id).is_none_or(|p| p.applied >= token)
    }

    /// What the last look at `id` saw, if it is polled.
    pub(super) fn picture(&self, id: DirId) -> Option<&Picture> {
        self.dirs.get(&id).map(|p| &p.picture)
    }

    /// Replaces the picture of `id`, if it is polled.
    pub(super) fn set_picture(&mut self, id: DirId, picture: Picture) {
        if let Some(p) = self.dirs.get_mut(&id) {
            p.picture = picture;
        }
    }

    fn note_limit(&mut self, reason: String) {
        if self.limit_reason.as_ref() != Some(&reason) {
            self.limit_reason = Some(reason);
            self.changed = true;
        }
    }

    /// Whether `id` is polled for good (below a followed link).
    pub(super) fn polled_for_link(&self, id: DirId) -> bool {
        self.dirs
            .get(&id)
            .is_some_and(|p| p.instead == Some(Why::Link))
    }

    /// Every polled directory.
    pub(super) fn ids(&self) -> Vec<DirId> {
        self.dirs.keys().copied().collect()
    }

    /// The directories polled for want of watches.
    fn limit_ids(&self) -> Vec<DirId> {
        self.dirs
            .iter()
            .filter(|(_, p)| p.instead == Some(Why::Limit))
            .map(|(id, _)| *id)
            .collect()
    }

    /// The directories due for a poll at `now`, and the intervals they
    /// are polled at (to [`rearm`](Self::rearm) after polling them).
    fn due(&mut self, now: Instant) -> (Vec<DirId>, Vec<Duration>) {
        if self.dirs.is_empty() {
            self.next.clear();
        }
        let due: Vec<Duration> = self
            .next
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(every, _)| *every)
            .collect();
        if due.is_empty() {
            return (Vec::new(), due);
        }
        let ids = self
            .dirs
            .iter()
            .filter(|(_, p)| due.contains(&p.every(self.interval)))
            .map(|(id, _)| *id)
            .collect();
        (ids, due)
    }

    /// After polling the intervals `due` at `now`: their next polls, for
    /// those still in use.
    fn rearm(&mut self, due: &[Duration], now: Instant) {
        let used: std::collections::BTreeSet<Duration> =
            self.dirs.values().map(|p| p.every(self.interval)).collect();
        self.next.retain(|every, _| used.contains(every));
        for every in due {
            if let Some(t) = self.next.get_mut(every) {
                *t = now + *every;
            }
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        if self.dirs.is_empty() {
            return None; // (an interval no one uses goes at its next rearm)
        }
        self.next.values().min().copied()
    }

    /// Whether the set (or the reason) changed since the last call.
    pub(super) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Directories for which `covered` holds, polled in place of an OS
    /// watch: how many, and how many of those for a followed link.
    pub(super) fn count(&self, covered: impl Fn(DirId) -> bool) -> (usize, usize) {
        let mut all = 0;
        let mut links = 0;
        for (id, p) in &self.dirs {
            if let Some(why) = p.instead
                && covered(*id)
            {
                all += 1;
                links += usize::from(why == Why::Link);
            }
        }
        (all, links)
    }

    /// Once nothing is polled for want of watches, the reason goes.
    fn forget_limit_unless_polled(&mut self) {
        if self.limit_reason.is_some() && self.dirs.values().all(|p| p.instead != Some(Why::Limit))
        {
            self.limit_reason = None;
            self.changed = true;
        }
    }

    pub(super) fn limit_reason(&self) -> Option<&str> {
        self.limit_reason.as_deref()
    }
}

impl Engine {
    /// Polls directory `id` instead of watching it.
    pub(super) fn poll_instead(&mut self, id: DirId, why: Why) {
        self.polls.add(id, why, self.clock.now());
    }

    /// The OS refused `id` a watch for lack of watches: poll it, and say
    /// why in status.
    pub(super) fn poll_at_limit(&mut self, id: DirId, e: &WatchError) {
        let reason = e.error.to_string();
        trace::traced! {
            if self.polls.limit_reason() != Some(reason.as_str()) {
                // Once per episode (or new reason): each further
                // directory is a debug event.
                trace::event!(
                    WARN,
                    path = %self.dir_path(id),
                    reason = %reason,
                    interval = ?self.polls.interval(),
                    "watch limit reached: polling directories instead"
                );
            } else {
                trace::event!(
                    DEBUG,
                    path = %self.dir_path(id),
                    reason = %reason,
                    "watch limit: polling this directory instead"
                );
            }
        }
        self.polls.note_limit(reason);
        self.poll_instead(id, Why::Limit);
    }

    /// Takes the first picture of polled directory `id` (after its first
    /// read). One that cannot be read now gets each indexed entry with a
    /// signature no entry has: whatever the next poll finds there is
    /// looked at again.
    pub(super) fn sign(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path().clone();
        let hash = self.wants_hash(id);
        self.polls.outdate(id);
        let picture = match fs::look(&path, true, None, hash, self.clock.wall()) {
            Ok(mut look) => {
                self.syncs.cookies_found(look.take_cookies(&path));
                look.picture
            }
            Err(_) => Picture::of(
                node.entries()
                    .iter()
                    .map(|(n, _)| (n.to_os_string(), fs::Sig::UNKNOWN))
                    .collect(),
            ),
        };
        self.polls.set_picture(id, picture);
    }

    /// Takes the signature of entry `name` of polled directory `id` if it
    /// has none yet (a name a partial node starts to wait for).
    pub(super) fn sign_name(&mut self, id: DirId, name: &OsStr) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path().join(name);
        if let Some(p) = self.polls.dirs.get_mut(&id)
            && p.picture.get(name).is_none()
            && let Some(sig) = fs::sig_of(&path)
        {
            p.picture.set(name, Some(sig));
        }
    }

    /// Polls directory `id` every `every` because a covering spec polls it
    /// (its signatures are taken now if it is read already).
    pub(super) fn choose_poll(&mut self, id: DirId, every: Duration) {
        if self.polls.choose(id, every, self.clock.now())
            && self.index.get(id).is_some_and(|n| n.complete())
        {
            self.sign(id);
        }
    }

    /// Whether a spec covering directory `id` compares racy files'
    /// contents when polling.
    pub(super) fn wants_hash(&self, id: DirId) -> bool {
        self.index.get(id).is_some_and(|n| {
            n.full()
                .iter()
                .any(|s| self.specs.get(*s).is_some_and(|st| st.hashes()))
        })
    }

    /// Polls the polled directories whose interval is up: those without an
    /// OS watch on the scanner (one whose previous look is still under way
    /// waits for it), the others here.
    pub(super) fn poll_due(&mut self) {
        let (ids, due) = self.polls.due(self.clock.now());
        if due.is_empty() {
            return;
        }
        self.now = self.clock.now();
        let mut jobs = Vec::new();
        for id in ids {
            if !self.polled_only(id) {
                self.poll_node(id);
            } else if !self.polls.in_flight(id)
                && let Some(job) = self.poll_job(id)
            {
                jobs.push(job);
            }
        }
        self.scan(jobs);
        self.polls.rearm(&due, self.clock.now());
    }

    /// Whether directory `id` is polled and has no OS watch: nothing but
    /// its polls tells of its changes.
    pub(super) fn polled_only(&self, id: DirId) -> bool {
        self.polls.contains(id)
            && !self
                .index
                .get(id)
                .is_some_and(|n| self.watches.has_watch(id, n.path(), !n.full().is_empty()))
    }

    /// A look at polled directory `id` for the scanner.
    fn poll_job(&mut self, id: DirId) -> Option<Job> {
        let path = self.index.get(id)?.path().to_path_buf();
        let hash = self.wants_hash(id);
        let token = self.polls.issue(id)?;
        Some(Job {
            dir: id,
            token,
            path,
            before: self.polls.picture(id).cloned().unwrap_or_default(),
            hash,
            wall: self.clock.wall(),
        })
    }

    /// Hands `jobs` to the scanner; what it finds at once (inline) is
    /// applied now, the rest when it comes ([`looked`](Self::looked)).
    fn scan(&mut self, jobs: Vec<Job>) {
        if let Some(found) = self.scanner.submit(jobs) {
            self.looked(found);
        }
    }

    /// The scanner's findings: each applied as a poll of the directory, if
    /// it is still the look to apply (the directory is still polled, at
    /// the same path, and the engine has not looked at it since).
    pub(super) fn looked(&mut self, findings: Vec<Finding>) {
        for f in findings {
            if !self.polls.take_finding(f.dir, f.token)
                || self.index.get(f.dir).is_none_or(|n| **n.path() != *f.path)
            {
                continue;
            }
            match f.look {
                Ok(look) => self.apply_look(f.dir, &f.path, look),
                Err(e) if fs::gone(&e) => self.check_top(f.dir, false),
                // Possibly transient: the next poll reads it again.
                Err(_) => {}
            }
        }
    }

    /// Applies a poll's look at directory `id` (at `path`): cookies to the
    /// sync table, the listing and the modified entries to the index, the
    /// picture kept for the next poll.
    fn apply_look(&mut self, id: DirId, path: &std::path::Path, mut look: fs::Look) {
        self.syncs.cookies_found(look.take_cookies(path));
        self.apply_listing(id, &look.picture.listing(), &look.modified);
        self.polls.set_picture(id, look.picture);
    }

    /// One poll of a directory without an OS watch: read it, tell from the
    /// stat signatures which entries were written or replaced since the
    /// previous poll, and apply that as any look-based backend's listing
    /// ([`apply_listing`](Engine::apply_listing)): names and types diffed
    /// against the index, a directory replaced by another (a new inode)
    /// covered again.
    pub(super) fn poll_node(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            self.polls.remove(id);
            return;
        };
        let path = node.path().clone();
        let hash = self.wants_hash(id);
        // Newer than any look of the scanner's under way.
        self.polls.outdate(id);
        let before = self.polls.picture(id);
        match fs::look(&path, true, before, hash, self.clock.wall()) {
            Ok(look) => self.apply_look(id, &path, look),
            Err(e) if fs::gone(&e) => self.check_top(id, false),
            Err(_) => {}
        }
    }

    /// A directory entry of `id` that lost its node, or whose node has
    /// neither watch nor polling (it was replaced while `id` had no events
    /// to tell), is covered again.
    pub(super) fn repair_orphans(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let orphans: Vec<OsString> = node
            .entries()
            .iter()
            .filter(|(n, t)| {
                let child = node.path().join(n);
                *t == FileType::Dir
                    && self.index.lookup(&child).is_none_or(|c| self.unwatched(c))
                    && node.full().iter().any(|s| self.specs.needs(*s, &child))
            })
            .map(|(n, _)| n.to_os_string())
            .collect();
        for n in orphans {
            self.remove_entry(id, &n, true);
            self.add_entry(id, &n, FileType::Dir);
        }
    }

    /// Polls the polled directories spec `sid` covers (a sync's barrier:
    /// they have no events to wait for). Returns the looks handed to the
    /// scanner and not done yet, which the barrier waits for.
    pub(super) fn poll_spec(&mut self, sid: SpecId) -> Vec<(DirId, u64)> {
        let ids: Vec<DirId> = self
            .polls
            .ids()
            .into_iter()
            .filter(|id| {
                self.index
                    .get(*id)
                    .is_some_and(|n| n.covers(sid) || n.partial().iter().any(|p| p.spec == sid))
            })
            .collect();
        let mut jobs = Vec::new();
        for id in ids {
            if !self.polled_only(id) {
                self.poll_node(id);
            } else if let Some(job) = self.poll_job(id) {
                // (A look under way may have begun before the barrier:
                // this one overtakes it.)
                jobs.push(job);
            }
        }
        let asked: Vec<(DirId, u64)> = jobs.iter().map(|j| (j.dir, j.token)).collect();
        self.scan(jobs);
        asked
            .into_iter()
            .filter(|(id, t)| !self.polls.done(*id, *t))
            .collect()
    }

    /// Watches freed up: move directories polled for want of them back to
    /// OS watches. The watch is added first, then a last poll catches what
    /// happened since the previous one.
    pub(super) fn unpoll(&mut self) {
        if !self.watches.take_freed() || self.polls.is_empty() {
            return;
        }
        trace::bind!(before = self.polls.limit_ids().len());
        for id in self.polls.limit_ids() {
            let Some(node) = self.index.get(id) else {
                self.polls.remove(id);
                continue;
            };
            let specs: Vec<SpecId> = node.full().to_vec();
            if !self.wanted(id).0 {
                // No covering spec wants an OS watch for it any more.
                self.polls.watched(id);
                continue;
            }
            if !self.watch_node(id, false, &specs) {
                break; // still no room: it stays polled
            }
            // A last poll, against the signatures it had.
            self.poll_node(id);
            self.polls.watched(id);
        }
        self.polls.forget_limit_unless_polled();
        trace::traced! {
            let still = self.polls.limit_ids().len();
            if still < before {
                trace::event!(
                    INFO,
                    moved = before - still,
                    still_polled = still,
                    "watches freed up: directories moved back from polling to OS watches"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    const I: Duration = Duration::from_millis(100);
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn schedule_arms_when_added_then_runs_every_interval() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        assert!(p.due(t0).1.is_empty(), "nothing polled");
        assert_eq!(p.next_deadline(), None);
        p.add(1, Why::Limit, t0);
        assert_eq!(p.next_deadline(), Some(t0 + I), "added: scheduled");
        assert!(p.due(t0 + I - MS).0.is_empty());
        let (ids, due) = p.due(t0 + I);
        assert_eq!((ids, due.clone()), (vec![1], vec![I]));
        p.rearm(&due, t0 + I + 5 * MS);
        assert_eq!(p.next_deadline(), Some(t0 + 2 * I + 5 * MS));
        p.remove(1);
        p.rearm(&[], t0 + 3 * I);
        assert_eq!(p.next_deadline(), None, "empty: no timer");
        assert!(p.due(t0 + 10 * I).0.is_empty());
    }

    #[test]
    fn each_interval_keeps_its_own_schedule() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        assert!(p.choose(1, 10 * MS, t0), "newly polled");
        assert!(!p.choose(1, 10 * MS, t0), "already");
        p.add(2, Why::Limit, t0);
        p.choose(3, 30 * MS, t0);
        let (ids, due) = p.due(t0 + 10 * MS);
        assert_eq!((ids, due.clone()), (vec![1], vec![10 * MS]));
        p.rearm(&due, t0 + 10 * MS);
        assert_eq!(p.next_deadline(), Some(t0 + 20 * MS));
        let (ids, due) = p.due(t0 + 30 * MS);
        assert_eq!(ids, vec![1, 3], "both short intervals are due");
        p.rearm(&due, t0 + 30 * MS);
        assert_eq!(p.due(t0 + I).0, vec![1, 2, 3]);
        // Polled both ways: the shorter interval.
        p.choose(2, 10 * MS, t0);
        assert_eq!(p.dirs[&2].every(I), 10 * MS);
        // An interval nobody uses any more is dropped at the next rearm.
        p.unchoose(3);
        p.rearm(&[], t0 + I);
        assert!(!p.next.contains_key(&(30 * MS)));
    }

    #[test]
    fn interval_has_a_floor() {
        assert_eq!(PollSet::new(Some(Duration::ZERO)).interval(), MS);
        assert_eq!(PollSet::new(None).interval(), DEFAULT_POLL_INTERVAL);
    }

    #[test]
    fn link_polling_wins_and_is_not_moved_back() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        p.add(1, Why::Limit, t0);
        p.add(2, Why::Link, t0);
        p.add(1, Why::Link, t0);
        p.add(3, Why::Limit, t0);
        p.add(2, Why::Limit, t0);
        assert_eq!(p.limit_ids(), vec![3]);
        assert_eq!(p.count(|_| true), (3, 2));
        assert_eq!(p.count(|id| id == 3), (1, 0));
    }

    #[test]
    fn chosen_polling_is_not_counted_as_degraded_and_outlives_a_watch() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        p.choose(1, I, t0);
        assert_eq!(p.count(|_| true), (0, 0), "polled by choice: not instead");
        p.add(1, Why::Limit, t0);
        assert_eq!(p.count(|_| true), (1, 0));
        p.watched(1);
        assert!(
            p.contains(1) && p.dirs[&1].chosen.is_some(),
            "still polled by choice"
        );
        assert_eq!(p.count(|_| true), (0, 0));
        p.unchoose(1);
        assert!(!p.contains(1), "nothing keeps it polled");
        // And the other way round.
        p.add(2, Why::Limit, t0);
        p.choose(2, I, t0);
        p.unchoose(2);
        assert!(p.contains(2), "still polled for want of a watch");
        p.watched(2);
        assert!(!p.contains(2));
    }

    #[test]
    fn signatures_survive_re_adding() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        p.add(1, Why::Limit, t0);
        let sig = fs::Sig {
            kind: crate::change::FileType::File,
            size: 1,
            mtime: (2, 3),
            ctime: (4, 5),
            ino: 6,
        };
        p.set_picture(1, Picture::of(vec![(OsString::from("f"), sig)]));
        p.add(1, Why::Limit, t0);
        p.choose(1, I, t0);
        assert_eq!(p.picture(1).unwrap().get(OsStr::new("f")), Some(&sig));
        p.remove(1);
        assert!(p.picture(1).is_none());
        p.set_picture(1, Picture::default()); // not polled: ignored
        assert!(!p.contains(1));
    }

    #[test]
    fn changes_are_noted_for_status() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        assert!(!p.take_changed());
        p.add(1, Why::Limit, t0);
        assert!(p.take_changed());
        assert!(!p.take_changed());
        p.note_limit("ENOSPC".into());
        assert!(p.take_changed());
        p.note_limit("ENOSPC".into());
        assert!(!p.take_changed(), "same reason: no change");
        p.remove(7);
        assert!(!p.take_changed(), "removing nothing changes nothing");
        p.choose(2, I, t0);
        assert!(p.take_changed());
        p.choose(2, I, t0);
        assert!(!p.take_changed(), "same interval: no change");
    }
}
