//! The OS watch table: the only writer of which directory holds which OS
//! watch, in both directions, and the only caller of the backend's watch
//! and unwatch. It also enforces the manager's cap on watches.
//!
//! With a per-directory backend (inotify) each indexed directory that
//! needs one holds a [`WatchId`]; one directory reached by several paths
//! (followed symlinks) is one watch, held by one node and aliased by the
//! others. With a path backend (notify) watches are recursive and by path:
//! the backend keeps them, and the table only reconciles them with what the
//! index needs. The steps that ask for watches and let go of them are
//! `watching.rs`'s.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::backend::{Os, PathWatcher, WatchError, WatchId};
use crate::index::DirId;

/// Which node holds each watch, as `u32` node ids: 8 bytes an entry where
/// a `usize` makes 16 (one entry per watched directory).
#[derive(Default)]
struct Holders(HashMap<WatchId, u32>);

impl Holders {
    fn get(&self, w: &WatchId) -> Option<DirId> {
        self.0.get(w).map(|&id| id as DirId)
    }

    fn insert(&mut self, w: WatchId, id: DirId) {
        let id = u32::try_from(id).expect("fewer than 2^32 directories");
        self.0.insert(w, id);
    }

    fn remove(&mut self, w: &WatchId) -> Option<DirId> {
        self.0.remove(w).map(|id| id as DirId)
    }

    fn contains_key(&self, w: &WatchId) -> bool {
        self.0.contains_key(w)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn iter(&self) -> impl Iterator<Item = (WatchId, DirId)> + '_ {
        self.0.iter().map(|(w, id)| (*w, *id as DirId))
    }
}

/// "No watch" in [`WatchTable::of_dir`].
const NONE: i32 = -1;

pub(super) struct WatchTable {
    os: Os,
    /// Per-directory backends: the node holding each watch.
    holder: Holders,
    /// Other nodes for the same directory (other paths to it).
    aliases: HashMap<WatchId, Vec<DirId>>,
    /// The watch of each node, by id (dense: 4 bytes a directory).
    of_dir: Vec<i32>,
    /// The manager's cap on per-directory watches.
    cap: Option<usize>,
    /// A watch was released since the last look (polled directories may
    /// move back).
    freed: bool,
    /// Path backends: watches must be reconciled with the index.
    reconcile_due: bool,
}

impl WatchTable {
    pub(super) fn new(os: Os, cap: Option<usize>) -> WatchTable {
        WatchTable {
            os,
            holder: Holders::default(),
            aliases: HashMap::new(),
            of_dir: Vec::new(),
            cap,
            freed: false,
            reconcile_due: false,
        }
    }

    /// Whether the backend watches one directory per watch (else: by path,
    /// recursively).
    pub(super) fn per_directory(&self) -> bool {
        matches!(self.os, Os::Dirs(_))
    }

    /// The watch node `id` holds or shares.
    pub(super) fn watch_of(&self, id: DirId) -> Option<WatchId> {
        match self.of_dir.get(id) {
            Some(&w) if w != NONE => Some(WatchId(w)),
            _ => None,
        }
    }

    /// The node holding watch `w`.
    pub(super) fn holder(&self, w: WatchId) -> Option<DirId> {
        self.holder.get(&w)
    }

    /// The other nodes of watch `w`'s directory.
    pub(super) fn aliases(&self, w: WatchId) -> &[DirId] {
        self.aliases.get(&w).map_or(&[], Vec::as_slice)
    }

    /// OS watches held (path backends: watch calls held; a poller: none).
    pub(super) fn count(&self) -> usize {
        match &self.os {
            Os::Dirs(d) if d.holds_os_watches() => self.holder.len(),
            Os::Dirs(_) => 0,
            Os::Paths(p) => p.count(),
        }
    }

    /// Whether the backend holds OS watches (else it is the backend of a
    /// manager that polls everything: the engine's polls are the truth
    /// already).
    pub(super) fn holds_os_watches(&self) -> bool {
        match &self.os {
            Os::Dirs(d) => d.holds_os_watches(),
            Os::Paths(_) => true,
        }
    }

    /// A per-directory watch call, within the cap. Records nothing.
    pub(super) fn call(&mut self, path: &Path, follow: bool) -> Result<WatchId, WatchError> {
        if let Some(max) = self.cap
            && self.holder.len() >= max
            && matches!(&self.os, Os::Dirs(d) if d.holds_os_watches())
        {
            return Err(WatchError::new(
                io::Error::new(
                    io::ErrorKind::QuotaExceeded,
                    format!("the manager's cap of {max} OS watches is reached"),
                ),
                path,
            ));
        }
        match &mut self.os {
            Os::Dirs(d) => d.watch(path, follow),
            Os::Paths(_) => unreachable!("per-directory call on a path backend"),
        }
    }

    /// Whether nodes other than `id` hold watch `w` (and `id` is not yet
    /// one of them).
    pub(super) fn held_by_others(&self, w: WatchId, id: DirId) -> bool {
        self.holder(w).is_some_and(|h| h != id) && !self.aliases(w).contains(&id)
    }

    /// Records that node `id` holds (or shares) watch `w`.
    pub(super) fn record(&mut self, id: DirId, w: WatchId) {
        match self.holder.get(&w) {
            Some(h) if h != id => {
                let a = self.aliases.entry(w).or_default();
                if !a.contains(&id) {
                    a.push(id);
                }
            }
            Some(_) => {}
            None => {
                self.holder.insert(w, id);
            }
        }
        if self.of_dir.len() <= id {
            self.of_dir.resize(id + 1, NONE);
        }
        self.of_dir[id] = w.0;
    }

    /// Takes every node of watch `w` out of the table (their own records
    /// stay) to sort them again.
    pub(super) fn take_members(&mut self, w: WatchId) -> Vec<DirId> {
        self.holder
            .remove(&w)
            .into_iter()
            .chain(self.aliases.remove(&w).unwrap_or_default())
            .collect()
    }

    /// Puts back the members of `w` that still lead to it.
    pub(super) fn set_members(&mut self, w: WatchId, kept: &[DirId]) {
        if let Some((first, rest)) = kept.split_first() {
            self.holder.insert(w, *first);
            if !rest.is_empty() {
                self.aliases.insert(w, rest.to_vec());
            }
        }
    }

    /// A new backend in place of one whose reader stopped: no node holds
    /// a watch of it yet (path backends: every needed one is to be
    /// added). The old one is handed back, to be dropped.
    pub(super) fn replace_backend(&mut self, os: Os) -> Os {
        self.holder = Holders::default();
        self.aliases.clear();
        self.of_dir.fill(NONE);
        self.reconcile_due = true;
        std::mem::replace(&mut self.os, os)
    }

    /// Node `id` no longer has a watch (without telling the OS).
    pub(super) fn clear(&mut self, id: DirId) {
        if let Some(w) = self.of_dir.get_mut(id) {
            *w = NONE;
        }
    }

    /// Whether `path` leads to the directory of watch `w`, asking the OS.
    /// A watch the question created and nothing records is removed again.
    pub(super) fn leads_to(&mut self, path: &Path, follow: bool, w: WatchId) -> bool {
        let Os::Dirs(d) = &mut self.os else {
            return false;
        };
        match d.identify(path, follow) {
            Some(x) if x == w => true,
            Some(x) => {
                if !self.holder.contains_key(&x) {
                    d.unwatch(x);
                }
                false
            }
            None => false,
        }
    }

    /// Removes watch `w` from the OS if nothing records it.
    pub(super) fn discard_if_unrecorded(&mut self, w: WatchId) {
        if !self.holder.contains_key(&w)
            && let Os::Dirs(d) = &mut self.os
        {
            d.unwatch(w);
        }
    }

    /// Node `id` (at `path`) left the index: its watch goes unless another
    /// path to the same directory keeps it (an alias takes over a watch
    /// its holder lets go of).
    pub(super) fn release(&mut self, id: DirId, path: &Path) {
        match &mut self.os {
            Os::Dirs(d) => {
                let Some(w) = self.of_dir.get(id).copied().filter(|w| *w != NONE) else {
                    return;
                };
                self.of_dir[id] = NONE;
                let w = WatchId(w);
                if self.holder.get(&w) == Some(id) {
                    match self.aliases.get_mut(&w).and_then(Vec::pop) {
                        Some(next) => {
                            self.holder.insert(w, next);
                        }
                        None => {
                            self.holder.remove(&w);
                            d.unwatch(w);
                            self.freed = true;
                        }
                    }
                } else if let Some(a) = self.aliases.get_mut(&w) {
                    a.retain(|x| *x != id);
                }
                if self.aliases.get(&w).is_some_and(Vec::is_empty) {
                    self.aliases.remove(&w);
                }
            }
            Os::Paths(p) => {
                if p.forget_dir(path) {
                    self.freed = true;
                }
                self.reconcile_due = true;
            }
        }
    }

    /// The OS dropped watch `w`: the nodes that held it, now without. Its
    /// slot is free again (directories polled for want of one may move
    /// back).
    pub(super) fn lost(&mut self, w: WatchId) -> Vec<DirId> {
        let ids = self.take_members(w);
        for &i in &ids {
            self.clear(i);
        }
        if !ids.is_empty() {
            self.freed = true;
        }
        ids
    }

    /// Whether node `id` (at `path`) has the watch it needs (`recursive`:
    /// for everything below too, on path backends).
    pub(super) fn has_watch(&self, id: DirId, path: &Path, recursive: bool) -> bool {
        match &self.os {
            Os::Dirs(_) => self.watch_of(id).is_some(),
            Os::Paths(p) => p.has_watch(path, recursive),
        }
    }

    /// Whether a watch was released since the last call.
    pub(super) fn take_freed(&mut self) -> bool {
        std::mem::take(&mut self.freed)
    }

    /// Path backends: reconcile watches with the index at the end of the
    /// pass.
    pub(super) fn reconcile_soon(&mut self) {
        self.reconcile_due = true;
    }

    pub(super) fn take_reconcile_due(&mut self) -> bool {
        std::mem::take(&mut self.reconcile_due)
    }

    pub(super) fn paths(&self) -> Option<&dyn PathWatcher> {
        match &self.os {
            Os::Paths(p) => Some(p.as_ref()),
            Os::Dirs(_) => None,
        }
    }

    /// Path backends: a watch of `path` (`recursive`: and of everything
    /// below it).
    pub(super) fn watch_path(&mut self, path: &Path, recursive: bool) -> Result<(), WatchError> {
        match &mut self.os {
            Os::Paths(p) => p.watch(path, recursive),
            Os::Dirs(_) => unreachable!(),
        }
    }

    /// Path backends: lets go of the watches of `stale` paths (polled
    /// directories may get a watch then).
    pub(super) fn unwatch_paths(&mut self, stale: &[PathBuf]) {
        if let Os::Paths(p) = &mut self.os {
            for w in stale {
                p.unwatch(w);
            }
        }
        if !stale.is_empty() {
            // Polled directories may get a watch now.
            self.freed = true;
        }
    }

    /// Whether the directory at `path` (whose node has watch `w`) is still
    /// the one watched (per-directory backends; others cannot tell cheaply
    /// and say no).
    pub(super) fn still_watched(&mut self, path: &Path, w: WatchId) -> bool {
        self.leads_to(path, false, w)
    }

    /// Path backends: whether a recursive watch above `path` covers it.
    pub(super) fn covers(&self, path: &Path) -> bool {
        self.paths().is_some_and(|p| p.covers(path))
    }

    /// Path backends: a watch of its own for a new directory (false: no
    /// directory of its own is at `path`, see
    /// [`PathWatcher::watch_new_dir`]).
    pub(super) fn watch_new_dir(&mut self, path: &Path) -> Result<bool, WatchError> {
        match &mut self.os {
            Os::Paths(p) => p.watch_new_dir(path),
            Os::Dirs(_) => Ok(true),
        }
    }

    /// Path backends: asks again for the watch on `path` if it is one of
    /// the backend's own (see [`PathWatcher::watch_again`]).
    pub(super) fn watch_again(&mut self, path: &Path) -> Option<Result<(), WatchError>> {
        match &mut self.os {
            Os::Paths(p) => p.watch_again(path),
            Os::Dirs(_) => None,
        }
    }

    /// Test hook: make the next watch calls fail.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn inject(&mut self, fault: crate::backend::Fault) {
        match &mut self.os {
            Os::Dirs(d) => d.inject(fault),
            Os::Paths(p) => p.inject(fault),
        }
    }

    /// Test hook: the switch that pauses the backend's reader.
    #[cfg(feature = "test-hooks")]
    pub(super) fn pause(&self) -> Option<std::sync::Arc<crate::backend::ReaderPause>> {
        match &self.os {
            Os::Dirs(d) => d.pause(),
            Os::Paths(p) => Some(p.pause()),
        }
    }

    /// The table's own invariants, and what the OS holds that it does not
    /// know (a leaked watch). `live(id)` says whether a node is indexed.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn check(&self, live: impl Fn(DirId) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        for (w, id) in self.holder.iter() {
            if !live(id) || self.watch_of(id) != Some(w) {
                out.push(format!("watch {} maps to a node without it", w.0));
            }
        }
        for (w, ids) in &self.aliases {
            if !self.holder.contains_key(w) {
                out.push(format!("watch {} has aliases but no node", w.0));
            }
            for id in ids {
                if !live(*id) || self.watch_of(*id) != Some(*w) {
                    out.push(format!("watch {} has the alias {id} without it", w.0));
                }
            }
        }
        for (id, w) in self.of_dir.iter().enumerate() {
            let w = WatchId(*w);
            if w.0 != NONE && self.holder(w) != Some(id) && !self.aliases(w).contains(&id) {
                out.push(format!("node {id}: watch {} does not map back", w.0));
            }
        }
        if let Os::Dirs(d) = &self.os
            && let Some(os) = d.os_watches()
        {
            // The kernel drops a watch before it queues its IN_IGNORED, and
            // ours go with inotify_rm_watch: every watch it holds is ours.
            // (And the reading works: after a sync, at least the watch that
            // carried the cookie is there.)
            if os.is_empty() && !self.holder.is_empty() {
                out.push(format!(
                    "the OS lists no watch while the table holds {}",
                    self.holder.len()
                ));
            }
            for w in os {
                if !self.holder.contains_key(&w) {
                    out.push(format!("OS watch {} is not in the table (leaked)", w.0));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{DirWatcher, Fault, ReaderPause};
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    /// A per-directory backend without an OS: watch ids by path, shared
    /// by paths marked as the same directory.
    #[derive(Default)]
    struct Fake {
        ids: BTreeMap<PathBuf, i32>,
        next: i32,
        live: BTreeSet<i32>,
    }

    impl DirWatcher for Fake {
        fn watch(&mut self, dir: &Path, _: bool) -> Result<WatchId, WatchError> {
            let next = &mut self.next;
            let id = *self.ids.entry(dir.to_path_buf()).or_insert_with(|| {
                *next += 1;
                *next
            });
            self.live.insert(id);
            Ok(WatchId(id))
        }
        fn identify(&mut self, dir: &Path, f: bool) -> Option<WatchId> {
            self.watch(dir, f).ok()
        }
        fn unwatch(&mut self, id: WatchId) {
            self.live.remove(&id.0);
        }
        fn inject(&mut self, _: Fault) {}
        fn os_watches(&self) -> Option<Vec<WatchId>> {
            None
        }
        fn pause(&self) -> Option<Arc<ReaderPause>> {
            None
        }
    }

    fn table(cap: Option<usize>) -> WatchTable {
        WatchTable::new(Os::Dirs(Box::new(Fake::default())), cap)
    }

    #[test]
    fn both_directions_stay_in_step() {
        let mut t = table(None);
        let w = t.call(Path::new("/a"), false).unwrap();
        t.record(3, w);
        assert_eq!((t.watch_of(3), t.holder(w)), (Some(w), Some(3)));
        // A second path to the same directory: an alias.
        t.record(5, w);
        assert_eq!(t.aliases(w), &[5]);
        assert!(t.held_by_others(w, 7));
        assert!(!t.held_by_others(w, 5) && !t.held_by_others(w, 3));
        assert_eq!(t.count(), 1, "one OS watch for both");
        // The holder goes: the alias takes over, nothing is freed.
        t.release(3, Path::new("/a"));
        assert_eq!((t.holder(w), t.watch_of(3)), (Some(5), None));
        assert!(!t.take_freed());
        // An alias goes: the holder keeps the watch.
        t.record(6, w);
        t.release(6, Path::new("/b"));
        assert_eq!((t.holder(w), t.aliases(w)), (Some(5), &[][..]));
        assert!(!t.take_freed());
        t.release(5, Path::new("/a"));
        assert_eq!(t.holder(w), None, "nobody keeps it");
        assert!(t.take_freed(), "the last one freed the watch");
        assert!(t.check(|_| true).is_empty(), "{:?}", t.check(|_| true));
    }

    #[test]
    fn dropped_watch_clears_every_member() {
        let mut t = table(None);
        let w = t.call(Path::new("/a"), false).unwrap();
        t.record(1, w);
        t.record(2, w);
        let mut lost = t.lost(w);
        lost.sort();
        assert_eq!(lost, vec![1, 2]);
        assert_eq!((t.watch_of(1), t.watch_of(2), t.count()), (None, None, 0));
        assert!(t.lost(w).is_empty(), "unknown now");
    }

    #[test]
    fn the_cap_refuses_as_the_os_limit_does() {
        let mut t = table(Some(1));
        let w = t.call(Path::new("/a"), false).unwrap();
        t.record(0, w);
        let e = t.call(Path::new("/b"), false).unwrap_err();
        assert!(e.at_limit(), "{e:?}");
        assert_eq!(e.at, Path::new("/b"));
        t.release(0, Path::new("/a"));
        assert!(t.call(Path::new("/b"), false).is_ok(), "room again");
    }

    #[test]
    fn regrouping_keeps_members_that_still_lead_there() {
        let mut t = table(None);
        let w = t.call(Path::new("/a"), false).unwrap();
        t.record(1, w);
        t.record(2, w);
        assert!(t.leads_to(Path::new("/a"), false, w));
        assert!(!t.leads_to(Path::new("/elsewhere"), false, w));
        let mut m = t.take_members(w);
        m.sort();
        assert_eq!(m, vec![1, 2]);
        t.set_members(w, &[2]);
        t.clear(1);
        assert_eq!((t.holder(w), t.watch_of(1)), (Some(2), None));
        assert!(t.check(|_| true).is_empty());
    }
}
