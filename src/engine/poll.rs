//! The poll set: the only writer of "this directory is polled, and why",
//! of the stat signatures a poll compares, and of when the next poll is
//! due. The steps that poll, and that move directories back to OS watches
//! when watches free up, are here too.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use super::Engine;
use crate::backend::WatchError;
use crate::change::FileType;
use crate::fs::{self, Sig};
use crate::index::{DirId, SpecId};

/// Default interval of polling for directories without an OS watch.
pub(crate) const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1000);

/// Why a directory is polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// The OS refused a watch for lack of watches (or the manager's cap
    /// was reached). Moves back to an OS watch when watches free up.
    Limit,
    /// It is at or below a followed symlink on a path backend, which
    /// cannot watch through links. Polled for good.
    Link,
}

/// Stat signatures of a polled directory's entries, by name.
pub(super) type Sigs = BTreeMap<OsString, Sig>;

#[derive(Debug)]
pub(super) struct Polled {
    why: Why,
    sigs: Sigs,
}

/// Which directories are polled, why, and when.
#[derive(Debug)]
pub(super) struct PollSet {
    dirs: BTreeMap<DirId, Polled>,
    interval: Duration,
    next: Option<Instant>,
    /// What the OS (or the cap) said when it last refused a watch.
    limit_reason: Option<String>,
    /// Whether the set changed since [`take_changed`](Self::take_changed).
    changed: bool,
}

impl PollSet {
    pub(super) fn new(interval: Option<Duration>) -> PollSet {
        PollSet {
            dirs: BTreeMap::new(),
            interval: interval
                .unwrap_or(DEFAULT_POLL_INTERVAL)
                .max(Duration::from_millis(1)),
            next: None,
            limit_reason: None,
            changed: false,
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

    /// Polls `id` from now on (keeping its signatures if it already is);
    /// `Link` wins over `Limit`. Schedules a poll if none is.
    fn add(&mut self, id: DirId, why: Why, now: Instant) {
        let p = self.dirs.entry(id).or_insert(Polled {
            why,
            sigs: Sigs::new(),
        });
        if why == Why::Link {
            p.why = Why::Link;
        }
        if self.next.is_none() {
            self.next = Some(now + self.interval);
        }
        self.changed = true;
    }

    /// Stops polling `id`; what it had.
    pub(super) fn remove(&mut self, id: DirId) -> Option<Polled> {
        let p = self.dirs.remove(&id);
        self.changed |= p.is_some();
        p
    }

    /// Puts back what [`remove`](Self::remove) took.
    fn restore(&mut self, id: DirId, p: Polled) {
        self.dirs.insert(id, p);
        self.changed = true;
    }

    fn sigs(&self, id: DirId) -> Option<&Sigs> {
        self.dirs.get(&id).map(|p| &p.sigs)
    }

    /// Replaces the signatures of `id`, if it is polled.
    fn set_sigs(&mut self, id: DirId, sigs: Sigs) {
        if let Some(p) = self.dirs.get_mut(&id) {
            p.sigs = sigs;
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
        self.dirs.get(&id).is_some_and(|p| p.why == Why::Link)
    }

    /// Every polled directory.
    pub(super) fn ids(&self) -> Vec<DirId> {
        self.dirs.keys().copied().collect()
    }

    /// The directories polled for want of watches.
    fn limit_ids(&self) -> Vec<DirId> {
        self.dirs
            .iter()
            .filter(|(_, p)| p.why == Why::Limit)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether a poll of every polled directory is due at `now`. The
    /// first call after the set became non-empty arms the timer.
    fn due(&mut self, now: Instant) -> bool {
        if self.dirs.is_empty() {
            self.next = None;
            return false;
        }
        match self.next {
            Some(t) => t <= now,
            None => {
                self.next = Some(now + self.interval);
                false
            }
        }
    }

    /// After a poll at `now`: the next one, if anything is still polled.
    fn rearm(&mut self, now: Instant) {
        self.next = (!self.dirs.is_empty()).then(|| now + self.interval);
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.next
    }

    /// Whether the set (or the reason) changed since the last call.
    pub(super) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Directories for which `covered` holds: how many are polled, and how
    /// many of those for a followed link.
    pub(super) fn count(&self, covered: impl Fn(DirId) -> bool) -> (usize, usize) {
        let mut all = 0;
        let mut links = 0;
        for (id, p) in &self.dirs {
            if covered(*id) {
                all += 1;
                links += usize::from(p.why == Why::Link);
            }
        }
        (all, links)
    }

    /// Once nothing is polled for want of watches, the reason goes.
    fn forget_limit_unless_polled(&mut self) {
        if self.limit_reason.is_some() && self.dirs.values().all(|p| p.why != Why::Limit) {
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
        self.polls.note_limit(e.error.to_string());
        self.poll_instead(id, Why::Limit);
    }

    /// Takes the stat signatures of polled directory `id`'s entries (after
    /// its first read).
    pub(super) fn sign(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let sigs = node
            .entries()
            .iter()
            .filter_map(|(n, _)| Some((n.to_os_string(), fs::sig_of(&node.path().join(n))?)))
            .collect();
        self.polls.set_sigs(id, sigs);
    }

    /// Polls every polled directory when the poll interval is up.
    pub(super) fn poll_due(&mut self) {
        if !self.polls.due(self.clock.now()) {
            return;
        }
        self.now = self.clock.now();
        for id in self.polls.ids() {
            self.poll_node(id);
        }
        self.polls.rearm(self.clock.now());
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
        let mut listing = match fs::read_listing(&path, self.syncs.found()) {
            Ok(l) => l,
            Err(e) if fs::gone(&e) => {
                self.check_top(id, false);
                return;
            }
            Err(_) => return,
        };
        listing.sort_unstable_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
        let old = self.polls.sigs(id);
        let mut modified = Vec::new();
        let mut sigs = Sigs::new();
        for (name, _) in &listing {
            let Some(sig) = fs::sig_of(&path.join(name)) else {
                continue;
            };
            if let Some(before) = old.and_then(|o| o.get(name))
                && before.changed(&sig)
            {
                modified.push((name.clone(), before.replaced(&sig)));
            }
            sigs.insert(name.clone(), sig);
        }
        self.apply_listing(id, &listing, &modified);
        self.polls.set_sigs(id, sigs);
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
    /// they have no events to wait for).
    pub(super) fn poll_spec(&mut self, sid: SpecId) {
        let ids: Vec<DirId> = self
            .polls
            .ids()
            .into_iter()
            .filter(|id| self.index.get(*id).is_some_and(|n| n.covers(sid)))
            .collect();
        for id in ids {
            self.poll_node(id);
        }
    }

    /// Watches freed up: move directories polled for want of them back to
    /// OS watches. The watch is added first, then a last poll catches what
    /// happened since the previous one.
    pub(super) fn unpoll(&mut self) {
        if !self.watches.take_freed() || self.polls.is_empty() {
            return;
        }
        for id in self.polls.limit_ids() {
            let Some(node) = self.index.get(id) else {
                self.polls.remove(id);
                continue;
            };
            let specs: Vec<SpecId> = node.full().to_vec();
            let Some(polled) = self.polls.remove(id) else {
                continue;
            };
            if !self.watch_node(id, false, &specs) {
                // Still no room: it is polled again, with its signatures.
                self.polls.set_sigs(id, polled.sigs);
                break;
            }
            // A last poll, against the signatures it had.
            self.polls.restore(id, polled);
            self.poll_node(id);
            self.polls.remove(id);
        }
        self.polls.forget_limit_unless_polled();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Duration = Duration::from_millis(100);

    #[test]
    fn schedule_arms_on_first_look_then_runs_every_interval() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        assert!(!p.due(t0), "nothing polled");
        assert_eq!(p.next_deadline(), None);
        p.add(1, Why::Limit, t0);
        assert_eq!(p.next_deadline(), Some(t0 + I), "added: scheduled");
        assert!(!p.due(t0 + I - Duration::from_millis(1)));
        assert!(p.due(t0 + I));
        p.rearm(t0 + I + Duration::from_millis(5));
        assert_eq!(
            p.next_deadline(),
            Some(t0 + 2 * I + Duration::from_millis(5))
        );
        p.remove(1);
        p.rearm(t0 + 3 * I);
        assert_eq!(p.next_deadline(), None, "empty: no timer");
        assert!(!p.due(t0 + 10 * I));
    }

    #[test]
    fn interval_has_a_floor() {
        assert_eq!(
            PollSet::new(Some(Duration::ZERO)).interval(),
            Duration::from_millis(1)
        );
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
    fn signatures_survive_re_adding_and_restoring() {
        let t0 = Instant::now();
        let mut p = PollSet::new(Some(I));
        p.add(1, Why::Limit, t0);
        let sig = Sig {
            kind: crate::change::FileType::File,
            size: 1,
            mtime: (2, 3),
            ctime: (4, 5),
            ino: 6,
        };
        p.set_sigs(1, [(OsString::from("f"), sig)].into());
        p.add(1, Why::Limit, t0);
        assert_eq!(p.sigs(1).unwrap().len(), 1, "re-adding keeps them");
        let taken = p.remove(1).unwrap();
        assert!(p.sigs(1).is_none());
        p.set_sigs(1, Sigs::new()); // not polled: ignored
        assert!(!p.contains(1));
        p.restore(1, taken);
        assert_eq!(p.sigs(1).unwrap().get(OsStr::new("f")), Some(&sig));
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
        assert!(p.remove(7).is_none());
        assert!(!p.take_changed(), "removing nothing changes nothing");
    }

    use std::ffi::OsStr;
}
