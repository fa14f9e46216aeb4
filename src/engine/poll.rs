//! The poll set: the only writer of "this directory is polled, and why",
//! of the picture a poll compares with (and the file systems the look
//! that took it touched: the scanner's lane for the next), of
//! the scanner's look under way, and of when the next poll is due. The
//! steps that poll are `polling.rs`'s.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fs::{self, Picture};
use crate::index::DirId;
use crate::spec::defaults::DEFAULT_POLL_INTERVAL;

/// What to do with a look of the scanner's that came back.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Finding {
    /// Not the look to apply (overtaken, or the directory is not polled).
    Drop,
    /// Apply it, but for the names the engine looked at since it began
    /// (a directory with an OS watch too: its events go on meanwhile),
    /// for which the engine's view stands; then hand over the look asked
    /// for meanwhile, if any ([`PollSet::follow_up`]).
    Apply(BTreeSet<OsString>),
    /// Do not apply it (a directory polled only: the engine looked at a
    /// name since it began): hand over a new look, with this token.
    Again(u64),
}

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

/// A polled directory: 16 bytes beside its picture (the poll set's whole
/// cost per directory, with the map's slot; a look under way has its
/// bookkeeping in [`Looking`], apart). Its file systems are a number (in
/// what would be padding), the set's name for their key.
#[derive(Debug)]
pub(super) struct Polled {
    /// What the last look saw: entries' signatures, racy files' content
    /// hashes (see `WatchOptions::content_hash`). Its entries are shared
    /// with the look the scanner is making (which compares with them),
    /// never copied for it.
    picture: Arc<Picture>,
    /// Polled because a covering spec's root is polled (by choice, or
    /// `Auto` found a shared file system), every this many milliseconds
    /// (polls are scheduled in whole milliseconds).
    chosen: Option<NonZeroU32>,
    /// Polled in place of an OS watch, and why (`Link` wins over `Limit`).
    instead: Option<Why>,
    /// The file systems the last look at it touched: an index into
    /// [`PollSet`]'s `keys`, plus one (0: not known).
    fs: u16,
}

/// The scanner's look at a directory, while one is under way or asked for.
/// A directory without one is done with every look it was handed.
#[derive(Debug)]
struct Looking {
    /// The look the scanner is making of it (at most one at a time: a
    /// slow or hung directory gets no queue of looks).
    in_flight: Option<u64>,
    /// A look asked for while one was under way (a barrier's): issued
    /// once that one is done with.
    again: Option<u64>,
    /// The names the engine looked at while the look was under way (an
    /// event's, mostly): the look may be older than that. For a directory
    /// polled only, the look is made again rather than applied; for one
    /// with an OS watch too (whose events go on), it is applied but for
    /// these names, for which the engine's view stands.
    #[expect(
        clippy::box_collection,
        reason = "8 bytes a look where the set takes 24: a round of a million looks has a \
                  million of these, and almost none has a name in it"
    )]
    touched: Option<Box<BTreeSet<OsString>>>,
    /// The newest look asked for, and the newest one done with (applied,
    /// or overtaken by a read of the engine's own).
    issued: u64,
    applied: u64,
    /// When the look in flight was handed toward the scanner.
    since: Option<Instant>,
}

/// Which directories are polled, why, and when.
#[derive(Debug)]
pub(super) struct PollSet {
    dirs: BTreeMap<DirId, Polled>,
    /// The looks under way or asked for (of polled directories only).
    looks: BTreeMap<DirId, Looking>,
    /// Looks under way that wait for room at the scanner, per file
    /// systems' key (each has its own lane there, and its own room: a
    /// lane that is full, its file system hung, holds up no other's), in
    /// the order
    /// they were issued (see [`Scanner::room`](crate::scanner::Scanner::room)).
    waiting: BTreeMap<u16, VecDeque<(DirId, u64)>>,
    /// The file systems' keys looks at polled directories found
    /// (`Polled::fs` minus one indexes it), and each one's number: a few
    /// entries, about one per file system, never more than `u16::MAX - 1`
    /// (the rest count as not known).
    keys: Vec<u64>,
    numbers: HashMap<u64, u16>,
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
    /// How long a look may be under way before its storage is said not
    /// to answer.
    deadline: Duration,
    /// The directories whose look has been under way longer than that,
    /// as of the last [`check_hung`](Self::check_hung), and when that
    /// was.
    hung: BTreeSet<DirId>,
    checked: Option<Instant>,
}

/// An interval in whole milliseconds (at least one).
fn millis(every: Duration) -> NonZeroU32 {
    let ms = u32::try_from(every.as_millis()).unwrap_or(u32::MAX);
    NonZeroU32::new(ms).unwrap_or(NonZeroU32::MIN)
}

impl Polled {
    /// A directory polled from now on.
    fn new() -> Polled {
        Polled {
            picture: Arc::default(),
            chosen: None,
            instead: None,
            fs: 0,
        }
    }

    fn every(&self, instead: Duration) -> Duration {
        let chosen = self
            .chosen
            .map(|ms| Duration::from_millis(u64::from(ms.get())));
        match (self.instead, chosen) {
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
            looks: BTreeMap::new(),
            waiting: BTreeMap::new(),
            keys: Vec::new(),
            numbers: HashMap::new(),
            interval: interval
                .unwrap_or(DEFAULT_POLL_INTERVAL)
                .max(Duration::from_millis(1)),
            next: BTreeMap::new(),
            limit_reason: None,
            changed: false,
            tokens: 0,
            deadline: crate::spec::defaults::DEFAULT_STORAGE_DEADLINE,
            hung: BTreeSet::new(),
            checked: None,
        }
    }

    /// How long a look may be under way before its storage is said not
    /// to answer.
    /// How long a look may be under way before its storage counts as not
    /// answering (`ManagerBuilder::storage_deadline`).
    pub(super) fn deadline(&self) -> Duration {
        self.deadline
    }

    pub(super) fn set_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline.max(Duration::from_millis(1));
    }

    /// Notes, at `now`, which directories have had a look under way for
    /// longer than the deadline (a mount whose server stopped answering);
    /// a change of that set changes the statuses
    /// ([`take_changed`](Self::take_changed)).
    pub(super) fn check_hung(&mut self, now: Instant) {
        if self.checked.is_some_and(|c| now < c + self.deadline / 4) {
            return;
        }
        self.checked = Some(now);
        let deadline = self.deadline;
        let hung: BTreeSet<DirId> = self
            .looks
            .iter()
            .filter(|(_, l)| l.in_flight.is_some() && l.since.is_some_and(|s| s + deadline <= now))
            .map(|(id, _)| *id)
            .collect();
        if hung != self.hung {
            self.hung = hung;
            self.changed = true;
        }
    }

    /// The directories whose look has been under way longer than the
    /// deadline, and the deadline.
    pub(super) fn hung(&self) -> (&BTreeSet<DirId>, Duration) {
        (&self.hung, self.deadline)
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
    /// picture if it already is polled); `Link` wins over `Limit`.
    pub(super) fn add(&mut self, id: DirId, why: Why, now: Instant) {
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
    pub(super) fn choose(&mut self, id: DirId, every: Duration, now: Instant) -> bool {
        let mut new = false;
        let p = self.dirs.entry(id).or_insert_with(|| {
            new = true;
            Polled::new()
        });
        if p.chosen == Some(millis(every)) {
            return false;
        }
        p.chosen = Some(millis(every));
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
                self.remove(id);
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
                self.remove(id);
            }
        }
    }

    /// Stops polling `id` (it left the index).
    pub(super) fn remove(&mut self, id: DirId) {
        self.looks.remove(&id);
        self.changed |= self.dirs.remove(&id).is_some();
    }

    /// A look at `id` for the scanner: `Some((token, true))` to hand over
    /// now; `Some((token, false))` when one is under way already, the new
    /// one then follows it (see [`take_finding`](Self::take_finding)): a
    /// barrier waits for `token` either way. `None`: not polled.
    pub(super) fn issue(&mut self, id: DirId) -> Option<(u64, bool)> {
        if !self.dirs.contains_key(&id) {
            return None;
        }
        if let Some(l) = self.looks.get(&id)
            && l.in_flight.is_some()
            && let Some(t) = l.again
        {
            return Some((t, false));
        }
        self.tokens += 1;
        let token = self.tokens;
        let l = self.looks.entry(id).or_insert(Looking {
            in_flight: None,
            again: None,
            touched: None,
            issued: token,
            // Done with every look handed out before this one.
            applied: token - 1,
            since: None,
        });
        l.issued = token;
        if l.in_flight.is_some() {
            l.again = Some(token);
            return Some((token, false));
        }
        l.in_flight = Some(token);
        Some((token, true))
    }

    /// Look `token` at `id`, under way from `now` on, waits for room at
    /// the scanner (in its file systems' queue).
    pub(super) fn wait(&mut self, id: DirId, token: u64, now: Instant) {
        if let Some(l) = self.looks.get_mut(&id) {
            l.since = Some(now);
        }
        let fs = self.dirs.get(&id).map_or(0, |p| p.fs);
        self.waiting.entry(fs).or_default().push_back((id, token));
    }

    /// The queues of looks waiting for room at the scanner: each one's
    /// number here and its file systems' key (`None`: not known).
    pub(super) fn waiting_file_systems(&self) -> Vec<(u16, Option<u64>)> {
        self.waiting
            .keys()
            .map(|&fs| (fs, self.key_of(fs)))
            .collect()
    }

    /// The next look of queue `fs` waiting for room at the scanner that
    /// is still under way (those overtaken meanwhile are left out).
    pub(super) fn next_waiting(&mut self, fs: u16) -> Option<(DirId, u64)> {
        let queue = self.waiting.get_mut(&fs)?;
        while let Some((id, token)) = queue.pop_front() {
            if self
                .looks
                .get(&id)
                .is_some_and(|l| l.in_flight == Some(token))
            {
                return Some((id, token));
            }
        }
        self.waiting.remove(&fs); // (the memory of a big round goes)
        None
    }

    /// The key numbered `fs`.
    fn key_of(&self, fs: u16) -> Option<u64> {
        self.keys.get(usize::from(fs).checked_sub(1)?).copied()
    }

    /// The file systems the last look at `id` touched, as a key (see
    /// `fs::Look::fs_key`), if it is polled and that is known: the
    /// scanner's lane for its next.
    pub(super) fn fs_key(&self, id: DirId) -> Option<u64> {
        self.key_of(self.dirs.get(&id)?.fs)
    }

    /// A look at `id` touched the file systems of `key` (`None`: it does
    /// not tell).
    pub(super) fn seen_on(&mut self, id: DirId, key: Option<u64>) {
        let Some(key) = key else {
            return;
        };
        let Some(p) = self.dirs.get_mut(&id) else {
            return;
        };
        let fs = match self.numbers.get(&key) {
            Some(&n) => n,
            None => match u16::try_from(self.keys.len() + 1) {
                Ok(n) if n < u16::MAX => {
                    self.keys.push(key);
                    self.numbers.insert(key, n);
                    n
                }
                _ => 0,
            },
        };
        p.fs = fs;
    }

    /// Whether the scanner is looking at `id`.
    pub(super) fn in_flight(&self, id: DirId) -> bool {
        self.looks.get(&id).is_some_and(|l| l.in_flight.is_some())
    }

    /// The engine looked at the whole of `id` itself (read it, or polled it
    /// on the engine's thread): a look of the scanner's under way, or asked for,
    /// is older, and is not applied when it comes.
    pub(super) fn outdate(&mut self, id: DirId) {
        self.looks.remove(&id);
    }

    /// The engine looked at entry `name` of `id`: a look under way may be
    /// older than that (see [`take_finding`](Self::take_finding)).
    pub(super) fn touched(&mut self, id: DirId, name: &OsStr) {
        if !self.looks.is_empty()
            && let Some(l) = self.looks.get_mut(&id)
            && l.in_flight.is_some()
        {
            l.touched
                .get_or_insert_default()
                .insert(name.to_os_string());
        }
    }

    /// The scanner's look `token` at `id` came back: what to do with it
    /// (`watched`: `id` has an OS watch too). A look made again is in
    /// flight at once (its token is in the answer, for the caller to hand
    /// over); after a look applied, the one asked for meanwhile is the
    /// caller's to [`follow_up`](Self::follow_up).
    pub(super) fn take_finding(&mut self, id: DirId, token: u64, watched: bool) -> Finding {
        let Some(l) = self.looks.get_mut(&id) else {
            return Finding::Drop;
        };
        if l.in_flight != Some(token) {
            return Finding::Drop;
        }
        l.in_flight = None;
        let touched = l.touched.take();
        if touched.is_some() && !watched {
            let next = match l.again.take() {
                Some(t) => t,
                None => {
                    self.tokens += 1;
                    l.issued = self.tokens;
                    self.tokens
                }
            };
            l.in_flight = Some(next);
            return Finding::Again(next);
        }
        l.applied = token;
        if l.again.is_none() {
            // Done with every look it was handed.
            self.looks.remove(&id);
        }
        Finding::Apply(touched.map(|t| *t).unwrap_or_default())
    }

    /// After a look of `id` was applied: the look asked for meanwhile, now
    /// in flight, if there is one (its token).
    pub(super) fn follow_up(&mut self, id: DirId) -> Option<u64> {
        let l = self.looks.get_mut(&id)?;
        if l.in_flight.is_some() {
            return None;
        }
        let next = l.again.take()?;
        l.in_flight = Some(next);
        Some(next)
    }

    /// Whether look `token` at `id` is done with (or `id` is polled no
    /// more): what a sync barrier waits for. A directory with no look
    /// under way or asked for is done with every look it was handed.
    pub(super) fn done(&self, id: DirId, token: u64) -> bool {
        self.looks.get(&id).is_none_or(|l| l.applied >= token)
    }

    /// Entry `name` of `id` gets signature `sig` if it has none yet.
    pub(super) fn sign_name(&mut self, id: DirId, name: &OsStr, sig: Option<fs::Sig>) {
        if let Some(p) = self.dirs.get_mut(&id)
            && p.picture.get(name).is_none()
            && let Some(sig) = sig
        {
            Arc::make_mut(&mut p.picture).set(name, Some(sig));
        }
    }

    /// What the last look at `id` saw, if it is polled.
    pub(super) fn picture(&self, id: DirId) -> Option<&Picture> {
        self.dirs.get(&id).map(|p| &*p.picture)
    }

    /// [`picture`](Self::picture), shared (for the scanner's look).
    pub(super) fn shared_picture(&self, id: DirId) -> Option<Arc<Picture>> {
        self.dirs.get(&id).map(|p| p.picture.clone())
    }

    /// Replaces the picture of `id`, if it is polled. One equal to the
    /// picture it has (a directory where nothing changed) is dropped, and
    /// the one it has kept: the memory a picture holds stays where it was,
    /// not freed and taken again at every poll (by the scanner's threads,
    /// whose allocations go elsewhere).
    pub(super) fn set_picture(&mut self, id: DirId, picture: Picture) {
        if let Some(p) = self.dirs.get_mut(&id)
            && *p.picture != picture
        {
            p.picture = Arc::new(picture);
        }
    }

    pub(super) fn note_limit(&mut self, reason: String) {
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
    pub(super) fn limit_ids(&self) -> Vec<DirId> {
        self.dirs
            .iter()
            .filter(|(_, p)| p.instead == Some(Why::Limit))
            .map(|(id, _)| *id)
            .collect()
    }

    /// The directories due for a poll at `now`, and the intervals they
    /// are polled at (to [`rearm`](Self::rearm) after polling them).
    pub(super) fn due(&mut self, now: Instant) -> (Vec<DirId>, Vec<Duration>) {
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
    pub(super) fn rearm(&mut self, due: &[Duration], now: Instant) {
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
        // While looks are under way (or some hung), a look at them every
        // quarter of the deadline.
        let hung_check = (!self.looks.is_empty() || !self.hung.is_empty())
            .then(|| self.checked.map(|c| c + self.deadline / 4))
            .flatten();
        self.next.values().copied().chain(hung_check).min()
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
    pub(super) fn forget_limit_unless_polled(&mut self) {
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

#[cfg(test)]
#[path = "tests/poll_set.rs"]
mod tests;
