//! Waiting for writers (`WatchOptions::write_finished`): what a routed
//! change, a writer's close or a rename tells the specs' holds, and the
//! looks at files whose interval is up. The holds are `holds.rs`'s (the
//! rule, `write_hold.rs`'s). No state of its own.

use std::ffi::OsStr;

use super::Engine;
use crate::backend::Hint;
use crate::batch::change::{ChangeKind, FileType, Meta};
use crate::fs;
use crate::index::DirId;

impl Engine {
    /// A raw change at `id/name` was routed: the specs that wait for
    /// writers note it (a file written, or gone). A directory polled
    /// without an OS watch is looked at by its polls alone.
    pub(super) fn note_write(
        &mut self,
        id: DirId,
        name: &OsStr,
        kind: ChangeKind,
        ft: FileType,
        meta: Option<&Meta>,
    ) {
        let polled = self
            .polled_only(id)
            .then(|| self.wanted(id).1.unwrap_or(self.polls.interval()));
        let Some(node) = self.index.get(id) else {
            return;
        };
        let holding: smallvec::SmallVec<[crate::index::SpecId; 4]> = node
            .concerned(name)
            .filter(|s| self.holds.holds_writes(*s))
            .collect();
        if holding.is_empty() {
            return;
        }
        // A file found by reading a directory (a new one's contents) was
        // not `stat`ed: its look needs a baseline to compare with.
        let stated;
        let meta = match meta {
            None if polled.is_none() && ft == FileType::File && kind != ChangeKind::Removed => {
                stated = fs::lstat(&node.path().join(name))
                    .filter(|(t, _)| *t == FileType::File)
                    .map(|(_, m)| m);
                stated.as_ref()
            }
            m => m,
        };
        let path = node.path().join(name);
        let entry = crate::ignore::Entry::new(&path, node.path(), name);
        for s in holding {
            if kind == ChangeKind::Removed || ft != FileType::File {
                self.holds.not_written(s, &path);
            } else if !self.specs.ignores(s, &entry, false) {
                self.holds.wrote(s, self.now, &path, meta, polled);
            }
        }
    }

    /// `hint` came for `id/name` and was handled: a writer's close, or a
    /// rename that put the file there (written under another name), ends
    /// the wait for it.
    pub(super) fn hinted_write(&mut self, id: DirId, name: &OsStr, hint: Hint) {
        if !matches!(hint, Hint::Closed | Hint::Moved) || !self.holds.any_write_holds() {
            return;
        }
        if let Some(node) = self.index.get(id) {
            self.holds.write_finished(&node.path().join(name));
        }
    }

    /// Looks at the files whose interval is up (an `lstat` each): the
    /// same as at their last change, they are finished.
    pub(super) fn look_at_writes(&mut self) {
        if !self.holds.any_write_holds() {
            return;
        }
        let now = self.clock.now();
        let wall = self.clock.wall();
        for (sid, path) in self.holds.write_looks_due(now, self.specs.open_ids()) {
            let meta = fs::lstat(&path)
                .filter(|(t, _)| *t == FileType::File)
                .map(|(_, m)| m);
            self.holds
                .write_looked(sid, (now, wall), &path, meta.as_ref());
        }
    }
}
