//! Attaching roots: each root is watched from its parent (to see it vanish
//! and come back), or from its nearest existing ancestor while it does not
//! exist; the roots whose watching point changed attached again at the
//! end of the pass, and those waiting below a name woken when it changes.
//! The queue of roots waiting is `roots.rs`'s; where each root is
//! registered is the index's (a [`Partial`]).

use std::ffi::{OsStr, OsString};
use std::path::Path;

use super::Engine;
use super::trace;
use crate::batch::change::{ChangeKind, FileType};
use crate::fs;
use crate::index::{DirId, Partial, SpecId};

impl Engine {
    /// Watches `root` for `sid`: from its parent (to see it vanish and come
    /// back), or from its nearest existing ancestor while it does not exist;
    /// and recursively if it is a directory. With `report`, everything found
    /// is reported as created.
    pub(super) fn attach_root(&mut self, sid: SpecId, root: &Path, report: bool) {
        let Some(parent) = root.parent() else {
            // The file system root: nothing above to watch.
            self.decide_root(sid, root, root);
            self.add_full(vec![sid], root.to_path_buf(), report);
            return;
        };
        let mut anc = parent.to_path_buf();
        let mut next: OsString = root.file_name().unwrap_or_default().to_os_string();
        while !fs::is_dir_following(&anc) {
            match anc.parent() {
                Some(p) => {
                    next = anc.file_name().unwrap_or_default().to_os_string();
                    anc = p.to_path_buf();
                }
                None => break,
            }
        }
        let is_root = anc == parent;
        // The root's own file system if it is there (it may be a mount
        // point), else that of the nearest directory above it.
        if fs::is_dir_following(root) {
            self.decide_root(sid, root, root);
        } else {
            self.decide_root(sid, root, &anc);
        }
        self.load_ignore_files_above(sid, root);
        let (nid, created) = self.index.ensure(&anc);
        // Registered first: how the node is watched depends on it.
        self.index.add_partial(
            nid,
            Partial {
                spec: sid,
                name: next.clone(),
                is_root,
                root: root.to_path_buf(),
            },
        );
        if created {
            self.watch_node(nid, true, &[sid]);
            if self.index.get(nid).is_none() {
                self.roots.push(sid, root.to_path_buf());
                return;
            }
        } else {
            // Already watched for another spec, or polled: this one may
            // ask for the other way too.
            if self.apply_mode(nid) && self.lacks_watch(nid) && !self.recovery.retrying(nid) {
                self.watch_node(nid, true, &[sid]);
            }
        }
        let target = anc.join(&next);
        // One `lstat`: its type, and its signature for a polled ancestor.
        let sig = fs::sig_of(&target);
        let ft = sig.map(|s| s.kind);
        if !self.index.get(nid).is_some_and(|n| n.complete()) {
            match ft {
                Some(t) => {
                    self.index.set_entry(nid, &next, t);
                }
                None => {
                    self.index.remove_entry(nid, &next);
                }
            }
            // A polled ancestor compares this name's signature at its next
            // poll: the one just taken, or a first write would go unseen.
            self.polls.sign_name(nid, &next, sig);
        }
        if !self.specs.contains(sid) {
            return;
        }
        trace::traced! {
            if ft.is_none() || (!is_root && ft != Some(FileType::Dir)) {
                trace::event!(
                    INFO,
                    spec = self.specs.name_of(sid),
                    path = %root.display(),
                    from = %anc.display(),
                    "root does not exist: watching its nearest existing ancestor"
                );
            }
        }
        if !is_root {
            if ft == Some(FileType::Dir) {
                // It appeared while we looked: walk down again.
                self.roots.push(sid, root.to_path_buf());
            }
            return;
        }
        match ft {
            None => {}
            Some(FileType::Dir) => {
                if report {
                    self.specs
                        .record_root(sid, self.now, root, ChangeKind::Created, FileType::Dir);
                }
                self.add_full(vec![sid], root.to_path_buf(), report);
            }
            Some(t) => {
                if report {
                    self.specs
                        .record_root(sid, self.now, root, ChangeKind::Created, t);
                }
                if t == FileType::Symlink {
                    self.revalidate_link(nid, &next, report);
                }
            }
        }
    }

    /// Re-attaches roots whose watching point changed, then frees what no
    /// spec needs, brings path backends' watches up to date, and moves
    /// polled directories back to OS watches if watches were freed.
    pub(super) fn settle(&mut self) {
        let mut rounds = 0;
        while !self.roots.is_empty() && rounds < 64 {
            rounds += 1;
            for (sid, root) in self.roots.take() {
                if !self
                    .specs
                    .get(sid)
                    .is_some_and(|st| st.roots().contains(&root))
                {
                    continue;
                }
                // Unregister first, free later: freeing at once would drop a
                // watch that the new attachment may need again.
                let old = self.index.find_partial(sid, &root);
                if let Some(old) = old {
                    self.index.remove_partial(old, sid, &root);
                }
                // A root that is still indexed as a directory keeps its tree.
                let covered = self
                    .index
                    .lookup(&root)
                    .and_then(|id| self.index.get(id))
                    .is_some_and(|n| n.covers(sid));
                trace::event!(
                    DEBUG,
                    spec = self.specs.name_of(sid),
                    path = %root.display(),
                    "attaching root again"
                );
                if covered {
                    self.reattach_partial_only(sid, &root);
                } else {
                    self.attach_root(sid, &root, true);
                }
                if let Some(old) = old
                    && self.index.get(old).is_some_and(|n| n.is_unused())
                {
                    self.free_node(old);
                }
            }
        }
        self.reconcile_watches();
        self.unpoll();
    }

    /// Re-registers only the parent watch of a root whose tree is intact.
    fn reattach_partial_only(&mut self, sid: SpecId, root: &Path) {
        let Some(parent) = root.parent() else {
            return;
        };
        if !fs::is_dir_following(parent) {
            return;
        }
        let (nid, created) = self.index.ensure(parent);
        let name = root.file_name().unwrap_or_default().to_os_string();
        self.index.add_partial(
            nid,
            Partial {
                spec: sid,
                name: name.clone(),
                is_root: true,
                root: root.to_path_buf(),
            },
        );
        if created {
            self.watch_node(nid, true, &[sid]);
        } else {
            self.apply_mode(nid);
        }
        let Some(node) = self.index.get(nid) else {
            self.roots.push(sid, root.to_path_buf());
            return;
        };
        if !node.complete() {
            // A directory, or a followed link to one.
            let t = fs::lstat_type(root).ok().flatten().unwrap_or(FileType::Dir);
            self.index.set_entry(nid, &name, t);
        }
    }

    /// Roots waiting below `id/name` (not yet existing) re-attach when that
    /// name changes.
    pub(super) fn wake_partials(
        &mut self,
        id: DirId,
        name: &OsStr,
        old: Option<FileType>,
        new: Option<FileType>,
    ) {
        if old == new {
            return;
        }
        let Some(node) = self.index.get(id) else {
            return;
        };
        for p in node.partial() {
            if !p.is_root && p.name == name {
                self.roots.push(p.spec, p.root.clone());
            }
        }
    }

    /// Roots that are exactly `id/name` appeared again: their monitoring
    /// (re)starts now.
    pub(super) fn root_appeared(&mut self, id: DirId, name: &OsStr) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let wall = self.clock.wall();
        for p in node.partial() {
            if p.is_root && p.name == name && self.specs.contains(p.spec) {
                self.out.restarted(p.spec, wall);
                trace::event!(
                    INFO,
                    spec = self.specs.name_of(p.spec),
                    path = %p.root.display(),
                    "root appeared: watching restarted"
                );
            }
        }
    }
}
