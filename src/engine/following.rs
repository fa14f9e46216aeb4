//! Following symlinks (`follow_symlinks`): the steps that look at a
//! link entry again (follow it, let go of what it led to, or replace
//! that), for one entry, a directory's links or every link a spec
//! follows; and which specs cover a child directory (only those that
//! follow links, through a link). Which nodes are followed links, and
//! where each led, is `links.rs`'s.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use super::Engine;
use crate::batch::change::FileType;
use crate::fs;
use crate::index::{DirId, SpecId};

impl Engine {
    /// Whether node `id` is a followed link or lies below one.
    pub(super) fn below_link(&self, id: DirId) -> bool {
        if self.links.is_empty() {
            return false;
        }
        let Some(node) = self.index.get(id) else {
            return false;
        };
        node.path()
            .ancestors()
            .any(|a| self.index.lookup(a).is_some_and(|i| self.links.contains(i)))
    }

    /// The specs that cover the directory `id/name` (at `path`): those
    /// covering directory `id` that do not prune it, and those whose root
    /// it is. With `link` (the entry is a symlink), only those of them that
    /// follow links.
    pub(super) fn child_specs(
        &self,
        id: DirId,
        name: &OsStr,
        path: &Path,
        link: bool,
    ) -> Vec<SpecId> {
        let Some(node) = self.index.get(id) else {
            return Vec::new();
        };
        let wanted = |s: SpecId| !link || self.specs.follows(s);
        let mut out: Vec<SpecId> = node
            .full()
            .iter()
            .copied()
            .filter(|s| wanted(*s) && self.specs.needs(*s, path))
            .collect();
        for p in node.partial() {
            if p.is_root && p.name == name && wanted(p.spec) && !out.contains(&p.spec) {
                out.push(p.spec);
            }
        }
        out
    }

    /// Looks at the symlink entry `id/name` again: follows it if it leads to
    /// a directory (and no loop) for some spec that follows links, drops
    /// what was followed if it no longer does, and replaces what was
    /// followed if it now leads elsewhere. With `report`, what appears or
    /// goes below the link is reported. The link entry itself is not
    /// touched.
    pub(super) fn revalidate_link(&mut self, id: DirId, name: &OsStr, report: bool) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        let path = node.path().join(name);
        let specs = if node.entries().get(name) == Some(FileType::Symlink) {
            self.child_specs(id, name, &path, true)
        } else {
            Vec::new()
        };
        let target = if specs.is_empty() {
            None
        } else {
            fs::link_target(&path)
        };
        let current = self.index.lookup(&path);
        match (current, target) {
            (None, None) => {}
            (Some(c), None) => self.remove_tree(c, report),
            // (A node that lost its watch is replaced even when the
            // identity matches: a new directory may reuse a freed inode.)
            (Some(c), Some(t)) if self.links.target(c) == Some(&t) && !self.unwatched(c) => {
                // The same directory: cover it for specs that arrived since.
                let node = self.index.get(c).expect("live node");
                if specs.iter().any(|s| !node.covers(*s)) {
                    self.add_tree(specs, path, report, Some(t));
                }
            }
            (Some(c), Some(t)) => {
                self.remove_tree(c, report);
                self.add_tree(specs, path, report, Some(t));
            }
            (None, Some(t)) => self.add_tree(specs, path, report, Some(t)),
        }
    }

    /// [`revalidate_link`](Self::revalidate_link) for every symlink entry
    /// of directory `id`, when some spec covering it follows links.
    pub(super) fn revalidate_links_in(&mut self, id: DirId) {
        let Some(node) = self.index.get(id) else {
            return;
        };
        if !node.full().iter().any(|s| self.specs.follows(*s)) {
            return;
        }
        let names: Vec<OsString> = node
            .entries()
            .iter()
            .filter(|(_, t)| *t == FileType::Symlink)
            .map(|(n, _)| n.to_os_string())
            .collect();
        for n in names {
            self.revalidate_link(id, &n, true);
        }
    }

    /// Re-resolves every symlink that spec `sid` follows or could follow
    /// (sync: a link's target can change without an event on the link).
    pub(super) fn revalidate_links_of(&mut self, sid: SpecId) {
        if !self.specs.follows(sid) {
            return;
        }
        for id in self.index.ids() {
            let Some(node) = self.index.get(id) else {
                continue;
            };
            if node.covers(sid) {
                self.revalidate_links_in(id);
                continue;
            }
            let roots: Vec<OsString> = node
                .partial()
                .iter()
                .filter(|p| {
                    p.spec == sid
                        && p.is_root
                        && node.entries().get(&p.name) == Some(FileType::Symlink)
                })
                .map(|p| p.name.clone())
                .collect();
            for n in roots {
                self.revalidate_link(id, &n, true);
            }
        }
    }
}
