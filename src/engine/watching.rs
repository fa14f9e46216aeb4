//! Watching directories: a node's OS watch asked for (or, when none is
//! to be had, its directory polled, retried later or left to its
//! parent's events), the nodes sharing a watch regrouped, a node's watch
//! let go of; whether a node lacks the watch it needs; and, on path
//! backends, the recursive watches reconciled with what the index needs.
//! Which directory holds which watch is `watches.rs`'s.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Engine;
use crate::backend::WatchId;
use crate::index::{DirId, SpecId};

impl Engine {
    /// Adds an OS watch for a node (per-directory: its own; path backends:
    /// unless a recursive watch above covers it). `follow`: the node's path
    /// may be a symlink (ancestors of roots), else it must be a real
    /// directory. On failure the node is polled (no watches left), retried
    /// later (possibly transient), or left to its parent's events (gone).
    pub(super) fn watch_node(&mut self, id: DirId, follow: bool, specs: &[SpecId]) -> bool {
        if !self.apply_mode(id) {
            return false; // polled: every covering spec polls it
        }
        if !self.watches.per_directory() && self.below_link(id) {
            // notify keys its watches by path and the kernel by inode: a
            // second path to a watched directory would share its kernel
            // watch, and notify drops a shared watch with either path (when
            // one is unwatched, or when a directory on it goes), while the
            // other stays unwatched. So what is at or below a followed link
            // is polled on this backend.
            self.poll_instead(id, super::poll::Why::Link);
            return false;
        }
        let path = self.index.get(id).expect("live node").path().clone();
        let result = if self.watches.per_directory() {
            // A followed link's own path is a symlink.
            match self.watches.call(&path, follow || self.links.contains(id)) {
                Ok(w) => {
                    if self.watches.held_by_others(w, id) && !self.regroup(w, id) {
                        // Our node was below a stale one and went with it:
                        // the events for the names above re-add it.
                        self.watches.discard_if_unrecorded(w);
                        return false;
                    }
                    self.watches.record(id, w);
                    Ok(())
                }
                Err(e) => Err(e),
            }
        } else {
            // Ancestors of roots (`follow`) are watched for their own
            // entries only; covered directories recursively.
            self.watches.watch_path(&path, !follow)
        };
        match result {
            Ok(()) => {
                self.problems.clear(specs, &path);
                true
            }
            Err(e) if e.at_limit() => {
                // No watch to be had: poll this directory instead.
                self.poll_at_limit(id, &e);
                false
            }
            Err(e) => {
                if !e.gone() {
                    // Possibly transient (EIO, EACCES that a chmod lifts,
                    // ...): try again later, backing off.
                    self.schedule_retry(id, specs);
                }
                self.record_error(specs, &e.at, &format!("cannot watch: {}", e.error));
                false
            }
        }
    }

    /// Asks again for the OS watch of each of `ids` that needs one and
    /// has none (their watches went: a backend restarted, a file system
    /// unmounted and mounted again); a path backend reconciles its watches
    /// with the index instead.
    pub(super) fn watch_again(&mut self, ids: Vec<DirId>) {
        if !self.watches.per_directory() {
            self.reconcile_watches();
            return;
        }
        for id in ids {
            let Some(node) = self.index.get(id) else {
                continue;
            };
            if node.is_unused() || !self.needs_watch(id) {
                continue;
            }
            let follow = node.full().is_empty();
            let mut specs = node.full().to_vec();
            specs.extend(node.partial().iter().map(|p| p.spec));
            self.watch_node(id, follow, &specs);
        }
    }

    /// A watch call for node `id` returned `w`, which other nodes hold: the
    /// same directory under other paths. Those whose path still leads to it
    /// (through followed links) stay as its aliases; the others are stale
    /// (their directory moved to `id`'s path and the move away is not
    /// handled yet) and are dropped with their entry in the parent, so that
    /// the index keeps one node per directory entry; the events still
    /// queued for the old names re-read whatever is there now. Returns
    /// whether node `id` is still indexed (it may have gone with a stale
    /// node).
    fn regroup(&mut self, w: WatchId, id: DirId) -> bool {
        let mut kept = Vec::new();
        let mut stale = Vec::new();
        for m in self.watches.take_members(w) {
            // Ask the OS whether the other path still leads to the watched
            // directory: the answer is exact, where comparing stats races
            // with renames. (Even without followed links it can: a path
            // through a directory just replaced by a link, whose events are
            // still queued.)
            let same = match self.index.get(m) {
                Some(n) => {
                    let path = n.path().clone();
                    let follow = self.links.contains(m);
                    self.watches.leads_to(&path, follow, w)
                }
                None => false,
            };
            if same {
                kept.push(m);
            } else {
                stale.push(m);
            }
        }
        self.watches.set_members(w, &kept);
        for &m in &stale {
            self.watches.clear(m);
        }
        for m in stale {
            self.drop_stale(m, true);
        }
        self.index.get(id).is_some()
    }

    /// Node `id` (at `path`) lets go of its OS watch (unless another path
    /// to the same directory keeps it).
    pub(super) fn drop_watch(&mut self, id: DirId, path: &Path) {
        self.watches.release(id, path);
    }

    /// Whether directory `id` still lacks the OS watch it needs.
    pub(super) fn needs_watch(&self, id: DirId) -> bool {
        let Some(node) = self.index.get(id) else {
            return false;
        };
        !self.polls.contains(id)
            && !self
                .watches
                .has_watch(id, node.path(), !node.full().is_empty())
    }

    /// Whether node `id` has no OS watch (polled or not).
    pub(super) fn lacks_watch(&self, id: DirId) -> bool {
        self.index
            .get(id)
            .is_some_and(|n| !self.watches.has_watch(id, n.path(), !n.full().is_empty()))
    }

    /// Whether node `id` lacks its watch with nothing to make up for it (no
    /// polling, no retry pending), so that no event will tell about its
    /// directory.
    pub(super) fn stranded(&self, id: DirId) -> bool {
        self.needs_watch(id) && !self.recovery.retrying(id)
    }

    /// [`stranded`](Self::stranded), where it is known for sure: on
    /// per-directory backends. (On a path backend a node may lack a watch of
    /// its own under a partial recursive one.)
    pub(super) fn unwatched(&self, id: DirId) -> bool {
        self.watches.per_directory() && self.stranded(id)
    }

    /// Path backends: unwatch what no node needs any more, watch what an
    /// uncovered node needs. Then polled directories may move back.
    pub(super) fn reconcile_watches(&mut self) {
        if self.watches.take_reconcile_due() {
            self.reconcile_paths();
        }
    }

    fn reconcile_paths(&mut self) {
        let Some(p) = self.watches.paths() else {
            return;
        };
        let mut node_paths: BTreeSet<PathBuf> = BTreeSet::new();
        let mut full_paths: BTreeSet<PathBuf> = BTreeSet::new();
        let mut partial_only: Vec<PathBuf> = Vec::new();
        for id in self.index.ids() {
            let Some(n) = self.index.get(id) else {
                continue;
            };
            if n.is_unused() || !self.wanted(id).0 {
                continue; // (polled by every spec covering it: no watch)
            }
            node_paths.insert(n.path().to_path_buf());
            if n.full().is_empty() {
                partial_only.push(n.path().to_path_buf());
            } else {
                full_paths.insert(n.path().to_path_buf());
            }
        }
        // A watch goes only when nothing at or below it is needed: notify
        // drops every watch below a recursive one with it, and re-adding
        // them would leave a gap.
        let stale: Vec<PathBuf> = p
            .watched()
            .keys()
            .filter(|w| {
                !node_paths
                    .range((*w).clone()..)
                    .next()
                    .is_some_and(|n| n.starts_with(w))
            })
            .cloned()
            .collect();
        let mut wanted: Vec<(PathBuf, bool)> = Vec::new();
        {
            let kept_recursive: BTreeSet<&PathBuf> = p
                .watched()
                .iter()
                .filter(|(w, r)| **r && !stale.contains(w))
                .map(|(w, _)| w)
                .collect();
            let covered = |x: &Path| {
                x.ancestors()
                    .skip(1)
                    .any(|a| full_paths.contains(a) || kept_recursive.contains(&a.to_path_buf()))
                    || p.covers(x)
            };
            for f in &full_paths {
                if !covered(f) && p.watched().get(f) != Some(&true) {
                    wanted.push((f.clone(), true));
                }
            }
            for f in &partial_only {
                if !covered(f) && !p.watched().contains_key(f) {
                    wanted.push((f.clone(), false));
                }
            }
        }
        self.watches.unwatch_paths(&stale);
        for (path, recursive) in wanted {
            let Some(id) = self.index.lookup(&path) else {
                continue;
            };
            if self.recovery.retrying(id) || self.polls.polled_for_link(id) {
                continue; // its backoff says when; or it is polled for good
            }
            let Some(n) = self.index.get(id) else {
                continue;
            };
            let mut specs = n.full().to_vec();
            specs.extend(n.partial().iter().map(|p| p.spec));
            self.watch_node(id, !recursive, &specs);
        }
    }
}
