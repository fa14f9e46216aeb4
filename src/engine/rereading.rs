//! Reading directories again and applying the diff: one directory
//! (`rescan_node`; with a time, what changed since then reported
//! modified), every indexed directory at or below a root, and the whole
//! index after the OS lost events (an overflow: the reads on worker
//! threads). The read times that bound what was lost, and the overflow
//! counters, are `recovery.rs`'s.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::Engine;
use super::trace;
use crate::backend::Hint;
use crate::batch::change::{ChangeKind, FileType};
use crate::fs;
use crate::index::{DirId, EntryDiff, diff};
use crate::reads;

/// Directories an overflow's rescan reads ahead on worker threads at once.
const LOOK_CHUNK: usize = 1024;

impl Engine {
    /// The OS dropped events: re-read everything, diff, and report files
    /// changed since `complete_read` (minus the margin) as modified.
    pub(super) fn overflow(&mut self, complete_read: SystemTime) {
        self.reread_all(complete_read, true);
    }

    /// Events after the read that began at `complete_read` are missing,
    /// the latest ones included (the inbox was full; the backend's reader
    /// stopped): [`overflow`](Self::overflow)'s rescan, of every
    /// directory, those first read since included.
    pub(super) fn lost_after(&mut self, complete_read: SystemTime) {
        self.reread_all(complete_read, false);
    }

    /// `marked`: the loss is a kernel queue's, which it marks at the end
    /// of what it kept (a directory first read after that read began
    /// shows it all, and is not read again).
    fn reread_all(&mut self, complete_read: SystemTime, marked: bool) {
        let since = self.recovery.since(complete_read);
        self.recovery.count_overflow(&self.specs.ids());
        self.specs.end_guards();
        trace::event!(
            WARN,
            specs = %self.specs.names_of(&self.specs.ids()),
            dirs = self.index.len(),
            "OS events lost (queue overflow): rescanning every directory"
        );
        trace::bind!(found_before = self.specs.recorded());
        // What was lost was lost before the read that brought the marker
        // began: a directory first read after that shows it all (notify's
        // own walk overflows the queue while the engine's first reads are
        // still to come, so a start-up need not read the tree twice).
        // On the monotonic clock: the wall clock may have been stepped.
        // Not while a barrier waits: its cookie may be found by this
        // rescan's reads, and the events of a skipped directory, queued
        // before the cookie, may not have been read yet.
        let lost_by = self
            .recovery
            .last_read_mono()
            .filter(|_| marked && !self.syncs.waiting());
        let ids: Vec<DirId> = self
            .index
            .ids()
            .into_iter()
            .filter(|id| !lost_by.is_some_and(|t| self.index.first_read_after(*id, t)))
            .collect();
        // The reads and stats (a whole tree's) on worker threads, a chunk
        // at a time; the index is changed here alone, in order.
        let threads = reads::threads();
        for chunk in ids.chunks(LOOK_CHUNK) {
            let dirs: Vec<(DirId, Arc<Path>)> = chunk
                .iter()
                .filter_map(|&id| {
                    let n = self.index.get(id)?;
                    n.complete().then(|| (id, n.path().clone()))
                })
                .collect();
            let paths: Vec<Arc<Path>> = dirs.iter().map(|(_, p)| p.clone()).collect();
            let mut looks: HashMap<DirId, (Arc<Path>, reads::Look)> = dirs
                .into_iter()
                .zip(reads::look_all(&paths, Some(since), threads))
                .map(|((id, p), l)| (id, (p, l)))
                .collect();
            for &id in chunk {
                // Looked at as this node, unless an earlier directory's
                // diff freed it and its slot (even its path: a directory
                // replaced) went to another, read after the look began.
                let look = looks
                    .remove(&id)
                    .filter(|(p, _)| self.index.get(id).is_some_and(|n| Arc::ptr_eq(n.path(), p)))
                    .map(|(_, l)| l);
                self.rescan_node_with(id, Some(since), look);
            }
        }
        trace::event!(
            INFO,
            specs = %self.specs.names_of(&self.specs.ids()),
            changes = self.specs.recorded() - found_before,
            "overflow recovered: rescan done"
        );
    }

    /// Rescans every indexed directory at or below `root` (or `root`'s
    /// entry in its parent when it is not a directory).
    pub(super) fn rescan_under(&mut self, root: &Path, since: Option<SystemTime>) {
        if let Some(parent) = root.parent()
            && let (Some(pid), Some(name)) = (self.index.lookup(parent), root.file_name())
        {
            self.handle_name(pid, name, Hint::Rescan);
            if let Some(since) = since {
                self.report_if_changed(pid, name, since);
            }
        }
        let ids = self.index.ids_where(|_, n| n.path().starts_with(root));
        for id in ids {
            self.rescan_node(id, since);
        }
    }

    fn report_if_changed(&mut self, id: DirId, name: &OsStr, since: SystemTime) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        if let Some(t) = node.entries().get(name)
            && t != FileType::Dir
            && fs::changed_since(&node.path().join(name), since)
        {
            self.route(id, name, ChangeKind::Modified, t, false, None);
        }
    }

    /// Re-reads one directory and applies the diff. With `since`, entries
    /// present before and after whose inode changed since then are reported
    /// modified.
    pub(super) fn rescan_node(&mut self, id: DirId, since: Option<SystemTime>) {
        self.rescan_node_with(id, since, None);
    }

    /// [`rescan_node`](Self::rescan_node), with what a worker already read
    /// of the directory and found changed since `since` (`look`).
    fn rescan_node_with(
        &mut self,
        id: DirId,
        since: Option<SystemTime>,
        look: Option<reads::Look>,
    ) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        // What this re-read reports, a `rescan_every` must not report again:
        // its next look at this directory starts afresh.
        self.rescans.forget_dir(id);
        let path = node.path().clone();
        if !node.complete() {
            let names: Vec<OsString> = node.partial().iter().map(|p| p.name.clone()).collect();
            for n in names {
                self.handle_name(id, &n, Hint::Rescan);
                if let Some(since) = since {
                    self.report_if_changed(id, &n, since);
                }
            }
            return;
        }
        let (listing, on_disk) = match look {
            Some(l) => {
                self.syncs.cookies_found(l.cookies);
                (l.listing, Some(l.changed))
            }
            None => (self.list_dir(&path), None),
        };
        let Some(diffs) = self.diff_read(id, listing) else {
            return;
        };
        // Modified: entries there before and after the diff (not created,
        // removed or retyped by it) whose inode changed since `since`.
        let touched: BTreeSet<OsString> = match since {
            Some(_) => diffs.iter().map(|d| d.name().to_os_string()).collect(),
            None => BTreeSet::new(),
        };
        // Without a worker's look, the files to `stat` here.
        let to_stat: Vec<OsString> = match (since, &on_disk) {
            (Some(_), None) => {
                let node = self.index.get(id).expect("live node");
                node.entries()
                    .iter()
                    .filter(|(n, t)| *t != FileType::Dir && !touched.contains(*n))
                    .map(|(n, _)| n.to_os_string())
                    .collect()
            }
            _ => Vec::new(),
        };
        self.apply_diffs(id, diffs);
        if let Some(since) = since {
            let hits = match on_disk {
                // The worker stat'ed the files of the fresh listing: those
                // the diff did not touch were there before, alike.
                Some(found) => found.into_iter().filter(|n| !touched.contains(n)).collect(),
                None => fs::changed_among(&path, to_stat.iter().map(OsString::as_os_str), since),
            };
            for n in hits {
                let t = self.index.get(id).and_then(|x| x.entries().get(&n));
                if let Some(t) = t.filter(|t| *t != FileType::Dir) {
                    self.route(id, &n, ChangeKind::Modified, t, false, None);
                }
            }
        }
        self.revalidate_links_in(id);
    }

    /// Diffs what a read of directory `id` found against the index; `None`
    /// when it could not be read (gone: dropped if nothing above tracks it).
    fn diff_read(
        &mut self,
        id: DirId,
        read: std::io::Result<Vec<(OsString, FileType)>>,
    ) -> Option<Vec<EntryDiff>> {
        match read {
            Ok(list) => {
                // Newer than any look of the scanner's under way.
                self.polls.outdate(id);
                Some(diff(self.index.get(id)?.entries(), list))
            }
            Err(e) if fs::gone(&e) => {
                self.check_top(id, false);
                None
            }
            Err(_) => None,
        }
    }
}
