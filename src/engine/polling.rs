//! The steps that poll: a poll of a directory (on the scanner's lanes; here
//! only the last poll of a directory that goes back to its OS watch), the
//! findings applied, the first picture taken, a sync barrier's polls, and
//! the move of directories back to OS watches when watches free up. The
//! poll set itself (what is polled, why, when, the pictures) is
//! `poll.rs`'s.

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use super::Engine;
use super::poll::{self, Why};
use super::rescanning::keep_engine_view;
use super::trace;
use crate::backend::WatchError;
use crate::batch::change::FileType;
use crate::fs::{self, Picture};
use crate::index::{DirId, SpecId};
use crate::scanner::{Finding, Job, Purpose};

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
                self.polls.seen_on(id, look.fs_key);
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

    /// The first read of polled directory `id` (at `path`), made by its
    /// first look: its entries (sync cookies go to the sync table), and
    /// the picture kept for the next poll.
    pub(super) fn first_look(
        &mut self,
        id: DirId,
        path: &std::path::Path,
    ) -> std::io::Result<Vec<(OsString, FileType)>> {
        let hash = self.wants_hash(id);
        self.polls.outdate(id);
        let mut look = fs::look(path, true, None, hash, self.clock.wall())?;
        self.syncs.cookies_found(look.take_cookies(path));
        let listing = look.picture.listing();
        self.polls.seen_on(id, look.fs_key);
        self.polls.set_picture(id, look.picture);
        Ok(listing)
    }

    /// Polls directory `id` every `every` because a covering spec polls it
    /// (its first picture is taken now if it is read already).
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

    /// Polls the polled directories whose interval is up, on the scanner
    /// (one whose previous look is still under way waits for it), those
    /// with an OS watch too included: a hung file system never holds up
    /// the engine.
    pub(super) fn poll_due(&mut self) {
        let (ids, due) = self.polls.due(self.clock.now());
        if due.is_empty() {
            return;
        }
        self.now = self.clock.now();
        for id in ids {
            if !self.polls.in_flight(id) {
                self.poll_look(id);
            }
        }
        self.feed();
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

    /// A look at polled directory `id` for the scanner: its token. One
    /// handed over now waits for room at the scanner; one issued while a
    /// look is under way follows that one.
    fn poll_look(&mut self, id: DirId) -> Option<u64> {
        self.index.get(id)?;
        let (token, now) = self.polls.issue(id)?;
        if now {
            self.polls.wait(id, token, self.clock.now());
        }
        Some(token)
    }

    /// Hands the scanner the looks that wait for room at it, as many as
    /// each file system's lane takes (a round of a million directories is
    /// not a million jobs at once: the rest wait as tokens; a lane whose
    /// file system hangs takes none, and holds up no other's).
    fn feed(&mut self) {
        loop {
            let mut jobs = Vec::new();
            for (fs, key) in self.polls.waiting_file_systems() {
                let room = self.scanner.room(key);
                let mut taken = 0;
                while taken < room
                    && let Some((id, token)) = self.polls.next_waiting(fs)
                {
                    match self.job(id, token, key) {
                        Some(job) => {
                            jobs.push(job);
                            taken += 1;
                        }
                        // Gone from the index: no look to wait for.
                        None => self.polls.outdate(id),
                    }
                }
            }
            if jobs.is_empty() {
                return;
            }
            if let Some(found) = self.scanner.submit(jobs) {
                self.looked(found);
            }
        }
    }

    /// The job of look `token` at directory `id`, on the lane of key
    /// `fs_key`.
    fn job(&self, id: DirId, token: u64, fs_key: Option<u64>) -> Option<Job> {
        Some(Job {
            purpose: Purpose::Poll,
            dir: id,
            token,
            path: self.index.get(id)?.path().to_path_buf(),
            fs_key,
            before: self.polls.shared_picture(id).unwrap_or_default(),
            hash: self.wants_hash(id),
            wall: self.clock.wall(),
        })
    }

    /// Hands `jobs` to the scanner, then the polls' looks waiting for
    /// room; what it finds at once (inline) is applied now, the rest when
    /// it comes ([`looked`](Self::looked)).
    pub(super) fn scan(&mut self, jobs: Vec<Job>) {
        if !jobs.is_empty()
            && let Some(found) = self.scanner.submit(jobs)
        {
            self.looked(found);
        }
        self.feed();
    }

    /// The scanner's findings: each applied as a poll of the directory if
    /// it is still the look to apply (the directory still polled at the
    /// same path, no newer look of the engine's own since). For the names
    /// the engine looked at while it was under way, the look may be older
    /// than the engine's view: in a directory polled only, the look is
    /// made again; in one with an OS watch too (whose events go on), the
    /// engine's view of those names stands and the rest is applied
    /// ([`apply_watched_look`](Self::apply_watched_look)). A rescan's look
    /// goes to [`rescan_found`](Self::rescan_found).
    pub(super) fn looked(&mut self, findings: Vec<Finding>) {
        self.scanner.returned(&findings);
        let mut next = Vec::new();
        for f in findings {
            if f.purpose == Purpose::Rescan {
                next.extend(self.rescan_found(f));
                continue;
            }
            let same_path = self.index.get(f.dir).is_some_and(|n| **n.path() == *f.path);
            let watched = !self.polled_only(f.dir);
            match self.polls.take_finding(f.dir, f.token, watched) {
                poll::Finding::Drop => {}
                poll::Finding::Again(t) => self.polls.wait(f.dir, t, self.clock.now()),
                poll::Finding::Apply(touched) => {
                    if !same_path {
                        // Moved: its node goes with the events about it.
                    } else if self.mount_holds(&f.path, &f.look) {
                        // Its file system is away: what was there is kept.
                    } else {
                        match f.look {
                            Ok(look) if watched => {
                                self.apply_watched_look(f.dir, &f.path, look, &touched);
                            }
                            Ok(look) => self.apply_look(f.dir, &f.path, look),
                            Err(e) if fs::gone(&e) => self.check_top(f.dir, false),
                            Err(e) => self.look_failed(f.dir, &f.path, &e),
                        }
                    }
                    if let Some(t) = self.polls.follow_up(f.dir) {
                        self.polls.wait(f.dir, t, self.clock.now());
                    }
                }
            }
        }
        self.scan(next);
        if self.scanner.big_round_over() {
            // (As after a big walk: the pictures stay, the looks' and the
            // barriers' bookkeeping of a round of thousands went.)
            fs::trim_heap();
        }
    }

    /// Applies a poll's look at directory `id` (at `path`): a read error
    /// noted for it goes, cookies to the sync table, the listing and the
    /// modified entries to the index, the picture kept for the next poll.
    fn apply_look(&mut self, id: DirId, path: &std::path::Path, mut look: fs::Look) {
        let specs = self.polled_for(id);
        self.problems.clear(&specs, path);
        self.syncs.cookies_found(look.take_cookies(path));
        self.polls.seen_on(id, look.fs_key);
        self.keep_mount_points(path, &mut look.modified);
        self.apply_listing(id, &look.picture.listing(), &look.modified);
        self.polls.set_picture(id, look.picture);
    }

    /// Applies a poll's look at directory `id` (at `path`), which has an
    /// OS watch too, its events going on while the look was under way:
    /// the names they looked at meanwhile (`touched`) keep the engine's
    /// view, the rest is applied as any poll's look (as a rescan's look
    /// is). Sync cookies are left to their events: the look may have seen
    /// one whose event, and those queued before it, are still to be read.
    fn apply_watched_look(
        &mut self,
        id: DirId,
        path: &std::path::Path,
        mut look: fs::Look,
        touched: &std::collections::BTreeSet<OsString>,
    ) {
        look.take_cookies(path);
        self.polls.seen_on(id, look.fs_key);
        self.keep_mount_points(path, &mut look.modified);
        let Some(node) = self.index.get(id) else {
            return;
        };
        let (mut picture, mut modified) = (look.picture, look.modified);
        let mut listing = picture.listing();
        let seen = |name: &OsStr| node.entries().get(name);
        let old = self.polls.picture(id);
        keep_engine_view(
            touched,
            seen,
            old,
            &mut picture,
            &mut listing,
            &mut modified,
        );
        self.apply_listing(id, &listing, &modified);
        self.polls.set_picture(id, picture);
    }

    /// One poll of a directory here, on the engine's thread (the last poll
    /// of a directory that goes back to its OS watch): read
    /// it, tell from the picture which entries were written or replaced
    /// since the previous poll, and apply that as the scanner's looks are
    /// applied, as a listing ([`apply_listing`](Engine::apply_listing)):
    /// names and types diffed against the index, a directory replaced by
    /// another (a new inode) covered again.
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
        let look = fs::look(&path, true, before, hash, self.clock.wall());
        if self.mount_holds(&path, &look) {
            return; // its file system is away: what was there is kept
        }
        match look {
            Ok(look) => self.apply_look(id, &path, look),
            Err(e) if fs::gone(&e) => self.check_top(id, false),
            Err(e) => self.look_failed(id, &path, &e),
        }
    }

    /// A poll's look at directory `id` (at `path`) failed, though the
    /// directory is there (`EIO`, `ESTALE`: storage that fails; `EACCES`):
    /// nothing is concluded from it (the index and the picture stay as
    /// they were, nothing is reported), and the specs it is polled for say
    /// so until a look succeeds ([`apply_look`](Self::apply_look)); the
    /// next poll looks again.
    fn look_failed(&mut self, id: DirId, path: &std::path::Path, e: &std::io::Error) {
        let specs = self.polled_for(id);
        self.record_error(&specs, path, &format!("cannot read: {e}"));
    }

    /// The specs directory `id` is polled for: those covering it, and
    /// those whose roots it holds.
    fn polled_for(&self, id: DirId) -> Vec<SpecId> {
        let Some(node) = self.index.get(id) else {
            return Vec::new();
        };
        let mut specs: Vec<SpecId> = node.full().to_vec();
        specs.extend(node.partial().iter().map(|p| p.spec));
        specs.sort_unstable();
        specs.dedup();
        specs
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
    /// scanner and not done yet, which the barrier waits for: the last
    /// handed over first (each lane is done with them in the order handed
    /// over).
    pub(super) fn poll_spec(&mut self, sid: SpecId) -> Vec<(Purpose, DirId, u64)> {
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
        self.poll_dirs(ids)
    }

    /// Polls the polled directories `ids` now (a barrier's or a look's),
    /// and returns their looks that a barrier must still wait for.
    pub(super) fn poll_dirs(&mut self, ids: Vec<DirId>) -> Vec<(Purpose, DirId, u64)> {
        let mut asked = Vec::new();
        for id in ids {
            if let Some(token) = self.poll_look(id) {
                // (A look under way may have begun before the barrier: the
                // barrier waits for the one that follows it.)
                asked.push((id, token));
            }
        }
        self.hand_over(Purpose::Poll, Vec::new(), asked)
    }

    /// Hands `jobs` to the scanner, and returns the looks of `asked` (each
    /// a directory and a token) that a barrier must still wait for: those
    /// not done with once the jobs are submitted (an inline scanner, as in
    /// the engine's tests, has applied them already).
    pub(super) fn hand_over(
        &mut self,
        purpose: Purpose,
        jobs: Vec<Job>,
        asked: Vec<(DirId, u64)>,
    ) -> Vec<(Purpose, DirId, u64)> {
        self.scan(jobs);
        asked
            .into_iter()
            .rev()
            .filter(|&(id, t)| {
                !look_done((&self.polls, &self.rescans, &self.reloads), purpose, id, t)
            })
            .map(|(id, t)| (purpose, id, t))
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
            // A last poll, against the picture it had.
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

/// Whether look `token` at directory `id`, made for `purpose`, is done
/// with: applied, or given up (the owner of that kind of look says).
pub(super) fn look_done(
    (polls, rescans, reloads): (
        &poll::PollSet,
        &super::rescan::Rescans,
        &super::ignore_files::Reloads,
    ),
    purpose: Purpose,
    id: DirId,
    token: u64,
) -> bool {
    match purpose {
        Purpose::Poll => polls.done(id, token),
        Purpose::Rescan => rescans.done(id, token),
        Purpose::Outside => reloads.round_done(token),
        // (A barrier waits for a batch's hashes through its answer.)
        Purpose::Hash | Purpose::Start => true,
    }
}
