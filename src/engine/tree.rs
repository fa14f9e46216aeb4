//! Adding and removing entries: a new entry indexed, reported and (a
//! directory) covered by a walk (`walk.rs`); a gone one reported with
//! everything indexed below it, and the owners' facts about the
//! directories that left (`forget.rs`). No state of its own.

use std::ffi::OsStr;
use std::path::Path;

use super::Engine;
use super::trace;
use crate::batch::change::{ChangeKind, FileType, Meta};
use crate::index::{DirId, EntryDiff, SpecId};

impl Engine {
    /// A new entry: index it, report it, and if it is a directory cover it
    /// (watch, read, report its contents).
    pub(super) fn add_entry(&mut self, id: DirId, name: &OsStr, t: FileType) {
        self.add_seen(id, name, t, None);
    }

    /// [`add_entry`](Engine::add_entry), of an entry a look `stat`ed
    /// (`meta`: what it saw).
    pub(super) fn add_seen(&mut self, id: DirId, name: &OsStr, t: FileType, meta: Option<&Meta>) {
        if self.index.get(id).is_none() {
            return;
        }
        self.index.set_entry(id, name, t);
        self.route(id, name, ChangeKind::Created, t, false, meta);
        if t != FileType::Dir {
            self.root_appeared(id, name);
            if t == FileType::Symlink {
                self.revalidate_link(id, name, true);
            }
            return;
        }
        let child = self.index.get(id).expect("live node").path().join(name);
        let specs = self.child_specs(id, name, &child, false);
        self.root_appeared(id, name);
        if !specs.is_empty() {
            self.add_full(specs, child, true);
        }
    }

    /// An entry is gone: report it and everything indexed below it.
    pub(super) fn remove_entry(&mut self, id: DirId, name: &OsStr, report: bool) {
        let Some(t) = self.index.remove_entry(id, name) else {
            return;
        };
        let node = self.index.get(id).expect("live node");
        let child = node.path().join(name);
        trace::traced! {
            for p in node.partial() {
                if p.is_root && p.name == name && self.specs.contains(p.spec) {
                    trace::event!(
                        INFO,
                        spec = self.specs.name_of(p.spec),
                        path = %p.root.display(),
                        "root vanished: watching for it to come back"
                    );
                }
            }
        }
        if report {
            self.route(id, name, ChangeKind::Removed, t, false, None);
        } else {
            self.note_ignore_file(id, name);
        }
        if matches!(t, FileType::Dir | FileType::Symlink)
            && let Some(cid) = self.index.lookup(&child)
        {
            self.remove_tree(cid, report);
        }
    }

    /// Removes a directory node and all indexed below it, reporting every
    /// entry as removed; roots that lived there are re-attached later.
    pub(super) fn remove_tree(&mut self, top: DirId, report: bool) {
        let mut stack = vec![top];
        while let Some(id) = stack.pop() {
            let Some(node) = self.index.remove(id) else {
                continue;
            };
            self.forget_dir(id, &node);
            for (name, t) in node.entries().iter() {
                if report {
                    self.specs
                        .route(self.now, &node, name, ChangeKind::Removed, t, false, None);
                }
                if matches!(t, FileType::Dir | FileType::Symlink)
                    && let Some(cid) = self.index.lookup(&node.path().join(name))
                {
                    stack.push(cid);
                }
            }
            self.problems.clear(node.full(), node.path());
            for &s in node.full() {
                if self
                    .specs
                    .get(s)
                    .is_some_and(|st| st.roots().iter().any(|p| **p == **node.path()))
                {
                    self.roots.push(s, node.path().to_path_buf());
                }
            }
            for p in node.partial() {
                trace::traced! {
                    if self.specs.contains(p.spec) {
                        trace::event!(
                            INFO,
                            spec = self.specs.name_of(p.spec),
                            path = %p.root.display(),
                            gone = %node.path().display(),
                            "a directory above a root vanished: attaching the root again"
                        );
                    }
                }
                self.roots.push(p.spec, p.root.clone());
            }
        }
        self.watches.reconcile_soon();
    }

    /// Drops a directory that no spec needs (its OS watch with it). Its
    /// entry in the parent's listing stays.
    pub(super) fn free_node(&mut self, id: DirId) {
        if let Some(node) = self.index.remove(id) {
            self.forget_dir(id, &node);
        }
    }

    /// Removes a node that no longer describes what is on disk at its path,
    /// together with its entry in its parent (reporting both, with
    /// `report`).
    pub(super) fn drop_stale(&mut self, id: DirId, report: bool) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path().clone();
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name())
            && let Some(pid) = self.index.lookup(parent)
            && pid != id
            && self
                .index
                .get(pid)
                .is_some_and(|p| p.entries().get(name) == Some(FileType::Dir))
        {
            self.remove_entry(pid, name, report);
        }
        if self.index.get(id).is_some() {
            self.remove_tree(id, report);
        }
    }

    /// Applies a listing diff of directory `id`: new entries are covered and
    /// reported, gone ones reported with everything below them.
    pub(super) fn apply_diffs(&mut self, id: DirId, diffs: Vec<EntryDiff>) {
        for d in diffs {
            match d {
                EntryDiff::Added(n, t) => self.add_entry(id, &n, t),
                EntryDiff::Removed(n, _) => self.remove_entry(id, &n, true),
                EntryDiff::Retyped(n, _, t) => {
                    self.remove_entry(id, &n, true);
                    self.add_entry(id, &n, t);
                }
            }
        }
    }

    /// Records that directory `path` could not be watched or read, for the
    /// specs (still applied) among `specs` (traced when it is news).
    pub(super) fn record_error(&mut self, specs: &[SpecId], path: &Path, msg: &str) {
        let live: Vec<SpecId> = specs
            .iter()
            .copied()
            .filter(|s| self.specs.contains(*s))
            .collect();
        if self.problems.record(&live, path, msg, self.clock.wall()) {
            trace::event!(
                WARN,
                path = %path.display(),
                error = msg,
                specs = %self.specs.names_of(&live),
                "directory not watched or read"
            );
        }
    }
}
