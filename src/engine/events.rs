//! What a hint leads to. Every OS event, whatever the backend, ends in one
//! of two steps: [`handle_name`](Engine::handle_name) (look at one name of
//! an indexed directory, diff against the index, report) or
//! [`check_top`](Engine::check_top) (a directory itself moved or went). No
//! state of its own.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::SystemTime;

use super::{Engine, trace};
use crate::backend::{Hint, OsEvent, WatchId};
use crate::batch::change::{FileType, Meta};
use crate::fs;
use crate::index::{DirId, diff};

impl Engine {
    /// Dispatches one backend event.
    pub(super) fn os_event(&mut self, e: OsEvent) {
        match e {
            // Events of this read up to the marker arrived; what the OS
            // dropped came after the previous read.
            OsEvent::Overflow => self.overflow(self.recovery.prev_read()),
            OsEvent::Dropped { watch } => {
                for id in self.watches.lost(watch) {
                    self.check_top(id, false);
                }
            }
            OsEvent::DirSelf { watch, moved } => {
                self.each_node_of(watch, |e, id| e.check_top(id, moved));
            }
            // A writer's close matters only to specs that wait for one.
            OsEvent::Entry {
                hint: Hint::Closed, ..
            } if !self.holds.any_write_holds() => {}
            OsEvent::Entry { watch, name, hint } => {
                self.each_node_of(watch, |e, id| e.handle_name(id, &name, hint));
            }
            OsEvent::Renamed { from, to } => {
                // Both ends were handled as hints: the batches learn that
                // they were one entry (on the path the watch's node has;
                // other paths to the same directory report no pairing).
                let path_of = |e: &Engine, (watch, name): &(WatchId, OsString)| {
                    let id = e.watches.holder(*watch)?;
                    Some(e.index.get(id)?.path().join(name))
                };
                if let (Some(from), Some(to)) = (path_of(self, &from), path_of(self, &to)) {
                    self.specs.moved(&from, &to);
                }
            }
            OsEvent::PathRenamed { from, to } => self.specs.moved(&from, &to),
            OsEvent::Path { path, hint } => {
                let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                    return;
                };
                if let Some(pid) = self.index.lookup(parent) {
                    self.handle_name(pid, name, hint);
                } else if let Some(id) = self.index.lookup(&path)
                    && matches!(hint, Hint::Removed | Hint::Moved)
                {
                    self.check_top(id, hint == Hint::Moved);
                } else if hint != Hint::Removed {
                    self.below_unknown(&path);
                }
            }
            OsEvent::LostAfter(after) => self.overflow(after.min(self.recovery.prev_read())),
            OsEvent::Error {
                path,
                message,
                lost_after,
            } => self.watch_error(&path, &message, lost_after),
        }
    }

    /// The backend says a watch went wrong at `path`. One of its own
    /// watches (a root's, a new directory's) may be gone with it (notify 9
    /// drops a watch whose read fails for good, ReadDirectoryChangesW's
    /// among them): it is asked for again, and what it may have lost
    /// since its last read (`lost_after`, else the read before this one)
    /// is found as after an overflow (counted as one). A watch that
    /// cannot be had again, though its directory is there, stops the
    /// backend as a failed read does: every spec `Degraded` while it is
    /// restarted, every watch asked again and everything read again.
    /// Any other error is the specs' last error.
    fn watch_error(&mut self, path: &Path, message: &str, lost_after: Option<SystemTime>) {
        let all = self.specs.ids();
        match self.watches.watch_again(path) {
            None => self.record_error(&all, path, message),
            Some(Ok(())) => {
                trace::event!(
                    WARN,
                    path = %path.display(),
                    error = message,
                    "the OS watch went wrong: asked for again, everything rescanned"
                );
                let prev = self.recovery.prev_read();
                self.lost_after(lost_after.map_or(prev, |t| t.min(prev)));
            }
            // Gone: the events of the directory above say so.
            Some(Err(e)) if e.gone() => {}
            Some(Err(e)) => self.backend_failed(&format!(
                "the OS watch of {} went wrong ({message}) and cannot be had again: {}",
                path.display(),
                e.error
            )),
        }
    }

    /// A path backend named `path`, below a directory the index does not
    /// hold: the creation of that directory was never reported (an OS that
    /// coalesces or loses events: FSEvents, a ReadDirectoryChangesW buffer,
    /// Wine's emulation of it). Looks again at the first unknown directory
    /// on the way down from the nearest one the index holds, as a rescan of
    /// that one name: if it is new, it is walked whole. Nothing is looked
    /// at when every spec covering it prunes it (events below an ignored
    /// `target/` cost a few lookups, no `lstat`).
    fn below_unknown(&mut self, path: &Path) {
        let mut child = path;
        for dir in path.ancestors().skip(1) {
            if let Some(id) = self.index.lookup(dir) {
                let (Some(node), Some(name)) = (self.index.get(id), child.file_name()) else {
                    return;
                };
                let needed = node.full().iter().any(|s| self.specs.needs(*s, child))
                    || node.partial().iter().any(|p| p.name == name);
                // Known as a directory already (its walk is still to come,
                // or under way): nothing to look at.
                let known = node.entries().get(name) == Some(FileType::Dir);
                if needed && !known {
                    self.handle_name(id, name, Hint::Rescan);
                }
                return;
            }
            child = dir;
        }
    }

    /// Runs `f` for the node holding `watch`, then for the other nodes of
    /// the same directory (other paths to it, through followed links) that
    /// still share it afterwards. A watch no node holds (already released)
    /// is ignored.
    fn each_node_of(&mut self, watch: WatchId, mut f: impl FnMut(&mut Engine, DirId)) {
        let Some(id) = self.watches.holder(watch) else {
            return;
        };
        f(self, id);
        let aliases = self.watches.aliases(watch).to_vec();
        for i in aliases {
            if self.watches.watch_of(i) == Some(watch) {
                f(self, i);
            }
        }
    }

    /// Something happened to `name` in directory `id`: look, diff, report.
    pub(super) fn handle_name(&mut self, id: DirId, name: &OsStr, hint: Hint) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        if fs::is_cookie(name) {
            if !matches!(hint, Hint::Removed | Hint::Closed) {
                let cookie = node.path().join(name);
                self.specs.cookie_seen(&cookie);
                self.syncs.cookie_found(cookie);
            }
            return;
        }
        if !node.tracks(name) {
            return;
        }
        let path = node.path().join(name);
        let was_dir = node.entries().get(name) == Some(FileType::Dir);
        if self.mount_keeps_entry(&path) {
            return; // a root whose file system is away: kept
        }
        let found = if self.rescans.tracks(id) {
            // A rescan compares against what events saw.
            fs::sig_found(&path).map(|sig| {
                self.rescans.saw(id, name, sig);
                (sig.map(|s| s.kind), sig.and_then(|s| s.meta()))
            })
        } else {
            fs::lstat_found(&path).map(|l| l.map_or((None, None), |(t, m)| (Some(t), Some(m))))
        };
        // One that cannot be `stat`ed though it may be there (`EIO`,
        // `ESTALE`: storage that fails) tells nothing: the index keeps
        // what it knew (not "removed"), and the next event or look tells.
        let Ok((new, meta)) = found else {
            return;
        };
        if new.is_none() && was_dir && self.mount_keeps(&path) {
            // A directory gone with its file system (an unmount): kept.
            return;
        }
        self.see(id, name, hint, new, meta.as_ref(), true);
        self.hinted_write(id, name, hint);
    }

    /// Entry `name` of directory `id` is `new` (absent: `None`) as far as
    /// a look just told, with `hint` for what happened: diff against the
    /// index, report. `meta`: what the look saw of it, if it `stat`ed it.
    /// `from_os`: the hint is an OS event's (an apply's guard may hold its
    /// `Modified` back), not a poll's finding.
    fn see(
        &mut self,
        id: DirId,
        name: &OsStr,
        hint: Hint,
        new: Option<FileType>,
        meta: Option<&Meta>,
        from_os: bool,
    ) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        // A look of the scanner's under way may be older than this one.
        self.polls.touched(id, name);
        self.rescans.touched(id, name);
        let path = node.path().join(name);
        let old = node.entries().get(name);
        self.wake_partials(id, name, old, new);
        match (old, new) {
            (None, None) => {}
            (None, Some(t)) => self.add_seen(id, name, t, meta),
            (Some(_), None) => self.remove_entry(id, name, true),
            (Some(o), Some(t)) if o != t => {
                self.remove_entry(id, name, true);
                self.add_seen(id, name, t, meta);
            }
            (Some(FileType::Dir), Some(FileType::Dir)) => {
                let child = self.index.lookup(&path);
                let suspect = match hint {
                    Hint::Removed | Hint::Moved => true,
                    // Only per-directory backends can tell cheaply, by the
                    // watch; a directory polled without one is compared
                    // with what is at its path by its own polls.
                    Hint::Rescan => {
                        self.watches.per_directory() && !child.is_some_and(|c| self.polled_only(c))
                    }
                    Hint::Created | Hint::Modified | Hint::Closed => false,
                } || child.is_some_and(|c| self.unwatched(c));
                if suspect && self.dir_replaced(id, name, &path) {
                    self.remove_entry(id, name, true);
                    self.add_entry(id, name, FileType::Dir);
                } else if child.is_some_and(|c| self.recovery.retrying(c)) {
                    self.recovery.all_now(self.clock.now());
                }
            }
            (Some(_), Some(t)) => {
                // A creation of a name the index holds: it was replaced
                // (Wine's ReadDirectoryChangesW reports the new name of a
                // rename over it as added when the rename's two halves
                // fall into two reads).
                if matches!(
                    hint,
                    Hint::Modified | Hint::Removed | Hint::Moved | Hint::Created
                ) {
                    let kind = crate::batch::change::ChangeKind::Modified;
                    self.route(id, name, kind, t, from_os, meta);
                }
                if t == FileType::Symlink {
                    // Replaced by a link elsewhere, perhaps.
                    self.revalidate_link(id, name, true);
                }
            }
        }
    }

    /// Directory `id` held exactly `listing` (sorted by name) when a poll
    /// looked (on the scanner or here), and the `modified` entries were
    /// written (`false`) or replaced (`true`) since its previous look: diff
    /// against the index and report, as for a read of the engine's own.
    pub(super) fn apply_listing(
        &mut self,
        id: DirId,
        listing: &[(OsString, FileType)],
        modified: &[(OsString, bool)],
    ) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let found = |name: &OsStr| {
            listing
                .binary_search_by(|(n, _)| n.as_encoded_bytes().cmp(name.as_encoded_bytes()))
                .ok()
                .map(|i| listing[i].1)
        };
        let hint_of = |name: &OsStr| {
            modified
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, replaced)| {
                    if *replaced {
                        Hint::Moved
                    } else {
                        Hint::Modified
                    }
                })
        };
        for (n, _) in listing {
            if fs::is_cookie(n) {
                let p = node.path().join(n);
                self.syncs.cookie_found(p);
            }
        }
        if !node.complete() {
            // Only the names its root registrations wait for.
            let mut names: Vec<OsString> = node.partial().iter().map(|p| p.name.clone()).collect();
            names.sort();
            names.dedup();
            for n in names {
                let (old, new) = (
                    self.index.get(id).and_then(|x| x.entries().get(&n)),
                    found(&n),
                );
                match hint_of(&n) {
                    Some(hint) => self.see(id, &n, hint, new, None, false),
                    None if old != new => self.see(id, &n, Hint::Rescan, new, None, false),
                    None => {}
                }
            }
            return;
        }
        let fresh: Vec<(OsString, FileType)> = listing
            .iter()
            .filter(|(n, _)| !fs::is_cookie(n))
            .cloned()
            .collect();
        let diffs = diff(node.entries(), fresh);
        let touched: BTreeSet<OsString> = diffs.iter().map(|d| d.name().to_os_string()).collect();
        self.apply_diffs(id, diffs);
        for (n, replaced) in modified {
            if touched.contains(n) {
                continue;
            }
            let hint = if *replaced {
                Hint::Moved
            } else {
                Hint::Modified
            };
            let now = found(n);
            self.see(id, n, hint, now, None, false);
        }
        self.repair_orphans(id);
        self.revalidate_links_in(id);
    }

    /// Whether the directory indexed at `path` (entry `name` of `id`) is no
    /// longer the one on disk.
    fn dir_replaced(&mut self, id: DirId, name: &OsStr, path: &Path) -> bool {
        let Some(cid) = self.index.lookup(path) else {
            // No node: right if every covering spec prunes it; otherwise the
            // index lost it, and re-adding it is the repair.
            return self.index.get(id).is_some_and(|n| {
                n.full().iter().any(|s| self.specs.needs(*s, path))
                    || n.partial().iter().any(|p| p.is_root && p.name == name)
            });
        };
        match self.watches.watch_of(cid) {
            // The OS hands back the same watch for the same directory.
            Some(w) => !self.watches.still_watched(path, w),
            None => true,
        }
    }

    /// A directory with no tracked parent lost its watch or moved: if it is
    /// no longer there, drop it (reporting its contents) and re-attach.
    pub(super) fn check_top(&mut self, id: DirId, moved: bool) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path().clone();
        if self.mount_keeps(&path) {
            return; // its file system is away: kept as it was
        }
        if self.links.contains(id) {
            // A followed link's directory moved or went: no event about the
            // link itself says so. Look where the link leads now.
            match (
                path.parent().and_then(|p| self.index.lookup(p)),
                path.file_name(),
            ) {
                (Some(pid), Some(name)) => {
                    let name = name.to_os_string();
                    self.revalidate_link(pid, &name, true);
                }
                _ => self.remove_tree(id, true),
            }
            return;
        }
        if let Some(parent) = path.parent()
            && let Some(pid) = self.index.lookup(parent)
        {
            let tracked = self
                .index
                .get(pid)
                .is_some_and(|p| p.tracks(path.file_name().unwrap_or_default()));
            if tracked {
                // The parent's own event handles it, unless the parent is
                // polled (no events): then drop the node with its entry, and
                // the parent's next poll finds whatever is there now.
                if self.polls.contains(pid) {
                    self.drop_stale(id, true);
                } else if self.unwatched(id) {
                    // It lost its watch (the directory was deleted or
                    // replaced) and the parent's events about the name may
                    // all have been handled already, while the old watch
                    // still stood: look at the name now.
                    let name = path.file_name().unwrap_or_default().to_os_string();
                    self.handle_name(pid, &name, Hint::Removed);
                }
                return;
            }
        }
        // Gone or moved; or replaced by another directory before its lost
        // watch was handled (`rm -rf build && mkdir -p build/out`): that
        // one has no watch, so drop the node and let its roots attach
        // again.
        if moved || !fs::is_dir_following(&path) || self.unwatched(id) {
            self.remove_tree(id, true);
        }
    }
}
