//! Mounts: the only writer of which file system each polled root is on
//! (its device, and the device below it: what its mount point shows once
//! the file system is unmounted), and of the roots whose file system went
//! away. The steps that look are `mounting.rs`'s.
//!
//! A shared file system (NFS, a FUSE mount) can be unmounted under a live
//! watch and mounted again. Read naively, a poll of the root while it is
//! away finds the empty directory below the mount and reports every file
//! removed, then every file created once it is back. Instead, a root whose
//! device becomes the one below it is *away*: its last known contents are
//! kept (the looks below it are not applied) and its specs say so; once
//! another file system is there again, the polls compare with what was
//! kept, so the changes reported are exactly the net changes made while it
//! was away.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use crate::index::SpecId;

/// Since when a root's file system is away, and what is there instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Away {
    pub since: SystemTime,
    /// The device found at the root (or at its nearest existing ancestor)
    /// while it is away: the one below its mount.
    pub found: u64,
}

#[derive(Debug)]
struct Mount {
    /// The device the root is on while its file system is there.
    dev: u64,
    /// The device of the nearest ancestor on another device: what the
    /// root's path leads to once its file system is unmounted (`None`:
    /// every ancestor is on the root's device).
    below: Option<u64>,
    specs: BTreeSet<SpecId>,
    away: Option<Away>,
}

/// What a look at a root's device tells.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// Its file system is there, as before.
    Here,
    /// Its file system went away just now.
    Went,
    /// It is still away.
    Away,
    /// It is back, after being away since then.
    Back(SystemTime),
    /// Another file system than before is there (mounted over the root,
    /// or mounted again while no look saw it away): what is there is
    /// compared with what was, as any poll.
    Other,
}

/// What to do with a look at a directory, as far as mounts go.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Apply it (no tracked root's file system is in question).
    Apply,
    /// Do not: it is below a root whose file system is away.
    Hold,
    /// Find the device at this root first (the look found the device
    /// below it, or nothing; or it is a look at the root while away).
    Check(PathBuf),
}

/// The polled roots' file systems.
#[derive(Debug, Default)]
pub(super) struct Mounts {
    roots: BTreeMap<PathBuf, Mount>,
    /// How many roots each device is below (a look that finds one of
    /// these where it expects a root's file system is looked at closer).
    belows: BTreeMap<u64, usize>,
    /// How many roots each directory is the parent of.
    parents: BTreeMap<PathBuf, usize>,
    away: usize,
    /// When to look again at the roots away that nothing polls (an event
    /// backend's, whose watches went with the file system).
    next: Option<Instant>,
    touched: Vec<SpecId>,
}

impl Mounts {
    /// Whether no root is tracked (the engine's fast path).
    pub(super) fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// Spec `sid` has `root` too, if it is tracked already (for another
    /// spec, or an earlier attach): returns whether it is.
    pub(super) fn also(&mut self, sid: SpecId, root: &Path) -> bool {
        match self.roots.get_mut(root) {
            Some(m) => {
                m.specs.insert(sid);
                true
            }
            None => false,
        }
    }

    /// Root `root` of `sid` is polled, on device `dev` with `below` under
    /// it. A root tracked already (for another spec) keeps what it knows.
    pub(super) fn track(&mut self, sid: SpecId, root: &Path, dev: u64, below: Option<u64>) {
        let m = self.roots.entry(root.to_path_buf()).or_insert_with(|| {
            if let Some(b) = below {
                *self.belows.entry(b).or_default() += 1;
            }
            if let Some(p) = root.parent() {
                *self.parents.entry(p.to_path_buf()).or_default() += 1;
            }
            Mount {
                dev,
                below,
                specs: BTreeSet::new(),
                away: None,
            }
        });
        m.specs.insert(sid);
    }

    /// Spec `sid` is gone (or applied again): its roots are not tracked
    /// for it any more.
    pub(super) fn untrack(&mut self, sid: SpecId) {
        let mut emptied = Vec::new();
        for (root, m) in &mut self.roots {
            if m.specs.remove(&sid) && m.specs.is_empty() {
                emptied.push(root.clone());
            }
        }
        for root in emptied {
            if let Some(m) = self.roots.remove(&root) {
                self.forget_below(m.below);
                if let Some(p) = root.parent()
                    && let Some(n) = self.parents.get_mut(p)
                {
                    *n -= 1;
                    if *n == 0 {
                        self.parents.remove(p);
                    }
                }
                if m.away.is_some() {
                    self.away -= 1;
                }
            }
        }
    }

    fn forget_below(&mut self, below: Option<u64>) {
        if let Some(b) = below
            && let Some(n) = self.belows.get_mut(&b)
        {
            *n -= 1;
            if *n == 0 {
                self.belows.remove(&b);
            }
        }
    }

    /// Whether a look that found device `dev` (`None`: it found nothing,
    /// or could not tell) may concern a root's file system that went or
    /// came back, and is to be looked at closer.
    fn suspect(&self, dev: Option<u64>) -> bool {
        !self.roots.is_empty()
            && (self.away > 0 || dev.is_none_or(|d| self.belows.contains_key(&d)))
    }

    /// What to do with a look at `path` that found device `dev` (`None`:
    /// it found nothing there, or could not tell).
    pub(super) fn judge(&self, path: &Path, dev: Option<u64>) -> Verdict {
        if !self.suspect(dev) {
            return Verdict::Apply;
        }
        let Some((root, m)) = path.ancestors().find_map(|a| self.roots.get_key_value(a)) else {
            return Verdict::Apply;
        };
        match &m.away {
            Some(_) if path != root => Verdict::Hold,
            Some(_) => Verdict::Check(root.clone()),
            None if dev.is_none() || dev == m.below => Verdict::Check(root.clone()),
            None => Verdict::Apply,
        }
    }

    /// The tracked roots whose parent is `dir` (a look at `dir` that no
    /// longer lists one may tell its file system went away).
    pub(super) fn roots_in(&self, dir: &Path) -> Vec<PathBuf> {
        if !self.parents.contains_key(dir) {
            return Vec::new();
        }
        self.roots
            .range(dir.to_path_buf()..)
            .map(|(r, _)| r)
            .take_while(|r| r.starts_with(dir))
            .filter(|r| r.parent() == Some(dir))
            .cloned()
            .collect()
    }

    /// The tracked root at or above `path` (the deepest one).
    pub(super) fn root_of(&self, path: &Path) -> Option<PathBuf> {
        path.ancestors()
            .find(|a| self.roots.contains_key(*a))
            .map(Path::to_path_buf)
    }

    /// Whether `path` is a tracked root.
    pub(super) fn is_root(&self, path: &Path) -> bool {
        self.roots.contains_key(path)
    }

    /// Whether `path` is at or below a root whose file system is away
    /// (what a look there finds is not applied).
    pub(super) fn holds(&self, path: &Path) -> bool {
        self.away > 0
            && path
                .ancestors()
                .any(|a| self.roots.get(a).is_some_and(|m| m.away.is_some()))
    }

    /// Device `found` was found at `root` (or, with the root missing, at
    /// its nearest existing ancestor) at `wall`: what that tells, the
    /// root's state updated with it.
    pub(super) fn seen(&mut self, root: &Path, found: u64, wall: SystemTime) -> Seen {
        let Some(m) = self.roots.get_mut(root) else {
            return Seen::Here;
        };
        let seen = match (&m.away, m.below) {
            (None, _) if found == m.dev => Seen::Here,
            (None, Some(b)) if found == b => {
                m.away = Some(Away { since: wall, found });
                self.away += 1;
                Seen::Went
            }
            (None, _) => {
                m.dev = found;
                Seen::Other
            }
            (Some(_), Some(b)) if found == b => Seen::Away,
            (Some(a), _) => {
                let since = a.since;
                m.away = None;
                m.dev = found;
                self.away -= 1;
                Seen::Back(since)
            }
        };
        if matches!(seen, Seen::Went | Seen::Back(_)) {
            self.touched.extend(m.specs.iter().copied());
        }
        seen
    }

    /// The roots away, to be looked at again, if that is due at `now`.
    pub(super) fn due(&mut self, now: Instant) -> Vec<PathBuf> {
        if self.next.is_none_or(|t| t > now) {
            return Vec::new();
        }
        self.next = None;
        self.roots
            .iter()
            .filter(|(_, m)| m.away.is_some())
            .map(|(r, _)| r.clone())
            .collect()
    }

    /// Looks again at the roots away at `at` (or earlier, if asked so
    /// already).
    pub(super) fn arm(&mut self, at: Instant) {
        self.next = Some(self.next.map_or(at, |t| t.min(at)));
    }

    /// When to look again at roots away.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.next
    }

    /// Since when `root`'s file system is away, and what is there instead
    /// (`None`: it is there, or the root is not tracked).
    pub(super) fn away(&self, root: &Path) -> Option<&Away> {
        self.roots.get(root)?.away.as_ref()
    }

    /// The specs tracking `root`.
    pub(super) fn specs_of(&self, root: &Path) -> Vec<SpecId> {
        self.roots
            .get(root)
            .map(|m| m.specs.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Specs whose roots went away or came back since the last call.
    pub(super) fn take_touched(&mut self) -> Vec<SpecId> {
        std::mem::take(&mut self.touched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: SystemTime = SystemTime::UNIX_EPOCH;
    const MNT: u64 = 40;
    const DISK: u64 = 65024;

    fn mounts() -> Mounts {
        let mut m = Mounts::default();
        m.track(1, Path::new("/srv/mnt"), MNT, Some(DISK));
        m
    }

    #[test]
    fn a_root_that_shows_the_device_below_it_is_away_until_another_is_there() {
        let mut m = mounts();
        let root = || Verdict::Check(PathBuf::from("/srv/mnt"));
        let a = Path::new("/srv/mnt/a");
        assert_eq!(m.judge(a, Some(MNT)), Verdict::Apply, "its own device");
        assert_eq!(m.judge(a, Some(DISK)), root(), "the device below it");
        assert_eq!(m.judge(a, None), root(), "nothing found");
        assert_eq!(
            m.judge(Path::new("/srv"), None),
            Verdict::Apply,
            "not below"
        );
        assert_eq!(m.seen(Path::new("/srv/mnt"), MNT, T), Seen::Here);
        assert!(m.take_touched().is_empty());
        assert!(!m.holds(Path::new("/srv/mnt/a")));

        assert_eq!(m.seen(Path::new("/srv/mnt"), DISK, T), Seen::Went);
        assert_eq!(m.take_touched(), vec![1], "its spec's status changes");
        assert_eq!(
            m.away(Path::new("/srv/mnt")),
            Some(&Away {
                since: T,
                found: DISK
            })
        );
        assert!(m.holds(Path::new("/srv/mnt")));
        assert!(m.holds(Path::new("/srv/mnt/a/b")));
        assert!(!m.holds(Path::new("/srv/other")));
        assert_eq!(m.judge(a, Some(MNT)), Verdict::Hold, "below it: held");
        assert_eq!(
            m.judge(Path::new("/srv/mnt"), Some(DISK)),
            root(),
            "itself: checked"
        );
        assert_eq!(m.judge(Path::new("/srv/x"), Some(MNT)), Verdict::Apply);
        assert_eq!(m.seen(Path::new("/srv/mnt"), DISK, T), Seen::Away);
        assert!(m.take_touched().is_empty(), "still away: no news");

        // Mounted again (FUSE may hand out another device number).
        assert_eq!(m.seen(Path::new("/srv/mnt"), 41, T), Seen::Back(T));
        assert_eq!(m.take_touched(), vec![1]);
        assert_eq!(m.away(Path::new("/srv/mnt")), None);
        assert!(!m.holds(Path::new("/srv/mnt/a")));
        assert_eq!(m.seen(Path::new("/srv/mnt"), 41, T), Seen::Here);
        assert_eq!(m.seen(Path::new("/srv/mnt"), DISK, T), Seen::Went);
    }

    #[test]
    fn roots_away_are_looked_at_again_when_due() {
        let mut m = mounts();
        let t0 = Instant::now();
        assert!(m.due(t0).is_empty(), "nothing armed");
        m.seen(Path::new("/srv/mnt"), DISK, T);
        m.arm(t0 + std::time::Duration::from_secs(2));
        m.arm(t0 + std::time::Duration::from_secs(1));
        assert_eq!(
            m.next_deadline(),
            Some(t0 + std::time::Duration::from_secs(1))
        );
        assert!(m.due(t0).is_empty(), "not yet");
        let later = t0 + std::time::Duration::from_secs(1);
        assert_eq!(m.due(later), vec![PathBuf::from("/srv/mnt")]);
        assert_eq!(m.next_deadline(), None, "armed again by the caller");
        assert!(m.due(later).is_empty());
    }

    #[test]
    fn another_file_system_over_a_root_is_no_absence() {
        let mut m = Mounts::default();
        // A local root: every ancestor on its device.
        m.track(1, Path::new("/home/u/p"), DISK, None);
        assert_eq!(m.judge(Path::new("/home/u/p"), Some(DISK)), Verdict::Apply);
        assert_eq!(m.seen(Path::new("/home/u/p"), 77, T), Seen::Other);
        assert_eq!(m.seen(Path::new("/home/u/p"), 77, T), Seen::Here);
        assert!(m.take_touched().is_empty());
        assert!(!m.holds(Path::new("/home/u/p")));
    }

    #[test]
    fn roots_are_shared_by_specs_and_go_with_the_last() {
        let mut m = mounts();
        assert!(m.also(2, Path::new("/srv/mnt")));
        assert!(!m.also(2, Path::new("/srv/mnt/sub")), "not tracked yet");
        m.track(2, Path::new("/srv/mnt/sub"), MNT, Some(DISK));
        assert_eq!(
            m.judge(Path::new("/srv/mnt/sub/x"), None),
            Verdict::Check(PathBuf::from("/srv/mnt/sub")),
            "the deepest root"
        );
        assert_eq!(m.seen(Path::new("/srv/mnt"), DISK, T), Seen::Went);
        let mut t = m.take_touched();
        t.sort();
        assert_eq!(t, vec![1, 2]);
        m.untrack(1);
        assert!(m.also(2, Path::new("/srv/mnt")), "spec 2 still has it");
        assert!(m.is_root(Path::new("/srv/mnt")) && !m.is_root(Path::new("/srv")));
        assert_eq!(
            m.roots_in(Path::new("/srv")),
            vec![PathBuf::from("/srv/mnt")]
        );
        assert_eq!(
            m.roots_in(Path::new("/srv/mnt")),
            vec![PathBuf::from("/srv/mnt/sub")]
        );
        assert!(m.roots_in(Path::new("/srv/mnt/sub")).is_empty());
        assert_eq!(
            m.root_of(Path::new("/srv/mnt/sub/x")),
            Some(PathBuf::from("/srv/mnt/sub"))
        );
        assert_eq!(
            m.root_of(Path::new("/srv/mnt/x")),
            Some(PathBuf::from("/srv/mnt"))
        );
        assert_eq!(m.root_of(Path::new("/srv")), None);
        m.untrack(2);
        assert!(m.is_empty());
        assert!(m.roots_in(Path::new("/srv")).is_empty());
        assert_eq!(
            m.judge(Path::new("/srv/mnt"), None),
            Verdict::Apply,
            "nothing tracked"
        );
        assert!(
            !m.holds(Path::new("/srv/mnt")),
            "the away count went with it"
        );
    }
}
